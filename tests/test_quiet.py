"""Quiet by default at scale (#36): ``status`` past a screenful shows the cells and the failed runs (``--runs``:
every run), ``submit --dry-run`` says a line a cell, ``plan`` past a screenful summarises (``--wide``, ``--out``),
and ``submit --wait`` / ``collect --watch`` say the time left (one estimate, :mod:`dlperf_slurm.campaign.eta`)."""

from __future__ import annotations

import time
import types
from pathlib import Path

import pytest

from dlperf_slurm.campaign import eta, monitor
from dlperf_slurm.campaign.manifest import Manifest
from dlperf_slurm.campaign.records import Decision
from dlperf_slurm.cli import main
from dlperf_slurm.matrix import loader as matrix_mod
from dlperf_slurm.model.status import Status

ROOT = Path(__file__).resolve().parent.parent


def _matrix(tmp_path: Path, cells: int, repeats: int, devices: str = '"1x1"') -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    mx = tmp_path / "q.toml"
    mx.write_text(f'suite = "pytorch-ddp/resnet50"\nname = "q"\n[axes]\ndevices = [{devices}]\n'
                  f'batch_size = [{", ".join(str(b) for b in range(1, cells + 1))}]\n[options]\ntiny = true\n'
                  f'[measure]\nrepeats = {repeats}\n[slurm]\ngpu_request = "none"\n')
    return mx


def _campaign(tmp_path: Path, cells: int, repeats: int, failed: int = 0, ended: bool = True) -> Path:
    """``tmp_path/logs/q``: cells x repeats runs recorded as submitted to the local executor; ``ended``: every run
    OK but the first ``failed`` (FAILED), else every run PENDING."""
    m = matrix_mod.load(_matrix(tmp_path, cells, repeats), site=False)
    cdir = tmp_path / "logs" / "q"
    cdir.mkdir(parents=True)
    runs = matrix_mod.runs(m, cdir)
    man = Manifest(cdir, create=True)
    try:
        man.sync(m, runs)
        now = time.time()
        man.record_submission(token="t", name="q-t", executor="local", options={}, held=False,
                              runs=[(r.key, None, {}) for r in runs], now=now)
        man.record_ids(token="t", executor="local", job_id="local-t",
                       ids=[(r.key, f"local-t_{i}", "local-t", i) for i, r in enumerate(runs)])
        if ended:
            man.settle([Decision(key=r.key, status=Status.FAILED if i < failed else Status.OK,
                                 reason=f"exit code 1: boom {i}" if i < failed else "", exit_code=int(i < failed),
                                 ended_at=now) for i, r in enumerate(runs)], now)
    finally:
        man.close()
    return cdir


def _report(cdir: Path, **kw) -> str:
    m = Manifest(cdir)
    try:
        return monitor.status_report(m, **kw)
    finally:
        m.close()


# -- the time left: one estimate


def test_time_left_is_unknown_until_a_run_ends_then_the_rate_since_the_start():
    assert eta.time_left(100.0, 0, 160.0, 0, 10) is None  # nothing ended since the watch began
    assert eta.time_left(100.0, 4, 160.0, 4, 10) is None  # 4 had ended before it began: no rate yet
    assert eta.time_left(100.0, 0, 100.0, 3, 10) is None  # no time passed
    assert eta.time_left(100.0, 0, 160.0, 2, 10) == pytest.approx(300.0)  # 2 a minute: 10 more in 5 minutes
    assert eta.time_left(100.0, 4, 160.0, 6, 10) == pytest.approx(300.0)  # the same rate, counted from the start
    assert eta.time_left(100.0, 0, 160.0, 2, 0) == 0.0
    assert [eta.time_left_text(s) for s in (None, 0.4, 44.6, 89, 90, 725, 5399, 5400, 7500)] == [
        "time left: unknown", "time left: ~0 s", "time left: ~45 s", "time left: ~89 s", "time left: ~2 min",
        "time left: ~12 min", "time left: ~90 min", "time left: ~1 h 30 min", "time left: ~2 h 05 min"]
    clock = eta.Clock()
    assert clock.text(3, 7, now=1000.0) == "time left: unknown" and (clock.start, clock.ended_at_start) == (1000, 3)
    assert clock.text(3, 7, now=1030.0) == "time left: unknown"
    assert clock.text(5, 5, now=1060.0) == "time left: ~2 min"  # 2 ended in 60 s: 5 more in 150 s


