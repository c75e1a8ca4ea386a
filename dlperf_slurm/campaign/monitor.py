"""Watching a campaign: ``status`` (the table), ``--wait`` (a progress bar until nothing is active) and
``cancel``. Every one of them first brings the manifest in step with the schedulers (:mod:`.tracking`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Collection, Iterable, Sequence

from dlperf_slurm.campaign.folders import campaign_lock
from dlperf_slurm.campaign.manifest import Manifest
from dlperf_slurm.campaign.records import ManifestRun
from dlperf_slurm.campaign.tracking import reconcile, refresh, used_schedulers
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.status import ACTIVE, DISPLAY_ORDER, FAILURES, FINAL, Status
from dlperf_slurm.outcome.decision import worst_failure
from dlperf_slurm.schedulers import for_campaign
from dlperf_slurm.schedulers.base import Scheduler
from dlperf_slurm.words import noun, plural


class Backoff:
    """Poll intervals: ``initial`` doubling up to ``maximum``; :meth:`reset` after progress."""

    def __init__(self, initial: float = 1.0, maximum: float = 30.0, factor: float = 2.0):
        self.initial, self.maximum, self.factor = initial, maximum, factor
        self.current = initial

    def next(self) -> float:
        value = self.current
        self.current = min(self.maximum, self.current * self.factor)
        return value

    def reset(self) -> None:
        self.current = self.initial


def counts(rows: Iterable[ManifestRun]) -> dict[str, int]:
    c: dict[str, int] = {}
    for r in rows:
        c[r.status] = c.get(r.status, 0) + 1
    return c


def fmt_counts(c: dict[str, int]) -> str:
    keys = [k for k in DISPLAY_ORDER if c.get(k)] + sorted(k for k in c if k not in DISPLAY_ORDER and c[k])
    return "  ".join(f"{k} {c[k]}" for k in keys)


def progress_line(c: dict[str, int], width: int = 30, left: str = "") -> str:
    """``[###x....] done/total done  counts``, then ``left`` (the time left, :mod:`.eta`) while runs remain."""
    total = sum(v for k, v in c.items() if k != Status.UNSUBMITTED) or 1
    done = sum(v for k, v in c.items() if k in FINAL)
    ok = c.get(Status.OK, 0)
    n_ok = int(width * ok / total)
    n_bad = int(width * done / total) - n_ok
    bar = "#" * n_ok + "x" * max(0, n_bad)
    bar += "." * (width - len(bar))
    return f"[{bar}] {done}/{total} done  {fmt_counts(c)}" + (f"  {left}" if left and done < total else "")


def wait_for_room(room, poll: Backoff | None = None) -> None:
    """Poll ``room()`` (the scheduler's ``submit_room``: (free, the limit's words) or None) until a run may be
    submitted again; one line says what it waits for."""
    poll = poll or Backoff(2.0, 30.0)
    told = False
    while (r := room()) is not None and r[0] <= 0:
        if not told:
            print(f"dlperf-slurm: waiting for room to submit: {r[1]}", file=sys.stderr, flush=True)
            told = True
        time.sleep(poll.next())


def wait(m: Manifest, schedulers: dict[str, Scheduler], out=None, poll: Backoff | None = None,
         timeout: float | None = None) -> dict[str, int]:
    """Poll (with back-off, one batched query per round) until no run is active; shows a progress bar and the time
    left (:mod:`.eta`; a terminal's line is rewritten every round, else a line is printed when the counts change)."""
    from dlperf_slurm.campaign.eta import Clock

    poll = poll or Backoff(1.0, 30.0)
    stream = sys.stderr
    tty = stream.isatty()
    last = None
    clock = Clock()
    deadline = None if timeout is None else time.time() + timeout
    while True:
        say = out if out is not None else (lambda s: print(f"dlperf-slurm: {s}", file=sys.stderr))
        if refresh(m, schedulers, out=say):
            poll.reset()
        c = counts(m.runs())
        key = progress_line(c)
        ended = sum(v for k, v in c.items() if k in FINAL)
        line = progress_line(c, left=clock.text(ended, sum(c.get(k, 0) for k in (*ACTIVE, Status.SUBMITTING))))
        if out is not None:
            if key != last:
                out(line)
        elif tty:
            stream.write("\r\x1b[K" + line)
            stream.flush()
        elif key != last:
            print(line, file=stream, flush=True)
        last = key
        if not any(c.get(k) for k in (*ACTIVE, Status.SUBMITTING)):
            if tty and out is None:
                stream.write("\n")
            return c
        if deadline and time.time() > deadline:
            raise UserError(f"timed out after {timeout:.0f} s waiting for the campaign's runs")
        time.sleep(poll.next())


def cancel(campaign_dir: Path, pending_only: bool = False, out=print, cells: Collection[str] | None = None) -> int:
    """Cancel the campaign's queued (and, unless pending_only, running) runs with one scancel (``cells``: only
    these cells' runs)."""
    with campaign_lock(campaign_dir):
        m = Manifest(campaign_dir)
        try:
            exs = for_campaign(campaign_dir, used_schedulers(m))
            reconcile(m, exs, out)
            refresh(m, exs, out=out)
            wanted = (Status.PENDING, Status.REQUEUED) if pending_only else tuple(ACTIVE)
            jobs = [(r, r.job_id) for r in m.runs() if r.status in wanted and r.job_id  # each run with its job
                    and (cells is None or r.cell_id in cells)]
            by_ex: dict[str, list[str]] = {}
            for r, job_id in jobs:
                by_ex.setdefault(r.executor or "slurm", []).append(job_id)
            now = time.time()
            m.request_cancel([r.key for r, _ in jobs], now)
            for name, ids in by_ex.items():
                ex = exs.get(name)
                if ex is None:
                    raise UserError(f"cannot cancel {plural(len(ids), f'{name} run')}: no {name} client on this "
                                    "machine")
                ex.cancel(ids)
            per = ", ".join(f"{k}: {len(v)}" for k, v in by_ex.items())
            out(f"cancel requested for {plural(len(jobs), 'run')}" + (f" ({per})" if by_ex else "") if jobs else
                "nothing to cancel: no run " + ("of these cells " if cells is not None else "")
                + ("is pending" if pending_only else "is pending or running"))
            return len(jobs)
        finally:
            m.close()


#: past a screenful, ``status`` lists at most this many failed runs (the rest counted; ``--runs``: every run)
FAILED_RUNS_SHOWN = 20


def status_report(m: Manifest, show_runs: bool | None = True, notes: Sequence[str] = (), wide: bool = True,
                  height: int | None = None, only: Collection[str] | None = None) -> str:
    """The campaign's status: per cell, then per run. ``show_runs`` True: every run; False: per cell only; None
    (``status``'s default): every run when the whole report fits ``height`` lines (default: the terminal's,
    :func:`dlperf_slurm.termtext.terminal_height`), else the failed runs (the first :data:`FAILED_RUNS_SHOWN`) and
    one line saying ``--runs`` shows each. ``wide`` False: the tables fit the terminal (a long reason cut, see
    :func:`dlperf_slurm.termtext.fit_table`). ``only``: only these cells' runs (``-k``)."""
    from dlperf_slurm.termtext import fit_table, terminal_height

    # (cell, status) of every run: all the counts need; the whole records only of the runs the report shows
    pairs = [(cell, status) for cell, status in m.statuses() if only is None or cell in only]
    total: dict[str, int] = {}
    cells: dict[str, dict[str, int]] = {}
    for cell, status in pairs:
        total[status] = total.get(status, 0) + 1
        per = cells.setdefault(cell, {})
        per[status] = per.get(status, 0) + 1
    lines = [f"campaign {m.meta('name') or m.dir.name} ({m.dir}): {plural(len(pairs), 'run')}: {fmt_counts(total)}"]
    lines += [f"  {n}" for n in notes]
    if total.get(Status.SUBMITTING):
        lines.append("  a submit was interrupted: run `submit` again with the same matrix to settle SUBMITTING runs "
                     "(nothing is submitted twice)")
    lines += _not_submitted([c for c in m.cell_ids() if (only is None or c in only) and c not in cells])
    table = []
    for cell_id, c in cells.items():
        n_ok = c.get(Status.OK, 0)
        worst = worst_failure(c) or ""
        table.append([cell_id, f"{n_ok}/{sum(c.values())}", fmt_counts(c), worst])
    screen = height or terminal_height()
    head = sum(len(part.splitlines()) or 1 for part in lines)
    summary = show_runs is None and head + 3 + len(table) >= screen  # more cells than a screen: those to look at
    if summary:
        lines += _cells_summary(table, cells, wide)
    else:
        lines.append("")
        lines.append(fit_table(["cell", "ok/n", "statuses", "failure"], table, wide=wide,
                               cut=("failure", "statuses"), tablefmt="github")[0])
    if show_runs is False:
        return "\n".join(lines)
    shown = sum(len(part.splitlines()) or 1 for part in lines)
    if show_runs or (not summary and shown + 3 + len(pairs) < screen):  # a blank, the header, its rule, the runs
        return "\n".join([*lines, "", _runs_table([r for r in m.runs() if only is None or r.cell_id in only], wide)])
    failed_n = sum(n for k, n in total.items() if k in FAILURES)
    if failed_n:
        failed = [r for r in m.runs(statuses=sorted(FAILURES)) if only is None or r.cell_id in only]
        lines += ["", f"failed runs ({failed_n:,} of {len(pairs):,}):", _runs_table(failed[:FAILED_RUNS_SHOWN], wide)]
        if failed_n > FAILED_RUNS_SHOWN:
            lines.append(f"... and {plural(failed_n - FAILED_RUNS_SHOWN, 'more failed run', grouped=True)}")
    lines += ["", (f"{plural(len(table), 'cell', grouped=True)}, {plural(len(pairs), 'run', grouped=True)}: "
                   "--cells shows each cell, --runs each run") if summary else
              f"{plural(len(pairs), 'run')}: --runs shows each"]
    return "\n".join(lines)


def _cells_summary(table: list[list[str]], cells: dict[str, dict[str, int]], wide: bool) -> list[str]:
    """More cells than a screen (``status``'s default): how many are done, going and failing, and the failing ones
    (the first :data:`FAILED_RUNS_SHOWN`, the rest counted); the failed runs follow. ``table``: the cell table's
    rows, ``cells``: each cell's counts, in the same order."""
    from dlperf_slurm.termtext import fit_table

    failing = [row for row in table if row[3]]
    done = sum(1 for c in cells.values() if c.get(Status.OK, 0) == sum(c.values()))
    parts = [f"{done:,} every run OK", f"{len(table) - done - len(failing):,} not ended",
             f"{len(failing):,} with a failure"]
    out = ["", f"{plural(len(table), 'cell', grouped=True)}: " + ", ".join(p for p in parts if not p.startswith("0 "))]
    if failing:
        out += ["", f"cells with a failure ({len(failing):,} of {len(table):,}):",
                fit_table(["cell", "ok/n", "statuses", "failure"], failing[:FAILED_RUNS_SHOWN], wide=wide,
                          cut=("failure", "statuses"), tablefmt="github")[0]]
        if len(failing) > FAILED_RUNS_SHOWN:
            out.append(f"... and {plural(len(failing) - FAILED_RUNS_SHOWN, 'more cell', grouped=True)} with a failure")
    return out


def _not_submitted(ids: Sequence[str], shown: int = 5) -> list[str]:
    """The line for the matrix's cells no submit has asked for yet (``submit -k`` asked for others)."""
    if not ids:
        return []
    names = ", ".join(ids[:shown]) + (f", ... ({len(ids) - shown} more)" if len(ids) > shown else "")
    return [f"  {plural(len(ids), 'cell')} of the matrix not submitted yet ({names}): `submit` without -k adds "
            f"{noun(len(ids), 'it', 'them')}"]


def _runs_table(rows: Sequence[ManifestRun], wide: bool) -> str:
    """One row a run: key, job, status, reason; --wide: every reason whole (a cut once hid "torchrun: command not
    found"); else fit_table cuts to the terminal."""
    from dlperf_slurm.termtext import fit_table

    run_rows = [[r.key, r.job_id or "-", r.status, _short(r.reason, None if wide else 110)] for r in rows]
    return fit_table(["run", "job", "status", "reason"], run_rows, wide=wide, drop=("job",), cut=("reason",),
                     tablefmt="github")[0]


def _short(text: str, n: int | None = 110) -> str:
    text = (text or "").replace("\n", " ")
    return text if n is None or len(text) <= n else text[: n - 3] + "..."
