"""Fault injection on the real Slurm test cluster that tests/slurm/start.sh runs on this machine.

Daemons are found ONLY by the pid files start.sh's slurm.conf names (``/run/slurm/slurmctld.pid``,
``/run/slurm/slurmd-<node>.pid``), each checked against ``/proc/PID/comm`` before it is signalled; nothing is
ever signalled by name. Restarts use start.sh's own command lines:

* slurmctld: ``/usr/sbin/slurmctld`` (it reads /etc/slurm/slurm.conf and daemonizes);
* slurmd:    ``unshare --uts /bin/sh -c "hostname nK && exec /usr/sbin/slurmd -N nK"`` (or, with
  SLURM_CI_NETNS=1, the same inside ``nsenter --net=/run/netns/slurm-nK``; with one node, ``slurmd -N localhost``).

Faults:

* :func:`kill_controller` / :func:`start_controller` / :func:`restart_controller`: SIGKILL slurmctld, start it
  again, wait until ``scontrol ping`` says UP. ``restart_controller(restore=DIR)`` puts back the job state that
  :func:`save_controller_state` copied earlier, so the controller "comes back from its last saved state" as it
  was at that moment (e.g. an array saved between ``sbatch --hold`` and the release).
* :func:`kill_node`: the node dies: SIGKILL its slurmd and, by default, every process of the node (its UTS
  namespace: the slurmstepds and the jobs' processes), so nothing of a running job survives, no exit marker.
  :func:`start_node` starts its slurmd again and resumes the node.
* :func:`ensure_healthy`: whatever happened, leave slurmctld up and every node's slurmd running, resumed, not
  DRAIN/DOWN. Tests call it in a ``finally`` / fixture teardown (:func:`guard`).

Also a small CLI for wrapper scripts (``python faults.py kill-controller``, ``save-state DIR --contains NAME``,
``status``, ...), and helpers to read job states from squeue/sacct and wait for them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

SLURM_CONF = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
HEALTHY = ("idle", "mixed", "allocated", "completing")  # sinfo %T of a node that takes jobs


class FaultError(RuntimeError):
    """The cluster did not do what the harness waited for (with what it showed instead)."""


def log(msg: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.2):
    """Poll ``predicate`` until it returns something true (returned); FaultError after ``timeout`` s."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise FaultError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def run(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        return subprocess.CompletedProcess(list(argv), 124, err.stdout or "", f"timed out after {timeout} s")


# ------------------------------------------------------------------------------------------ configuration


def conf(path: Path = SLURM_CONF) -> dict[str, str]:
    """slurm.conf's single-line ``Key=Value`` settings (keys lower-cased; node/partition lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" not in line or " " in line.split("=", 1)[0]:
            continue
        key, value = line.split("=", 1)
        if key.lower() in ("nodename", "partitionname") or " " in value.strip():
            continue
        out[key.strip().lower()] = value.strip()
    return out


def state_dir() -> Path:
    return Path(conf().get("statesavelocation", "/var/spool/slurmctld"))


def controller_pidfile() -> Path:
    return Path(conf().get("slurmctldpidfile", "/run/slurm/slurmctld.pid"))


def slurmd_pidfile(node: str) -> Path:
    pattern = conf().get("slurmdpidfile", "/run/slurm/slurmd-%n.pid")
    return Path(pattern.replace("%n", node))


def show_config() -> dict[str, str]:
    """The running controller's ``scontrol show config``: key -> value."""
    out = {}
    for line in run("scontrol", "show", "config").stdout.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def config_value(name: str) -> str | None:
    """A value of the running controller's ``scontrol show config`` (e.g. SlurmdTimeout -> '10 sec')."""
    return next((v for k, v in show_config().items() if k.lower() == name.lower()), None)


