"""``python -m dlperf_slurm suites``: every registered suite, what it runs and how, and its example matrix."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from dlperf_slurm import suites

#: where example matrices are looked for: the checkout's matrices/ (a pip-installed package has none)
MATRICES = Path(__file__).resolve().parent.parent / "matrices"


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


def cmd_suites(args) -> int:
    example = examples()
    rows = [describe(n, example) for n in suites.names()]
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    for r in rows:
        axes = ", ".join(f"{k} ({'|'.join(map(str, v)) or 'any'})" for k, v in r["axes"].items()) or "—"
        opts = ", ".join(f"{k}={v!r}" for k, v in r["options"].items()) or "—"
        print(f"{r['suite']}  [{r['framework']} / {r['model']}]\n"
              f"  program:    {r['program']}\n"
              f"  launchers:  {', '.join(r['launchers'])} (default {r['default_launcher']})\n"
              f"  precisions: {', '.join(r['precisions'])}; xla axis: {r['xla'] or 'none'}\n"
              f"  extra axes: {axes}\n"
              f"  options:    {opts}\n"
              f"  publishes:  {r['published']} flavour, {r['unit']}\n"
              f"  example:    {', '.join(r['examples']) or '—'}\n")
    return 0
