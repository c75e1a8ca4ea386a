"""A cell's record over campaigns, from the results store (:mod:`dlperf_slurm.store.database`):

    python -m dlperf_slurm history [CELL-PATTERN] [--system NAME[:PARTITION]] [--since DATE]

Per cell and system, each campaign's median with its 95 % interval, oldest first; each campaign judged against the
one before it by ``compare``'s own rule (:func:`dlperf_slurm.compare.rule.compare_cell`: Welch's t on the log throughput
of both campaigns' runs, the threshold for a regression; "cannot tell" where their repeats cannot), and what
changed between them (driver, CUDA, NCCL, framework, container: the versions each campaign's System section or runs
recorded).

:func:`last_good` is ``compare --base last-good``: the latest campaign of NEW's matrix that ran before NEW, on NEW's
system and partition, sharing cells with it, in which no cell regressed against its own predecessor.

Campaigns are told apart by their identity (:mod:`dlperf_slurm.campaign.identity`), not their name, and ordered by when
they ran; two of one name read ``smoke#1``, ``smoke#2`` (by when they ran), their folders named under the table.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlperf_slurm import stats
from dlperf_slurm.campaign.identity import CampaignId
from dlperf_slurm.compare import rule
from dlperf_slurm.errors import UserError
from dlperf_slurm.store.database import StoredCell
from dlperf_slurm.words import plural

LAST_GOOD = "last-good"


@dataclass(frozen=True)
class Step:
    """One campaign of one cell's series: the stored cell, its judgement against the campaign before it (None for
    the first), and the versions that changed since then (``name: (before, now)``)."""

    cell: StoredCell
    against: rule.CellComparison | None
    changed: dict[str, tuple[str, str]]

    @property
    def flagged(self) -> bool:
        """A change beyond noise (:attr:`compare.CellComparison.beyond_noise`): faster, slower, now failing, fixed."""
        return self.against is not None and self.against.beyond_noise


def as_metric(cells: Iterable[StoredCell], metric: str) -> list[StoredCell]:
    """The stored cells as the metric ``history --metric`` / ``compare --metric`` judges: themselves for throughput;
    for energy, each with its OK runs' samples (tokens) per joule as its values, their median and interval, and the
    per-joule unit (a cell stored before schema 3, or whose runs had no energy counter, has none)."""
    if metric == "throughput":
        return list(cells)
    out = []
    for c in cells:
        st = stats.summarize(c.ok_energy, c.n)
        out.append(dataclasses.replace(c, ok_values=c.ok_energy, median=st.median, ci_low=st.ci_low,
                                       ci_high=st.ci_high, unit=rule.metric_unit(c.unit, metric)))
    return out


def side(c: StoredCell) -> rule.Side:
    """A stored cell as one side of a comparison."""
    return rule.Side(c.ok_values, c.statuses, c.unit)


def changed(before: dict[str, str], now: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The versions that differ, absent ones as ``(none)``."""
    return {k: (before.get(k, "(none)"), now.get(k, "(none)")) for k in sorted(set(before) | set(now))
            if before.get(k) != now.get(k)}


def series(cells: Iterable[StoredCell]) -> dict[tuple[str, str], list[StoredCell]]:
    """``(system label, cell id)`` -> its campaigns, oldest first (as the store returns them)."""
    out: dict[tuple[str, str], list[StoredCell]] = {}
    for c in cells:
        out.setdefault((c.system_label, c.cell_id), []).append(c)
    return out


MIN_CAMPAIGNS = 3  # earlier campaigns with nothing changed before their variation counts


def between_noise(earlier: Iterable[StoredCell], base: StoredCell) -> tuple[float, int] | None:
    """A cell's campaign-to-campaign variation as BASE's comparison uses it: ``(sd, k)``, the standard deviation of
    the mean log throughput of the ``k`` campaigns of ``earlier`` (the cell's, on BASE's system and partition, that
    ran before NEW; BASE among them) whose recorded versions are BASE's (nothing changed between them) and that had
    an OK run; None below :data:`MIN_CAMPAIGNS` (:func:`stats.log_mean_sd`)."""
    return stats.log_mean_sd(c.ok_values for c in earlier
                             if c.cell_id == base.cell_id and c.system_label == base.system_label
                             and c.versions == base.versions and c.ok_values and c.when <= base.when)


