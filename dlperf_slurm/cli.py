"""Command line: ``python -m dlperf_slurm {plan,render,submit,status,cancel,collect}``.

Each subcommand's work lives in its stage module, imported only when that subcommand runs, so
``--help`` and ``plan`` never import submitit, numpy or torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Callable, Sequence

from dlperf_slurm import __version__
from dlperf_slurm.errors import UserError

DEFAULT_LOGS = "logs"


def _add_matrix_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("matrix", help="benchmark matrix (TOML), e.g. matrices/bert.toml")
    p.add_argument("--site", metavar="FILE", help="site defaults for [slurm]/[environment] "
                   "(default: $DLPERF_SLURM_SITE or ~/.config/dlperf_slurm/site.toml)")
    p.add_argument("--no-site", action="store_true", help="ignore any site file")


def _load_matrix(args: argparse.Namespace):
    from dlperf_slurm import matrix

    return matrix.load(args.matrix, site=False if args.no_site else args.site)


def note_dropped(m, matrix_arg: str) -> None:
    """The cells the matrix dropped (a value its suite cannot run): ``plan`` lists them; ``render`` and ``submit``
    make the others, so one line on stderr says how many and why, and changes nothing they do."""
    if not m.dropped:
        return
    reasons = list(dict.fromkeys(d.reason for d in m.dropped))
    why = reasons[0] if len(reasons) == 1 else f"{reasons[0]}; {len(reasons) - 1} more reason{'s' * (len(reasons) > 2)}"
    print(f"dlperf-slurm: {len(m.dropped)} of {len(m.cells) + len(m.dropped)} cells dropped ({why}): "
          f"`dlperf-slurm plan {matrix_arg}` lists them", file=sys.stderr)


# ------------------------------------------------------------------------------------------------ plan


def cmd_plan(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    m = _load_matrix(args)
    rows = [[c.id, c.shape, c.batch_size, c.global_batch, c.precision, int(c.xla), c.launcher,
             ", ".join(f"{k}={v}" for k, v in (*((("setup", c.setup),) if c.setup else ()), *c.params, *c.env))
             or "-", m.measure.repeats] for c in m.cells]
    print(f"campaign {m.name}: " + ("; ".join(f"suite {s.name} ({s.description})" for s in m.suites)
                                     if not m.grouped else f"{len(m.suites)} suites"))
    for s in m.suites if m.grouped else ():
        print(f"  {s.name}: {s.description}")
    if m.grouped:
        rows = [[c.suite, *row] for c, row in zip(m.cells, rows)]
    print(tabulate(rows, headers=["suite"] * m.grouped + ["cell", "shape", "batch/dev", "global", "precision", "xla", "launcher", "variant",
                                  "repeats"], tablefmt="github"))
    print(f"\n{len(m.cells)} cells x {m.measure.repeats} repeats = {m.runs} runs; "
          f"window: skip {m.measure.warmup_steps} steps, measure {m.measure.measure_steps}")
    print(f"asks for {m.gpu_hours:.1f} GPU-hours at most (time limit {m.slurm.time} per run)")
    if m.dropped:
        print(f"\ndropped {len(m.dropped)} cells:")
        for d in m.dropped:
            print(f"  {d.cell.id}: {d.reason}")
    return 0


# ---------------------------------------------------------------------------------------------- render


def cmd_render(args: argparse.Namespace) -> int:
    from dlperf_slurm import matrix, render

    m = _load_matrix(args)
    note_dropped(m, args.matrix)
    out = (Path(args.out) if args.out else Path(args.logs) / m.name).resolve()  # as submit: sbatch from anywhere
    render.check_template_dir(args.templates)  # before any folder is made
    from dlperf_slurm.manifest import MANIFEST

    if (out / MANIFEST).exists():  # what ran stays as it ran: a submitted campaign's scripts are its record
        raise UserError(f"{out} is a submitted campaign ({MANIFEST}): its scripts are the ones that ran; render "
                        "into another folder (--out DIR)")
    _make_folder(out, m.provenance.umask)
    paths = render.write_scripts(m, matrix.runs(m, out), args.templates)
    print(f"wrote {len(paths)} scripts under {out}/ ({len(m.cells)} cells x {m.measure.repeats} repeats)")
    return 0


def _make_folder(path: Path, umask: str | None = None) -> None:
    """The campaign folder (``--out``, ``--logs``), made under the site's umask (``[provenance] umask``), or one
    line saying why it cannot be made."""
    from dlperf_slurm.files import no_more_open_than

    try:
        with no_more_open_than([path], umask):
            pass
    except OSError as err:
        raise UserError(f"{path}: cannot create the campaign folder: {err.strerror or err}") from None


# -------------------------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlperf-slurm",
        description="DLPerf-style deep-learning training benchmarks on Slurm: plan, render, submit, collect.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--logs", default=DEFAULT_LOGS, metavar="DIR", help="root of campaign folders (default: logs)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("plan", help="show the cells of a matrix, dropped cells and the GPU-hours asked")
    _add_matrix_args(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("render", help="write every run's sbatch script without submitting")
    _add_matrix_args(p)
    p.add_argument("--out", metavar="DIR", help="campaign folder to write into (default: LOGS/<campaign>)")
    p.add_argument("--templates", metavar="DIR", help="your template folder: overrides built-in templates by name")
    p.set_defaults(func=cmd_render)

    _lifecycle_commands(sub)
    _collect_commands(sub)
    _compare_command(sub)
    p = sub.add_parser("suites", help="list every suite: program, launchers, precisions, XLA, axes, options, "
                       "throughput flavour, example matrix")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=_lazy("dlperf_slurm.catalog", "cmd_suites"))
    return parser


# ------------------------------------------------------------------- submit / status / cancel / collect
# The work lives in the stage modules (submit.py, monitor.py, tracking.py, manifest.py, schedulers/, collect.py,
# report.py), imported inside the handlers, so --help imports none of them, nor submitit, numpy or tabulate.


def cmd_submit(args: argparse.Namespace) -> int:
    import re

    from dlperf_slurm import matrix as matrix_mod
    from dlperf_slurm import monitor, schedulers
    from dlperf_slurm.manifest import MANIFEST, Manifest
    from dlperf_slurm.model import FAILURES
    from dlperf_slurm.submit import plural, submit

    m = matrix_mod.load(args.matrix, site=False if args.no_site else args.site)
    note_dropped(m, args.matrix)
    if args.campaign:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", args.campaign):
            raise UserError(f"--campaign {args.campaign!r}: use letters, digits, '_', '.', '-'")
        m.name = args.campaign
    cdir = (Path(args.logs) / m.name).resolve()
    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    backend = schedulers.choose(args.executor, cdir, jobs=args.jobs)
    if args.executor == "auto" and backend.auto_note() and not args.dry_run:
        print(f"dlperf-slurm: {backend.auto_note()}", file=sys.stderr)
    top = None
    if args.top_up:
        from dlperf_slurm.topup import TopUp

        from dlperf_slurm.axes import MAX_REPEATS

        if not 0 < args.ci_target < 1 or not 2 <= args.max_repeats <= MAX_REPEATS:
            raise UserError(f"--ci-target must be between 0 and 1 and --max-repeats between 2 and "
                            f"{MAX_REPEATS:,} (a matrix's bound on repeats)")
        top = TopUp(args.ci_target, args.max_repeats)
    if not args.dry_run:
        from dlperf_slurm.render import check_template_dir

        check_template_dir(args.templates)  # before the campaign folder is made
        _make_folder(cdir, m.provenance.umask)
    report = submit(m, cdir, backend, retry_failed=args.retry_failed, force=args.force, dry_run=args.dry_run,
                    template_dir=args.templates, top_up=top)
    if args.dry_run:
        return 0
    print(f"submitted {report.submitted} runs with {plural(report.calls, backend.call_word)}; "
          f"manifest: {cdir / MANIFEST}")
    if not args.wait:
        return 0
    man = Manifest(cdir)
    try:
        final = monitor.wait(man, schedulers.for_campaign(cdir, monitor.used_schedulers(man), default=backend))
        print(monitor.status_report(man, show_runs=False, notes=backend.notes()))
    finally:
        man.close()
    return 0 if not sum(v for k, v in final.items() if k in FAILURES) else 1


def cmd_status(args: argparse.Namespace) -> int:
    from dlperf_slurm import monitor, schedulers
    from dlperf_slurm.manifest import Manifest, find_campaign

    cdir = find_campaign(args.logs, args.campaign)
    m = Manifest(cdir)
    try:
        used = monitor.used_schedulers(m)
        exs = schedulers.for_campaign(cdir, used)
        if not args.no_refresh:
            monitor.refresh(m, exs)
        notes = []
        for name in sorted(used):
            notes += exs[name].notes() if name in exs else [
                f"{name}: no client on this machine; statuses from the manifest and exit markers"]
        print(monitor.status_report(m, show_runs=not args.cells, notes=notes))
    finally:
        m.close()
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from dlperf_slurm import monitor
    from dlperf_slurm.manifest import campaigns, find_campaign

    if not args.campaign:  # cancelling is not undone: "the latest campaign" must be the only one
        names = [c.name for c in campaigns(args.logs)]
        if len(names) > 1:
            raise UserError(f"cancel which campaign? {args.logs}/ holds {len(names)}: {', '.join(names)}; "
                            "name one (dlperf-slurm cancel NAME)")
    monitor.cancel(find_campaign(args.logs, args.campaign), pending_only=args.pending)
    return 0


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)

    return run


def _lifecycle_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="submit a campaign (only what is missing), to Slurm or locally")
    _add_matrix_args(p)
    p.add_argument("--campaign", metavar="NAME", help="campaign name (default: the matrix's name); folder LOGS/NAME")
    p.add_argument("--executor", default="auto", metavar="{auto,slurm,local}",
                   help="auto (default): Slurm when sbatch is on PATH, else this machine")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="local executor: runs at a time (default 1)")
    p.add_argument("--dry-run", action="store_true", help="print what would be submitted; change nothing")
    p.add_argument("--wait", action="store_true", help="show progress and return when every run has ended")
    p.add_argument("--retry-failed", action="store_true", help="also resubmit runs that failed")
    p.add_argument("--force", action="store_true", help="resubmit every finished run, OK ones included "
                   "(never a pending or running one)")
    p.add_argument("--top-up", action="store_true", help="more repeats for the cells whose median's 95%% "
                   "interval is wider than --ci-target of the median (or whose CV is above 5%%), up to --max-repeats")
    p.add_argument("--ci-target", type=float, default=0.05, metavar="FRACTION",
                   help="with --top-up: the widest interval accepted, relative to the median (default 0.05)")
    p.add_argument("--max-repeats", type=int, default=21, metavar="N",
                   help="with --top-up: never more repeats per cell than this (default 21)")
    p.add_argument("--templates", metavar="DIR", help="your template folder: overrides built-in templates by name")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("search", help="per cell, the largest value of one axis that runs without OOM (doubling, "
                       "then bisection; one short probe run each, resumable), then that value with the normal repeats")
    _add_matrix_args(p)
    p.add_argument("--axis", default="batch_size", help="the axis searched: batch_size (default) or a suite axis "
                   "with integer values (num_classes, deep_vocab_size, seq_length, ...)")
    p.add_argument("--start", type=int, default=16, metavar="N", help="the first value probed (default 16)")
    p.add_argument("--limit", type=int, default=4096, metavar="N", help="never probe above this (default 4096)")
    p.add_argument("--step", type=int, default=1, metavar="N", help="the bisection stops at this gap (default 1)")
    p.add_argument("--probe-steps", default="2,3", metavar="W,M", help="warm-up and measured steps of a probe")
    p.add_argument("--executor", default="auto", metavar="{auto,slurm,local}")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="local executor: runs at a time")
    p.add_argument("--templates", metavar="DIR", help="your template folder")
    p.add_argument("--no-run", action="store_true", help="search only; do not submit the found values' repeats")
    p.add_argument("--wait", action="store_true", help="wait for the found values' repeats to end")
    p.set_defaults(func=_lazy("dlperf_slurm.search", "cmd_search"))

    p = sub.add_parser("status", help="per cell and per run: PENDING/RUNNING/OK/FAILED and failure classes")
    p.add_argument("campaign", nargs="?", help="campaign name or folder (default: the latest under LOGS)")
    p.add_argument("--cells", action="store_true", help="per cell only")
    p.add_argument("--no-refresh", action="store_true", help="show the manifest as it is; ask no scheduler")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("cancel", help="cancel the campaign's queued and running runs")
    p.add_argument("campaign", nargs="?", help="campaign name or folder (default: the only one under LOGS; with "
                   "several, naming it is required)")
    p.add_argument("--pending", action="store_true", help="only runs that have not started")
    p.set_defaults(func=cmd_cancel)


def _collect_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="parse every run's log into statistics, tables, CSV/JSON and plots "
                       "(summaries/<campaign>.*); runs again at any time, also while jobs run")
    p.add_argument("campaign", nargs="*", help="campaign names (under --logs) or folders (default: the latest); "
                   "several give one summary with a cross-suite table")
    p.add_argument("--matrix", metavar="FILE", help="take the runs from this matrix (campaign folder: the first "
                   "CAMPAIGN, else LOGS/<matrix name>); statuses from the manifest when there is one")
    p.add_argument("--site", metavar="FILE", help="site file for --matrix")
    p.add_argument("--no-site", action="store_true", help="ignore any site file (--matrix)")
    p.add_argument("--from", dest="from_dir", metavar="DIR", help="import logs laid out as DLPerf did: "
                   "DIR/<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log, no manifest needed")
    p.add_argument("--suite", metavar="NAME", help="with --from: the suite whose log format the files are in")
    p.add_argument("--warmup-steps", type=int, metavar="N",
                   help="with --from: steps to skip (default: the window DLPerf's extractor used for the suite's "
                   "logs where the suite knows it, e.g. 100 for tf2/resnet50; else 20. DLPerf's NGC PyTorch: 25)")
    p.add_argument("--measure-steps", type=int, metavar="N",
                   help="with --from: steps to time (default: as --warmup-steps, e.g. 500 for tf2/resnet50; else 100)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="with --from: a suite option the logs "
                   "were made with, e.g. batches_per_iter=10 (horovod-synthetic); repeatable")
    p.add_argument("--name", metavar="NAME", help="summary name (default: the campaign's)")
    p.add_argument("--out", default="summaries", metavar="DIR", help="where summaries go (default: summaries)")
    p.add_argument("--jobs", "-j", type=int, metavar="N", help="parallel parser processes (default: CPUs)")
    p.add_argument("--no-plots", action="store_true", help="skip the SVG plots")
    p.add_argument("--no-refresh", action="store_true", help="do not ask the scheduler for fresh states first")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the summary line, not the tables")
    p.add_argument("--no-cache", action="store_true", help="read every log again (collect remembers the logs it "
                   "read, in the manifest or beside the summaries, and reads only new or changed ones) and write "
                   "every summary")
    p.add_argument("--watch", nargs="?", type=float, const=0.0, default=None, metavar="SECONDS",
                   help="collect again every SECONDS (default 30) as runs end, updating the summaries and one "
                   "progress line, until no run is pending or running (Ctrl-C stops it)")
    p.set_defaults(func=_lazy("dlperf_slurm.collectcli", "cmd_collect"))



def _compare_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare two campaigns cell by cell (ratio of medians with a confidence "
                       "interval, noise-aware verdict); exits 1 when a cell regressed")
    p.add_argument("base", help="the reference: a campaign name (under --logs) or folder, summaries/<name>.json, "
                   "or ref:SET, a published reference set shipped with the tool (ref:dlperf-v100, ref:ngc-a100; "
                   "see the references command)")
    p.add_argument("new", help="the campaign to judge (a campaign or summaries/<name>.json)")
    p.add_argument("--threshold", type=float, default=None, metavar="F",
                   help="a slower cell regressed when new/base < 1 - F (default 0.05); against ref:SET there is "
                   "no gate unless this is given (exit 1 when a matched cell is below 1 - F of its published figure "
                   "or has no OK run)")
    p.add_argument("--out", default="summaries", metavar="DIR", help="where compare.<base>.<new>.md/.json go")
    p.set_defaults(func=_lazy("dlperf_slurm.compare", "cmd_compare"))
    p = sub.add_parser("references", help="the published reference sets shipped with the tool: their conditions, "
                       "sources and figures")
    p.add_argument("name", nargs="?", help="one set (e.g. dlperf-v100): every table and figure")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=_lazy("dlperf_slurm.refcompare", "cmd_references"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"dlperf-slurm: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dlperf-slurm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``dlperf-slurm status | head``): stop as cat would, without a traceback, and
        # point stdout at /dev/null so that the interpreter's final flush does not fail again.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE
    except OSError as err:
        if err.filename is None:
            raise
        # a path the user named (or one below it) cannot be made, read or written: one line, no traceback
        where = f"{err.filename} -> {err.filename2}" if err.filename2 else str(err.filename)
        print(f"dlperf-slurm: error: {where}: {err.strerror or err}", file=sys.stderr)
        return 1
