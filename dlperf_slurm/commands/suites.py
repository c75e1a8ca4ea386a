"""``suites``: every registered suite, what it runs and how, and its example matrix
(:mod:`dlperf_slurm.suites.catalog`)."""

from __future__ import annotations

import json

from dlperf_slurm import suites
from dlperf_slurm.suites.catalog import describe, examples


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