def test_submit_wait_progress_line_says_the_time_left(tmp_path, monkeypatch):
    """monitor.wait (``submit --wait``): its line says 'time left: unknown' until a run ends, then the estimate
    from the rate runs ended (here 2 a minute), and nothing of it once every run has ended."""
    cdir = _campaign(tmp_path, cells=3, repeats=2, ended=False)
    now = [1000.0]
    monkeypatch.setattr(eta, "time", types.SimpleNamespace(time=lambda: now[0]))
    rounds = []

    def two_runs_end(m, schedulers, out=None):  # every round after the first: a minute, and two more runs end
        rounds.append(1)
        if len(rounds) == 1:
            return 0
        now[0] += 60.0
        pending = m.runs(statuses=[Status.PENDING])[:2]
        m.settle([Decision(key=r.key, status=Status.OK, reason="", exit_code=0, ended_at=now[0]) for r in pending],
                 now[0])
        return len(pending)

    monkeypatch.setattr(monitor, "refresh", two_runs_end)
    lines: list[str] = []
    m = Manifest(cdir)
    try:
        final = monitor.wait(m, {}, out=lines.append, poll=monitor.Backoff(0.0, 0.0))
    finally:
        m.close()
    assert final == {Status.OK: 6}
    assert len(lines) == 4, lines
    assert lines[0].endswith("0/6 done  PENDING 6  time left: unknown"), lines
    assert lines[1].endswith("2/6 done  OK 2  PENDING 4  time left: ~2 min"), lines  # 4 more at 2 a minute
    assert lines[2].endswith("time left: ~60 s"), lines
    assert lines[3].endswith("6/6 done  OK 6"), lines


# -- status: past a screenful, the cells and the failed runs


def test_status_shows_every_run_when_it_fits_else_the_cells_and_the_failed_runs(tmp_path):
    small = _campaign(tmp_path / "s", cells=2, repeats=3, failed=1)
    text = _report(small, show_runs=None, height=24)
    assert ".r2 " in text and "--runs shows each" not in text and len(text.splitlines()) < 24
    big = _campaign(tmp_path / "b", cells=10, repeats=7, failed=3)  # 70 runs: more than a screen
    text = _report(big, show_runs=None, height=24, wide=False)
    lines = text.splitlines()
    assert lines[0].endswith("70 runs: OK 67  FAILED 3") and lines[-1] == "70 runs: --runs shows each"
    assert "failed runs (3 of 70):" in lines and sum(" FAILED " in line and ".r" in line for line in lines) == 3
    assert not any(".r" in line and "| OK " in line for line in lines)  # no OK run listed
    assert sum(line.startswith("| resnet50") for line in lines) == 10 + 3  # a row a cell, a row a failed run
    assert text.count("boom") == 3
    every = _report(big, show_runs=True, height=24)
    assert sum(".r" in line and "| OK " in line for line in every.splitlines()) == 67
    assert "--runs" not in every
    assert _report(big, show_runs=None, height=200) == every  # a taller terminal: every run
    cells = _report(big, show_runs=False)
    assert "failed runs" not in cells and "--runs" not in cells and ".r0" not in cells


def test_status_past_a_screenful_of_cells_names_the_failing_ones(tmp_path):
    """More cells than a screen: a line of how many are done, not ended and failing, the failing cells (the first
    20, the rest counted), and a line naming --cells and --runs; --cells: every cell."""
    cdir = _campaign(tmp_path, cells=60, repeats=2, failed=50)  # the first 25 cells fail both runs
    text = _report(cdir, show_runs=None, height=24, wide=False)
    lines = text.splitlines()
    assert "60 cells: 35 every run OK, 25 with a failure" in lines, text
    assert "cells with a failure (25 of 60):" in lines
    assert "... and 5 more cells with a failure" in lines and "... and 30 more failed runs" in lines
    assert sum(line.startswith("| resnet50") for line in lines) == 20 + 20  # the failing cells, the failed runs
    assert "failed runs (50 of 120):" in lines and text.count("boom") == 20
    assert lines[-1] == "60 cells, 120 runs: --cells shows each cell, --runs each run"
    assert not any("| 2/2 " in line for line in lines)  # no cell whose runs are all OK
    cells = _report(cdir, show_runs=False)
    assert sum(line.startswith("| resnet50") for line in cells.splitlines()) == 60
    going = _campaign(tmp_path / "p", cells=60, repeats=2, ended=False)
    text = _report(going, show_runs=None, height=24)
    assert "60 cells: 60 not ended" in text.splitlines() and "with a failure" not in text, text