def judge(cells: Sequence[StoredCell], threshold: float = rule.DEFAULT_THRESHOLD) -> list[Step]:
    """One cell's campaigns (one system and partition, oldest first), each against the one before it, with the
    campaign-to-campaign variation of the campaigns up to that one that share its versions (:func:`between_noise`)
    where there are enough of them."""
    steps = []
    for i, c in enumerate(cells):
        if i == 0:
            steps.append(Step(c, None, {}))
            continue
        prev = cells[i - 1]
        steps.append(Step(c, rule.compare_cell(c.cell_id, side(prev), side(c), threshold,
                                                  between_noise(cells[:i], prev)),
                          changed(prev.versions, c.versions)))
    return steps


def between_of(cells: Sequence[StoredCell], base_key: str, new_key: str | None = None
               ) -> dict[str, tuple[float, int]]:
    """Per cell id of BASE (its identity ``base_key`` in ``cells``), its campaign-to-campaign variation
    (:func:`between_noise`) over the campaigns of ``cells`` but NEW's (``new_key``); cells without one left out."""
    others = [c for c in cells if c.key != new_key]
    out = {}
    for b in (c for c in cells if c.key == base_key):
        found = between_noise(others, b)
        if found is not None:
            out[b.cell_id] = found
    return out


def between_from_store(url: str, base_name: str, base_id: CampaignId | None, new_key: str | None,
                       metric: str = "throughput") -> dict[str, tuple[float, int]]:
    """``compare BASE NEW``: BASE's cells' campaign-to-campaign variation from the results store at ``url``, where
    it holds BASE (by its identity, else its name when only one campaign has it) and 3 or more campaigns of a cell
    with BASE's versions on BASE's system and partition. An SQLite store that does not exist is not created: no
    variation then (nor where the store cannot be read: the caller says so)."""
    from dlperf_slurm.store import database

    if not database.is_postgres(url):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            return {}
    with database.Store(url) as st:
        own = [c for c in st.cells(campaign=base_name) if base_id is None or c.key == base_id.key]
        if not own or len({c.key for c in own}) > 1:
            return {}
        cells = [c for system, partition in sorted({(c.system, c.partition) for c in own})
                 for c in st.cells(system=system, partition=partition, cell_ids={c.cell_id for c in own})]
    return between_of(as_metric(cells, metric), own[0].key, new_key)


def variation(cells: Sequence[StoredCell]) -> tuple[float, int, dict[str, str]] | None:
    """What ``history`` shows of a cell's campaign-to-campaign variation: ``(sd, k, versions)`` of its largest set
    of campaigns with the same recorded versions (the latest such set on a tie), when it holds
    :data:`MIN_CAMPAIGNS` or more with an OK run; None otherwise."""
    groups: list[tuple[dict[str, str], list[StoredCell]]] = []
    for c in cells:
        if not c.ok_values:
            continue
        for versions, members in groups:
            if versions == c.versions:
                members.append(c)
                break
        else:
            groups.append((c.versions, [c]))
    best = max(((len(m), max(x.when for x in m), v, m) for v, m in groups), key=lambda g: (g[0], g[1]), default=None)
    if best is None:
        return None
    found = stats.log_mean_sd(c.ok_values for c in best[3])
    return (found[0], found[1], best[2]) if found else None


def last_good(cells: Sequence[StoredCell], new_key: str, new_cells: Iterable[str],
              threshold: float = rule.DEFAULT_THRESHOLD) -> str | None:
    """The identity of the latest campaign (by when it ran; but NEW, ``new_key``) sharing a cell with NEW in which
    no cell regressed against the campaign before it, and some cell had an OK run; None when there is none.
    ``cells``: the candidates (the caller scopes them to NEW's matrix, system and partition)."""
    wanted = set(new_cells)
    bad: set[str] = set()
    ok: set[str] = set()
    order: dict[str, str] = {}
    for steps in (judge(s, threshold) for s in series(c for c in cells if c.key != new_key).values()):
        for st in steps:
            order[st.cell.key] = max(order.get(st.cell.key, ""), st.cell.when)
            if st.against is not None and st.against.regressed:
                bad.add(st.cell.key)
            if st.cell.n_ok and st.cell.cell_id in wanted:
                ok.add(st.cell.key)
    good = [c for c in ok if c not in bad]
    return max(good, key=lambda c: (order[c], c)) if good else None