# ------------------------------------------------------------------------------------------ processes


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Running (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pid_from_file(pidfile: Path, comm: str) -> int | None:
    """The live process the pid file names, if it is ``comm``; None otherwise (missing, stale, reused)."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) and _comm(pid) == comm else None


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d.name))
    return kids


def _kill_and_wait(pids: Iterable[int], what: str, timeout: float = 30) -> None:
    pids = [p for p in pids if _alive(p)]
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    wait_for(lambda: not any(_alive(p) for p in pids), timeout, f"{what} ({pids}) to die")


# ------------------------------------------------------------------------------------------ slurmctld


def ping() -> bool:
    p = run("scontrol", "ping", timeout=20)
    return p.returncode == 0 and "UP" in p.stdout


def controller_pid() -> int | None:
    return pid_from_file(controller_pidfile(), "slurmctld")


def kill_controller(timeout: float = 30) -> int:
    """SIGKILL slurmctld (by its pid file) and wait until it and its helper child (slurmscriptd) are gone."""
    pid = controller_pid()
    if pid is None:
        raise FaultError(f"no live slurmctld in {controller_pidfile()}")
    kids = _children(pid)
    log(f"SIGKILL slurmctld pid {pid}")
    _kill_and_wait([pid], "slurmctld", timeout)
    # slurmscriptd (its child) exits when its parent's pipe closes; if not, it goes with it
    with contextlib.suppress(FaultError):
        wait_for(lambda: not any(_alive(k) for k in kids), 10, "slurmscriptd to exit")
    _kill_and_wait([k for k in kids if _comm(k) == "slurmctld"], "slurmctld's children", timeout)
    return pid


def start_controller(timeout: float = 60) -> int:
    """Start slurmctld as start.sh does and wait until ``scontrol ping`` is UP. Returns its pid."""
    if controller_pid() is not None:
        raise FaultError(f"slurmctld already runs (pid {controller_pid()})")
    p = run(SLURMCTLD, timeout=60)
    if p.returncode != 0:
        raise FaultError(f"{SLURMCTLD} failed ({p.returncode}): {p.stderr.strip()}")
    pid = wait_for(controller_pid, 30, "slurmctld's pid file")
    wait_for(ping, timeout, "scontrol ping to say UP")
    # the nodes whose slurmd runs re-register within seconds (state "unknown" until then: nothing is scheduled)
    live = [n for n in nodes() if slurmd_pid(n) is not None]
    wait_for(lambda: all(not node_state(n).startswith("unknown") for n in live), timeout,
             f"nodes {live} to register with the new slurmctld")
    log(f"slurmctld up again (pid {pid}); nodes " + ", ".join(f"{n} {node_state(n)}" for n in nodes()))
    return pid


def save_controller_state(dest: Path, contains: str | None = None, timeout: float = 20) -> Path:
    """Copy the controller's saved job state (``job_state`` in StateSaveLocation) to ``dest``, after waiting
    until it holds ``contains`` (e.g. a job name: the controller saves its state a moment after a change)."""
    src = state_dir() / "job_state"
    if contains is not None:
        needle = contains.encode()
        wait_for(lambda: src.exists() and needle in src.read_bytes(), timeout,
                 f"slurmctld to save the state of job {contains!r} in {src}")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest / "job_state")
    log(f"saved slurmctld job state ({src.stat().st_size} bytes) to {dest}")
    return dest / "job_state"


_STATE_HEADER = b"\x00\x00\x00\x11PROTOCOL_VERSION\x00"  # packstr("PROTOCOL_VERSION") opens job_state


def _keep_job_id_sequence(saved: bytes, live: bytes) -> bytes:
    """``saved`` with the live state's next-job-id counter, when it is higher: the restored controller must not
    hand out job ids again that slurmdbd already holds (other jobs' ``sacct`` records would be mixed up).
    job_state (22.05) opens with packstr("PROTOCOL_VERSION"), pack16(version), pack_time(now), pack32(next id)."""
    at = len(_STATE_HEADER) + 2 + 8
    if not (saved.startswith(_STATE_HEADER) and live.startswith(_STATE_HEADER)) or len(saved) < at + 4:
        log("job_state header not as expected: job id counter left as saved")
        return saved
    old, new = int.from_bytes(saved[at:at + 4], "big"), int.from_bytes(live[at:at + 4], "big")
    if new <= old:
        return saved
    log(f"restored state keeps the live next job id {new} (saved: {old})")
    return saved[:at] + new.to_bytes(4, "big") + saved[at + 4:]


def fix_runaway_jobs() -> str:
    """``sacctmgr -i show runawayjobs``: close the slurmdbd records of jobs the controller no longer knows
    (the ghosts of a controller that came back from an older state stay RUNNING in sacct otherwise)."""
    p = run("sacctmgr", "-i", "show", "runawayjobs", timeout=60)
    return (p.stdout + p.stderr).strip()


def restore_controller_state(saved: Path) -> None:
    """With slurmctld down: put back the job state :func:`save_controller_state` copied (a folder or the file),
    so that it comes back from that state. The state replaced is kept as ``job_state.replaced`` beside the copy;
    the job id counter stays the live one (see :func:`_keep_job_id_sequence`)."""
    if controller_pid() is not None:
        raise FaultError("slurmctld is running: kill it before restoring its state")
    saved = Path(saved)
    saved = saved / "job_state" if saved.is_dir() else saved
    live = state_dir() / "job_state"
    shutil.copy2(live, saved.with_name("job_state.replaced"))
    live.write_bytes(_keep_job_id_sequence(saved.read_bytes(), live.read_bytes()))
    log(f"restored slurmctld job state from {saved}")


def restart_controller(restore: Path | None = None, down_s: float = 0.0, timeout: float = 60) -> int:
    """SIGKILL slurmctld, optionally put back the job state saved by :func:`save_controller_state` (the
    state it had saved at that moment; the replaced file is kept as ``job_state.replaced`` beside the copy),
    wait ``down_s``, start it again; returns the new pid."""
    kill_controller()
    try:
        if restore is not None:
            restore_controller_state(restore)
        if down_s:
            time.sleep(down_s)
    finally:
        pid = start_controller(timeout)
    return pid


# ------------------------------------------------------------------------------------------ nodes


def nodes() -> list[str]:
    """Node names from slurm.conf's NodeName lines (n[1-2] expanded by scontrol)."""
    names: list[str] = []
    for line in SLURM_CONF.read_text().splitlines():
        m = re.match(r"\s*NodeName=(\S+)", line)
        if m and m.group(1).upper() != "DEFAULT":
            p = run("scontrol", "show", "hostnames", m.group(1))
            names += p.stdout.split() if p.returncode == 0 and p.stdout.strip() else [m.group(1)]
    return names


def node_state(node: str) -> str:
    """sinfo's long state (``idle``, ``mixed``, ``down*``, ``drained``, ``idle*`` ...), '' if unknown."""
    p = run("sinfo", "-h", "-N", "-n", node, "-o", "%T")
    return p.stdout.split("\n", 1)[0].strip() if p.returncode == 0 else ""


def node_reason(node: str) -> str:
    p = run("sinfo", "-h", "-R", "-N", "-n", node, "-o", "%E")
    return p.stdout.strip()


def slurmd_pid(node: str) -> int | None:
    return pid_from_file(slurmd_pidfile(node), "slurmd")


def _uts(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return None


def node_processes(node: str) -> list[int]:
    """Every process of ``node``: those in its slurmd's UTS namespace (start.sh gives each slurmd its own, and
    its slurmstepds and jobs inherit it). Refused if that namespace is this process's own (one-node setup)."""
    pid = slurmd_pid(node)
    if pid is None:
        raise FaultError(f"no live slurmd for node {node} in {slurmd_pidfile(node)}")
    ns = _uts(pid)
    if ns is None or ns == _uts(os.getpid()):
        raise FaultError(f"slurmd {pid} of {node} shares this machine's UTS namespace: cannot tell its jobs apart")
    return sorted(int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and _uts(int(d.name)) == ns)


def kill_node(node: str, jobs: bool = True, timeout: float = 30) -> list[int]:
    """The node dies: SIGKILL its slurmd and (``jobs``) every other process of the node, frozen first
    (SIGSTOP) so that none forks or writes an exit marker while the others die. Returns the pids killed."""
    pid = slurmd_pid(node)
    if pid is None:
        raise FaultError(f"no live slurmd for node {node} in {slurmd_pidfile(node)}")
    victims = node_processes(node) if jobs else [pid]
    if jobs:
        for _ in range(5):  # freeze until the set is stable
            for p in victims:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGSTOP)
            again = node_processes(node) if slurmd_pid(node) else victims
            if set(again) <= set(victims):
                break
            victims = sorted(set(victims) | set(again))
    log(f"node {node} dies: SIGKILL " + ", ".join(f"{p}({_comm(p)})" for p in victims))
    _kill_and_wait(victims, f"the processes of node {node}", timeout)
    return victims


def _netns(node: str) -> Path | None:
    p = Path(f"/run/netns/slurm-{node}")
    return p if p.exists() else None


def start_node(node: str, resume: bool = True, timeout: float = 60) -> int:
    """Start ``node``'s slurmd exactly as start.sh does; wait until it registers; resume the node if it is
    DOWN/DRAIN (``resume``) and wait until it takes jobs. Returns the slurmd pid."""
    if slurmd_pid(node) is not None:
        raise FaultError(f"slurmd of {node} already runs (pid {slurmd_pid(node)})")
    if node == "localhost":
        argv = [SLURMD, "-N", node]
    elif _netns(node):
        argv = ["nsenter", f"--net={_netns(node)}", "unshare", "--uts", "/bin/sh", "-c",
                f"hostname {node} && exec {SLURMD} -N {node}"]
    else:
        argv = ["unshare", "--uts", "/bin/sh", "-c", f"hostname {node} && exec {SLURMD} -N {node}"]
    p = run(*argv, timeout=60)
    if p.returncode != 0:
        raise FaultError(f"starting slurmd for {node} failed ({p.returncode}): {p.stderr.strip()}")
    pid = wait_for(lambda: slurmd_pid(node), 30, f"slurmd of {node} to write its pid file")
    wait_for(lambda: (s := node_state(node)) and not s.endswith("*") and not s.startswith("unknown"), timeout,
             f"node {node} to register (state {node_state(node)!r})")
    if resume:
        resume_node(node, timeout)
    log(f"slurmd of {node} up again (pid {pid}), node {node_state(node)}")
    return pid


def resume_node(node: str, timeout: float = 60) -> None:
    """``scontrol update state=resume`` if the node is DOWN/DRAIN; wait until it takes jobs."""
    s = node_state(node)
    if re.match(r"(down|drain|fail|inval)", s):
        log(f"node {node} is {s} ({node_reason(node)}): resume")
        run("scontrol", "update", f"nodename={node}", "state=resume")
    wait_for(lambda: node_state(node) in HEALTHY, timeout,
             f"node {node} to take jobs again (state {node_state(node)!r}, reason {node_reason(node)!r})")


def ensure_healthy(timeout: float = 90) -> None:
    """Leave the cluster up: slurmctld running and answering, every node's slurmd running, no node DOWN/DRAIN."""
    problems = []
    if controller_pid() is None:
        log("slurmctld is not running: starting it")
        start_controller(timeout)
    wait_for(ping, timeout, "scontrol ping to say UP")
    for node in nodes():
        try:
            if slurmd_pid(node) is None:
                log(f"slurmd of {node} is not running: starting it")
                start_node(node, timeout=timeout)
            else:
                resume_node(node, timeout)
        except FaultError as err:
            problems.append(str(err))
    if problems:
        raise FaultError("; ".join(problems))


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Run a fault scenario; whatever happens, leave the cluster healthy afterwards."""
    try:
        yield
    finally:
        ensure_healthy()


# ------------------------------------------------------------------------------------------ jobs

SQUEUE_FORMAT = "%i|%A|%T|%r|%N|%j"


def squeue(*, name: str | None = None, jobs: Iterable[str] = ()) -> list[dict[str, str]]:
    """Rows of ``squeue -h -r -t all`` (array tasks one by one; pending ranges as ``35_[4-5]``):
    id, raw (the task's own job id), state, reason, nodes, name."""
    argv = ["squeue", "-h", "-r", "-t", "all", "-o", SQUEUE_FORMAT]
    if name:
        argv += ["-n", name]
    jobs = list(jobs)
    if jobs:
        argv += ["-j", ",".join(jobs)]
    p = run(*argv)
    rows = []
    for line in p.stdout.splitlines():
        parts = line.split("|", 5)
        if len(parts) == 6:
            rows.append(dict(zip(("id", "raw", "state", "reason", "nodes", "name"), parts)))
    return rows


def squeue_text(name: str | None = None) -> str:
    argv = ["squeue", "-r", "-t", "all", "-o", "%.16i %.8A %.12T %.20r %.8N %j"]
    if name:
        argv += ["-n", name]
    p = run(*argv)
    return (p.stdout + p.stderr).strip()


def sacct(name: str, since: str = "now-1hour", duplicates: bool = False) -> list[dict[str, str]]:
    """``sacct -X`` rows for jobs named ``name``: id, state, exit, nodes (``duplicates``: every requeued
    start too, ``sacct -D``)."""
    p = run("sacct", "-n", "-X", "-P", *(["-D"] if duplicates else []), "-S", since, "--name", name,
            "-o", "JobID,State,ExitCode,NodeList")
    rows = []
    for line in p.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 4:
            rows.append(dict(zip(("id", "state", "exit", "nodes"), parts)))
    return rows


def job_names_in_queue() -> set[str]:
    return {r["name"] for r in squeue()}


def wait_job_states(name: str, predicate: Callable[[list[dict[str, str]]], bool], timeout: float,
                    what: str) -> list[dict[str, str]]:
    """Poll squeue (jobs named ``name``) until ``predicate(rows)``; FaultError with the queue otherwise."""
    last: list[dict[str, str]] = []

    def check():
        nonlocal last
        last = squeue(name=name)
        return predicate(last)

    try:
        wait_for(check, timeout, what, interval=0.5)
    except FaultError as err:
        raise FaultError(f"{err}; squeue:\n{squeue_text(name)}") from None
    return last


def controller_log_since(offset: int) -> str:
    f = Path(conf().get("slurmctldlogfile", "/var/log/slurm/slurmctld.log"))
    try:
        with f.open("rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def controller_log_size() -> int:
    f = Path(conf().get("slurmctldlogfile", "/var/log/slurm/slurmctld.log"))
    return f.stat().st_size if f.exists() else 0


def status_text() -> str:
    lines = [f"slurmctld pid {controller_pid()} ping {'UP' if ping() else 'DOWN'}"]
    for node in nodes():
        lines.append(f"{node}: slurmd pid {slurmd_pid(node)} state {node_state(node)!r} reason {node_reason(node)!r}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="faults.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status", help="daemons and node states")
    sub.add_parser("kill-controller", help="SIGKILL slurmctld (by its pid file)")
    sub.add_parser("start-controller", help="start slurmctld as start.sh does; wait for ping UP")
    r = sub.add_parser("restart-controller", help="SIGKILL slurmctld and start it again")
    r.add_argument("--restore", type=Path, help="put back the job state saved in this folder first")
    r.add_argument("--down", type=float, default=0.0, help="seconds to stay down")
    s = sub.add_parser("save-state", help="copy slurmctld's saved job state into DIR")
    s.add_argument("dir", type=Path)
    s.add_argument("--contains", help="first wait until the saved state holds this string (a job name)")
    for cmd in ("kill-node", "start-node"):
        n = sub.add_parser(cmd)
        n.add_argument("node")
    sub.add_parser("ensure-healthy", help="slurmctld up, every slurmd running, no node DOWN/DRAIN")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "status":
            print(status_text())
        elif a.cmd == "kill-controller":
            kill_controller()
        elif a.cmd == "start-controller":
            start_controller()
        elif a.cmd == "restart-controller":
            restart_controller(a.restore, a.down)
        elif a.cmd == "save-state":
            save_controller_state(a.dir, a.contains)
        elif a.cmd == "kill-node":
            kill_node(a.node)
        elif a.cmd == "start-node":
            start_node(a.node)
        elif a.cmd == "ensure-healthy":
            ensure_healthy()
    except FaultError as err:
        print(f"faults.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