def test_status_names_at_most_twenty_failed_runs_and_counts_the_rest(tmp_path):
    cdir = _campaign(tmp_path, cells=5, repeats=7, failed=26)
    lines = _report(cdir, show_runs=None, height=24).splitlines()
    assert "failed runs (26 of 35):" in lines and "... and 6 more failed runs" in lines
    assert sum(line.startswith("| resnet50") and " FAILED " in line and ".r" in line for line in lines) == 20


def test_status_cli_default_runs_and_cells(tmp_path, capsys, monkeypatch):
    _campaign(tmp_path, cells=10, repeats=7, failed=1)
    logs = str(tmp_path / "logs")
    monkeypatch.setenv("LINES", "24")  # a 24-line terminal, whatever runs the test
    assert main(["--logs", logs, "status", "q", "--no-refresh"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("70 runs: --runs shows each") and len(out.splitlines()) < 30
    assert main(["--logs", logs, "status", "q", "--no-refresh", "--runs"]) == 0
    out = capsys.readouterr().out
    assert "--runs" not in out and len(out.splitlines()) > 70
    assert main(["--logs", logs, "status", "q", "--no-refresh", "--cells"]) == 0
    out = capsys.readouterr().out
    assert "failed runs" not in out and "--runs" not in out
    monkeypatch.setenv("LINES", "100")
    assert main(["--logs", logs, "status", "q", "--no-refresh"]) == 0
    assert "--runs" not in capsys.readouterr().out


# -- submit --dry-run: a line a cell


def test_dry_run_says_a_line_a_cell_not_a_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DLPERF_SLURM_GPUS_PER_NODE", "8")
    assert main(["--logs", str(tmp_path / "logs"), "submit", str(ROOT / "matrices" / "bert.toml"), "--no-site",
                 "--executor", "local", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    would = [line for line in lines if "would be submitted" in line]
    skipped = [line for line in lines if line.startswith("  skipped ")]
    assert len(would) == 12 and len(skipped) == 12 and len(lines) < 40, lines  # 84 runs each way, 7 a cell
    assert all(": 7 runs would be submitted: " in line and line.endswith("_6.sbatch") for line in would), would
    assert all(" (7 runs): needs " in line for line in skipped), skipped


# -- plan: past a screenful, a summary


def test_plan_past_a_screenful_summarises_and_wide_or_out_give_the_whole_table(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LINES", "24")
    mx = _matrix(tmp_path, cells=30, repeats=7, devices='"1x1", "1x2", "1x4"')  # 90 cells
    assert main(["plan", str(mx), "--no-site"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "90 cells; cells per value:" in lines and "  shape: 1n1g 30, 1n2g 30, 1n4g 30" in lines
    assert any(line.startswith("  batch/dev: 1 3, 2 3, 3 3,") and line.endswith("... (22 more values)")
               for line in lines), lines
    assert "... 85 more cells: --wide for the whole table, or --out FILE" in lines
    assert sum(line.startswith("| resnet50") for line in lines) == 5 and len(lines) < 35
    assert "90 cells x 7 repeats = 630 runs; window: skip 20 steps, measure 100" in lines
    assert main(["plan", str(mx), "--no-site", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert sum(line.startswith("| resnet50") for line in wide.splitlines()) == 90 and "more cells" not in wide
    dest = tmp_path / "plan.txt"
    assert main(["plan", str(mx), "--no-site", "--out", str(dest)]) == 0
    said = capsys.readouterr().out
    assert said.splitlines()[-1] == f"wrote the whole plan (90 cells, every column) to {dest}"
    assert wide.startswith(dest.read_text().rstrip("\n"))  # the whole plan (--wide's, the cluster's lines aside)
    assert sum(line.startswith("| resnet50") for line in dest.read_text().splitlines()) == 90


def test_plan_that_fits_is_the_whole_table(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LINES", "24")
    assert main(["plan", str(_matrix(tmp_path, cells=3, repeats=7)), "--no-site"]) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("| resnet50") for line in out.splitlines()) == 3
    assert "cells per value" not in out and "more cells" not in out
