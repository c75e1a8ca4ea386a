"""The summary writers' file formats: the CSV written with the csv module (issue #13: no pandas)."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from dlperf_slurm import collect, report
from dlperf_slurm.rows import CellRow, RunRow, columns

from test_collect import make_tree


def _result(tmp_path: Path):
    root = tmp_path / "t"
    make_tree(root, "tf-cnn/resnet50")  # with an OOM cell and a run cut short: empty fields
    return collect.collect([collect.runs_from_tree(root, "tf-cnn/resnet50", 5, 20)], jobs=1)


def test_csv_fields_read_back_as_written(tmp_path):
    res = _result(tmp_path)
    odd = dataclasses.replace(res.runs[0], reason='exit 1, "killed"\nsecond line', throughput=1e-05,
                              latency_ms=float("nan"), window_start=None, extra={"b": [1, 2.5], "a": None})
    res.runs.append(odd)
    report.write_csv(res, tmp_path, "t")
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
