"""``compare``: two campaigns cell by cell (:mod:`dlperf_slurm.compare.rule`), or a campaign against a published
reference set (:mod:`dlperf_slurm.compare.published`), or against the last good campaign of the results store
(:mod:`dlperf_slurm.store.history`); exits 1 when a cell regressed, fell below the gate, or went missing, or when the
two
share no cell (:class:`dlperf_slurm.compare.rule.Gate`)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dlperf_slurm.compare import published, references
from dlperf_slurm.compare.forms import junit, markdown, terminal
from dlperf_slurm.compare.rule import (CONFIDENCE, DEFAULT_THRESHOLD, POWER, TEST, Gate, compare, load_runs,
                                       sides_from_runs)
from dlperf_slurm.disk import atomic_write
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix.select import from_args


def cmd_compare(args) -> int:
    if args.base_option is not None:  # compare --base BASE NEW: the one positional is NEW
        if args.new is not None:
            raise UserError(f"compare --base {args.base_option} {args.base} {args.new}: with --base give NEW alone "
                            f"(compare --base {args.base_option} NEW)")
        args.base, args.new = args.base_option, args.base
    elif args.new is None:
        raise UserError(f"compare {args.base}: NEW is missing (compare BASE NEW, or compare --base BASE NEW)")
    if args.threshold is not None and not 0 <= args.threshold < 1:
        raise UserError(f"--threshold {args.threshold}: expected a fraction in [0, 1), e.g. 0.05")
    from dlperf_slurm.compare.references import PREFIX

    if args.new.startswith(PREFIX):
        raise UserError(f"{args.new}: a reference set is the BASE (compare {args.new} CAMPAIGN), not the new side")
    if args.base.startswith(PREFIX):  # a published reference: one figure per cell, no interval, no verdict
        _refuse_against_a_reference(args)
        ref = references.load(args.base)  # an unknown set fails before any campaign is collected
        new_name, runs = load_runs(args.new, args.logs)
        return cmd_compare_reference(args, ref, new_name, selected(args, runs)[0])
    if args.threshold is None:
        args.threshold = DEFAULT_THRESHOLD
    from dlperf_slurm.store.history import LAST_GOOD

    if args.base == LAST_GOOD:  # from the results store: the latest campaign of NEW's cells with no regression
        from dlperf_slurm.store import database, history

        new_name, runs = load_runs(args.new, args.logs)
        new = sides_from_runs(selected(args, runs)[0], args.metric)
        base_name, base, between = history.last_good_side(database.url_for(args), args.system, new_name,
                                                          campaign_of(args.new, args.logs), new, args.threshold,
                                                          args.metric)
        print(f"--base {LAST_GOOD}: {base_name}")
    else:
        (base_name, base_runs), (new_name, new_runs) = load_runs(args.base, args.logs), load_runs(args.new, args.logs)
        base_runs, new_runs = selected(args, base_runs, new_runs)
        base, new = sides_from_runs(base_runs, args.metric), sides_from_runs(new_runs, args.metric)
        between = stored_between(args, base_name, new_name)
    rows = compare(base, new, args.threshold, between)
    text = markdown(base_name, new_name, rows, args.threshold, args.metric) + _selection_line(args)
    print(terminal(base_name, new_name, rows, args.threshold, wide=args.wide, metric=args.metric), end="")
    out = Path(args.out)
    stem = (f"compare.{base_name}.{new_name}" + (f".{args.metric}" if args.metric != "throughput" else "")
            + (f".{from_args(args).slug()}" if from_args(args) else ""))
    atomic_write(out / f"{stem}.md", text)
    atomic_write(out / f"{stem}.json", json.dumps({"base": base_name, "new": new_name, "metric": args.metric,
                                                   "threshold": args.threshold,
                                                   "confidence": CONFIDENCE, "test": TEST, "power": POWER,
                                                   "selection": from_args(args).describe() or None,
                                                   "cells": [asdict(r) for r in rows]}, indent=1))
    print(f"written: {out / stem}.md, .json")
    if args.junit:
        atomic_write(Path(args.junit), junit(base_name, new_name, rows, args.threshold, args.metric))
        print(f"written: {args.junit} (JUnit)")
    gate = Gate.of(rows)
    for reason in gate.reasons():
        print(f"dlperf-slurm: compare fails: {reason}", file=sys.stderr)
    return 1 if gate.failed else 0


def _refuse_against_a_reference(args) -> None:
    """What a published reference set cannot be compared by: an interval (``--junit``), another metric."""
    if args.metric != "throughput":
        raise UserError(f"--metric {args.metric}: a reference set holds published throughputs only; compare "
                        f"{args.base} NEW without --metric, or two campaigns with it")
    if args.junit:
        raise UserError(f"--junit judges two campaigns; against {args.base} there is no interval to judge by")


def _selection_line(args) -> str:
    """The markdown's last line under a selection: which cells were compared ('' without one)."""
    chosen = from_args(args)
    return f"\nCompared: only the cells selected by {chosen.describe()}.\n" if chosen else ""


