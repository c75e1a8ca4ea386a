"""The catalog of suites: every registered suite, what it runs and how, and its example matrices (the ``suites``
command prints it: :mod:`dlperf_slurm.commands.suites`)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from dlperf_slurm import suites

#: where example matrices are looked for: the checkout's matrices/ (a pip-installed package has none)
MATRICES = Path(__file__).resolve().parents[2] / "matrices"


def examples(folder: Path = MATRICES) -> dict[str, list[str]]:
    """Suite name -> the example matrices that name it."""
    out: dict[str, list[str]] = {}
    for p in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
        try:
            suite = tomllib.loads(p.read_text()).get("suite")
        except (OSError, tomllib.TOMLDecodeError):
            continue
        for name in suite if isinstance(suite, list) else [suite]:
            if isinstance(name, str):
                out.setdefault(name, []).append(f"matrices/{p.name}")
    return out


def describe(name: str, example: dict[str, list[str]]) -> dict[str, Any]:
    s = suites.get(name)
    return {"suite": name, "framework": s.framework, "model": s.model, "program": s.description,
            "launchers": list(s.launchers), "default_launcher": s.launcher, "precisions": list(s.precisions),
            "xla": s.xla_name if s.supports_xla else None,
            "axes": {k: list(v) for k, v in s.axes.items()}, "options": dict(s.options),
            "published": s.published, "unit": s.sample_unit, "examples": example.get(name, [])}
