"""The health gate: before training, each job checks its own allocation in bounded time.

Two steps, both run by the job script (``templates/health.sh.j2``) before the launch:

- ``python -m dlperf_slurm.health probe`` runs once per node (one ``srun`` task per node under Slurm; directly under
  the local executor). It checks the node's GPUs (NVML through pynvml when it imports, else ``nvidia-smi``): the
  GPUs the job asked for are visible, no uncorrected ECC error since boot (volatile counters), no row-remapping
  failure, no XID in the kernel log where it can be read, clocks not throttled (HW slowdown, HW/SW thermal, power
  brake). Then it forks the node's ranks (the job's GPUs per node), and every rank of the job takes part in one
  all-reduce (NCCL on GPUs, gloo on CPU; torch imported in the ranks only), timed as nccl-tests times it. It prints
  one record line per node (:data:`NODE_PREFIX`), never a ``:::DLPERF`` event.
- ``python -m dlperf_slurm.health judge`` reads those records on the batch host, computes the bus bandwidth,
  compares it with the threshold, names the nodes to blame, prints the ONE ``:::DLPERF health`` event of the run
  and writes the verdict for the exit marker. Exit 0: healthy; :data:`UNHEALTHY_EXIT`: the run must not start.

Bus bandwidth as nccl-tests defines it (``doc/PERFORMANCE.md``): the time of one all-reduce is each rank's mean
iteration time averaged over the ranks; algbw = bytes / time; busbw = algbw x 2(n-1)/n (GB/s = 1e9 bytes/s). One
rank has no bus: its busbw is not measured and no threshold applies to it.

The status a failed gate gives a run (UNHEALTHY) is decided in :mod:`dlperf_slurm.outcome`, from the exit marker.
This module imports only :mod:`dlperf_slurm.events` at the top: the CLI and the 1-rank gate stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm import events as ev

NODE_PREFIX = "dlperf-health-node "  # a probe's record line (in the probe's output, not in the run's log)
UNHEALTHY_EXIT = 3  # the judge's exit code when the gate failed
DEFAULT_SIZE_MB = {"nccl": 1024, "gloo": 32}  # the all-reduce's buffer when the matrix gives none
MAX_ITERS = 20
#: NVML clock throttle reasons that mean a sick or overheating GPU (idle, application clocks, SW power cap and
#: sync boost are normal): HW slowdown, SW thermal, HW thermal, HW power brake
BAD_THROTTLE = {0x8: "HW slowdown", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
                0x80: "HW power brake slowdown"}
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


def judge(records: Mapping[str, Mapping[str, Any]], hosts: Sequence[str], ranks: int,
          min_busbw_gbs: float = 0.0) -> dict[str, Any]:
    """The gate's verdict from the node records (host -> record), the job's hosts and its rank count: the fields
    of the ``health`` event (``ok``, ``problems``, ``blamed``, bandwidths)."""
    problems: list[str] = []
    blamed: set[str] = set()
    gpus: dict[str, str] = {}
    times: dict[int, float] = {}
    nbytes = iters = None
    backend = ""
    for host in hosts:
        rec = records.get(host)
        if rec is None:
            problems.append(f"{host}: no report from the probe (not started, crashed or past the time bound)")
            blamed.add(host)
            continue
        gpus[host] = str(rec.get("gpu_text") or "")
        for p in rec.get("gpu_problems") or ():
            problems.append(f"{host}: {p}")
            blamed.add(host)
        for r in rec.get("ranks") or ():
            if r.get("error"):
                problems.append(f"{host}: rank {r.get('rank')}: {r['error']}")
                blamed.add(host)
            elif isinstance(r.get("seconds"), (int, float)) and r["seconds"] > 0:
                times[int(r["rank"])] = float(r["seconds"])
                nbytes, iters, backend = r.get("bytes"), r.get("iters"), r.get("backend", backend)
        backend = rec.get("backend") or backend
    out: dict[str, Any] = {ev.RANKS: ranks, ev.NODES: list(hosts), ev.BACKEND: backend, ev.GPUS: gpus}
    busbw = None
    if ranks > 1:
        missing = sorted(set(range(ranks)) - set(times))
        if missing and not problems:
            problems.append(f"ranks {missing} did not time the all-reduce")
            blamed.update(hosts)
        if not missing and nbytes:
            seconds = sum(times.values()) / len(times)  # nccl-tests' default: the ranks' mean time
            busbw = busbw_gbs(float(nbytes), seconds, ranks)
            out.update({ev.BYTES: nbytes, ev.ITERS: iters, ev.SECONDS_PER_ITER: seconds,
                        ev.ALGBW_GBS: algbw_gbs(float(nbytes), seconds), ev.BUSBW_GBS: busbw})
    else:
        out[ev.NOTES] = "1 rank: no bus to measure (no all-reduce)"
    if min_busbw_gbs:
        out[ev.MIN_BUSBW_GBS] = min_busbw_gbs
        if busbw is not None and busbw < min_busbw_gbs:
            problems.append(f"all-reduce bus bandwidth {busbw:.3g} GB/s < {min_busbw_gbs:g} GB/s (threshold)"
                            + (" over all nodes: the probe cannot single one out" if len(hosts) > 1 else ""))
            blamed.update(hosts)
    out[ev.OK] = not problems
    out[ev.PROBLEMS] = problems
    out[ev.BLAMED] = safe_nodes(blamed)
    return out


def marker_verdict(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """What the exit marker keeps of the verdict (read by outcome and by ``submit --retry-failed``)."""
    return {ev.OK: bool(verdict.get(ev.OK)), ev.BLAMED: list(verdict.get(ev.BLAMED) or ()),
            ev.PROBLEMS: [str(p)[:300] for p in (verdict.get(ev.PROBLEMS) or ())[:8]],
            ev.BUSBW_GBS: verdict.get(ev.BUSBW_GBS), ev.MIN_BUSBW_GBS: verdict.get(ev.MIN_BUSBW_GBS)}


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


# ================================================================================================ the GPUs


def _visible(indices: list[int], uuids: list[str]) -> list[int]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves this job (all when it is unset)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return indices
    keep = []
    for item in (x.strip() for x in cvd.split(",") if x.strip()):
        for i, u in zip(indices, uuids):
            if item == str(i) or (item.startswith("GPU-") and u.startswith(item)):
                keep.append(i)
    return keep


def gpu_checks(expected: int, allocated: bool = True) -> tuple[list[str], str, int]:
    """(problems, text, GPUs visible) of this node: NVML, else nvidia-smi, else "no GPU". ``allocated``: a
    scheduler gave the job its GPUs (without one, under the local executor, fewer GPUs than the matrix names is
    said, not a failure)."""
    try:
        import pynvml  # noqa: F401
        problems, text, n = _nvml_checks(expected)
    except ImportError:
        problems, text, n = _smi_checks(expected)
    except Exception as err:  # noqa: BLE001 - NVML present but failing (no driver): that is the finding
        problems, text, n = ([f"NVML failed: {err}"] if expected else []), "no GPU", 0
    if not allocated and n < expected:
        return [p for p in problems if "visible" not in p and "NVML failed" not in p and "no NVML" not in p
                and "nvidia-smi failed" not in p], f"{text} (no scheduler allocation)", n
    return problems, text, n


def _nvml_checks(expected: int) -> tuple[list[str], str, int]:
    import pynvml as nv

    nv.nvmlInit()
    try:
        n = nv.nvmlDeviceGetCount()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        uuids = [str(nv.nvmlDeviceGetUUID(h)) for h in handles]
        seen = _visible(list(range(n)), uuids)
        problems = [f"asked for {expected} GPUs, {len(seen)} visible"] if len(seen) < expected else []
        for i in seen:
            h = handles[i]
            for what, call in (("uncorrected ECC errors since boot",
                                lambda: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                                       nv.NVML_VOLATILE_ECC)),
                               ("clock throttle", lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
                               ("row remapping", lambda: nv.nvmlDeviceGetRemappedRows(h))):
                try:
                    value = call()
                except Exception:  # noqa: BLE001 - not supported on this GPU: nothing to report
                    continue
                if what == "clock throttle":
                    bad = [name for bit, name in BAD_THROTTLE.items() if int(value) & bit]
                    if bad:
                        problems.append(f"GPU {i}: clocks throttled ({', '.join(bad)})")
                elif what == "row remapping":
                    if len(value) >= 4 and value[3]:
                        problems.append(f"GPU {i}: row remapping failed")
                elif int(value) > 0:
                    problems.append(f"GPU {i}: {int(value)} {what}")
        problems += _xid_problems() if seen else []
        return problems, f"{len(seen)}/{expected} GPUs" if (seen or expected) else "no GPU", len(seen)
    finally:
        nv.nvmlShutdown()


def _smi_checks(expected: int) -> tuple[list[str], str, int]:
    fields = ("index,uuid,ecc.errors.uncorrected.volatile.total,clocks_throttle_reasons.hw_slowdown,"
              "clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.hw_thermal_slowdown,"
              "clocks_throttle_reasons.hw_power_brake_slowdown")
    try:
        p = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ([f"asked for {expected} GPUs: no NVML and no nvidia-smi"] if expected else []), "no GPU", 0
    if p.returncode != 0:
        return ([f"nvidia-smi failed: {(p.stderr or p.stdout).strip()[:200]}"] if expected else []), "no GPU", 0
    rows = [[c.strip() for c in line.split(",")] for line in p.stdout.splitlines() if line.strip()]
    seen = _visible([int(r[0]) for r in rows], [r[1] for r in rows])
    problems = [f"asked for {expected} GPUs, {len(seen)} visible"] if len(seen) < expected else []
    names = ["HW slowdown", "SW thermal slowdown", "HW thermal slowdown", "HW power brake slowdown"]
    for r in rows:
        if int(r[0]) not in seen:
            continue
        if r[2].isdigit() and int(r[2]) > 0:
            problems.append(f"GPU {r[0]}: {r[2]} uncorrected ECC errors since boot")
        bad = [n for n, v in zip(names, r[3:7]) if v == "Active"]
        if bad:
            problems.append(f"GPU {r[0]}: clocks throttled ({', '.join(bad)})")
    problems += _xid_problems() if seen else []
    return problems, f"{len(seen)}/{expected} GPUs" if (seen or expected) else "no GPU", len(seen)


def _xid_problems() -> list[str]:
    """XID events since boot, from the kernel log where this user may read it (else nothing is claimed)."""
    try:
        p = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return []
    xids = [line.strip() for line in p.stdout.splitlines() if "NVRM: Xid" in line] if p.returncode == 0 else []
    return [f"{len(xids)} XID events since boot, last: {xids[-1][:200]}"] if xids else []


# ================================================================================================ the probe


def _rank(rank: int, local: int, world: int, master: str, port: int, nbytes: int, use_cuda: bool,
          deadline: float, conn) -> None:
    """One rank of the all-reduce (a forked child): its mean iteration time, sent back through ``conn``."""
    out: dict[str, Any] = {"rank": rank}
    try:
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        backend = "nccl" if use_cuda else "gloo"
        out.update(backend=backend, bytes=nbytes)
        left = max(1.0, deadline - time.time())
        dist.init_process_group(backend, init_method=f"tcp://{master}:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=left))
        dev = torch.device("cuda", local) if use_cuda else torch.device("cpu")
        if use_cuda:
            torch.cuda.set_device(dev)
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
        sync = torch.cuda.synchronize if use_cuda else (lambda: None)
        t = time.perf_counter()
        dist.all_reduce(buf)  # warm-up: connections
        sync()
        first = time.perf_counter() - t
        # every rank must run the same count: rank 0's choice, from its warm-up, within the time left
        n = torch.tensor([max(1, min(MAX_ITERS, int((deadline - time.time()) / 3 / max(first, 1e-6))))],
                         device=dev)
        dist.broadcast(n, 0)
        iters = int(n.item())
        dist.barrier()
        t = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        sync()
        out.update(seconds=(time.perf_counter() - t) / iters, iters=iters)
        dist.destroy_process_group()
    except Exception as err:  # noqa: BLE001 - the finding, reported by the judge
        out["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
    conn.send(out)
    conn.close()


def probe(args: argparse.Namespace) -> dict[str, Any]:
    start = time.time()
    deadline = start + max(1.0, args.timeout * 0.8)
    node_rank = int(os.environ.get("SLURM_NODEID", "0"))
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    problems, text, visible = gpu_checks(args.expect_gpus, allocated=not args.no_allocation)
    rec: dict[str, Any] = {"host": host, "node_rank": node_rank, "gpu_problems": problems, "gpu_text": text,
                           "ranks": []}
    world = args.nodes * args.ranks_per_node
    if world > 1:
        import multiprocessing as mp

        use_cuda = args.expect_gpus > 0 and visible >= args.ranks_per_node
        backend = "nccl" if use_cuda else "gloo"
        nbytes = int((args.size_mb or DEFAULT_SIZE_MB[backend]) * 2**20) // 4 * 4
        ctx = mp.get_context("fork")  # torch is imported in the children only
        kids = []
        for local in range(args.ranks_per_node):
            a, b = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_rank, args=(node_rank * args.ranks_per_node + local, local, world, args.master,
                                                args.port, nbytes, use_cuda, deadline, b), daemon=True)
            p.start()
            kids.append((local, p, a))
        for local, p, a in kids:
            rank = node_rank * args.ranks_per_node + local
            got = a.recv() if a.poll(max(0.1, deadline + 0.1 * args.timeout - time.time())) else None
            rec["ranks"].append(got or {"rank": rank, "error": "no answer within the time bound"})
            if p.is_alive():
                p.kill()
        rec["backend"] = backend
    rec["seconds"] = time.time() - start
    print(NODE_PREFIX + json.dumps(rec), flush=True)
    return rec


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
    verdict = judge(records, args.hosts, args.ranks, args.min_busbw_gbs)
    verdict[ev.SECONDS] = round(time.time() - args.started, 3) if args.started else None
    if not verdict[ev.OK] and other:
        for line in other[-20:]:
            print(f"health probe: {line}")
    ev.emit(ev.EV_HEALTH, **verdict, **{ev.TIME: time.time()})
    if args.marker:
        tmp = f"{args.marker}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(marker_verdict(verdict), f, separators=(",", ":"))
        os.replace(tmp, args.marker)
    return 0 if verdict[ev.OK] else UNHEALTHY_EXIT


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dlperf_slurm.health", description=__doc__.split("\n\n")[0])
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
    j.add_argument("--marker", default="")
    j.add_argument("--started", type=float, default=0.0, help="when the gate started (unix time)")
    args = ap.parse_args(argv)
    if args.cmd == "probe":
        probe(args)
        return 0
    return run_judge(args)


if __name__ == "__main__":
    sys.exit(main())
