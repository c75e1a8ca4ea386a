"""Command line: ``python -m dlperf_slurm {plan,render,submit,search,status,cancel,collect,compare,history,references,
suites}``.

This module is the parser and :func:`main` alone. Each command's handler is a module of
:mod:`dlperf_slurm.commands` (``commands/<name>.py``, ``cmd_<name>``), named here by string and imported only
when that command runs, so ``--help`` imports no stage module, nor submitit, numpy, tabulate or torch. No stage
module imports this module or the commands (tests/test_structure.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

from dlperf_slurm import __version__
from dlperf_slurm.errors import UserError


def _global_options(p: argparse.ArgumentParser, top: bool = False) -> None:
    """The options every command takes, before or after its name (``--logs D status`` and ``status --logs D``):
    after it, they are left unset unless given (SUPPRESS), so a value given before it stands."""
    kw: dict = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("--logs", metavar="DIR", help="root of campaign folders (default: $DLPERF_SLURM_LOGS, else the "
                   "site file's [paths] logs, else logs/ here)", **kw)
    p.add_argument("--site", metavar="FILE", help="your site file, over the system-wide one (default: "
                   "$DLPERF_SLURM_SITE or ~/.config/dlperf_slurm/site.toml; system-wide: $DLPERF_SLURM_SYSTEM_SITE or "
                   "/etc/dlperf_slurm/site.toml; `site show` says what was read)", **kw)
    p.add_argument("--no-site", action="store_true", help="read no site file, neither yours nor the system-wide",
                   **kw)
    p.add_argument("--system", metavar="NAME[:PARTITION]", help="a named system (and partition) of the site file "
                   "([systems.NAME], [systems.NAME.partitions.P]): its [slurm], [environment], [health] over the "
                   "site's; the system the results store files a collect under and history reads (default: the "
                   "site file's default_system; collect: the one the campaign was submitted for)", **kw)


def _select_options(p: argparse.ArgumentParser) -> None:
    """``-k`` and ``--exclude-cells``: one meaning in every command (:mod:`dlperf_slurm.matrix.select`)."""
    p.add_argument("-k", dest="keep", action="append", metavar="EXPR", help="only the cells EXPR selects: words "
                   "(whole parts of the cell id or the id whole, its suite or shape, or globs: resnet50, 1x8, amp, "
                   "'*b96*'), AXIS=VALUE comparisons (nodes>=2, precision=amp, batch_size<=64), joined by and, or, "
                   "not, ( ), e.g. -k '1x8 and amp'; given twice, both hold")
    p.add_argument("--exclude-cells", action="append", metavar="EXPR", help="leave out the cells EXPR selects (as "
                   "-k); given twice, either leaves a cell out")


def _add_matrix_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("matrix", help="benchmark matrix (TOML), e.g. matrices/bert.toml")
    _select_options(p)


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="URL", help="the results store: postgresql://user@host/db or an SQLite "
                   "file (default: $DLPERF_SLURM_STORE, the site file's [store] url, else "
                   "$XDG_DATA_HOME/dlperf_slurm/results.sqlite)")


# -------------------------------------------------------------------------------------------- parser


class _Commands:
    """The subcommands' action, each command made with the global options too (:func:`_global_options`)."""

    def __init__(self, actions: argparse._SubParsersAction):
        self.actions = actions

    def add_parser(self, name: str, **kw) -> argparse.ArgumentParser:
        p = self.actions.add_parser(name, **kw)
        _global_options(p)
        return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlperf-slurm",
        description="DLPerf-style deep-learning training benchmarks on Slurm: plan, render, submit, collect.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _global_options(parser, top=True)
    sub = _Commands(parser.add_subparsers(dest="command", metavar="COMMAND"))
    sub.actions.required = True

    p = sub.add_parser("plan", help="show the cells of a matrix, dropped cells and the GPU-hours asked")
    _add_matrix_args(p)
    p.add_argument("--wide", action="store_true", help="every column, however wide (default: fit 100 columns)")
    p.add_argument("--out", metavar="FILE", help="also write the whole plan, every cell and column, to FILE (a plan "
                   "longer than the terminal's height, 24 lines when not a terminal, is summarised unless --wide)")
    p.set_defaults(func=_lazy("plan"))

    p = sub.add_parser("render", help="write every run's sbatch script without submitting")
    _add_matrix_args(p)
    p.add_argument("--out", metavar="DIR", help="campaign folder to write into (default: LOGS/<campaign>)")
    p.add_argument("--templates", metavar="DIR", help="your template folder: overrides built-in templates by name")
    p.set_defaults(func=_lazy("render"))

    _lifecycle_commands(sub)
    _collect_commands(sub)
    _compare_command(sub)
    p = sub.add_parser("site", help="the site files: `site show` says which were read and where each key comes "
                       "from; `site init` writes yours from the cluster this machine submits to")
    site_sub = _Commands(p.add_subparsers(dest="site_command", metavar="ACTION"))
    site_sub.actions.required = True
    q = site_sub.add_parser("show", help="the site files read (system-wide, then yours), every key with the file "
                            "and line it comes from, and the folders and results store the commands use")
    q.set_defaults(func=_lazy("site", "show"))
    q = site_sub.add_parser("init", help="read the cluster (sinfo, scontrol show config, sacctmgr) and write a "
                            "commented site file: partitions, GPUs a node, MaxTime, your account and QOS")
    q.add_argument("--out", metavar="FILE", help="where to write it (default: $DLPERF_SLURM_SITE or "
                   "~/.config/dlperf_slurm/site.toml)")
    q.add_argument("--force", action="store_true", help="overwrite an existing site file")
    q.set_defaults(func=_lazy("site", "init"))
    p = sub.add_parser("suites", help="list every suite: program, launchers, precisions, XLA, axes, options, "
                       "throughput flavour, example matrix")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=_lazy("suites"))
    return parser


