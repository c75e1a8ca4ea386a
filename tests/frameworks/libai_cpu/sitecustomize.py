"""The one thing the LiBai test changes under LiBai, stated here: OneFlow 0.9.0 (PyPI's newest wheel) has no CPU
``layer_norm`` kernel. Its ``layer_norm_cpu_kernel.cpp`` is ``LOG(FATAL) << "TODO"``: ``flow._C.layer_norm_affine``
on a CPU tensor aborts the process (``F... layer_norm_cpu_kernel.cpp:28] TODO``), eagerly and in graph mode. OneFlow's
own ``oneflow.nn.functional.layer_norm`` avoids that kernel on CPU (it composes mean / var / rsqrt there), but LiBai's
``libai/layers/layer_norm.py`` calls ``flow._C.layer_norm_affine`` directly (every LiBai commit does), so without
this LiBai cannot train any model on CPU with OneFlow 0.9.0.

On ``PYTHONPATH`` (tests/test_oneflow_gpt_slurm.py puts this folder there, nothing else does) Python imports this
module at start-up; when ``oneflow`` 0.9.0 is imported, ``flow._C.layer_norm_affine`` and ``flow._C.layer_norm`` on
CPU tensors (local, or global with a CPU placement) go to OneFlow's own CPU composition
(``oneflow.nn.modules.normalization.layer_norm``, what ``flow.nn.LayerNorm`` runs on CPU); CUDA tensors and every
other OneFlow version are left alone. Everything else (LiBai's model, trainer, graph compilation, data pipeline,
logging, OneFlow's launcher and collectives) runs as shipped.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

PATCHED_VERSION = "0.9.0"


def _on_cpu(x) -> bool:
    return (x.placement.type == "cpu") if x.is_global else (x.device.type == "cpu")


def patch(flow) -> bool:
    """Route CPU layer norms to OneFlow's composition (OneFlow 0.9.0 only); whether it patched."""
    if getattr(flow, "__version__", None) != PATCHED_VERSION or getattr(flow._C, "_dlperf_cpu_layer_norm", False):
        return False
    from oneflow.nn.modules.normalization import layer_norm as composed

    affine, plain = flow._C.layer_norm_affine, flow._C.layer_norm

    def layer_norm_affine(x, weight, bias, begin_norm_axis, begin_params_axis, epsilon):
        if _on_cpu(x):
            return composed(x, tuple(x.shape[begin_norm_axis:]), weight, bias, epsilon)
        return affine(x, weight, bias, begin_norm_axis=begin_norm_axis, begin_params_axis=begin_params_axis,
                      epsilon=epsilon)

    def layer_norm(x, begin_norm_axis, begin_params_axis, epsilon):
        if _on_cpu(x):
            return composed(x, tuple(x.shape[begin_norm_axis:]), None, None, epsilon)
        return plain(x, begin_norm_axis=begin_norm_axis, begin_params_axis=begin_params_axis, epsilon=epsilon)

    flow._C.layer_norm_affine, flow._C.layer_norm = layer_norm_affine, layer_norm
    flow._C._dlperf_cpu_layer_norm = True
    return True


class _AfterOneFlowImport(importlib.abc.MetaPathFinder):
    """Patches ``oneflow`` right after its first import (nothing is imported before a program asks for it)."""

    def find_spec(self, name, path, target=None):
        if name != "oneflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterOneFlowImport())
