"""Time ``collect`` over a campaign of 10,000 runs (about 1 GB of logs in every supported suite's format), side by
side with ``cat`` and ``grep -c`` over the same files on the same machine: cold (nothing cached), warm (a second
collect of the unchanged campaign), after a few runs changed, the writers alone; then one big log alone (flat
memory). Prints figures; asserts nothing. The logs are generated in a temporary folder and removed afterwards.

    python bench/bench_collect.py [--runs 10000] [--kb-per-run 100] [--changed 10] [--jobs N]
                                  [--big-log-mb 1024] [--dense-log-mb 100] [--keep]

The runs are spread over the 9 log formats (DLPerf trees ``<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log``),
5 shapes x batch sizes x 2 precisions x 7 repeats each; every log holds the 20 + 100 step window plus NCCL/
warning noise up to ``--kb-per-run`` (noise is most of the bytes, as in real logs). Timings are taken with a warm
page cache (the files are read once first). collect runs as ``collect --from`` does: its parse cache and writer
state in a file beside the summaries.

The big log is what a large job with ``NCCL_DEBUG=INFO`` writes: every step, rank 0's dllogger line among
thousands of NCCL INFO lines of all ranks. The dense log has a step on every line (an extreme the parser must
also survive: there every line is work).
"""

from __future__ import annotations

import argparse
import gc
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
sys.path.insert(0, str(ROOT / "bench"))

import logsynth as ls

from dlperf_slurm.collect import drive, gather, parsecache
from dlperf_slurm.report import writers

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


def timed(cmd: str, repeat: int = 3) -> float:
    """The best of ``repeat`` runs of a shell command (other work on the machine only slows a run down)."""
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, shell=True, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t)
    return best


def maxrss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


_BIG = """
import resource, sys, time
from dlperf_slurm import parsing as lp, suites
from dlperf_slurm.model.result import ParseContext
suite = suites.get("ngc-pytorch/resnet50")
ctx = ParseContext(nodes=64, gpus_per_node=8, batch_size=128, warmup_steps=20, measure_steps=100)
t = time.perf_counter()
res = suite.parse(lp.read_lines(sys.argv[1]), ctx)
dt = time.perf_counter() - t
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))  # KiB, this exec only
print(res.status, res.steps_seen, f"{dt:.3f}", hwm / 1024)
"""


def _stamp(k: int) -> str:
    s, us = divmod(k * 400_000, 1_000_000)
    return f"2020-09-{15 + s // 86400:02d} {(s // 3600) % 24:02d}:{(s // 60) % 60:02d}:{s % 60:02d}.{us:06d}"


def big_log(path: Path, mb: int, dense: bool = False) -> tuple[int, int]:
    """One dllogger log of ``mb`` MB from a 64x8-GPU job; returns (bytes, steps). ``dense``: a step on every line
    (NCCL noise every third); else every step is followed by the NCCL INFO lines of its all-reduces on every rank
    (``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=COLL``), some 2,000 lines."""
    target = mb * 1_000_000
    size, k = 0, 0
    rng = random.Random(1)
    with open(path, "w") as f:
        head = ["DLL 2020-09-15 14:28:53.498443 - PARAMETER batch_size : 128  world_size : 512 \n"]
        for r in range(512):  # communicator set-up: every rank
            head += [f"node{r // 8}:1234:1250 [{r % 8}] NCCL INFO Channel {c:02d}/32 :    0   1   2   3   4   5   "
                     f"6   7\n" for c in range(8)]
            head.append(f"node{r // 8}:1234:1250 [{r % 8}] NCCL INFO comm 0x55d5c8 rank {r} nranks 512 cudaDev "
                        f"{r % 8} busId 1a000 - Init COMPLETE\n")
        f.write("".join(head))
        size += sum(len(x) for x in head)
        while size < target:
            chunk = []
            for _ in range(100 if not dense else 10000):
                k += 1
                chunk.append(f"DLL {_stamp(k)} - Epoch: 0 Iteration: {k}  train.loss : 6.54321  "
                             f"train.total_ips : 256000.00 img/s\n")
                if dense:
                    if k % 3 == 0:
                        chunk.append(f"node1:1234:1250 [3] NCCL INFO comm 0x55d5c8 rank 3 nranks 8 cudaDev 3 step "
                                     f"{k}\n")
                    continue
                for i in range(2000):
                    r = rng.randrange(512)
                    chunk.append(f"node{r // 8}:1234:1250 [{r % 8}] NCCL INFO AllReduce: opCount {k * 2000 + i:x} "
                                 f"sendbuff 0x7f3a{i:08x} recvbuff 0x7f3a{i:08x} count 1048576 datatype 7 op 0 "
                                 f"root 0 comm 0x55d5c8 [nranks=512] stream 0x5576\n")
            text = "".join(chunk)
            f.write(text)
            size += len(text)
    return size, k


