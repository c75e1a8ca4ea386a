"""The system behind a summary's numbers: what every run's provenance says of the nodes it ran on, as node groups;
and what a campaign ran on as ``{name: version}`` (:func:`versions_of`: driver, CUDA, NCCL, frameworks, container),
which the results store keeps per cell and ``history`` compares between campaigns.

Built from the runs' provenance (:attr:`dlperf_slurm.model.rows.RunRow.provenance`): the job event (modules, partition,
QOS, container image, the tool's version) and each node's node event (GPUs and driver, CUDA, cuDNN, NCCL, Python,
the framework and its libraries, the container it ran in, the program's code version), or, in a log older than the
node events, the job event's own GPUs and versions (then from the batch host). Nodes that describe alike form a
group; the group most (run, node) records share comes first. A value that differs from the majority's is a finding:
:func:`describe` names it with its nodes and runs.

The JSON object (``"system"`` in ``summaries/<name>.json``; documented in docs/method.md, "The System section")::

    {"schema": "dlperf_slurm.system/1",
     "node_groups": [{"nodes": [...], "runs": N, "gpu": {"model", "count", "driver"},
                      "gpu_limits": "power limit 700.00 W; SM clock max 1980 MHz, application 1755 MHz" | null,
                      "framework_cuda",
                      "framework_cudnn", "framework_nccl" (the framework's own: "none (CPU build)"), "cuda", "cudnn",
                      "nccl" (the node's toolkit and libraries),
                      "python", "framework": {dist: version}, "libraries": {dist: version},
                      "container": {"image", "digest"} | null, "modules": [...], "partition", "qos",
                      "program": "<git describe or commit>" | null, "tool": "<dlperf_slurm version>"}],
     "differs": [{"field", "majority", "value", "nodes": [...], "runs": [...]}],
     "without_provenance": [run keys]}
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping

from dlperf_slurm import events as ev
from dlperf_slurm.probes import provprobe
from dlperf_slurm.words import plural

SCHEMA = "dlperf_slurm.system/1"

#: Distributions that are a framework (the rest of a node's versions, but Python, are its libraries): the probe's.
FRAMEWORKS = provprobe.FRAMEWORKS
#: The fields of a node's description, in the order the markdown shows them.
FIELDS = ("gpu", "slurm_gpus", "driver", "gpu_limits", "framework_cuda", "framework_cudnn", "framework_nccl", "cuda",
          "cudnn", "nccl", "framework", "libraries", "python", "container", "modules", "partition", "qos", "program",
          "tool")
#: the framework's own CUDA stack, as its program reported it (the built-in workload's header: torch.version.cuda,
#: the cuDNN and NCCL it loaded), apart from the node's toolkit (``cuda``: $CUDA_VERSION or nvcc on PATH, which a
#: CPU build of the framework never uses)
OWN = ("framework_cuda", "framework_cudnn", "framework_nccl")


def _gpus(lines: Any) -> tuple[str | None, int, str | None]:
    """(model, count, driver) from nvidia-smi's ``index, name, driver_version, ...`` lines."""
    if not isinstance(lines, list) or not lines:
        return None, 0, None
    parts = [[p.strip() for p in str(line).split(",")] for line in lines]
    models = sorted({p[1] for p in parts if len(p) > 1})
    drivers = sorted({p[2] for p in parts if len(p) > 2})
    return " + ".join(models) or None, len(parts), " + ".join(drivers) or None


def _limits(lines: Any) -> str | None:
    """The GPUs' power limit (with the default where it differs: a site's cap) and SM clocks (max, application)
    from the probe's nvidia-smi lines (fields 5-8: ``clocks.max.sm, power.limit, power.default_limit,
    clocks.applications.graphics``); None for a probe from before them, or a GPU that reports none."""
    if not isinstance(lines, list) or not lines:
        return None
    parts = [[p.strip() for p in str(line).split(",")] for line in lines]
    if not all(len(p) >= 8 for p in parts):
        return None

    def one(i: int) -> str:
        values = sorted({p[i] for p in parts if p[i] and not p[i].startswith("[")})  # [N/A], [Not Supported]
        return " + ".join(values)

    limit, default, sm_max, app = one(5), one(6), one(4), one(7)
    bits = []
    if limit:
        bits.append(f"power limit {limit}" + (f" (default {default})" if default and default != limit else ""))
    if sm_max or app:
        bits.append("SM clock " + ", ".join(x for x in (f"max {sm_max}" if sm_max else "",
                                                       f"application {app}" if app else "") if x))
    return "; ".join(bits) or None


