"""``plan``: the cells of a matrix, the cells it dropped and the GPU-hours it asks for."""

from __future__ import annotations

import argparse

from dlperf_slurm.commands.common import load_matrix


def cmd_plan(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    m = load_matrix(args)
    rows = [[c.id, c.shape, c.batch_size, c.global_batch, c.precision, int(c.xla), c.launcher,
             ", ".join(f"{k}={v}" for k, v in (*((("setup", c.setup),) if c.setup else ()), *c.params, *c.env))
             or "-", m.measure.repeats] for c in m.cells]
    print(f"campaign {m.name}: " + ("; ".join(f"suite {s.name} ({s.description})" for s in m.suites)
                                     if not m.grouped else f"{len(m.suites)} suites"))
    for s in m.suites if m.grouped else ():
        print(f"  {s.name}: {s.description}")
    if m.grouped:
        rows = [[c.suite, *row] for c, row in zip(m.cells, rows)]
    print(tabulate(rows, headers=["suite"] * m.grouped + ["cell", "shape", "batch/dev", "global", "precision", "xla",
                                                          "launcher", "variant",
                                  "repeats"], tablefmt="github"))
    print(f"\n{len(m.cells)} cells x {m.measure.repeats} repeats = {m.runs} runs; "
          f"window: skip {m.measure.warmup_steps} steps, measure {m.measure.measure_steps}")
    print(f"asks for {m.gpu_hours:.1f} GPU-hours at most (time limit {m.slurm.time} per run)")
    if m.dropped:
        print(f"\ndropped {len(m.dropped)} cells:")
        for d in m.dropped:
            print(f"  {d.cell.id}: {d.reason}")
    return 0
