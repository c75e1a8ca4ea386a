"""A real ``oneflow/wdl`` campaign on the Slurm test cluster: OneFlow-Inc/models' own ``wide_and_deep/train.py``
(vendored unchanged in tests/frameworks/oneflow/wide_and_deep/, SOURCE.md), graph mode, under the suite's rendered
launch (``python -m oneflow.distributed.launch ... -m dlperf_slurm.workloads.memwatch -- SCRIPT FLAGS``), two
``deep_vocab_size`` cells, on a tiny OFRecord data set written with OneFlow's own record protobuf
(tests/frameworks/oneflow/wdl_ofrecord.py); submitted through the CLI and read back by ``collect``, whose summary must
hold DLPerf's Wide & Deep table with a latency for both vocab sizes.

On the CPU: the suite's SCRIPT is tests/frameworks/oneflow/wdl_on_cpu.py, which runs train.py with OneFlow's device
"cuda" read as "cpu" (train.py has no device flag). 1x1 only: with two processes OneFlow 0.9.0's graph aborts on the
CPU (``register.cpp:75 Check failed: separated_header_mem_ptr() == nullptr`` in EpollCommNet::SendActorMsg).
GPU memory: the suite's sampler reads NVML only, so on the CPU the table's memory cells stay empty and each run says
why. Needs the test cluster and the oneflow venv (tests/frameworks/oneflow.txt); skipped with the reason otherwise.
About a minute.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, nvidia_libs, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("oneflow")
OF = HERE / "frameworks" / "oneflow"
VOCABS = (3200, 6400)
BATCH, WARMUP, MEASURE = 512, 2, 6

MATRIX = """suite = "oneflow/wdl"
name = "wdl-real"
[axes]
devices = ["1x1"]
batch_size = [{batch}]
deep_vocab_size = [{vocabs}]
[options]
python = "{python}"
script = "{script}"
data_dir = "{data}"
data_part_num = 1
print_every = 1
[measure]
repeats = 1
warmup_steps = {warmup}
measure_steps = {measure}
[slurm]
time = "00:06:00"
gpu_request = "none"
mem = "3G"
[environment.env]
OMP_NUM_THREADS = "1"
LD_LIBRARY_PATH = "{libs}"
"""


def test_oneflow_wdl_real_train_py_two_vocab_sizes_give_the_wdl_table(tmp_path):
    data = tmp_path / "wdl_ofrecord"
    env = {**os.environ, "LD_LIBRARY_PATH": nvidia_libs(_py)}
    p = subprocess.run([str(_py), str(OF / "wdl_ofrecord.py"), str(data), "--records", "1024", "--vocab",
                        str(min(VOCABS))], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    text = MATRIX.format(batch=BATCH, vocabs=", ".join(map(str, VOCABS)), python=_py, script=OF / "wdl_on_cpu.py",
                         data=data, warmup=WARMUP, measure=MEASURE, libs=nvidia_libs(_py))
    logs, runs = submit_and_wait(tmp_path, text, 420)
    assert len(runs) == len(VOCABS)
    steps = WARMUP + MEASURE
    reasons = {}
    for run in runs:
        log = run.log.read_text()
        assert run.status == Status.OK, log[-4000:]
        vocab = run.cell.param("deep_vocab_size")
        script = run.script.read_text()
        assert f"{_py} -m oneflow.distributed.launch --nnodes 1 --nproc_per_node 1" in script
        assert f"-m dlperf_slurm.workloads.memwatch -- {OF / 'wdl_on_cpu.py'}" in script
        # train.py's own argparse banner: the flags the suite rendered, as the program read them
        for flag, want in (("deep_vocab_size", vocab), ("wide_vocab_size", vocab), ("batch_size", BATCH),
                           ("max_iter", steps), ("execution_mode", "graph"), ("hidden_units_num", 7)):
            assert re.search(rf"^\s*{flag} \.+ {want}$", log, re.M), (flag, log[-4000:])
        # its logger (utils/logger.py), every iteration, rank 0 only
        iters = [int(i) for i in re.findall(
            rf"^\[rank:0\] iter: (\d+)/{steps}, loss: \d+\.\d+, latency\(ms\): \d+\.\d+ \| \d{{4}}-\S+ \S+$", log,
            re.M)]
        assert iters == list(range(1, steps + 1)), log[-4000:]
        assert "[rank:1]" not in log
        # the sampler's memory event: no figure on the CPU (NVML only), and why
        (event,) = [json.loads(x) for x in re.findall(r"^:::DLPERF (\{\"event\":\"memory\".*)$", log, re.M)]
        assert event["nvml_gpu0_mib"] is None and event["reason"], event
        reasons[f"deep_vocab_size={vocab}"] = event["reason"]
    summary = collect_summary(logs, "wdl-real")
    cells = {c["variant"]: c for c in summary["cells"]}
    assert sorted(cells) == [f"deep_vocab_size={v}" for v in VOCABS], sorted(cells)
    for c in cells.values():
        assert c["shape"] == "1n1g" and c["n_ok"] == 1 and c["latency_ms"] > 0, c
        assert c["mem_gpu0_mib"] is None and c["mem_peak_mib"] is None, c
        assert reasons[c["variant"]] in c["mem_reason"], c
    md = (logs.parent / "summaries" / "wdl-real.md").read_text()
    section = md.split("## Wide & Deep")[1].split("\n## ")[0]
    assert f"Wide & Deep, 1n1g, global batch {BATCH}, embedding vec size 32, hidden units 7, fp32" in section
    rows = {int(r.split("|")[1]): [x.strip() for x in r.split("|")[2:-1]]
            for r in section.splitlines() if re.match(r"\| \d", r)}
    assert sorted(rows) == list(VOCABS), section
    for v in VOCABS:
        # latency (ms), then GPU memory: empty, NVML has no GPU here
        assert rows[v] == [f"{cells[f'deep_vocab_size={v}']['latency_ms']:.3f}", ""], section