def _lazy(command: str, action: str = "") -> Callable[[argparse.Namespace], int]:
    """The handler ``cmd_<command>`` (``cmd_<command>_<action>``) of ``dlperf_slurm.commands.<command>``, imported
    when the command runs, after the folders it uses are settled (:func:`dlperf_slurm.commands.common.settle`)."""

    def run(args: argparse.Namespace) -> int:
        importlib.import_module("dlperf_slurm.commands.common").settle(args)
        handler = f"cmd_{command}_{action}" if action else f"cmd_{command}"
        return getattr(importlib.import_module(f"dlperf_slurm.commands.{command}"), handler)(args)

    return run


def _lifecycle_commands(sub: "_Commands") -> None:
    _submit_command(sub)
    _search_command(sub)
    _campaign_commands(sub)


def _submit_command(sub: "_Commands") -> None:
    p = sub.add_parser("submit", help="submit a campaign (only what is missing), to Slurm or locally")
    _add_matrix_args(p)
    p.add_argument("--campaign", metavar="NAME", help="campaign name (default: the matrix's name); folder LOGS/NAME")
    p.add_argument("--executor", default="auto", metavar="{auto,slurm,local}",
                   help="auto (default): Slurm when sbatch is on PATH, else this machine for a campaign that asks "
                   "for no GPU or is marked tiny/CPU (local: this machine, whatever it asks for)")
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
    p.add_argument("--yes", action="store_true", help="submit a campaign above the site's size (default: more "
                   "than 1000 runs or 5000 GPU-hours asks for --yes; the site file's [submit] confirm_above_runs, "
                   "confirm_above_gpu_hours)")
    p.add_argument("--new-revision", action="store_true", help="a matrix changed under a campaign name already "
                   "used: submit it as the campaign's next revision, NAME.r2, NAME.r3, ... (the latest revision "
                   "when it holds this matrix)")
    p.set_defaults(func=_lazy("submit"))


def _search_command(sub: "_Commands") -> None:
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
    p.add_argument("--wide", action="store_true", help="the results table uncut (default: it fits 100 columns; "
                   "LOGS/NAME.search/search.json has it all)")
    p.set_defaults(func=_lazy("search"))


def _campaign_commands(sub: "_Commands") -> None:
    """The commands on a submitted campaign: status, cancel, doctor."""
    p = sub.add_parser("status", help="per cell and per run: PENDING/RUNNING/OK/FAILED and failure classes")
    p.add_argument("campaign", nargs="?", help="campaign name or folder (default: the latest under LOGS)")
    _select_options(p)
    p.add_argument("--cells", action="store_true", help="every cell, however many, and no run")
    p.add_argument("--runs", action="store_true", help="every run, however many (default: every run when the "
                   "report fits the terminal's height, 24 lines when not a terminal; else every cell and the failed "
                   "runs, the first 20; past a screenful of cells, the cells with a failure, the first 20)")
    p.add_argument("--no-refresh", action="store_true", help="show the manifest as it is; ask no scheduler")
    p.add_argument("--wide", action="store_true", help="reasons uncut (default: the tables fit 100 columns)")
    p.add_argument("--fail-on", metavar="STATUS,...", help="exit 1 when any run has one of these statuses "
                   "(e.g. OOM,TIMEOUT; any: every failure status); without it, exit 1 only when every run failed")
    p.set_defaults(func=_lazy("status"))

    p = sub.add_parser("cancel", help="cancel the campaign's queued and running runs")
    p.add_argument("campaign", nargs="?", help="campaign name or folder (default: the only one under LOGS; with "
                   "several, naming it is required)")
    _select_options(p)
    p.add_argument("--pending", action="store_true", help="only runs that have not started")
    p.set_defaults(func=_lazy("cancel"))

    p = sub.add_parser("doctor", help="rebuild a damaged or deleted manifest from the campaign's matrix copy, "
                       "scripts, logs, exit markers and the scheduler")
    p.add_argument("campaign", help="campaign name (under LOGS) or folder; --site: the site file it was submitted "
                   "with (--no-site: with none)")
    p.set_defaults(func=_lazy("doctor"))


