"""Time ``collect`` over a campaign of 10,000 runs (about 1 GB of logs in every supported suite's format), next
to ``cat`` and ``grep -c`` over the same files on the same machine; then one 1 GB log alone (flat memory).
Prints figures; asserts nothing. The logs are generated in a temporary folder and removed afterwards.

    python bench/bench_collect.py [--runs 10000] [--kb-per-run 100] [--jobs N] [--big-log-mb 1024] [--keep]

The runs are spread over the 8 log formats (DLPerf trees ``<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log``),
5 shapes x batch sizes x 2 precisions x 7 repeats each; every log holds the 20 + 100 step window plus NCCL/
warning noise up to ``--kb-per-run``. Timings are taken with a warm page cache (the files are read once first).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a source checkout
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import logsynth as ls

from dlperf_slurm import collect, report

SHAPES = [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8)]
REPEATS = 7
FORMATS = [(suite, i) for suite, ws in ls.WRITERS.items() for i in range(len(ws))]


def generate(root: Path, runs: int, kb_per_run: int) -> tuple[list[tuple[str, Path]], int, int]:
    """Write the trees; returns ([(suite, tree root)], files, bytes)."""
    per_format = math.ceil(runs / len(FORMATS))
    batches = max(1, math.ceil(per_format / (len(SHAPES) * 2 * REPEATS)))
    trees, files, total = [], 0, 0
    rng = random.Random(0)
    noise = [ls.noise_line(rng) + "\n" for _ in range(4096)]
    for k, (suite, which) in enumerate(FORMATS):
        tree = root / f"{k}_{suite.replace('/', '_')}_{ls.WRITERS[suite][which].__name__}"
        trees.append((suite, tree))
        made = 0
        for n, g in SHAPES:
            d = tree / f"{n}n{g}g"
            d.mkdir(parents=True)
            for b in range(batches):
                batch = 16 * (b + 1)
                for prec, f in (("fp32", 1.0), ("amp", 2.4)):
                    for r in range(REPEATS):
                        if made >= per_format or files >= runs:
                            break
                        if b == 0 or r == 0:  # a few distinct logs per cell; the others are copies of them
                            spec = ls.Spec(nodes=n, gpus=g, batch=batch, thr=f * 300.0 * n * g, seed=r + 7 * b,
                                           noise=2, log_steps=10)
                            text, _ = ls.write(suite, spec, which)
                            pad = max(0, kb_per_run * 1024 - len(text))
                            head = []
                            while pad > 0:
                                line = noise[rng.randrange(len(noise))]
                                head.append(line)
                                pad -= len(line)
                            data = ("".join(head) + text).encode()
                        path = d / f"m_b{batch}_{prec}_{r}.log"
                        path.write_bytes(data)
                        files += 1
                        made += 1
                        total += len(data)
    return trees, files, total


def timed(cmd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, shell=True, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def maxrss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


_BIG = """
import resource, sys, time
from dlperf_slurm import parsing as lp, suites
from dlperf_slurm.model import ParseContext
t = time.perf_counter()
res = suites.get("ngc-pytorch/resnet50").parse(lp.read_lines(sys.argv[1]), ParseContext(1, 8, 128, 20, 100))
dt = time.perf_counter() - t
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))  # KiB, this exec only
print(res.status, res.steps_seen, f"{dt:.2f}", hwm / 1024)
"""


def big_log(path: Path, mb: int) -> int:
    """One dllogger log of ``mb`` MB: steps every line, NCCL noise every third."""
    target = mb * 1_000_000
    size, k = 0, 0
    with open(path, "w") as f:
        f.write("DLL 2020-09-15 14:28:53.498443 - PARAMETER batch_size : 128  world_size : 8 \n")
        while size < target:
            chunk = []
            for _ in range(10000):
                k += 1
                s, us = divmod(k * 4000, 1_000_000)
                chunk.append(f"DLL 2020-09-{15 + s // 86400:02d} {(s // 3600) % 24:02d}:{(s // 60) % 60:02d}:"
                             f"{s % 60:02d}.{us:06d} - Epoch: 0 Iteration: {k}  train.loss : 6.54321  "
                             f"train.total_ips : 256000.00 img/s\n")
                if k % 3 == 0:
                    chunk.append(f"node1:1234:1250 [3] NCCL INFO comm 0x55d5c8 rank 3 nranks 8 cudaDev 3 step {k}\n")
            text = "".join(chunk)
            f.write(text)
            size += len(text)
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--kb-per-run", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=None, help="parser processes (default: CPUs)")
    ap.add_argument("--big-log-mb", type=int, default=1024, help="size of the single big log (0: skip)")
    ap.add_argument("--keep", action="store_true", help="keep the generated folder")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_collect_"))
    try:
        t = time.perf_counter()
        trees, files, total = generate(tmp / "logs", args.runs, args.kb_per_run)
        gen = time.perf_counter() - t
        mb = total / 1e6
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"size used: {files} runs, {mb:.0f} MB of logs in {len(trees)} formats "
              f"(~{args.kb_per_run} KB/run), generated in {gen:.1f} s under {tmp}; {cpus} CPUs, "
              f"load average {os.getloadavg()[0]:.1f} (other work on the machine slows every figure alike)")

        logs = tmp / "logs"
        find = f"find {logs} -name '*.log' -print0"
        timed(f"{find} | xargs -0 cat > /dev/null")  # warm the page cache
        t_cat = timed(f"{find} | xargs -0 cat > /dev/null")
        pattern = "DLL|DLPERF|TimeHistory|Train Step|images/sec|Iter #"
        # grep's output goes to a file: GNU grep stops at the first match when its output is /dev/null
        t_grep = timed(f"{find} | xargs -0 grep -c -E '{pattern}' > {tmp}/grep.out")
        t_grep1 = timed(f"{find} | xargs -0 -P {cpus} -n 256 grep -c -E '{pattern}' > {tmp}/grep.out")

        t = time.perf_counter()
        cols = [collect.runs_from_tree(tree, suite, 20, 100) for suite, tree in trees]
        t_gather = time.perf_counter() - t
        res = collect.collect(cols, jobs=args.jobs, name="bench")
        t_parse = res.seconds
        parts = {}
        t = time.perf_counter()
        report.markdown(res)
        parts["markdown"] = time.perf_counter() - t
        t = time.perf_counter()
        report.frames(res)
        parts["DataFrames"] = time.perf_counter() - t
        t = time.perf_counter()
        written = report.write_all(res, tmp / "summaries", plots=True)
        t_report = time.perf_counter() - t
        statuses = {}
        for r in res.runs:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        rss_self, rss_children = maxrss_mib(resource.RUSAGE_SELF), maxrss_mib(resource.RUSAGE_CHILDREN)

        print()
        print(f"{'':34s} {'seconds':>8s} {'MB/s':>8s}")
        print(f"{'cat (all files, warm cache)':34s} {t_cat:8.2f} {mb / t_cat:8.0f}")
        print(f"{'grep -c -E (one process)':34s} {t_grep:8.2f} {mb / t_grep:8.0f}")
        print(f"{f'grep -c -E (xargs -P {cpus})':34s} {t_grep1:8.2f} {mb / t_grep1:8.0f}")
        print(f"{'collect: find the runs':34s} {t_gather:8.2f}")
        print(f"{'collect: parse + cells':34s} {t_parse:8.2f} {mb / t_parse:8.1f}")
        print(f"{'collect: write md/csv/json/png':34s} {t_report:8.2f}   (of which markdown "
              f"{parts['markdown']:.1f} s, DataFrames {parts['DataFrames']:.1f} s)")
        total_t = t_gather + t_parse + t_report
        print(f"{'collect: total':34s} {total_t:8.2f} {mb / total_t:8.1f}")
        print(f"peak RSS: collect process {rss_self:.0f} MiB, largest parser process {rss_children:.0f} MiB")
        print(f"runs: {statuses}; cells: {len(res.cells)}; summary files: "
              f"{', '.join(f'{p.name} {p.stat().st_size / 1e6:.1f} MB' for p in written)}")
        print(f"collect / cat: {t_parse / t_cat:.0f}x; collect / grep: {t_parse / t_grep:.1f}x; "
              f"load average now {os.getloadavg()[0]:.1f}")

        if args.big_log_mb:
            big = tmp / "big.log"
            t = time.perf_counter()
            size = big_log(big, args.big_log_mb)
            print(f"\none log of {size / 1e6:.0f} MB (generated in {time.perf_counter() - t:.0f} s):")
            t_cat = timed(f"cat {big} > /dev/null")
            t_grep = timed(f"grep -c Iteration {big} > {tmp}/grep.out")
            out = subprocess.run([sys.executable, "-c", _BIG, str(big)], capture_output=True, text=True,
                                 cwd=ROOT, check=True).stdout.split()
            status, steps, secs, rss = out[0], int(out[1]), float(out[2]), float(out[3])
            print(f"  cat {t_cat:.2f} s ({size / 1e6 / t_cat:.0f} MB/s), grep -c {t_grep:.2f} s "
                  f"({size / 1e6 / t_grep:.0f} MB/s), parser {secs:.1f} s ({size / 1e6 / secs:.1f} MB/s), "
                  f"{status}, {steps} steps, peak RSS {rss:.0f} MiB")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
