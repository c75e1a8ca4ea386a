"""The health gate: before training, each job checks its own allocation in bounded time.

Two steps, both run by the job script (``templates/health.sh.j2``) before the launch:

- ``python -m dlperf_slurm.probes.health probe`` (:mod:`dlperf_slurm.probes.healthprobe`) runs once per node (one
``srun`` task
  per node under Slurm; directly under the local executor). It checks the node's GPUs (NVML through pynvml when
  it imports, else ``nvidia-smi``): the GPUs the job asked for are visible, no uncorrected ECC error since boot
  (volatile counters), no row-remapping failure, no XID in the kernel log where it can be read, clocks not
  throttled (HW slowdown, HW/SW thermal, power brake). Then it forks the node's ranks (the job's GPUs per node),
  and every rank of the job takes part in one all-reduce (NCCL on GPUs, gloo on CPU; torch imported in the ranks
  only), timed as nccl-tests times it. It prints one record line per node, never a ``:::DLPERF`` event.
- ``python -m dlperf_slurm.probes.health judge`` reads those records on the batch host, computes the bus bandwidth,
  compares it with the threshold, names the nodes to blame, prints the ONE ``:::DLPERF health`` event of the run
  and writes the verdict for the exit marker. Exit 0: healthy; :data:`UNHEALTHY_EXIT`: the run must not start.

Bus bandwidth as nccl-tests defines it (``doc/PERFORMANCE.md``): the time of one all-reduce is each rank's mean
iteration time averaged over the ranks; algbw = bytes / time; busbw = algbw x 2(n-1)/n (GB/s = 1e9 bytes/s). One
rank has no bus: its busbw is not measured and no threshold applies to it.

The status a failed gate gives a run (UNHEALTHY) is decided in :mod:`dlperf_slurm.outcome.decision`, from the exit
marker.
This module imports only :mod:`dlperf_slurm.events` and the standard library at the top: the CLI and the 1-rank
gate stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm import events as ev
from dlperf_slurm.probes.healthprobe import NODE_PREFIX
from dlperf_slurm.words import plural

UNHEALTHY_EXIT = 3  # the judge's exit code when the gate failed
_NODE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


# ================================================================================================ the math


def algbw_gbs(nbytes: float, seconds: float) -> float:
    """nccl-tests' algorithm bandwidth: bytes / time, in GB/s (1e9)."""
    return nbytes / seconds / 1e9


def busbw_factor(ranks: int) -> float:
    """nccl-tests' all-reduce bus factor 2(n-1)/n."""
    return 2.0 * (ranks - 1) / ranks


def busbw_gbs(nbytes: float, seconds: float, ranks: int) -> float:
    return algbw_gbs(nbytes, seconds) * busbw_factor(ranks)


def safe_nodes(names: Iterable[Any]) -> list[str]:
    """Node names fit for ``--exclude`` (anything else is dropped), sorted, once each."""
    return sorted({str(n) for n in names if isinstance(n, str) and _NODE_NAME.match(n)})


#: what srun (or the rendezvous) says when the controller or the network failed, not the node
_UNREACHABLE = re.compile(r"Unable to contact slurm controller|Unable to confirm allocation|slurm_receive_msg.*"
                          r"(?:timed out|Connection refused)|Zero Bytes were transmitted|Socket timed out|"
                          r"Job step creation temporarily disabled|Unable to create step for job", re.I)


def scheduler_unreachable(other: Sequence[str], ping: Any = None) -> str:
    """Why the probes could not be started by the scheduler ('' when nothing says so): srun's own words about
    the controller, else, when ``ping`` (a callable returning ``scontrol ping``'s text) says so, the controller
    is down. That is no node's fault."""
    said = [line.strip() for line in other if _UNREACHABLE.search(line)]
    if said:
        return f"the scheduler's controller could not be reached ({said[0][:160]})"
    if ping is not None:
        text = ping() or ""
        if "DOWN" in text:
            return f"the scheduler's controller could not be reached (scontrol ping: {text.strip().splitlines()[0]})"
    return ""


class _Reports:
    """The nodes' probe reports read for :func:`judge`: the problems they show, the nodes to blame, what says
    the scheduler or the rendezvous could not be reached (no node blamed), each node's GPUs and each rank's
    all-reduce time."""

    def __init__(self, hosts: Sequence[str], unreachable: str) -> None:
        self.unreachable = unreachable
        self.problems: list[str] = []
        self.blamed: set[str] = set()
        self.outage: list[str] = [unreachable] if unreachable else []
        self.gpus: dict[str, str] = {}
        self.times: dict[int, float] = {}
        self.nbytes: Any = None
        self.iters: Any = None
        self.backend = ""

    def read(self, host: str, rec: Mapping[str, Any] | None) -> None:
        if rec is None:
            if self.unreachable:
                self.problems.append(f"{host}: no report from the probe: {self.unreachable}")
                return
            self.problems.append(f"{host}: no report from the probe (not started, crashed or past the time bound)")
            self.blamed.add(host)
            return
        self.gpus[host] = str(rec.get("gpu_text") or "")
        for p in rec.get("gpu_problems") or ():
            self.problems.append(f"{host}: {p}")
            self.blamed.add(host)
        for r in rec.get("ranks") or ():
            self._rank(host, r)
        self.backend = rec.get("backend") or self.backend

    def _rank(self, host: str, r: Mapping[str, Any]) -> None:
        if r.get("error") and r.get("rendezvous"):  # the all-reduce's rendezvous, not this node
            self.problems.append(f"{host}: rank {r.get('rank')}: the rendezvous at {r['rendezvous']} could not be "
                                 f"reached: {r['error']}")
            note = f"the all-reduce's rendezvous at {r['rendezvous']} could not be reached"
            if note not in self.outage:
                self.outage.append(note)
        elif r.get("error"):
            self.problems.append(f"{host}: rank {r.get('rank')}: {r['error']}")
            self.blamed.add(host)
        elif isinstance(r.get("seconds"), (int, float)) and r["seconds"] > 0:
            self.times[int(r["rank"])] = float(r["seconds"])
            self.nbytes, self.iters, self.backend = r.get("bytes"), r.get("iters"), r.get("backend", self.backend)


def judge(records: Mapping[str, Mapping[str, Any]], hosts: Sequence[str], ranks: int,
          min_busbw_gbs: float = 0.0, unreachable: str = "", expected_by: str = "") -> dict[str, Any]:
    """The gate's verdict from the node records (host -> record), the job's hosts and its rank count: the fields
    of the ``health`` event (``ok``, ``problems``, ``blamed``, bandwidths). ``expected_by``: the system whose
    expected bus bandwidth the threshold is (the site file's ``busbw_gbs``), named in the problem.
    ``unreachable``: why the scheduler could not start the probes (:func:`scheduler_unreachable`); then a node
    without a report is not blamed, nor a rank whose rendezvous failed: the run is retried as it is, on the same
    nodes."""
    r = _Reports(hosts, unreachable)
    for host in hosts:
        r.read(host, records.get(host))
    problems, blamed, outage, gpus, times = r.problems, r.blamed, r.outage, r.gpus, r.times
    nbytes, iters, backend = r.nbytes, r.iters, r.backend
    out: dict[str, Any] = {ev.RANKS: ranks, ev.NODES: list(hosts), ev.BACKEND: backend, ev.GPUS: gpus}
    busbw = None
    unavailable = sorted({str(r["unavailable"]) for r in records.values() if r.get("unavailable")})
    if unavailable:  # no torch for the gate's interpreter: said, no node blamed (a threshold then fails unblamed)
        out[ev.NOTES] = "; ".join(unavailable)
        if min_busbw_gbs:
            problems.append(f"all-reduce bus bandwidth not measured ({out[ev.NOTES]}); threshold "
                            f"{min_busbw_gbs:g} GB/s")
    elif ranks > 1:
        missing = sorted(set(range(ranks)) - set(times))
        if missing and not problems and not outage:
            problems.append(f"ranks {missing} did not time the all-reduce")
            blamed.update(hosts)
        if not missing and nbytes:
            seconds = sum(times.values()) / len(times)  # nccl-tests' default: the ranks' mean time
            busbw = busbw_gbs(float(nbytes), seconds, ranks)
            out.update({ev.BYTES: nbytes, ev.ITERS: iters, ev.SECONDS_PER_ITER: seconds,
                        ev.ALGBW_GBS: algbw_gbs(float(nbytes), seconds), ev.BUSBW_GBS: busbw})
    else:
        out[ev.NOTES] = "1 rank: no bus to measure (no all-reduce)"
    whys = sorted({str(r["backend_why"]) for r in records.values() if r.get("backend_why")})
    if whys:  # GPUs asked for, but the all-reduce could not use them (said, not judged: the run shows its device)
        out[ev.NOTES] = "; ".join([*([out[ev.NOTES]] if out.get(ev.NOTES) else []), *whys])
    if min_busbw_gbs:
        out[ev.MIN_BUSBW_GBS] = min_busbw_gbs
        if busbw is not None and busbw < min_busbw_gbs:
            bound = (f"measured < {min_busbw_gbs:g} GB/s expected of system {expected_by} (its busbw_gbs)"
                     if expected_by else f"< {min_busbw_gbs:g} GB/s (threshold)")
            problems.append(f"all-reduce bus bandwidth {busbw:.3g} GB/s {bound}"
                            + (" over all nodes: the probe cannot single one out" if len(hosts) > 1 else ""))
            blamed.update(hosts)
    out[ev.OK] = not problems
    out[ev.PROBLEMS] = problems
    out[ev.BLAMED] = safe_nodes(blamed)
    if outage and problems:
        out[ev.UNREACHABLE] = "; ".join(outage)
    return out


def marker_verdict(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """What the exit marker keeps of the verdict (read by outcome and by ``submit --retry-failed``)."""
    return {ev.OK: bool(verdict.get(ev.OK)), ev.BLAMED: list(verdict.get(ev.BLAMED) or ()),
            ev.PROBLEMS: [str(p)[:300] for p in (verdict.get(ev.PROBLEMS) or ())[:8]],
            ev.BUSBW_GBS: verdict.get(ev.BUSBW_GBS), ev.MIN_BUSBW_GBS: verdict.get(ev.MIN_BUSBW_GBS),
            **({ev.UNREACHABLE: str(verdict[ev.UNREACHABLE])[:300]} if verdict.get(ev.UNREACHABLE) else {})}


def summary(verdict: Mapping[str, Any] | None) -> str:
    """The runs table's health cell: '' without a gate, else ok/failed with the bus bandwidth and the problems."""
    if not verdict:
        return ""
    if verdict.get(ev.ERROR):
        return f"gate error: {verdict[ev.ERROR]}"
    bw = verdict.get(ev.BUSBW_GBS)
    text = ("ok" if verdict.get(ev.OK) else "failed") + (f", busbw {bw:.3g} GB/s" if isinstance(bw, (int, float))
                                                           else "")
    if verdict.get(ev.MIN_BUSBW_GBS):
        text += f" (min {verdict[ev.MIN_BUSBW_GBS]:g})"
    if verdict.get(ev.PROBLEMS):
        text += ": " + "; ".join(map(str, verdict[ev.PROBLEMS]))
    return text


def markdown_line(runs: Sequence[Any]) -> str:
    """The summary's one line on the gate: runs checked, how many failed, the bus bandwidth's range ('' when no
    run was gated). ``runs``: RunRows."""
    gated = [r for r in runs if r.health]
    if not gated:
        return ""
    failed = [r for r in gated if not r.health.startswith("ok")]
    bws = sorted(r.health_busbw_gbs for r in gated if isinstance(r.health_busbw_gbs, (int, float)))
    text = f"Health gate: {plural(len(gated), 'run')} checked, {len(failed)} failed"
    if bws:
        text += f"; all-reduce busbw {bws[0]:.3g}–{bws[-1]:.3g} GB/s (nccl-tests' busbw)"
    return text + "."


# ================================================================================================ the verdict


def read_records(text: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The node records in a probe's output (host -> record) and the other lines (tracebacks, srun's words)."""
    records, other = {}, []
    for line in text.splitlines():
        at = line.find(NODE_PREFIX)
        if at >= 0:
            try:
                rec = json.loads(line[at + len(NODE_PREFIX):])
                records[str(rec["host"])] = rec
                continue
            except (ValueError, KeyError, TypeError):
                pass
        if line.strip():
            other.append(line)
    return records, other


def run_judge(args: argparse.Namespace) -> int:
    try:
        with open(args.probe_out, errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    records, other = read_records(text)
    missing = [h for h in args.hosts if h not in records]
    unreachable = scheduler_unreachable(other, _ping if os.environ.get("SLURM_JOB_ID") else None) if missing else ""
    verdict = judge(records, args.hosts, args.ranks, args.min_busbw_gbs, unreachable, args.expected_by)
    verdict[ev.SECONDS] = round(time.time() - args.started, 3) if args.started else None
    if not verdict[ev.OK] and other:
        for line in other[-20:]:
            print(f"health probe: {line}")
    ev.emit(ev.EV_HEALTH, **{**verdict, ev.TIME: time.time()})
    if args.marker:
        tmp = f"{args.marker}.tmp.{os.getpid()}"
        try:
            with open(tmp, "w") as f:
                json.dump(marker_verdict(verdict), f, separators=(",", ":"))
            os.replace(tmp, args.marker)
        except OSError as err:  # a full disk: the verdict stays in the log line above; no temporary file is left
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            with contextlib.suppress(OSError):  # the log may be on that disk too
                print(f"health judge: {args.marker} could not be written ({err.strerror or err})", file=sys.stderr)
    return 0 if verdict[ev.OK] else UNHEALTHY_EXIT


def _ping() -> str:
    """``scontrol ping``'s words (bounded), '' when it cannot be run."""
    import subprocess

    try:
        p = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout + p.stderr


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dlperf_slurm.probes.health", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe", help="check this node and take part in the all-reduce (one per node)")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--ranks-per-node", type=int, required=True)
    p.add_argument("--expect-gpus", type=int, default=0, help="GPUs per node the job asked for (0: a CPU job)")
    p.add_argument("--master", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--size-mb", type=float, default=0.0)
    p.add_argument("--no-allocation", action="store_true", help="no scheduler gave this job its GPUs (local run)")
    j = sub.add_parser("judge", help="the verdict from the probes' output: one :::DLPERF health line")
    j.add_argument("--probe-out", required=True)
    j.add_argument("--hosts", nargs="+", required=True)
    j.add_argument("--ranks", type=int, required=True)
    j.add_argument("--min-busbw-gbs", type=float, default=0.0)
    j.add_argument("--expected-by", default="", help="the system whose expected busbw the threshold is")
    j.add_argument("--marker", default="")
    j.add_argument("--started", type=float, default=0.0, help="when the gate started (unix time)")
    args = ap.parse_args(argv)
    if args.cmd == "probe":
        from dlperf_slurm.probes import healthprobe

        healthprobe.probe(args)
        return 0
    return run_judge(args)


if __name__ == "__main__":
    sys.exit(main())
