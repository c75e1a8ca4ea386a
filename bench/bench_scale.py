"""Bench: a campaign of 1,000 / 10,000 / 100,000 runs from one login node, against the real Slurm test cluster.

Each step runs as a user runs it (``python -m dlperf_slurm ...`` in a subprocess), timed, with the peak memory of
that process (its own rusage); beside it its baseline, measured in the same run:

- ``plan`` (terminal output, the full table to a file: ``--out``), beside the CLI's own start (``--version``);
- ``render`` of every run's script, beside plain writes of the same bytes into the same layout;
- ``submit``, every job held (``extra_directives = ["--hold"]``, so nothing runs), as job arrays within the
  cluster's MaxArraySize; beside one ``sbatch --hold`` of one script (times the sbatch calls it made);
- ``status`` of every run (one squeue and one sacct call, batched), beside one ``squeue`` of the user's jobs;
- ``collect`` of the campaign (nothing has run: every run pending), beside reading the manifest's rows alone;
- the campaign folder's size on disk before any run starts.
Every job is cancelled at the end (``scancel`` of the campaign's job ids) and the folders removed.

    bash tests/slurm/start.sh            # if no cluster is up
    python bench/bench_scale.py [--runs 1000,10000,100000] [--repeats 7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dlperf_slurm.campaign import manifest  # noqa: E402


def matrix_text(runs: int, repeats: int) -> str:
    """About ``runs`` runs (exactly, where it divides): 5 shapes x 2 precisions x 2 xla x B batch sizes (at most 25)
    x E values of one more axis."""
    cells = max(20, runs // repeats)
    batches = list(range(8, 8 + min(25, cells // 20) * 8, 8))
    values = max(1, cells // (20 * len(batches)))
    return f"""suite = "pytorch-ddp/resnet50"
name = "scale"
[axes]
devices = ["1x1", "1x2", "2x1", "2x2", "1x4"]
batch_size = {batches}
precision = ["fp32", "amp"]
xla = [false, true]
"env.NCCL_MIN_NCHANNELS" = {[str(i) for i in range(1, values + 1)]}
[measure]
repeats = {repeats}
[environment]
modules = []
env = {{ NCCL_DEBUG = "WARN" }}
[slurm]
time = "00:10:00"
gpu_request = "none"
extra_directives = ["--hold"]
"""


def cli(args: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """``python -m dlperf_slurm ARGS``: wall s, peak RSS MiB of that process, the process. The peak is GNU time's
    (%M): a process forked from this one would inherit this one's peak, which grows with what the bench holds."""
    env = {"PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "COLUMNS": "120"}
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "BENCH-RSS-KIB %M", sys.executable, "-m", "dlperf_slurm", *args],
                       cwd=cwd, capture_output=True, text=True, env={**os.environ, **env})
    wall = time.perf_counter() - t
    rss = next((int(line.split()[1]) / 1024 for line in reversed(p.stderr.splitlines())
                if line.startswith("BENCH-RSS-KIB ")), float("nan"))
    if p.returncode not in (0, 1):
        raise SystemExit(f"dlperf_slurm {' '.join(args)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n"
                         f"{p.stderr[-2000:]}")
    return wall, rss, p


