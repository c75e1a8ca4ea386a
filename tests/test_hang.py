"""Hangs end early: the job script's watchdog stops a run whose log (and heartbeat) stop changing for longer than
its bound, the exit marker says so, and the run reads HANG (with the time it saved) in status and collect.

Here with the local executor (real job scripts, real processes); tests/test_slurm_integration.py does the same on
the Slurm test cluster with the built-in workload."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402


def _alive(env_value: str) -> list[int]:
    """Processes whose environment holds ``env_value`` (the run's own processes carry DLPERF_TEST_GO)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and env_value.encode() in (proc / "environ").read_bytes():
                out.append(int(proc.name))
        except OSError:
            continue
    return out


def test_a_silent_run_is_stopped_at_the_fixed_bound(tmp_path):
    go = tmp_path / "never-created"  # mode wait: the payload waits for this file for ever
    mx = write_matrix(tmp_path, name="hang", modes=("wait", "ok"), repeats=1, time_limit="00:10:00",
                      extra=f'[environment]\nenv = {{ DLPERF_TEST_GO = "{go}" }}\n')
    mx.write_text(mx.read_text().replace("measure_steps = 1", "measure_steps = 1\nhang_timeout = 3\nhang_min = 3"))
    t0 = time.time()
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "-j", "2", "--templates",
            str(TEMPLATES), "--wait", timeout=120)
    took = time.time() - t0
    assert p.returncode == 1, p.stdout + p.stderr  # a failure on purpose
    runs = {r.key.split("MODE-")[1]: r for r in manifest.load_manifest(tmp_path / "logs" / "hang")}
    assert runs["ok.r0"].status == Status.OK  # the watchdog leaves a working run alone
    hung = runs["wait.r0"]
    assert hung.status == Status.HANG, hung.reason
    assert "no progress for" in hung.reason and "hang bound 3 s" in hung.reason and "before its time limit" in hung.reason
    marker = json.loads(hung.marker.read_text())
    assert marker["hang"]["bound_s"] == 3 and marker["hang"]["silent_s"] >= 3 and marker["rc"] != 0
    assert "the job script stops the run (HANG)" in hung.log.read_text()
    assert took < 60  # stopped after seconds, not at the 10-minute limit
    assert not _alive(f"DLPERF_TEST_GO={go}")  # the payload's wait loop is gone with the run
    # status and --retry-failed agree: a HANG is a failure to run again
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--templates", str(TEMPLATES),
            "--retry-failed", "--dry-run")
    assert "submitting 1 as 1" in p.stdout, p.stdout


def test_the_builtin_workload_hang_is_caught_by_its_own_step_time(tmp_path):
    """--hang-at-step: every rank stops at step 4. The fixed bound is 10 minutes; the heartbeat (the median step
    time the workload reports) brings it down to hang_min = 3 s, so the run ends seconds after it stopped."""
    mx = tmp_path / "w.toml"
    mx.write_text((REPO / "matrices" / "smoke.toml").read_text()
                  .replace('name = "smoke"', 'name = "w"').replace('devices = ["1x1", "1x2"]', 'devices = ["1x1"]')
                  .replace("repeats = 3", "repeats = 1\nhang_timeout = 600\nhang_min = 3")
                  .replace("threads = 1", "threads = 1\nhang_at_step = 4"))
    t0 = time.time()
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--wait", timeout=300,
            env={"OMP_NUM_THREADS": "1"})
    took = time.time() - t0
    (run,) = manifest.load_manifest(tmp_path / "logs" / "w")
    assert run.status == Status.HANG, (run.reason, run.log.read_text()[-2000:], p.stdout, p.stderr)
    assert "hang bound 3 s" in run.reason and "at step 3" in run.reason
    heartbeat = Path(os.fspath(run.marker).removesuffix(".exit") + ".heartbeat")
    assert 0 < float(heartbeat.read_text()) < 3  # the median step time it reported
    assert took < 240
