"""What a ``collect`` reads, gathered into a :class:`Collection` of runs (each a
:class:`~dlperf_slurm.collect.runparse.RunSpec`): a campaign's runs from its manifest (:func:`runs_from_campaign`),
a matrix's (:func:`runs_from_matrix`), or a DLPerf-style log tree's with no manifest at all (:func:`runs_from_tree`:
``DIR/<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log``; :func:`tree_suite`: which suite reads it)."""

from __future__ import annotations

import functools
import gc
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from dlperf_slurm.campaign import folders, manifest
from dlperf_slurm.collect.runparse import RunSpec
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import measure as measure_mod
from dlperf_slurm.model.cell import DEFAULT_MEASURE_STEPS, DEFAULT_WARMUP_STEPS, Cell, Target
from dlperf_slurm.words import plural

_TREE_NAME = re.compile(r"^(?P<model>.+?)_b(?P<bsz>\d+)_(?P<prec>[A-Za-z0-9]+)(?P<rest>(?:_[^_]+)*?)"
                        r"_(?P<rep>\d+)\.log$")
_SHAPE_DIR = re.compile(r"^(\d+)n(\d+)g$")
T = TypeVar("T")


@dataclass(kw_only=True)
class Collection:
    """What one source yields: its runs and what each cell should have (repeats)."""

    name: str
    source: Literal["manifest", "matrix", "tree"]
    where: str
    runs: list[RunSpec]
    repeats: int | None = None  # planned repeats per cell (None: as many as found)
    cells: list[Cell] = field(default_factory=list)  # every planned cell, runs or not
    notes: list[str] = field(default_factory=list)