def selected(args, *sides: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each side's runs of the cells ``-k`` / ``--exclude-cells`` select among the cells of either side (said in
    one line); the sides as they are without a selection."""
    from dlperf_slurm.matrix.select import View

    chosen = from_args(args)
    if not chosen:
        return list(sides)
    cells = list({r["cell_id"]: r for runs in sides for r in runs}.values())
    where = "of the two sides" if len(sides) > 1 else "of the campaign"
    keep = {r["cell_id"] for r in chosen.choose(cells, View.of_row, where)}
    return [[r for r in runs if r["cell_id"] in keep] for runs in sides]


def stored_between(args, base_name: str, new_name: str) -> dict[str, tuple[float, int]]:
    """BASE's cells' campaign-to-campaign variation from the results store, where it holds BASE and enough
    campaigns alike (:func:`dlperf_slurm.store.history.between_from_store`); none, said in one line, where the store
    cannot be read (the comparison goes on by the runs' own spread)."""
    from dlperf_slurm.store import database, history

    url = database.url_for(args)
    try:
        base_id, new_id = campaign_of(args.base, args.logs), campaign_of(args.new, args.logs)
        return history.between_from_store(url, base_name, base_id, new_id.key if new_id else None, args.metric)
    except UserError as err:
        print(f"dlperf-slurm: compare: no campaign-to-campaign variation (the runs' own spread only): {err}",
              file=sys.stderr)
        return {}


def campaign_of(what: str, logs: str):
    """NEW's identity in the results store (:mod:`dlperf_slurm.campaign.identity`): a summary's record of its campaign,
    else the campaign folder's; None when neither says (a summary of an older collect)."""
    from dlperf_slurm.campaign import identity
    from dlperf_slurm.campaign.folders import find_campaign

    p = Path(what)
    if p.is_file():
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            return None
        return identity.of_source(doc) if isinstance(doc, dict) else None
    cdir = find_campaign(logs, what)
    return identity.identify(cdir.name, "manifest", str(cdir))


def _ceilings(args) -> list[dict[str, Any]]:
    """The matmul ceilings NEW's campaign measured (its ``.ceiling/``), where NEW is a campaign (not a summary file)
    that is found; [] otherwise."""
    from dlperf_slurm.campaign.folders import find_campaign
    from dlperf_slurm.probes import ceiling

    if Path(args.new).is_file():
        return []
    try:
        return ceiling.kept(find_campaign(args.logs, args.new))
    except UserError:
        return []


def cmd_compare_reference(args, ref: references.ReferenceSet, new_name: str, runs: list[dict[str, Any]]) -> int:
    rows, unmatched = published.compare(runs, ref, args.threshold, _ceilings(args))
    text = published.markdown(ref, new_name, rows, unmatched, args.threshold) + _selection_line(args)
    print(text, end="")
    out = Path(args.out)
    stem = f"compare.ref-{ref.name}.{new_name}" + (f".{from_args(args).slug()}" if from_args(args) else "")
    atomic_write(out / f"{stem}.md", text)
    doc = {"reference": ref.name, "reference_title": ref.title, "repository": ref.repository, "commit": ref.commit,
           "reference_conditions": ref.conditions, "new": new_name, "threshold": args.threshold,
           "selection": from_args(args).describe() or None,
           "cells": [{**asdict(r), "statement": r.statement} for r in rows], "unmatched": unmatched}
    atomic_write(out / f"{stem}.json", json.dumps(doc, indent=1))
    print(f"written: {out / stem}.md, .json")
    return 1 if any(r.below_gate for r in rows) else 0
