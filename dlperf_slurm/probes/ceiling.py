"""The measured matmul ceiling (what ML engineers call MAMF, maximum achievable matmul FLOPS): the best
TFLOP/s of ``C = A @ B`` over a short sweep of large square shapes, on the campaign's own device, in the
campaign's precision. MFU against it says how much of what the device really does a workload reaches, where a
datasheet peak can be unreachable (H100 SXM bf16: about 790 measured against 989 on paper) or wrong.

Measured once per device model and precision per campaign: the first run that needs it measures and writes
``<campaign>/.ceiling/<device>.<precision>.json`` (under a lock, atomically); every later run reads it. On a CPU
it measures the CPU's matmul rate (the tests' case). Torch is imported only when measuring.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Callable

FOLDER = ".ceiling"
GPU_SIZES = (4096, 6144, 8192, 12288)
CPU_SIZES = (256, 512, 768, 1024)
# the matmul dtype a run's precision uses: AMP's autocast runs matmuls in fp16; fp32 matmuls may use TF32
DTYPES = {"fp32": "float32", "amp": "float16", "fp16": "float16", "bf16": "bfloat16"}


#: precisions whose matmuls run on FP8 tensor cores: measured with torch._scaled_mm on float8_e4m3fn operands (one
#: scale a tensor, bfloat16 out), apart from the 16-bit ceiling (H100 SXM: about twice it on paper)
FP8 = ("fp8",)


def measure(precision: str, device: str, sizes: tuple[int, ...] | None = None, reps: int = 10,
            budget_s: float = 20.0) -> dict[str, Any]:
    """Best achieved TFLOP/s over ``sizes`` (warm-up excluded); stops adding shapes after ``budget_s``. ValueError for
    a precision whose matmul this device cannot run or this probe does not measure (FP8 before SM89; MXFP8, NVFP4)."""
    import torch

    cuda = device == "cuda"
    if precision in ("mxfp8", "nvfp4"):
        raise ValueError(f"no {precision} matmul ceiling is measured (block-scaled matmuls: not in this probe)")
    fp8 = precision in FP8
    dtype = torch.float8_e4m3fn if fp8 else getattr(torch, DTYPES.get(precision, "float32"))
    if not cuda and dtype == torch.float16:
        dtype = torch.bfloat16 if precision != "fp16" else torch.float32  # CPUs have no fast fp16 matmul
    if fp8 and cuda and torch.cuda.get_device_capability() < (8, 9):
        raise ValueError(f"no FP8 matmul on {torch.cuda.get_device_name()} (compute capability "
                         f"{'.'.join(map(str, torch.cuda.get_device_capability()))}; FP8 needs 8.9+)")
    sizes = sizes or (GPU_SIZES if cuda else CPU_SIZES)
    best, best_n, t_start = 0.0, 0, time.perf_counter()
    for n in sizes:
        matmul = _matmul(torch, n, device, dtype)
        for _ in range(2):
            matmul()
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            matmul()
        if cuda:
            torch.cuda.synchronize()
        tflops = 2.0 * n ** 3 * reps / (time.perf_counter() - t0) / 1e12
        if tflops > best:
            best, best_n = tflops, n
        del matmul
        if time.perf_counter() - t_start > budget_s:
            break
    tf32 = bool(cuda and dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32)
    return {"tflops": best, "shape": best_n, "dtype": str(dtype).replace("torch.", "") + ("+tf32" if tf32 else ""),
            "sizes": list(sizes), "reps": reps, "measured_at": time.time()}


def _matmul(torch: Any, n: int, device: str, dtype: Any) -> Callable[[], Any]:
    """``C = A @ B`` of two n x n operands of ``dtype``: for float8, ``torch._scaled_mm`` as FP8 training runs it (A
    row-major, B column-major, per-tensor scales of 1, bfloat16 out)."""
    if dtype == torch.float8_e4m3fn:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype).t()  # column-major: what _scaled_mm takes as its B
        one = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return lambda: a @ b


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "device"


def for_campaign(campaign_dir: str | os.PathLike, device_name: str, precision: str, device: str,
                 measure_fn: Callable[..., dict[str, Any]] = measure) -> dict[str, Any]:
    """The campaign's ceiling for this device model and precision: read, or measured once and kept."""
    folder = Path(campaign_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_slug(device_name)}.{_slug(precision)}.json"
    with open(folder / ".lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one run measures; the others wait for its figure
        except OSError:
            pass  # a file system without locks: at worst two runs measure, the last write wins
        if path.exists():
            try:
                return dict(json.loads(path.read_text()), cached=True)
            except ValueError:
                pass  # a torn file from a killed writer (writes are atomic, so only by hand): measure again
        result = dict(measure_fn(precision, device), device_name=device_name, precision=precision)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, path)
        return dict(result, cached=False)


def kept(campaign_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Every ceiling the campaign's runs measured (``<campaign>/.ceiling/*.json``: device name, precision, TFLOP/s,
    dtype), those that read; [] for a campaign that measured none."""
    out = []
    for path in sorted((Path(campaign_dir) / FOLDER).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a torn or unreadable file: no figure from it
        if isinstance(doc, dict) and isinstance(doc.get("tflops"), (int, float)) and doc.get("device_name"):
            out.append(doc)
    return out
