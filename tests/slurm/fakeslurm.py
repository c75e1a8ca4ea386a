#!/usr/bin/env python3
"""A fake Slurm client for unit tests: sbatch, squeue, sacct, scancel, scontrol, srun in one file.

Installed by :func:`install` as symlinks in a bin folder put first on PATH. State (jobs, counters, the
answers a test wants) lives in the JSON file ``$FAKE_SLURM_STATE``. Jobs never run: a test sets their
state (``set_state``) to reproduce what a test cluster cannot easily produce (NODE_FAIL, PREEMPTED, ...).

Knobs in the state file: ``sacct`` = "ok" | "disabled"; ``sbatch_fail_after`` = N (calls after the N-th
fail with ``sbatch_error``); ``ping`` = "up" | "down"; ``squeue_down``: squeue alone cannot reach the controller;
``max_array`` = MaxArraySize; ``sbatch_delay`` = s;
``kill_parent`` = {"call": N, "when": "before" | "after"}: the N-th sbatch SIGKILLs the process that ran it
(``dlperf_slurm submit``) before creating the job, or after creating it and printing its id.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
from pathlib import Path

TOOLS = ("sbatch", "squeue", "sacct", "scancel", "scontrol", "srun", "sinfo", "sacctmgr")
#: the fake's one partition, as ``sinfo -o '%P|%R|%D|%l|%G|%s'`` says it (no GRES, no limit); knob "partitions"
PARTITIONS = "debug*|debug|2|infinite|(null)|1-infinite"


def install(bin_dir: Path, state_file: Path, **knobs) -> dict:
    """Make ``bin_dir`` hold the fake tools; returns the env updates a test applies."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        p = bin_dir / tool
        p.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} {tool} \"$@\"\n")
        p.chmod(0o755)
    state = {"next_id": 100, "jobs": {}, "calls": {}, "sacct": "ok", "ping": "up", "max_array": 1001, "log": []}
    state.update(knobs)
    state_file.write_text(json.dumps(state))
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_SLURM_STATE": str(state_file)}


def load(state_file: Path) -> dict:
    return json.loads(Path(state_file).read_text())


