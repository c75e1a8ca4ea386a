"""Rendering: a run becomes one sbatch script, from the Jinja2 templates in ``templates/``.

Every value that reaches the shell goes through one quoting filter, ``q`` (``shlex.quote``); the
environment is ``StrictUndefined`` so a missing variable is an error, never an empty string.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import jinja2

from dlperf_slurm.files import atomic_write
from dlperf_slurm.matrix import Cell, Matrix, Run

SBATCH_TEMPLATE = "sbatch.sh.j2"


@dataclass(frozen=True)
class Launcher:
    """How a launcher spreads ranks: ``per_gpu`` launchers get one Slurm task per GPU (srun) or start every
    rank themselves from the batch shell (mpirun, horovodrun); ``per_node`` launchers run one task per node
    that forks the GPUs' processes (torchrun, paddle, oneflow, TF multi-worker)."""

    name: str
    tasks: str  # "per_gpu" or "per_node"
    needs_srun_across_nodes: bool  # multi-node needs srun to reach the other nodes
    description: str


LAUNCHERS: dict[str, Launcher] = {
    l.name: l
    for l in (
        Launcher("srun", "per_gpu", True, "srun starts one task per GPU; ranks from SLURM_PROCID"),
        Launcher("mpirun", "per_gpu", False, "OpenMPI mpirun from the batch shell, -H host:G per node"),
        Launcher("horovodrun", "per_gpu", False, "horovodrun -np W -H host:G per node"),
        Launcher("torchrun", "per_node", True, "torchrun per node, c10d rendezvous on the first node"),
        Launcher("paddle", "per_node", True, "python -m paddle.distributed.launch per node"),
        Launcher("oneflow", "per_node", True, "python -m oneflow.distributed.launch per node"),
        Launcher("tf_config", "per_node", True, "one TF MultiWorkerMirrored worker per node, TF_CONFIG from the node list"),
    )
}


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


def builtin_template_dir() -> Path:
    """The templates shipped with the package (``pip install .``) or, in a source checkout, ``./templates``."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "templates", here / "templates"):
        if (candidate / SBATCH_TEMPLATE).is_file():
            return candidate
    raise FileNotFoundError(f"dlperf_slurm templates not found next to {here}")


@lru_cache(maxsize=8)
def environment(user_dir: str | None = None) -> jinja2.Environment:
    """Jinja2 environment; a user template folder, when given, overrides any built-in template by name."""
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
    return env


def directives(matrix: Matrix, run: Run) -> dict[str, Any]:
    """The sbatch options of one run, as ``{option: value}`` (value True for a bare flag).

    The single source for both the ``#SBATCH`` lines of the script and the submitit parameters.
    """
    cell, s = run.cell, matrix.slurm
    launcher = LAUNCHERS[cell.launcher]
    d: dict[str, Any] = {
        "job-name": f"dlperf.{cell.id}",
        "nodes": cell.nodes,
        "ntasks-per-node": cell.gpus_per_node if launcher.tasks == "per_gpu" else 1,
        "time": s.time,
    }
    if s.gpu_request == "gpus-per-node":
        d["gpus-per-node"] = cell.gpus_per_node
    elif s.gpu_request == "gres":
        d["gres"] = f"gpu:{cell.gpus_per_node}"
    for key in ("partition", "account", "qos", "constraint", "mem"):
        if getattr(s, key):
            d[key] = getattr(s, key)
    if s.cpus_per_task:
        d["cpus-per-task"] = s.cpus_per_task
    if s.exclusive:
        d["exclusive"] = True
    return d


def directive_lines(d: dict[str, Any], extra: Iterable[str] = ()) -> list[str]:
    """sbatch options as command-line words: ``--name=value``, or ``--name`` for a bare flag."""
    lines = [f"--{k}" if v is True else f"--{k}={v}" for k, v in d.items()]
    return lines + list(extra)


def cell_context(matrix: Matrix, cell: Cell) -> dict[str, Any]:
    """Everything a template may use that depends on the cell only (the same for all its repeats)."""
    suite = matrix.suite
    env = dict(matrix.environment.env)
    env.update(suite.environment(cell, matrix.options))
    env.update(dict(cell.env))
    program = suite.program(cell, matrix.measure, matrix.options)
    container = matrix.environment.container
    if container.type == "apptainer":
        binds = [a for m in container.mounts for a in ("--bind", m)]
        nv = [] if matrix.slurm.gpu_request == "none" else ["--nv"]
        program = ["apptainer", "exec", *nv, *binds, *container.options, container.image, *program]
    return {
        "cell": cell.as_dict(),
        "campaign": matrix.name,
        "suite": suite.name,
        "measure": {"repeats": matrix.measure.repeats, "warmup_steps": matrix.measure.warmup_steps,
                    "measure_steps": matrix.measure.measure_steps},
        "modules": list(matrix.environment.modules),
        "setup": list(matrix.environment.setup),
        "env": sorted(env.items()),
        "container": {"type": container.type, "image": container.image, "mounts": list(container.mounts),
                      "options": list(container.options)},
        "launcher": cell.launcher,
        "launcher_args": list(cell.launcher_args),
        "nodes": cell.nodes,
        "gpus_per_node": cell.gpus_per_node,
        "world_size": cell.devices,
        "program": program,
    }


def run_context(run: Run) -> dict[str, Any]:
    """What differs between the repeats of a cell: the run's files."""
    base = str(run.base)
    return {
        "run": {"key": run.key, "repeat": run.repeat, "log": base + ".log", "marker": base + ".exit",
                "script": base + ".sbatch"},
        "slurm_output": base + ".slurm-%j.out",
    }


class Renderer:
    """Renders the runs of one matrix; the launcher command is rendered once per cell."""

    def __init__(self, matrix: Matrix, template_dir: str | None = None):
        self.matrix = matrix
        env = environment(template_dir)
        self._sbatch = env.get_template(SBATCH_TEMPLATE)
        self._env = env
        self._cells: dict[Cell, dict[str, Any]] = {}

    def context(self, run: Run) -> dict[str, Any]:
        cell_ctx = self._cells.get(run.cell)
        if cell_ctx is None:
            cell_ctx = cell_context(self.matrix, run.cell)
            launcher = self._env.get_template(f"launchers/{cell_ctx['launcher']}.sh.j2")
            cell_ctx["launch"] = launcher.render(cell_ctx).strip()
            cell_ctx["directives"] = directive_lines(directives(self.matrix, run), self.matrix.slurm.extra_directives)
            self._cells[run.cell] = cell_ctx
        return {**cell_ctx, **run_context(run)}

    def render(self, run: Run) -> str:
        """The sbatch script of one run: the launcher's command inside the batch script."""
        return self._sbatch.render(self.context(run))


def render_run(matrix: Matrix, run: Run, template_dir: str | None = None) -> str:
    """The sbatch script of one run."""
    return Renderer(matrix, template_dir).render(run)


def write_scripts(matrix: Matrix, runs: Iterable[Run], template_dir: str | None = None) -> list[Path]:
    """Render and write every run's script next to its log (atomically, executable); returns the paths."""
    renderer = Renderer(matrix, template_dir)
    return [atomic_write(run.script, renderer.render(run), executable=True) for run in runs]