def _collect_commands(sub: "_Commands") -> None:
    p = sub.add_parser("collect", help="parse every run's log into statistics, tables, CSV/JSON and plots "
                       "(summaries/<campaign>.*); runs again at any time, also while jobs run")
    p.add_argument("campaign", nargs="*", help="campaign names (under --logs) or folders (default: the latest); "
                   "several give one summary with a cross-suite table")
    _select_options(p)
    p.add_argument("--matrix", metavar="FILE", help="take the runs from this matrix (campaign folder: the first "
                   "CAMPAIGN, else LOGS/<matrix name>); statuses from the manifest when there is one")
    p.add_argument("--from", dest="from_dir", metavar="DIR", help="import logs laid out as DLPerf did: "
                   "DIR/<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log, no manifest needed")
    p.add_argument("--explain", metavar="RUN", help="print where one run's figures and status come from (the "
                   "first and last timed step lines with their numbers, the window, each figure's formula, the "
                   "decision table's row) instead of collecting: a run key as the summaries' run column names it, "
                   "or with --from DIR a log's path")
    p.add_argument("--suite", metavar="NAME", help="with --from: the suite whose log format the files are in; "
                   "auto (the default): the suite whose parser reads most of a sample of the logs (a named suite "
                   "that reads none of them is refused, naming those that do)")
    p.add_argument("--warmup-steps", type=int, metavar="N",
                   help="with --from: steps to skip (default: the window DLPerf's extractor used for the suite's "
                   "logs where the suite knows it, e.g. 100 for tf2/resnet50; else 20. DLPerf's NGC PyTorch: 25)")
    p.add_argument("--measure-steps", type=int, metavar="N",
                   help="with --from: steps to time (default: as --warmup-steps, e.g. 500 for tf2/resnet50; else 100)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="with --from: a suite option the logs "
                   "were made with, e.g. batches_per_iter=10 (horovod-synthetic); repeatable")
    p.add_argument("--target", metavar="METRIC:VALUE", help="with --from: the logs are accuracy runs; each is "
                   "NOT_CONVERGED unless an evaluation its program printed reaches VALUE (a fraction), e.g. top1:0.75; "
                   "METRIC: top1, top5, auc (W&D), lfw (InsightFace)")
    p.add_argument("--name", metavar="NAME", help="summary name (default: the campaign's)")
    p.add_argument("--out", metavar="DIR", help="where summaries go (default: $DLPERF_SLURM_SUMMARIES, else the "
                   "site file's [paths] summaries, else summaries/ here)")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="parallel parser processes (default: as many as the work pays for, up to the free CPUs; "
                   "1: the summaries' JSON too is written in this process, not beside the others)")
    p.add_argument("--no-plots", action="store_true", help="skip the SVG plots")
    p.add_argument("--no-refresh", action="store_true", help="do not ask the scheduler for fresh states first")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the summary line, not the tables")
    p.add_argument("--wide", action="store_true", help="print every column (the tables fit 100 columns by "
                   "default; the files always have every column)")
    p.add_argument("--no-cache", action="store_true", help="read every log again (collect remembers the logs it "
                   "read, in the manifest or beside the summaries, and reads only new or changed ones) and write "
                   "every summary")
    p.add_argument("--watch", nargs="?", type=float, const=0.0, default=None, metavar="SECONDS",
                   help="collect again every SECONDS (default 30) as runs end, updating the summaries and one "
                   "progress line, until no run is pending or running (Ctrl-C stops it)")
    _store_args(p)
    p.add_argument("--no-store", action="store_true", help="do not add the cells to the results store")
    p.add_argument("--fail-on", metavar="STATUS,...", help="exit 1 when any run has one of these statuses "
                   "(e.g. OOM,TIMEOUT; any: every failure status); without it, exit 1 only when every run failed")
    p.set_defaults(func=_lazy("collect"))


