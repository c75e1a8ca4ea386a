"""Cost of the pytorch-ddp harness: our ResNet-50 training loop vs. a plain hand-written loop.

Both train the full-size ResNet-50 v1.5 on CPU at the same batch, input size and thread count, on one fixed
synthetic batch, with the same loss and optimizer. The harness side is the real code path
(``dlperf_slurm.workloads.train.main``, stdout captured); its s/step is the summary's latency. The two alternate
(harness, plain, harness, ...) so machine drift hits both. A second, noise-free figure times the harness's own
per-step work (sync, clock, loss read-back, one JSON line) in isolation.

    python bench/bench_workload.py [--batch-size 2] [--image-size 224] [--threads 1] [--steps 10] [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from dlperf_slurm.workloads import dlperf_log, train  # noqa: E402
from dlperf_slurm.workloads.resnet import resnet50  # noqa: E402


def harness_step_seconds(args: argparse.Namespace) -> float:
    argv = ["--model", "resnet50", "--batch-size", str(args.batch_size), "--image-size", str(args.image_size),
            "--warmup-steps", str(args.warmup), "--measure-steps", str(args.steps), "--threads", str(args.threads),
            "--device", "cpu"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert train.main(argv) == 0
    summary = [e for e in map(dlperf_log.parse_line, out.getvalue().splitlines()) if e and e["event"] == "summary"]
    return summary[0]["latency_ms"] / 1000.0


def plain_step_seconds(args: argparse.Namespace) -> float:
    """The same model, data, loss and optimizer in the simplest loop one would write by hand."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=0.256 * args.batch_size / 256, momentum=0.875,
                          weight_decay=3.0517578125e-05)
    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    y = torch.randint(0, 1000, (args.batch_size,))
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            start = time.time()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
    return (time.time() - start) / args.steps


def bookkeeping_seconds(n: int = 2000) -> float:
    """Per-step cost of what the harness adds around a step on CPU: clock, loss.item(), one flushed line."""
    loss = torch.tensor(2.5)
    sink = open(os.devnull, "w")  # noqa: SIM115
    t0 = time.perf_counter()
    prev = time.time()
    for k in range(n):
        now = time.time()
        value = float(loss.item())
        dlperf_log.emit("step", stream=sink, step=k, time=now, samples=4, loss=value, step_time=now - prev,
                        throughput=4.0, tiny=False)
        prev = now
    sink.close()
    return (time.perf_counter() - t0) / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    for key in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        os.environ.pop(key, None)

    harness, plain = [], []
    for r in range(args.repeats):
        harness.append(harness_step_seconds(args))
        plain.append(plain_step_seconds(args))
        print(f"repeat {r + 1}: harness {harness[-1]:.4f} s/step   plain {plain[-1]:.4f} s/step", flush=True)
    h, pl = statistics.median(harness), statistics.median(plain)
    paired = statistics.median(a / b for a, b in zip(harness, plain, strict=True))
    book = bookkeeping_seconds()
    result = {
        "config": {"model": "resnet50 (full size)", "device": "cpu", "batch_size": args.batch_size,
                   "image_size": args.image_size, "threads": args.threads, "warmup": args.warmup,
                   "steps": args.steps, "repeats": args.repeats, "torch": torch.__version__},
        "harness_s_per_step_median": round(h, 5), "plain_s_per_step_median": round(pl, 5),
        "ratio_of_medians": round(h / pl, 4), "median_paired_ratio": round(paired, 4),
        "harness_spread": [round(min(harness), 4), round(max(harness), 4)],
        "plain_spread": [round(min(plain), 4), round(max(plain), 4)],
        "bookkeeping_us_per_step": round(book * 1e6, 1),
        "bookkeeping_fraction_of_step": round(book / pl, 6),
    }
    print(json.dumps(result, indent=2))
    verdict = "under" if h / pl < 1.02 else "NOT under"
    print(f"harness/plain = {h / pl:.4f} (paired {paired:.4f}): {verdict} the 2% budget; "
          f"harness bookkeeping alone {book * 1e6:.1f} us/step = {100 * book / pl:.4f}% of a step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
