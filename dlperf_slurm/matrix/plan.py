"""``plan``'s text: a matrix's suites, one row per cell, the runs and GPU-hours it asks for and the cells it
dropped, fitting a terminal (:mod:`dlperf_slurm.termtext`) unless ``--wide``."""

from __future__ import annotations

from dlperf_slurm.matrix.gpuhours import gpu_hours
from dlperf_slurm.termtext import TERMINAL_WIDTH, fit_table, left_out_line
from dlperf_slurm.words import plural


def plan_text(m, wide: bool = False) -> str:
    """``plan``'s output: the suites, one row per cell, the runs and GPU-hours asked, the cells dropped; fitting
    :data:`TERMINAL_WIDTH` columns unless ``wide`` (what the cell id says is left out first, then the variant cut,
    long lines wrapped)."""
    import textwrap

    def wrap(line: str, indent: str = "") -> list[str]:
        if wide or len(line) <= TERMINAL_WIDTH:
            return [line]
        return textwrap.wrap(line, TERMINAL_WIDTH, subsequent_indent=indent + "  ", break_long_words=False,
                             break_on_hyphens=False)

    rows = [[c.id, c.shape, c.batch_size, c.global_batch, c.precision, int(c.xla), c.launcher,
             ", ".join(f"{k}={v}" for k, v in (*((("setup", c.setup),) if c.setup else ()), *c.params, *c.env))
             or "-", m.measure.repeats] for c in m.cells]
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
    if m.grouped:
        rows = [[c.suite, *row] for c, row in zip(m.cells, rows, strict=True)]
    text, dropped = fit_table(["suite"] * m.grouped + ["cell", "shape", "batch/dev", "global", "precision", "xla",
                                                       "launcher", "variant", "repeats"], rows, wide=wide,
                              drop=("global", "xla", "precision", "batch/dev", "shape", "suite", "variant"),
                              tablefmt="github")
    out.append(text)
    if dropped:
        out.append(left_out_line(dropped, "the cell id"))
    ms = m.measure
    how = ("accuracy runs" if ms.accuracy else f"window: skip {plural(ms.warmup_steps, 'step')}, measure "
                                               f"{ms.measure_steps}")
    out += ["", f"{plural(len(m.cells), 'cell')} x {plural(ms.repeats, 'repeat')} = {plural(m.runs, 'run')}; {how}"]
    if ms.accuracy:
        out.append(f"up to {plural(ms.epochs, 'epoch')}; rate over the first epoch after "
                   f"{plural(ms.warmup_steps, 'step')}")
        if ms.target:
            out.append(f"target {ms.target.text()}: a program stops there if it can, else collect reads when it was "
                       "reached")
    hours = gpu_hours(m, m.cells * ms.repeats)
    out += wrap(f"asks for {hours.text()} (time limit {m.slurm.time} per run"
                + (f"; {hours.basis()})" if hours.basis() else ")"))
    if m.dropped:
        out += ["", f"dropped {plural(len(m.dropped), 'cell')}:"]
        for d in m.dropped:
            out += wrap(f"  {d.cell.id}: {d.reason}", "  ")
    return "\n".join(out)
