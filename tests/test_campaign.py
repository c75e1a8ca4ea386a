"""campaign.py: manifest, submit only what is missing, SIGKILL mid-submit, refusals, status resolution, CLI.

Slurm is faked here (tests/slurm/fakeslurm.py); the local executor runs real scripts with fake payloads."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import fakeslurm  # noqa: E402
from testlib import REPO, TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm import schedulers  # noqa: E402
from dlperf_slurm.campaign import (
    manifest,  # noqa: E402
    monitor,  # noqa: E402
    records,
)
from dlperf_slurm.model.status import Status  # noqa: E402
from dlperf_slurm.submit import journal  # noqa: E402


def statuses(cdir: Path) -> dict[str, str]:
    return {r.key: r.status for r in manifest.load_manifest(cdir)}


# ------------------------------------------------------------------------------------------ local executor, end to end


def test_local_submit_wait_resubmit_retry_and_force(tmp_path):
    mx = write_matrix(tmp_path, name="loc", modes=("ok", "fail", "oom"), repeats=2)
    logs = tmp_path / "logs"
    args = ["--logs", str(logs), "submit", str(mx), "--executor", "local", "-j", "3", "--templates", str(TEMPLATES)]
    p = cli(*args, "--wait")
    assert p.returncode == 1, p.stderr  # some runs failed, on purpose
    cdir = logs / "loc"
    st = statuses(cdir)
    assert len(st) == 6
    for key, s in st.items():
        assert s == {"ok": Status.OK, "fail": Status.FAILED, "oom": Status.OOM}[key.split("MODE-")[1].split(".")[0]]
    info = manifest.load_campaign(cdir)
    assert info.measure == {"repeats": 2, "warmup_steps": 1, "measure_steps": 1}
    assert info.matrix_copy.read_text() == mx.read_text()
    assert len(info.cells) == 3 and info.cells[0].batch_size == 1
    failed = [r for r in info.runs if r.status == Status.FAILED]
    assert all(r.reason.startswith("exit code 3; ") and r.exit_code == 3 and r.job_id.startswith("local-") for r in failed)
    assert all(r.log.is_file() and r.script.is_file() and r.attempt == 1 for r in info.runs)

    # again: nothing missing, nothing submitted, failures kept
    p = cli(*args)
    assert p.returncode == 0 and "nothing to submit" in p.stdout and "--retry-failed" in p.stdout
    assert statuses(cdir) == st

    # --retry-failed: exactly the 4 failed runs; the old logs are moved aside, never deleted
    old_ok = {r.key: r.job_id for r in info.runs if r.status == Status.OK}
    p = cli(*args, "--retry-failed", "--wait")
    assert "submitting 4 as 1" in p.stdout, p.stdout
    info2 = manifest.load_campaign(cdir)
    for r in info2.runs:
        if r.key in old_ok:
            assert r.job_id == old_ok[r.key] and r.attempt == 1 and not r.previous
        else:
            assert r.attempt == 2 and len(r.previous) == 1
            prev = r.previous[0]
            assert prev["status"] in (Status.FAILED, Status.OOM) and prev["job_id"] != r.job_id
            assert Path(prev["moved"]["log"]).name == r.log.name + ".1" and Path(prev["moved"]["log"]).is_file()
            assert Path(prev["moved"]["marker"]).is_file()

    # --force redoes everything finished
    p = cli(*args, "--force", "--dry-run")
    assert "submitting 6 as 1" in p.stdout and "dry run" in p.stdout

    # status: per cell and per run
    p = cli("--logs", str(logs), "status", "loc", "--wide")
    assert p.returncode == 0
    assert "| resnet50.pytorch-ddp.1x1.b1.fp32.xla0.DLPERF_TEST_MODE-fail | 0/2" in p.stdout
    assert "exit code 3" in p.stdout and "OOM" in p.stdout and "local runner" in p.stdout
    # by default the tables fit 100 columns: the reasons cut, the job ids left out, the ids whole
    p = cli("--logs", str(logs), "status", "loc")
    assert p.returncode == 0 and max(len(line) for line in p.stdout.splitlines()[1:]) <= 100
    assert "| resnet50.pytorch-ddp.1x1.b1.fp32.xla0.DLPERF_TEST_MODE-fail | 0/2" in p.stdout and "…" in p.stdout


def test_local_skips_srun_cells_with_a_reason(tmp_path):
    mx = write_matrix(tmp_path, name="sk", devices=("1x1", "2x1"), repeats=1)
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--templates", str(TEMPLATES),
            "--wait")
    assert p.returncode == 0, p.stderr
    assert "skipped resnet50.pytorch-ddp.2x1" in p.stdout and "needs 2 nodes" in p.stdout
    runs = {r.cell.nodes: r for r in manifest.load_manifest(tmp_path / "logs" / "sk")}
    assert runs[1].status == Status.OK
    assert runs[2].status == Status.UNSUBMITTED and "skipped by the local executor" in runs[2].reason


def test_local_cancel(tmp_path):
    mx = write_matrix(tmp_path, name="cx", modes=("sleep",), repeats=3)
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "-j", "1", "--templates", str(TEMPLATES))
    assert p.returncode == 0, p.stderr
    cdir = logs / "cx"
    t0 = time.time()
    while not any(r.log.exists() for r in manifest.load_manifest(cdir)) and time.time() - t0 < 20:
        time.sleep(0.2)
    p = cli("--logs", str(logs), "cancel", "cx")
    assert "cancel requested for 3 runs" in p.stdout, p.stdout + p.stderr
    m = manifest.Manifest(cdir)
    monitor.wait(m, schedulers.for_campaign(cdir), out=lambda s: None, timeout=30)
    m.close()
    runs = manifest.load_manifest(cdir)
    assert [r.status for r in runs] == [Status.CANCELLED] * 3
    assert sum("while running" in r.reason or "SIGTERM" in r.reason for r in runs) == 1


def test_dry_run_writes_nothing(tmp_path):
    mx = write_matrix(tmp_path, name="dry", repeats=3)
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--dry-run")
    assert p.returncode == 0 and ": 3 runs would be submitted: " in p.stdout and "task 2" not in p.stdout  # a cell
    assert not (tmp_path / "logs").exists()


def test_render_and_submit_say_how_many_cells_the_matrix_dropped(tmp_path, fake):
    """plan lists the cells a suite cannot run (num_classes = 1); render and submit, dry run and real, made the
    others without a word, so a missing cell went unnoticed: one line on stderr says how many, why, and where the
    list is; what they do is unchanged."""
    from testlib import matrix_text

    mx = tmp_path / "drop.toml"
    mx.write_text(matrix_text(name="drop", repeats=1).replace("batch_size = [1]\n",
                                                              "batch_size = [1]\nnum_classes = [1000, 1]\n"))
    logs = tmp_path / "logs"
    for argv in (["render", str(mx), "--out", str(tmp_path / "r")],
                 ["--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--dry-run"],
                 ["--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--templates", str(TEMPLATES)]):
        p = cli(*argv)
        assert p.returncode == 0, p.stderr
        notes = [line for line in p.stderr.splitlines() if "dropped" in line]
        assert len(notes) == 1 and notes[0].startswith("dlperf-slurm: 1 of 2 cells dropped ("), p.stderr
        assert "num_classes must be" in notes[0] and notes[0].endswith(f"`dlperf-slurm plan {mx}` lists them")
        assert "dropped" not in p.stdout
    assert [p.name for p in (tmp_path / "r").rglob("*.sbatch")] == [
        "resnet50_b1_fp32_num-classes-1000_DLPERF-TEST-MODE-ok_0.sbatch"]
    assert len(fakeslurm.load(fake)["submitted"]) == 1  # the kept cell's run, as before
    fakeslurm.update(fake, lambda s: s.update(sbatch_fail_after=1))  # search's probes: refused, it stops
    p = cli("--logs", str(logs), "search", str(mx), "--executor", "slurm", "--templates", str(TEMPLATES))
    assert p.returncode == 2 and "submission stopped" in p.stderr
    assert sum("1 of 2 cells dropped (" in line for line in p.stderr.splitlines()) == 1, p.stderr


# ------------------------------------------------------------------------------------------ fake Slurm


def _three_groups(tmp_path, name="k", repeats=2):
    # srun: one task per GPU, so 1x1 / 1x2 / 1x3 are three resource sets -> three arrays
    return write_matrix(tmp_path, name=name, devices=("1x1", "1x2", "1x3"), launchers=("srun",), repeats=repeats)


def _submit(logs, mx, *extra, **kw):
    return cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--templates", str(TEMPLATES), *extra,
               **kw)


def _complete_log(run) -> None:
    """The log a finished run of the test payload leaves: its whole 1+1 window (tests/slurm/templates)."""
    run.log.parent.mkdir(parents=True, exist_ok=True)
    run.log.write_text("".join(f':::DLPERF {{"event":"step","step":{s},"time":{s}.5,"loss":1.0}}\n' for s in range(3)))


def _fake_tasks(state) -> list[str]:
    return sorted(fakeslurm.load(state)["jobs"])


def test_a_jobs_energy_from_slurm_accounting_reaches_its_run_row(tmp_path, fake):
    """A site whose energy plugin counts (the fake's ConsumedEnergyRaw): the status that settles a run records its
    job's joules in the manifest once, and collect puts them in the run's row (extra slurm_energy_j)."""
    mx = write_matrix(tmp_path, name="e", modes=("ok",), repeats=2)
    logs = tmp_path / "logs"
    assert _submit(logs, mx).returncode == 0
    runs = manifest.load_manifest(logs / "e")
    for i, r in enumerate(runs):
        fakeslurm.set_state(fake, r.job_id, "COMPLETED", energy=[5421, 0][i])  # 0: none counted
        _complete_log(r)
        r.marker.write_text(json.dumps({"rc": 0, "signal": "", "end": time.time(), "job": r.job_id}))
    assert cli("--logs", str(logs), "status", "e").returncode == 0
    assert [r.slurm_energy_j for r in manifest.load_manifest(logs / "e")] == [5421.0, None]
    p = cli("--logs", str(logs), "collect", "e", "--no-plots", "--no-store", "--out", str(tmp_path / "s"))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads((tmp_path / "s" / "e.json").read_text())["runs"]
    assert [r["extra"].get("slurm_energy_j") for r in sorted(rows, key=lambda r: r["repeat"])] == [5421.0, None]


def test_slurm_statuses_from_fake_scheduler(tmp_path, fake):
    mx = write_matrix(tmp_path, name="f", modes=("ok",), repeats=7)
    logs = tmp_path / "logs"
    p = _submit(logs, mx)
    assert p.returncode == 0, p.stderr
    assert "submitted 7 runs with 1 sbatch call;" in p.stdout
    runs = manifest.load_manifest(logs / "f")
    assert [r.job_id for r in runs] == [f"100_{i}" for i in range(7)]
    assert all(r.status == Status.PENDING and r.array_job_id == "100" for r in runs)
    # states a small test cluster cannot produce
    fakeslurm.set_state(fake, "100_0", "NODE_FAIL")
    fakeslurm.set_state(fake, "100_1", "PREEMPTED")
    fakeslurm.set_state(fake, "100_2", "OUT_OF_MEMORY", exit_code="0:125")
    fakeslurm.set_state(fake, "100_3", "REQUEUED")
    fakeslurm.set_state(fake, "100_4", "TIMEOUT", in_squeue=False)  # purged: sacct knows
    fakeslurm.set_state(fake, "100_5", "RUNNING")
    fakeslurm.set_state(fake, "100_6", "COMPLETED", in_squeue=False)
    _complete_log(runs[6])
    runs[6].marker.write_text(json.dumps({"rc": 0, "signal": "", "end": time.time(), "job": "106"}))
    p = cli("--logs", str(logs), "status", "f")
    assert p.returncode == 0, p.stderr
    got = [r.status for r in manifest.load_manifest(logs / "f")]
    assert got == [Status.NODE_FAIL, Status.PREEMPTED, Status.OOM, Status.REQUEUED, Status.TIMEOUT, Status.RUNNING,
                   Status.OK]
    calls = fakeslurm.load(fake)["calls"]
    assert calls["squeue"] == 1 and calls["sacct"] == 2  # one squeue for all; sacct: probe + one query
    # final statuses are sticky: the next status does not ask about them again
    fakeslurm.set_state(fake, "100_5", "COMPLETED")
    cli("--logs", str(logs), "status", "f", check=True)
    sq = [c for c in fakeslurm.load(fake)["log"] if c[0] == "squeue"][-1]
    assert sq[sq.index("-j") + 1] == "100"


def test_slurm_without_sacct_uses_markers(tmp_path, fake):
    fakeslurm.update(fake, lambda s: s.update(sacct="disabled"))
    mx = write_matrix(tmp_path, name="ns", modes=("ok",), repeats=3)
    logs = tmp_path / "logs"
    _submit(logs, mx, check=True)
    runs = manifest.load_manifest(logs / "ns")
    for i, (rc, sig) in enumerate([(0, ""), (3, ""), (None, None)]):
        fakeslurm.set_state(fake, f"100_{i}", "COMPLETED", in_squeue=False)
        _complete_log(runs[i])
        if rc is not None:
            runs[i].marker.write_text(json.dumps({"rc": rc, "signal": sig, "end": time.time(), "job": str(i)}))
    p = cli("--logs", str(logs), "status", "ns", check=True)
    got = manifest.load_manifest(logs / "ns")
    assert [r.status for r in got] == [Status.OK, Status.FAILED, Status.FAILED]
    assert "without an exit marker" in got[2].reason
    assert "sacct unavailable" in p.stdout


def test_refused_half_way_keeps_what_was_submitted(tmp_path, fake):
    fakeslurm.update(fake, lambda s: s.update(sbatch_fail_after=1))
    mx = _three_groups(tmp_path)
    logs = tmp_path / "logs"
    p = _submit(logs, mx)
    assert p.returncode == 2
    assert "a cluster submission limit was hit" in p.stderr and "2 runs were submitted and are recorded" in p.stderr
    runs = manifest.load_manifest(logs / "k")
    assert sum(r.status == Status.PENDING for r in runs) == 2
    rest = [r for r in runs if r.status != Status.PENDING]
    assert len(rest) == 4 and all(r.status == Status.UNSUBMITTED for r in rest)
    # the refused array's runs carry the cause; the array after it was never tried
    assert sum("submission refused: a cluster submission limit was hit" in r.reason for r in rest) == 2
    # the limit is lifted: the next submit sends only the rest
    fakeslurm.update(fake, lambda s: s.update(sbatch_fail_after=None))
    p = _submit(logs, mx, check=True)
    assert "submitting 4 as 2" in p.stdout
    assert len(_fake_tasks(fake)) == 6
    assert len({r.job_id for r in manifest.load_manifest(logs / "k")}) == 6


def test_bad_partition_and_unreachable_controller(tmp_path, fake):
    mx = write_matrix(tmp_path, name="bp", slurm_extra='partition = "nope"')
    p = _submit(tmp_path / "logs", mx)
    assert p.returncode == 2 and "the partition does not exist" in p.stderr and "Invalid partition" in p.stderr
    assert all(r.status == Status.UNSUBMITTED for r in manifest.load_manifest(tmp_path / "logs" / "bp"))
    fakeslurm.update(fake, lambda s: s.update(ping="down"))
    p = _submit(tmp_path / "logs", write_matrix(tmp_path, name="down"))
    assert p.returncode == 2 and "controller is unreachable" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("when", ["before", "after"])
def test_sigkill_mid_submit_then_next_submit_completes_exactly(tmp_path, fake, when):
    mx = _three_groups(tmp_path)
    logs = tmp_path / "logs"
    fakeslurm.update(fake, lambda s: s.update(kill_parent={"call": 2, "when": when}))
    p = _submit(logs, mx)
    assert p.returncode == -signal.SIGKILL
    st = statuses(logs / "k")
    assert sorted(st.values()).count("SUBMITTING") == 2 and sorted(st.values()).count(Status.PENDING) == 2
    fakeslurm.update(fake, lambda s: s.update(kill_parent=None))
    p = _submit(logs, mx, check=True)
    state = fakeslurm.load(fake)
    if when == "after":
        # the killed submit's array was accepted, held, and never got submitit's task files: the next submit
        # writes them (the same command), adopts the array and releases its tasks once each, by task id (never the
        # whole array: a task of a run that ended must stay held)
        assert "reconciled interrupted submission" in p.stdout and "submitting 2 as 1" in p.stdout
        aid = state["submitted"][1]["id"]
        assert sorted(x for x in state["released"] if x.split("_")[0] == aid) == [f"{aid}_0", f"{aid}_1"]
    else:
        assert "never reached the scheduler" in p.stdout and "submitting 4 as 2" in p.stdout
    runs = manifest.load_manifest(logs / "k")
    assert all(r.status == Status.PENDING for r in runs)
    assert sorted(r.job_id for r in runs) == _fake_tasks(fake)  # every run once, no job twice
    assert state["calls"]["sbatch"] == (4 if when == "before" else 3)  # the killed call made no job
    assert len(state["submitted"]) == 3


def test_sigkill_at_random_moments_never_duplicates(tmp_path, fake):
    mx = _three_groups(tmp_path, repeats=3)
    logs = tmp_path / "logs"
    fakeslurm.update(fake, lambda s: s.update(sbatch_delay=0.3))
    rng = random.Random(4)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for attempt in range(6):
        p = subprocess.Popen([sys.executable, "-m", "dlperf_slurm", "--logs", str(logs), "submit", str(mx),
                              "--executor", "slurm", "--templates", str(TEMPLATES)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 2.5))
        p.send_signal(signal.SIGKILL)
        p.wait()
    _submit(logs, mx, check=True)
    runs = manifest.load_manifest(logs / "k")
    assert len(runs) == 9 and all(r.status == Status.PENDING for r in runs)
    assert sorted(r.job_id for r in runs) == _fake_tasks(fake)


def test_a_manifest_whose_creation_a_kill_cut_short_is_completed(tmp_path, fake):
    # SIGKILL between the schema's statements (each its own transaction) left a manifest with its meta table alone:
    # every later command failed with "no such table: runs", submit included
    mx = _three_groups(tmp_path)
    logs = tmp_path / "logs"
    (logs / "k").mkdir(parents=True)
    db = sqlite3.connect(logs / "k" / "manifest.sqlite")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.commit()
    db.close()
    p = _submit(logs, mx)
    assert p.returncode == 0, p.stderr
    assert sorted(r.job_id for r in manifest.load_manifest(logs / "k")) == _fake_tasks(fake)


def _child_running(pid: int, marker: str, timeout: float = 30.0) -> int:
    """The pid of ``pid``'s child whose command line holds ``marker`` (waits for it to start)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for d in Path("/proc").iterdir():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid and marker in cmd:
                return int(d.name)
        time.sleep(0.02)
    raise AssertionError(f"no child of {pid} running {marker!r}")


def test_sigkill_while_sbatch_is_in_flight_then_submit_at_once_never_duplicates(tmp_path, fake):
    # a submit killed by PID leaves its sbatch running (an orphan still talking to the controller); a submit started
    # at once must not ask the scheduler before that sbatch ended, or it finds nothing and submits the runs again
    mx = write_matrix(tmp_path, name="o", repeats=2)
    logs = tmp_path / "logs"
    fakeslurm.update(fake, lambda s: s.update(sbatch_delay=3))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "dlperf_slurm", "--logs", str(logs), "submit", str(mx),
                          "--executor", "slurm", "--templates", str(TEMPLATES)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    orphan = _child_running(p.pid, "fakeslurm.py sbatch")
    p.send_signal(signal.SIGKILL)
    p.wait()
    second = _submit(logs, mx, check=True)
    assert "waiting for the sbatch of interrupted submission" in second.stderr
    while Path(f"/proc/{orphan}").exists():  # the orphan's job, if it made one after the second submit looked
        time.sleep(0.05)
    state = fakeslurm.load(fake)
    assert len(state["submitted"]) == 1, state["submitted"]
    runs = manifest.load_manifest(logs / "o")
    assert sorted(r.job_id for r in runs) == _fake_tasks(fake)


def test_two_submits_at_once_do_not_duplicate(tmp_path, fake):
    fakeslurm.update(fake, lambda s: s.update(sbatch_delay=0.5))
    mx = _three_groups(tmp_path)
    logs = tmp_path / "logs"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    argv = [sys.executable, "-m", "dlperf_slurm", "--logs", str(logs), "submit", str(mx), "--executor", "slurm",
            "--templates", str(TEMPLATES)]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sorted(o[0].count("submitted 6 runs") + o[0].count("submitted 0 runs") for o in outs) == [1, 1]
    assert len(fakeslurm.load(fake)["submitted"]) == 3 and len(_fake_tasks(fake)) == 6


def test_manifest_is_readable_while_a_writer_holds_a_transaction(tmp_path, fake):
    mx = write_matrix(tmp_path, name="rd")
    logs = tmp_path / "logs"
    _submit(logs, mx, check=True)
    m = manifest.Manifest(logs / "rd")
    with m.write() as db:
        db.execute("UPDATE runs SET reason='x'")
        # another process reads the committed state meanwhile
        p = cli("--logs", str(logs), "status", "rd", "--no-refresh", timeout=30)
        assert p.returncode == 0 and "PENDING" in p.stdout
    m.close()
    assert sqlite3.connect(logs / "rd" / "manifest.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_manifest_runs_are_frozen_records_of_every_column(tmp_path, fake):
    # Manifest.runs() hands out typed records, field for column: a column added to the schema without its field
    # (or a field no column fills) fails here, not in a caller reading a missing attribute
    mx = write_matrix(tmp_path, name="tr", repeats=2)
    logs = tmp_path / "logs"
    _submit(logs, mx, check=True)
    m = manifest.Manifest(logs / "tr")
    try:
        raw = [dict(r) for r in m.db.execute("SELECT * FROM runs ORDER BY ord")]
        runs = m.runs()
        assert [dataclasses.asdict(r) for r in runs] == raw and len(runs) == 2
        assert all(isinstance(r, records.ManifestRun) and r.status == Status.PENDING and r.job_id for r in runs)
        assert [r.key for r in m.runs(keys=[runs[1].key])] == [runs[1].key]
        with pytest.raises(dataclasses.FrozenInstanceError):
            runs[0].status = Status.OK  # type: ignore[misc]
    finally:
        m.close()


def test_slurm_cancel_is_one_scancel(tmp_path, fake):
    mx = write_matrix(tmp_path, name="cc", repeats=4)
    logs = tmp_path / "logs"
    _submit(logs, mx, check=True)
    fakeslurm.set_state(fake, "100_0", "COMPLETED")
    runs = manifest.load_manifest(logs / "cc")
    _complete_log(runs[0])
    runs[0].marker.write_text(json.dumps({"rc": 0, "signal": "", "end": time.time(), "job": "100_0"}))
    p = cli("--logs", str(logs), "cancel", "cc", check=True)
    assert "cancel requested for 3 runs" in p.stdout
    st = fakeslurm.load(fake)
    assert st["calls"]["scancel"] == 1
    cli("--logs", str(logs), "status", "cc", check=True)
    runs = manifest.load_manifest(logs / "cc")
    assert [r.status for r in runs] == [Status.OK] + [Status.CANCELLED] * 3
    assert "dlperf-slurm cancel" in runs[1].reason


def test_error_after_sbatch_keeps_the_jobs(tmp_path, fake):
    """An error once sbatch has succeeded (say, the disk fills while submitit moves its pickles) must not
    make the next submit send the same runs again."""
    from dlperf_slurm.errors import SubmitAborted
    from dlperf_slurm.matrix import loader as matrix_mod
    from dlperf_slurm.schedulers.slurm import SlurmScheduler as SlurmExecutor

    class Flaky(SlurmExecutor):
        def submit(self, group):
            super().submit(group)  # sbatch accepted the array and submitit wrote its task files...
            raise OSError("No space left on device")  # ...then the disk filled

    m = matrix_mod.load(_three_groups(tmp_path), site=False)
    cdir = tmp_path / "logs" / "k"
    with pytest.raises(SubmitAborted, match="No space left on device"):
        journal.submit(m, cdir, Flaky(cdir), template_dir=str(TEMPLATES), out=lambda s: None)
    runs = manifest.load_manifest(cdir)
    assert sum(r.status == Status.PENDING and r.job_id is not None for r in runs) == 2
    journal.submit(m, cdir, SlurmExecutor(cdir), template_dir=str(TEMPLATES), out=lambda s: None)
    runs = manifest.load_manifest(cdir)
    assert sorted(r.job_id for r in runs) == _fake_tasks(fake) and len(fakeslurm.load(fake)["submitted"]) == 3


def test_cancel_without_a_name_needs_the_only_campaign(tmp_path, fake):
    logs = tmp_path / "logs"
    for name in ("first", "second"):
        _submit(logs, write_matrix(tmp_path, name=name), check=True)
    p = cli("--logs", str(logs), "cancel")
    assert p.returncode != 0 and "cancel which campaign?" in p.stderr and "first, second" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and fakeslurm.load(fake)["calls"].get("scancel", 0) == 0
    assert all(r.status == Status.PENDING for n in ("first", "second") for r in manifest.load_manifest(logs / n))
    p = cli("--logs", str(logs), "cancel", "second", check=True)
    assert "cancel requested for" in p.stdout and fakeslurm.load(fake)["calls"]["scancel"] == 1


def test_a_dry_run_with_nothing_to_submit_says_so(tmp_path, fake):
    mx = write_matrix(tmp_path, name="nd")
    logs = tmp_path / "logs"
    p = _submit(logs, mx, "--dry-run", check=True)
    assert "would be made:" in p.stdout and "(nothing to submit)" not in p.stdout
    _submit(logs, mx, check=True)
    p = _submit(logs, mx, "--dry-run", check=True)
    assert "0 sbatch calls would be made (nothing to submit)." in p.stdout, p.stdout


def test_a_refused_sbatch_the_scheduler_cannot_be_asked_about_is_not_called_unsubmitted(tmp_path, fake):
    """sbatch errs (a timeout: the job may exist) and squeue cannot reach the controller either: those runs are
    neither 'not submitted' nor lost; the next submit asks before sending them again."""
    fakeslurm.update(fake, lambda s: s.update(sbatch_fail_after=1, squeue_down=True,
                                              sbatch_error="sbatch: error: Socket timed out on send/recv operation"))
    mx = _three_groups(tmp_path)
    logs = tmp_path / "logs"
    p = _submit(logs, mx)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "2 runs were submitted and are recorded, 2 may have reached the scheduler" in p.stderr, p.stderr
    assert "2 were not" in p.stderr
    runs = manifest.load_manifest(logs / "k")
    assert sorted(r.status for r in runs) == sorted([Status.PENDING] * 2 + [Status.SUBMITTING] * 2
                                                   + [Status.UNSUBMITTED] * 2)
    fakeslurm.update(fake, lambda s: s.update(sbatch_fail_after=None, squeue_down=False))
    _submit(logs, mx, check=True)
    assert len(_fake_tasks(fake)) == 6 and len({r.job_id for r in manifest.load_manifest(logs / "k")}) == 6
