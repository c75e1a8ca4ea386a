"""The ``collect`` command: gather the runs the arguments name, collect them with the parse cache, write the
summaries that changed, and with ``--watch`` do it again as runs end, printing one progress line.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence, TextIO

from dlperf_slurm.campaign import folders, manifest, tracking
from dlperf_slurm.campaign.eta import Clock
from dlperf_slurm.collect import parsecache
from dlperf_slurm.collect.drive import Result, collect, keep_verdicts
from dlperf_slurm.collect.gather import Collection, runs_from_campaign, runs_from_matrix, runs_from_tree, tree_suite
from dlperf_slurm.disk import no_more_open_than
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.cell import METRICS, Target
from dlperf_slurm.model.status import ACTIVE
from dlperf_slurm.words import plural

WATCH_SECONDS = 30.0  # --watch without a value


def _campaign_dir(logs: str, name: str) -> Path:
    p = Path(name)
    if p.is_dir():
        return p
    q = Path(logs) / name
    if q.is_dir():
        return q
    raise UserError(f"no campaign {name!r}: neither {p} nor {q} is a folder")


def _options(items: Sequence[str] | None) -> dict[str, Any]:
    """``--option KEY=VALUE`` pairs; values read as JSON when they can be (numbers, true/false), else text."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--option {item!r}: expected KEY=VALUE, e.g. batches_per_iter=10")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def tree_options(suite_name: str, items: list[str] | None) -> dict:
    """``--option KEY=VALUE`` for a ``--from`` tree, checked as a matrix's ``[options]`` are."""
    from dlperf_slurm import suites
    from dlperf_slurm.matrix.loader import option_problem

    options = _options(items)
    try:
        suite = suites.get(suite_name)
    except KeyError:
        return options  # runs_from_tree names the unknown suite
    for key, value in options.items():
        if key not in suite.options:
            raise UserError(f"--option {key}: {suite.name} has no such option; its options: "
                            f"{', '.join(sorted(suite.options))}")
        why = option_problem(suite, key, value)
        if why:
            raise UserError(f"--option {key}={value}: {why}")
    return options


def tree_target(text: str | None) -> Target | None:
    """``--target METRIC:VALUE`` (``top1:0.75``) for a ``--from`` tree, checked as a matrix's target is."""
    if text is None:
        return None
    metric, _, value = text.partition(":")
    try:
        v = float(value)
    except ValueError:
        v = -1.0
    if metric not in METRICS or not 0 < v <= 1:
        raise UserError(f"--target {text}: expected METRIC:VALUE with METRIC one of {', '.join(METRICS)} and VALUE a "
                        "fraction in (0, 1], e.g. top1:0.75")
    return Target(metric, v)


def gather(args) -> list[Collection]:
    """The runs the command line names: ``--from DIR``, ``--matrix``, campaigns (default: the latest)."""
    collections: list[Collection] = []
    names = list(args.campaign or [])
    if args.from_dir:
        suite, notes = tree_suite(args.from_dir, args.suite)  # --suite auto (the default): the logs say
        collections.append(runs_from_tree(args.from_dir, suite, args.warmup_steps, args.measure_steps,
                                          tree_options(suite, args.option),
                                          name=args.name if not names and not args.matrix else None,
                                          target=tree_target(args.target)))
        collections[-1].notes[:0] = notes
        for note in notes if args.watch is None else ():
            print(f"dlperf-slurm: {note}", file=sys.stderr)
    else:  # they only say how to read a --from tree; a campaign or matrix has its own window and options
        for flag, value in (("--suite", args.suite), ("--warmup-steps", args.warmup_steps),
                            ("--measure-steps", args.measure_steps), ("--option", args.option),
                            ("--target", args.target)):
            if value is not None:
                raise UserError(f"{flag} goes with --from DIR")
    if args.matrix:
        cdir = _campaign_dir(args.logs, names.pop(0)) if names else None
        site = False if args.no_site else args.site
        collections.append(runs_from_matrix(args.matrix, cdir, logs=args.logs, site=site))
    if not collections and not names:
        names = [str(folders.find_campaign(args.logs, None))]
    for name in names:
        cdir = folders.find_campaign(args.logs, name)
        why = folders.why_read_only(cdir)  # a colleague's campaign, a read-only mount, a full disk: read as it is
        if why and str(cdir) not in _SAID:  # said once the collect is written (an error of its own comes alone)
            _SAID[str(cdir)] = folders.read_only_note(cdir, why)
        elif not why and not args.no_refresh:
            tracking.refresh_statuses(cdir)
        collections.append(runs_from_campaign(cdir))
    return select(collections, args)


