"""``references``: the published reference sets shipped with the tool: conditions, sources and figures. The
terminal text fits 100 columns (lines wrapped, the figures' table cut in its free-text columns); ``--wide`` prints
it whole, ``--json`` all of it."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict
from typing import Any

from dlperf_slurm.compare import references
from dlperf_slurm.compare.published import figure
from dlperf_slurm.termtext import TERMINAL_WIDTH, fit_table
from dlperf_slurm.words import plural


def _set_summary(ref: references.ReferenceSet) -> dict[str, Any]:
    suites: dict[str, int] = {}
    for e in ref.entries:
        suites[e.suite] = suites.get(e.suite, 0) + 1
    return {"name": ref.name, "title": ref.title, "repository": ref.repository, "commit": ref.commit,
            "figure": ref.figure, "conditions": ref.conditions, "suites": {s: {"figures": n, **ref.suites.get(s, {})}
                                                                            for s, n in suites.items()}}


def figures_table(ref: references.ReferenceSet, wide: bool = False) -> tuple[str, list[str]]:
    """Every figure of the set, one row each; fitting 100 columns unless ``wide`` (the note, variant and xla
    columns left out, the source cut, ending in "…"): the table and the columns left out."""
    stated = any(e.params for e in ref.entries)  # a set whose entries state their settings (an LLM's layout)
    rows = [[e.suite, e.devices, str(e.batch_size), e.precision, str(e.xla).lower(), figure(e.value),
             *([", ".join(f"{k}={v}" for k, v in e.params or ()), e.row] if stated else []), e.variant, e.note,
             f"{e.source}: {' > '.join(e.headings)}"] for e in ref.entries]
    return fit_table(["suite", "devices", "batch", "precision", "xla", "figure",
                      *(["settings", "row"] if stated else []), "variant", "note", "source"],
                     rows, wide=wide, drop=("note", "variant", "row", "xla", "settings"), cut=("source",),
                     tablefmt="github")


def cmd_references(args) -> int:
    """``references``: every shipped set with its conditions and suites; ``references NAME``: its figures."""
    sets = [references.load(args.name)] if args.name else [references.load(n) for n in references.names()]
    if args.json:
        doc = [{**_set_summary(r), **({"entries": [{**asdict(e), "source": r.url(e)} for e in r.entries]}
                                       if args.name else {})} for r in sets]
        print(json.dumps(doc, indent=1))
        return 0
    wide = getattr(args, "wide", False)

    def say(line: str, indent: str = "") -> None:
        print(line if wide else "\n".join(textwrap.wrap(line, TERMINAL_WIDTH, subsequent_indent=indent + "    ",
                                                        break_long_words=False, break_on_hyphens=False)))

    for ref in sets:
        s = _set_summary(ref)
        say(f"{ref.name}: {ref.title} ({ref.repository} at {ref.commit[:12]}); {plural(len(ref.entries), 'figure')}")
        say(f"  figure: {ref.figure}", "  ")
        for k, v in ref.conditions.items():
            say(f"  {k}: {v}", "  ")
        for suite, info in s["suites"].items():
            extra = "; ".join(f"{k}: {v}" for k, v in info.items() if k != "figures")
            say(f"  {suite}: {plural(info['figures'], 'figure')}; {extra}", "  ")
        if args.name:
            print()
            table, dropped = figures_table(ref, wide)
            print(table)
            if not wide:
                say(f"(fits 100 columns: {', '.join(dropped) or 'no column'} left out, the sources cut; --wide "
                    "prints the whole table, --json every field with its URL)")
        print()
    if not args.name:
        say("Compare a campaign with one: python -m dlperf_slurm compare ref:NAME CAMPAIGN "
            "(python -m dlperf_slurm references NAME lists its figures)")
    return 0
