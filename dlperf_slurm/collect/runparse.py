"""One run's files -> its :class:`~dlperf_slurm.model.rows.RunRow`: the log read once, streaming, by its suite's parser;
the status decided with the exit marker, the scheduler's output file and what the manifest recorded
(:func:`dlperf_slurm.outcome.decision.decide`). A parser failure is a PARSE_ERROR run, never a crash. :func:`parse_all`
reads many runs in parallel processes.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlperf_slurm import events as ev
from dlperf_slurm import suites
from dlperf_slurm.collect import parsecache, processes
from dlperf_slurm.disk import log_identity
from dlperf_slurm.model.cell import Cell, Target
from dlperf_slurm.model.result import RunResult
from dlperf_slurm.model.rows import RunRow
from dlperf_slurm.model.status import Status, status_of
from dlperf_slurm.outcome import decision, evidence
from dlperf_slurm.parsing import accuracy
from dlperf_slurm.probes import health


@dataclass(kw_only=True)
class RunSpec:
    """One run to collect: where its files are and what the campaign knows of it."""

    key: str
    cell: Cell
    repeat: int
    log: str
    marker: str | None = None
    state: str | None = None  # the status the manifest recorded (None: no manifest)
    state_reason: str = ""
    job_id: str | None = None
    exit_code: int | None = None
    warmup_steps: int = 20
    measure_steps: int = 100
    options: dict[str, Any] = field(default_factory=dict)
    campaign: str = ""
    slurm_out: list[str] = field(default_factory=list)  # the job's own --output files (slurmstepd banners)
    log_status: str | None = None  # the log's verdict the manifest keeps (None: not read yet)
    log_id: str | None = None  # the log's identity that verdict was read from (None: not kept)
    target: Target | None = None  # an accuracy run's target ([measure] target, collect --from --target)
    epochs: int = 0  # an accuracy run's planned epochs (0: not said)
    slurm_energy_j: float | None = None  # sacct's ConsumedEnergyRaw of its job, as the manifest recorded it


def parse_run(spec: RunSpec) -> RunRow:
    """One run's row: its log read by its suite's parser, its status by :func:`dlperf_slurm.outcome.decision.decide`
    (a status the manifest decided with the log stands: ``status`` and ``collect`` never disagree). Never raises
    for a bad log: a parser exception becomes a PARSE_ERROR run."""
    return read_run(spec)[0]


def read_run(spec: RunSpec) -> tuple[RunRow, parsecache.Entry | None]:
    """:func:`parse_run`, and the parse cache's entry for the log (None without a log, or for a result the cache
    cannot hold exactly)."""
    t0 = time.perf_counter()
    st = parsecache.stat_key(spec.log)  # before reading: a log that grows meanwhile is read again next time
    if st is not None:
        res = evidence.read_log(spec.cell, spec.log, warmup_steps=spec.warmup_steps,
                               measure_steps=spec.measure_steps, options=spec.options)
    else:
        res = RunResult(status=Status.LAUNCH_FAILED, reason="no log")
    text = parsecache.encode(res) if st is not None else None
    row = _finish(spec, res, st[0] if st is not None else None, t0=t0)
    if text is None or st is None:
        return row, None
    fp = parsecache.fingerprint(spec.cell, spec.warmup_steps, spec.measure_steps, spec.options)
    return row, parsecache.Entry(*st, fp, row.parse_seconds, text)


def from_cache(spec: RunSpec, entry: parsecache.Entry, result: RunResult | None = None) -> RunRow:
    """The run's row from the parse cache's result for its log (``result``: already decoded): the same row its
    parse gave, the status decided anew (the scheduler state and the exit marker change without the log)."""
    res = result if result is not None else parsecache.decode(entry.result)
    return _finish(spec, res, entry.size, seconds=entry.seconds)


def row_of(spec: RunSpec, res: RunResult, size: int | None) -> RunRow:
    """The row of a run whose log another reader parsed into ``res`` (``collect --explain``'s traced parse), its
    status decided as :func:`read_run` decides it."""
    return _finish(spec, res, size, seconds=0.0)


def _finish(spec: RunSpec, res: RunResult, size: int | None, t0: float | None = None,
            seconds: float | None = None) -> RunRow:
    cell = spec.cell
    has_log = size is not None
    try:
        suite = suites.get(cell.suite)
        published, unit = suite.published, suite.sample_unit
        layout = _layout(suite, cell)
    except KeyError:
        published, unit, layout = "time", "samples/s", ""
    if layout and spec.state is not None:  # the layout the campaign gave the program (the summary tables); a tree
        res.extra["layout"] = layout  # read without a manifest (collect --from) says only its shape, not its layout
    log_verdict = res.status
    if spec.target is not None and has_log:  # the campaign's target on the evaluations the program printed
        accuracy.apply_target(res.extra, spec.target, spec.epochs or None)
    decided = decision.decide_run(_evidence(spec, res, has_log), spec.log)
    assert decided is not None, "collect's decision always concludes (the manifest's record or the log's verdict)"
    res.extra["rule"] = decided.rule  # the row of outcome's table that decided (0: the manifest's record), for
    # collect --explain: not in the row (the same run decided again from the manifest's record says 0)
    decision.apply(res, decided)
    res.log_status = log_verdict
    if spec.state:
        res.scheduler_state = str(spec.state)
    if spec.state_reason and res.status != Status.OK and spec.state_reason not in res.reason:
        res.manifest_reason = spec.state_reason
    if seconds is None:
        assert t0 is not None, "a parse gives t0, a cache hit its seconds"
        seconds = time.perf_counter() - t0
    return _row(spec, res, published, unit, size, seconds)


def _evidence(spec: RunSpec, res: RunResult, has_log: bool) -> decision.Evidence:
    """What collect knows of a run without asking the scheduler: the log's verdict, the exit marker, the
    scheduler output file and what the manifest recorded (:class:`~dlperf_slurm.outcome.decision.Record`)."""
    same_log = spec.log_id is None or spec.log_id == log_identity(spec.log)  # else the log changed since
    ev = decision.Evidence(marker=evidence.read_marker(spec.marker), log=res if has_log else None, has_log=has_log,
                           banner=evidence.read_banner(spec.slurm_out) if spec.slurm_out else None,
                           record=decision.Record(status=status_of(spec.state) if spec.state else None,
                                                  reason=spec.state_reason, exit_code=spec.exit_code,
                                                  with_log=bool(spec.log_status), same_log=same_log))
    if has_log:  # a log cut or emptied after its run ended: LOG_MISSING (row 11), not what the run wrote
        ev.damage = evidence.changed_after_end(spec.log, spec.marker, not same_log and spec.log_status == Status.OK)
    return ev


def _variant(cell: Cell) -> str:
    parts = [f"setup={cell.setup}"] if cell.setup else []
    parts += [f"{k}={v}" for k, v in sorted(dict(cell.params).items())]
    parts += [f"{k}={v}" for k, v in sorted(dict(cell.env).items())]
    if cell.launcher_args:
        parts.append("launcher_args=" + " ".join(map(str, cell.launcher_args)))
    return ", ".join(parts)


# the job event's keys a run row keeps as its provenance, in this order
_PROVENANCE = (ev.JOB_ID, ev.NODELIST, ev.HOSTNAME, ev.GPUS, ev.VERSIONS, ev.CONTAINER_IMAGE, ev.COMMAND, ev.GIT,
               ev.PARTITION, ev.QOS, ev.MODULES, ev.TOOL, ev.PER_NODE)


def _layout(suite: suites.Suite, cell: Cell) -> str:
    """The suite's layout text of the cell; "" where the cell is none its suite would accept (a tree's cell of
    another layout than the axes name, ``collect --from``): a row never fails on it."""
    try:
        return suite.layout_text(cell)
    except (ArithmeticError, KeyError, TypeError, ValueError):
        return ""


def _row(spec: RunSpec, res: RunResult, published: str, unit: str, size: int | None, seconds: float) -> RunRow:
    cell = spec.cell
    x = res.extra or {}
    window = res.window or {}
    job = res.job or {}
    thr_time, thr_speed = res.throughput, res.throughput_speed
    nodes, gpus = cell.nodes, cell.gpus_per_node
    return RunRow(
        campaign=spec.campaign, suite=cell.suite, framework=cell.framework, model=cell.model,
        cell_id=cell.id, shape=cell.shape, nodes=nodes, gpus_per_node=gpus, devices=nodes * gpus,
        batch_size=cell.batch_size, global_batch=cell.global_batch,
        precision=cell.precision, xla=cell.xla, launcher=cell.launcher,
        variant=_variant(cell), repeat=spec.repeat, run=spec.key, job_id=spec.job_id or job.get(ev.JOB_ID),
        hosts=job.get(ev.NODELIST) or job.get(ev.HOSTNAME) or "",
        status=res.status, reason=res.reason, throughput=thr_speed if published == "speed" else thr_time,
        throughput_time=thr_time, throughput_speed=thr_speed, published=published, unit=unit,
        latency_ms=res.latency_ms, steps_seen=res.steps_seen, window_start=window.get("start"),
        window_end=window.get("end"), window_steps=window.get("steps"), mem_peak_mib=res.mem_peak_mib,
        mem_gpu0_mib=res.mem_gpu0_mib, mem_allocator_mib=res.mem_allocator_mib, mem_reason=res.mem_reason,
        gpu_util=res.gpu_util, loss_finite=res.loss_finite, tiny=bool(res.tiny), exit_code=res.exit_code,
        scheduler_state=res.scheduler_state or spec.state, garbled_lines=x.get("garbled_lines", 0),
        health=health.summary(res.health), health_busbw_gbs=(res.health or {}).get(ev.BUSBW_GBS),
        log=spec.log, log_bytes=size, parse_seconds=seconds,
        provenance={k: job[k] for k in _PROVENANCE if job.get(k) is not None},
        extra=_row_extra(res, spec), energy_j_per_step=res.energy_j_per_step, power_w_per_gpu=res.power_w_per_gpu,
        samples_per_joule=res.samples_per_joule, energy_basis=res.energy_basis, energy_reason=res.energy_reason)


def _row_extra(res: RunResult, spec: RunSpec | None = None) -> dict[str, Any]:
    """The row's ``extra`` column: what the parser said besides the figures, then what the decision added, and the
    job's energy as Slurm's accounting counted it (``slurm_energy_j``, where a site's energy plugin does)."""
    out = {k: v for k, v in (res.extra or {}).items() if k != "rule"}  # the deciding row: --explain's
    if spec is not None and spec.slurm_energy_j is not None:
        out["slurm_energy_j"] = spec.slurm_energy_j
    if res.exit_code is not None:
        out["exit_code"] = res.exit_code
    out["log_status"] = res.log_status
    if res.scheduler_state:
        out["scheduler_state"] = res.scheduler_state
    if res.manifest_reason:
        out["manifest_reason"] = res.manifest_reason
    return out


def parse_all(specs: Sequence[RunSpec], jobs: int | None = None,
              known: Mapping[str, parsecache.Entry] | None = None,
              fresh: dict[str, parsecache.Entry | None] | None = None) -> tuple[list[RunRow], int]:
    """Every run's row, in input order, and the number of processes that read logs. A run whose log the parse
    cache ``known`` (log path -> entry) holds as it is now is rebuilt from it (:func:`from_cache`; keyed by
    :func:`parsecache.canonical` path); the others are parsed in :func:`workers` processes (``jobs``, or as many
    as the work and the free CPUs pay for), and their new entries added to ``fresh`` (None for a log the cache
    cannot hold)."""
    rows: list[RunRow | None] = [None] * len(specs)
    todo = list(range(len(specs)))
    if known:
        todo, hits = [], []
        fps: dict[tuple, str] = {}
        for i, s in enumerate(specs):
            e = known.get(parsecache.canonical(s.log))
            if e is not None and parsecache.stat_key(s.log) == e[:3]:
                c = s.cell
                k = (c.suite, c.nodes, c.gpus_per_node, c.batch_size, c.precision, s.warmup_steps, s.measure_steps,
                     id(s.options))
                fp = fps.get(k)
                if fp is None:
                    fp = fps[k] = parsecache.fingerprint(c, s.warmup_steps, s.measure_steps, s.options)
                if fp == e.fingerprint:
                    hits.append((i, e))
                    continue
            todo.append(i)
        results = parsecache.decode_all([e.result for _, e in hits])  # one JSON parse for them all
        for (i, e), res in zip(hits, results):
            rows[i] = from_cache(specs[i], e, res)
    todo_specs = [specs[i] for i in todo]
    used = workers(todo_specs, jobs) if todo_specs else 0
    for i, (row, entry) in zip(todo, _read_all(todo_specs, used)):
        rows[i] = row
        if fresh is not None and row.log_bytes is not None:
            fresh[specs[i].log] = entry
    return rows, used  # type: ignore[return-value]


def _worker_start(parent: int) -> None:
    """A parse worker's start: cycle collection on (whether or not its parent turned it off), and it dies with
    its parent: a ``collect`` killed by SIGKILL or SIGTERM left one worker per CPU waiting on its queue for ever."""
    gc.enable()
    processes.die_with(parent)


#: What a run costs to read, for sizing the pool: a fixed part per log (open, the suite's objects, the row) and
#: a part per byte (the block scan); measured with Hyperscan on DLPerf's TF2 logs (bench_collect.py --peer: about
#: 0.2 ms a log) and the 1 GB NCCL-INFO log (bench_collect.py: 700-1,500 MB/s a core, under load). A worker is
#: started only for at least WORKER_SECONDS of that work: its start (a fork) and the trip of its rows back cost
#: tens of milliseconds.
SECONDS_PER_LOG, BYTES_PER_SECOND, WORKER_SECONDS = 2e-4, 700e6, 0.25


def workers(specs: Sequence[RunSpec], jobs: int | None) -> int:
    """How many processes read ``specs``: ``jobs`` when given (at most one a log); by default the CPUs this
    process may use that the machine's load leaves free (the load average counts this process), and no more than
    the work pays for (:data:`WORKER_SECONDS` of estimated work each). The one decision of the pool's size."""
    if jobs is not None:
        return max(1, min(jobs, len(specs)))
    free = processes.free_cpus()
    size = 0
    for s in specs:
        with contextlib.suppress(OSError):
            size += os.stat(s.log).st_size
    work = len(specs) * SECONDS_PER_LOG + size / BYTES_PER_SECOND
    return max(1, min(int(free + 0.5), int(work / WORKER_SECONDS), len(specs)))


def _read_all(specs: Sequence[RunSpec], jobs: int) -> list[tuple[RunRow, parsecache.Entry | None]]:
    """Read ``specs`` in ``jobs`` processes (:func:`workers`), each taking chunks of runs large enough that
    handing them out costs little beside reading them."""
    if jobs <= 1:
        return [read_run(s) for s in specs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from dlperf_slurm.parsing import lines

    if lines.BLOCKS:  # the block reader's scanner (numpy, when it reads the blocks), once, before the workers fork
        from dlperf_slurm.parsing import hsblocks

        if not hsblocks.ENABLED:
            from dlperf_slurm.parsing import npblocks  # noqa: F401
    for name in {s.cell.suite for s in specs}:  # the suites' modules, once, before the workers fork
        with contextlib.suppress(KeyError):
            suites.get(name)
    parsecache.parser_version()
    chunk = max(1, min(256, len(specs) // (jobs * 4)))
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_start,
                             initargs=(os.getpid(),)) as pool:
        return list(pool.map(read_run, specs, chunksize=chunk))
