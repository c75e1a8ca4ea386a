"""Bench: ``status`` of a 1,000-run campaign (125 cells x 8 repeats, 3 runs FAILED): the lines it prints and its
wall time.

The campaign is made through the package's own manifest API (a matrix synced, one local submission recorded, every
run settled: 997 OK, 3 FAILED), so nothing runs. ``status --no-refresh`` then runs as a user runs it
(``python -m dlperf_slurm`` in a subprocess, its output a pipe: no terminal, so 24 lines is the screen), with the
package from ``--package`` (default: this checkout), which makes a before/after of two commits two runs of this
script::

    python bench/bench_status.py                                  # this checkout
    git archive c5d1511 | tar -x -C /tmp/old && python bench/bench_status.py --package /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dlperf_slurm.campaign.manifest import Manifest  # noqa: E402
from dlperf_slurm.campaign.records import Decision  # noqa: E402
from dlperf_slurm.matrix import loader as matrix_mod  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

CELLS, REPEATS, FAILED = 125, 8, 3

MATRIX = f"""suite = "pytorch-ddp/resnet50"
name = "bench1000"
[axes]
devices = ["1x1"]
batch_size = [{", ".join(str(b) for b in range(1, CELLS + 1))}]
[options]
tiny = true
[measure]
repeats = {REPEATS}
warmup_steps = 1
measure_steps = 2
[slurm]
gpu_request = "none"
"""


def make_campaign(logs: Path) -> Path:
    """``logs/bench1000``: 1,000 runs recorded as submitted to the local executor and ended."""
    mx = logs.parent / "bench1000.toml"
    mx.write_text(MATRIX)
    m = matrix_mod.load(mx)
    cdir = logs / m.name
    cdir.mkdir(parents=True)
    runs = matrix_mod.runs(m, cdir)
    assert len(runs) == CELLS * REPEATS, len(runs)
    man = Manifest(cdir, create=True)
    try:
        man.sync(m, runs)
        now = time.time()
        man.record_submission(token="bench", name="bench1000-bench", executor="local", options={}, held=False,
                              runs=[(r.key, None, {}) for r in runs], now=now)
        man.record_ids(token="bench", executor="local", job_id="local-bench",
                       ids=[(r.key, f"local-bench_{i}", "local-bench", i) for i, r in enumerate(runs)])
        failed = {runs[k].key for k in (10, 500, 990)}
        man.settle([Decision(key=r.key, status=Status.FAILED if r.key in failed else Status.OK,
                             reason="exit code 1: RuntimeError: CUDA error: an illegal memory access" if r.key in failed
                             else "", exit_code=1 if r.key in failed else 0, ended_at=now + i)
                    for i, r in enumerate(runs)], now)
    finally:
        man.close()
    return cdir


def measure(logs: Path, package: Path, repeat: int, args: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LINES", "COLUMNS")}
    env["PYTHONPATH"] = str(package)
    seconds, out = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "dlperf_slurm", "--logs", str(logs), "status", "bench1000",
                            "--no-refresh", *args], capture_output=True, text=True, env=env, cwd=logs.parent)
        seconds.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise SystemExit(f"status failed ({p.returncode}): {p.stderr}")
        out = p.stdout
    return {"args": args, "lines": len(out.splitlines()), "seconds_median": round(statistics.median(seconds), 3),
            "seconds_min": round(min(seconds), 3), "failed_runs_named": sum(
                ".r" in line and " FAILED " in line for line in out.splitlines())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", type=Path, default=REPO, help="the checkout whose dlperf_slurm status runs")
    ap.add_argument("--repeat", type=int, default=5, help="runs of status timed (default 5; the median is told)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        make_campaign(logs)
        results = [measure(logs, a.package.resolve(), a.repeat, [])]
        if (a.package / "dlperf_slurm").exists() and "--runs" in (a.package / "dlperf_slurm" / "cli.py").read_text():
            results.append(measure(logs, a.package.resolve(), a.repeat, ["--runs"]))
    for r in results:
        print(f"status {' '.join(r['args']) or '(default)'}: {r['lines']} lines, {r['seconds_median']:.3f} s "
              f"(median of {a.repeat}; min {r['seconds_min']:.3f} s), {r['failed_runs_named']} of {FAILED} failed "
              "runs named")
    if a.json:
        Path(a.json).write_text(json.dumps({"package": str(a.package), "runs": CELLS * REPEATS, "results": results},
                                           indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