def update(state_file: Path, fn) -> dict:
    with open(state_file, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        state = json.load(f)
        fn(state)
        f.seek(0)
        f.truncate()
        json.dump(state, f)
        return state


def set_state(state_file: Path, job_id: str, state: str, reason: str = "", exit_code: str = "0:0",
              in_squeue: bool = True, energy: int | None = None) -> None:
    """Set one job (``123`` or ``123_4``) to a Slurm state; ``in_squeue=False``: purged from the controller;
    ``energy``: the joules sacct's ConsumedEnergyRaw says (a site's energy plugin; the real test cluster, which has
    none, says 0)."""
    def fn(s):
        j = s["jobs"][job_id]
        j.update(state=state, reason=reason, exit_code=exit_code, in_squeue=in_squeue)
        if energy is not None:
            j["energy"] = energy
    update(state_file, fn)


def _main(tool: str, args: list[str]) -> int:
    state_file = Path(os.environ["FAKE_SLURM_STATE"])
    out: list[str] = []
    rc = 0
    kill = None
    if tool == "sbatch":
        import time
        time.sleep(float(load(state_file).get("sbatch_delay", 0)))

    def fn(s):
        nonlocal rc, kill
        s["calls"][tool] = s["calls"].get(tool, 0) + 1
        s["log"].append([tool, *args])
        if tool == "sbatch":
            k = s.get("kill_parent") or {}
            if k.get("call") == s["calls"]["sbatch"]:
                kill = k["when"]
            if kill == "before":
                return s
            rc = _sbatch(s, args, out)
        elif tool == "squeue":
            rc = _squeue(s, args, out)
        elif tool == "sacct":
            rc = _sacct(s, args, out)
        elif tool == "scancel":
            for jid in args:
                for k, j in s["jobs"].items():
                    if (k == jid or k.split("_")[0] == jid) and j["state"] in ("PENDING", "RUNNING"):
                        j.update(state="CANCELLED", reason="by 0")
        elif tool == "sinfo":
            if "%P|%R|%D|%l|%G|%s" in args:
                out.append(s.get("partitions", PARTITIONS))
        elif tool == "sacctmgr":  # no association, no QOS limit (knob "qos": the rows of `show qos`; knobs
            # "defaultaccount" and "accounts": the user's default account, a row of `show user`, and its associations)
            if "qos" in args:
                out.extend(s.get("qos", []))
            elif "user" in args and "format=defaultaccount" in args and "defaultaccount" in s:
                out.append(s["defaultaccount"])
            elif "assoc" in args and "format=account" in args:
                out.extend(s.get("accounts", []))
        elif tool == "scontrol":
            if args[:1] == ["ping"]:
                if s["ping"] != "up":
                    out.append("Slurmctld(primary) at localhost is DOWN")
                    rc = 1
                else:
                    out.append("Slurmctld(primary) at localhost is UP")
            elif args[:1] == ["release"]:
                s.setdefault("released", []).extend(x for a in args[1:] for x in a.split(","))
            elif args[:2] == ["show", "config"]:
                out.append(f"ClusterName             = fake\nMaxArraySize            = {s['max_array']}")
                out.extend(f"{k:<23} = {v}" for k, v in s.get("config", {}).items())  # knob "config": more keys
        return s

    update(state_file, fn)
    if kill == "before":
        os.kill(os.getppid(), 9)
        return 1
    text = "\n".join(out)
    if rc and tool in ("sbatch", "sacct", "squeue"):
        print(text, file=sys.stderr)
    elif text:
        print(text, flush=True)
    if kill == "after":
        os.kill(os.getppid(), 9)
    return rc


def _sbatch(s, args, out) -> int:
    if s.get("sbatch_fail_after") is not None and s["calls"]["sbatch"] > s["sbatch_fail_after"]:
        out.append(s.get("sbatch_error", "sbatch: error: Batch job submission failed: Job violates accounting/QOS "
                                         "policy (job submit limit, user's size and/or time limits)"))
        return 1
    script = Path(args[-1]).read_text()
    opts = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", script, re.M))
    opts.update({a[2:].split("=", 1)[0]: (a.split("=", 1)[1] if "=" in a else True) for a in args[:-1]
                 if a.startswith("--")})
    if opts.get("partition") and opts["partition"].strip("'") not in ("debug", "gpu"):
        out.append("sbatch: error: Batch job submission failed: Invalid partition name specified")
        return 1
    jid = str(s["next_id"])
    s["next_id"] += 1
    name = opts.get("job-name", "script").strip("'")
    array = opts.get("array")
    s.setdefault("submitted", []).append({"id": jid, "name": name, "array": array, "script": args[-1],
                                          "opts": opts})
    if array:
        m = re.match(r"(\d+)-(\d+)", array)
        for t in range(int(m.group(1)), int(m.group(2)) + 1):
            s["jobs"][f"{jid}_{t}"] = {"name": name, "state": "PENDING", "reason": "Priority", "in_squeue": True,
                                       "exit_code": "0:0"}
    else:
        s["jobs"][jid] = {"name": name, "state": "PENDING", "reason": "Priority", "in_squeue": True, "exit_code": "0:0"}
    out.append(f"Submitted batch job {jid}")
    return 0


def _opt(args, *names):
    for i, a in enumerate(args):
        if a in names and i + 1 < len(args):
            return args[i + 1]
    return None


def _select(s, args, name_flags=("-n", "--name")):
    ids = _opt(args, "-j", "--jobs")
    names = _opt(args, *name_flags)
    for k, j in s["jobs"].items():
        if ids is not None and k not in ids.split(",") and k.split("_")[0] not in ids.split(","):
            continue
        if names is not None and j["name"] not in names.split(","):
            continue
        yield k, j


def _squeue(s, args, out) -> int:
    if s["ping"] != "up" or s.get("squeue_down"):
        out.append("squeue: error: Unable to contact slurm controller (connect failure)")
        return 1
    ids = _opt(args, "-j", "--jobs")
    found = False
    for k, j in _select(s, args):
        if not j.get("in_squeue", True):
            continue
        found = True
        out.append(f"{k}|{k.split('_')[0]}|{j['name']}|{j['state']}|{j.get('reason') or 'None'}|n1")
    if ids and not found and "," not in ids:
        out.append("slurm_load_jobs error: Invalid job id specified")
        return 1
    return 0


def _sacct(s, args, out) -> int:
    if s["sacct"] != "ok":
        out.append("sacct: error: Slurm accounting storage is disabled")
        return 1
    for k, j in _select(s, args, ("--name",)):  # sacct's -n is --noheader
        state = j["state"] + (" by 0" if j["state"] == "CANCELLED" else "")
        fields = [k, k.split("_")[0], state, j.get("exit_code", "0:0"), "None", "n1"]
        if "ConsumedEnergyRaw" in " ".join(args):
            fields.append(str(j.get("energy", 0)))
        out.append("|".join(fields))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1], sys.argv[2:]))
