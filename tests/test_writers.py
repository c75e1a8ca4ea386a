"""The summary writers' file formats: the CSV written with the csv module, the plots as SVG text (issue #13: no
pandas, no matplotlib)."""

from __future__ import annotations

import csv
import dataclasses
import io
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from test_collect import make_tree

from dlperf_slurm import stats
from dlperf_slurm.collect import drive, gather
from dlperf_slurm.model.rows import CellRow, RunRow, columns
from dlperf_slurm.report import plots, writers

SVG = "{http://www.w3.org/2000/svg}"


def _result(tmp_path: Path):
    root = tmp_path / "t"
    make_tree(root, "tf-cnn/resnet50")  # with an OOM cell and a run cut short: empty fields
    return drive.collect([gather.runs_from_tree(root, "tf-cnn/resnet50", 5, 20)], jobs=1)


def test_csv_fields_read_back_as_written(tmp_path):
    res = _result(tmp_path)
    odd = dataclasses.replace(res.runs[0], reason='exit 1, "killed"\nsecond line', throughput=1e-05,
                              latency_ms=float("nan"), window_start=None, extra={"b": [1, 2.5], "a": None})
    res.runs.append(odd)
    writers.write_csv(res, tmp_path, "t")
    text = (tmp_path / "t.runs.csv").read_text()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == list(columns(RunRow)) and len(rows) == 1 + len(res.runs) and "\r" not in text
    got = dict(zip(rows[0], rows[-1]))
    assert got["reason"] == odd.reason and got["throughput"] == "1e-05" and got["latency_ms"] == ""
    assert got["extra"] == '{"a": null, "b": [1, 2.5]}' and got["status"] == "OK" and got["xla"] == "False"
    # an int column keeps its ints when another run has none (pandas wrote window_end 25 as "25.0" then)
    assert got["window_start"] == "" and got["window_end"] == str(odd.window_end) and "." not in got["window_end"]
    assert got["throughput_time"] == repr(odd.throughput_time)  # floats exactly, as repr writes them
    cells = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert list(cells[0]) == list(columns(CellRow)) and len(cells) == len(res.cells)
    oom = next(c for c in cells if c["status"] == "OOM")
    assert oom["median"] == "" and oom["statuses"] == '{"OOM": 3}' and oom["flags"].startswith("[")


def test_svg_plot_is_well_formed_with_labels_from_user_data(tmp_path):
    res = _result(tmp_path)
    odd = 'a&b <c> "d"'  # a variant and a campaign as users may write them
    cells = [dataclasses.replace(c, variant=odd, campaign=odd) for c in res.cells]
    svg = plots.draw(plots.plottable(cells, "tf-cnn/resnet50"), "tf-cnn/resnet50", True)
    assert odd not in svg and "&amp;b &lt;c&gt; &quot;d&quot;" in svg
    root = ElementTree.fromstring(svg)
    assert root.tag == f"{SVG}svg" and (root.get("width"), root.get("height")) == ("1320", "528")
    texts = [t.text for t in root.iter(f"{SVG}text")]
    label = f"fp32, b8, {odd} [{odd}]"
    assert texts.count(label) == 2 and "tf-cnn/resnet50: scaling efficiency vs 1 GPU" in texts and "ideal" in texts
    one = next(c for c in cells if c.shape == "1n1g")
    titles = [t.text for t in root.iter(f"{SVG}title")]  # a tooltip per marker: 2 OK shapes, 2 panels
    assert len(titles) == 4 and f"{label}: 1n1g, median {stats.fmt(one.median)} img/s" in titles[0]
    assert titles[-1].startswith(f"{label}: 1n2g, efficiency ") and titles[-1].endswith("%")
    assert [p for p in root.iter(f"{SVG}polyline") if p.get("stroke-dasharray") and p.get("stroke") == "#1f77b4"]


