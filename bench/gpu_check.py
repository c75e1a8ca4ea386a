"""What only a GPU can show, in one run: the matmul ceiling (best achieved TFLOP/s over a sweep of large
shapes, per precision) and the built-in workloads' throughput, NVML memory and MFU, each run through the
same entry point the ``pytorch-ddp`` suite launches, its log parsed by the suite's own parser.

    python bench/gpu_check.py [--out DIR] [--quick]

Prints one table; writes each workload's log under ``--out``. Compare with docs/workloads.md (NVIDIA's
published figures for the same models)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CASES = [  # (model, precision, batch per GPU, compile)
    ("resnet50", "amp", 256, 0),
    ("resnet50", "fp32", 256, 0),
    ("resnet50", "amp", 256, 1),
    ("bert-base", "amp", 96, 0),
    ("bert-base", "fp32", 48, 0),
]


def matmul_ceiling(precision: str, sizes=(4096, 6144, 8192, 12288), reps: int = 20) -> tuple[float | None, int, str]:
    """Best achieved TFLOP/s of C = A @ B over square shapes: the probe a campaign's runs measure
    (dlperf_slurm.probes.ceiling), here for bf16, fp16, tf32, fp32 and fp8 (torch._scaled_mm, measured apart from
    the 16-bit ceiling); (None, 0, why) where the GPU has no such matmul."""
    import torch

    from dlperf_slurm.probes import ceiling

    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        got = ceiling.measure("fp32" if precision == "tf32" else precision, "cuda", sizes=sizes, reps=reps,
                              budget_s=120.0)
    except ValueError as err:
        return None, 0, str(err)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    return got["tflops"], got["shape"], got["dtype"]


def run_workload(model: str, precision: str, batch: int, compile_: int, warmup: int, measure: int,
                 out: Path) -> dict:
    from dlperf_slurm.model.cell import Cell
    from dlperf_slurm.outcome import evidence

    log = out / f"{model}_{precision}_b{batch}_c{compile_}.log"
    argv = [sys.executable, "-m", "dlperf_slurm.workloads.train", "--model", model, "--batch-size", str(batch),
            "--precision", precision, "--compile", str(compile_), "--warmup-steps", str(warmup),
            "--measure-steps", str(measure)]
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=REPO).returncode
    cell = Cell(suite=f"pytorch-ddp/{model}", model=model, framework="pytorch", nodes=1, gpus_per_node=1,
                batch_size=batch, precision=precision, xla=bool(compile_), launcher="torchrun")
    res = evidence.read_log(cell, log, warmup_steps=warmup, measure_steps=measure)
    return {"rc": rc, "wall_s": time.time() - t0, "res": res, "log": log}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gpu-check")
    ap.add_argument("--quick", action="store_true", help="fewer steps (a smoke check of this script)")
    args = ap.parse_args()
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(0)
    print(f"GPU: {name}; torch {torch.__version__}; CUDA {torch.version.cuda}")
    print("\nmatmul ceiling (best of square shapes 4096..12288, 20 reps each):")
    ceilings = {}
    for prec in ("bf16", "fp16", "tf32", "fp32", "fp8"):
        tf, n, what = matmul_ceiling(prec)
        ceilings[prec] = tf
        print(f"  {prec:5s} {tf:8.1f} TFLOP/s  (at n={n}, {what})" if tf else f"  {prec:5s}  not measured: {what}")
    warmup, measure = (5, 20) if args.quick else (20, 100)
    print(f"\nbuilt-in workloads, 1 GPU, synthetic data on the device, window {warmup}+{measure} steps:")
    print(f"  {'model':10s} {'prec':5s} {'bs':>4s} {'compile':>7s} {'status':10s} {'samples/s':>10s} "
          f"{'ms/iter':>8s} {'NVML MiB':>9s} {'alloc MiB':>9s} {'TFLOP/s':>8s} {'of ceiling':>10s}")
    for model, prec, batch, comp in CASES:
        r = run_workload(model, prec, batch, comp, warmup, measure, out)
        res = r["res"]
        fps = res.extra.get("flops_per_sample")
        tf = res.throughput * fps / 1e12 if (fps and res.throughput) else None  # training FLOPs (3x forward)
        ceil = ceilings["bf16" if prec in ("amp", "bf16") else "tf32" if prec == "tf32" else "fp32"]
        cells = [f"{res.throughput:10.1f}" if res.throughput else f"{'-':>10s}",
                 f"{res.latency_ms:8.1f}" if res.latency_ms else f"{'-':>8s}",
                 f"{res.mem_peak_mib:9.0f}" if res.mem_peak_mib else f"{'-':>9s}",
                 f"{res.mem_allocator_mib:9.0f}" if res.mem_allocator_mib else f"{'-':>9s}",
                 f"{tf:8.1f}" if tf else f"{'-':>8s}", f"{100 * tf / ceil:9.1f}%" if tf and ceil else f"{'-':>10s}"]
        print(f"  {model:10s} {prec:5s} {batch:4d} {comp:7d} {res.status:10s} " + " ".join(cells)
              + (f"   ({res.reason[:80]})" if res.reason else "") + f"  [{r['wall_s']:.0f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
