"""What a campaign ran on, as ``{name: version}`` (driver, CUDA, NCCL, frameworks, container, ...): from the System
object a collect makes (:mod:`dlperf_slurm.system`, ``"system"`` in ``summaries/<name>.json``), else (a caller
that has none) from the runs' provenance. The results store keeps them per cell
(:mod:`dlperf_slurm.store`), ``history`` names what changed between campaigns, the HTML report shows them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def versions_of(system: dict[str, Any] | None, runs: Iterable[Any]) -> dict[str, str]:
    """What a campaign ran on, as ``{name: version}``: the majority node group of the summary's System object
    (:func:`_flat_versions`); a caller without one gets the System object of ``runs`` (:func:`system_section`'s
    reading of their provenance, older job events included)."""
    if not system:
        from dlperf_slurm import system as sysmod

        system = sysmod.describe(runs)
    return _flat_versions(system) if system else {}


def _flat_versions(system: dict[str, Any]) -> dict[str, str]:
    """The facts of a System object (``summaries/<name>.json``'s ``system``: its majority node group, the first)
    that say what changed between campaigns: GPU model, driver, CUDA, cuDNN, NCCL, Python, each framework's
    version, the container image (and digest), the program's code version."""
    groups = system.get("node_groups")
    g = groups[0] if isinstance(groups, list) and groups and isinstance(groups[0], dict) else system
    out: dict[str, str] = {}
    gpu = g.get("gpu")
    if isinstance(gpu, dict):
        if gpu.get("model"):
            out["gpu"] = str(gpu["model"])
        if gpu.get("driver"):
            out["driver"] = str(gpu["driver"])
    for key in ("driver", "cuda", "cudnn", "nccl", "python", "program"):
        if g.get(key) and not isinstance(g[key], (dict, list)):
            out.setdefault(key, str(g[key]))
    for table in ("framework", "versions"):
        if isinstance(g.get(table), dict):
            out.update({str(k): str(v) for k, v in g[table].items() if v not in (None, "")})
    container = g.get("container")
    if isinstance(container, dict) and container.get("image"):
        out["container"] = str(container["image"])
        if container.get("digest"):
            out["container_digest"] = str(container["digest"])
    elif isinstance(container, str) and container:
        out["container"] = container
    return out


def system_section(result: Any) -> dict[str, Any] | None:
    """The collect's System object (what ``summaries/<name>.json`` holds as ``system``: :mod:`dlperf_slurm.system`);
    None for a collect without runs."""
    from dlperf_slurm import system

    return system.describe(result.runs)


def partition_of(system: dict[str, Any] | None) -> str:
    """The Slurm partition the System object's majority node group ran in ("" when it says none)."""
    groups = (system or {}).get("node_groups")
    if isinstance(groups, list) and groups and isinstance(groups[0], dict):
        return str(groups[0].get("partition") or "")
    return ""
