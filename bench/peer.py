"""``bench_collect.py --peer``: ``collect --from`` against DLPerf's own extractor, side by side, on one tree of
DLPerf-format TF 2.x ResNet-50 logs (6 shapes x ~1,000 runs).

The tree: DLPerf's published per-repeat figures for TF 2.x ResNet-50 FP32 batch 128 (TensorFlow/resnet50v1.5/
README.md, stored under tests/fixtures/real/references/dlperf/; the same figures tests/test_tf2.py and
tests/test_dlperf_published.py check), each written as a log in DLPerf's TF2 format (``tests/test_tf2.py``'s
``dlperf_rn50_log``: TimeHistory every 100 of 600 steps, glog stamps) and padded with the start-up lines a TF2 job
prints: a real tf-models-official classifier_trainer run's start-up (:data:`REAL_TF2`, its records left out), a
V100 job's device lines, then repeated TF lines (:data:`_FILLER`) to the size of DLPerf's logs (~41 KB; their
bytes are not published). Repeat r of a shape is DLPerf's repeat ``(r - 1) % 5 + 1``, so every shape's
median is the one DLPerf published: the bench checks it, for collect and for the extractor.

The peer (:data:`PEER`) is a re-implementation, written here, of the loop of DLPerf's
``TensorFlow/resnet50v1.5/extract_tensorflow_logs_time.py`` (Oneflow-Inc/DLPerf; not copied, its behaviour
followed): ``glob(log_dir/*/*.log)``; per file the shape from the folder and batch and repeat from the name,
``open().readlines()``, a substring test (``"TimeHistory" in line``) per line, the stamp of the 1st and 6th
TimeHistory line by regex and ``strptime``, speed = global batch x 500 / seconds, ``break`` at the window's end;
then per shape ``np.median`` and the speedup over 1n1g, pretty-printed. It reads no further than its window and
decides no status; collect reads every log to its end (a run's status is at its end).
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

SHAPES = ("1n1g", "1n2g", "1n4g", "1n8g", "2n8g", "4n8g")
# the real program's output (tests/fixtures/real: tf-models-official 2.20.0's classifier_trainer on this project's
# test machine), its records and our harness's event line left out: each bench log starts with it
REAL_TF2 = ROOT / "tests/fixtures/real/tensorflow-models/2.20.0/classifier_trainer_resnet50_synthetic_1x1_b2.log"

# A re-implementation of DLPerf's extract_tensorflow_logs_time.py loop (see the module docstring).
PEER = r'''
import datetime, glob, os, pprint, re, sys
import numpy as np

log_dir, warmup_batches, train_batches = sys.argv[1], 100, 600
stamp = re.compile(r"(\d{1,2}:\d{1,2}:\d{1,2}.\d{1,6})", re.S)
speeds = {}
for path in glob.glob(os.path.join(log_dir, "*/*.log")):
    shape = path.split("/")[-2]
    parts = os.path.basename(path).split("_")
    batch, repeat = int(parts[1].strip("b")), int(parts[3].strip(".log"))
    nodes = int(shape[0])
    gpus = int(shape[-2]) if len(shape) == 4 else int(shape[-3:-1])
    first = 1 if warmup_batches <= 100 else warmup_batches // 100
    last = train_batches // 100
    start, seen, speed = "", 0, 0
    with open(path) as f:
        for line in f.readlines():
            if "TimeHistory" in line:
                seen += 1
                if seen == first:
                    start = re.findall(stamp, line)[0]
                    continue
                if seen == last:
                    end = re.findall(stamp, line)[0]
                    secs = (datetime.datetime.strptime(end, "%H:%M:%S.%f")
                            - datetime.datetime.strptime(start, "%H:%M:%S.%f")).total_seconds()
                    speed = round(nodes * gpus * batch / (secs / (train_batches - warmup_batches)), 2)
                    break
    speeds.setdefault(shape, {})[repeat] = speed
result = {}
for shape, runs in speeds.items():
    median = round(float(np.median(list(runs.values()))), 2)
    result[shape] = {"median_speed": median, "average_speed": round(sum(runs.values()) / len(runs), 2)}
for shape in result:
    result[shape]["speedup"] = round(result[shape]["median_speed"] / result["1n1g"]["median_speed"], 2)
pprint.PrettyPrinter(indent=1).pprint(result)
print("JSON " + __import__("json").dumps(result))
'''

# Not a peer: the least a Python process can do on this tree (the floor of any collect written in Python, measured
# beside it): list the shape folders, read each log whole, find its TimeHistory lines with one Hyperscan pass (the
# scanner collect uses; bytes.find without the package), read the 1st and 6th line's stamp with one regex, the
# window's speed. No status, no error or OOM facts, no rows, no cache, nothing written: collect must do all of them.
FLOOR = r"""
import os, re, sys
root = sys.argv[1]
stamp = re.compile(rb"(\d\d):(\d\d):(\d\d\.\d+) ")
try:
    import hyperscan
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[b"TimeHistory"], ids=[0], elements=1, flags=[0])
except ImportError:
    db = None
