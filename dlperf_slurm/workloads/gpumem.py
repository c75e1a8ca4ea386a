"""NVML side-thread sampler: peak "used" MiB of every local GPU and mean utilization over the measured window, and
the energy each GPU used over that window: its cumulative energy counter (``nvmlDeviceGetTotalEnergyConsumption``,
mJ since the driver loaded; Volta and newer) read at the window's two ends, with the wall time between the readings.

``pynvml`` (package nvidia-ml-py) is imported lazily. Where it, the NVML library or a GPU is missing, the
report carries a ``reason`` and no figures, never zeros. The trainer runs one per rank, on the GPU that rank
uses (``nvml_id_for``), so the merged reports cover exactly the job's GPUs on every node.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

MIB = 1024 * 1024


@dataclass
class GpuMemReport:
    host: str
    peak_used_mib: dict[int, float] = field(default_factory=dict)  # NVML index -> peak used MiB
    util_mean: float | None = None  # mean GPU utilization (%) over the measured window, all sampled GPUs
    samples: int = 0
    reason: str | None = None  # why there are no figures
    energy_j: dict[int, float] = field(default_factory=dict)  # NVML index -> joules between the window's ends
    energy_s: float | None = None  # wall seconds between the two readings
    energy_reason: str | None = None  # why there is no energy figure (an older GPU, a counter that went back)

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "peak_used_mib": dict(self.peak_used_mib), "util_mean": self.util_mean,
                "samples": self.samples, "reason": self.reason, "energy_j": dict(self.energy_j),
                "energy_s": self.energy_s, "energy_reason": self.energy_reason}


def _load_pynvml() -> ModuleType:
    import pynvml  # noqa: PLC0415 (optional dependency)

    return pynvml


def nvml_id_for(cuda_index: int, visible: str | None = None) -> str:
    """The CUDA_VISIBLE_DEVICES entry (NVML index or UUID) behind CUDA device ``cuda_index`` of this process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    entries = [v.strip() for v in (visible or "").split(",") if v.strip()]
    return entries[cuda_index] if cuda_index < len(entries) else str(cuda_index)


def _visible_indices(nvml: Any, count: int, visible: str | None) -> list[int]:
    """NVML indices of the GPUs in CUDA_VISIBLE_DEVICES (integers or UUIDs); all GPUs if unset or unresolvable."""
    if visible is None or not visible.strip():
        return list(range(count))
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    if all(v.isdigit() for v in wanted):
        found = [int(v) for v in wanted if int(v) < count]
        return found or list(range(count))
    uuids = {}
    for i in range(count):
        try:
            u = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))
            uuids[u.decode() if isinstance(u, bytes) else str(u)] = i
        except Exception:  # noqa: BLE001 (NVMLError and friends; fall back to all GPUs)
            return list(range(count))
    found = [uuids[u] for u in wanted if u in uuids]
    return found or list(range(count))


