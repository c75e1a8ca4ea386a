"""Summaries of a collect: DLPerf-style markdown tables, CSV, JSON and SVG plots, each written atomically.

``summaries/<name>.md``        per (suite, precision, XLA, batch per device[, variant]) a table of device shapes
                               (``1n1g``, ``1n8g``, ``2n8g``, ...) with median throughput, speedup, efficiency,
                               latency, GPU memory and spread; a cross-suite table as in DLPerf's README.
``summaries/<name>.csv``       every cell (one row each); ``<name>.runs.csv``: every run.
``summaries/<name>.json``      both, with the sources and the method.
``summaries/<name>.<suite>.svg``  throughput and scaling efficiency against GPUs, ideal dashed; none: one count.

The tables themselves are built in :mod:`dlperf_slurm.report.tables`. Every format is one writer in :data:`WRITERS`.
tabulate is imported inside the functions that need it; the CSV is the csv module's, the SVG our own text.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf_slurm import stats
from dlperf_slurm.collect import processes
from dlperf_slurm.collect.parsecache import OutputState, digest
from dlperf_slurm.disk import atomic_write, no_more_open_than, remove_stale_tmp
from dlperf_slurm.matrix import measure
from dlperf_slurm.model.rows import CellRow, RunRow, as_dict, columns
from dlperf_slurm.model.status import Status
from dlperf_slurm.probes import health
from dlperf_slurm.report import accuracy, network, stragglers, studies, system, widedeep
from dlperf_slurm.report import plots as plotting
from dlperf_slurm.report.tables import (
    TINY,
    counts_text,
    cross_suite,
    group_table,
    group_title,
    groups,
    setup_study,
    shared_suites,
)
from dlperf_slurm.words import plural

if TYPE_CHECKING:  # the result collect makes (collect imports no writer)
    from dlperf_slurm.collect.drive import Result


def _write(path: Path, data: bytes | str) -> Path:
    """Summaries are rewritten atomically and durably (a collect may run while someone reads them)."""
    return atomic_write(path, data, durable=True)


# ============================================================================================== values


_PLAIN = frozenset({str, int, bool, type(None)})  # what JSON takes as it is: most values, looked up by exact type


def _jsonable(v: Any) -> Any:
    """``v`` with every float that is not finite as None, tuples as lists, paths and dict keys as strings."""
    t = type(v)
    if t in _PLAIN:
        return v
    if t is float:
        return v if math.isfinite(v) else None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): x if type(x) in _PLAIN else _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [x if type(x) in _PLAIN else _jsonable(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    return v


def _csv_value(v: Any) -> Any:
    """A field as the CSV holds it: None and NaN empty, lists and dicts as JSON text (so the CSV stays flat), the
    rest as it is (the csv module writes floats as their ``repr``, ints as ints, bools as True/False)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (dict, list)):
        return json.dumps(_jsonable(v), sort_keys=True)
    return v


_CSV_PLAIN = frozenset({str, int, bool, type(None)})  # what _csv_value gives back as it is: most fields


