"""The job script's guard against ghost starts (templates/sbatch.sh.j2), run with bash on this machine.

A restarted slurmctld can start a task again whose run already ran (it came back from a state saved before the
task started). The script must then (i) see the run's exit marker, exit 0 at once and leave the log and the
marker untouched, saying so in one stderr line; (ii) never truncate an earlier start's log: a log already at
the run's path (a start that left a log and no marker) is moved to ``<log>.ghost-N`` first.

Scripts are written by the CLI (``dlperf_slurm render``) with the fake payloads of tests/slurm/templates;
no Slurm is involved.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402


@pytest.fixture
def script(tmp_path):
    """(script, log, marker) of a one-run matrix whose payload is the fake ``ok`` one."""
    mx = write_matrix(tmp_path, name="guard", modes=("ok",), repeats=1)
    out = tmp_path / "out"
    p = cli("render", str(mx), "--no-site", "--out", str(out), "--templates", str(TEMPLATES), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    [path] = sorted(out.rglob("*.sbatch"))
    text = path.read_text()
    log, marker = path.with_suffix(".log"), path.with_suffix(".exit")  # beside the script, under its campaign folder
    assert f"\nexport DLPERF_CAMPAIGN_DIR={out.resolve()}\n" in text, text
    assert f"\nDLPERF_LOG=$DLPERF_CAMPAIGN_DIR/{log.relative_to(out)}\n" in text, text
    return path, log, marker


def _run(script: Path, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "DLPERF_"))}
    e["DLPERF_TEST_STARTS"] = str(tmp_path / "starts")
    e.update(env)
    return subprocess.run(["bash", str(script)], env=e, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _starts(tmp_path: Path) -> int:
    f = tmp_path / "starts"
    return len(f.read_text().splitlines()) if f.exists() else 0


def _payload_starts(text: str) -> int:
    """Start lines of the fake payload in a log (its provenance line quotes the payload too)."""
    return sum(1 for line in text.splitlines() if line.startswith("fake payload ") and " mode=" in line)


def _snapshot(*paths: Path) -> dict:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in paths}


@pytest.mark.parametrize("first_rc", [0, 3])
def test_script_of_an_ended_run_exits_at_once_leaving_log_and_marker(script, tmp_path, first_rc):
    path, log, marker = script
    r = _run(path, tmp_path)
    assert r.returncode == 0 and _starts(tmp_path) == 1, (r.stderr, log.read_text())
    if first_rc:  # the run ended in failure: a ghost must not "repair" it either
        marker.write_text(marker.read_text().replace('"rc": 0', f'"rc": {first_rc}'))
    before = _snapshot(log, marker)
    listing = sorted(p.name for p in log.parent.iterdir())

    r = _run(path, tmp_path, SLURM_JOB_ID="4242")  # the ghost start
    assert r.returncode == 0
    assert _starts(tmp_path) == 1, "the payload ran again"
    assert _snapshot(log, marker) == before, "the ghost touched the log or the marker"
    assert sorted(p.name for p in log.parent.iterdir()) == listing, "the ghost left files behind"
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "already ended" in lines[0] and str(marker) in lines[0] and "4242" in lines[0], \
        r.stderr


def test_script_never_truncates_an_earlier_start_log(script, tmp_path):
    path, log, marker = script
    log.parent.mkdir(parents=True, exist_ok=True)
    first = "fake payload first start, killed before its marker\n" + "x" * 5000 + "\n"
    log.write_text(first)  # a start that left a partial log and no marker
    assert not marker.exists()

    r = _run(path, tmp_path)
    assert r.returncode == 0, (r.stderr, log.read_text())
    ghost1 = log.with_name(log.name + ".ghost-1")
    assert ghost1.read_text() == first, "the earlier start's log was not kept whole"
    text = log.read_text()
    assert first not in text and _payload_starts(text) == 1 and '"rc": 0' in marker.read_text()
    assert "ghost-1" in r.stderr

    # a second ghost start over a partial log (its marker gone, as after a crash) goes to the next free name
    second = log.read_text()
    marker.unlink()
    r = _run(path, tmp_path)
    assert r.returncode == 0
    assert ghost1.read_text() == first
    assert log.with_name(log.name + ".ghost-2").read_text() == second
    assert _payload_starts(log.read_text()) == 1 and _starts(tmp_path) == 2


def test_first_start_writes_a_fresh_log_and_no_ghost_file(script, tmp_path):
    path, log, marker = script
    r = _run(path, tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert _payload_starts(log.read_text()) == 1 and '"rc": 0' in marker.read_text()
    assert not list(log.parent.glob("*.ghost-*"))