def test_log_axis_ticks_and_labels():
    lo, hi, ticks = plots.log_ticks(300, 6000)
    assert ticks == [500, 1000, 2000, 5000] and lo < 300 and hi > 6000
    assert [plots.tick_text(t) for t in ticks] == ["500", "1k", "2k", "5k"]
    assert plots.log_ticks(1, 1e6)[2] == [10.0 ** k for k in range(7)]  # decades only over a wide range
    lo, hi, ticks = plots.log_ticks(1197.7, 1198.0)  # a flat line: the axis widens to two ticks
    assert len(ticks) >= 2 and lo <= 1197.7 and hi >= 1198.0 and ticks == sorted(ticks)
    assert plots.tick_text(2500) == "2.5k" and plots.tick_text(0.5) == "0.5" and plots.tick_text(3e6) == "3M"
    assert plots.lin_ticks(110) == [0, 20, 40, 60, 80, 100] and plots.lin_ticks(180)[-1] == 175


def test_the_writers_import_neither_pandas_nor_matplotlib(tmp_path):
    root = tmp_path / "t"
    make_tree(root, "tf-cnn/resnet50", repeats=1, incomplete=None)  # two shapes with a figure: a plot
    code = ("import sys; from dlperf_slurm.collect import drive, gather; from dlperf_slurm.report import writers; "
            f"res = drive.collect([gather.runs_from_tree({str(root)!r}, 'tf-cnn/resnet50', 5, 20)], jobs=1); "
            f"paths = writers.write_all(res, {str(tmp_path / 'out')!r}); "
            "print(sorted(p.suffix for p in paths), [m for m in ('pandas', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent)
    assert out.stdout.strip() == "['.csv', '.csv', '.html', '.json', '.md', '.svg'] []"


def test_markdown_names_the_flavour_its_tables_show(tmp_path):
    """A suite that publishes DLPerf's speed flavour (tf2) shows it in the tables: the method line must say so
    for that suite, not that every figure is the time flavour."""
    root = tmp_path / "t"
    make_tree(root, "tf2/resnet50", repeats=1, oom_shape=None, incomplete=None)
    res = drive.collect([gather.runs_from_tree(root, "tf2/resnet50", 5, 20)], jobs=1)
    assert {c.published for c in res.cells} == {"speed"}
    method = next(line for line in writers.markdown(res).splitlines() if line.startswith("Method"))
    assert "speed flavour, the mean of the printed per-step throughputs over the window: tf2/resnet50" in method
    assert "(time flavour;" not in method
    res = _result(tmp_path)  # tf-cnn publishes the time flavour
    method = next(line for line in writers.markdown(res).splitlines() if line.startswith("Method"))
    assert "(time flavour; the speed flavour" in method


def test_the_json_written_beside_the_other_writers_is_the_one_written_in_turn(tmp_path, monkeypatch):
    """A large summary's JSON is written by a forked process while this one writes the rest: the same files, the
    same paths in the same order, and with the writers' state each file recorded as current (a second write_all
    rewrites nothing); -j 1 keeps every writer here."""
    import json
    import os

    from dlperf_slurm.collect import parsecache, processes

    res = _result(tmp_path)
    forks = []
    real = processes.beside
    monkeypatch.setattr(processes, "beside", lambda *a: forks.append(os.getpid()) or real(*a))
    monkeypatch.setattr(processes, "free_cpus", lambda: 2.0)
    one = writers.write_all(res, tmp_path / "one", plots=False, jobs=1)
    assert forks == []
    monkeypatch.setattr(writers, "BESIDE_RUNS", 1)
    state = parsecache.OutputState(tmp_path / "two" / ".state")
    two = writers.write_all(res, tmp_path / "two", plots=False, state=state)
    assert len(forks) == 1
    assert [p.name for p in one] == [p.name for p in two] and any(p.suffix == ".json" for p in two)
    for a, b in zip(one, two):
        if a.suffix == ".json":
            da, db = json.loads(a.read_text()), json.loads(b.read_text())
            assert da.pop("generated_at") <= db.pop("generated_at") and da == db
        else:  # the md and html say when they were made, to the second
            ta, tb = ([line for line in p.read_text().splitlines() if "Generated " not in line] for p in (a, b))
            assert ta == tb and len(ta) > 3, a.name
    assert len(state.now) == len(two)
    state.begin()  # the next collect of the same result: every file current, none rewritten, none forked for
    seen = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in two}
    assert writers.write_all(res, tmp_path / "two", plots=False, state=state) == two and len(forks) == 1
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in two} == seen