def ends(data):
    if db is None:
        at, out = data.find(b"TimeHistory"), []
        while at >= 0:
            out.append(at)
            at = data.find(b"TimeHistory", at + 1)
        return out
    out = []
    db.scan(data, match_event_handler=lambda _i, _f, to, _fl, _c: out.append(to))
    return out
speeds = {}
for shape in sorted(os.listdir(root)):
    gpus = int(shape.split("n")[0]) * int(shape.split("n")[1].rstrip("g"))
    folder = os.path.join(root, shape)
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        hits = ends(data)
        if len(hits) < 6:
            continue
        t = []
        for to in (hits[0], hits[5]):
            m = stamp.search(data, data.rfind(b"\n", 0, to) + 1, to)
            t.append(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)))
        speeds.setdefault(shape, []).append(gpus * int(name.split("_")[1][1:]) * 500 / (t[1] - t[0]))
print("JSON " + __import__("json").dumps({k: sorted(v)[len(v) // 2] for k, v in speeds.items()}))
"""

# what a TF 2.x job prints around its TimeHistory lines, glog style: a start-up once per run (libraries, one
# "Found device" and "Created TensorFlow device" per GPU, the strategy), then filler of the kinds TF repeats (XLA,
# grappler, AutoGraph, allocator lines); none of it is a record
_START = (
    "2020-08-26 15:00:01.{u:06d}: I tensorflow/stream_executor/platform/default/dso_loader.cc:48] Successfully "
    "opened dynamic library lib{lib}.so.10",
    "2020-08-26 15:00:02.{u:06d}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1561] Found device {g} with "
    "properties: pciBusID: 0000:{g:02x}:00.0 name: Tesla V100-SXM2-16GB computeCapability: 7.0",
    "2020-08-26 15:00:03.{u:06d}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1402] Created TensorFlow device "
    "(/job:localhost/replica:0/task:0/device:GPU:{g} with 14764 MB memory) -> physical GPU (device: {g}, name: Tesla "
    "V100-SXM2-16GB, pci bus id: 0000:{g:02x}:00.0, compute capability: 7.0)",
)
_ONCE = ("I0826 15:00:04.{u:06d} 140405777909504 mirrored_strategy.py:341] Using MirroredStrategy with devices "
         "('/job:localhost/replica:0/task:0/device:GPU:0',)",
         "I0826 15:00:05.{u:06d} 140405777909504 gpu_device.cc:1871] Adding visible gpu devices: 0")
_FILLER = (
    "2020-08-26 15:{m:02d}:{s:02d}.{u:06d}: I tensorflow/compiler/xla/service/service.cc:168] XLA service "
    "0x{u:08x} initialized for platform CUDA (this does not guarantee that XLA will be used). Devices:",
    "2020-08-26 15:{m:02d}:{s:02d}.{u:06d}: I tensorflow/core/grappler/optimizers/meta_optimizer.cc:928] "
    "Optimization results for grappler item: graph_to_optimize",
    "2020-08-26 15:{m:02d}:{s:02d}.{u:06d}: W tensorflow/core/grappler/optimizers/loop_optimizer.cc:906] Skipping "
    "loop optimization for Merge node with control input: cond/branch_executed/_{g}",
    "WARNING:tensorflow:AutoGraph could not transform <function Model.make_train_function.<locals>.train_function "
    "at 0x7f{u:010x}> and will run it as-is. Please report this to the TensorFlow team.",
    "2020-08-26 15:{m:02d}:{s:02d}.{u:06d}: I tensorflow/core/common_runtime/bfc_allocator.cc:1046] InUse at "
    "7f{u:08x}00 of size 1280 next {g}",
    "I0826 15:{m:02d}:{s:02d}.{u:06d} 140405777909504 cross_device_ops.py:1130] Collective batch_all_reduce: 161 "
    "all-reduces, num_devices = {g}, group_size = {g}, communication_hint = NCCL, num_packs = 1",
)


def make_tree(root: Path, runs_per_shape: int, kb_per_run: int) -> tuple[int, int, dict[str, tuple[float, float]]]:
    """Write the tree; returns (files, bytes, DLPerf's published (median, speedup) per shape)."""
    from test_tf2 import DLPERF_PUBLISHED, DLPERF_RUNS, dlperf_rn50_log

    real = [line for line in REAL_TF2.read_text().splitlines(keepends=True)
            if "TimeHistory" not in line and " - loss: " not in line and ":::DLPERF" not in line]
    rng = random.Random(0)
    filler = [rng.choice(_FILLER).format(m=rng.randrange(60), s=rng.randrange(60), u=rng.randrange(10**6),
                                         g=rng.randrange(8)) + "\n" for _ in range(2048)]
    files = total = 0
    for shape in SHAPES:
        d = root / shape
        d.mkdir(parents=True)
        bodies = {}
        for rep, speed in DLPERF_RUNS[shape].items():
            lines = dlperf_rn50_log(shape, speed).splitlines(keepends=True)
            gpus = int(shape[-2]) if len(shape) == 4 else int(shape[-3:-1])
            head = list(real)  # a real TF2 classifier_trainer run's start-up, then a V100 job's devices
            head += [t.format(u=rng.randrange(10**6), lib=lib, g=0) + "\n"
                     for t, lib in zip([_START[0]] * 6, ("cudart", "cublas", "cufft", "curand", "cusolver", "cudnn"))]
            head += [t.format(u=rng.randrange(10**6), g=g) + "\n" for t in _START[1:] for g in range(gpus)]
            head += [t.format(u=rng.randrange(10**6)) + "\n" for t in _ONCE]
            pad = kb_per_run * 1024 - sum(map(len, lines)) - sum(map(len, head))
            while pad > 0:
                head.append(filler[rng.randrange(len(filler))])
                pad -= len(head[-1])
            cut = len(head) * 9 // 10  # most before training starts, the rest between the first intervals
            bodies[rep] = "".join(head[:cut] + lines[:3] + head[cut:] + lines[3:]).encode()
        for r in range(1, runs_per_shape + 1):
            data = bodies[(r - 1) % 5 + 1]
            (d / f"rn50_b128_fp32_{r}.log").write_bytes(data)
            files += 1
            total += len(data)
    return files, total, DLPERF_PUBLISHED


def _once(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """One run of ``cmd``: its wall time, its CPU time (user + system, its worker processes included), its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=env["PYTHONPATH"], check=False)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return dt, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, r.stdout


def run(tmp: Path, runs_per_shape: int, kb_per_run: int, repeat: int, codes: list[Path] | None = None) -> None:
    """Write the tree under ``tmp``, time the extractor and ``collect --from`` of each checkout in ``codes`` (default:
    this one; several: before and after, in the same run). The commands take turns, ``repeat`` rounds (load on the
    machine then slows each alike; each round starts one command later, so none always follows the same one); each row
    is its best wall time and its best CPU time."""
    codes = codes or [ROOT]
    tree = tmp / "rn50"
    t = time.perf_counter()
    files, total, published = make_tree(tree, runs_per_shape, kb_per_run)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"--peer: {files} DLPerf-format TF2 ResNet-50 logs ({len(SHAPES)} shapes x {runs_per_shape}), "
          f"{total / 1e6:.0f} MB, written in {time.perf_counter() - t:.1f} s; {cpus} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; best of {repeat} rounds (the commands take turns), warm page cache; collect "
          "as installed (its bytecode compiled first)")
    subprocess.run(f"cat {tree}/*/*.log > /dev/null", shell=True, check=False)
    py = sys.executable
    # (label, command, environment, summaries folder or None)
    cmds: list[tuple[str, list[str], dict[str, str], Path | None]] = [
        ("DLPerf's extract_tensorflow_logs_time.py loop (re-implemented)", [py, "-c", PEER, str(tree)],
         {**os.environ, "PYTHONPATH": str(ROOT)}, None),
        ("floor, not a peer: the least a Python process does (read, scan, 2 stamps)", [py, "-c", FLOOR, str(tree)],
         {**os.environ, "PYTHONPATH": str(ROOT)}, None)]
    for code in codes:
        # as installed: pip byte-compiles a package, so a user's collect loads bytecode; a checkout run with
        # PYTHONDONTWRITEBYTECODE=1 (this machine's setting) compiled its ~70 modules from source on every start
        # (0.1 s of each row). Compiled here, outside the timing, into the checkout's own __pycache__ folders (as
        # Python itself does; git ignores them); the interpreter's and site-packages' bytecode is used as it is.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        env["PYTHONPATH"] = str(code)
        subprocess.run([py, "-m", "compileall", "-q", str(code / "dlperf_slurm")], env=env, check=True)
        name = f" [{code.name}]" if len(codes) > 1 else ""
        # --no-store where the code has a results store: the bench must not file its cells in the user's store
        store = ["--no-store"] if "--no-store" in (code / "dlperf_slurm" / "cli.py").read_text() else []
        for label, jobs in (("collect --from (default jobs)", []), ("collect --from -j 1", ["-j", "1"])):
            out = tmp / f"out{len(cmds)}"
            cmds.append((label + name, [py, "-m", "dlperf_slurm", "collect", "--from", str(tree), "--suite",
                                        "tf2/resnet50", "--no-plots", "-q", "--no-cache", *store, "--out", str(out),
                                        *jobs], env, out))
    best: list[tuple[float, float, str]] = [(float("inf"), float("inf"), "")] * len(cmds)
    loads = []
    for r in range(repeat):
        loads.append(os.getloadavg()[0])
        for i in [(i + r) % len(cmds) for i in range(len(cmds))]:  # each round starts one command later
            _label, cmd, env, _out = cmds[i]
            secs, cpu, out = _once(cmd, env)
            b = best[i]
            best[i] = (min(b[0], secs), min(b[1], cpu), out if secs < b[0] else b[2])
    peer_s, peer_cpu, peer_out = best[0]
    peer = json.loads(peer_out.split("JSON ", 1)[1])
    medians: dict[str, dict[str, float]] = {}
    print(f"\n{'':72s} {'seconds':>8s} {'x peer':>7s} {'MB/s':>6s} {'CPU s':>6s} {'x peer':>7s}")
    for (label, _cmd, _env, out), (secs, cpu, printed) in zip(cmds, best):
        said = re.search(r"parsed .*? in [0-9.]+ s(?: \(\d+ processes\))?", " ".join(printed.split()))
        print(f"{label:72s} {secs:8.2f} {secs / peer_s:7.2f} {total / 1e6 / secs:6.0f} {cpu:6.2f} "
              f"{cpu / peer_cpu:7.2f}" + (f"  ({said.group(0)})" if said else ""))
        if out is not None:
            cells = json.loads((out / "rn50.json").read_text())["cells"]
            medians[label] = {c["shape"]: c["median"] for c in cells}
    print(f"load average at the start of each round: {', '.join(f'{x:.1f}' for x in loads)}")
    bad = []
    for shape, (median, speedup) in published.items():
        if abs(peer[shape]["median_speed"] - median) > 0.011 or abs(peer[shape]["speedup"] - speedup) > 0.011:
            bad.append(f"extractor {shape}: {peer[shape]} vs published {median}, x{speedup}")
        for label, got in medians.items():
            if abs(got[shape] - median) > 0.005 + 1e-9:
                bad.append(f"{label} {shape}: median {got[shape]} vs published {median}")
    print("medians: " + ("every shape's median equals DLPerf's published one (collect to 0.005, the extractor's "
                         "to 0.01, its own rounding), " + ", ".join(f"{s} {published[s][0]}" for s in SHAPES)
                         if not bad else "DIFFER: " + "; ".join(bad)))
    print(f"load average now {os.getloadavg()[0]:.1f}")
