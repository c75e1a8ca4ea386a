"""``collect``: every run's log -> numbers a user can publish (method.md, to the letter).

1. Gather the runs: from a campaign's manifest (:func:`runs_from_campaign`, the submission stage's read API),
   from a matrix (:func:`runs_from_matrix`: ``matrix.runs(m, campaign_dir)``), or from a DLPerf-style tree
   without any manifest (:func:`runs_from_tree`: ``DIR/<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log``).
2. Parse each log once, streaming, with its suite's parser; fold in the scheduler state and the exit marker
   (:func:`dlperf_slurm.outcome.decide`). Logs are parsed in parallel processes; a parser failure is a
   PARSE_ERROR run, never a crash.
3. Per cell: statistics over the OK runs only, flags, speedup and efficiency against the 1x1 cell of the same
   suite, precision, XLA, batch per device and variant (:func:`cells_of`).

The results are plain lists of dicts (``runs``, ``cells``); :mod:`dlperf_slurm.report` turns them into pandas
DataFrames, markdown, CSV, JSON and PNG. pandas and matplotlib are imported only there, and only when needed.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf_slurm import manifest, outcome, stats
from dlperf_slurm.errors import UserError
from dlperf_slurm.model import (DEFAULT_MEASURE_STEPS, DEFAULT_WARMUP_STEPS, FINAL, UNFINISHED, Cell, JobInfo,
                                RunResult, Status, status_of)

# final statuses a manifest may have recorded from the scheduler alone, before any log was read
SCHEDULER_WORDS = (Status.OK, Status.OOM, Status.TIMEOUT, Status.NODE_FAIL, Status.PREEMPTED, Status.CANCELLED,
                   Status.FAILED)

# How a cell reads when none of its runs is OK: the dominant status among its runs, ties broken in this order.

_TREE_NAME = re.compile(r"^(?P<model>.+?)_b(?P<bsz>\d+)_(?P<prec>[A-Za-z0-9]+)(?P<rest>(?:_[^_]+)*?)_(?P<rep>\d+)\.log$")
_SHAPE_DIR = re.compile(r"^(\d+)n(\d+)g$")


@dataclass
class RunSpec:
    """One run to collect: where its files are and what the campaign knows of it."""

    key: str
    cell: dict[str, Any]  # Cell.as_dict()
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


@dataclass
class Collection:
    """What one source yields: its runs and what each cell should have (repeats)."""

    name: str
    source: str  # "manifest" | "matrix" | "tree"
    where: str
    runs: list[RunSpec]
    repeats: int | None = None  # planned repeats per cell (None: as many as found)
    cells: list[dict[str, Any]] = field(default_factory=list)  # every planned cell, runs or not
    notes: list[str] = field(default_factory=list)


# ============================================================================================ gathering


def _slurm_out_index(dirs: Iterable[Path]) -> dict[str, list[str]]:
    """``<stem>.slurm-<jobid>.out`` files by run stem, one directory listing per shape folder."""
    index: dict[str, list[str]] = {}
    for d in set(dirs):
        try:
            with os.scandir(d) as it:
                for e in it:
                    if ".slurm-" in e.name and e.name.endswith(".out"):
                        index.setdefault(str(d / e.name.split(".slurm-")[0]), []).append(str(d / e.name))
        except OSError:
            continue
    return index


def runs_from_campaign(campaign_dir: str | os.PathLike) -> Collection:
    """Runs of a campaign from its manifest (:func:`dlperf_slurm.manifest.load_campaign`), statuses as recorded."""
    info = manifest.load_campaign(campaign_dir)
    measure = info.measure or {}
    warm = int(measure.get("warmup_steps", DEFAULT_WARMUP_STEPS))
    meas = int(measure.get("measure_steps", DEFAULT_MEASURE_STEPS))
    outs = _slurm_out_index(Path(r.log).parent for r in info.runs)
    runs = []
    for r in info.runs:
        log = str(r.log)
        slurm_out = ([str(r.slurm_out)] if r.slurm_out else []) + outs.get(log.removesuffix(".log"), [])
        runs.append(RunSpec(r.key, r.cell.as_dict(), r.repeat, log, str(r.marker), r.status, r.reason or "",
                            r.job_id, r.exit_code, warm, meas, dict(info.options or {}), info.name, slurm_out,
                            r.log_status))
    return Collection(info.name, "manifest", str(info.dir), runs, measure.get("repeats"),
                      [c.as_dict() for c in info.cells])


def runs_from_matrix(matrix_file: str | os.PathLike, campaign_dir: str | os.PathLike | None = None,
                     logs: str = "logs", site: Any = None) -> Collection:
    """Runs of a matrix (``matrix.runs(m, campaign_dir)``); statuses from the manifest when there is one."""
    from dlperf_slurm import matrix as matrix_mod

    m = matrix_mod.load(matrix_file, site=site)
    cdir = Path(campaign_dir) if campaign_dir else Path(logs) / m.name
    states: dict[str, Any] = {}
    notes = []
    try:
        if (cdir / manifest.MANIFEST).exists():
            states = {r.key: r for r in manifest.load_manifest(cdir)}
    except Exception as err:  # noqa: BLE001 - a broken manifest must not stop a collect from the matrix
        notes.append(f"manifest not read ({type(err).__name__}: {err}); statuses from logs and exit markers only")
    runs = []
    plan = matrix_mod.runs(m, cdir)
    outs = _slurm_out_index(r.log.parent for r in plan)
    for r in plan:
        rec = states.get(r.key)
        runs.append(RunSpec(r.key, r.cell.as_dict(), r.repeat, str(r.log), str(r.marker),
                            rec.status if rec else None, rec.reason if rec else "", rec.job_id if rec else None,
                            rec.exit_code if rec else None, m.measure.warmup_steps, m.measure.measure_steps,
                            dict(m.options), m.name,
                            ([str(rec.slurm_out)] if rec and rec.slurm_out else []) + outs.get(str(r.base), []),
                            rec.log_status if rec else None))
    return Collection(m.name, "matrix", str(cdir), runs, m.measure.repeats, [c.as_dict() for c in m.cells], notes)


def runs_from_tree(root: str | os.PathLike, suite_name: str, warmup_steps: int = 20, measure_steps: int = 100,
                   options: dict[str, Any] | None = None, name: str | None = None) -> Collection:
    """Runs of a tree laid out as DLPerf did, with no manifest: ``<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log``
    (any depth below ``root``; multi-digit node counts allowed). The suite says how to read the logs; the cell
    comes from the path (precision from the file name, ``_xla`` and other ``_tokens`` as variant)."""
    from dlperf_slurm import suites

    try:
        suite = suites.get(suite_name)
    except KeyError:
        raise UserError(f"unknown suite {suite_name!r}; known: {', '.join(suites.names())}") from None
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"--from {root}: not a folder")
    opts = {**suite.options, **(options or {})}
    runs, skipped = [], []
    shape_dirs = sorted(p for p in root.rglob("*") if p.is_dir() and _SHAPE_DIR.match(p.name))
    if _SHAPE_DIR.match(root.name):
        shape_dirs.insert(0, root)
    outs = _slurm_out_index(shape_dirs)
    for d in shape_dirs:
        nodes, gpus = (int(x) for x in _SHAPE_DIR.match(d.name).groups())
        for log in sorted(d.glob("*.log")):
            m = _TREE_NAME.match(log.name)
            if not m:
                skipped.append(str(log))
                continue
            rest = [t for t in m.group("rest").split("_") if t]
            xla = "xla" in rest
            variant = [t for t in rest if t != "xla"]
            bsz = int(m.group("bsz"))
            prec = m.group("prec")
            sub = d.parent.relative_to(root) if d.parent != root and root in d.parents else None
            params = {"variant": "_".join(variant)} if variant else {}
            if sub is not None and str(sub) not in ("", "."):
                params["tree"] = str(sub)
            cell = Cell(suite=suite.name, model=suite.model, framework=suite.framework, nodes=nodes,
                        gpus_per_node=gpus, batch_size=bsz, precision=prec, xla=xla, launcher="",
                        params=tuple(sorted(params.items()))).as_dict()
            cell["log_model"] = m.group("model")
            marker = log.with_name(log.name[:-4] + ".exit")
            runs.append(RunSpec(f"{cell['id']}.r{m.group('rep')}", cell, int(m.group("rep")), str(log),
                                str(marker), None, "", None, None, warmup_steps, measure_steps, opts,
                                name or root.name, outs.get(str(log)[:-4], [])))
    if not runs:
        raise UserError(f"--from {root}: no <N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log file found")
    notes = [f"{len(skipped)} .log files with another name pattern were skipped (first: {skipped[0]})"] if skipped else []
    return Collection(name or root.name, "tree", str(root), runs, None, [], notes)


# ============================================================================================== parsing


def parse_run(spec: RunSpec) -> dict[str, Any]:
    """One run's row: its log read by its suite's parser, its status by :func:`dlperf_slurm.outcome.decide`
    (a status the manifest decided with the log stands: ``status`` and ``collect`` never disagree). Never raises
    for a bad log: a parser exception becomes a PARSE_ERROR run."""
    from dlperf_slurm import suites

    cell = spec.cell
    t0 = time.perf_counter()
    try:
        size: int | None = os.path.getsize(spec.log)
    except OSError:
        size = None
    has_log = size is not None
    try:
        suite = suites.get(cell.get("suite", ""))
        published, unit = suite.published, suite.sample_unit
    except KeyError:
        published, unit = "time", "samples/s"
    if has_log:
        res = outcome.read_log(Cell.from_dict(cell), spec.log, warmup_steps=spec.warmup_steps,
                               measure_steps=spec.measure_steps, options=spec.options)
    else:
        res = RunResult(status=Status.LAUNCH_FAILED, reason="no log")
    log_verdict = res.status
    decided = _decide(spec, res, has_log)
    outcome.apply(res, decided)
    res.extra["log_status"] = log_verdict
    if spec.state:
        res.extra["scheduler_state"] = str(spec.state)
    if spec.state_reason and res.status != Status.OK and spec.state_reason not in res.reason:
        res.extra["manifest_reason"] = spec.state_reason
    return _row(spec, res, published, unit, size, time.perf_counter() - t0)


def _decide(spec: RunSpec, res: RunResult, has_log: bool) -> outcome.Outcome:
    """The run's status: the manifest's when it decided with the log; else :func:`outcome.decide` over the
    log, the exit marker, the scheduler output file and what the manifest learnt from the scheduler."""
    recorded = status_of(spec.state) if spec.state else None
    if recorded == Status.UNSUBMITTED:
        return outcome.Outcome(Status.UNSUBMITTED, spec.state_reason or "not submitted")
    if recorded == Status.SUBMITTING:
        return outcome.Outcome(Status.PENDING, "being submitted")
    if recorded in FINAL and (spec.log_status or recorded not in SCHEDULER_WORDS):
        return outcome.Outcome(recorded, spec.state_reason, spec.exit_code)  # decided once, with the log
    ev = outcome.Evidence(marker=outcome.read_marker(spec.marker), log=res if has_log else None, has_log=has_log,
                          banner=outcome.read_banner(spec.slurm_out) if spec.slurm_out else None)
    if recorded is None and not has_log and ev.marker is None:
        return outcome.Outcome(Status.UNSUBMITTED, "no log yet")
    if recorded is not None:  # the scheduler's last word, as the manifest recorded it
        ev.asked = True
        ev.job = JobInfo(job_id=spec.job_id or "", status=recorded, state=str(recorded), reason=spec.state_reason,
                         exit_code=spec.exit_code)
    decided = outcome.decide(ev) or outcome.Outcome(res.status, res.reason)
    if recorded is not None and decided.status == recorded and spec.state_reason:
        return outcome.Outcome(recorded, spec.state_reason, decided.exit_code)  # the same verdict: its own words
    return decided


def _variant(cell: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in sorted((cell.get("params") or {}).items())]
    parts += [f"{k}={v}" for k, v in sorted((cell.get("env") or {}).items())]
    if cell.get("launcher_args"):
        parts.append("launcher_args=" + " ".join(map(str, cell["launcher_args"])))
    return ", ".join(parts)


def _row(spec: RunSpec, res: RunResult, published: str, unit: str, size: int | None, seconds: float) -> dict[str, Any]:
    cell = spec.cell
    x = res.extra or {}
    window = x.get("window") or {}
    job = x.get("job") or {}
    thr_time, thr_speed = res.throughput, res.throughput_speed
    main = thr_speed if published == "speed" else thr_time
    prov = {k: job.get(k) for k in ("job_id", "nodelist", "hostname", "gpus", "versions", "container_image",
                                    "command", "git") if job.get(k) is not None}
    small = {k: v for k, v in x.items() if k not in ("job", "window")}
    return {
        "campaign": spec.campaign, "suite": cell.get("suite"), "framework": cell.get("framework"),
        "model": cell.get("model"), "cell_id": cell.get("id"), "shape": cell.get("shape"),
        "nodes": int(cell.get("nodes", 0)), "gpus_per_node": int(cell.get("gpus_per_node", 0)),
        "devices": int(cell.get("nodes", 0)) * int(cell.get("gpus_per_node", 0)),
        "batch_size": int(cell.get("batch_size", 0)), "global_batch": int(cell.get("global_batch", 0)),
        "precision": cell.get("precision"), "xla": bool(cell.get("xla")), "launcher": cell.get("launcher") or "",
        "variant": _variant(cell), "repeat": spec.repeat, "run": spec.key,
        "job_id": spec.job_id or job.get("job_id"), "status": res.status, "reason": res.reason,
        "throughput": main, "throughput_time": thr_time, "throughput_speed": thr_speed, "published": published,
        "unit": unit, "latency_ms": res.latency_ms, "steps_seen": res.steps_seen,
        "window_start": window.get("start"), "window_end": window.get("end"), "window_steps": window.get("steps"),
        "mem_peak_mib": res.mem_peak_mib, "mem_gpu0_mib": res.mem_gpu0_mib,
        "mem_allocator_mib": res.mem_allocator_mib, "mem_reason": res.mem_reason, "gpu_util": res.gpu_util,
        "loss_finite": res.loss_finite, "tiny": bool(res.tiny), "exit_code": x.get("exit_code"),
        "scheduler_state": x.get("scheduler_state") or spec.state, "garbled_lines": x.get("garbled_lines", 0),
        "log": spec.log, "log_bytes": size, "parse_seconds": seconds,
        "provenance": prov, "extra": small,
    }


def parse_all(specs: Sequence[RunSpec], jobs: int | None = None) -> list[dict[str, Any]]:
    """Parse every run, in ``jobs`` processes (default: the CPUs this process may use); rows in input order."""
    if jobs is None:
        try:
            jobs = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            jobs = os.cpu_count() or 1
    jobs = max(1, min(jobs, len(specs)))
    if jobs == 1 or len(specs) < 32:
        return [parse_run(s) for s in specs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunk = max(1, min(64, len(specs) // (jobs * 8)))
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        return list(pool.map(parse_run, specs, chunksize=chunk))


# ================================================================================================ cells


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _baseline_key(c: dict[str, Any]) -> tuple:
    return (c.get("campaign") or "", c["suite"], c["precision"], bool(c["xla"]), int(c["batch_size"]),
            c.get("launcher") or "", c.get("variant") or "")


def _compute_rate(median: float | None, devices: int, ok: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Achieved model TFLOP/s per GPU and MFU, where the log states the model's FLOPs per sample (and the GPU's
    peak): median samples/s x FLOPs per sample / GPUs; MFU = that / peak."""
    extra = next((r["extra"] for r in ok if _num((r["extra"] or {}).get("flops_per_sample"))), None)
    if median is None or extra is None or devices <= 0:
        return {"tflops_per_gpu": None, "mfu": None}
    tflops = median * extra["flops_per_sample"] / devices / 1e12
    peak = extra.get("peak_tflops_per_gpu")
    return {"tflops_per_gpu": tflops, "mfu": tflops / peak if _num(peak) and peak > 0 else None}


