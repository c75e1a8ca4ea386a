"""The SVG plots of a summary: per suite, throughput and scaling efficiency against the number of GPUs.

Written as text by this module (no plotting library): two panels side by side, GPUs on a log2 axis with a tick at
each GPU count present; left, the median throughput on a log axis (labelled at every decade, between them where
the range is short, and at the data's ends: the lowest and highest median), a line per group of cells with
min-max bars and the ideal linear scaling from its 1n1g cell dashed in the same colour; right, the scaling
efficiency (%) with the ideal 100 % dashed. A suite whose cells ran on one GPU count gets none
(:func:`one_shape` says why). Each marker's ``<title>`` holds its value (a tooltip in a browser).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from dlperf_slurm.model.rows import CellRow
from dlperf_slurm.report.tables import groups, xla_name
from dlperf_slurm.stats import fmt
from dlperf_slurm.words import plural

#: matplotlib's tab10 colours (C0..C9), one per group, in order
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")
W, H = 1320, 528  # px: the 12 x 4.8 in figure at 110 dpi
TOP, BOTTOM = 37, 470  # the panels' plot area, px from the top
PANELS = ((92, 636), (757, 1300))  # left and right edges of the two panels' plot areas
FONT = 'font-family="DejaVu Sans, Arial, Helvetica, sans-serif"'


def escape(text: str) -> str:
    """``text`` as XML character data (labels come from users' matrices and logs): what xml.sax.saxutils.escape
    with ``"`` does, whose import (urllib.request, http.client, email, ssl) was 5 % of collect's start-up."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def plottable(cells: Sequence[CellRow], suite: str) -> list[tuple[tuple, list[CellRow]]]:
    """The suite's groups of cells (shapes of one precision, XLA, batch, variant, campaign) with an OK median."""
    gs = [(k, [c for c in g if c.n_ok and c.median is not None]) for k, g in groups(cells) if k[0] == suite]
    return [(k, g) for k, g in gs if g]


def one_shape(gs: Sequence[tuple[tuple, Sequence[CellRow]]]) -> str:
    """Why the suite's groups get no plot ('' when they get one): every cell with a figure ran on one GPU count, and
    a plot against the number of GPUs of one count would say nothing the table does not."""
    devs = sorted({c.devices for _, g in gs for c in g})
    if len(devs) != 1:
        return ""
    shapes = ", ".join(sorted({c.shape for _, g in gs for c in g}))
    return (f"no plot: every cell with a figure ran on {plural(devs[0], 'GPU')} ({shapes}); throughput "
            "and scaling against the number of GPUs need two GPU counts: the table holds the figures")


def _median(c: CellRow) -> float:
    """A plotted cell's median (:func:`plottable` keeps only cells with one)."""
    if c.median is None:
        raise ValueError(f"{c.cell_id}: a cell without a median is not plotted")
    return c.median


def label(key: tuple, g: Sequence[CellRow], shared: bool) -> str:
    """A group's legend entry: precision, XLA, batch, variant[, campaign] (tiny)."""
    suite = key[0]
    text = f"{key[1]}{' +' + xla_name(suite) if key[2] else ''}, b{key[3]}" + (f", {key[5]}" if key[5] else "")
    if shared:
        text += f" [{key[6]}]"
    if any(c.tiny for c in g):
        text += " (tiny)"
    return text


def log_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """Axis limits and ticks of a log axis holding [lo, hi] (> 0): decades, with 2 and 5 between them over less
    than 2.5 decades and every integer multiple under 0.7 decade; the limits widen to two ticks at least."""
    span = math.log10(hi / lo)
    mant = (1,) if span > 2.5 else (1, 2, 5) if span > 0.7 else range(1, 10)
    cands = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
             for m in mant]
    pad = 10 ** (0.05 * max(span, 0.1))  # 5 % of the range each side, as matplotlib's margins
    lo, hi = lo / pad, hi * pad
    ticks = [t for t in cands if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
    if len(ticks) < 2:
        lo, hi = max(t for t in cands if t <= lo), min(t for t in cands if t >= hi)
        ticks = [t for t in cands if lo <= t <= hi]
    return lo, hi, ticks


def _is_decade(v: float) -> bool:
    """A power of ten (a log axis's main tick)."""
    return abs(math.log10(v) - round(math.log10(v))) < 1e-9


def lin_ticks(hi: float) -> list[float]:
    """Ticks from 0 to ``hi`` at a step of 1, 2, 2.5 or 5 times a power of ten (5 to 9 ticks)."""
    raw = hi / 8
    step = min(m * 10 ** math.floor(math.log10(raw)) for m in (1, 2, 2.5, 5, 10)
               if m * 10 ** math.floor(math.log10(raw)) >= raw)
    return [i * step for i in range(int(hi / step + 1e-9) + 1)]


def tick_text(v: float) -> str:
    """100, 250, 1k, 2.5k, 1M; 0.5, 0.02 below 1."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


class _Svg:
    """The document being written: a list of element strings."""

    def __init__(self) -> None:
        self.out = [f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{W}" height="{H}" '
                    f'viewBox="0 0 {W} {H}" {FONT} font-size="12">', f'<rect width="{W}" height="{H}" fill="white"/>']
        self.drawn: list[tuple[float, float]] = []  # points drawn in the current panel

    def text(self, x: float, y: float, s: str, anchor: str = "middle", size: int = 12, extra: str = "") -> None:
        self.out.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"{extra}>'
                        f'{escape(s)}</text>')

    def line(self, pts: Sequence[tuple[float, float]], color: str, width: float = 1.5, extra: str = "") -> None:
        xy = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        self.out.append(f'<polyline points="{xy}" fill="none" stroke="{color}" stroke-width="{width}"{extra}/>')
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):  # what the legend should not hide
            self.drawn += [(x0 + (x1 - x0) * k / 16, y0 + (y1 - y0) * k / 16) for k in range(17)]

    def marker(self, x: float, y: float, color: str, title: str) -> None:
        self.out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"><title>{escape(title)}</title>'
                        '</circle>')
        self.drawn.append((x, y))

    def legend(self, left: float, right: float, entries: list[tuple[str, str, bool]]) -> None:
        """Entries (text, colour, dashed: a dashed line without a marker) in a box in the panel's corner that hides
        the fewest points drawn since :meth:`axes` (upper left first, as matplotlib's "best")."""
        h = 8 + 15 * len(entries)
        w = 42 + 6.2 * max(len(t) for t, _, _ in entries)
        corners = [(x, y) for y in (TOP + 8, BOTTOM - 8 - h) for x in (left + 8, right - 8 - w)]
        x, y = min(corners, key=lambda c: sum(c[0] - 4 <= px <= c[0] + w + 4 and c[1] - 4 <= py <= c[1] + h + 4
                                             for px, py in self.drawn))
        self.out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h}" fill="white" '
                        'fill-opacity="0.8" stroke="#cccccc" rx="3"/>')
        for i, (text, color, dashed) in enumerate(entries):
            cy = y + 11 + 15 * i
            self.line([(x + 6, cy), (x + 30, cy)], color, extra=' stroke-dasharray="5,3"' if dashed else "")
            if not dashed:
                self.out.append(f'<circle cx="{x + 18:.1f}" cy="{cy:.1f}" r="3.5" fill="{color}"/>')
            self.text(x + 36, cy + 4, text, "start", 11)

    def axes(self, left: float, right: float, title: str, ylabel: str, xticks: list[tuple[float, str]],
             yticks: list[tuple[float, str]]) -> None:
        """A panel's frame, light grid, ticks and labels (positions in px)."""
        self.drawn = []
        for x, s in xticks:
            self.out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{BOTTOM}" stroke="#b0b0b0" '
                            'stroke-opacity="0.3"/>')
            self.out.append(f'<line x1="{x:.1f}" y1="{BOTTOM}" x2="{x:.1f}" y2="{BOTTOM + 4}" stroke="black"/>')
            self.text(x, BOTTOM + 17, s)
        for y, s in yticks:
            self.out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#b0b0b0" '
                            'stroke-opacity="0.3"/>')
            self.out.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="black"/>')
            self.text(left - 7, y + 4, s, "end")
        self.out.append(f'<rect x="{left}" y="{TOP}" width="{right - left}" height="{BOTTOM - TOP}" fill="none" '
                        'stroke="black" stroke-width="0.8"/>')
        self.text((left + right) / 2, TOP - 9, title, size=14)
        self.text((left + right) / 2, BOTTOM + 36, "GPUs")
        mid = (TOP + BOTTOM) / 2
        self.text(left - 52, mid, ylabel, extra=f' transform="rotate(-90 {left - 52:.1f} {mid:.1f})"')

    def done(self) -> str:
        return "\n".join(self.out + ["</svg>"]) + "\n"


