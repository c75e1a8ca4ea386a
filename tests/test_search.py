"""``search``: the largest batch size that runs without OOM, per cell — doubling, then bisection, one short probe
each through the normal submit path (local executor; the test payload OOMs above DLPERF_TEST_OOM_ABOVE), resumable,
then the found value with the normal repeats, and the tables say "max N"."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.matrix import search  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

MATRIX = """suite = "pytorch-ddp/resnet50"
name = "s"
[axes]
devices = ["1x1"]
batch_size = [1]
"env.DLPERF_TEST_OOM_ABOVE" = ["37", "100"]
[measure]
repeats = 2
warmup_steps = 1
measure_steps = 1
"""


def test_search_finds_each_cells_boundary_resumes_and_runs_the_found_value(tmp_path):
    mx = tmp_path / "s.toml"
    mx.write_text(MATRIX)
    logs = tmp_path / "logs"
    args = ["--logs", str(logs), "search", str(mx), "--executor", "local", "--no-site", "--templates", str(TEMPLATES),
            "--start", "8", "--limit", "1024", "-j", "2", "--probe-steps", "1,1"]
    p = cli(*args, "--wait")
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((logs / "s.search" / "search.json").read_text())
    got = {c["cell"].split("OOM_ABOVE-")[1]: c for c in doc["cells"]}
    assert got["37"]["max"] == 37 and got["37"]["first_oom"] == 38
    assert got["100"]["max"] == 100 and got["100"]["first_oom"] == 101
    for c in doc["cells"]:  # doubling 8 -> 16 -> 32 -> 64 (-> 128), then bisection down to a gap of 1
        assert len(c["probes"]) <= search.bound(8, 1024, 1), c
        statuses = {p["value"]: p["status"] for p in c["probes"]}
        assert all((s == Status.OK) == (v <= int(c["cell"].split("OOM_ABOVE-")[1])) for v, s in statuses.items())
        assert set(statuses.values()) <= {Status.OK, Status.OOM}  # an OOM probe reads OOM, not FAILED
    # the found values ran with the normal repeats in the campaign itself
    runs = manifest.load_manifest(logs / "s")
    assert sorted((r.cell.batch_size, r.status) for r in runs) == [(37, Status.OK)] * 2 + [(100, Status.OK)] * 2
    # resumable: a second search reuses every probe (no new probe run) and finds the same
    before = len(manifest.load_manifest(logs / "s.search"))
    p = cli(*args, "--no-run")
    assert p.returncode == 0 and len(manifest.load_manifest(logs / "s.search")) == before, p.stdout
    # the results table (cell, result, probes, values probed) fits 100 columns: the cell ids of this matrix are long
    rows = [line.split()[1:4] for line in p.stdout.splitlines() if line.startswith("resnet50.")]
    assert sorted(rows) == sorted([["max", k, str(len(c["probes"]))] for k, c in got.items()]), p.stdout
    assert max(len(line) for line in p.stdout.splitlines() if str(tmp_path) not in line) <= 100, p.stdout
    wide = cli(*args, "--no-run", "--wide")
    assert wide.returncode == 0 and max(len(line) for line in wide.stdout.splitlines()) > 100
    assert "38: OOM" in wide.stdout and "101: OOM" in wide.stdout  # every probe of the uncut table
    # the tables say it
    out = tmp_path / "summaries"
    p = cli("--logs", str(logs), "collect", "s", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    cells = json.loads((out / "s.json").read_text())["cells"]
    assert sorted(c["searched"].split(" (")[0] for c in cells) == ["max 100", "max 37"]
    assert "max 37 (batch_size," in (out / "s.md").read_text()


@pytest.mark.parametrize("boundary", [1, 7, 8, 9, 15, 16, 17, 100, 1023, 1024, 5000])
def test_the_probe_sequence_finds_any_boundary_within_the_bound(boundary):
    s = search.Search(key="c", axis="batch_size", start=8, limit=1024, step=1)
    while (v := s.next_value()) is not None:
        s.probes[v] = Status.OK if v <= boundary else Status.OOM
    assert len(s.probes) <= search.bound(8, 1024, 1) == 8 + 9
    b = min(max(boundary, 8), 1024)  # doublings up to the first OOM, then the bisection of the gap b..2b
    assert len(s.probes) <= math.floor(math.log2(b / 8)) + 2 + math.ceil(math.log2(b))
    if boundary >= 1024:
        assert s.ok == 1024 and s.oom is None and s.result == "max >= 1024 (limit 1024)"
    else:
        assert (s.ok or 0) == boundary and s.oom == boundary + 1 and s.result == (f"max {boundary}" if boundary else "")


def test_step_coarsens_the_bisection():
    s = search.Search(key="c", axis="batch_size", start=64, limit=4096, step=16)
    while (v := s.next_value()) is not None:
        assert v % 16 == 0
        s.probes[v] = Status.OK if v <= 200 else Status.OOM
    assert s.ok == 192 and s.oom == 208


@pytest.mark.parametrize("axis, words", [("data_location", "one of 'device', 'host'"),
                                         ("num_classes", None)])
def test_search_refuses_an_axis_of_words(tmp_path, axis, words):
    """``--axis data_location`` (values 'device'/'host') once probed ``data_location = 16`` and ran runs that could
    only fail (issue #22): a non-numeric axis is refused before anything is written or run; a numeric suite axis
    (num_classes, of the pytorch-ddp suite that has it) is not refused for being one."""
    from dlperf_slurm import suites

    suite = "pytorch-ddp/resnet50" if words else next(n for n in suites.names() if n.startswith("pytorch-ddp/")
                                                       and "num_classes" in suites.get(n).axes)
    mx = tmp_path / "s.toml"
    mx.write_text(MATRIX.replace('suite = "pytorch-ddp/resnet50"', f'suite = "{suite}"'))
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "search", str(mx), "--axis", axis, "--executor", "local", "--no-site",
            "--templates", str(TEMPLATES), "--no-run")
    if words:
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
        assert f"--axis {axis}" in p.stderr and words in p.stderr, p.stderr
        assert not (logs / "s").exists() or not list((logs / "s").rglob("*.sbatch")), "probes were written"
    else:
        assert "search finds the largest value of a numeric axis" not in p.stdout + p.stderr, p.stdout + p.stderr


def test_search_into_a_campaign_submitted_with_another_matrix_is_refused(tmp_path):
    """One campaign, one matrix: a plain `submit` made campaign s with batch 1; a `search` of the same name
    would put its found batch sizes into it. After its probes (their own campaign, s.search) it stops with one
    line naming what changed, and the campaign holds its own runs alone."""
    mx = tmp_path / "s.toml"
    mx.write_text(MATRIX)
    logs = tmp_path / "logs"
    common = ["--executor", "local", "--no-site", "--templates", str(TEMPLATES)]
    p = cli("--logs", str(logs), "submit", str(mx), *common, "--wait")
    assert p.returncode == 0, p.stdout + p.stderr
    before = sorted(r.key for r in manifest.load_manifest(logs / "s"))
    p = cli("--logs", str(logs), "search", str(mx), *common, "--start", "8", "--limit", "64", "--probe-steps", "1,1")
    assert p.returncode == 2, p.stdout + p.stderr
    [line] = [x for x in p.stderr.splitlines() if x.strip()]
    assert "was submitted with another matrix" in line and "give the matrix another name" in line, line
    assert sorted(r.key for r in manifest.load_manifest(logs / "s")) == before