def select(collections: list[Collection], args) -> list[Collection]:
    """The collections with only the runs and cells ``-k`` / ``--exclude-cells`` select (said in one line, once
    also under ``--watch``)."""
    from dlperf_slurm.matrix.select import View, from_args

    chosen = from_args(args)
    if not chosen:
        return collections
    cells = list({c.id: c for col in collections for c in [*col.cells, *(r.cell for r in col.runs)]}.values())
    what = f"of {'+'.join(c.name for c in collections)}"
    keep = {c.id for c in chosen.choose(cells, View.of_cell, what,
                                        say=not getattr(args, "selection_said", False))}
    args.selection_said = True
    note = f"only the cells selected by {chosen.describe()}: {len(keep)} of {plural(len(cells), 'cell')}"
    return [dataclasses.replace(col, runs=[r for r in col.runs if r.cell.id in keep],
                                cells=[c for c in col.cells if c.id in keep], notes=[*col.notes, note])
            for col in collections]


_SAID: dict[str, str] = {}  # campaign -> its read-only line, '' once printed (once, also under --watch)


def say_read_only() -> None:
    """Print the read-only lines not printed yet."""
    for key, line in _SAID.items():
        if line:
            print(line, file=sys.stderr)
            _SAID[key] = ""


def summary_name(collections: list[Collection], name: str | None, args=None) -> str:
    """``--name``, else the collections' names; a selection's (``-k``) is named for it, so that it never replaces
    the whole campaign's summary (``smoke.k-1x8-and-amp``)."""
    from dlperf_slurm.matrix.select import from_args

    chosen = from_args(args)
    return name or "+".join(c.name for c in collections) + (f".{chosen.slug()}" if chosen else "")


def collect_once(args, state: parsecache.OutputState | None = None
                 ) -> tuple[Result, list[Path], list[Path], parsecache.OutputState]:
    """One collect: ``(result, paths written, paths unchanged, what the writers wrote)``; ``state``: what they
    wrote in the previous round (default: read from beside the summaries)."""
    from dlperf_slurm.report import writers

    collections = gather(args)
    name = summary_name(collections, args.name, args)
    side = parsecache.side_file(args.out, writers._slug(name))
    # the parse cache beside the summaries, and they, are no more open than the campaigns' folders (a private one's
    # medians and paths stay private); the results store is its own: private by default (store.py)
    with no_more_open_than([c.where for c in collections if Path(c.where).is_dir()]):
        caches = parsecache.Caches(collections, side, read=not args.no_cache)
        result = collect(collections, jobs=args.jobs, name=name, cache=caches)
        for col in collections:
            if col.source == "manifest" and not folders.why_read_only(Path(col.where)):
                keep_verdicts(col.where, [r for r in result.runs if r.campaign == col.name])
        if state is None or state.path != side:
            state = parsecache.OutputState(side) if args.no_cache else parsecache.OutputState.load(side)
        result.trend = stored_trend(args, result)
        state.begin()
        paths = writers.write_all(result, args.out, plots=not args.no_plots, state=state, jobs=args.jobs)
        try:
            state.save()
        except (OSError, sqlite3.Error) as err:
            parsecache.warn(f"{side} not written", err)
    return result, [p for p in paths if not state.is_kept(p)], [p for p in paths if state.is_kept(p)], state


