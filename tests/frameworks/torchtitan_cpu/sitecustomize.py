"""What the torchtitan test changes under torchtitan 0.3.0 to train on this project's CPU-only test bed, stated here
(/work/shared/llm-programs-on-cpu.md section 1 found each blocker in turn). A test-bed stand-in only: on
``PYTHONPATH`` of tests/test_torchtitan_slurm.py's jobs (nothing else puts this folder there), never in what a user's
job runs. Python imports this module at start-up; it does nothing until a program imports ``torchtitan``, then,
before torchtitan's own modules load:

1. the device type is ``cpu`` (torchtitan's ``device_type = _get_available_device_type() or "cuda"`` falls back to
   CUDA on a CPU-only torch): torchtitan then takes ``torch.cpu`` as its device module and gloo as its backend;
2. ``torch.cpu`` gets the memory calls torchtitan's ``DeviceMemoryMonitor`` makes of a GPU (``get_device_name``,
   ``get_device_properties().total_memory``, ``memory_stats``, ``reset_peak_memory_stats``, ``empty_cache``):
   **its "reserved" memory is this process's peak resident set** (``ru_maxrss``), so the ``memory:`` field of the
   step lines is a CPU stand-in, never a GPU's figure;
3. ``torch.cpu.current_device()`` is 0 (torchtitan's ``barrier(device_ids=[current_device()])`` wants an int);
4. FlexAttention runs its eager path on CPU, forward and backward (torch refuses its CPU backward, and its compiled
   path needs inductor);
5. FSDP2 reduces gradients with a plain SUM on gloo, which has no ``PREMUL_SUM``: torchtitan sets a divide factor of
   1.0, so the sum is the same arithmetic;
6. ``torch.distributed.set_timeout``, which torchtitan 0.3.0 calls and torch 2.13 lacks, is torch's own private
   ``distributed_c10d._set_pg_timeout``.

Everything else (torchtitan's trainer, model, FSDP2/tensor-parallel wrapping, data loader, tokenizer, metrics and
logging, torchrun and the gloo collectives) runs as shipped.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys


def _patch_torch() -> None:
    import resource
    import types

    import torch
    import torch.distributed as dist

    torch._utils._get_available_device_type = lambda: "cpu"  # 1
    cpu = torch.cpu

    def peak_bytes() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def total() -> int:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    cpu.get_device_name = lambda *a, **k: "CPU"  # 2
    cpu.get_device_properties = lambda *a, **k: types.SimpleNamespace(total_memory=total(), name="CPU")
    cpu.memory_stats = lambda *a, **k: {"active_bytes.all.peak": peak_bytes(), "reserved_bytes.all.peak": peak_bytes(),
                                        "num_alloc_retries": 0, "num_ooms": 0}
    cpu.reset_peak_memory_stats = lambda *a, **k: None
    cpu.empty_cache = lambda *a, **k: None
    cpu.current_device = lambda: 0  # 3
    if not hasattr(dist, "set_timeout"):  # 6
        from torch.distributed import distributed_c10d

        dist.set_timeout = distributed_c10d._set_pg_timeout


def _patch_flex_and_fsdp() -> None:
    import torch.nn.attention.flex_attention as fa
    from torch.distributed.fsdp import FSDPModule

    fa._validate_device = lambda *a, **k: None  # 4
    from torchtitan.models.common import attention

    flex = getattr(attention, "FlexAttention", None)
    if flex is not None:
        flex._compiled_flex_attn = staticmethod(fa.flex_attention)
    divide = FSDPModule.set_gradient_divide_factor

    def set_gradient_divide_factor(self, factor):  # 5
        divide(self, factor)
        self.set_force_sum_reduction_for_comms(True)

    FSDPModule.set_gradient_divide_factor = set_gradient_divide_factor


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``before`` when module ``name`` is first looked up and ``after`` once it has loaded (then leaves
    ``sys.meta_path``): nothing is imported before a program asks for it."""

    def __init__(self, name, before=None, after=None):
        self.name, self.before, self.after = name, before, after

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        if self.before is not None:
            self.before()
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or self.after is None:
            return spec
        run, after = spec.loader.exec_module, self.after

        def exec_module(module):
            run(module)
            after()

        spec.loader.exec_module = exec_module
        return spec


# torch before torchtitan's own modules load; its attention and FSDP once its attention module has loaded
sys.meta_path.insert(0, _AfterImport("torchtitan", before=_patch_torch, after=lambda: sys.meta_path.insert(
    0, _AfterImport("torchtitan.models.common.attention", after=_patch_flex_and_fsdp))))