def last_good_side(url: str, system_arg: str | None, new_name: str, new_id: CampaignId | None,
                   new_cells: Iterable[str], threshold: float, metric: str = "throughput"
                   ) -> tuple[str, dict[str, rule.Side], dict[str, tuple[float, int]]]:
    """``compare --base last-good``: the last good campaign's name and cells, from the store at ``url``: of NEW's
    matrix, on NEW's system and partition (``--system``, else those NEW is stored under, else the one it was
    submitted for), run before NEW; and its cells' campaign-to-campaign variation (:func:`between_of`). NEW: its
    name and identity (None: a summary that records none; then the store knows it by its name). ``metric``: what
    is judged (:data:`dlperf_slurm.compare.rule.METRICS`)."""
    from dlperf_slurm.store import database

    new_cells = list(new_cells)
    system, partition = database.split_system(system_arg)
    with database.Store(url) as st:
        own = [c for c in st.cells(campaign=new_name) if new_id is None or c.key == new_id.key]
        if new_id is None and len({c.key for c in own}) > 1:
            raise UserError(f"--base {LAST_GOOD}: the store holds {plural(len({c.key for c in own}), 'campaign')} "
                            f"named {new_name} ({', '.join(sorted({c.where or c.key for c in own}))}): give NEW as its "
                            "campaign folder, or a summary this version of collect wrote (it names its campaign)")
        matrix = new_id.matrix if new_id is not None else next((c.matrix for c in own if c.matrix), "")
        if not matrix:
            raise UserError(f"--base {LAST_GOOD}: {new_name}: its matrix is not known (a summary of an older collect "
                            "that was never stored): collect it again, then compare")
        key = new_id.key if new_id is not None else (own[0].key if own else "")
        ran = (new_id.ran_at if new_id is not None else "") or min((c.when for c in own), default="")
        placed = {(c.system, c.partition) for c in own if not system or c.system == system}
        if not system and not placed and new_id is not None and new_id.system:
            system, partition = database.split_system(new_id.system)  # never stored: the system it was submitted for
        elif not partition and len(placed) == 1:  # where NEW is stored
            system, partition = next(iter(placed))
        cells = st.cells(system=system or None, partition=partition or None, matrix=matrix)
    cells = [c for c in cells if c.key != key and (not ran or c.when <= ran)]
    systems = sorted({c.system_label for c in cells if c.cell_id in set(new_cells)})
    if len(systems) > 1:
        raise UserError(f"--base {LAST_GOOD}: the store holds these cells on {plural(len(systems), 'system')} "
                        f"({', '.join(systems)}): say which with --system NAME[:PARTITION]")
    cells = as_metric([c for c in cells if c.system_label in systems], metric)  # "good" judged on that metric
    found = last_good(cells, key, new_cells, threshold)
    if found is None:
        where = f" on {system_arg}" if system_arg else ""
        raise UserError(f"--base {LAST_GOOD}: no campaign of matrix {matrix}{where} that ran before {new_name} shares "
                        f"a cell with it without a regression (store {database.describe(url)}; collect adds campaigns "
                        "to it; campaigns stored before their matrix was recorded count once collected again)")
    return labels(cells)[found], {c.cell_id: side(c) for c in cells if c.key == found}, between_of(cells, found, key)


def labels(cells: Iterable[StoredCell]) -> dict[str, str]:
    """Each campaign's label by its identity: its name, and when another campaign of ``cells`` has that name too,
    ``#N``, its place among them by when they ran (1 the first)."""
    return label_campaigns((c.campaign, c.key, c.when) for c in cells)


def label_campaigns(campaigns: Iterable[tuple[str, str, str]]) -> dict[str, str]:
    """:func:`labels` of ``(name, identity key, when it ran)`` triples."""
    runs: dict[str, dict[str, str]] = {}
    for name, key, ran in campaigns:
        when = runs.setdefault(name, {})
        when[key] = min(when.get(key, ran), ran)
    out = {}
    for name, when in runs.items():
        order = sorted(when, key=lambda k: (when[k], k))
        out.update({k: f"{name}#{i + 1}" if len(order) > 1 else name for i, k in enumerate(order)})
    return out


# ============================================================================================== output


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _changes(ch: dict[str, tuple[str, str]]) -> str:
    return "; ".join(f"{k} {a} -> {b}" for k, (a, b) in ch.items())


def _verdict(step: Step) -> str:
    a = step.against
    if a is None:
        return ""
    ratio = f"x{a.ratio:.3f} " if a.ratio is not None else ""
    return ratio + rule.verdict_text(a) + (", REGRESSED" if a.regressed else "") + (" *" if step.flagged else "")


