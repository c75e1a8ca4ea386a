"""A log damaged after its run ended (truncated, emptied) is LOG_MISSING saying so, never UNRECOGNISED ("a program
version whose output dlperf_slurm does not know yet": it is the tool's own workload) nor INCOMPLETE, and
``--retry-failed`` runs it again (issue #32, part 4). Driven by a real OK log of the built-in workload."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from dlperf_slurm.collect import runparse
from dlperf_slurm.disk import log_identity
from dlperf_slurm.model.cell import Cell
from dlperf_slurm.model.status import Status
from dlperf_slurm.submit.journal import RETRYABLE

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli  # noqa: E402

REAL = Path(__file__).parent / "fixtures" / "real" / "dlperf_slurm-workload" / "88bbfb2"
LOG = REAL / "resnet50_tiny_1n2g_b4_fp32_torchrun.log"  # OK, window [2, 5], 1n2g, batch 4 (SOURCE.toml)
CELL = Cell(suite="pytorch-ddp/resnet50", model="resnet50", framework="pytorch-ddp", nodes=1, gpus_per_node=2,
            batch_size=4, precision="fp32", xla=False, launcher="torchrun", params=())


def _run(tmp_path: Path, damage) -> tuple[Path, Path]:
    log, marker = tmp_path / "r0.log", tmp_path / "r0.exit"
    shutil.copy(LOG, log)
    marker.write_text(json.dumps({"rc": 0, "signal": "", "end": 1.0, "started": True}))
    end = marker.stat().st_mtime
    os.utime(log, (end - 1, end - 1))  # the run wrote its log, then the job script its exit marker
    damage(log)
    return log, marker


def _spec(log: Path, marker: Path, **kw) -> runparse.RunSpec:
    return runparse.RunSpec(key="r0", cell=CELL, repeat=0, log=str(log), marker=str(marker), warmup_steps=2,
                            measure_steps=5, **kw)


def _later(log: Path, seconds: float = 600) -> None:
    t = log.stat().st_mtime + seconds
    os.utime(log, (t, t))


def _empty(log: Path) -> None:
    log.write_bytes(b"")
    _later(log)


def _cut(log: Path) -> None:  # cut before the window's end: 4 of its 7 steps left
    lines = log.read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if '"step":4,' in line)
    log.write_text("".join(lines[: last + 1]))
    _later(log)


def _header_only(log: Path) -> None:  # cut before the first step
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[: next(i for i, line in enumerate(lines) if '"event":"step"' in line)]))
    _later(log)


def test_the_real_log_reads_ok_as_it_is(tmp_path):
    row = runparse.parse_run(_spec(*_run(tmp_path, lambda log: None)))
    assert row.status == Status.OK and row.throughput, row.reason


@pytest.mark.parametrize("damage", [_empty, _cut, _header_only], ids=["emptied", "cut-in-window", "cut-before-steps"])
def test_a_log_written_after_its_exit_marker_is_log_missing_saying_so(tmp_path, damage):
    """Before: emptied or cut before the first step: UNRECOGNISED "... a program version whose output dlperf_slurm
    does not know yet ... --retry-failed leaves it"; cut in the window: INCOMPLETE."""
    row = runparse.parse_run(_spec(*_run(tmp_path, damage)))
    assert row.status == Status.LOG_MISSING, (row.status, row.reason)
    assert "written 600 s after its run ended" in row.reason and "truncated, emptied" in row.reason, row.reason
    assert "does not know" not in row.reason and row.throughput is None
    assert Status.LOG_MISSING in RETRYABLE


def test_a_log_read_ok_before_and_cut_since_is_log_missing_even_with_its_old_time(tmp_path):
    """The manifest's verdict of the log as it was (OK, its identity then) is the evidence when the log's time
    says nothing (a copy kept its time, ``touch -r``)."""
    log, marker = _run(tmp_path, lambda log: None)
    was = log_identity(log)
    t = log.stat().st_mtime
    _header_only(log)
    os.utime(log, (t, t))
    row = runparse.parse_run(_spec(log, marker, state="OK", log_status="OK", log_id=was))
    assert row.status == Status.LOG_MISSING and "read OK before and has changed since" in row.reason, row.reason


def test_a_log_that_grew_a_nan_after_its_end_still_says_nonfinite(tmp_path):
    """Damage only explains a log that lost its steps: a log with evidence in it (a NaN loss) says what it holds."""
    def nan(log: Path) -> None:
        text = log.read_text()
        i = text.index('"loss":', text.index('"step":3,'))
        j = text.index(",", i)
        log.write_text(text[:i] + '"loss":NaN' + text[j:])
        _later(log)

    row = runparse.parse_run(_spec(*_run(tmp_path, nan)))
    assert row.status == Status.NONFINITE, (row.status, row.reason)


def test_status_and_retry_failed_on_a_campaign_whose_logs_were_cut_after_it_ended(tmp_path):
    """A finished local campaign (status: OK 3), then r0's log emptied, r1's cut before its first step (the time
    kept), r2 untouched: ``status`` says LOG_MISSING for both with the reason, and ``--retry-failed`` submits 2."""
    from testlib import write_matrix

    mx = write_matrix(tmp_path, name="d", repeats=3)
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--templates", str(TEMPLATES),
            "--wait", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    runs = sorted((logs / "d" / "1n1g").glob("*.log"))
    assert len(runs) == 3
    _empty(runs[0])
    t = runs[1].stat().st_mtime
    runs[1].write_text("".join(runs[1].read_text().splitlines(keepends=True)[:3]))
    os.utime(runs[1], (t, t))
    p = cli("--logs", str(logs), "status", "d", "--wide", cwd=tmp_path)
    rows = {line.split("|")[1].strip(): line.split("|")[3:5] for line in p.stdout.splitlines() if ".r" in line
            and line.startswith("|")}
    by_repeat = {int(k.rsplit(".r", 1)[1]): (s.strip(), r.strip()) for k, (s, r) in rows.items()}
    assert [by_repeat[i][0] for i in range(3)] == ["LOG_MISSING", "LOG_MISSING", "OK"], p.stdout
    assert "after its run ended" in by_repeat[0][1] and "read OK before" in by_repeat[1][1], p.stdout
    # --wide prints every reason whole (it cut them at 110 characters: a cut once hid "torchrun: command not found")
    assert all(len(by_repeat[i][1]) > 110 and by_repeat[i][1].endswith("--retry-failed runs it again")
               for i in (0, 1)), p.stdout
    narrow = cli("--logs", str(logs), "status", "d", cwd=tmp_path, env={"COLUMNS": "100"}).stdout
    assert max(len(line) for line in narrow.splitlines() if line.startswith("|")) <= 100, narrow  # still fits
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--templates",
            str(TEMPLATES), "--retry-failed", "--dry-run", cwd=tmp_path)
    assert "submitting 2 as" in p.stdout, p.stdout + p.stderr
    # the summary's flag is relative to the planned repeats (it said "fewer than 5 of 7" on a 3-repeat matrix)
    p = cli("--logs", str(logs), "collect", "d", "--no-plots", "--no-store", "--out", str(tmp_path / "s"), cwd=tmp_path)
    md = (tmp_path / "s" / "d.md").read_text()
    assert "`few OK` (fewer than 3 of 3 runs OK" in md and "5 of 7 runs" not in md, md
    assert "| 1/3    | few OK; 2 LOG_MISSING |" in md, md