class GpuMemSampler:
    """Poll NVML every ``period`` seconds in a daemon thread between ``start()`` and ``stop()``."""

    def __init__(self, period: float = 0.2, nvml: Any = None, visible_devices: str | None = None,
                 host: str | None = None) -> None:
        self.period = period
        self._nvml = nvml
        self._visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible_devices is None else visible_devices
        self.report = GpuMemReport(host=host or socket.gethostname())
        self._handles: list[tuple[int, Any]] = []
        self._util: list[float] = []
        self._in_window = False
        self._energy_start: tuple[float, dict[int, int]] | None = None  # (time, mJ per GPU) at the window's start
        self._energy_end: tuple[float, dict[int, int]] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return bool(self._handles)

    def start(self) -> bool:
        """Initialise NVML and start sampling; False (with ``report.reason``) when NVML or GPUs are missing."""
        try:
            nvml = self._nvml if self._nvml is not None else _load_pynvml()
        except ImportError:
            self.report.reason = "nvidia-ml-py (pynvml) not installed: GPU memory not sampled"
            return False
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
            indices = _visible_indices(nvml, count, self._visible)
            self._handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]
        except Exception as exc:  # noqa: BLE001 (pynvml.NVMLError_* has many subclasses)
            self.report.reason = f"NVML unavailable ({type(exc).__name__}: {exc}): GPU memory not sampled"
            return False
        if not self._handles:
            self.report.reason = "NVML sees no GPU: GPU memory not sampled"
            self._shutdown(nvml)
            return False
        self._nvml = nvml
        self.sample_once()
        self._thread = threading.Thread(target=self._run, name="dlperf-gpumem", daemon=True)
        self._thread.start()
        return True

    def window_start(self) -> None:
        self._in_window = True
        if self._handles and self._energy_start is None:
            self._energy_start = self.energy_now()

    def window_end(self) -> None:
        self._in_window = False
        if self._handles and self._energy_start is not None and self._energy_end is None:
            self._energy_end = self.energy_now()

    def energy_now(self) -> tuple[float, dict[int, int]]:
        """``(time.time(), {NVML index: mJ})``: every GPU's energy counter now; a GPU whose counter NVML cannot
        read (not supported before Volta) is left out, its error kept for the report's reason."""
        nvml, readings = self._nvml, {}
        with self._lock:
            for index, handle in self._handles:
                try:
                    readings[index] = int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
                except Exception as exc:  # noqa: BLE001 (NVMLError_NotSupported and friends)
                    self.report.energy_reason = (f"GPU {index}: NVML energy counter unreadable "
                                                 f"({type(exc).__name__}: {exc})")
            return time.time(), readings

    def _energy(self) -> None:
        """The report's energy figures from the two readings (the end taken now where the window never ended)."""
        if self._energy_start is None:
            self.report.energy_reason = self.report.energy_reason or "no window started: energy not read"
            return
        if self._energy_end is None:
            self._energy_end = self.energy_now()
        (t0, first), (t1, last) = self._energy_start, self._energy_end
        used = {i: (last[i] - first[i]) / 1000.0 for i in first if i in last}
        if any(v < 0 for v in used.values()):  # a counter reset (driver reload) inside the window: no figure
            self.report.energy_reason = "an NVML energy counter went back inside the window: energy not measured"
            return
        if used and t1 > t0:
            self.report.energy_j, self.report.energy_s = used, t1 - t0
        elif not self.report.energy_reason:
            self.report.energy_reason = "the window took no measurable time: energy not measured"

    def sample_once(self) -> None:
        """Take one sample of every GPU; an NVML error on one GPU skips that GPU's sample."""
        nvml = self._nvml
        with self._lock:
            utils = []
            for index, handle in self._handles:
                try:
                    used = nvml.nvmlDeviceGetMemoryInfo(handle).used / MIB
                    util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                except Exception:  # noqa: BLE001
                    continue
                peak = self.report.peak_used_mib
                peak[index] = max(peak.get(index, 0.0), used)
                utils.append(util)
            self.report.samples += 1
            if self._in_window and utils:
                self._util.append(sum(utils) / len(utils))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample_once()

    def stop(self) -> GpuMemReport:
        """Stop the thread and return the report. If the window got no sample (shorter than the period), one
        last sample is taken now: NVML's utilization covers the preceding 1/6-1 s, i.e. the window's end."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._handles:
            if not self._util:
                self._in_window = True
                self.sample_once()
                self._in_window = False
            self.report.util_mean = sum(self._util) / len(self._util) if self._util else None
            self._energy()
            self._shutdown(self._nvml)
            self._handles = []
        elif self.report.reason and not self.report.energy_reason:  # NVML never started: the same cause, said
            self.report.energy_reason = self.report.reason.replace("GPU memory not sampled", "GPU energy not read")
        return self.report

    @staticmethod
    def _shutdown(nvml: Any) -> None:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
