"""Cost of the health gate: the same built-in workload job with the gate and without it, side by side.

Each round submits one job with ``[health] enabled = true``, one with ``enabled = false`` and one with the gate off
and ``[measure] hang_timeout = 0`` (no hang watchdog, no heartbeat): the same cell, the same window, one after the
other, so machine drift hits all three; it waits for each. Per job it reads the job
script's own clock: from its provenance line (the script's start) to its exit marker's end, and for the gated job
the gate's own ``seconds`` from its ``:::DLPERF health`` line. It prints the medians: seconds the gate adds per
job, and that as a share of the job without it.

On the Slurm test cluster (default when ``sbatch`` answers) the cell is 2x1: the gate's all-reduce spans n1 and n2
(gloo). With ``--executor local`` the cell is 1x2 on this machine. The tiny ResNet-50 by default (a short job:
the worst case for the gate's share); ``--full`` for the full-size model at batch 2 per rank.

    python bench/bench_health.py [--executor slurm|local] [--rounds 3] [--warmup-steps 20] [--measure-steps 100]
                                 [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dlperf_slurm import events as ev  # noqa: E402
from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402
from dlperf_slurm.outcome import evidence  # noqa: E402

MATRIX = """suite = "pytorch-ddp/resnet50"
name = "{name}"
[axes]
devices = ["{devices}"]
batch_size = [2]
[options]
tiny = {tiny}
threads = 1
[measure]
repeats = 1
warmup_steps = {warmup}
measure_steps = {measure}
hang_timeout = {hang}
[slurm]
time = "00:15:00"
gpu_request = "none"
[environment.env]
GLOO_SOCKET_IFNAME = "lo"
OMP_NUM_THREADS = "1"
[health]
enabled = {enabled}
"""


def one_job(root: Path, name: str, args: argparse.Namespace, enabled: bool, watchdog: bool = True) -> dict:
    mx = root / f"{name}.toml"
    mx.write_text(MATRIX.format(name=name, devices=args.devices, warmup=args.warmup_steps, measure=args.measure_steps,
                                enabled=str(enabled).lower(), tiny=str(not args.full).lower(),
                                hang=900 if watchdog else 0))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm", "--logs", str(root / "logs"), "submit", str(mx),
                        "--executor", args.executor, "--no-site", "--wait"], capture_output=True, text=True, env=env)
    (run,) = manifest.load_manifest(root / "logs" / name)
    if p.returncode != 0 or run.status != Status.OK:
        raise SystemExit(f"{name}: {run.status} {run.reason}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    start = evidence.log_start(run.log)
    end = float((evidence.read_marker(run.marker) or {})["end"])
    gate = [e for e in map(ev.parse_line, run.log.read_text().splitlines()) if e and e[ev.EVENT] == ev.EV_HEALTH]
    return {"wall": end - start, "gate": gate[0][ev.SECONDS] if gate else None,
            "busbw": gate[0].get(ev.BUSBW_GBS) if gate else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executor", choices=("slurm", "local"), default="slurm" if shutil.which("sbatch") else "local")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-steps", type=int, default=20)
    ap.add_argument("--measure-steps", type=int, default=100)
    ap.add_argument("--full", action="store_true", help="the full-size ResNet-50, not the tiny one")
    args = ap.parse_args()
    args.devices = "2x1" if args.executor == "slurm" else "1x2"
    on, off, bare = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-health-") as tmp:
        root = Path(tmp)
        for i in range(args.rounds):
            on.append(one_job(root, f"on{i}", args, True))
            off.append(one_job(root, f"off{i}", args, False))
            bare.append(one_job(root, f"bare{i}", args, False, watchdog=False))
            print(f"round {i}: with the gate {on[-1]['wall']:.1f} s (gate {on[-1]['gate']:.2f} s, busbw "
                  f"{on[-1]['busbw']:.3g} GB/s), without {off[-1]['wall']:.1f} s, without the gate and without "
                  f"the watchdog + heartbeat {bare[-1]['wall']:.1f} s", flush=True)
    w_on = statistics.median(r["wall"] for r in on)
    w_off = statistics.median(r["wall"] for r in off)
    gate = statistics.median(r["gate"] for r in on)
    w_bare = statistics.median(r["wall"] for r in bare)
    print(json.dumps({"executor": args.executor, "devices": args.devices, "rounds": args.rounds, "full": args.full,
                      "window": [args.warmup_steps, args.measure_steps]}))
    print(f"job wall time, median of {args.rounds}: with the gate {w_on:.1f} s, without {w_off:.1f} s: "
          f"{w_on - w_off:+.1f} s per job ({(w_on - w_off) / w_off:+.1%})")
    print(f"the gate's own time (its health line), median: {gate:.2f} s = {gate / w_off:.1%} of the job without it")
    print(f"the watchdog + heartbeat (hang_timeout 900 vs 0, gate off): {w_off - w_bare:+.1f} s per job "
          f"({(w_off - w_bare) / w_bare:+.1%}); gate, watchdog and heartbeat together: {w_on - w_bare:+.1f} s "
          f"({(w_on - w_bare) / w_bare:+.1%})")


if __name__ == "__main__":
    main()
