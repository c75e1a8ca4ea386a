"""Run one of OneFlow-Inc/models' real training programs on the CPU, its files unchanged:
``python models_on_cpu.py PROGRAM.py FLAGS...`` (as ``python PROGRAM.py FLAGS...`` would, its own folder first on
sys.path), or ``python models_on_cpu.py FLAGS...`` with PROGRAM.py in ``$DLPERF_TEST_PROGRAM`` (where a suite gives
the script's flags only: an accuracy run of oneflow/resnet50, tests/test_oneflow_accuracy.py).

The programs name their device as the string ``"cuda"`` (``tensor.to("cuda")``, ``module.to("cuda")``,
``flow.env.all_device_placement("cuda")``, ``flow.randint(..., device="cuda")``) and have no device flag. OneFlow
0.9.0's PyPI wheel runs on the CPU when no GPU is there, but a tensor sent to "cuda" then fails. Before running the
program this shim makes those OneFlow entry points read a device "cuda" (or "cuda:N") as "cpu"; every other line
(argparse, the data loader, the model, the logger that prints the training lines) is upstream's.
(wdl_on_cpu.py is the same shim for the vendored wide_and_deep/train.py.)
"""

from __future__ import annotations

import functools
import os
import runpy
import sys
from pathlib import Path

import oneflow as flow


def _cpu(device):
    if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        return "cpu"
    return device


def _mapped(method):
    @functools.wraps(method)
    def to(self, *args, **kwargs):
        if args:
            args = (_cpu(args[0]), *args[1:])
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return method(self, *args, **kwargs)

    return to


def _device_kw(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return fn(*args, **kwargs)

    return call


def main() -> None:
    named = len(sys.argv) > 1 and not sys.argv[1].startswith("-")
    program = Path(sys.argv[1] if named else os.environ["DLPERF_TEST_PROGRAM"]).resolve()
    flags = sys.argv[2:] if named else sys.argv[1:]
    flow.Tensor.to = _mapped(flow.Tensor.to)
    flow.nn.Module.to = _mapped(flow.nn.Module.to)
    placement = flow.env.all_device_placement
    flow.env.all_device_placement = lambda device_type: placement(_cpu(device_type))
    for name in ("randint", "randn", "rand", "zeros", "ones", "tensor", "arange", "full", "empty"):
        setattr(flow, name, _device_kw(getattr(flow, name)))
    sys.argv = [str(program), *flags]
    sys.path.insert(0, str(program.parent))
    runpy.run_path(str(program), run_name="__main__")


if __name__ == "__main__":
    main()