def cmd_collect(args) -> int:
    """Exits 1 when the store cannot be written, when every run collected failed, or with ``--fail-on`` a run has
    one of its statuses (:mod:`dlperf_slurm.outcome.exitstatus`; the summaries are written first)."""
    from dlperf_slurm.outcome import exitstatus

    fail_on = exitstatus.parse_fail_on(getattr(args, "fail_on", None))
    if args.watch is not None and not 0 <= args.watch < float("inf"):  # NaN too: time.sleep refuses them all
        raise UserError(f"--watch {args.watch:g}: expected SECONDS >= 0 (none or 0: every {WATCH_SECONDS:g} s)")
    if args.explain is not None:  # one run's figures and status, where they come from; nothing is written
        from dlperf_slurm.collect import explain

        print(explain.explain(gather(args), args.explain))
        say_read_only()
        return 0
    if args.watch is not None:
        return watch(args, args.watch or WATCH_SECONDS, fail_on=fail_on)
    from dlperf_slurm.report import writers

    t0 = time.perf_counter()
    result, wrote, kept, state = collect_once(args)
    say_read_only()
    if not args.quiet:
        print(writers.terminal(result, wide=args.wide))
        print()
    parts = [_parsed(result), f"{_written(wrote, kept, state.removed)} ({time.perf_counter() - t0:.1f} s in all)"]
    print("; ".join(parts) if args.wide else _fit_lines(parts))
    stored = store_result(args, result)
    return max(stored, exitstatus.exit_status("collect", [r.status for r in result.runs], fail_on))


def system_of(args, result: Result) -> str | None:
    """The system the store records the cells under: ``--system``, else the one the campaign was submitted for
    (its manifest's), else none."""
    if args.system:
        return args.system
    for col in result.collections:
        if col.source == "manifest":
            m = manifest.Manifest(col.where)
            try:
                if m.meta("system"):
                    return str(m.meta("system"))
            finally:
                m.close()
    return None


def stored_trend(args, result: Result) -> dict:
    """The cells' earlier campaigns in the results store, for the HTML report's trend plots ({} without a store or
    when it cannot be read: :func:`store_result` says why)."""
    if getattr(args, "no_store", False):
        return {}
    from dlperf_slurm.report import htmlpage
    from dlperf_slurm.store import database, filing, history

    name, partition, _ = filing.placement(result, system_of(args, result))
    try:
        with database.Store(database.url_for(args)) as st:
            stored = st.cells(system=name, partition=partition, cell_ids={c.cell_id for c in result.cells})
    except UserError:
        return {}
    mine = filing.identities(result)  # this collect's campaigns: name -> identity
    here = {cid.key for cid in mine.values()}
    labels = history.label_campaigns([*((s.campaign, s.key, s.when) for s in stored),  # one name twice: NAME#1..
                                      *((name, cid.key, cid.ran_at or "~") for name, cid in mine.items())])
    labels.update({name: labels.get(cid.key, name) for name, cid in mine.items()})
    return htmlpage.trend_of([s for s in stored if s.key not in here], result, labels)


def store_result(args, result: Result, say: bool = True) -> int:
    """Add the collect's cells to the results store (unless ``--no-store``); one line says where. A store that
    cannot be reached fails the command (exit 1) after the summaries are written."""
    if getattr(args, "no_store", False):
        return 0
    from dlperf_slurm.store import database, filing

    try:
        url = database.url_for(args)
        filed = filing.record_collect(result, url, system_of(args, result))
    except UserError as err:
        print(f"dlperf-slurm: error: {err} (the summaries are written; --no-store skips the store)", file=sys.stderr)
        return 1
    if say:
        print(filed.line(url))
    return 0


def _fit_lines(parts: Sequence[str]) -> str:
    """The summary line's parts on lines of the terminal tables' width, one part a line (the next ones indented),
    a part too long broken after its commas (a path is never cut)."""
    from dlperf_slurm.termtext import TERMINAL_WIDTH

    out: list[str] = []
    for i, part in enumerate(parts):
        items = part.split(", ")
        current = ("  " if i else "") + items[0]
        for item in items[1:]:
            if len(current) + 2 + len(item) > TERMINAL_WIDTH:
                out.append(current + ",")
                current = "    " + item
            else:
                current += ", " + item
        out.append(current)
    return "\n".join(out)


