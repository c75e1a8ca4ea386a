"""One campaign, one matrix: a campaign's runs are comparable only when one matrix made them, so ``submit`` refuses a
matrix that differs from the one a campaign of that name was submitted with, in one line naming the keys that
changed, and offers a new name (``--campaign NAME``) or the campaign's next revision (``--new-revision``:
``NAME.r2``, ``NAME.r3``, ...; the latest revision is continued when it holds this very matrix).

What is compared is the matrix's effective content (:func:`identity`: the site file's values and the defaults
laid in, comments and layout ignored), recorded in the manifest at every submit; a campaign from before that record
is compared through its copy of the matrix (``matrix.toml``) loaded again. What decides what a run measures
matters: the suites, the cells (axes, include, exclude), the window and mode of ``[measure]``, the suites'
options, the resources of ``[slurm]`` that change the machine a run gets (partition, constraint, exclusive, GPU
request, CPUs, memory, extra directives), ``[environment]``, ``[setups]``, the system. Free to change: the name
and description, ``[slurm]`` time, account, qos and array throttle, the hang watchdog's bounds, ``[health]``,
``[provenance]``, and more repeats (fewer are refused: the runs a campaign holds stay in its summaries).
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

from dlperf_slurm.model.cell import Matrix

META = "identity"
_SLURM = ("partition", "constraint", "exclusive", "gpu_request", "cpus_per_task", "mem", "extra_directives")
_MEASURE = ("repeats", "warmup_steps", "measure_steps", "mode", "epochs")
#: top-level tables and keys of a matrix file that never change what a run measures (the raw comparison's)
_FREE_RAW = ("name", "description", "health", "provenance", "slurm.time", "slurm.account", "slurm.qos",
             "slurm.array_throttle", "measure.hang_timeout", "measure.hang_factor", "measure.hang_min")


def identity(m: Matrix) -> dict[str, Any]:
    """The matrix's effective content that decides what its runs measure: key (as a matrix file names it) ->
    value, JSON-plain."""
    one = len(m.suites) == 1
    out: dict[str, Any] = {"suite": [s.name for s in m.suites], "cells": sorted(c.id for c in m.cells),
                           "system": m.system.label if m.system is not None else None}
    out.update({f"measure.{k}": getattr(m.measure, k) for k in _MEASURE})
    out["measure.target"] = m.measure.target.text() if m.measure.target else None
    for suite, options in m.options.items():
        out.update({(f"options.{k}" if one else f"options.{suite}.{k}"): v for k, v in options.items()})
    out.update({f"slurm.{k}": getattr(m.slurm, k) for k in _SLURM})
    env = m.environment
    out.update({"environment.modules": env.modules, "environment.env": dict(env.env),
                "environment.setup": env.setup, "environment.container": dataclasses.asdict(env.container)})
    out.update({f"setups.{k}": dataclasses.asdict(v) for k, v in m.setups.items()})
    return json.loads(json.dumps(out, default=str))


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The keys whose value differs, ``(key, old, new)``; more repeats are no change. A key only one side has (an
    option a newer version of the tool added) is not compared, but for ``setups.*``, a matrix's own."""
    out = []
    for key in sorted(set(old) | set(new), key=lambda k: (k != "suite", k != "cells", k)):
        if (key not in old or key not in new) and not key.startswith("setups."):
            continue
        a, b = old.get(key), new.get(key)
        if a == b or (key == "measure.repeats" and isinstance(a, int) and isinstance(b, int) and b > a):
            continue
        out.append((key, a, b))
    return out


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: data}


def _raw(text: str) -> dict[str, Any]:
    """A matrix text's keys, flattened (``axes.batch_size``); {} when it is not TOML."""
    try:
        return {k: v for k, v in _flat(tomllib.loads(text)).items()
                if not any(k == f or k.startswith(f + ".") for f in _FREE_RAW)}
    except tomllib.TOMLDecodeError:
        return {}


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


def describe(found: list[tuple[str, Any, Any]], old_text: str, new_text: str) -> str:
    """The changes in a few words: ``measure.measure_steps 5 -> 50``; a change of cells by the raw keys of axes,
    include and exclude that changed (else by the cells' count)."""
    parts = []
    for key, a, b in found:
        if key == "cells":
            raw_old, raw_new = _raw(old_text), _raw(new_text)
            keys = [k for k in sorted(set(raw_old) | set(raw_new)) if k.startswith(("axes.", "include", "exclude"))
                    and raw_old.get(k) != raw_new.get(k)]
            parts += [f"{k} {_show(raw_old.get(k))} -> {_show(raw_new.get(k))}" for k in keys] or [
                f"cells {len(a or [])} -> {len(b or [])} ({len(set(b or []) - set(a or []))} new, "
                f"{len(set(a or []) - set(b or []))} gone)"]
        else:
            parts.append(f"{key} {_show(a)} -> {_show(b)}" + (" (fewer: the runs it holds stay in its summaries)"
                                                              if key == "measure.repeats" else ""))
    return ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")


def refusal(m: Matrix, cdir: Path, old: dict[str, Any] | None, old_text: str, offer: str) -> str:
    """'' when the campaign at ``cdir`` (submitted before; ``old``: the identity it recorded, ``old_text``: its copy
    of the matrix) holds this matrix's runs alone, else the one line that refuses it, ending in ``offer``."""
    try:
        new_text = Path(m.path).read_text()
    except OSError:
        new_text = ""
    if old is None:  # no record, and its copy loads no more: the copy's keys, raw
        raw_old, raw_new = _raw(old_text), _raw(new_text)
        pairs = [(k, raw_old.get(k), raw_new.get(k)) for k in sorted(set(raw_old) | set(raw_new))]
        found = [(k, a, b) for k, a, b in pairs if a != b and not (
            k == "measure.repeats" and isinstance(a, int) and isinstance(b, int) and b > a)]
        found = found if old_text and new_text else []
    else:
        found = changes(old, identity(m))
    if not found:
        return ""
    return (f"campaign {cdir.name} ({cdir}) was submitted with another matrix: {describe(found, old_text, new_text)}; "
            f"its runs and these would mix: {offer}")
