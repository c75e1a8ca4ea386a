"""Compare two campaigns cell by cell: the ratio of their throughputs with a confidence interval of a known error
rate over the repeats, and a noise-aware verdict, so a site can gate an upgrade (driver, NCCL, Slurm, container) on it.

    python -m dlperf_slurm compare BASE NEW [--threshold 0.05] [--out summaries]
    python -m dlperf_slurm compare ref:dlperf-v100 NEW      # against a published reference set (refcompare.py)

BASE and NEW are campaigns (a name under ``--logs``, or a folder) or summaries written by ``collect``
(``summaries/<name>.json``). Cells match by id (suite, model, shape, batch per device, precision, XLA,
launcher, variant), whatever their campaign; a summary of several campaigns that share a cell id is refused
(their runs would pool into one side).

A cell's verdict (one rule, :func:`compare_cell`, which ``history`` uses too), from Welch's t test on the logs of
the OK runs' throughputs (with the smaller side's repeats - 1 degrees of freedom, the conservative bound):
new/base is the ratio of the two sides' geometric means, with its 95 % interval
(docs/method.md, "Comparing two campaigns", gives the test, its assumptions and its measured error rates):

- ``faster`` / ``slower``: the interval excludes 1 (on identical conditions at most 5 % of comparisons say either,
  at every repeat count from 2 up);
- ``no change``: the interval includes 1 and lies within 1 ± threshold (no change of the threshold's size);
- ``cannot tell: n=2, CV 9 %``: the interval includes 1 but reaches past 1 ± threshold (too few repeats, or too
  noisy, to tell a change of the threshold's size from none), or a side has fewer than 2 OK runs;
- ``now <STATUS>``: OK before, no OK run now (OOM, TIMEOUT, ...); ``fixed``: the reverse;
- ``only in base`` / ``only in new``.

Each compared cell also says the smallest slowdown its repeats would have caught (in 80 % of trials, at the same
95 %: "would catch >= 3.1 %"), and which noise set its interval: the runs' own spread, or, where the results store
holds 3 or more earlier campaigns of the cell on the same system and partition with the same recorded versions as
BASE, the cell's campaign-to-campaign variation when that is wider (:func:`dlperf_slurm.store.history.between_noise`).

A cell **regressed** when it is ``slower`` by more than the threshold (new/base below 1 - threshold) or
``now`` fails. ``compare`` exits 1 when any cell regressed, when NEW lacks a cell BASE had (it no longer runs),
or when BASE and NEW share no cell (nothing was compared); 0 otherwise, so it can gate a CI job
(:class:`Gate`): a cell that ``cannot tell`` does not fail it (it is said, and is a skipped testcase in JUnit).
``--junit FILE`` writes the same judgement as JUnit XML, one testcase per cell (:func:`junit`), for the CI
system's test report.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm import stats
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.status import Status
from dlperf_slurm.outcome.decision import status_without_figure
from dlperf_slurm.model.rows import per_joule_unit
from dlperf_slurm.words import plural

CONFIDENCE = stats.CONFIDENCE  # of the interval: at most 1 - CONFIDENCE of identical comparisons call a change
POWER = stats.POWER  # of the smallest detectable change each compared cell states
TEST = "Welch's t on log throughput"
DEFAULT_THRESHOLD = 0.05  # campaign against campaign; against a reference set only an explicit --threshold gates


#: what a comparison may judge (``--metric``): the run rows' field each reads; both are higher-is-better rates, so
#: one rule judges either (energy: samples or tokens per joule, docs/method.md "Energy")
METRICS = {"throughput": "throughput", "energy": "samples_per_joule"}


def metric_unit(unit: str, metric: str) -> str:
    """The unit a metric's figures read in: the throughput's own, or its per-joule form."""
    return per_joule_unit(unit) if metric == "energy" else unit


@dataclass(frozen=True)
class Side:
    """One campaign's view of one cell: its OK figures of the compared metric (throughput unless said), the statuses
    of all its runs, and how many OK runs gave no figure of that metric (an energy counter not read)."""

    values: tuple[float, ...]
    statuses: tuple[str, ...]
    unit: str = "samples/s"
    unmeasured: int = 0

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def status(self) -> str:
        """OK with an OK figure; else what ``collect`` reads for the cell (:func:`outcome.cell_status`)."""
        return Status.OK if self.values else status_without_figure(self.statuses)


@dataclass(kw_only=True)
class CellComparison:
    cell_id: str
    base_median: float | None
    new_median: float | None
    ratio: float | None
    low: float | None  # the interval of the ratio
    high: float | None
    base_n: int
    new_n: int
    verdict: str
    regressed: bool
    unit: str
    unrecognised: str = ""  # runs of either side whose log their suite does not read (UNRECOGNISED), called out
    reason: str = ""  # why it cannot tell: "n=2, CV 9 %"
    detectable: float | None = None  # the smallest slowdown the test would have caught (POWER), a fraction
    cv: float | None = None  # the runs' own spread: the larger CV of the two sides
    between: float | None = None  # the cell's campaign-to-campaign variation (SD of log means), when known
    between_k: int = 0  # over how many earlier campaigns
    noise: str = ""  # which set the interval: "runs" (their own spread) or "campaigns" (campaign to campaign)
    unmeasured: bool = False  # it cannot tell because a side's OK runs give no figure of the metric (no energy read)

    @property
    def beyond_noise(self) -> bool:
        """A change beyond the runs' noise: faster, slower, now failing, fixed (not: no change, too few runs, no OK
        run on either side, a cell on one side only)."""
        return self.verdict in ("faster", "slower") or self.verdict.startswith(("now ", "fixed"))


CANNOT_TELL = "cannot tell"


def pct_text(v: float) -> str:
    """A fraction as a percentage: one decimal from 0.1 % to 10 % (0.4 %, 3.1 %), one significant digit below
    (0.04 %), whole ones above (12 %)."""
    p = 100 * v
    return f"{p:.0f} %" if p >= 9.95 else f"{p:.1g} %" if p < 0.095 else f"{p:.1f} %"


def _cv(xs: Sequence[float]) -> float:
    """stdev / mean in floats (:func:`stats.cv` is exact, and slow where the gate is measured over 10,000 splits)."""
    m = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)) / m


def _n(base_n: int, new_n: int) -> str:
    return f"n={base_n}" if base_n == new_n else f"n={base_n}/{new_n}"


def noise_text(r: CellComparison) -> str:
    """Which noise set the interval, and how much: ``CV 0.4 %`` (the runs' own) or ``campaigns 1.2 % (k=4)``."""
    if r.noise == "campaigns" and r.between is not None:
        return f"campaigns {pct_text(math.expm1(r.between))} (k={r.between_k})"
    return f"CV {pct_text(r.cv)}" if r.cv is not None else "—"


def compare_cell(cell_id: str, base: Side | None, new: Side | None, threshold: float,
                 between: tuple[float, int] | None = None) -> CellComparison:
    """One cell's verdict (the module's rule). ``between``: ``(sd, k)``, the cell's campaign-to-campaign variation
    over ``k`` earlier campaigns (:func:`stats.log_mean_sd`), used where it is wider than the runs' own spread."""
    side = new or base
    if side is None:
        raise ValueError(f"compare_cell({cell_id!r}): the cell is on neither side")
    unit = side.unit
    out = CellComparison(cell_id=cell_id, base_median=base.median if base else None,
                         new_median=new.median if new else None, ratio=None, low=None, high=None,
                         base_n=len(base.values) if base else 0, new_n=len(new.values) if new else 0,
                         verdict="", regressed=False, unit=unit)
    if base is None or new is None:
        out.verdict = ONLY_IN_NEW if base is None else ONLY_IN_BASE
        return out
    for name, one in (("new", new), ("base", base)):
        if not one.values and one.unmeasured:  # OK runs, none with this metric's figure: not a failure of the runs
            out.verdict, out.reason = CANNOT_TELL, f"{name}'s {plural(one.unmeasured, 'OK run')} give no {unit} figure"
            out.unmeasured = True
            return out
    if base.values and not new.values:
        out.verdict, out.regressed = f"now {new.status}", True
        return out
    if new.values and not base.values:
        out.verdict = f"fixed (was {base.status})"
        return out
    if not base.values:
        out.verdict = f"no OK run on either side ({base.status} / {new.status})"
        return out
    if between is not None and between[1] >= 3:
        out.between, out.between_k = between
    if min(base.values + new.values) <= 0:  # no log: a figure of 0 is no throughput
        out.ratio = statistics.median(new.values) / statistics.median(base.values) if base.median else None
        out.verdict, out.reason = CANNOT_TELL, "a figure of 0 or less"
        return out
    out.ratio = math.exp(statistics.fmean(map(math.log, new.values)) - statistics.fmean(map(math.log, base.values)))
    cvs = [_cv(side.values) for side in (base, new) if len(side.values) >= 2]
    out.cv = max(cvs) if cvs else None
    if len(base.values) < 2 or len(new.values) < 2:
        out.verdict, out.reason = CANNOT_TELL, _n(out.base_n, out.new_n)
        return out
    test = stats.ratio_test(base.values, new.values, between=between)
    out.ratio, out.low, out.high, out.detectable = test.ratio, test.low, test.high, test.detectable
    out.noise = "campaigns" if test.between else "runs"
    if test.low > 1:
        out.verdict = "faster"
    elif test.high < 1:
        out.verdict = "slower"
        out.regressed = test.ratio < 1 - threshold
    elif 1 - threshold <= test.low and test.high <= 1 + threshold:
        out.verdict = "no change"
    else:
        out.verdict, out.reason = CANNOT_TELL, f"{_n(out.base_n, out.new_n)}, {noise_text(out)}"
    return out


def compare(base: Mapping[str, Side], new: Mapping[str, Side], threshold: float = 0.05,
            between: Mapping[str, tuple[float, int]] | None = None) -> list[CellComparison]:
    """Every cell of either side (:func:`compare_cell`); ``between``: per cell id, its campaign-to-campaign
    variation, where the results store knows it."""
    ids = list(base) + [c for c in new if c not in base]
    between = between or {}
    return [call_out(compare_cell(c, base.get(c), new.get(c), threshold, between.get(c)), base.get(c), new.get(c))
            for c in ids]


def call_out(row: CellComparison, base: Side | None, new: Side | None) -> CellComparison:
    """A comparison whose sides hold UNRECOGNISED runs says so (:func:`verdict_text`): their programs finished, but no
    figure of theirs is in either median (their logs are read with another suite, or by a parser that knows
    their format: ``collect``'s reasons name the suites that read them)."""
    parts = [plural(n, f"{name} run") for name, side in (("base", base), ("new", new))
             if side and (n := sum(s == Status.UNRECOGNISED for s in side.statuses))]
    row.unrecognised = ", ".join(parts)
    return row


def verdict_text(r: CellComparison) -> str:
    """The verdict as the tables show it: with why it cannot tell, and the UNRECOGNISED runs of its sides, when
    there are some."""
    return r.verdict + (f": {r.reason}" if r.reason else "") + (
        f" ({r.unrecognised} UNRECOGNISED: their logs not read, in no median)" if r.unrecognised else "")


ONLY_IN_BASE, ONLY_IN_NEW = "only in base", "only in new"


@dataclass(frozen=True)
class Gate:
    """Whether a comparison passes, and why not: the one decision behind the exit status, the markdown's last line
    and the JUnit file."""

    regressed: tuple[str, ...]  # cell ids
    missing: tuple[str, ...]  # in BASE, not in NEW: they no longer run
    shared: int  # cells in both
    cannot_tell: tuple[str, ...] = ()  # their repeats cannot tell: said, and skipped in JUnit; they do not fail it

    @classmethod
    def of(cls, rows: Sequence[CellComparison]) -> Gate:
        return cls(regressed=tuple(r.cell_id for r in rows if r.regressed),
                   missing=tuple(r.cell_id for r in rows if r.verdict == ONLY_IN_BASE),
                   shared=sum(r.verdict not in (ONLY_IN_BASE, ONLY_IN_NEW) for r in rows),
                   cannot_tell=tuple(r.cell_id for r in rows if r.verdict == CANNOT_TELL))

    @property
    def failed(self) -> bool:
        return bool(self.regressed or self.missing or not self.shared)

    def reasons(self) -> list[str]:
        out = []
        if not self.shared:
            out.append("BASE and NEW share no cell: nothing was compared (another matrix or system?)")
        if self.missing:
            out.append(f"NEW lacks {plural(len(self.missing), 'cell')} BASE had "
                       f"({some_ids(self.missing)})")
        if self.regressed:
            out.append(f"{plural(len(self.regressed), 'cell')} regressed "
                       f"({some_ids(self.regressed)})")
        return out


def some_ids(ids: Sequence[str], n: int = 3) -> str:
    return ", ".join(ids[:n]) + (f" and {len(ids) - n} more" if len(ids) > n else "")


# ============================================================================================== inputs


def sides_from_runs(runs: Iterable[Mapping[str, Any]], metric: str = "throughput") -> dict[str, Side]:
    """Cells from run rows (``RunRow`` as dicts: ``cell_id``, ``status``, ``unit`` and the metric's field,
    :data:`METRICS`)."""
    field = METRICS[metric]
    values: dict[str, list[float]] = {}
    statuses: dict[str, list[str]] = {}
    units: dict[str, str] = {}
    unmeasured: dict[str, int] = {}
    for r in runs:
        cid = r["cell_id"]
        statuses.setdefault(cid, []).append(str(r["status"]))
        values.setdefault(cid, [])
        units.setdefault(cid, metric_unit(r.get("unit") or "samples/s", metric))
        if r["status"] == Status.OK:
            value = r.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values[cid].append(float(value))
            elif isinstance(r.get("throughput"), (int, float)):  # an OK run without this metric's figure
                unmeasured[cid] = unmeasured.get(cid, 0) + 1
    return {c: Side(tuple(values[c]), tuple(statuses[c]), units[c], unmeasured.get(c, 0)) for c in statuses}


def load_runs(what: str, logs: str) -> tuple[str, list[dict[str, Any]]]:
    """A campaign's run rows (as dicts): a campaign (name under ``logs`` or folder: its logs are collected now)
    or a collect JSON summary."""
    p = Path(what)
    if p.is_file():
        try:
            doc = json.loads(p.read_text())
            runs = doc["runs"]
            if not isinstance(runs, list) or not all(isinstance(r, dict) and "cell_id" in r for r in runs):
                raise TypeError("'runs' is not a list of run rows")
        except (ValueError, KeyError, TypeError) as err:
            raise UserError(f"{p}: not a collect summary (summaries/<name>.json): {err}") from None
        _one_campaign_per_cell(p, runs)
        return doc.get("name") or p.stem, runs
    from dlperf_slurm.campaign.folders import find_campaign
    from dlperf_slurm.collect import drive, gather
    from dlperf_slurm.model.rows import as_dict

    cdir = find_campaign(logs, what)
    result = drive.collect([gather.runs_from_campaign(cdir)])
    return cdir.name, [as_dict(r) for r in result.runs]


def _one_campaign_per_cell(path: Path, runs: Sequence[Mapping[str, Any]]) -> None:
    """A summary of several campaigns (``collect monday tuesday``) whose campaigns share a cell id is refused:
    cells match by id alone, so their runs would pool into one side (collect itself never pools them), and the
    pooled median and interval of two campaigns give a verdict about neither."""
    camps: dict[str, set[str]] = {}
    for r in runs:
        camps.setdefault(r["cell_id"], set()).add(str(r.get("campaign") or ""))
    shared = sorted(c for c, names in camps.items() if len(names) > 1)
    if shared:
        names = sorted(camps[shared[0]])
        more = f" (and {plural(len(shared) - 1, 'more cell')})" if len(shared) > 1 else ""
        raise UserError(f"{path}: cell {shared[0]}{more} holds the runs of {plural(len(names), 'campaign')} "
                        f"({', '.join(names)}); a comparison takes one campaign's runs per cell: give one campaign's "
                        f"summary or its name instead (e.g. `collect {names[0]}` writes {names[0]}.json)")


def load_side(what: str, logs: str, metric: str = "throughput") -> tuple[str, dict[str, Side]]:
    """A campaign or a collect JSON summary (:func:`load_runs`) as its cells' sides."""
    name, runs = load_runs(what, logs)
    return name, sides_from_runs(runs, metric)


# ============================================================================================== output