def keeps_what_it_makes(fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn`` without cycle collection: every object a gatherer or :func:`collect` makes lives to the end, so
    collecting over them (and over a long-lived ``--watch`` process's last result) would be wasted work."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return run


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


@keeps_what_it_makes
def runs_from_campaign(campaign_dir: str | os.PathLike) -> Collection:
    """Runs of a campaign from its manifest (:func:`dlperf_slurm.campaign.manifest.load_campaign`), statuses as
    recorded."""
    info = manifest.load_campaign(campaign_dir)
    measure = info.measure or {}
    warm = int(measure.get("warmup_steps", DEFAULT_WARMUP_STEPS))
    meas = int(measure.get("measure_steps", DEFAULT_MEASURE_STEPS))
    target, epochs = measure_mod.target_of(measure)  # an accuracy campaign's (manifests since its recording)
    outs = _slurm_out_index(Path(r.log).parent for r in info.runs)
    runs = []
    for r in info.runs:
        log = str(r.log)
        slurm_out = ([str(r.slurm_out)] if r.slurm_out else []) + outs.get(log.removesuffix(".log"), [])
        runs.append(RunSpec(key=r.key, cell=r.cell, repeat=r.repeat, log=log, marker=str(r.marker), state=r.status,
                            state_reason=r.reason or "", job_id=r.job_id, exit_code=r.exit_code,
                            warmup_steps=(r.window or (warm, meas))[0], measure_steps=(r.window or (warm, meas))[1],
                            options=info.options_for(r.cell.suite), campaign=info.name,
                            slurm_out=slurm_out, log_status=r.log_status, log_id=r.log_id, target=target,
                            epochs=epochs, slurm_energy_j=r.slurm_energy_j))
    return Collection(name=info.name, source="manifest", where=str(info.dir), runs=runs, repeats=measure.get("repeats"),
                      cells=list(info.cells))


@keeps_what_it_makes
def runs_from_matrix(matrix_file: str | os.PathLike, campaign_dir: str | os.PathLike | None = None,
                     logs: str = "logs", site: Any = None) -> Collection:
    """Runs of a matrix (``matrix.runs(m, campaign_dir)``); statuses from the manifest when there is one."""
    from dlperf_slurm.matrix import loader as matrix_mod

    m = matrix_mod.load(matrix_file, site=site)
    cdir = Path(campaign_dir) if campaign_dir else Path(logs) / m.name
    states: dict[str, Any] = {}
    notes: list[str] = []
    try:
        if (cdir / folders.MANIFEST).exists():
            states = {r.key: r for r in manifest.load_manifest(cdir)}
    except Exception as err:  # noqa: BLE001 - a broken manifest must not stop a collect from the matrix
        notes.append(f"manifest not read ({type(err).__name__}: {err}); statuses from logs and exit markers only")
    runs = []
    plan = matrix_mod.runs(m, cdir)
    outs = _slurm_out_index(r.log.parent for r in plan)
    for r in plan:
        rec = states.get(r.key)
        spec = RunSpec(key=r.key, cell=r.cell, repeat=r.repeat, log=str(r.log), marker=str(r.marker),
                       warmup_steps=m.measure.warmup_steps, measure_steps=m.measure.measure_steps,
                       options=m.options_for(r.cell), campaign=m.name, slurm_out=outs.get(str(r.base), []),
                       target=m.measure.target, epochs=m.measure.epochs)
        if rec is not None:  # what the manifest recorded of it
            spec.state, spec.state_reason = rec.status, rec.reason
            spec.job_id, spec.exit_code = rec.job_id, rec.exit_code
            spec.slurm_out = ([str(rec.slurm_out)] if rec.slurm_out else []) + spec.slurm_out
            spec.log_status, spec.log_id = rec.log_status, rec.log_id
            spec.warmup_steps, spec.measure_steps = rec.window or (spec.warmup_steps, spec.measure_steps)  # it ran so
        runs.append(spec)
    return Collection(name=m.name, source="matrix", where=str(cdir), runs=runs, repeats=m.measure.repeats,
                      cells=list(m.cells), notes=notes)


@keeps_what_it_makes
def runs_from_tree(root: str | os.PathLike, suite_name: str, warmup_steps: int | None = None,
                   measure_steps: int | None = None, options: dict[str, Any] | None = None,
                   name: str | None = None, target: Target | None = None) -> Collection:
    """Runs of a tree laid out as DLPerf did, with no manifest: ``<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log``
    (any depth below ``root``; multi-digit node counts allowed). The suite says how to read the logs; the cell
    comes from the path (precision from the file name, ``_xla`` and other ``_tokens`` as variant, the subfolder
    above the shape folders as ``tree``); shape folders holding the logs of two models are refused. The window
    not given is the one DLPerf's extractor used on the suite's logs (``Suite.dlperf_window``), else 20 then 100.
    ``target``: the logs are accuracy runs, read against it (a suite whose parser reads no evaluation is refused)."""
    suite = _tree_reader(suite_name, target)
    warmup_steps, measure_steps, window_notes = _tree_window(suite, warmup_steps, measure_steps)
    typed = _tree_folder(root)
    # the tree is read at its real path: ``--from .``, ``--from ../tree``, ``/abs/tree`` and a symlink to it are one
    # tree (one summary name, the same rows, one parse cache beside the summaries)
    root = Path(os.path.realpath(typed))
    tree = _Tree(suite=suite, root=root, campaign=name or root.name, target=target,
                 window=(warmup_steps, measure_steps), options={**suite.options, **(options or {})})
    for d in _shape_dirs(root):
        tree.read_shape_folder(d)
    if not tree.runs:
        raise UserError(f"--from {typed}: no <N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log file found")
    _one_model_per_subtree(root, tree.models, typed)
    notes = ([f"{len(tree.skipped)} .log files with another name pattern were skipped (first: {tree.skipped[0]})"]
             if tree.skipped else [])
    return Collection(name=name or root.name, source="tree", where=str(root), runs=tree.runs,
                      notes=window_notes + notes)


def _tree_reader(suite_name: str, target: Target | None) -> Any:
    """The suite that reads a tree's logs; refused in one line when unknown, or when ``target`` asks for
    evaluations its parser does not read."""
    from dlperf_slurm import suites

    try:
        suite = suites.get(suite_name)
    except KeyError:
        raise UserError(f"unknown suite {suite_name!r}; known: {', '.join(suites.names())}") from None
    if target is not None and not (suite.evaluations or suite.accuracy):
        readers = [n for n in suites.names() if suites.get(n).evaluations or suites.get(n).accuracy]
        raise UserError(f"--target: {suite.name}'s parser reads no evaluation lines of its program (suites that "
                        f"do: {', '.join(readers)})")
    return suite


def _tree_window(suite: Any, warmup_steps: int | None, measure_steps: int | None) -> tuple[int, int, list[str]]:
    """The window a tree's logs are read with: as given, else the suite's DLPerf extraction window (said in a
    note), else the defaults; a window that cannot be is refused as a matrix's ``[measure]`` is."""
    notes = []
    if warmup_steps is None or measure_steps is None:
        dw, dm = suite.dlperf_window or (DEFAULT_WARMUP_STEPS, DEFAULT_MEASURE_STEPS)
        if suite.dlperf_window:
            notes.append(f"window: {suite.name}'s DLPerf extraction window, skip {plural(dw, 'step')}, time {dm} "
                         "(--warmup-steps/--measure-steps change it)")
        warmup_steps = dw if warmup_steps is None else warmup_steps
        measure_steps = dm if measure_steps is None else measure_steps
    for flag, value, least in (("--warmup-steps", warmup_steps, 0), ("--measure-steps", measure_steps, 1)):
        if value < least:  # as a matrix's [measure] (the window would silently become 0 -> 1 step)
            raise UserError(f"{flag} {value}: expected an integer >= {least}")
    return warmup_steps, measure_steps, notes


def _shape_dirs(root: Path) -> list[Path]:
    """Every ``<N>n<G>g`` folder at or below ``root``, in path order."""
    found = []
    for dirpath, dirnames, _files in os.walk(root):
        found += [os.path.join(dirpath, d) for d in dirnames if _SHAPE_DIR.match(d)]
    shape_dirs = [Path(d) for d in sorted(found, key=lambda d: Path(d).parts)]
    if _SHAPE_DIR.match(root.name):
        shape_dirs.insert(0, root)
    return shape_dirs


@dataclass(kw_only=True)
class _Tree:
    """A log tree being read: its runs, their cells (one per subtree, shape, batch, precision, XLA and variant),
    each subtree's models (:func:`_one_model_per_subtree`) and the ``.log`` files whose names it cannot read."""

    suite: Any
    root: Path
    campaign: str
    target: Target | None
    window: tuple[int, int]
    options: dict[str, Any]
    runs: list[RunSpec] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cells: dict[tuple, Cell] = field(default_factory=dict)
    models: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # subtree -> model -> its files

    def read_shape_folder(self, d: Path) -> None:
        """The runs of one shape folder's logs (with their exit markers and the jobs' own output files)."""
        root = self.root
        shape = _SHAPE_DIR.match(root.name if d is root else d.name)
        assert shape is not None  # _shape_dirs gives only such folders
        nodes, gpus = (int(x) for x in shape.groups())
        sub = d.parent.relative_to(root) if d.parent != root and root in d.parents else None
        try:
            with os.scandir(d) as it:
                names = sorted(e.name for e in it)
        except OSError:
            return
        present = set(names)
        folder = str(d)
        outs: dict[str, list[str]] = {}  # <stem>.slurm-<jobid>.out: the job's own output (kill banners)
        for n in names:
            if ".slurm-" in n and n.endswith(".out"):
                outs.setdefault(n.split(".slurm-")[0], []).append(os.path.join(folder, n))
        for fname in names:
            if not fname.endswith(".log"):
                continue
            log = os.path.join(folder, fname)
            m = _TREE_NAME.match(fname)
            if not m:
                self.skipped.append(log)
                continue
            self.models.setdefault(str(sub or ""), {}).setdefault(m.group("model"), []).append(log)
            cell = self._cell(m, sub, nodes, gpus)
            marker = fname[:-4] + ".exit"  # looked for once, here: most trees have none
            self.runs.append(RunSpec(key=f"{cell.id}.r{m.group('rep')}", cell=cell, repeat=int(m.group("rep")),
                                     log=log, marker=os.path.join(folder, marker) if marker in present else None,
                                     warmup_steps=self.window[0], measure_steps=self.window[1],
                                     options=self.options, target=self.target, campaign=self.campaign,
                                     slurm_out=outs.get(fname[:-4], [])))

    def _cell(self, m: re.Match, sub: Path | None, nodes: int, gpus: int) -> Cell:
        """The cell a log's name and folder say (subtrees never share a cell)."""
        rest = [t for t in m.group("rest").split("_") if t]
        bsz, prec, xla = int(m.group("bsz")), m.group("prec"), "xla" in rest
        variant = "_".join(t for t in rest if t != "xla")
        key = (str(sub or ""), nodes, gpus, bsz, prec, xla, variant)
        cell = self.cells.get(key)
        if cell is None:
            params = {"variant": variant} if variant else {}
            if sub is not None and str(sub) not in ("", "."):
                params["tree"] = str(sub)
            cell = self.cells[key] = Cell(suite=self.suite.name, model=self.suite.model,
                                          framework=self.suite.framework, nodes=nodes, gpus_per_node=gpus,
                                          batch_size=bsz, precision=prec, xla=xla, launcher="",
                                          params=tuple(sorted(params.items())))
        return cell


def _tree_folder(root: str | os.PathLike) -> Path:
    """``--from``'s folder as typed, refused in one line when it is none (a file, a missing path)."""
    typed = Path(root)
    if not typed.is_dir():
        raise UserError(f"--from {typed}: not a folder")
    return typed


def tree_logs(root: str | os.PathLike) -> list[str]:
    """The ``<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log`` files below ``root`` (or in it, when it is a shape
    folder), in path order."""
    root = Path(root)
    found = []
    for dirpath, _dirs, files in os.walk(root):
        if _SHAPE_DIR.match(os.path.basename(dirpath)):
            found += [os.path.join(dirpath, f) for f in files if _TREE_NAME.match(f)]
    return sorted(found)


_TREE_SUITES: dict[tuple[str, str], tuple[str, list[str]]] = {}  # one process (--watch): decided once a tree


def tree_suite(root: str | os.PathLike, suite_name: str | None) -> tuple[str, list[str]]:
    """:func:`_tree_suite`, once per tree and ``--suite`` in a process (``collect --watch`` gathers every round)."""
    key = (str(Path(root).resolve()), suite_name or "auto")
    if key not in _TREE_SUITES:
        _TREE_SUITES[key] = _tree_suite(root, suite_name)
    name, notes = _TREE_SUITES[key]
    return name, list(notes)


def _tree_suite(root: str | os.PathLike, suite_name: str | None) -> tuple[str, list[str]]:
    """The suite that reads a ``--from`` tree, and what to say of it. ``auto`` (or None): the suite whose parser
    finds steps in most of a sample of its logs (:func:`dlperf_slurm.suites.recognise.choose_suite`: ties go to the
    suite
    the tree's path and file names name, else the first in name order, and the note says so). A named suite that
    reads none of the sampled logs while other suites do is refused, with one line naming them (or the suite of the
    model the logs say they ran): its runs would all read as failures, or as another model's, and the summary of the
    tree's name be overwritten with them."""
    from dlperf_slurm import suites
    from dlperf_slurm.suites import recognise

    name = suite_name or "auto"
    if name != "auto":
        try:
            suites.get(name)
        except KeyError:
            raise UserError(f"unknown suite {name!r}; known: auto, {', '.join(suites.names())}") from None
    logs = tree_logs(_tree_folder(root))
    if not logs:
        if name == "auto":
            raise UserError(f"--from {root}: no <N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log file found")
        return name, []  # runs_from_tree says so
    hint = f"{Path(root).resolve()} " + " ".join(sorted({Path(p).name.split('_b')[0] for p in logs}))
    sample = recognise.sample(logs)
    if name != "auto":
        if any(recognise.readers(p, [name]) for p in sample):
            return name, []
        choice = recognise.choose_suite(logs, hint)
        if choice.suite is None:  # no suite reads them: failed runs, or a format nobody reads: their rows say
            return name, []
        others = recognise.rank_readers(list(choice.counts), hint)
        why = recognise.another_models_logs(sample, name) or (
            f"{name} finds no training step in any of {len(sample)} sampled logs (e.g. {sample[0]}); "
            f"{', '.join(others)} read them: --suite {choice.suite}")
        raise UserError(f"--from {root}: {why} (or leave --suite out: auto)")
    choice = recognise.choose_suite(logs, hint)
    if choice.suite is None:
        raise UserError(f"--from {root}: no registered suite finds a training step in any of {choice.sampled} "
                        f"sampled logs (e.g. {sample[0]}); give --suite NAME to read them as that suite's (each "
                        "run's reason then quotes its log)")
    note = (f"--suite auto: {choice.suite} (its parser reads {choice.counts[choice.suite]} of {choice.sampled} "
            f"sampled logs)" + (f"; {choice.note}" if choice.note else ""))
    return choice.suite, [note]


def _one_model_per_subtree(root: Path, models: dict[str, dict[str, list[str]]], typed: Path) -> None:
    """A tree's cells come from the shape folder and the rest of the file name, not its model part: the logs of
    two models side by side would pool into one cell (and one model's 1n1g cell would be the other's baseline).
    The model part cannot pick the suite's logs either: DLPerf names them r50_, rn50_, bert-base-adam-training_,
    and OneFlow's ResNet-50 logs bert_base_ (a copy-paste bug in its cp_logs.sh). So such a tree is refused."""
    for sub, found in models.items():
        if len(found) > 1:
            where = root / sub if sub else root
            names = ", ".join(f"{m} ({plural(len(logs), 'file')}, e.g. {Path(logs[0]).relative_to(root)})"
                              for m, logs in sorted(found.items()))
            raise UserError(f"--from {typed}: the shape folders of {where} hold the logs of "
                            f"{plural(len(found), 'model')}: {names}; they would pool into the same cells. Give each "
                            "model a folder of its own "
                            f"(as DLPerf keeps one log root per model, e.g. {root}/<model>/<N>n<G>g/...) and point "
                            "--from at it (subfolders of one --from stay apart)")


