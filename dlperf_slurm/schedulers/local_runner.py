"""The detached local runner: ``python -m dlperf_slurm.schedulers.local_runner QUEUE.json`` runs every PENDING
script of a queue file (see :mod:`.local`), ``jobs`` at a time machine-wide (flock slots), each in its own
session; a time limit or a cancel sends TERM to the whole run, then KILL after a grace period, as Slurm does.

A full disk (:func:`dlperf_slurm.disk.disk_full`, checked every loop where the runs write their logs) never
kills the runner: a running run that saw it keeps that as ``disk_full`` (its reason, when it does not end well), a
held run is not started (FAILED, "not started: no space left on device ..."), and the queue file, which cannot be
written then either, is written as soon as it can be: the runner keeps its state and exits only once it is on
disk (waiting at most :data:`SAVE_WAIT_S`), so no run reads as if the runner had died.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from dlperf_slurm.disk import disk_full
from dlperf_slurm.schedulers.local import _read_json, _write_json, local_job_id

KILL_WAIT_S = 5.0
SAVE_WAIT_S = 24 * 3600.0  # how long a runner whose queue file cannot be written (a full disk) waits for space


def _save(q: Path, state: dict[str, Any]) -> bool:
    """Write the queue file; False when it cannot be written now (a full disk): the caller keeps the state."""
    try:
        _write_json(q, state)
    except OSError:
        return False
    return True


def _save_patiently(q: Path, state: dict[str, Any]) -> None:
    """Write the queue file, trying again each second while it cannot be (a full disk), while it exists."""
    give_up = time.time() + SAVE_WAIT_S
    while not _save(q, state) and q.exists() and time.time() < give_up:
        time.sleep(1.0)


def _acquire_slot(state_dir: Path, jobs: int, held: dict[int, Any]) -> int | None:
    """One of ``jobs`` machine-wide slots of this campaign (flock), so concurrent runners share the limit."""
    for i in range(jobs):
        if i in held:
            continue
        try:
            f = open(state_dir / f"slot-{i}.lock", "a")
        except OSError:  # cannot be made now (a full disk): tried again next round
            continue
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        held[i] = f
        return i
    return None


def _no_space(task: dict[str, Any], full: dict[Path, str]) -> str:
    """:func:`disk_full`'s words for the folder of the task's log ('' when it has room), once per round."""
    folder = Path(task["log"]).parent
    if folder not in full:
        full[folder] = disk_full(folder)
    return full[folder]


def _note_full(task: dict[str, Any], full: dict[Path, str]) -> bool:
    """Keep, once, that the disk holding a running task's log is full (its ``disk_full``); whether it was kept."""
    if task.get("disk_full") or not _no_space(task, full):
        return False
    task["disk_full"] = _no_space(task, full)
    return True


def _cancelled(cancel_file: Path, stop: bool, n: int) -> set[int]:
    """The indices of the tasks cancelled by now: those the cancel file lists, every one after a signal."""
    cancelled: set[int] = set()
    if cancel_file.exists():
        cancelled = {int(x) for x in cancel_file.read_text().split() if x.strip().isdigit()}
    if stop:
        cancelled |= set(range(n))
    return cancelled


def _cancel_pending(tasks: list[dict[str, Any]], cancelled: set[int], now: float) -> bool:
    """A cancelled task that has not started is CANCELLED; whether any was."""
    changed = False
    for i, t in enumerate(tasks):
        if t["state"] == "PENDING" and i in cancelled:
            t.update(state="CANCELLED", reason="cancelled before it started", end=now)
            changed = True
    return changed


def _signal_runs(running: dict[int, dict[str, Any]], cancelled: set[int], now: float) -> None:
    """TERM to a run cancelled or past its time limit, KILL once it has had :data:`KILL_WAIT_S` to end."""
    for i, r in running.items():
        why = "cancelled" if i in cancelled else ("time limit" if now > r["deadline"] else None)
        if why and r["killed_at"] is None:
            r["why"], r["killed_at"] = why, now
            try:
                os.killpg(r["proc"].pid, signal.SIGTERM)  # like Slurm: TERM to every process of the run
            except OSError:
                pass
        elif r["killed_at"] is not None and now - r["killed_at"] > KILL_WAIT_S:
            try:
                os.killpg(r["proc"].pid, signal.SIGKILL)
            except OSError:
                pass


