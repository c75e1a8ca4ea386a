"""The command line of :mod:`dlperf_slurm.workloads.train`: its flags, and the checks of their values together
(no torch here: the job's import check and ``--help`` stay light)."""

from __future__ import annotations

import argparse


def parser(description: str) -> argparse.ArgumentParser:
    """The workload's flags (``description``: its ``--help``'s first line)."""
    p = argparse.ArgumentParser(prog="python -m dlperf_slurm.workloads.train", description=description)
    p.add_argument("--model", required=True, choices=("resnet50", "bert-base"))
    p.add_argument("--batch-size", type=int, required=True, help="per device (per rank)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "amp", "fp16", "bf16"))
    p.add_argument("--compile", type=int, default=0, choices=(0, 1), help="torch.compile (the matrix's xla axis)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile backend (default inductor; aot_eager skips code generation, for checks)")
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--measure-steps", type=int, default=100)
    p.add_argument("--tiny", action="store_true", help="small model/input for CPU smoke runs; not a result")
    p.add_argument("--data-location", default="device", choices=("device", "host"),
                   help="device: one synthetic batch made on the device; host: a DataLoader copies batches in")
    p.add_argument("--channels-last", type=int, default=None, choices=(0, 1),
                   help="ResNet memory format; default 1 on GPU, 0 on CPU")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--repeat", type=int, default=0, metavar="R",
                   help="the run's repeat number, from 0 (accuracy runs): repeat R trains from seed + R, so the "
                        "repeats of a cell are runs of different seeds")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    p.add_argument("--workers", type=int, default=None,
                   help="DataLoader workers for --data-location host (default: 4 on GPU, capped by CPUs; 0 on CPU)")
    p.add_argument("--image-size", type=int, default=None, help="ResNet input size (default 224; tiny 32)")
    p.add_argument("--num-classes", type=int, default=None,
                   help="ResNet's classifier width (default 1000; tiny 10): its memory grows with it")
    p.add_argument("--seq-len", type=int, default=None, help="BERT sequence length (default 128; tiny 32)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the model's recipe)")
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    p.add_argument("--nan-at-step", type=int, default=0, metavar="K",
                   help="make the loss NaN on purpose from step K on (0: off); the run goes on, exits 0 and is "
                        "NONFINITE: a test of that path, never a result")
    p.add_argument("--ceiling", type=int, default=1, choices=(0, 1),
                   help="rank 0 reads (or measures once per campaign) the device's matmul ceiling, for MFU against "
                        "what the device really does (dlperf_slurm.probes.ceiling; needs DLPERF_CAMPAIGN_DIR)")
    p.add_argument("--hang-at-step", type=int, default=0, metavar="K",
                   help="every rank stops making progress at step K (0: off), as a stuck collective would: a test "
                        "of the hang watchdog, never a result")
    p.add_argument("--epochs", type=int, default=0,
                   help="accuracy run: train this many epochs of --dataset, evaluating after each (0: a throughput "
                        "run of --warmup-steps + --measure-steps synthetic steps)")
    p.add_argument("--dataset", default="synthetic", choices=("synthetic", "digits"),
                   help="digits: scikit-learn's handwritten digits, a real dataset with a held-out set (ResNet-50)")
    p.add_argument("--target", default=None, metavar="METRIC:VALUE",
                   help="accuracy run: stop at the first evaluation whose top1 or top5 reaches VALUE (a fraction)")
    return p


def check(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The flags' values together (``p.error`` exits); ``args.target_pair``: --target's (metric, value) or None."""
    args.target_pair = None
    if args.target:
        metric, _, value = args.target.partition(":")
        try:
            args.target_pair = (metric, float(value))
        except ValueError:
            p.error(f"--target {args.target!r}: expected top1:0.75 or top5:0.9")
        if metric not in ("top1", "top5") or not 0 < args.target_pair[1] <= 1:
            p.error(f"--target {args.target!r}: expected top1:0.75 or top5:0.9 (a fraction in (0, 1])")
    if args.repeat < 0:
        p.error(f"--repeat {args.repeat}: expected a repeat number >= 0")
    if args.epochs < 0:
        p.error("--epochs must be >= 0 (0: a throughput run)")
    if args.epochs and args.dataset == "synthetic":
        p.error("--epochs needs a real dataset: --dataset digits")
    if args.dataset != "synthetic" and args.model != "resnet50":
        p.error(f"--dataset {args.dataset}: only ResNet-50 trains on it")
    for name in ("batch_size", "measure_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup_steps < 0:
        p.error("--warmup-steps must be >= 0")
    if args.nan_at_step < 0:
        p.error("--nan-at-step must be >= 0 (0: off)")
    if args.hang_at_step < 0:
        p.error("--hang-at-step must be >= 0 (0: off)")