def _metric_option(p) -> None:
    p.add_argument("--metric", choices=("throughput", "energy"), default="throughput",
                   help="what is judged: throughput (default), or energy: samples (tokens) per joule of the runs "
                   "whose GPUs' energy was measured, by the same rule (a cell regresses when it does less work per "
                   "joule)")


def _compare_command(sub: "_Commands") -> None:
    p = sub.add_parser("compare", help="compare two campaigns cell by cell (new/base with a 95 %% interval by "
                       "Welch's t on log throughput; faster, slower, no change, or cannot tell); exits 1 when a cell "
                       "regressed, NEW lacks a cell BASE had, or they share no cell")
    p.add_argument("base", metavar="BASE", help="the reference: a campaign name (under --logs) or folder, "
                   "summaries/<name>.json, last-good (from the results store: the latest campaign of NEW's matrix "
                   "on NEW's system and partition that ran before it, shares a cell with it and in which no cell "
                   "regressed), or ref:SET, a published reference set shipped with the tool (ref:dlperf-v100, "
                   "ref:ngc-a100; see the references command)")
    p.add_argument("new", metavar="NEW", nargs="?", help="the campaign to judge (a campaign or "
                   "summaries/<name>.json)")
    _select_options(p)
    p.add_argument("--base", dest="base_option", metavar="BASE", help="BASE as an option, NEW the one positional: "
                   "compare --base last-good NEW")
    p.add_argument("--threshold", type=float, default=None, metavar="F",
                   help="a slower cell regressed when new/base < 1 - F (default 0.05); against ref:SET there is "
                   "no gate unless this is given (exit 1 when a matched cell is below 1 - F of its published figure "
                   "or has no OK run)")
    p.add_argument("--out", metavar="DIR", help="where compare.<base>.<new>.md/.json go (default: the summaries' "
                   "folder, as collect's)")
    _store_args(p)
    p.add_argument("--wide", action="store_true", help="the table uncut (default: it fits 100 columns; the .md "
                   "file has it whole)")
    p.add_argument("--junit", metavar="FILE", help="also write the verdicts as JUnit XML for a CI system: one "
                   "testcase per cell, a regression a failure, a cell no longer running an error")
    _metric_option(p)
    p.set_defaults(func=_lazy("compare"))
    p = sub.add_parser("history", help="each cell's median over the stored campaigns with its interval, the "
                       "changes beyond noise (compare's rule) and what changed between campaigns (driver, NCCL, "
                       "framework, ...)")
    p.add_argument("pattern", nargs="?", metavar="EXPR", help="the cells, as -k selects them (a glob over cell ids "
                   "too: '*resnet50*1x8*')")
    _select_options(p)
    _store_args(p)
    p.add_argument("--since", metavar="DATE", help="campaigns that ran on or after DATE (YYYY-MM-DD)")
    p.add_argument("--threshold", type=float, default=0.05, metavar="F", help="a slower campaign regressed when "
                   "new/previous < 1 - F (default 0.05), as in compare")
    p.add_argument("--wide", action="store_true", help="the versions that changed in the table, not under it")
    _metric_option(p)
    p.set_defaults(func=_lazy("history"))
    p = sub.add_parser("references", help="the published reference sets shipped with the tool: their conditions, "
                       "sources and figures")
    p.add_argument("name", nargs="?", help="one set (e.g. dlperf-v100): every table and figure")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.add_argument("--wide", action="store_true", help="lines and the figures' table uncut (default: they fit 100 "
                   "columns)")
    p.set_defaults(func=_lazy("references"))


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
        import os

        name, name2 = (os.path.abspath(os.fsdecode(n)) if isinstance(n, (str, bytes, os.PathLike)) else n
                       for n in (err.filename, err.filename2))
        where = f"{name} -> {name2}" if name2 else str(name)
        todo = {28: "free space there and run the command again", 30: "the file system is read-only",
                13: "make it writable (or readable) by you"}.get(err.errno or 0, "")
        print(f"dlperf-slurm: error: {where}: {err.strerror or err}" + (f": {todo}" if todo else ""),
              file=sys.stderr)
        return 1
    except Exception as err:
        # the disk's doing (damaged manifest, full disk, read-only folder): one line. sqlite3 is looked up, not
        # imported here: only a command that opened a database can raise its errors, and --help stays without it
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is None or not isinstance(err, sqlite3.Error):
            raise
        from dlperf_slurm import disk

        print(f"dlperf-slurm: error: {disk.storage_problem(err)}", file=sys.stderr)
        return 1