def floors(trees, needles: tuple[str, ...]) -> tuple[float, float, int]:
    """Where a cold parse's time goes, one process, no suite parser: (seconds to read() every log into memory,
    seconds of the block reader alone — every log sieved for the lines holding ``needles`` or the Scanner's own,
    which are decoded —, those lines)."""
    from dlperf_slurm.parsing import blocks
    from dlperf_slurm.parsing import lines as lp

    files = [p for _, tree in trees for p in sorted(tree.rglob("*.log"))]
    t = time.perf_counter()
    for p in files:
        with open(p, "rb") as f:
            f.read()
    t_read = time.perf_counter() - t
    sv = blocks.sieve(needles + lp.SCANNER_NEEDLES, lp._OOM_WORDS)
    t, n = time.perf_counter(), 0
    for p in files:
        for _ in blocks.BlockLines(p, sv, {}):
            n += 1
    return t_read, time.perf_counter() - t, n


def collect_once(trees, out: Path, jobs, spell=None, keep: bool = False) -> dict:
    """One ``collect --from`` over every tree (its cache and writer state beside the summaries in ``out``);
    ``spell(tree)``: how the tree is named this time (as a user types it: relative, through a symlink, ...).
    ``keep``: the result is kept (``res``); else dropped, and each collect starts, as a ``collect`` process does,
    with no garbage of the earlier ones to trace (their 10,000 rows each slowed the later ones' writers by 1-2 s)."""
    gc.collect()
    t0 = time.perf_counter()
    cols = [gather.runs_from_tree(spell(tree) if spell else tree, suite, 20, 100) for suite, tree in trees]
    t_gather = time.perf_counter() - t0
    side = parsecache.side_file(out, "bench")
    res = drive.collect(cols, jobs=jobs, name="bench", cache=parsecache.Caches(cols, side))
    t = time.perf_counter()
    state = parsecache.OutputState.load(side)
    paths = writers.write_all(res, out, plots=True, state=state)
    state.save()
    t_write = time.perf_counter() - t
    return {"gather": t_gather, "parse": res.seconds, "write": t_write, "total": time.perf_counter() - t0,
            "read": res.reread, "res": res if keep else None, "written": [p for p in paths if not state.is_kept(p)],
            "paths": paths}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--kb-per-run", type=int, default=100)
    ap.add_argument("--changed", type=int, default=10, help="runs whose logs change before the third collect")
    ap.add_argument("--jobs", type=int, default=None, help="parser processes (default: CPUs)")
    ap.add_argument("--big-log-mb", type=int, default=1024, help="size of the single big log (0: skip)")
    ap.add_argument("--dense-log-mb", type=int, default=100, help="size of the log with a step on every line "
                    "(0: skip)")
    ap.add_argument("--keep", action="store_true", help="keep the generated folder")
    ap.add_argument("--peer", action="store_true", help="only collect --from against DLPerf's extractor on DLPerf's "
                    "TF2 logs (bench/peer.py)")
    ap.add_argument("--peer-runs", type=int, default=1000, help="--peer: runs per shape (6 shapes)")
    ap.add_argument("--peer-kb", type=int, default=41, help="--peer: size of a log")
    ap.add_argument("--repeat", type=int, default=3, help="--peer: rounds of the commands; the best of each is printed")
    ap.add_argument("--code", type=Path, action="append", help="--peer: a checkout whose collect is timed (again for "
                    "another: before and after, side by side in one run; default: this one)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_collect_"))
    try:
        if args.peer:
            import peer

            peer.run(tmp, args.peer_runs, args.peer_kb, args.repeat, [c.resolve() for c in args.code or [ROOT]])
            return
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
        timed(f"{find} | xargs -0 cat > /dev/null", 1)  # warm the page cache
        t_cat = timed(f"{find} | xargs -0 cat > /dev/null")
        pattern = "DLL|DLPERF|TimeHistory|Train Step|images/sec|Iter #"
        # grep's output goes to a file: GNU grep stops at the first match when its output is /dev/null
        t_grep = timed(f"{find} | xargs -0 grep -c -E '{pattern}' > {tmp}/grep.out")
        t_grep1 = timed(f"{find} | xargs -0 -P {cpus} -n 256 grep -c -E '{pattern}' > {tmp}/grep.out")

        out = tmp / "summaries"
        cold = collect_once(trees, out, args.jobs, keep=True)
        warm = collect_once(trees, out, args.jobs)
        logs_all = sorted(logs.rglob("*.log"))
        rng = random.Random(3)
        changed = rng.sample(logs_all, min(args.changed, len(logs_all)))
        for p in changed:  # a few runs went on: their logs grew
            with open(p, "a") as f:
                f.write("node0:1234:1250 [0] NCCL INFO comm 0x55d5c8 rank 0 nranks 8 - Destroy COMPLETE\n")
        after = collect_once(trees, out, args.jobs)
        # the same unchanged campaign named as users type it: each collect must come from the cache
        (tmp / "elsewhere").mkdir()
        (tmp / "elsewhere" / "link").symlink_to(logs, target_is_directory=True)
        spellings = {"absolute": (tmp, lambda t: t), "relative": (tmp, lambda t: t.relative_to(tmp)),
                     "from another folder (../logs/...)": (tmp / "elsewhere", lambda t: Path("..") / t.relative_to(tmp)),
                     "through a symlink (link/...)": (tmp / "elsewhere", lambda t: Path("link") / t.relative_to(logs))}
        spelled = {}
        here = os.getcwd()
        try:
            for how, (cwd, spell) in spellings.items():
                os.chdir(cwd)
                spelled[how] = collect_once(trees, out, args.jobs, spell)
        finally:
            os.chdir(here)
        t_read, t_sieve, n_cand = floors(trees, tuple(pattern.split("|")))
        res = cold["res"]
        statuses: dict[str, int] = {}
        for r in res.runs:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        rss_self, rss_children = maxrss_mib(resource.RUSAGE_SELF), maxrss_mib(resource.RUSAGE_CHILDREN)

        def row(label: str, secs: float, size: float | None = mb, note: str = "") -> None:
            rate = f"{size / secs:8.0f}" if size else f"{'':8s}"
            pct = f"{100 * t_cat / secs:7.1f}%" if size else f"{'':8s}"
            print(f"{label:42s} {secs:8.2f} {rate} {pct}  {note}")

        print()
        print(f"{'':42s} {'seconds':>8s} {'MB/s':>8s} {'% of cat':>8s}")
        row("cat (all files, warm cache)", t_cat)
        row("grep -c -E (one process)", t_grep)
        row(f"grep -c -E (xargs -P {cpus})", t_grep1)
        row("python read() of every log (one process)", t_read)
        row("block reader alone (one process)", t_sieve, note=f"{n_cand} lines: the grep's words or the Scanner's")
        row("collect cold: find the runs", cold["gather"], None)
        row("collect cold: parse + cells", cold["parse"], note=f"{cold['read']} logs read")
        row("collect cold: write md/csv/json/svg", cold["write"], None, f"{len(cold['written'])} files")
        row("collect cold: total", cold["total"], note=f"total / parse {cold['total'] / cold['parse']:.2f}x")
        row("collect warm (unchanged): parse + cells", warm["parse"], None, f"{warm['read']} logs read")
        row("collect warm (unchanged): total", warm["total"], None,
            f"find the runs {warm['gather']:.2f} s, writers {warm['write']:.2f} s "
            f"({len(warm['written'])} files written)")
        print(f"{'warm / cold, total':42s} {100 * warm['total'] / cold['total']:7.1f}%")
        for how, r in spelled.items():
            row(f"warm, named {how}", r["total"], None, f"{100 * r['total'] / cold['total']:.1f}% of cold; "
                f"{r['read']} logs read, {len(r['written'])} files written; find the runs {r['gather']:.2f} s, "
                f"parse and cells {r['parse']:.2f} s, writers {r['write']:.2f} s")
        row(f"collect, {len(changed)} runs changed: parse + cells", after["parse"], None,
            f"{after['read']} logs read")
        row(f"collect, {len(changed)} runs changed: total", after["total"], None,
            f"writers {after['write']:.2f} s ({len(after['written'])} files written)")
        print(f"peak RSS: collect process {rss_self:.0f} MiB, largest parser process {rss_children:.0f} MiB; "
              f"processes reading logs (cold): {res.workers} of {cpus} CPUs")
        print(f"runs: {statuses}; cells: {len(res.cells)}; summary files: "
              f"{', '.join(f'{p.name} {p.stat().st_size / 1e6:.1f} MB' for p in cold['paths'])}")
        print(f"load average now {os.getloadavg()[0]:.1f}")

        for label, size_mb, dense in (("big log (NCCL INFO, a step per 2,000 lines)", args.big_log_mb, False),
                                      ("dense log (a step on every line)", args.dense_log_mb, True)):
            if not size_mb:
                continue
            big = tmp / "big.log"
            t = time.perf_counter()
            size, steps = big_log(big, size_mb, dense)
            print(f"\none {label} of {size / 1e6:.0f} MB, {steps} steps (generated in "
                  f"{time.perf_counter() - t:.0f} s):")
            timed(f"cat {big} > /dev/null", 1)
            t_cat1 = timed(f"cat {big} > /dev/null")
            t_grep = timed(f"grep -c Iteration {big} > {tmp}/grep.out")
            best = None
            for _ in range(2):
                out_ = subprocess.run([sys.executable, "-c", _BIG, str(big)], capture_output=True, text=True,
                                      cwd=ROOT, check=True).stdout.split()
                if best is None or float(out_[2]) < float(best[2]):
                    best = out_
            status, nsteps, secs, rss = best[0], int(best[1]), float(best[2]), float(best[3])
            print(f"  cat {t_cat1:.2f} s ({size / 1e6 / t_cat1:.0f} MB/s), grep -c {t_grep:.2f} s "
                  f"({size / 1e6 / t_grep:.0f} MB/s), parser {secs:.2f} s ({size / 1e6 / secs:.0f} MB/s, "
                  f"{100 * t_grep / secs:.0f}% of grep -c's speed, {100 * t_cat1 / secs:.1f}% of cat's), {status}, "
                  f"{nsteps} steps, peak RSS {rss:.0f} MiB")
            big.unlink()
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