def _scale(lo: float, hi: float, a: float, b: float, log: bool) -> Callable[[float], float]:
    """Data -> px, ``lo`` at ``a`` and ``hi`` at ``b``."""
    f = math.log if log else float
    k = (b - a) / (f(hi) - f(lo))
    return lambda v: a + k * (f(v) - f(lo))


def draw(gs: list[tuple[tuple, list[CellRow]]], suite: str, shared: bool) -> str:
    """The SVG document of one suite's groups (:func:`plottable`); ``shared``: the suite appears in several
    campaigns."""
    unit = gs[0][1][0].unit
    devs = sorted({c.devices for _, g in gs for c in g})
    lines = []  # (label, colour, cells, 1n1g base or None)
    for i, (key, g) in enumerate(gs):
        base = next((c for c in g if c.nodes == 1 and c.gpus_per_node == 1), None)
        lines.append((label(key, g, shared), COLORS[i % len(COLORS)], g, base))
    ys = [v for _, _, g, _ in lines for c in g for v in (c.median, c.min, c.max) if v is not None and v > 0]
    ys += [_median(b) * d for _, _, g, b in lines if b is not None for d in (1, max(c.devices for c in g))]
    ylo, yhi, yt = log_ticks(min(ys, default=1.0), max(ys, default=10.0))
    xpad = 0.05 * max(math.log2(devs[-1] / devs[0]), 1.0)
    xlo, xhi = devs[0] / 2 ** xpad, devs[-1] * 2 ** xpad
    svg = _Svg()

    (l1, r1), (l2, r2) = PANELS
    sx1, sx2 = _scale(xlo, xhi, l1, r1, True), _scale(xlo, xhi, l2, r2, True)
    sy0 = _scale(ylo, yhi, BOTTOM, TOP, True)

    def sy(v: float) -> float:  # (a median of 0 sits on the axis)
        return sy0(max(v, ylo))

    medians = [_median(c) for _, _, g, _ in lines for c in g if _median(c) > 0]
    ends = sorted({float(f"{v:.3g}") for v in (min(medians), max(medians))} if medians else set())  # labelled too
    decades = [(sy(t), tick_text(t)) for t in yt if _is_decade(t)]  # always labelled
    at: list[tuple[float, str]] = []  # the ends' labels, but where a decade's or the other end's already is
    for e in ends:
        if all(abs(sy(e) - y) > 14 for y, _ in decades + at):
            at.append((sy(e), tick_text(e)))
    kept = decades + at  # the ticks between decades give way to both
    yticks = decades + [(sy(t), tick_text(t)) for t in yt
                        if not _is_decade(t) and all(abs(sy(t) - y) > 14 for y, _ in kept)] + at
    svg.axes(l1, r1, f"{suite}: throughput", f"throughput ({unit}), median, min-max bars; ideal dashed",
             [(sx1(d), str(d)) for d in devs], yticks)
    for text, color, g, base in lines:
        if base is not None:
            xs = sorted({c.devices for c in g} | {1})
            svg.line([(sx1(d), sy(_median(base) * d)) for d in xs], color, extra=' stroke-dasharray="6,4" '
                     'stroke-opacity="0.5"')
        for c in g:
            if c.min is not None and c.max is not None and c.min > 0:
                x, lo, hi = sx1(c.devices), sy(c.min), sy(c.max)
                svg.out.append(f'<path d="M{x:.1f},{lo:.1f}V{hi:.1f}M{x - 3:.1f},{lo:.1f}h6M{x - 3:.1f},{hi:.1f}h6" '
                               f'stroke="{color}" stroke-opacity="0.5" fill="none"/>')
                svg.drawn += [(x, lo), (x, hi)]
        svg.line([(sx1(c.devices), sy(_median(c))) for c in g], color)
        for c in g:
            svg.marker(sx1(c.devices), sy(_median(c)), color, f"{text}: {c.shape}, median {fmt(c.median)} {unit} "
                       f"(min {fmt(c.min)}, max {fmt(c.max)}, {c.n_ok} OK runs)")
    svg.legend(l1, r1, [(t, c, False) for t, c, _, _ in lines])

    _efficiency_panel(svg, lines, devs, suite, sx2)
    return svg.done()