def _parsed(result: Result) -> str:
    mb = result.bytes / 1e6
    logged = sum(r.log_bytes is not None for r in result.runs)  # a run without a log is neither read nor cached
    cached = "" if result.reread is None else f"; {result.reread} read, {logged - result.reread} from the parse cache"
    procs = f" ({plural(result.workers, 'process', 'processes')})" if result.workers > 1 else ""
    return f"parsed {plural(len(result.runs), 'run')} ({mb:.1f} MB of logs{cached}) in {result.seconds:.1f} s{procs}"


def _written(wrote: list[Path], kept: list[Path], removed: Sequence[Path] = ()) -> str:
    text = f"wrote {', '.join(str(p) for p in wrote)}" if wrote else "summaries unchanged"
    if kept:
        text += f"; {len(kept)} unchanged" if wrote else f" ({plural(len(kept), 'file')} under {kept[0].parent})"
    if removed:
        text += f"; removed {', '.join(str(p) for p in removed)} (no longer made)"
    return text


# ================================================================================================= watch


def progress(result: Result, wrote: list[Path], seconds: float, clock: Clock | None = None) -> str:
    """One line: how many runs ended and how, how many are still going, what this round read and wrote; with
    ``clock``, the time left while runs are going (:mod:`dlperf_slurm.campaign.eta`)."""
    n = len(result.runs)
    counts = Counter(r.status for r in result.runs)
    going = sum(v for k, v in counts.items() if k in ACTIVE)
    ended = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
                      if k not in ACTIVE)
    read = f"{plural(result.reread, 'log')} read" if result.reread is not None else "logs read"
    return (f"{time.strftime('%H:%M:%S')} {result.name}: {n - going}/{plural(n, 'run')} ended ({ended or 'none'}), "
            f"{going} pending or running; {read}, {plural(len(wrote), 'summary file')} written ({seconds:.1f} s)"
            + (f"; {clock.text(n - going, going)}" if clock is not None and going else ""))


def watch(args, every: float, rounds: int | None = None, out: TextIO | None = None,
          fail_on: frozenset = frozenset()) -> int:
    """Collect every ``every`` seconds (with the parse cache: only logs that changed are read, only summaries
    whose inputs changed are written) and keep one progress line up to date; stop once no run of a campaign or
    matrix is pending or running (a ``--from`` tree: at Ctrl-C), or after ``rounds`` rounds. Exits as ``collect``
    does (:mod:`dlperf_slurm.outcome.exitstatus`) by the last round's runs."""
    from dlperf_slurm.outcome import exitstatus

    out = out or sys.stdout
    result = None
    tty = out.isatty()
    state = None
    last = ""
    clock = Clock()
    done = 0
    try:
        while True:
            t0 = time.perf_counter()
            result, wrote, _kept, state = collect_once(args, state)
            say_read_only()
            if store_result(args, result, say=False) and rounds is None:
                args.no_store = True  # said once; the summaries keep coming
            line = progress(result, wrote, time.perf_counter() - t0, clock)
            going = any(r.status in ACTIVE for r in result.runs)
            trees = all(c.source == "tree" for c in result.collections)
            key = line.split(" ", 1)[1].rsplit(" (", 1)[0]  # without its clock, the round's seconds, the time left
            if tty:
                out.write("\r\x1b[K" + line)
            elif key != last or (not going and not trees):  # a new state, or the last line before stopping
                out.write(line + "\n")
            out.flush()
            last = key
            done += 1
            if (not going and not trees) or (rounds is not None and done >= rounds):
                break
            time.sleep(every)
    except KeyboardInterrupt:
        pass
    if tty:
        out.write("\n")
    return exitstatus.exit_status("collect", [r.status for r in result.runs], fail_on) if result is not None else 0