def cells_of(runs: Sequence[dict[str, Any]], planned: dict[str, dict[str, Any]] | None = None,
             repeats: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """One row per cell: statistics of its OK runs (method.md), its status, flags, speedup and efficiency.

    ``planned``: cell id -> Cell.as_dict() for cells that may have no run row yet; ``repeats``: cell id ->
    the repeats the campaign planned (else the runs found)."""
    by_cell: dict[tuple, list[dict[str, Any]]] = {}
    order: list[tuple] = []
    for r in runs:  # a cell is one configuration of one campaign: two campaigns never pool their runs
        cid = (r["campaign"], r["cell_id"])
        if cid not in by_cell:
            by_cell[cid] = []
            order.append(cid)
        by_cell[cid].append(r)
    out = []
    for cid in order:
        rs = by_cell[cid]
        first = rs[0]
        n = max(len(rs), (repeats or {}).get(cid, (repeats or {}).get(cid[1], 0)))
        ok = [r for r in rs if r["status"] == Status.OK and _num(r["throughput"])]
        st = stats.summarize([r["throughput"] for r in ok], n)
        counts = Counter(r["status"] for r in rs)
        active = sum(counts.get(s, 0) for s in UNFINISHED)
        running = counts.get(Status.RUNNING, 0)
        status = Status.OK if ok else outcome.cell_status(counts)
        if ok:
            display = None
        elif active:
            waiting = counts.get(Status.PENDING, 0) + counts.get(Status.REQUEUED, 0)
            parts = [(running, "running"), (waiting, "pending"), (counts.get(Status.UNSUBMITTED, 0), "not submitted")]
            display = ", ".join(f"{word} {k}/{n}" for k, word in parts if k)
        else:
            display = status
        lat = [r["latency_ms"] for r in ok if _num(r["latency_ms"])]
        speed = [r["throughput_speed"] for r in ok if _num(r["throughput_speed"])]
        tput_time = [r["throughput_time"] for r in ok if _num(r["throughput_time"])]

        def peak(key: str, ok: list[dict[str, Any]] = ok) -> float | None:
            vals = [r[key] for r in ok if _num(r[key])]
            return max(vals) if vals else None

        reasons = Counter(r["reason"] for r in rs if r["status"] != Status.OK and r["reason"])
        mem_reasons = Counter(r["mem_reason"] for r in ok if r["mem_reason"] and not _num(r["mem_peak_mib"]))
        row = {k: first[k] for k in ("campaign", "suite", "framework", "model", "cell_id", "shape", "nodes",
                                     "gpus_per_node", "devices", "batch_size", "global_batch", "precision", "xla",
                                     "launcher", "variant", "unit", "published")}
        row.update({
            "n": n, "n_ok": st.n_ok, "status": status, "display": display,
            "statuses": dict(sorted(counts.items())),
            "median": st.median, "min": st.min, "max": st.max, "mean": st.mean, "stdev": st.stdev, "cv": st.cv,
            "median_time": stats.median(tput_time),
            "median_speed": stats.median(speed),
            "latency_ms": stats.median(lat),
            "mem_peak_mib": peak("mem_peak_mib"), "mem_gpu0_mib": peak("mem_gpu0_mib"),
            "mem_allocator_mib": peak("mem_allocator_mib"),
            "mem_reason": mem_reasons.most_common(1)[0][0] if mem_reasons else "",
            "gpu_util": stats.median([r["gpu_util"] for r in ok if _num(r["gpu_util"])]) if any(
                _num(r["gpu_util"]) for r in ok) else None,
            **_compute_rate(st.median, first["devices"], ok),
            "flags": list(st.flags) + (["tiny"] if any(r["tiny"] for r in rs) else []),
            "tiny": any(r["tiny"] for r in rs),
            "reason": reasons.most_common(1)[0][0] if reasons else "",
            "speedup": None, "efficiency": None, "baseline": None,
        })
        out.append(row)
    # speedup and efficiency against the 1x1 cell of the same suite, precision, xla, batch per device, variant
    base = {}
    for c in out:
        if c["nodes"] == 1 and c["gpus_per_node"] == 1:
            base[_baseline_key(c)] = c
    for c in out:
        b = base.get(_baseline_key(c))
        if b is not None:
            c["baseline"] = b["cell_id"]
            c["speedup"] = stats.speedup(c["median"], b["median"])
            c["efficiency"] = stats.efficiency(c["speedup"], c["devices"])
    return out


# ============================================================================================== driver


@dataclass
class Result:
    name: str
    collections: list[Collection]
    runs: list[dict[str, Any]]
    cells: list[dict[str, Any]]
    seconds: float
    bytes: int


def collect(collections: Sequence[Collection], jobs: int | None = None, name: str | None = None) -> Result:
    t0 = time.perf_counter()
    specs = [s for c in collections for s in c.runs]
    rows = parse_all(specs, jobs)
    repeats: dict[Any, int] = {}
    for c in collections:
        if c.repeats:
            for s in c.runs:
                repeats[(s.campaign, s.cell["id"])] = int(c.repeats)
    cells = cells_of(rows, repeats=repeats)
    total = sum(r["log_bytes"] or 0 for r in rows)
    return Result(name or "+".join(c.name for c in collections), list(collections), rows, cells,
                  time.perf_counter() - t0, total)


def keep_verdicts(campaign_dir: str | os.PathLike, rows: Sequence[dict[str, Any]]) -> int:
    """Record in the manifest the log verdicts this collect read for ended runs it had none for, with the
    status decided with them, so ``status`` and ``submit --retry-failed`` see what ``collect`` saw."""
    m = manifest.Manifest(campaign_dir)
    try:
        known = {r["key"]: r for r in m.runs("log_status IS NULL")}
        updates = [(r["status"], r["reason"] or "", str((r["extra"] or {}).get("log_status") or ""), r["run"])
                   for r in rows if r["run"] in known and known[r["run"]]["status"] in FINAL and r["status"] in FINAL]
        if updates:
            with m.write() as db:
                db.executemany("UPDATE runs SET status=?, reason=?, log_status=? WHERE key=? AND log_status IS NULL",
                               updates)
        return len(updates)
    finally:
        m.close()


def refresh_statuses(campaign_dir: Path, out=None) -> None:
    """Ask the scheduler about the campaign's active runs (as ``status`` does) before collecting; a failure to
    ask is a warning, never an error: the logs and exit markers still decide."""
    try:
        from dlperf_slurm import schedulers, tracking

        m = manifest.Manifest(campaign_dir)
        try:
            tracking.refresh(m, schedulers.for_campaign(campaign_dir, tracking.used_schedulers(m)))
        finally:
            m.close()
    except Exception as err:  # noqa: BLE001
        print(f"dlperf-slurm: warning: statuses not refreshed ({type(err).__name__}: {err})", file=out or sys.stderr)


# ================================================================================================= CLI


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


def cmd_collect(args) -> int:
    from dlperf_slurm import report

    t0 = time.perf_counter()
    collections: list[Collection] = []
    names = list(args.campaign or [])
    if args.from_dir:
        if not args.suite:
            raise UserError("--from DIR needs --suite NAME (how to read the logs), e.g. --suite ngc-pytorch/resnet50")
        collections.append(runs_from_tree(args.from_dir, args.suite, args.warmup_steps, args.measure_steps,
                                          _options(args.option),
                                          name=args.name if not names and not args.matrix else None))
    elif args.suite:
        raise UserError("--suite goes with --from DIR")
    if args.matrix:
        cdir = _campaign_dir(args.logs, names.pop(0)) if names else None
        site = False if args.no_site else args.site
        collections.append(runs_from_matrix(args.matrix, cdir, logs=args.logs, site=site))
    if not collections and not names:
        names = [str(manifest.find_campaign(args.logs, None))]
    for name in names:
        cdir = manifest.find_campaign(args.logs, name)
        if not args.no_refresh:
            refresh_statuses(cdir)
        collections.append(runs_from_campaign(cdir))
    result = collect(collections, jobs=args.jobs, name=args.name)
    for col in collections:
        if col.source == "manifest":
            keep_verdicts(col.where, [r for r in result.runs if r["campaign"] == col.name])
    paths = report.write_all(result, args.out, plots=not args.no_plots)
    if not args.quiet:
        print(report.terminal(result))
        print()
    mb = result.bytes / 1e6
    print(f"parsed {len(result.runs)} runs ({mb:.1f} MB of logs) in {result.seconds:.1f} s; "
          f"wrote {', '.join(str(p) for p in paths)} ({time.perf_counter() - t0:.1f} s in all)")
    return 0
