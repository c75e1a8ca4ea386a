"""The HTML report of a collect: ``summaries/<name>.html``, one self-contained file (no network: the plots are
inline SVG, the style inline CSS, no script) for people who would rather look than read.

In order: the System section (what the numbers ran on; the markdown's rows), the method, run counts, health gate
and notes, the DLPerf tables (each cell's median carries its exact value in ``data-value`` beside the rounded text),
the plots (the same SVG as ``<name>.<suite>.svg``), each failed run's reason and the last human-readable lines of
its log (not the workload's ``:::DLPERF`` events), and per cell its history over the
stored campaigns as a small trend plot when the results store holds earlier campaigns of it
(``result.trend``: :func:`trend_of`). Every section of the markdown summary the page has no form of its own for
(across suites, set-ups, network, accuracy, W&D, Nodes and stragglers) is there too (:mod:`dlperf_slurm.report.mdhtml`).
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dlperf_slurm import stats
from dlperf_slurm.disk import open_log
from dlperf_slurm.model.rows import CellRow, RunRow
from dlperf_slurm.model.status import ACTIVE, Status
from dlperf_slurm.report import mdhtml
from dlperf_slurm.report import plots as plotting
from dlperf_slurm.report.tables import counts_text, group_table, group_title, groups, shared_suites
from dlperf_slurm.words import plural

LOG_LINES = 15  # a failed run's last log lines shown
MAX_FAILURES = 200  # failed runs listed (the rest counted)


@dataclass(frozen=True)
class Point:
    """One campaign of a cell's trend."""

    campaign: str
    median: float | None
    ci_low: float | None
    ci_high: float | None
    current: bool = False


def trend_of(stored: Sequence[Any], result: Any, labels: Mapping[str, str] | None = None) -> dict[str, list[Point]]:
    """Per cell of ``result``, its stored campaigns (``store.StoredCell``, oldest first; the caller leaves this
    campaign's own rows out) and then this one; only the cells with an earlier campaign. ``labels``: a campaign's
    label by its store key, and this collect's by its name (``history.labels``: ``smoke#1``, ``smoke#2`` when two
    campaigns share a name); a campaign without one is labelled by its name."""
    names = labels or {}
    here = {c.cell_id: c for c in result.cells}
    out: dict[str, list[Point]] = {}
    for s in stored:
        if s.cell_id in here:
            out.setdefault(s.cell_id, []).append(Point(names.get(s.key, s.campaign), s.median, s.ci_low, s.ci_high))
    for cid, points in out.items():
        c = here[cid]
        points.append(Point(names.get(c.campaign, c.campaign), c.median, c.ci_low, c.ci_high, current=True))
    return out


def tail(path: str, lines: int = LOG_LINES, max_bytes: int = 16384) -> list[str] | None:
    """The last ``lines`` lines of a log (read from its end), None when it cannot be read."""
    try:
        with open_log(path) as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return None
    text = _ANSI.sub("", data.decode("utf-8", "replace").replace("\r", "\n"))
    # the human-readable lines: not the workload's machine events (:::DLPERF JSON), which the tables already read
    return [ln for ln in text.splitlines() if ln.strip() and ":::DLPERF" not in ln][-lines:]


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# ================================================================================================= SVG