def _efficiency_panel(svg: _Svg, lines: list, devs: list[int], suite: str, sx2: Callable[[float], float]) -> None:
    """The right panel: each line's scaling efficiency against its 1n1g cell, the ideal 100 % dashed."""
    (l2, r2) = PANELS[1]
    effs = [(t, color, [(c, c.efficiency) for c in g if c.efficiency is not None]) for t, color, g, b in lines
            if b is not None]  # per line: its cells with an efficiency, each with it
    effs = [e for e in effs if e[2]]
    top = max([110.0] + [105 * eff for _, _, g in effs for _, eff in g])
    sy2 = _scale(0, top, BOTTOM, TOP, False)
    svg.axes(l2, r2, f"{suite}: scaling efficiency vs 1 GPU", "scaling efficiency (%)",
             [(sx2(d), str(d)) for d in devs], [(sy2(t), f"{t:g}") for t in lin_ticks(top)])
    svg.line([(l2, sy2(100)), (r2, sy2(100))], "black", 1, ' stroke-dasharray="5,3"')
    for text, color, pts in effs:
        svg.line([(sx2(c.devices), sy2(100 * eff)) for c, eff in pts], color)
        for c, eff in pts:
            svg.marker(sx2(c.devices), sy2(100 * eff), color,
                       f"{text}: {c.shape}, efficiency {fmt(eff, 2, percent=True)}")
    svg.legend(l2, r2, [(t, c, False) for t, c, _ in effs] + [("ideal", "black", True)])
