"""The health gate's probe, one per node (``python -m dlperf_slurm.probes.health probe``): this node's GPUs (NVML
through
pynvml, else ``nvidia-smi``, else "no GPU") and its ranks' share of the all-reduce across every rank of the job
(NCCL on GPUs, gloo on CPU; torch imported in the forked ranks only). It prints one record line
(:data:`NODE_PREFIX`); :mod:`dlperf_slurm.probes.health` judges the records. Standard library only at import time.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any
from dlperf_slurm.words import plural

NODE_PREFIX = "dlperf-health-node "  # a probe's record line (in the probe's output, not in the run's log)
DEFAULT_SIZE_MB = {"nccl": 1024, "gloo": 32}  # the all-reduce's buffer when the matrix gives none
MAX_ITERS = 20  # nccl-tests' default count of timed iterations: the most the probe times
MIN_ITERS = 3
TIMED_S = 0.3  # about this long of timed all-reduces (at least MIN_ITERS, within the time bound)
#: NVML clock throttle reasons that mean a sick or overheating GPU (idle, application clocks, SW power cap and
#: sync boost are normal): HW slowdown, SW thermal, HW thermal, HW power brake
BAD_THROTTLE = {0x8: "HW slowdown", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
                0x80: "HW power brake slowdown"}


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
        problems, n = _nvml_checks()
        tool = "NVML"
    except Exception:  # noqa: BLE001 - no pynvml, or NVML cannot start (no driver library): nvidia-smi says
        problems, n = _smi_checks()
        tool = "nvidia-smi"
    text = f"{n}/{plural(expected, 'GPU')} ({tool})" if (n or expected) else "no GPU"
    if n < expected:
        if allocated:
            problems.insert(0, f"asked for {plural(expected, 'GPU')}, {n} visible")
        else:
            text += " (no scheduler allocation)"
    return problems, text, n


def _try(call, *args):
    """An NVML query, None where this GPU does not support it."""
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and kin
        return None


def _nvml_checks() -> tuple[list[str], int]:
    import pynvml as nv

    nv.nvmlInit()
    try:
        n = nv.nvmlDeviceGetCount()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        uuids = [str(nv.nvmlDeviceGetUUID(h)) for h in handles]
        seen = _visible(list(range(n)), uuids)
        problems: list[str] = []
        for i in seen:
            h = handles[i]
            ecc = _try(nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
            if ecc:
                problems.append(f"GPU {i}: {int(ecc)} uncorrected ECC errors since boot")
            bad = [name for bit, name in BAD_THROTTLE.items()
                   if int(_try(nv.nvmlDeviceGetCurrentClocksThrottleReasons, h) or 0) & bit]
            if bad:
                problems.append(f"GPU {i}: clocks throttled ({', '.join(bad)})")
            rows = _try(nv.nvmlDeviceGetRemappedRows, h)  # (corrected, uncorrected, pending, failure)
            if rows and len(rows) >= 4 and rows[3]:
                problems.append(f"GPU {i}: row remapping failed")
        return problems + (_xid_problems() if seen else []), len(seen)
    finally:
        nv.nvmlShutdown()


def _smi_checks() -> tuple[list[str], int]:
    fields = ("index,uuid,ecc.errors.uncorrected.volatile.total,clocks_throttle_reasons.hw_slowdown,"
              "clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.hw_thermal_slowdown,"
              "clocks_throttle_reasons.hw_power_brake_slowdown")
    try:
        p = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return [], 0
    if p.returncode != 0:
        return [], 0
    rows = [[c.strip() for c in line.split(",")] for line in p.stdout.splitlines()]
    rows = [r for r in rows if len(r) >= 7 and r[0].isdigit()]
    seen = _visible([int(r[0]) for r in rows], [r[1] for r in rows])
    problems: list[str] = []
    names = ["HW slowdown", "SW thermal slowdown", "HW thermal slowdown", "HW power brake slowdown"]
    for r in rows:
        if int(r[0]) not in seen:
            continue
        if r[2].isdigit() and int(r[2]) > 0:
            problems.append(f"GPU {r[0]}: {r[2]} uncorrected ECC errors since boot")
        bad = [n for n, v in zip(names, r[3:7]) if v == "Active"]
        if bad:
            problems.append(f"GPU {r[0]}: clocks throttled ({', '.join(bad)})")
    return problems + (_xid_problems() if seen else []), len(seen)


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
        try:
            dist.init_process_group(backend, init_method=f"tcp://{master}:{port}", rank=rank, world_size=world,
                                    timeout=timedelta(seconds=left))
        except Exception as err:  # noqa: BLE001 - the rendezvous, not this node: said apart (no node blamed)
            out["rendezvous"] = f"tcp://{master}:{port}"
            raise err
        dev = torch.device("cuda", local) if use_cuda else torch.device("cpu")
        if use_cuda:
            torch.cuda.set_device(dev)
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
        sync = torch.cuda.synchronize if use_cuda else (lambda: None)
        dist.all_reduce(buf)  # warm-up: connections
        t = time.perf_counter()
        dist.all_reduce(buf)  # the estimate the count is chosen from
        sync()
        first = time.perf_counter() - t
        # every rank must run the same count: rank 0's choice, from its warm-up, within the time left
        budget = min(TIMED_S, (deadline - time.time()) / 3)
        n = torch.tensor([max(1, min(MAX_ITERS, max(MIN_ITERS, int(budget / max(first, 1e-6)))))], device=dev)
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

        try:  # once, before the ranks fork (they share it; importing torch starts no thread and no CUDA)
            import torch.distributed
        except Exception as err:  # noqa: BLE001 - this interpreter has no torch: a set-up matter, no node's fault
            rec.update(unavailable=f"no all-reduce: {sys.executable} cannot import torch ({type(err).__name__})",
                       seconds=time.time() - start)
            print(NODE_PREFIX + json.dumps(rec), flush=True)
            return rec
        # NCCL where the node's GPUs serve every rank and this torch has NCCL (a question about the build, asked
        # without starting CUDA: the ranks fork after it); a torch without it reduces over gloo, and says why
        nccl = torch.distributed.is_nccl_available()
        use_cuda = args.expect_gpus > 0 and visible >= args.ranks_per_node and nccl
        if args.expect_gpus > 0 and not nccl:
            rec["backend_why"] = f"gloo: the torch of {sys.executable} has no NCCL (a CPU build)"
        backend = "nccl" if use_cuda else "gloo"
        nbytes = int((args.size_mb or DEFAULT_SIZE_MB[backend]) * 2**20) // 4 * 4
        ctx = mp.get_context("fork")
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