def trend_svg(points: Sequence[Point], unit: str, width: int = 320, height: int = 110) -> str:
    """A small plot of a cell's median over campaigns, its 95 % interval as a bar, this campaign in red."""
    vals = [v for p in points for v in (p.median, p.ci_low, p.ci_high) if v is not None]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    left, right, top, bottom = 52, width - 8, 8, height - 22
    n = len(points)

    def x(i: int) -> float:
        return left + (right - left) * (i + 0.5) / n

    def y(v: float) -> float:
        return bottom - (bottom - top) * (v - lo) / (hi - lo)

    e = plotting.escape
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="median over campaigns ({e(unit)})">',
             f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="#fafafa" '
             'stroke="#ccc"/>',
             f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" font-size="10">{stats.fmt(hi - pad)}</text>',
             f'<text x="{left - 4}" y="{bottom}" text-anchor="end" font-size="10">{stats.fmt(lo + pad)}</text>']
    line = [(x(i), y(p.median)) for i, p in enumerate(points) if p.median is not None]
    if len(line) > 1:
        parts.append('<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="'
                     + " ".join(f"{a:.1f},{b:.1f}" for a, b in line) + '"/>')
    for i, p in enumerate(points):
        colour = "#d62728" if p.current else "#1f77b4"
        if p.ci_low is not None and p.ci_high is not None:
            parts.append(f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(p.ci_low):.1f}" y2="{y(p.ci_high):.1f}" '
                         f'stroke="{colour}" stroke-width="1"/>')
        label = f'{e(p.campaign)}: {stats.fmt(p.median) if p.median is not None else "no OK run"}'
        if p.median is not None:
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(p.median):.1f}" r="3" fill="{colour}">'
                         f'<title>{label}</title></circle>')
        else:
            parts.append(f'<text x="{x(i):.1f}" y="{bottom - 4}" text-anchor="middle" font-size="10" '
                         f'fill="{colour}">x<title>{label}</title></text>')
        name = p.campaign if len(p.campaign) <= 12 else p.campaign[:11] + "…"
        parts.append(f'<text x="{x(i):.1f}" y="{height - 6}" text-anchor="middle" font-size="9">{e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# =============================================================================================== HTML

_STYLE = """
body{font-family:"DejaVu Sans",Arial,Helvetica,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
.failed{color:#b00020}.note{color:#555;font-size:.9em}
pre{background:#f6f6f6;border:1px solid #ddd;padding:6px;font-size:.8em;overflow-x:auto;max-height:22em}
svg{max-width:100%;height:auto}.trends{display:flex;flex-wrap:wrap;gap:1em}
.trends figure{margin:0}.trends figcaption{font-size:.8em}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], attrs: Sequence[str] | None = None) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        a = f" {attrs[i]}" if attrs else ""
        out.append(f"<tr{a}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def system_rows(system: Mapping[str, Any] | None, runs: Sequence[RunRow]) -> list[tuple[str, str]]:
    """The System section as (what, value) rows: the summary's System object when there is one, else what the
    runs' provenance recorded (the most frequent value of each), and the nodes the runs ran on."""
    from dlperf_slurm.report.system import versions_of

    rows = [(k, v) for k, v in versions_of(dict(system) if system else None, runs).items()]
    hosts = sorted({r.hosts for r in runs if r.hosts})
    if hosts:
        rows.append(("nodes", ", ".join(hosts[:20]) + (f" and {len(hosts) - 20} more" if len(hosts) > 20 else "")))
    return rows


def _inline(text: str) -> str:
    """A markdown line's text as HTML: escaped, ``**bold**`` and ```code``` kept."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", _e(text)))


def system_html(system: Mapping[str, Any]) -> list[str]:
    """The summary's System section (:func:`dlperf_slurm.report.system.markdown`: each node group's rows, the
    framework's
    CUDA stack and the node's toolkit apart, what differs from the majority) as HTML, the same rows."""
    from dlperf_slurm.report import system as sysmod

    out: list[str] = []
    rows: list[list[str]] = []
    for line in [*sysmod.markdown(dict(system))[2:], ""]:
        if line.startswith("| "):
            if not line.startswith(("| | |", "| --- |")):
                rows.append([_inline(x) for x in line[2:-2].split(" | ", 1)])
            continue
        if rows:
            out.append(_table(["what", "value"], rows))
            rows = []
        if line:
            out.append(f'<p class="failed">{_inline(line[2:])}</p>' if line.startswith("- ") else
                       f"<p>{_inline(line)}</p>")
    return out


def _median_cell(c: CellRow, text: str) -> str:
    value = "" if c.median is None or not c.n_ok else f' data-value="{c.median!r}"'
    cls = "num median" if c.n_ok else "median failed"
    return f'<span class="{cls}" data-cell="{_e(c.cell_id)}"{value}>{_e(text)}</span>'


def render(result: Any, *, plots: bool = True, system: Mapping[str, Any] | None = None,
           trend: Mapping[str, Sequence[Point]] | None = None, markdown: str = "") -> str:
    """The page; ``markdown``: the summary's markdown, whose sections the page has no form of its own for (the
    method, runs and health gate lines, across suites, network, accuracy, Nodes and stragglers...) it holds too."""
    cells: list[CellRow] = result.cells
    runs: list[RunRow] = result.runs
    name = result.name
    body = [f"<h1>dlperf_slurm report: {_e(name)}</h1>",
            f'<p class="note">Generated {_e(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))} by '
            f"<code>dlperf-slurm collect</code> from {plural(len(runs), 'run')} "
            f"({_e(counts_text(runs))}) in {plural(len(cells), 'cell')}; "
            + _e(", ".join(f"{c.name} ({c.source}: {c.where})" for c in result.collections)) + ".</p>"]
    body.append('<h2 id="system">System</h2>')
    if system and system.get("node_groups"):  # the markdown's System section, row for row
        body += system_html(system)
    else:
        sysrows = system_rows(system, runs)
        body.append(_table(["what", "value"], [[_e(k), _e(v)] for k, v in sysrows]) if sysrows else
                    '<p class="note">No provenance recorded (a log tree read with --from has none).</p>')

    launchers = len({c.launcher for c in cells}) > 1
    shared = shared_suites(cells)
    pre, rest = mdhtml.extra_sections(markdown, [group_title(k, gc, launchers, shared) for k, gc in groups(cells)])
    body.append(pre)
    body.append('<h2 id="tables">Tables</h2><p class="note">Throughput: the median over a cell\'s OK runs '
                "(docs/method.md); speedup against the 1n1g cell; the median's distribution-free 95 % interval.</p>")
    body += _group_tables(cells, launchers, shared)

    body.append(rest)
    if plots:
        body += _plots(cells, shared)
    if trend:
        body += _trends(cells, trend)
    body += _failures(runs)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(name)}: dlperf_slurm report</title><style>{_STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _group_tables(cells: list[CellRow], launchers: bool, shared: set[str]) -> list[str]:
    """The summary's tables, one per group of cells: each median with its interval, the memory note, failed cells."""
    body: list[str] = []
    for key, gc in groups(cells):
        headers, rows = group_table(gc)
        html_rows = []
        for c, row in zip(gc, rows, strict=True):
            cells_html = [_e(v) for v in row]
            cells_html[2] = _median_cell(c, row[2])
            html_rows.append(cells_html)
        body.append(f"<h3>{_e(group_title(key, gc, launchers, shared))}</h3>")
        body.append(_table(headers, html_rows, [f'data-cell="{_e(c.cell_id)}"' for c in gc]))
        mem = sorted({c.mem_reason for c in gc if c.mem_reason and c.n_ok})
        if mem:  # as the markdown says it
            body.append(f"<p>GPU memory: {_e('; '.join(mem))}.</p>")
        failed = [c for c in gc if c.status != Status.OK and c.reason]
        if failed:
            body.append("<ul>" + "".join(f'<li class="failed"><code>{_e(c.shape)}</code> {_e(c.display or c.status)}: '
                                         f"{_e(c.reason)}</li>" for c in failed) + "</ul>")
    return body


def _plots(cells: list[CellRow], shared: set[str]) -> list[str]:
    """Each suite's plots inline, or why a suite has none (one shape: nothing to scale against)."""
    body: list[str] = []
    drawn = [(suite, gs) for suite in sorted({c.suite for c in cells}) if (gs := plotting.plottable(cells, suite))]
    svgs = [(s, plotting.draw(gs, s, s in shared)) for s, gs in drawn if not plotting.one_shape(gs)]
    if drawn:
        body.append('<h2 id="plots">Plots</h2>')
        body += [f'<figure class="plot" data-suite="{_e(s)}">{_svg_body(svg)}<figcaption>{_e(s)}</figcaption>'
                 "</figure>" for s, svg in svgs]
        body += [f'<p class="note" data-suite="{_e(s)}">{_e(s)}: {_e(why)}.</p>' for s, gs in drawn
                 if (why := plotting.one_shape(gs))]
    return body


def _trends(cells: list[CellRow], trend: Mapping[str, Sequence[Point]]) -> list[str]:
    """Each cell's median over the stored campaigns, as a small plot."""
    body: list[str] = []
    body.append('<h2 id="history">History</h2><p class="note">Each cell\'s median over the campaigns the results '
                "store holds (bars: the 95 % interval; red: this campaign). <code>dlperf-slurm history</code> "
                "judges each change.</p><div class=\"trends\">")
    units = {c.cell_id: c.unit for c in cells}
    for cid, points in trend.items():
        body.append(f'<figure data-cell="{_e(cid)}">{trend_svg(points, units.get(cid, ""))}'
                    f"<figcaption>{_e(cid)}</figcaption></figure>")
    body.append("</div>")
    return body


def _failures(runs: list[RunRow]) -> list[str]:
    """Every failed run (up to MAX_FAILURES): its status, its reason and its log's last lines."""
    body: list[str] = []
    failed_runs = [r for r in runs if r.status != Status.OK and r.status not in ACTIVE]
    body.append(f'<h2 id="failures">Failures ({plural(len(failed_runs), "run")})</h2>')
    if not failed_runs:
        body.append('<p class="note">No run failed.</p>')
    for r in failed_runs[:MAX_FAILURES]:
        lines = tail(r.log) if r.log else None
        log = ("\n".join(lines) if lines else "(empty log)") if lines is not None else f"(cannot read {r.log})"
        body.append(f'<details class="failure" data-cell="{_e(r.cell_id)}" open><summary><code>{_e(r.cell_id)}</code> '
                    f'run {r.repeat}: <span class="failed">{_e(r.status)}</span> — {_e(r.reason or "no reason given")}'
                    f"</summary><pre>{_e(log)}</pre></details>")
    if len(failed_runs) > MAX_FAILURES:
        body.append(f'<p class="note">and {len(failed_runs) - MAX_FAILURES} more failed runs (the CSV lists them).</p>')
    return body


def _svg_body(svg: str) -> str:
    """An SVG file's text as an inline element (its XML declaration dropped)."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg
