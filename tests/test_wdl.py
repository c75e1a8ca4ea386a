"""The Wide & Deep suites (oneflow/wdl, hugectr/wdl): parsers on real HugeCTR and OneFlow lines (the logs under
tests/fixtures/real/<program>/<version>/, each described in its SOURCE.toml and in tests/fixtures/real/wdl/SOURCES.md),
the launch specs, the memory sampler wrapper, golden scripts, and DLPerf's published W&D table rebuilt from runs
through the cells' medians and the W&D table."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.collect import cells as cellsmod
from dlperf_slurm.matrix import loader
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.rows import RunRow
from dlperf_slurm.model.status import Status
from dlperf_slurm.report import widedeep, writers
from dlperf_slurm.submit import render
from dlperf_slurm.suites.wdl import workspace_mb
from dlperf_slurm.workloads import memwatch

ROOT = Path(__file__).resolve().parent.parent
REAL = Path(__file__).parent / "fixtures" / "real" / "wdl"  # the reports; the logs are in the corpus layout
LOGS = ("hugectr_core23_e2e_notebook.excerpt.log", "hugectr_v23_issue186.excerpt.log", "hugectr_v3_dlperf_docstring.log",
        "oneflow_models_wdl_2021.docstring.log", "oneflow_models_wdl_of090_cpu_1x1.log",
        "oneflow_benchmark_wdl_2020.docstring.log")


def _real(name: str) -> Path:
    """A real log of the corpus (tests/fixtures/real/<program>/<version>/) by its file name."""
    return next(REAL.parent.rglob(name))

OF, HC = suites.get("oneflow/wdl"), suites.get("hugectr/wdl")


def _parse(suite, path: Path, bs: int, warmup: int, measure: int, nodes=1, gpus=1):
    return suite.parse(lp.read_lines(path), ParseContext(nodes=nodes, gpus_per_node=gpus, batch_size=bs,
                                                         warmup_steps=warmup, measure_steps=measure))


def _iters(path: Path) -> list[tuple[int, float]]:
    """(iteration, printed seconds) of every HugeCTR ``Iter:`` line, read independently of the parser."""
    return [(int(m.group(1)), float(m.group(2))) for m in
            re.finditer(r"Iter: (\d+) Time\(\d+ iters\): ([\d.]+)s", path.read_text())]


def _evals(path: Path) -> list[float]:
    return [float(x) for x in re.findall(r"Eval Time for \d+ iters: ([\d.]+)s", path.read_text())]


# ------------------------------------------------------------------------------------------ real lines

def test_hugectr_core23_logger_eval_time_taken_off_the_next_interval():
    path = _real("hugectr_core23_e2e_notebook.excerpt.log")
    res = _parse(HC, path, bs=2720, warmup=1000, measure=19000)
    assert res.status == Status.OK, res.reason
    iters, evals = _iters(path), _evals(path)
    # the window 1000 -> 20000: the printed intervals 2000..20000, less the 4 evaluations printed before 20000
    inside = [t for i, t in iters if 1000 < i <= 20000]
    assert len(inside) == 19 and len(evals) == 5
    expected = sum(inside) - sum(evals[:4])
    assert res.window["seconds"] == pytest.approx(expected)
    assert res.latency_ms == pytest.approx(1000 * expected / 19000)
    assert res.throughput == pytest.approx(2720 * 19000 / expected)
    assert res.extra["evaluations"] == 5 and res.extra["formats"] == ["hugectr"]
    # what taking the eval time off means on this log: an interval after an evaluation (13.1 s printed) reads
    # like its neighbours (8.6 s) once its eval time is off
    plain = sorted(t for i, t in iters if i not in (5000, 9000, 13000, 17000, 21000))
    after = [t for i, t in iters if i in (5000, 9000, 13000, 17000)]
    for t, e in zip(after, evals):
        assert t > 1.4 * plain[len(plain) // 2] and t - e == pytest.approx(plain[len(plain) // 2], rel=0.01)


def test_hugectr_old_logger_with_mlperf_eval_lines():
    path = _real("hugectr_v23_issue186.excerpt.log")
    res = _parse(HC, path, bs=65536, warmup=3000, measure=6000)
    assert res.status == Status.OK, res.reason
    iters, evals = _iters(path), _evals(path)
    expected = sum(t for i, t in iters if 3000 < i <= 9000) - sum(evals)
    assert res.window == {"start": 3000, "end": 9000, "steps": 6000, "seconds": pytest.approx(expected),
                                   "speed_points": 0}
    assert res.latency_ms == pytest.approx(1000 * expected / 6000)
    assert res.loss_finite is True


def test_hugectr_dlperf_docstring_lines_and_dlperfs_latency_rule():
    path = _real("hugectr_v3_dlperf_docstring.log")
    res = _parse(HC, path, bs=16384, warmup=100, measure=1000)
    assert res.status == Status.OK, res.reason
    # this excerpt has 100, 200 and 1100: the window's ends are 100 and 1100, timed by the 1100 line's interval
    # alone (its 200..1000 lines are not in the docstring); DLPerf averaged Time(100 iters) but the first: the
    # same 1000 x mean / 100 on a complete log
    iters = _iters(path)
    assert res.window["steps"] == 1000
    assert res.window["seconds"] == pytest.approx(sum(t for i, t in iters if i > 100))


def test_oneflow_models_2021_stamps_and_dlperfs_printed_latency():
    path = _real("oneflow_models_wdl_2021.docstring.log")
    res = _parse(OF, path, bs=16384, warmup=100, measure=1100)
    assert res.status == Status.OK, res.reason
    # the clock is the lines' millisecond stamps: 13:19:02.625 -> 13:19:05.145 over 1100 iterations
    assert res.window["seconds"] == pytest.approx(2.52)
    assert res.latency_ms == pytest.approx(2520 / 1100)
    printed = [float(x) for x in re.findall(r"latency\(ms\): ([\d.]+)", path.read_text())]
    assert res.extra["printed_latency_ms_mean"] == pytest.approx(sum(printed[1:-1]) / len(printed[1:-1]))


def test_oneflow_models_train_py_real_cpu_run_under_memwatch():
    """train.py itself (OneFlow 0.9.0, graph mode, CPU, tests/test_wdl_slurm.py's run): a line every iteration, the
    window from iteration 2 to 8 on the lines' stamps, and the sampler's memory event with no figure and its reason."""
    from datetime import datetime

    path = _real("oneflow_models_wdl_of090_cpu_1x1.log")
    text = path.read_text()
    stamps = {int(i): datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f") for i, s in re.findall(
        r"^\[rank:0\] iter: (\d+)/8, .* \| (\S+ \S+)$", text, re.M)}
    assert sorted(stamps) == list(range(1, 9))
    res = _parse(OF, path, bs=512, warmup=2, measure=6)
    assert res.status == Status.OK, res.reason
    seconds = (stamps[8] - stamps[2]).total_seconds()
    assert res.window["steps"] == 6
    assert res.window["seconds"] == pytest.approx(seconds)
    assert res.latency_ms == pytest.approx(1000 * seconds / 6)
    assert res.throughput == pytest.approx(512 * 6 / seconds) and res.loss_finite
    printed = [float(x) for x in re.findall(r"latency\(ms\): ([\d.]+)", text)]
    assert res.extra["printed_latency_ms_mean"] == pytest.approx(sum(printed[1:-1]) / len(printed[1:-1]))
    reason = json.loads(text.split(":::DLPERF ")[-1])["reason"]
    assert res.mem_gpu0_mib is None and res.mem_peak_mib is None and reason in res.mem_reason


def test_oneflow_benchmark_2020_unix_stamps_dlperfs_rule():
    path = _real("oneflow_benchmark_wdl_2020.docstring.log")
    res = _parse(OF, path, bs=16384, warmup=100, measure=1000)
    assert res.status == Status.OK, res.reason
    stamps = {int(a): float(b) for a, b in re.findall(r"^(\d+) time ([\d.]+)", path.read_text(), re.M)}
    # DLPerf: (time at first + 1000 - time at first) seconds = ms per iteration over 1000 iterations
    assert res.latency_ms == pytest.approx(stamps[1100] - stamps[100])


def test_oneflow_2020_interval_with_an_evaluation_is_left_out():
    text = ("100 time 1000.0 loss 0.5\n200 time 1002.0 loss 0.5\n200 eval_loss 0.49 eval_auc 0.74\n"
            "300 time 1010.0 loss 0.5\n400 time 1012.0 loss 0.5\n500 time 1014.0 loss 0.5\n")
    res = OF.parse(lp.iter_text_lines(text), ParseContext(nodes=1, gpus_per_node=1, batch_size=16384,
                                                          warmup_steps=100, measure_steps=300))
    assert res.status == Status.OK, res.reason
    assert res.extra["dropped_steps"] == 100 and res.extra["dropped_seconds"] == pytest.approx(8.0)
    assert res.latency_ms == pytest.approx(6000 / 300)  # 2 s per 100 iterations once the 8 s interval is out


def test_hugectr_nan_stop_reads_nonfinite():
    text = ("[HCTR][10:00:00.000][INFO][RK0][main]: Iter: 100 Time(100 iters): 0.3s Loss: 0.1 lr:0.001\n"
            "[HCTR][10:00:00.300][INFO][RK0][main]: Iter: 200 Time(100 iters): 0.3s Loss: 0.1 lr:0.001\n"
            "terminate called after throwing an instance of 'std::runtime_error'\n"
            "  what():  Train Runtime error: Loss cannot converge /hugectr/src/pybind/model.cpp:790 \n")
    res = HC.parse(lp.iter_text_lines(text), ParseContext(nodes=1, gpus_per_node=1, batch_size=16384, warmup_steps=0,
                                                          measure_steps=200))
    assert res.status == Status.NONFINITE and res.loss_finite is False


def test_memory_from_the_sampler_event_and_from_dlperfs_mem_line():
    base = (_real("hugectr_v3_dlperf_docstring.log")).read_text()
    line = memwatch.ev.format_line(memwatch.ev.EV_MEMORY, **{memwatch.ev.NVML_PEAK_USED_MIB: {"n1:0": 4427.0,
                                   "n1:1": 4100.5}, memwatch.ev.NVML_GPU0_MIB: 4427.0})
    res = HC.parse(lp.iter_text_lines(base + line + "\n"), ParseContext(nodes=1, gpus_per_node=2, batch_size=16384,
                                                                        warmup_steps=100, measure_steps=1000))
    assert res.mem_gpu0_mib == 4427.0 and res.mem_peak_mib == 4427.0
    res = HC.parse(lp.iter_text_lines(base + "max device0 memory usage is: 4642045952\n"),
                   ParseContext(nodes=1, gpus_per_node=1, batch_size=16384, warmup_steps=100, measure_steps=1000))
    assert res.mem_gpu0_mib == pytest.approx(4642045952 / 2 ** 20) and "gpu_memory_usage" in res.mem_reason
    res = HC.parse(lp.iter_text_lines(base), ParseContext(nodes=1, gpus_per_node=1, batch_size=16384,
                                                          warmup_steps=100, measure_steps=1000))
    assert res.mem_gpu0_mib is None and "memwatch" in res.mem_reason


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["batch-host-first", "batch-host-last"])
def test_memory_events_of_every_node_are_merged(order):
    """Across nodes the sampler runs once per node: a 2-node log holds two memory events, in the order the nodes
    ended. The run's peak is the maximum over every GPU of every node (method.md), GPU 0 is the batch host's (the
    node the job event was printed on), the utilization the mean over the nodes, whichever node ended last."""
    e = memwatch.ev
    base = (_real("hugectr_v3_dlperf_docstring.log")).read_text()
    job = e.format_line(e.EV_JOB, **{e.HOSTNAME: "n1", e.NODELIST: "n[1-2]"})
    nodes = [{e.NVML_PEAK_USED_MIB: {"n1:0": 4427.0, "n1:1": 4500.0}, e.NVML_GPU0_MIB: 4427.0, e.GPU_UTIL_MEAN: 90.0},
             {e.NVML_PEAK_USED_MIB: {"n2:0": 3900.0, "n2:1": 6100.0}, e.NVML_GPU0_MIB: 3900.0, e.GPU_UTIL_MEAN: 70.0}]
    mem = "".join(e.format_line(e.EV_MEMORY, **nodes[i]) + "\n" for i in order)
    res = HC.parse(lp.iter_text_lines(job + "\n" + base + mem), ParseContext(nodes=2, gpus_per_node=2,
                                                                             batch_size=16384, warmup_steps=100,
                                                                             measure_steps=1000))
    assert res.mem_peak_mib == 6100.0 and res.mem_gpu0_mib == 4427.0 and res.gpu_util == 80.0


# ------------------------------------------------------------------------------------------ launch

def _cell(suite, nodes, gpus, bs, **params):
    return Cell(suite=suite.name, model="wdl", framework=suite.framework, nodes=nodes, gpus_per_node=gpus,
                batch_size=bs, precision="fp32", xla=False, launcher=suite.launcher,
                params=tuple(sorted(params.items())))


def test_hugectr_flags_follow_dlperfs_vocab_x2_script():
    cell = _cell(HC, 1, 8, 2048, deep_vocab_size=3200000, embedding_vec_size=16, hidden_units_num=7)
    argv = HC.program(cell, Measure(repeats=1, warmup_steps=100, measure_steps=1000), HC.options)
    assert argv[:4] == ["python3", "-m", "dlperf_slurm.workloads.memwatch", "--"]
    assert argv[4] == HC.options["script"]
    flags = dict(zip(argv[5::2], argv[6::2]))
    assert flags["--batch_size"] == "16384" and flags["--gpu_num_per_node"] == "8"
    assert flags["--max_iter"] == "1100" and int(flags["--eval_interval"]) > 1100
    # DLPerf's vocab_size_x2.sh at i = 1: wide 12, deep 195 MiB (3.2M keys, vec 16)
    assert flags["--wide_workspace_size_per_gpu_in_mb"] == "12" and flags["--deep_workspace_size_per_gpu_in_mb"] == "195"
    # the script scaled its 3.2M figures (12 x i, 195 x i); floor(vocab x vec x 4 B / MiB) is the same rule, a few
    # MiB larger (never smaller) where the scaled figure rounded down
    for i in (1, 2, 4, 8, 16):
        for vec, dlperf in ((1, 12 * i), (16, 195 * i)):
            assert dlperf <= workspace_mb(3200000 * i, vec) <= 1.02 * dlperf
    no_mem = HC.program(cell, Measure(), {**HC.options, "memwatch": False})
    assert no_mem[0] == "python3" and no_mem[1] == HC.options["script"]


def test_oneflow_flags_follow_dlperfs_2021_script():
    cell = _cell(OF, 1, 8, 2048, deep_vocab_size=409600000, embedding_vec_size=16, hidden_units_num=7)
    argv = OF.program(cell, Measure(repeats=1, warmup_steps=100, measure_steps=1000), OF.options)
    # under the oneflow launcher: python -m oneflow.distributed.launch ... -m memwatch -- train.py ...: the sampler
    # runs the script with the interpreter the launcher forked
    assert argv[:5] == ["python3", "-m", "dlperf_slurm.workloads.memwatch", "--", OF.options["script"]]
    flags = dict(zip(argv[5::2], argv[6::2]))
    assert flags["--batch_size"] == "16384" and flags["--batch_size_per_proc"] == "2048"
    assert flags["--deep_vocab_size"] == flags["--wide_vocab_size"] == "409600000"
    assert flags["--execution_mode"] == "graph" and flags["--max_iter"] == "1100"
    assert OF.environment(cell, OF.options)["ONEFLOW_KERNEL_ENABLE_CUDA_GRAPH"] == "1"


def test_bad_axis_value_is_dropped():
    assert "positive integer" in OF.drop_reason(_cell(OF, 1, 1, 16384, deep_vocab_size="3.2M"))
    assert OF.drop_reason(_cell(OF, 1, 1, 16384, deep_vocab_size=3200000)) is None


def test_memwatch_runs_the_program_and_reports(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import sys; print('hello'); sys.exit(3)\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "SLURM_LOCALID": "0"}
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm.workloads.memwatch", "--period", "0.05", "--",
                        str(prog)], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 3 and p.stdout.startswith("hello\n"), (p.stdout, p.stderr)
    event = memwatch.ev.parse_line(p.stdout.splitlines()[-1])
    assert event[memwatch.ev.EVENT] == memwatch.ev.EV_MEMORY
    # this machine has no GPU (or no pynvml): no figure, and the reason says why
    assert event[memwatch.ev.NVML_GPU0_MIB] is None and event[memwatch.ev.REASON]
    env["SLURM_LOCALID"] = "1"  # another local rank: it becomes the program, no event
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm.workloads.memwatch", "--", str(prog)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 3 and p.stdout == "hello\n"


@pytest.mark.parametrize("name", ["oneflow-wdl", "hugectr-wdl"])
def test_golden_scripts(name, golden):
    m = loader.load(ROOT / "matrices" / f"{name}.toml", site=False)
    run = loader.runs(m, Path("logs") / m.name)[-1]  # the largest cell
    text = render.render_run(m, run)
    golden(f"wdl_{name}", text)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


# ------------------------------------------------------------------- DLPerf's published W&D table, rebuilt

def _tables() -> list[tuple[str, list[list[str]]]]:
    out, title = [], None
    for line in (REAL / "dlperf_wdl_report_v1_vocab_x2.md").read_text().splitlines():
        if line.startswith("### "):
            title = line[4:]
            out.append((title, []))
        elif line.startswith("| ") and line[2].isdigit():
            out[-1][1].append([x.strip() for x in line.strip().strip("|").split("|")])
    return out


def _row(cls, **kw):
    base = {f.name: None for f in dataclasses.fields(cls)}
    base.update(campaign="dlperf", launcher="", variant="", extra={}, provenance={}, flags=[], statuses={},
                reason="", mem_reason="", unit="samples/s", published="time", tiny=False, xla=False,
                precision="fp32", garbled_lines=0, steps_seen=1100, log="", parse_seconds=0.0, hosts="")
    base.update(kw)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in base.items() if k in names})


def test_dlperfs_published_wdl_tables_from_runs():
    published = _tables()
    assert [t for t, _ in published] == [
        "1 node 1 GPU, batch_size = 16384, deep_embedding_vec_size = 16, hidden_units_num = 7",
        "1 node 8 GPUs, batch_size = 16384, deep_embedding_vec_size = 16, hidden_units_num = 7",
        "4 node 32 GPUs, batch_size = 16384, deep_embedding_vec_size = 32, hidden_units_num = 7"]
    for title, rows in published:
        n, g, vec = (int(x) for x in re.match(r"(\d) nodes? (\d+) GPUs?.*vec_size = (\d+)", title).groups())
        g //= n
        runs = []
        for vocab, of_lat, hc_lat, of_mem, hc_mem, _ in rows:
            for fw, lat, mem in (("oneflow", of_lat, of_mem), ("hugectr", hc_lat, hc_mem)):
                variant = f"deep_vocab_size={vocab}, embedding_vec_size={vec}, hidden_units_num=7"
                for k, d in enumerate((-0.4, 0.0, 0.7)):  # 3 repeats around the published median (DLPerf's 3)
                    ok = lat != "OOM"
                    runs.append(_row(RunRow, suite=f"{fw}/wdl", framework=fw, model="wdl",
                                     cell_id=f"{fw}.{vocab}", shape=f"{n}n{g}g", nodes=n, gpus_per_node=g,
                                     devices=n * g, batch_size=16384 // (n * g), global_batch=16384,
                                     variant=variant, repeat=k, run=f"{fw}.{vocab}.r{k}",
                                     status=Status.OK if ok else Status.OOM,
                                     reason="" if ok else "out of memory",
                                     latency_ms=float(lat) + d if ok else None,
                                     throughput=16384e3 / (float(lat) + d) if ok else None,
                                     mem_gpu0_mib=float(mem.replace(",", "")) if ok else None))
        cells = cellsmod.cells_of(runs)
        ((_, headers, got),) = widedeep.tables(cells)
        assert headers[-1] == "mem ratio (oneflow / hugectr)"
        assert len(got) == len(rows)
        for mine, theirs in zip(got, rows):
            assert mine[0] == theirs[0]
            for a, b in ((mine[1], theirs[1]), (mine[2], theirs[2])):
                assert (a == b == "OOM") or float(a) == pytest.approx(float(b), abs=0.01)
            for a, b in ((mine[3], theirs[3]), (mine[4], theirs[4])):
                assert (a == b == "OOM") or a.replace(",", "") == b.replace(",", "")
            assert mine[5] == theirs[5].replace(" ", ""), (title, mine, theirs)
        text = "\n".join(widedeep.markdown(cells))
        assert "OOM" in text or title.startswith("1 node 1")
    assert widedeep.markdown([c for c in cells if c.model != "wdl"]) == []


def test_summary_markdown_has_the_wdl_section_only_with_wdl_cells():
    runs = [_row(RunRow, suite="oneflow/wdl", framework="oneflow", model="wdl", cell_id="c", shape="1n1g", nodes=1,
                 gpus_per_node=1, devices=1, batch_size=16384, global_batch=16384, repeat=0, run="c.r0",
                 variant="deep_vocab_size=3200000, embedding_vec_size=16, hidden_units_num=7", status=Status.OK,
                 latency_ms=56.6, throughput=16384 / 0.0566, mem_gpu0_mib=2557.0)]

    class Result:  # what report.markdown reads
        name, cells, collections = "w", cellsmod.cells_of(runs), []

    Result.runs = runs
    text = writers.markdown(Result)
    assert "## Wide & Deep" in text and re.search(r"\| 3200000 +\| 56\.600 +\| 2,557 +\|", text)
    Result.cells = [dataclasses.replace(c, model="resnet50") for c in Result.cells]
    assert "## Wide & Deep" not in writers.markdown(Result)
    json.dumps(widedeep.as_dicts(cellsmod.cells_of(runs)))


@pytest.mark.parametrize("path", [_real(n) for n in LOGS], ids=lambda p: p.name)
@pytest.mark.parametrize("suite", [OF, HC], ids=["oneflow", "hugectr"])
def test_block_path_reads_like_the_line_loop(suite, path):
    """The Scanner's block path (needles) keeps every line the parsers read (tests/test_fastpath.py's rule)."""
    for ctx in (ParseContext(nodes=1, gpus_per_node=1, batch_size=2720, warmup_steps=1000, measure_steps=19000),
                ParseContext(nodes=1, gpus_per_node=8, batch_size=2048, warmup_steps=100, measure_steps=1000)):
        fast = suite.parse(lp.read_lines(path), ctx)
        ref = suite.parse((line for line in lp.read_lines(path)), ctx)
        assert repr(fast) == repr(ref)


def test_memwatch_local_rank_prefers_the_launchers_variable():
    assert memwatch.local_rank({"SLURM_LOCALID": "0", "LOCAL_RANK": "3"}) == 3
    assert memwatch.local_rank({"SLURM_LOCALID": "2"}) == 2 and memwatch.local_rank({}) == 0
    assert memwatch.command(["train.py", "--x"])[1:] == ["train.py", "--x"]
    assert memwatch.command(["huge_ctr", "--train", "c.json"]) == ["huge_ctr", "--train", "c.json"]


_E2E = """
suite = ["oneflow/wdl", "hugectr/wdl"]
name = "wdl-e2e"
[axes]
devices = ["1x1"]
batch_size = [16384]
deep_vocab_size = [3200000, 51200000]
embedding_vec_size = [16]
[measure]
repeats = 3
warmup_steps = 100
measure_steps = 1000
"""


def _hctr_log(ms: float, mib: float | None) -> str:
    """A HugeCTR run in its core23 logger's format (as in the notebook fixture): Iter every 100, the interval's
    seconds = 100 x ms / 1000; then memwatch's memory event."""
    if mib is None:  # an allocation failure before the first iteration
        return ("[HCTR][10:00:00.000][ERROR][RK0][main]: Runtime error: out of memory cudaMalloc(&ptr, size) "
                "(/hugectr/HugeCTR/src/general_buffer2.cpp:56)\n")
    lines = [f"[HCTR][10:00:{i // 100:02d}.000][INFO][RK0][main]: Iter: {i} Time(100 iters): {ms / 10:.6f}s "
             f"Loss: 0.12 lr:0.001" for i in range(100, 1200, 100)]
    lines.append(memwatch.ev.format_line(memwatch.ev.EV_MEMORY, **{memwatch.ev.NVML_GPU0_MIB: mib}))
    return "\n".join(lines) + "\n"


def _of_log(ms: float, mib: float) -> str:
    """A OneFlow models train.py run in its 2021 format: millisecond stamps ``ms`` apart per iteration."""
    out = []
    for i in range(100, 1200, 100):
        t = 1000.0 + i * ms / 1000
        out.append(f"[rank:0] iter: {i}/1100, loss: 0.08, latency(ms): {ms:.4f} | 2021-12-01 13:"
                   f"{int(t // 60) % 60:02d}:{t % 60:06.3f}")
    out.append(memwatch.ev.format_line(memwatch.ev.EV_MEMORY, **{memwatch.ev.NVML_GPU0_MIB: mib}))
    return "\n".join(out) + "\n"


def test_collect_of_a_two_framework_campaign_gives_the_wdl_table(tmp_path):
    """The pipeline end to end: a matrix of both suites, each run's log in its program's format, `collect`, and the
    summary's W&D table (medians of 3 runs, GPU 0 memory, the ratio, OOM where HugeCTR ran out)."""
    from dlperf_slurm import cli

    path = tmp_path / "wdl.toml"
    path.write_text(_E2E)
    m = loader.load(path, site=False)
    published = {("oneflow", 3200000): (56.601, 2557.0), ("hugectr", 3200000): (65.664, 4427.0),
                 ("oneflow", 51200000): (56.805, 11891.0), ("hugectr", 51200000): (None, None)}
    for run in loader.runs(m, tmp_path / "logs" / m.name):
        ms, mib = published[(run.cell.framework, run.cell.param("deep_vocab_size"))]
        run.log.parent.mkdir(parents=True, exist_ok=True)
        if ms is not None:
            ms += (-0.2, 0.0, 0.3)[run.repeat - 1] if run.repeat <= 3 else 0.0
        text = _of_log(ms, mib) if run.cell.framework == "oneflow" else _hctr_log(ms, mib)
        run.log.write_text(text)
        run.marker.write_text(json.dumps({"rc": 0 if mib else 1, "signal": "", "end": 0, "job": "1"}))
    out = tmp_path / "out"
    assert cli.main(["--logs", str(tmp_path / "logs"), "collect", "--matrix", str(path), "--out", str(out),
                     "--no-plots", "--quiet", "--jobs", "1"]) == 0
    text = (out / "wdl-e2e.md").read_text()
    section = text.split("## Wide & Deep")[1].split("\n## ")[0]
    row = {int(r.split("|")[1]): [x.strip() for x in r.split("|")[2:-1]]
           for r in section.splitlines() if re.match(r"\| \d", r)}
    assert row[3200000] == ["56.601", "65.664", "2,557", "4,427", "58%"]
    assert row[51200000] == ["56.805", "OOM", "11,891", "OOM", "-"]


def test_vendored_wide_and_deep_is_upstreams_byte_for_byte():
    """tests/frameworks/oneflow/wide_and_deep (what tests/test_wdl_slurm.py runs) against the git blob ids its
    SOURCE.md lists (git's blob hash, computed here from each file's bytes), and nothing there beyond them."""
    import hashlib

    folder = ROOT / "tests" / "frameworks" / "oneflow" / "wide_and_deep"
    listed = dict(re.findall(r"^\| `([\w/.]+\.py)` \| `([0-9a-f]{40})` \|$", (folder / "SOURCE.md").read_text(), re.M))
    assert "train.py" in listed and len(listed) == 8
    here = {p.relative_to(folder).as_posix() for p in folder.rglob("*.py") if "__pycache__" not in p.parts}
    assert here == set(listed)
    for rel, blob in listed.items():
        data = (folder / rel).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, rel
