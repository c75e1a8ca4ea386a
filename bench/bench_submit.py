"""Bench: submitting a 96-cell x 7-repeat campaign (672 runs) to the Slurm test cluster.

Compares ``dlperf_slurm submit`` (submitit job arrays, one per group of cells with the same resources)
with one plain ``sbatch`` per run, and optionally submitit without arrays (one job per run). Counts the
sbatch calls and the wall time of each, and the time of one ``status`` refresh over all 672 runs.

Every job is submitted held (``--hold``) so nothing runs; all of them are cancelled at the end.

    bash tests/slurm/start.sh            # if no cluster is up
    python bench/bench_submit.py [--submitit-per-run]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dlperf_slurm.campaign import (
    manifest,  # noqa: E402
    tracking,  # noqa: E402
)
from dlperf_slurm.matrix import loader as matrix_mod  # noqa: E402
from dlperf_slurm.schedulers.slurm import SlurmScheduler as SlurmExecutor  # noqa: E402
from dlperf_slurm.schedulers.slurmctl import Slurm  # noqa: E402
from dlperf_slurm.submit import (
    journal,  # noqa: E402
    render,  # noqa: E402
)

MATRIX = """suite = "pytorch-ddp/resnet50"
name = "bench96"
[axes]
devices = ["1x1", "1x2", "2x1", "2x2"]
batch_size = [16, 32, 64]
precision = ["fp32", "amp", "bf16", "fp16"]
xla = [false, true]
[measure]
repeats = 7
[slurm]
time = "00:10:00"
gpu_request = "none"
array_throttle = 4
extra_directives = ["--hold"]
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--submitit-per-run", action="store_true",
                    help="also time submitit without arrays (one sbatch per run, 0.2 s throttle: ~2.5 min)")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = ap.parse_args()
    try:
        Slurm().ping()
    except Exception as err:  # noqa: BLE001
        print(f"no Slurm cluster: {err}\nstart one with: bash tests/slurm/start.sh", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="bench-submit-"))
    (work / "bench96.toml").write_text(MATRIX)
    m = matrix_mod.load(work / "bench96.toml", site=False)
    all_ids: list[str] = []
    results: dict[str, dict] = {}
    try:
        # A. dlperf_slurm submit: job arrays through submitit
        cdir = work / "logs" / "bench96"
        ex = SlurmExecutor(cdir)
        t = time.perf_counter()
        report = journal.submit(m, cdir, ex, out=lambda s: None)
        wall = time.perf_counter() - t
        runs = manifest.load_manifest(cdir)
        all_ids += [r.job_id for r in runs]
        assert report.submitted == 672 and len({r.job_id for r in runs}) == 672
        results["dlperf_slurm submit (submitit arrays)"] = {"runs": 672, "sbatch_calls": ex.calls["sbatch"],
                                                           "wall_s": round(wall, 2)}
        # one status refresh over every run: one squeue for all
        mf = manifest.Manifest(cdir)
        slurm = Slurm()
        exs = {"slurm": SlurmExecutor(cdir, slurm=slurm)}
        t = time.perf_counter()
        tracking.refresh(mf, exs)
        results["status refresh of 672 runs"] = {"squeue_calls": slurm.calls["squeue"],
                                                 "sacct_calls": slurm.calls["sacct"],
                                                 "wall_s": round(time.perf_counter() - t, 2)}
        mf.close()

        # B. one sbatch per run, the same rendered scripts
        runs_b = matrix_mod.runs(m, work / "logs" / "plain")
        render.write_scripts(m, runs_b)
        t = time.perf_counter()
        for r in runs_b:
            p = subprocess.run(["sbatch", "--parsable", "--hold", str(r.script)], capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"sbatch failed: {p.stderr}")
            all_ids.append(p.stdout.strip().split(";")[0])
        results["one sbatch per run (plain sbatch)"] = {"runs": 672, "sbatch_calls": 672,
                                                       "wall_s": round(time.perf_counter() - t, 2)}

        # C. submitit without arrays (optional: it throttles 0.2 s per job)
        if args.submitit_per_run:
            import submitit

            sx = submitit.SlurmExecutor(folder=work / "submitit-per-run" / "%j")
            sx.update_parameters(time=10, use_srun=False, additional_parameters={"hold": True})
            t = time.perf_counter()
            for r in runs_b:
                all_ids.append(sx.submit(submitit.helpers.CommandFunction(["bash", str(r.script)])).job_id)
            results["submitit, one job per run"] = {"runs": 672, "sbatch_calls": 672,
                                                    "wall_s": round(time.perf_counter() - t, 2)}
    finally:
        Slurm().cancel(all_ids)
        shutil.rmtree(work, ignore_errors=True)

    width = max(len(k) for k in results)
    print(f"{'what':<{width}}  figures")
    for k, v in results.items():
        print(f"{k:<{width}}  " + ", ".join(f"{a}={b}" for a, b in v.items()))
    a = results["dlperf_slurm submit (submitit arrays)"]
    b = results["one sbatch per run (plain sbatch)"]
    print(f"\narrays: {a['sbatch_calls']} sbatch calls instead of 672 ({b['wall_s'] / a['wall_s']:.1f}x faster "
          "than one plain sbatch per run)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
