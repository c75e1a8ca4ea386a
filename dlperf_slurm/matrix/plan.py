"""``plan``'s text: a matrix's suites, one row per cell, the runs and GPU-hours it asks for and the cells it
dropped, fitting a terminal (:mod:`dlperf_slurm.termtext`) unless ``--wide``.

A plan longer than a screen (:func:`~dlperf_slurm.termtext.terminal_height`) is summarised: the cells counted per
axis value (and suite), the GPU-hours per suite, the first :data:`CELLS_SHOWN` cells and one line saying ``--wide``
prints the whole table (``--out FILE`` writes it)."""

from __future__ import annotations

from collections import Counter
from typing import Callable

from dlperf_slurm.matrix.gpuhours import gpu_hours
from dlperf_slurm.termtext import TERMINAL_WIDTH, fit_table, left_out_line, terminal_height
from dlperf_slurm.words import plural

#: the cells (and dropped cells) a summarised plan shows
CELLS_SHOWN = 5
#: the values of one axis a summarised plan counts one by one (the rest counted together)
VALUES_SHOWN = 8


def plan_text(m, wide: bool = False, height: int | None = None) -> str:
    """``plan``'s output: the suites, one row per cell, the runs and GPU-hours asked, the cells dropped; fitting
    :data:`TERMINAL_WIDTH` columns unless ``wide`` (what the cell id says is left out first, then the variant cut,
    long lines wrapped). Unless ``wide``, a plan longer than ``height`` lines (default: the terminal's) is
    summarised (the module docstring)."""
    import textwrap

    def wrap(line: str, indent: str = "") -> list[str]:
        if wide or len(line) <= TERMINAL_WIDTH:
            return [line]
        return textwrap.wrap(line, TERMINAL_WIDTH, subsequent_indent=indent + "  ", break_long_words=False,
                             break_on_hyphens=False)

    head, tail = _head(m, wrap), _tail(m, wrap)
    height = height or terminal_height()
    # at least one line a cell and a dropped cell, and the table's header and rule: a plan surely longer than the
    # screen is summarised without rendering the whole table (10^5 cells: seconds of tabulate)
    if wide or len(head) + len(tail) + len(m.cells) + len(m.dropped) + 2 < height:
        whole = [*head, *_table(m, m.cells, wide), *tail, *_dropped(m, m.dropped, wrap)]
        if wide or len("\n".join(whole).splitlines()) < height:
            return "\n".join(whole)
    more = len(m.cells) - CELLS_SHOWN
    out = [*head, *_summary(m, wrap), "", *_table(m, m.cells[:CELLS_SHOWN], wide)]
    if more > 0:
        out.append(f"... {plural(more, 'more cell', grouped=True)}: --wide for the whole table, or --out FILE")
    out += tail + _dropped(m, m.dropped[:CELLS_SHOWN], wrap)
    if len(m.dropped) > CELLS_SHOWN:
        out.append(f"  ... {plural(len(m.dropped) - CELLS_SHOWN, 'more dropped cell', grouped=True)}: --wide, or "
                   "--out FILE")
    return "\n".join(out)


def _head(m, wrap: Callable[..., list[str]]) -> list[str]:
    """The campaign and its suites, the system, the node's GPUs, what the site overrides."""
    out = wrap(f"campaign {m.name}: " + ("; ".join(f"suite {s.name} ({s.description})" for s in m.suites)
                                         if not m.grouped else plural(len(m.suites), 'suite')))
    for s in m.suites if m.grouped else ():
        out += wrap(f"  {s.name}: {s.description}", "  ")
    if m.system is not None:
        out += wrap(m.system.describe())
    if m.node_gpus:
        out += wrap(m.node_gpus)
    for line in m.overridden:
        out += wrap(f"  {line}", "  ")
    return out


def _variant(c) -> str:
    return ", ".join(f"{k}={v}" for k, v in (*((("setup", c.setup),) if c.setup else ()), *c.params, *c.env)) or "-"


def _table(m, cells, wide: bool) -> list[str]:
    """One row a cell (and the line naming the columns left out to fit)."""
    rows = [[*([c.suite] if m.grouped else []), c.id, c.shape, c.batch_size, c.global_batch, c.precision,
             int(c.xla), c.launcher, _variant(c), m.measure.repeats] for c in cells]
    text, dropped = fit_table(["suite"] * m.grouped + ["cell", "shape", "batch/dev", "global", "precision", "xla",
                                                       "launcher", "variant", "repeats"], rows, wide=wide,
                              drop=("global", "xla", "precision", "batch/dev", "shape", "suite", "variant"),
                              tablefmt="github")
    return [text, left_out_line(dropped, "the cell id")] if dropped else [text]


def _summary(m, wrap: Callable[..., list[str]]) -> list[str]:
    """The cells per axis value (an axis with one value: said once), the GPU-hours per suite when there are several."""
    axes = {"suite": [c.suite for c in m.cells], "shape": [c.shape for c in m.cells],
            "batch/dev": [c.batch_size for c in m.cells], "precision": [c.precision for c in m.cells],
            "xla": [int(c.xla) for c in m.cells], "launcher": [c.launcher for c in m.cells],
            "variant": [_variant(c) for c in m.cells]}
    out = [f"{plural(len(m.cells), 'cell', grouped=True)}; cells per value:"]
    same = []
    for name, values in axes.items():
        count = Counter(values)
        if len(count) == 1:
            same.append(f"{name} {values[0]}")
            continue
        said = [f"{v} {n:,}" for v, n in list(count.items())[:VALUES_SHOWN]]
        rest = len(count) - VALUES_SHOWN
        out += wrap(f"  {name}: " + ", ".join(said) + (f", ... ({plural(rest, 'more value', grouped=True)})"
                                                       if rest > 0 else ""), "  ")
    if same:
        out += wrap("  every cell: " + ", ".join(same), "  ")
    if len(m.suites) > 1:
        hours = {s.name: gpu_hours(m, [c for c in m.cells if c.suite == s.name] * m.measure.repeats).hours
                 for s in m.suites}
        out += wrap("GPU-hours per suite: " + ", ".join(f"{s} {h:,.1f}" for s, h in hours.items()))
    return out


def _tail(m, wrap: Callable[..., list[str]]) -> list[str]:
    """The runs asked, the window or accuracy runs, the GPU-hours."""
    ms = m.measure
    how = ("accuracy runs" if ms.accuracy else f"window: skip {plural(ms.warmup_steps, 'step')}, measure "
                                               f"{ms.measure_steps}")
    out = ["", f"{plural(len(m.cells), 'cell', grouped=True)} x {plural(ms.repeats, 'repeat')} = "
           f"{plural(m.runs, 'run', grouped=True)}; {how}"]
    if ms.accuracy:
        out.append(f"up to {plural(ms.epochs, 'epoch')}; rate over the first epoch after "
                   f"{plural(ms.warmup_steps, 'step')}")
        if ms.target:
            out.append(f"target {ms.target.text()}: a program stops there if it can, else collect reads when it was "
                       "reached")
    hours = gpu_hours(m, m.cells * ms.repeats)
    return out + wrap(f"asks for {hours.text()} (time limit {m.slurm.time} per run"
                      + (f"; {hours.basis()})" if hours.basis() else ")"))


def _dropped(m, dropped, wrap: Callable[..., list[str]]) -> list[str]:
    if not m.dropped:
        return []
    out = ["", f"dropped {plural(len(m.dropped), 'cell')}:"]
    for d in dropped:
        out += wrap(f"  {d.cell.id}: {d.reason}", "  ")
    return out
