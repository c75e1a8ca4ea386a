"""Run OneFlow-Inc/models' real ``wide_and_deep/train.py`` (vendored unchanged beside this file: wide_and_deep/SOURCE.md)
on the CPU: ``python wdl_on_cpu.py TRAIN.PY-FLAGS...``.

The program names its device as the string ``"cuda"`` in 23 places (``tensor.to("cuda")``, ``module.to("cuda")``,
``flow.env.all_device_placement("cuda")``) and has no device flag. OneFlow 0.9.0's PyPI wheel is a CUDA build that
runs on the CPU when no GPU is there, but a tensor sent to "cuda" then fails. This shim changes nothing in the
program's files: before running train.py (as ``__main__``, with its own folder first on sys.path, as ``python
train.py`` would), it makes those three OneFlow entry points read a device "cuda" (or "cuda:N") as "cpu". Every
other line (argparse, the OFRecord reader, the model, nn.Graph with its sparse optimizer, the logger that prints
``[rank:0] iter: N/M, loss: ..., latency(ms): ... | stamp``) is upstream's.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import oneflow as flow

TRAIN = Path(__file__).resolve().parent / "wide_and_deep" / "train.py"


def _cpu(device):
    if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        return "cpu"
    return device


def _mapped(method):
    def to(self, *args, **kwargs):
        if args:
            args = (_cpu(args[0]), *args[1:])
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return method(self, *args, **kwargs)

    return to


def main() -> None:
    flow.Tensor.to = _mapped(flow.Tensor.to)
    flow.nn.Module.to = _mapped(flow.nn.Module.to)
    placement = flow.env.all_device_placement
    flow.env.all_device_placement = lambda device_type: placement(_cpu(device_type))
    sys.argv[0] = str(TRAIN)
    sys.path.insert(0, str(TRAIN.parent))
    runpy.run_path(str(TRAIN), run_name="__main__")


if __name__ == "__main__":
    main()