def csv_text(rows: Sequence[RunRow | CellRow], cls: type, more: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """``rows`` as CSV text: a header of :func:`~dlperf_slurm.model.rows.columns`, one line per row (minimal quoting,
    ``\\n`` line ends); ``more``: cell id -> columns after those (the same for every row that has them)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    extra = list(dict.fromkeys(k for cols in (more or {}).values() for k in cols))
    w.writerow([*columns(cls), *extra])
    plain = _CSV_PLAIN
    w.writerows([*(v if type(v) in plain else _csv_value(v) for v in as_dict(r).values()),
                 *(_csv_value((more or {}).get(r.cell_id, {}).get(k)) for k in extra)] for r in rows)
    return buf.getvalue()


# ============================================================================================ markdown


def markdown(result: Result) -> str:
    from tabulate import tabulate

    cells, runs = result.cells, result.runs
    launchers = len({c.launcher for c in cells}) > 1
    win = measure.windows_text((c.name, s.cell.id, s.warmup_steps, s.measure_steps) for c in result.collections
                               for s in c.runs)  # each window with its runs, where they differ
    lines = [f"# dlperf_slurm summary: {result.name}", ""]
    lines.append(f"Generated {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} by `dlperf-slurm collect` "
                 f"from {plural(len(runs), 'run')} in "
                 f"{', '.join(f'{c.name} ({c.source}: {c.where})' for c in result.collections)}.")
    lines.append("")
    lines += system.markdown(system.describe(runs))
    lines.append(_method_line(result, win))
    lines.append("")
    if any(c.tiny for c in cells):
        lines += [(f"> **{TINY}**: some runs used the tiny models (`--tiny`); their figures only show that the "
                  "pipeline works."), ""]
    lines.append(f"Runs: {counts_text(runs)}.")
    if health.markdown_line(runs):
        lines += ["", health.markdown_line(runs)]
    for col in result.collections:
        for note in col.notes:
            lines.append(f"\nNote ({col.name}): {note}")
    lines.append("")
    xs = cross_suite(cells)
    if xs:
        lines.append("## Across suites (largest shape of each)")
        lines.append("")
        for model, headers, rows in xs:
            lines.append(f"**{model}**")
            lines.append("")
            lines.append(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
            lines.append("")
    for title, headers, rows in setup_study(cells):
        lines += [f"## Set-ups compared: {title}", "",
                  tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
    lines += network.markdown(cells, runs)  # what the network allows each multi-node cell (with a gate busbw)
    lines += accuracy.markdown(cells, runs)  # the accuracy table, only when accuracy runs are present
    lines += widedeep.markdown(cells)  # DLPerf's W&D table, only when W&D cells are present
    lines += studies.markdown(cells)  # Tensorpack vs tf_cnn, only when both suites have cells
    lines += _group_tables(cells, launchers)
    lines += stragglers.markdown(stragglers.analyse(runs))
    return "\n".join(lines).rstrip() + "\n"


def _method_line(result: Result, win: str) -> str:
    """The summary's method line: the window, the throughput flavour each suite's tables show, the statistics."""
    cells = result.cells
    time_flavour = "global batch × measured steps / the log's own time between the window's ends"
    speed = sorted({c.suite for c in cells if c.published == "speed"})
    if speed:  # the tables show each suite's published flavour
        timed = sorted({c.suite for c in cells if c.published != "speed"})
        flavour = ("throughput = each suite's published flavour (the other is in the CSV/JSON): "
                   + (f"time flavour, {time_flavour}: {', '.join(timed)}; " if timed else "")
                   + f"speed flavour, the mean of the printed per-step throughputs over the window: {', '.join(speed)}")
    else:
        flavour = (f"throughput = {time_flavour} (time flavour; the speed flavour, the mean of the printed per-step "
                   "throughputs, is in the CSV/JSON)")
    return (f"Method (docs/method.md): window: {win}; {flavour}; median over the OK runs of a cell (even count: "
            "mean of the two middle values); speedup = median / median of the 1n1g cell with the same suite, "
            "precision, XLA, batch per GPU, variant and launcher, or where no 1n1g cell has the launcher, of "
            "the one 1n1g cell that differs in launcher alone (empty without one); efficiency = speedup / GPUs. "
            "Only OK runs enter the statistics; a cell without one shows its dominant failure or its progress. "
            f"Flags: `few OK` ({stats.few_ok_rule(c.n for c in cells)}: 5 of 7 as a ratio of the planned runs), "
            "`CV>5%`. GPU memory: peak NVML \"used\" over every GPU / GPU 0, MiB.")


def _group_tables(cells: Sequence[CellRow], launchers: bool) -> list[str]:
    """The DLPerf-style tables: one per group of cells, with its memory note and its failed cells' reasons."""
    from tabulate import tabulate

    lines: list[str] = []
    shared = shared_suites(cells)
    for key, gc in groups(cells):
        lines.append(f"## {group_title(key, gc, launchers, shared)}")
        lines.append("")
        headers, rows = group_table(gc)
        lines.append(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
        mem = sorted({c.mem_reason for c in gc if c.mem_reason and c.n_ok})
        if mem:
            lines.append("")
            lines.append("GPU memory: " + "; ".join(mem) + ".")
        failed = [c for c in gc if c.status != Status.OK and c.reason]
        if failed:
            lines.append("")
            for c in failed:
                lines.append(f"- `{c.shape}` {c.display or c.status}: {_md_escape(c.reason)}")
        lines.append("")
    return lines


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:300]


#: what the terminal leaves out first to fit (the files keep every column)
TERMINAL_DROP = ("TFLOP/s", "GPU mem", "latency", "spread")


def terminal(result: Result, wide: bool = False) -> str:
    """The main tables for the terminal, fitting :data:`tables.TERMINAL_WIDTH` columns unless ``wide``."""
    from dlperf_slurm.termtext import fit_table, left_out_line

    shared = shared_suites(result.cells)
    launchers = len({c.launcher for c in result.cells}) > 1
    out = [f"{result.name}: {plural(len(result.runs), 'run')} ({counts_text(result.runs)}), "
           f"{plural(len(result.cells), 'cell')}"]
    left_out: list[str] = []
    for key, gc in groups(result.cells):
        headers, rows = group_table(gc)
        text, dropped = fit_table(headers, rows, wide=wide, drop=TERMINAL_DROP)
        left_out += dropped
        out += ["", group_title(key, gc, launchers, shared), text]
    xs = cross_suite(result.cells)
    if len({c.suite for c in result.cells}) > 1:
        for model, headers, rows in xs:
            out += ["", f"{model} across suites (largest shape)", fit_table(headers, rows, wide=wide)[0]]
    if left_out:
        out += ["", left_out_line(left_out, "the .md/.csv/.html")]
    return "\n".join(out)


# ============================================================================================== writing


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


#: A summary writer: ``fn(result, out_dir, stem)`` writes its files (``<stem>.<ext>`` under ``out_dir``, with
#: :func:`_write`) from ``result.runs`` (RunRow) and ``result.cells`` (CellRow) and returns the paths it wrote.
Writer = Callable[["Result", Path, str], Iterable[Path]]

#: Every output format by name, in the order :func:`write_all` calls them. Adding a format is one function
#: under :func:`writer`; ``WRITERS.pop(name)`` removes one.
WRITERS: dict[str, Writer] = {}
_PLOTS: set[str] = set()  # the writers ``--no-plots`` leaves out


def writer(name: str, *, plot: bool = False) -> Callable[[Writer], Writer]:
    """Register the decorated function as the writer of format ``name`` (``plot``: a plot, skipped by
    ``--no-plots``)."""

    def register(fn: Writer) -> Writer:
        WRITERS[name] = fn
        (_PLOTS.add if plot else _PLOTS.discard)(name)
        return fn

    return register


@writer("md")
def write_markdown(result: Result, out: Path, stem: str) -> list[Path]:
    return [_write(out / f"{stem}.md", markdown(result))]


@writer("csv")
def write_csv(result: Result, out: Path, stem: str) -> list[Path]:
    """``<stem>.csv``: one row per cell (with accuracy runs, their final top-1/top-5 and time to target after the
    cell's columns: :func:`dlperf_slurm.report.accuracy.csv_columns`); ``<stem>.runs.csv``: one row per run."""
    more = accuracy.csv_columns(accuracy.table(result.cells, result.runs))
    return [_write(out / f"{stem}.csv", csv_text(result.cells, CellRow, more)),
            _write(out / f"{stem}.runs.csv", csv_text(result.runs, RunRow))]


@writer("json")
def write_json(result: Result, out: Path, stem: str) -> list[Path]:
    doc = {"name": result.name, "generated_at": time.time(), "system": system.describe(result.runs),
           "sources": [{"name": c.name, "source": c.source, "where": c.where, "runs": len(c.runs),
                        "repeats": c.repeats, "notes": c.notes, **_identity(c)} for c in result.collections],
           "method": {"throughput": "time flavour: global_batch x measured steps / (t_end - t_start)",
                      "throughput_speed": "mean of the printed per-step throughputs over the same window",
                      "median": "even count: mean of the two middle values", "only_ok_runs": True,
                      "speedup": "median / median(1n1g, same suite, precision, xla, batch per device, variant and "
                                 "launcher; without one, the only 1n1g cell differing in launcher alone)",
                      "efficiency": "speedup / devices", "flags": {"few_ok": "n_ok/n < 5/7", "high_cv": "cv > 0.05"}},
           "cells": [_jsonable(as_dict(c)) for c in result.cells], "runs": [_jsonable(as_dict(r)) for r in result.runs],
           "nodes": [_jsonable(dataclasses.asdict(n)) for n in stragglers.analyse(result.runs)]}
    acc = accuracy.table(result.cells, result.runs)
    if acc:  # only with accuracy runs: the summaries of throughput campaigns keep their keys
        doc["accuracy"] = [_jsonable(a) for a in acc]
    net = network.explain(result.cells, result.runs)
    if net:  # only with multi-node cells whose health gate measured a bus bandwidth
        doc["network"] = [_jsonable(n) for n in network.as_dicts(net)]
    return [_write(out / f"{stem}.json", _json_lines(doc))]


def _identity(col: Any) -> dict[str, str]:
    """What identifies a source's campaign in the results store (:mod:`dlperf_slurm.campaign.identity`): ``compare
    --base last-good`` reads it back from the summary."""
    from dlperf_slurm.campaign.identity import of_collection

    cid = of_collection(col)
    return {"campaign_key": cid.key, "matrix": cid.matrix, "ran_at": cid.ran_at, "system": cid.system}


def _json_lines(doc: dict[str, Any]) -> str:
    """``doc`` as JSON with each top-level key on its own line and each element of a list on its own line: one cell
    or run per line (greppable, diffable), every line written by json's C encoder (an indented dump goes through its
    pure-Python encoder: 0.125 s against 0.05 s for 2,000 runs, a small part of the writers' time)."""
    parts = []
    for key, value in doc.items():
        head = json.dumps(key) + ": "
        if isinstance(value, list) and value:
            body = "[\n" + ",\n".join(json.dumps(x, default=str) for x in value) + "\n]"
        else:
            body = json.dumps(value, default=str)
        parts.append(head + body)
    return "{\n" + ",\n".join(parts) + "\n}\n"


@writer("html")
def write_html(result: Result, out: Path, stem: str) -> list[Path]:
    """``<stem>.html``: one self-contained page (System, tables, inline plots, failures with their logs' last lines,
    each cell's stored history): :mod:`dlperf_slurm.report.htmlpage`."""
    from dlperf_slurm.report import htmlpage
    from dlperf_slurm.report.system import system_section

    text = htmlpage.render(result, plots=result.with_plots, system=system_section(result), trend=result.trend,
                             markdown=markdown(result))
    return [_write(out / f"{stem}.html", text)]


@writer("svg", plot=True)
def write_plots(result: Result, out: Path, stem: str) -> list[Path]:
    """One SVG plot per suite with an OK cell; with ``result.output_state``, a plot whose cells did not change is
    kept as it is."""
    state = result.output_state
    shared = shared_suites(result.cells)
    paths = []
    for suite in sorted({c.suite for c in result.cells}):
        gs = plotting.plottable(result.cells, suite)
        if not gs or plotting.one_shape(gs):  # one GPU count: no plot (the HTML report says why)
            continue
        path = out / f"{stem}.{_slug(suite.replace('/', '_'))}.svg"
        paths.append(path)
        if state is not None:
            d = "svg:" + digest(gs, suite in shared)
            if state.fresh(path, d):
                continue
            state.record(path, d)
        _write(path, plotting.draw(gs, suite, suite in shared))
    return paths


#: A summary of at least this many runs has its largest file, the JSON (about half the writers' time), written by a
#: forked process while the others write theirs, where a second CPU is free and ``-j`` is not 1: 6,000 runs,
#: bench_collect.py --peer: the writers 0.35 s -> 0.2 s. Fewer runs: the fork costs more than it gives.
BESIDE_RUNS, BESIDE = 2000, "json"


def write_all(result: Result, out_dir: str | os.PathLike = "summaries", plots: bool = True,
              state: OutputState | None = None, jobs: int | None = None) -> list[Path]:
    """Run every registered writer (but the plots when ``plots`` is false) over ``result`` under ``out_dir``;
    each file is written atomically. The paths written, in :data:`WRITERS`' order. With ``state`` (what was
    written last time), a writer whose inputs did not change writes nothing (its files are still listed) and
    ``state`` records what is current (the plots keep their own digest per file). ``jobs``: collect's ``-j`` (1:
    every writer in this process)."""
    # a campaign's summaries are no more open than its folder (a manifest's, a matrix's, a --from tree's)
    with no_more_open_than([c.where for c in result.collections if Path(c.where).is_dir()]):
        return _write_all(result, Path(out_dir), plots, state, jobs)


def _write_all(result: Result, out: Path, plots: bool, state: OutputState | None, jobs: int | None) -> list[Path]:
    stem = _slug(result.name)
    remove_stale_tmp(out)  # what a collect killed mid-write left
    result.output_state = state
    result.with_plots = plots
    inputs = None
    if state is not None:
        inputs = digest(result.name, [(c.name, c.source, c.where, c.repeats, c.notes, len(c.runs),
                                       sorted({(s.warmup_steps, s.measure_steps) for s in c.runs}))
                                      for c in result.collections], result.runs, result.cells, plots,
                        result.trend)
    ran = [n for n in WRITERS if plots or n not in _PLOTS]
    written: dict[str, list[Path]] = {}
    todo = []
    for name in ran:
        mine = state.files(f"{name}:") if state is not None and name not in _PLOTS else []
        if mine and all(state.fresh(p, f"{name}:{inputs}") for p in mine):  # type: ignore[union-attr]
            written[name] = mine
        else:
            todo.append(name)
    aside = BESIDE if (BESIDE in todo and len(result.runs) >= BESIDE_RUNS and jobs != 1 and processes.can_fork()
                       and processes.free_cpus() >= 1.5) else None
    calls = {name: functools.partial(WRITERS[name], result, out, stem) for name in todo}
    written.update((k, list(v)) for k, v in processes.run_all(calls, aside).items())
    paths: list[Path] = []
    for name in ran:
        if state is not None and name not in _PLOTS:
            for p in written[name]:
                state.record(p, f"{name}:{inputs}")
        paths += written[name]
    if state is not None:
        _drop_stale(state, out, stem, ran)
    return paths


def _drop_stale(state: OutputState, out: Path, stem: str, ran: list[str]) -> None:
    """Remove the files the last collect of these summaries wrote that this one no longer makes: the plot of a
    suite gone from the campaign, a format no writer makes any more (the PNG plots of earlier versions). A writer
    left out this time (``--no-plots``) keeps its files, still known as they were. What is removed is listed in
    ``state.removed``."""
    real_out = os.path.realpath(out)  # the state knows files by their canonical path
    for p, d in state.before.items():
        if p in state.now:
            continue
        kind = d.split(":", 1)[0]
        if kind in WRITERS and kind not in ran:
            state.now[p] = d
            continue
        path = Path(p)
        if str(path.parent) == real_out and path.name.startswith(f"{stem}.") and path.exists():
            path.unlink()
            state.removed.append(path)