def du(path: Path) -> int:
    """Bytes on disk under ``path`` (blocks, as du counts them)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def plain_writes(texts: list[tuple[Path, str]]) -> float:
    t = time.perf_counter()
    made: set[Path] = set()
    for path, text in texts:
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_text(text)
    return time.perf_counter() - t


def one_size(n: int, repeats: int, work: Path, rows: list[tuple[str, ...]]) -> None:
    wdir = work / f"n{n}"
    wdir.mkdir()
    mx = wdir / "scale.toml"
    mx.write_text(matrix_text(n, repeats))
    logs = wdir / "logs"
    base_wall, base_rss, _ = cli(["--version"], wdir)

    wall, rss, p = cli(["plan", str(mx), "--no-site", "--out", str(wdir / "plan.txt")], wdir)
    lines = p.stdout.count("\n")
    rows.append((f"{n:,}", "plan", f"{wall:.2f} s", f"{rss:.0f} MiB", f"CLI start {base_wall:.2f} s, "
                 f"{base_rss:.0f} MiB", f"{lines} lines printed, the table in a file"))

    wall, rss, p = cli(["render", str(mx), "--no-site", "--out", str(wdir / "rendered")], wdir)
    scripts = sorted((wdir / "rendered").rglob("*.sbatch"))
    texts = [(wdir / "plain" / s.relative_to(wdir / "rendered"), s.read_text()) for s in scripts]
    t_plain = plain_writes(texts)
    size = sum(len(t) for _, t in texts)
    rows.append((f"{n:,}", "render", f"{wall:.2f} s", f"{rss:.0f} MiB", f"plain writes {t_plain:.2f} s",
                 f"{len(scripts):,} scripts, {size / len(scripts) / 1024:.2f} KiB each"))
    shutil.rmtree(wdir / "plain")
    shutil.rmtree(wdir / "rendered")

    t = time.perf_counter()
    one = subprocess.run(["sbatch", "--parsable", "--hold", str(scripts[0])], capture_output=True, text=True)
    t_one = time.perf_counter() - t
    ids = [one.stdout.strip().split(";")[0]] if one.returncode == 0 else []
    try:
        wall, rss, p = cli(["--logs", str(logs), "submit", str(mx), "--no-site", "--yes"], wdir)
        cdir = logs / "scale"
        recorded = manifest.load_manifest(cdir)
        ids += sorted({r.job_id.split("_")[0] for r in recorded if r.job_id})
        arrays = len({r.job_id.split("_")[0] for r in recorded if r.job_id})
        rows.append((f"{n:,}", "submit", f"{wall:.2f} s", f"{rss:.0f} MiB", f"one sbatch {t_one:.2f} s",
                     f"{len(recorded):,} runs as {arrays} job arrays, held"))
        rows.append((f"{n:,}", "folder", f"{du(cdir) / 2**20:.0f} MiB", "", "",
                     f"{du(cdir) / len(recorded) / 1024:.1f} KiB a run on disk before any run starts"))

        t = time.perf_counter()
        subprocess.run(["squeue", "-h", "--me", "-o", "%i %T %r"], capture_output=True, text=True)
        t_squeue = time.perf_counter() - t
        wall, rss, p = cli(["--logs", str(logs), "status", "scale", "--no-site"], wdir)
        rows.append((f"{n:,}", "status", f"{wall:.2f} s", f"{rss:.0f} MiB", f"one squeue {t_squeue:.2f} s",
                     f"{p.stdout.count(chr(10))} lines printed"))

        t = time.perf_counter()
        manifest.load_manifest(cdir)
        t_rows = time.perf_counter() - t
        wall, rss, p = cli(["--logs", str(logs), "collect", "scale", "--no-site", "--no-plots",
                            "--out", str(wdir / "summaries")], wdir)
        rows.append((f"{n:,}", "collect", f"{wall:.2f} s", f"{rss:.0f} MiB", f"manifest rows {t_rows:.2f} s",
                     "every run pending"))
    finally:
        for i in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[i:i + 500]], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="1000,10000,100000", help="comma-separated campaign sizes")
    ap.add_argument("--repeats", type=int, default=5, help="repeats a cell (default 5: 100,000 runs exactly)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary folder, removed)")
    args = ap.parse_args()
    if not Path("/usr/bin/time").exists():
        print("GNU time (/usr/bin/time) is needed for each step's peak memory: apt-get install time", file=sys.stderr)
        return 2
    if shutil.which("sbatch") is None or subprocess.run(["scontrol", "ping"], capture_output=True).returncode:
        print("no Slurm cluster answers: start one with: bash tests/slurm/start.sh", file=sys.stderr)
        return 2
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, ...]] = []
    try:
        for n in (int(x) for x in args.runs.split(",")):
            one_size(n, args.repeats, work, rows)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    head = ("runs", "step", "time", "peak RSS", "baseline", "")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
