"""``references``: the published reference sets shipped with the tool: conditions, sources and figures."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from dlperf_slurm import references
from dlperf_slurm.refcompare import figure


def _set_summary(ref: references.ReferenceSet) -> dict[str, Any]:
    suites: dict[str, int] = {}
    for e in ref.entries:
        suites[e.suite] = suites.get(e.suite, 0) + 1
    return {"name": ref.name, "title": ref.title, "repository": ref.repository, "commit": ref.commit,
            "figure": ref.figure, "conditions": ref.conditions, "suites": {s: {"figures": n, **ref.suites.get(s, {})}
                                                                            for s, n in suites.items()}}


def cmd_references(args) -> int:
    """``references``: every shipped set with its conditions and suites; ``references NAME``: its figures."""
    sets = [references.load(args.name)] if args.name else [references.load(n) for n in references.names()]
    if args.json:
        doc = [{**_set_summary(r), **({"entries": [{**asdict(e), "source": r.url(e)} for e in r.entries]}
                                       if args.name else {})} for r in sets]
        print(json.dumps(doc, indent=1))
        return 0
    for ref in sets:
        s = _set_summary(ref)
        print(f"{ref.name}: {ref.title} ({ref.repository} at {ref.commit[:12]}); {len(ref.entries)} figures")
        print(f"  figure: {ref.figure}")
        for k, v in ref.conditions.items():
            print(f"  {k}: {v}")
        for suite, info in s["suites"].items():
            extra = "; ".join(f"{k}: {v}" for k, v in info.items() if k != "figures")
            print(f"  {suite}: {info['figures']} figures; {extra}")
        if args.name:
            print()
            print("| suite | devices | batch | precision | xla | figure | variant | note | source |")
            print("|---|---|---|---|---|---|---|---|---|")
            for e in ref.entries:
                print(f"| {e.suite} | {e.devices} | {e.batch_size} | {e.precision} | {str(e.xla).lower()} | "
                      f"{figure(e.value)} | {e.variant} | {e.note} | {e.source}: {' > '.join(e.headings)} |")
        print()
    if not args.name:
        print("Compare a campaign with one: python -m dlperf_slurm compare ref:NAME CAMPAIGN "
              "(python -m dlperf_slurm references NAME lists its figures)")
    return 0