def _slurm_gpus(node: Mapping[str, Any]) -> str | None:
    """How many GPUs Slurm gave the job on a node (its SLURM_GPUS_ON_NODE); None where the record has none (no
    scheduler, or a log from before the field). Which devices (the node record's CUDA_VISIBLE_DEVICES) stays in
    the run's record: it differs from job to job on one node, so it does not group nodes."""
    count = node.get(ev.SLURM_GPUS)
    if count in (None, ""):
        return None
    return "none (no GPU asked of Slurm)" if str(count) == "0" else f"{count} a node"


def _cudnn_text(v: Any) -> str | None:
    """torch.backends.cudnn.version()'s integer as a version: 90100 -> 9.1.0, 8906 -> 8.9.6 (text as it is)."""
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        major, rest = divmod(v, 10000 if v >= 10000 else 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return str(v) if v not in (None, "") else None


def framework_stack(versions: Any) -> dict[str, str | None]:
    """:data:`OWN` from the framework's own report (the workload's header ``versions``: ``cuda``, ``cudnn``,
    ``nccl`` beside ``torch``); all None where the program reported none (another framework's program). A CPU build
    (no CUDA, or torch's ``+cpu``) says "none (CPU build)" for each, never the node's toolkit."""
    if not isinstance(versions, Mapping) or "cuda" not in versions:
        return dict.fromkeys(OWN)
    fw = str(versions.get("torch") or "")
    if not versions.get("cuda"):
        # the workload since 85a9eb7 reports its build's CUDA whether or not the run used it (``cuda_used``
        # beside it); an older one said none for any CPU run: then only torch's ``+cpu`` tells a CPU build
        none = "none (CPU build)" if "+cpu" in fw or "cuda_used" in versions else "none used (a CPU run)"
        return dict.fromkeys(OWN, none)
    return {"framework_cuda": str(versions["cuda"]), "framework_cudnn": _cudnn_text(versions.get("cudnn")) or "none",
            "framework_nccl": str(versions.get("nccl") or "none")}


def _node(job: Mapping[str, Any], node: Mapping[str, Any], own: Mapping[str, str | None] | None = None
          ) -> dict[str, Any]:
    """One node's description (the values of :data:`FIELDS`), from its node event and the run's job event (and
    ``own``: the framework's CUDA stack, :func:`framework_stack`)."""
    model, count, driver = _gpus(node.get(ev.GPUS))
    versions = {str(k): str(v) for k, v in (node.get(ev.VERSIONS) or {}).items()}
    container = node.get(ev.CONTAINER) or None
    image = (container or {}).get("image") or job.get(ev.CONTAINER_IMAGE) or None
    program = node.get(ev.PROGRAM) or {}
    cuda = node.get(ev.CUDA)
    if isinstance(cuda, list):  # older job events: nvcc's last line
        cuda = cuda[-1] if cuda else None
    return {
        "gpu": {"model": model, "count": count} if model else None, "driver": driver,
        "gpu_limits": _limits(node.get(ev.GPUS)),
        **(own or dict.fromkeys(OWN)), "cuda": cuda,
        "slurm_gpus": _slurm_gpus(node),
        "cudnn": node.get(ev.CUDNN), "nccl": node.get(ev.NCCL),
        "framework": {k: v for k, v in sorted(versions.items()) if k in FRAMEWORKS},
        "libraries": {k: v for k, v in sorted(versions.items()) if k not in FRAMEWORKS and k != "python"},
        "python": node.get(ev.PYTHON) or versions.get("python"),
        "container": {"image": image, "digest": (container or {}).get("digest")} if image else None,
        "modules": list(job.get(ev.MODULES) or []), "partition": job.get(ev.PARTITION), "qos": job.get(ev.QOS),
        "program": program.get("describe") or program.get("git"), "tool": job.get(ev.TOOL),
    }


def _records(runs: Iterable[Any]) -> tuple[list[tuple[str, str, dict[str, Any]]], list[str]]:
    """(run key, host, description) for every node of every run with provenance; the keys of runs without."""
    out, without = [], []
    for run in runs:
        job = run.provenance or {}
        nodes = [n for n in job.get(ev.PER_NODE) or () if not n.get(ev.ERROR)]
        if not nodes and (job.get(ev.GPUS) or job.get(ev.VERSIONS)):  # an older log: the batch host's record
            nodes = [job]
        if not nodes:
            without.append(run.run)
            continue
        own = framework_stack((getattr(run, "extra", None) or {}).get(ev.VERSIONS))
        for node in nodes:
            out.append((run.run, str(node.get(ev.HOSTNAME) or "?"), _node(job, node, own)))
    return out, without


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def describe(runs: Iterable[Any]) -> dict[str, Any] | None:
    """The System object of these runs (None when no run has any provenance nor is there a run)."""
    runs = list(runs)
    if not runs:
        return None
    records, without = _records(runs)
    groups: dict[str, dict[str, Any]] = {}
    for run, host, desc in records:
        g = groups.setdefault(_key(desc), {"desc": desc, "nodes": set(), "runs": set(), "records": 0})
        g["nodes"].add(host)
        g["runs"].add(run)
        g["records"] += 1
    ordered = sorted(groups.values(), key=lambda g: (-g["records"], sorted(g["nodes"])))
    node_groups = []
    for g in ordered:
        d = dict(g["desc"])
        gpu = d.pop("gpu")
        node_groups.append({"nodes": sorted(g["nodes"]), "runs": len(g["runs"]),
                            "gpu": {**(gpu or {"model": None, "count": 0}), "driver": d.pop("driver")}, **d})
    differs = []
    for field in FIELDS:  # from the groups (each one description, weighed by its records), in order of appearance
        values: Counter[str] = Counter()
        for g in groups.values():
            values[_key(g["desc"][field])] += g["records"]
        if len(values) < 2:
            continue
        majority = values.most_common(1)[0][0]
        where: dict[str, dict[str, set]] = defaultdict(lambda: {"nodes": set(), "runs": set()})
        for g in groups.values():
            k = _key(g["desc"][field])
            if k != majority:
                where[k]["nodes"] |= g["nodes"]
                where[k]["runs"] |= g["runs"]
        for k, w in sorted(where.items()):
            differs.append({"field": field, "majority": json.loads(majority), "value": json.loads(k),
                            "nodes": sorted(w["nodes"]), "runs": sorted(w["runs"])})
    return {"schema": SCHEMA, "node_groups": node_groups, "differs": differs, "without_provenance": sorted(without)}


def _text(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "—"
    if isinstance(value, dict):
        if set(value) == {"image", "digest"}:
            return str(value["image"]) + (f" @ {value['digest']}" if value.get("digest") else "")
        if set(value) == {"model", "count"}:
            return f"{value['count']} × {value['model']}"
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _short(items: list[str], n: int = 6) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def markdown(system: dict[str, Any] | None) -> list[str]:
    """The summary's System section, as markdown lines (none without runs)."""
    if system is None:
        return []
    lines = ["## System", ""]
    groups = system["node_groups"]
    if not groups:
        lines += ["No run recorded its system (no provenance lines in the logs).", ""]
    first: list[tuple[str, str]] = []
    told = any(g.get(k) for g in groups for k in OWN)  # the framework's stack rows: where a program reported it

    def own_rows(g: Mapping[str, Any]) -> list[tuple[str, Any]]:
        names = ("CUDA (framework: built with, runs with)", "cuDNN (framework)", "NCCL (framework)")
        return [(name, g.get(k) or "not reported") for name, k in zip(names, OWN)] if told else []

    for i, g in enumerate(groups):
        title = "Nodes" if len(groups) == 1 else f"Node group {i + 1}" + (" (the majority)" if i == 0 else "")
        runs = plural(g['runs'], 'run')
        gpu = g["gpu"]
        rows = [("GPU", f"{gpu['count']} × {gpu['model']}" if gpu.get("model") else "none seen (nvidia-smi)"),
                ("GPUs from Slurm", g["slurm_gpus"]),
                ("driver", gpu.get("driver")),
                ("GPU power limit and clocks", g.get("gpu_limits") or "not recorded"), *own_rows(g),
                ("CUDA toolkit (nvcc)", g["cuda"]), ("cuDNN (node)", g["cudnn"]), ("NCCL (node)", g["nccl"]),
                ("framework", g["framework"]), ("libraries", g["libraries"]), ("Python", g["python"]),
                ("container", g["container"] or "none"), ("modules", g["modules"]),
                ("partition / QOS", " / ".join(str(x or "—") for x in (g["partition"], g["qos"]))),
                ("program code", g["program"]), ("dlperf_slurm", g["tool"])]
        shown = [(k, _text(v).replace("|", "/")) for k, v in rows]
        if i == 0:
            first = shown
            lines += [f"**{title}**: {_short(g['nodes'])} ({runs})", "", "| | |", "| --- | --- |"]
            lines += [f"| {k} | {v} |" for k, v in shown] + [""]
        else:  # as the majority's group but for what the table shows
            other = "; ".join(f"{k} {v}" for (k, v), (_, v0) in zip(shown, first) if v != v0)
            lines += [f"**{title}**: {_short(g['nodes'])} ({runs}): as group 1 but {other or 'nothing shown here'}",
                      ""]
    if system["differs"]:
        lines.append("Differs from the majority:")
        lines.append("")
        for d in system["differs"]:
            lines.append(f"- **{d['field']}** {_text(d['value'])} (majority: {_text(d['majority'])}) on "
                         f"{_short(d['nodes'])}: runs {_short(d['runs'], 4)}")
        lines.append("")
    if system["without_provenance"]:
        lines += [f"No provenance: {plural(len(system['without_provenance']), 'run')} "
                  f"({_short(system['without_provenance'], 4)}).", ""]
    return lines


def versions_of(system: dict[str, Any] | None, runs: Iterable[Any]) -> dict[str, str]:
    """What a campaign ran on, as ``{name: version}``: the majority node group of the summary's System object
    (:func:`_flat_versions`); a caller without one gets the System object of ``runs`` (:func:`system_section`'s
    reading of their provenance, older job events included)."""
    if not system:
        system = describe(runs)
    return _flat_versions(system) if system else {}


def _flat_versions(system: dict[str, Any]) -> dict[str, str]:
    """The facts of a System object (``summaries/<name>.json``'s ``system``: its majority node group, the first)
    that say what changed between campaigns: GPU model, driver, CUDA, cuDNN, NCCL, Python, each framework's
    version, the container image (and digest), the program's code version. ``cuda``, ``cudnn`` and ``nccl`` are
    the node's toolkit and libraries; ``framework_cuda``, ``framework_cudnn`` and ``framework_nccl`` what the
    framework itself was built with and runs (``none (CPU build)`` for a CPU build), where the runs recorded it."""
    groups = system.get("node_groups")
    g = groups[0] if isinstance(groups, list) and groups and isinstance(groups[0], dict) else system
    out: dict[str, str] = {}
    gpu = g.get("gpu")
    if isinstance(gpu, dict):
        if gpu.get("model"):
            out["gpu"] = str(gpu["model"])
        if gpu.get("driver"):
            out["driver"] = str(gpu["driver"])
    for key in ("driver", *OWN, "cuda", "cudnn", "nccl", "python", "program"):
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
    """The collect's System object (what ``summaries/<name>.json`` holds as ``system``:
    :mod:`dlperf_slurm.report.system`);
    None for a collect without runs."""
    from dlperf_slurm.report import system

    return system.describe(result.runs)


def partition_of(system: dict[str, Any] | None) -> str:
    """The Slurm partition the System object's majority node group ran in ("" when it says none)."""
    groups = (system or {}).get("node_groups")
    if isinstance(groups, list) and groups and isinstance(groups[0], dict):
        return str(groups[0].get("partition") or "")
    return ""
