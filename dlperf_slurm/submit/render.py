"""Rendering: a run becomes one sbatch script, from the Jinja2 templates in ``templates/``.

Every value that reaches the shell goes through one quoting filter, ``q`` (``shlex.quote``); the
environment is ``StrictUndefined`` so a missing variable is an error, never an empty string.

The code every run shares (the start and the exit marker, the provenance probe, the health gate, the watchdog:
``templates/job.sh.j2``) is the campaign's :class:`JobCode`, written once into the campaign folder under a name
made of its hash; each run's script holds only what is its own and names that file with its whole sha256.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import subprocess
import traceback
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import jinja2

from dlperf_slurm import disk, events, launchers
from dlperf_slurm.disk import atomic_write, no_more_open_than
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.cell import Cell, Matrix, Run
from dlperf_slurm.schedulers.base import Resources, resources
from dlperf_slurm.suites import REPEAT, RUN_DIR

SBATCH_TEMPLATE = "sbatch.sh.j2"
JOB_CODE_TEMPLATE = "job.sh.j2"
JOB_CODE_DIR = ".job"  # in the campaign folder


def shell_quote(value: Any) -> str:
    """The one quoting filter: any value becomes one inert shell word."""
    if isinstance(value, bool):
        value = int(value)
    return shlex.quote(str(value))


def shell_join(values: Iterable[Any]) -> str:
    return " ".join(shell_quote(v) for v in values)


def python_args(argv: Sequence[str]) -> list[str]:
    """``python -m mod args`` -> ``-m mod args``: what torchrun-style launchers take after their options."""
    if argv and os.path.basename(argv[0]).startswith("python"):
        return list(argv[1:])
    return list(argv)


def python_exe(argv: Sequence[str]) -> str:
    """The interpreter of a ``python ...`` argv (what a launcher run as ``python -m launcher`` must be started
    with, so that it forks the program's own interpreter); ``python3`` when the argv names none."""
    if argv and os.path.basename(argv[0]).startswith("python"):
        return argv[0]
    return "python3"


def builtin_template_dir() -> Path:
    """The templates shipped with the package (``pip install .``) or, in a source checkout, ``./templates``."""
    here = Path(__file__).resolve().parents[1]  # the package's folder: dlperf_slurm/
    for candidate in (here.parent / "templates", here / "templates"):
        if (candidate / SBATCH_TEMPLATE).is_file():
            return candidate
    raise FileNotFoundError(f"dlperf_slurm templates not found next to {here}")


def check_template_dir(user_dir: str | None) -> None:
    """A user template folder that does not exist is an error, not a silent fall-back to the built-ins."""
    if user_dir and not Path(user_dir).is_dir():
        raise UserError(f"--templates {user_dir}: no such folder (it holds your templates that override the "
                        "built-in ones by name, e.g. launchers/torchrun.sh.j2)")


@lru_cache(maxsize=8)
def environment(user_dir: str | None = None) -> jinja2.Environment:
    """Jinja2 environment; a user template folder, when given, overrides any built-in template by name."""
    check_template_dir(user_dir)
    dirs = ([user_dir] if user_dir else []) + [str(builtin_template_dir())]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(dirs),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        auto_reload=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = shell_quote
    env.filters["qjoin"] = shell_join
    env.filters["pyargs"] = python_args
    env.filters["pyexe"] = python_exe
    env.globals["events"] = events  # the :::DLPERF names, for the job event of provenance.sh.j2
    env.globals["provprobe"] = provprobe_source()  # the provenance probe the job code carries (provenance.sh.j2)
    env.globals["disk"] = {"full_below_kib": disk.FULL_BELOW // 1024, "spare_bytes": disk.SPARE_BYTES}
    return env


def provprobe_source() -> str:
    """The provenance probe's source, as the campaign's job code carries it."""
    return (Path(__file__).resolve().parents[1] / "probes" / "provprobe.py").read_text().rstrip("\n")


@lru_cache(maxsize=1)
def tool_version() -> str:
    """dlperf_slurm's version, with its checkout's commit (``+g<sha>``, ``.dirty`` when it has changes) when it
    runs from a git checkout: what the job records as the tool that rendered it."""
    from dlperf_slurm import __version__

    here = Path(__file__).resolve().parents[1]  # the package's folder: dlperf_slurm/
    try:
        top = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10)
        if top.returncode != 0 or not (Path(top.stdout.strip()) / "dlperf_slurm").resolve() == here:
            return __version__
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{sha}{'.dirty' if dirty else ''}" if sha else __version__


#: Set-up lines whose failure ends the run (``source``/``.``, ``module``/``ml``, ``conda activate``,
#: ``spack load``), when the line is one plain command (no comment, no continuation).
_CHECKED_SETUP = re.compile(r"^\s*(source|\.|module|ml|conda\s+activate|spack\s+load)\s+\S")


def setup_lines(lines: Sequence[str]) -> list[tuple[str, str | None]]:
    """The matrix's set-up lines, each with the error line the script prints when it fails (None: not checked)."""
    out: list[tuple[str, str | None]] = []
    for line in lines:
        plain = not any(c in line for c in "#\\{}") and not line.rstrip().endswith(("|", "&&", "||", ";", "then",
                                                                                      "do"))
        out.append((line, events.setup_error_line(line.strip())
                    if plain and _CHECKED_SETUP.match(line) else None))
    return out


def program_path(argv: Sequence[str]) -> str | None:
    """The program's script (its first ``.py`` argument), whose checkout gives the program's own code version."""
    return next((str(a) for a in argv if str(a).endswith(".py")), None)


def run_resources(matrix: Matrix, run: Run, **kw: Any) -> Resources:
    """The neutral resources of one run (the scheduler turns them into its preamble)."""
    return resources(matrix, run, launchers.tasks_per_node(run.cell), **kw)


def cell_context(matrix: Matrix, cell: Cell) -> dict[str, Any]:
    """Everything a template may use that depends on the cell only (the same for all its repeats).

    The launcher registry says how the launcher enters the container: ``program`` is what the launcher starts
    on every rank (``apptainer exec IMAGE ...`` in front when the launcher starts one container per rank);
    ``container_prefix`` goes in front of the launcher's own command when the whole launcher must run in the
    image; ``through_srun`` tells a per-node template to start one task per node through srun."""
    suite, options = matrix.suite_of(cell), matrix.options_for(cell)
    env = dict(matrix.environment.env)
    env.update(suite.environment(cell, options))
    setup = matrix.setups.get(cell.setup) if cell.setup else None
    env.update(dict(setup.env) if setup else {})
    env.update(dict(cell.env))
    program = suite.program(cell, matrix.measure, options)
    files = sorted(suite.files(cell, matrix.measure, options).items())
    container = matrix.environment.container
    launcher = launchers.get(cell.launcher)
    plain_program = list(program)
    program, container_prefix, apptainer = _in_container(matrix, launcher, program)
    return {
        "cell": cell.as_dict(),
        "campaign": matrix.name,
        "suite": suite.name,
        "measure": dataclasses.asdict(matrix.measure),
        "modules": list(matrix.environment.modules),
        "setup": setup_lines(matrix.environment.setup),
        "umask": matrix.provenance.umask,
        "prov": {"python": python_exe(plain_program), "prefix": apptainer,
                 "srun": cell.nodes > 1 or container.type == "pyxis",
                 "conf": json.dumps({"allow": list(matrix.provenance.env_allow), "container": container.type,
                                     "deny": list(matrix.provenance.env_deny), "image": container.image,
                                     "imports": list(suite.node_imports(plain_program)),
                                     "program_path": program_path(plain_program), "tool": tool_version()},
                                    sort_keys=True)},
        "env": sorted(env.items()),
        "container": {"type": container.type, "image": container.image, "mounts": list(container.mounts),
                      "options": list(container.options)},
        "launcher": cell.launcher,
        "launcher_args": [*suite.launcher_args(cell), *(setup.launcher_args if setup else ()), *cell.launcher_args],
        "nodes": cell.nodes,
        "gpus_per_node": cell.gpus_per_node,
        "world_size": cell.devices,
        "program": program,
        # then rendered per run: the run's folder or its repeat in the program's argv
        "uses_run_dir": bool(files) or any(RUN_DIR in str(a) or REPEAT in str(a) for a in program),
        "files": files,  # the suite's files, written into the run's folder before the launch
        "container_prefix": container_prefix,
        "through_srun": launcher.through_srun(cell.nodes, container.type),
        "health": {**dataclasses.asdict(matrix.health),
                   "gpus": 0 if matrix.slurm.gpu_request == "none" else cell.gpus_per_node},
    }


def _in_container(matrix: Matrix, launcher: Any, program: list[str]) -> tuple[list[str], list[str], list[str]]:
    """How the launcher enters the matrix's container: the program each rank starts, what goes in front of the
    launcher's own command (the whole launcher in the image), and the ``apptainer exec`` words themselves."""
    container = matrix.environment.container
    if container.type != "apptainer":
        return program, [], []
    binds = [a for m in container.mounts for a in ("--bind", m)]
    nv = [] if matrix.slurm.gpu_request == "none" else ["--nv"]
    apptainer = ["apptainer", "exec", *nv, *binds, *container.options, container.image]
    if launcher.entry(container.type) is launchers.Entry.WRAP_PROGRAM:
        return [*apptainer, *program], [], apptainer
    return program, apptainer, apptainer  # WRAP_LAUNCHER


def run_context(run: Run, repeat: str | None = None) -> dict[str, Any]:
    """What differs between the repeats of a cell: the run's files. ``repeat``: a text in place of the repeat's
    number, wherever it appears (its key, its files' names)."""
    number = str(run.repeat) if repeat is None else repeat
    base = run.base.with_name(f"{run.cell.stem}_{number}")
    return {"run": {"key": f"{run.cell.id}.r{number}", "repeat": run.repeat if repeat is None else repeat,
                    "log": f"{base}.log", "marker": f"{base}.exit", "script": f"{base}.sbatch", "dir": f"{base}.work",
                    "campaign_dir": str(run.campaign_dir), "rel": str(base.relative_to(run.campaign_dir))}}


#: The prototype of a cell's scripts stands these words where its runs differ (shell-safe characters only: a value
#: quoted with them is quoted alike with the digits of a repeat, so putting those in is rendering the run).
_REPEAT_SLOT = "DLPERF0REPEAT0SLOT"
_PREAMBLE_SLOT = "DLPERF0PREAMBLE0SLOT\n"


@dataclasses.dataclass(frozen=True)
class JobCode:
    """The shell code every run of a campaign sources (``templates/job.sh.j2``): its text, its sha256, and its
    name in the campaign folder (``.job/<the hash's first 16 hex digits>.sh``). Content-addressed: a run's script
    names it with its whole hash and refuses a copy whose bytes do not hash so."""

    text: str
    sha256: str

    @property
    def name(self) -> str:
        return f"{JOB_CODE_DIR}/{self.sha256[:16]}.sh"

    @classmethod
    def of(cls, text: str) -> "JobCode":
        return cls(text, hashlib.sha256(text.encode()).hexdigest())

    def install(self, campaign_dir: Path) -> Path:
        """Write the file into ``campaign_dir`` unless it is there with these bytes; read-only (mode 444 under the
        umask). A copy with other bytes (changed by hand, a torn write) is replaced: the name says what it holds."""
        path = Path(campaign_dir) / self.name
        data = self.text.encode()
        try:
            if path.read_bytes() == data:
                return path
        except OSError:
            pass
        atomic_write(path, data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(path, 0o444 & ~umask)
        return path


@lru_cache(maxsize=8)
def job_code(template_dir: str | None = None) -> JobCode:
    """The campaign's job code as these templates render it (a user folder's ``job.sh.j2`` over the built-in)."""
    try:
        return JobCode.of(environment(template_dir).get_template(JOB_CODE_TEMPLATE).render())
    except jinja2.TemplateError as err:
        raise template_error(err) from err


class Renderer:
    """Renders the runs of one matrix; the launcher command is rendered once per cell. The script's preamble
    (its scheduler directives) is the scheduler's: :meth:`render` takes it as lines. The job code is rendered
    once; :meth:`install` writes it into a campaign folder (before any script that names it may start)."""

    def __init__(self, matrix: Matrix, template_dir: str | None = None):
        self.matrix = matrix
        env = environment(template_dir)
        try:
            self._sbatch = env.get_template(SBATCH_TEMPLATE)

        except jinja2.TemplateError as err:
            raise template_error(err) from err
        self.job_code = job_code(template_dir)
        self._env = env
        self._cells: dict[Cell, dict[str, Any]] = {}
        self._protos: dict[tuple[Cell, Path, str], str] = {}
        self._preambles: dict[tuple[Cell, Path, str], list[str]] = {}
        self._user_templates = bool(template_dir)
        self._installed: set[Path] = set()

    def install(self, campaign_dir: Path) -> Path:
        """The job code in ``campaign_dir`` (written there once per renderer and folder)."""
        path = Path(campaign_dir) / self.job_code.name
        if path not in self._installed:
            self.job_code.install(Path(campaign_dir))
            self._installed.add(path)
        return path

    def context(self, run: Run, repeat: str | None = None) -> dict[str, Any]:
        cell_ctx = self._cells.get(run.cell)
        if cell_ctx is None:
            cell_ctx = cell_context(self.matrix, run.cell)
            if not cell_ctx["uses_run_dir"]:
                cell_ctx["launch"] = self._launch(run.cell, cell_ctx)
            self._cells[run.cell] = cell_ctx
        ctx = {**cell_ctx, **run_context(run, repeat), "job_code": {"name": self.job_code.name,
                                                                       "sha256": self.job_code.sha256}}
        if cell_ctx["uses_run_dir"]:  # the run's own folder and repeat in place of suites.RUN_DIR and REPEAT
            number = str(run.repeat) if repeat is None else repeat
            ctx["program"] = [str(a).replace(RUN_DIR, ctx["run"]["dir"]).replace(REPEAT, number)
                              for a in cell_ctx["program"]]
            ctx["launch"] = self._launch(run.cell, ctx)
        return ctx

    def standalone(self, run: Run, scheduler: Any = None) -> str:
        """The script of one run for submitting by hand (``render``): :func:`standalone_preamble`'s directives,
        worked out once per cell where the cell renders once (its output file named with the repeat's slot)."""
        if self._user_templates:
            return self.render(run, standalone_preamble(self.matrix, run, scheduler))
        slot = (run.cell, run.campaign_dir, run.group)
        preamble = self._preambles.get(slot)
        if preamble is None:
            preamble = standalone_preamble(self.matrix, run, scheduler, repeat=_REPEAT_SLOT)
            self._preambles[slot] = preamble
        return self.render(run, preamble)

    def _launch(self, cell: Cell, ctx: dict[str, Any]) -> str:
        return self._env.get_template(launchers.get(cell.launcher).template).render(ctx).strip()

    def render(self, run: Run, preamble: Sequence[str]) -> str:
        """The job script of one run: the scheduler's preamble, then the launcher's command in the batch body.
        The built-in templates render once per cell (a prototype with slots for the repeat and the preamble);
        a user's own (``--templates``), which may compute with a run's values, render for every run."""
        try:
            if self._user_templates:
                return self._sbatch.render({**self.context(run), "preamble": list(preamble)})
            slot = (run.cell, run.campaign_dir, run.group)
            proto = self._protos.get(slot)
            if proto is None:
                proto = self._sbatch.render({**self.context(run, _REPEAT_SLOT), "preamble": [_PREAMBLE_SLOT[:-1]]})
                self._protos[slot] = proto
        except jinja2.TemplateError as err:  # a user template's mistake (--templates): one line, not a traceback
            raise template_error(err) from err
        # the preamble first: its lines may name the run's files with the repeat's slot too (:meth:`standalone`)
        return proto.replace(_PREAMBLE_SLOT, "".join(f"{line}\n" for line in preamble)) \
            .replace(_REPEAT_SLOT, str(run.repeat))


def template_error(err: jinja2.TemplateError) -> UserError:
    """A template's mistake as one line: the template file and line, and Jinja's words."""
    where = ""
    if isinstance(err, jinja2.TemplateSyntaxError):
        where = f"{err.filename or err.name}:{err.lineno}: "
    else:  # Jinja puts the template's own file and line into the traceback; the innermost one is the culprit
        for frame, line in traceback.walk_tb(err.__traceback__):
            if frame.f_code.co_filename.endswith(".j2"):
                where = f"{frame.f_code.co_filename}:{line}: "
    return UserError(f"{where}template error: {err}")


def standalone_preamble(matrix: Matrix, run: Run, scheduler: Any = None, repeat: str | None = None) -> list[str]:
    """The preamble of a script rendered for submitting by hand (``render``): Slurm's, named after the cell,
    its Slurm output beside the log. ``scheduler``: the campaign's SlurmScheduler, when the caller has one;
    ``repeat``: a text in place of the repeat's number in the output's name (:func:`run_context`)."""
    from dlperf_slurm.schedulers.slurm import SlurmScheduler

    base = run_context(run, repeat)["run"]["log"][:-len(".log")]
    res = run_resources(matrix, run, output=base + ".slurm-%j.out")
    return (scheduler or SlurmScheduler(run.campaign_dir)).preamble(res)


def render_run(matrix: Matrix, run: Run, template_dir: str | None = None) -> str:
    """The sbatch script of one run, as text (nothing written: the job code it names is :func:`write_scripts`')."""
    return Renderer(matrix, template_dir).standalone(run)


def write_scripts(matrix: Matrix, runs: Iterable[Run], template_dir: str | None = None) -> list[Path]:
    """Render and write every run's script next to its log (atomically, executable), and the campaign's job code
    they name, for submitting by hand; returns the scripts' paths."""
    from dlperf_slurm.schedulers.slurm import SlurmScheduler

    renderer = Renderer(matrix, template_dir)
    runs = list(runs)
    folders = sorted({r.campaign_dir for r in runs})
    with no_more_open_than([str(f) for f in folders], matrix.provenance.umask):
        schedulers = {folder: SlurmScheduler(folder) for folder in folders}
        for folder in folders:
            renderer.install(folder)
        return [atomic_write(run.script, renderer.standalone(run, schedulers[run.campaign_dir]), executable=True)
                for run in runs]