def _catches(step: Step) -> str:
    """The smallest slowdown the comparison would have caught; ``c2c`` when the campaign-to-campaign variation set
    its interval."""
    a = step.against
    if a is None or a.detectable is None:
        return ""
    return f"≥{100 * a.detectable:.1f}%" + (" c2c" if a.noise == "campaigns" else "")


def variation_line(cells: Sequence[StoredCell]) -> str:
    """The cell's campaign-to-campaign variation, as the line under its table says it."""
    found = variation(cells)
    if found is None:
        return (f"  campaign to campaign: not known yet (fewer than {MIN_CAMPAIGNS} campaigns with the same "
                "versions)")
    sd, k, versions = found
    which = "the same versions" if versions else "no versions recorded"
    return (f"  campaign to campaign, nothing changed: {100 * math.expm1(sd):.1f} % (SD over {plural(k, 'campaign')}, "
            f"{which})")


def head_line(cell_id: str, cell: StoredCell) -> str:
    """The line above a cell's table: its id, the system (and partition) and the unit, each where the store knows
    it (``resnet50... on alpha:gpu (img/s)``; no ``on -``, no ``()``)."""
    where = cell.system_label if cell.system else f"partition {cell.partition}" if cell.partition else ""
    return cell_id + (f" on {where}" if where else "") + (f" ({cell.unit})" if cell.unit else "")


def text(steps_by_cell: dict[tuple[str, str], list[Step]], wide: bool = False, width: int = 100) -> str:
    """Each cell's table: campaign, when it ran, median, 95 % interval, OK runs, against the one before, what
    changed (its names; the versions, before and now, under the table, wrapped to ``width``; ``wide``: in the
    table). Campaigns of one name read ``NAME#N`` (:func:`labels`); the last lines say which folder each is."""
    import textwrap

    from dlperf_slurm.termtext import fit_table, left_out_line

    every = [st.cell for steps in steps_by_cell.values() for st in steps]
    named = labels(every)
    out: list[str] = []
    for (_system, cell_id), steps in steps_by_cell.items():
        rows, notes = [], []
        for st in steps:
            c = st.cell
            ci = f"{_f(c.ci_low)}-{_f(c.ci_high)}" if c.ci_low is not None else "-"
            what = _changes(st.changed) if wide else ", ".join(st.changed)
            rows.append([named[c.key], c.when[:10], _f(c.median) if c.median is not None else c.status, ci,
                         f"{c.n_ok}/{c.n}", _verdict(st), _catches(st), what])
            if st.changed and not wide:
                notes += textwrap.wrap(f"{named[c.key]}: {_changes(st.changed)}", width, initial_indent="  ",
                                       subsequent_indent="    ", break_on_hyphens=False)
        table, dropped = fit_table(["campaign", "ran", "median", "95% CI", "OK/n", "vs previous", "catches",
                                    "changed"], rows, wide=wide, drop=("changed",), cut=("vs previous",),
                                   width=width)
        out += [head_line(cell_id, steps[-1].cell), table,
                *([left_out_line(dropped, "the lines below")] if dropped else []), *notes,
                variation_line([st.cell for st in steps]), ""]
    flagged = sum(st.flagged for steps in steps_by_cell.values() for st in steps)
    regressed = sum(bool(st.against and st.against.regressed) for steps in steps_by_cell.values() for st in steps)
    out += textwrap.wrap(f"{plural(len(steps_by_cell), 'cell')}; {plural(flagged, 'change')} beyond noise (*), "
                         f"{plural(regressed, 'regression')} "
                         "(compare's rule: the 95 % interval of new/previous, by Welch's t on log throughput, "
                         "excludes 1, or the campaign-to-campaign variation's where it is wider: c2c; regressed when "
                         "slower by more than the threshold, or no OK run any more; catches: the smallest slowdown "
                         f"it would have caught in {int(rule.POWER * 100)} % of trials)",
                         10_000 if wide else width)
    namesakes = {c.key: c for c in every if named[c.key] != c.campaign}
    if namesakes:
        out += textwrap.wrap("Campaigns of one name: " + "; ".join(
            f"{named[k]} {c.where or k} (ran {c.when[:16].replace('T', ' ')})"
            for k, c in sorted(namesakes.items(), key=lambda kv: (kv[1].campaign, kv[1].when))),
            10_000 if wide else width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
    return "\n".join(out)


def parse_since(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return datetime.date.fromisoformat(value).isoformat()
    except ValueError:
        raise UserError(f"--since {value}: expected a date as YYYY-MM-DD, e.g. 2026-01-31") from None