def _reap(running: dict[int, dict[str, Any]], tasks: list[dict[str, Any]], slots: dict[int, Any],
          full: dict[Path, str]) -> bool:
    """Each run that ended: its task's state, reason and exit code, its slot freed; whether any ended."""
    changed = False
    for i in list(running):
        r = running[i]
        rc = r["proc"].poll()
        if rc is None:
            continue
        t = tasks[i]
        _note_full(t, full)
        if r["why"] == "cancelled":
            st, reason = "CANCELLED", "cancelled while running"
        elif r["why"] == "time limit":
            st, reason = "TIMEOUT", f"killed at the time limit ({t['time_limit_s']:.0f} s)"
        elif rc == 0:
            st, reason = "COMPLETED", ""
        else:
            st, reason = "FAILED", (f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}")
        t.update(state=st, reason=reason, rc=rc, end=time.time())
        slots.pop(r["slot"]).close()
        del running[i]
        changed = True
    return changed


def _start_pending(q: Path, state: dict[str, Any], running: dict[int, dict[str, Any]], slots: dict[int, Any],
                   full: dict[Path, str], out: Any) -> bool:
    """Start PENDING tasks while a slot is free (one whose log's disk is full fails unstarted); whether any
    task changed."""
    token, tasks = state["token"], state["tasks"]
    changed = False
    for i, t in enumerate(tasks):
        if t["state"] != "PENDING" or i in running:
            continue
        if _no_space(t, full):  # it could write neither its log nor its exit marker
            no_room = _no_space(t, full)
            t.update(state="FAILED", reason=f"not started: no space left on device ({no_room})", disk_full=no_room,
                     end=time.time())
            changed = True
            continue
        slot = _acquire_slot(q.parent, int(state.get("jobs", 1)), slots)
        if slot is None:
            break
        env = dict(os.environ, DLPERF_LOCAL_JOB=local_job_id(token, i))
        proc = subprocess.Popen(["bash", t["script"]], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
        t.update(state="RUNNING", pid=proc.pid, start=time.time())
        running[i] = {"proc": proc, "slot": slot, "deadline": time.time() + float(t["time_limit_s"]),
                      "killed_at": None, "why": None}
        changed = True
    return changed


def run_local_queue(queue_path: str | os.PathLike) -> int:
    """The detached runner: run every PENDING script of the queue file, ``jobs`` at a time."""
    q = Path(queue_path)
    state = _read_json(q)
    token = state["token"]
    state["runner"] = {"pid": os.getpid(), "started": time.time()}
    _save_patiently(q, state)  # on file before anything runs
    cancel_file = q.with_name(f"{token}.cancel")
    stop = {"flag": False}

    def on_signal(signum, frame):  # cancel everything
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    slots: dict[int, Any] = {}
    running: dict[int, dict[str, Any]] = {}  # index -> {proc, slot, deadline, killed_at, why}
    tasks = state["tasks"]
    out = open(q.with_name(f"{token}.runner.log"), "ab")
    unsaved = False

    while True:
        changed = False
        full: dict[Path, str] = {}  # a log folder -> disk_full's words, this round
        for i in running:  # a disk that fills while a run runs: why the run may not end well
            changed |= _note_full(tasks[i], full)
        cancelled = _cancelled(cancel_file, stop["flag"], len(tasks))
        now = time.time()
        changed |= _cancel_pending(tasks, cancelled, now)
        _signal_runs(running, cancelled, now)
        changed |= _reap(running, tasks, slots, full)
        changed |= _start_pending(q, state, running, slots, full, out)
        if changed or unsaved:
            unsaved = not _save(q, state)  # a full disk: kept, written once it can be
        if not running and not any(t["state"] == "PENDING" for t in tasks):
            break
        time.sleep(0.2)
    state["runner"]["ended"] = time.time()
    _save_patiently(q, state)
    return 0


def _main(argv: Sequence[str]) -> int:
    if len(argv) == 1:
        return run_local_queue(argv[0])
    print("usage: python -m dlperf_slurm.schedulers.local_runner QUEUE.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