def test_a_writer_process_failure_reaches_the_caller(tmp_path):
    """What the forked writer raises is raised by join (a full disk's OSError keeps its errno, the child's
    traceback as a note; an exception that cannot be passed back comes as a RuntimeError with its words); a child
    that dies says so with its exit code."""
    import errno
    import os
    import signal

    import pytest

    from dlperf_slurm.collect import processes

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    with pytest.raises(OSError) as err:
        processes.beside(full, tmp_path / "x.json")()
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "x.json")
    assert any("in a writer process" in n for n in err.value.__notes__)

    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a} and {b}")

    def odd():
        raise Odd(1, 2)

    with pytest.raises(RuntimeError, match=r"Odd: 1 and 2 \(cannot be passed back"):
        processes.beside(odd)()
    with pytest.raises(processes.ChildDied, match=r"a writer process died \(exit code -9\)"):
        processes.beside(lambda: os.kill(os.getpid(), signal.SIGKILL))()
    assert processes.beside(lambda a, b: [a, b], 1, "x")() == [1, "x"]
    import multiprocessing

    assert multiprocessing.active_children() == []  # every child joined


def test_run_all_falls_back_to_this_process_and_says_its_own_failure_first(monkeypatch):
    """A fork that fails (the user's process limit) or a child that dies (the OOM killer): the call is made here
    instead, the result the same; a call failing here is the failure raised, the child waited for."""
    import errno
    import os
    import signal

    import pytest

    from dlperf_slurm.collect import processes

    here = os.getpid()
    calls = {"a": lambda: ("a", os.getpid()), "b": lambda: ("b", os.getpid())}
    out = processes.run_all(calls, "b")
    assert out["a"] == ("a", here) and out["b"][0] == "b" and out["b"][1] != here and list(out) == ["a", "b"]

    def no_fork(*a):
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    with monkeypatch.context() as m:
        m.setattr(os, "fork", no_fork)
        assert processes.run_all(calls, "b") == {"a": ("a", here), "b": ("b", here)}
    dies = {"a": calls["a"], "b": lambda: os.getpid() == here or os.kill(os.getpid(), signal.SIGKILL)}
    assert processes.run_all(dies, "b") == {"a": ("a", here), "b": True}  # died there, made here

    def bug():
        raise TypeError("a bug in a writer here")

    def full():
        raise OSError(errno.ENOSPC, "No space left on device", "x.json")

    with pytest.raises(TypeError, match="a bug in a writer here"):
        processes.run_all({"a": bug, "b": full}, "b")


def test_a_writer_child_dies_with_its_killed_parent(tmp_path):
    """kill -9 of collect while its JSON is being written beside: the child dies too (PR_SET_PDEATHSIG), so it
    never puts an old summary over what the next collect writes; its file never appears."""
    import os
    import signal
    import subprocess
    import time

    code = ("import os, sys, time\n"
            "from dlperf_slurm.collect import processes\n"
            "def slow(d):\n"
            "    open(d + '/child.pid', 'w').write(str(os.getpid()))\n"
            "    time.sleep(3)\n"
            "    open(d + '/late.json', 'w').write('late')\n"
            "join = processes.beside(slow, sys.argv[1])\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    try:
        assert p.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while not (tmp_path / "child.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int((tmp_path / "child.pid").read_text())
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        time.sleep(4)
        assert not (tmp_path / "late.json").exists(), "the writer outlived its killed parent"
        state = Path(f"/proc/{child}/status")
        assert not state.exists() or "zombie" in state.read_text(), state.read_text()
    finally:
        if p.poll() is None:
            p.kill()
