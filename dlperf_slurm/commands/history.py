"""``history``: each cell's median over the campaigns of the results store, judged by compare's rule, with what
changed between them (:mod:`dlperf_slurm.store.history`)."""

from __future__ import annotations

import sys

from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix.select import View, from_args
from dlperf_slurm.store.history import as_metric, judge, parse_since, series, text


def cmd_history(args) -> int:
    from dlperf_slurm.store import database

    if not 0 <= args.threshold < 1:
        raise UserError(f"--threshold {args.threshold}: expected a fraction in [0, 1), e.g. 0.05")
    since = parse_since(args.since)
    system, partition = database.split_system(args.system)
    url = database.url_for(args)
    with database.Store(url) as st:
        cells = st.cells(system=system or None, partition=partition or None, since=since)
    if not cells:
        what = " ".join(x for x in (f"on {args.system}" if args.system else "",
                                    f"since {since}" if since else "") if x)
        print(f"dlperf-slurm: no stored cell {what or 'at all'} in {database.describe(url)} (collect adds them)",
              file=sys.stderr)
        return 1
    if args.pattern:  # the positional EXPR is one more -k (both given: the cells both select)
        args.keep = [args.pattern, *(args.keep or [])]
    chosen = from_args(args)
    if chosen:
        views = {c.cell_id: View.of(c.cell_id, c.suite) for c in cells}
        keep = {v.id for v in chosen.choose(list(views.values()), lambda v: v,
                                            f"stored in {database.describe(url)}")}
        cells = [c for c in cells if c.cell_id in keep]
    steps = {key: judge(s, args.threshold) for key, s in series(as_metric(cells, args.metric)).items()}
    print(text(steps, wide=args.wide))
    return 0
