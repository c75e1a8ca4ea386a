"""Cost of the pytorch-ddp harness: our ResNet-50 training loop vs. a plain hand-written loop.

Both train the full-size ResNet-50 v1.5 on CPU at the same batch, input size and thread count, on one fixed
synthetic batch, with the same loss and optimizer. The harness side is the real code path
(``dlperf_slurm.workloads.train.main``, stdout captured); its s/step is the summary's latency. The two alternate
(harness, plain, harness, ...) so machine drift hits both. A second, noise-free figure times the harness's own
per-step work (sync, clock, loss read-back, one JSON line) in isolation.

``--clock cpu`` (default) swaps ``time.time`` for ``time.process_time`` in both loops, so other jobs on a shared
box (which stretch wall time by tens of percent) do not drown the difference; ``--clock wall`` measures wall time.

    python bench/bench_workload.py [--batch-size 2] [--image-size 224] [--threads 1] [--steps 10] [--repeats 5]
                                   [--clock cpu|wall]
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

from dlperf_slurm import events as ev  # noqa: E402
from dlperf_slurm.workloads import train  # noqa: E402
from dlperf_slurm.workloads.resnet import resnet50  # noqa: E402


def harness_step_seconds(args: argparse.Namespace) -> float:
    argv = ["--model", "resnet50", "--batch-size", str(args.batch_size), "--image-size", str(args.image_size),
            "--warmup-steps", str(args.warmup), "--measure-steps", str(args.steps), "--threads", str(args.threads),
            "--device", "cpu"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert train.main(argv) == 0
    summary = [e for e in map(ev.parse_line, out.getvalue().splitlines()) if e and e[ev.EVENT] == ev.EV_SUMMARY]
    return summary[0][ev.LATENCY_MS] / 1000.0


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


def interleaved_ratio(args: argparse.Namespace) -> tuple[float, float, float]:
    """Finer A/B: the harness's own step and loop (``workload.make_step`` + ``loop.timed_loop`` emitting to
    /dev/null) and the plain loop, on two identical models, alternating in blocks of ``--block`` steps so drift
    hits both alike. Returns (harness s/step, plain s/step, median of the per-block-pair ratios)."""
    from dlperf_slurm.workloads.loop import timed_loop
    from dlperf_slurm.workloads.workload import WorkloadConfig, build, make_step

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = WorkloadConfig(model="resnet50", tiny=False, batch_size=args.batch_size, precision="fp32",
                         device=torch.device("cpu"), channels_last=False, data_location="device", workers=0,
                         seed=0, total_steps=0, image_size=args.image_size)
    work = build(cfg)
    harness_step = make_step(work, work.model, "fp32", cfg.device)
    torch.manual_seed(0)
    model = resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=0.256 * args.batch_size / 256, momentum=0.875,
                          weight_decay=3.0517578125e-05)
    x, y = work.next_batch()

    def plain_step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y, label_smoothing=0.1).backward()
        opt.step()

    sink = open(os.devnull, "w")  # noqa: SIM115
    log = lambda event, **f: ev.emit(event, stream=sink, **f)  # noqa: E731
    for _ in range(args.warmup):
        harness_step()
        plain_step()
    h_times, p_times = [], []
    for _ in range(args.blocks):
        res = timed_loop(harness_step, args.block, 0, args.batch_size, rank0=True, log=log,
                         loss_value=lambda t: float(t.item()))
        h_times.append((res.times[-1] - res.times[0]) / args.block)
        t0 = time.time()
        for _ in range(args.block):
            plain_step()
        p_times.append((time.time() - t0) / args.block)
    sink.close()
    ratios = [a / b for a, b in zip(h_times, p_times, strict=True)]
    return statistics.median(h_times), statistics.median(p_times), statistics.median(ratios)


def bookkeeping_seconds(n: int = 2000) -> float:
    """Per-step cost of what the harness adds around a step on CPU: clock, loss.item(), one flushed line."""
    loss = torch.tensor(2.5)
    sink = open(os.devnull, "w")  # noqa: SIM115
    t0 = time.perf_counter()
    prev = time.time()
    for k in range(n):
        now = time.time()
        value = float(loss.item())
        ev.emit(ev.EV_STEP, stream=sink, **{ev.STEP: k, ev.TIME: now, ev.SAMPLES: 4, ev.LOSS: value,
                                            ev.STEP_TIME: now - prev, ev.THROUGHPUT: 4.0, ev.TINY: False})
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
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    p.add_argument("--blocks", type=int, default=15, help="interleaved A/B: number of block pairs")
    p.add_argument("--block", type=int, default=2, help="interleaved A/B: steps per block")
    args = p.parse_args()
    if args.clock == "cpu":  # both loops read time.time(); make it this process's CPU time
        time.time = time.process_time
    for key in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        os.environ.pop(key, None)

    harness, plain = [], []
    for r in range(args.repeats):
        harness.append(harness_step_seconds(args))
        plain.append(plain_step_seconds(args))
        print(f"repeat {r + 1}: harness {harness[-1]:.4f} s/step   plain {plain[-1]:.4f} s/step", flush=True)
    h, pl = statistics.median(harness), statistics.median(plain)
    paired = statistics.median(a / b for a, b in zip(harness, plain, strict=True))
    ih, ip, iratio = interleaved_ratio(args)
    print(f"interleaved blocks: harness {ih:.4f} s/step   plain {ip:.4f} s/step   median block ratio {iratio:.4f}",
          flush=True)
    book = bookkeeping_seconds()
    result = {
        "config": {"model": "resnet50 (full size)", "device": "cpu", "batch_size": args.batch_size,
                   "image_size": args.image_size, "threads": args.threads, "warmup": args.warmup,
                   "steps": args.steps, "repeats": args.repeats, "clock": args.clock, "torch": torch.__version__},
        "harness_s_per_step_median": round(h, 5), "plain_s_per_step_median": round(pl, 5),
        "ratio_of_medians": round(h / pl, 4), "median_paired_ratio": round(paired, 4),
        "interleaved": {"harness_s_per_step": round(ih, 5), "plain_s_per_step": round(ip, 5),
                        "median_block_ratio": round(iratio, 4), "blocks": args.blocks, "steps_per_block": args.block},
        "harness_spread": [round(min(harness), 4), round(max(harness), 4)],
        "plain_spread": [round(min(plain), 4), round(max(plain), 4)],
        "bookkeeping_us_per_step": round(book * 1e6, 1),
        "bookkeeping_fraction_of_step": round(book / pl, 6),
    }
    print(json.dumps(result, indent=2))
    print(f"whole runs: harness/plain = {h / pl:.4f} (median paired {paired:.4f}); interleaved blocks: {iratio:.4f}; "
          f"harness bookkeeping alone {book * 1e6:.1f} us/step = {100 * book / pl:.4f}% of a step "
          f"(budget: 2%; run-to-run noise on a shared box is larger than that, see the spreads)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
