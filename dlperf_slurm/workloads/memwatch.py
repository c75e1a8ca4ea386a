"""``python -m dlperf_slurm.workloads.memwatch -- PROGRAM ARGS...``: run a third-party program and report its GPU
memory as DLPerf's ``gpu_memory_usage.py`` did (NVML "used", sampled every second), and the energy its GPUs used
from its start to its end (NVML's energy counter), as one ``:::DLPERF`` memory event after the program ends.

Only the node's first local rank samples (``LOCAL_RANK`` / ``OMPI_COMM_WORLD_LOCAL_RANK`` / ``SLURM_LOCALID``, 0
when none is set); every other rank becomes the program at once (``exec``). The program keeps this process's
stdout and stderr; its exit status is this process's (a signal ``N`` reads ``128 + N``), and SIGTERM/SIGINT are
passed on to it. A program given as a script (``x.py``) or ``-m module`` runs under this interpreter.
Imports nothing heavy: pynvml only when sampling (see :mod:`dlperf_slurm.workloads.gpumem`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from dlperf_slurm import events as ev

# a per-node launcher's own variable first: under ``srun`` one task per node, SLURM_LOCALID is 0 in every process the
# launcher (oneflow, torchrun) forks
_LOCAL_RANK = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")


def local_rank(environ=os.environ) -> int:
    for name in _LOCAL_RANK:
        value = environ.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return 0


def command(argv: list[str]) -> list[str]:
    """The program's argv: a script or ``-m module`` gets this interpreter in front."""
    if argv and (argv[0] == "-m" or argv[0].endswith(".py")):
        return [sys.executable, *argv]
    return list(argv)


def memory_fields(report, host: str) -> dict:
    """The memory event's fields from a :class:`~dlperf_slurm.workloads.gpumem.GpuMemReport`; its energy spans
    the whole program (this wrapper does not see where the program's measured window lies in time)."""
    energy = {ev.ENERGY_J: {f"{host}:{i}": round(v, 3) for i, v in sorted(report.energy_j.items())} or None,
              ev.ENERGY_S: ({f"{host}:{i}": round(report.energy_s, 6) for i in sorted(report.energy_j)}
                            if report.energy_j and report.energy_s else None),
              ev.ENERGY_BASIS: "nvml program", ev.ENERGY_REASON: report.energy_reason}
    if not report.peak_used_mib:
        return {ev.NVML_PEAK_USED_MIB: None, ev.NVML_GPU0_MIB: None, ev.GPU_UTIL_MEAN: None,
                ev.REASON: report.reason or "no NVML sample", **energy}
    first = min(report.peak_used_mib)
    return {ev.NVML_PEAK_USED_MIB: {f"{host}:{i}": round(v, 1) for i, v in sorted(report.peak_used_mib.items())},
            ev.NVML_GPU0_MIB: round(report.peak_used_mib[first], 1), ev.GPU_UTIL_MEAN: report.util_mean,
            ev.REASON: None, **energy}


def main(args: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if args is None else args)
    period = 1.0
    if args[:1] == ["--period"] and len(args) > 1:
        period, args = float(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("usage: python -m dlperf_slurm.workloads.memwatch [--period S] -- PROGRAM ARGS...", file=sys.stderr)
        return 2
    argv = command(args)
    if local_rank() != 0:
        os.execvp(argv[0], argv)
    from dlperf_slurm.workloads.gpumem import GpuMemSampler  # noqa: PLC0415

    host = socket.gethostname()
    sampler = GpuMemSampler(period=period, host=host)
    sampler.start()
    sampler.window_start()
    child = subprocess.Popen(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: child.send_signal(signum))
    code = child.wait()
    report = sampler.stop()
    sys.stdout.flush()
    ev.emit(ev.EV_MEMORY, **memory_fields(report, host))
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
