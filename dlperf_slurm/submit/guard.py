"""What ``submit`` checks before it writes or starts anything: that nothing runs on this machine by surprise
(:func:`local_refusal`), that a large submission is confirmed (:func:`confirm_size`), that the campaign folder can
be written (:func:`write_refusal`). Each refusal is one line: a :class:`~dlperf_slurm.errors.UserError`.

- ``--executor auto`` with no ``sbatch`` on PATH (a login node before ``module load slurm``) runs locally only a
  campaign that suits this machine: one that asks for no GPU (``[slurm] gpu_request = "none"``) or whose every
  suite is marked tiny or CPU (``[options] tiny = true``, ``device``/``clas_device = "cpu"``). ``--executor local``
  runs any campaign here.
- A submission above :data:`CONFIRM_RUNS` runs or :data:`CONFIRM_GPU_HOURS` GPU-hours (the time limit held by
  every run: ``plan``'s figure) asks for ``--yes``; the site file's ``[submit] confirm_above_runs`` and
  ``confirm_above_gpu_hours`` set the two bounds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix.gpuhours import gpu_hours
from dlperf_slurm.model.cell import Matrix, Run
from dlperf_slurm.words import noun, plural

CONFIRM_RUNS = 1000
CONFIRM_GPU_HOURS = 5000.0
SUBMIT_KEYS = ("confirm_above_runs", "confirm_above_gpu_hours")
#: suite options that mark a suite's runs as made for a machine without GPUs
_CPU_OPTIONS = (("tiny", True), ("device", "cpu"), ("clas_device", "cpu"))


def suits_this_machine(matrix: Matrix) -> bool:
    """Whether the campaign may run on a machine without Slurm unasked: no GPU asked, or every suite tiny or CPU."""
    if matrix.slurm.gpu_request == "none":
        return True
    return all(any(matrix.options.get(s.name, {}).get(k) == v for k, v in _CPU_OPTIONS) for s in matrix.suites)


def local_refusal(matrix: Matrix) -> str:
    """'' when ``--executor auto`` without sbatch may run the campaign here, else the one line that says why not."""
    if suits_this_machine(matrix):
        return ""
    gpus = sorted({c.devices for c in matrix.cells})
    each = f"{gpus[0]}" if len(gpus) == 1 else f"{gpus[0]} to {gpus[-1]}"
    return (f"no Slurm found (no sbatch on PATH: `module load slurm`?): campaign {matrix.name} asks for GPUs "
            f"({plural(matrix.runs, 'run', grouped=True)} of {each} {noun(gpus[-1], 'GPU')}, {matrix.slurm.time} "
            "each) and is not marked to run here (tiny, CPU): `--executor local` runs it on this machine anyway")


def limits(site: str | os.PathLike | None | Literal[False]) -> tuple[int, float]:
    """The submission size above which ``--yes`` is asked for: (runs, GPU-hours), the site file's ``[submit]``
    (``site``: as :func:`dlperf_slurm.matrix.loader.load` takes it) over the defaults."""
    from dlperf_slurm.matrix.sitefile import read_site
    from dlperf_slurm.matrix.toml_source import check_keys

    files = read_site(site)
    data, src = files.data, files.src
    table = data.get("submit", {})
    if src is None or not table:
        return CONFIRM_RUNS, CONFIRM_GPU_HOURS
    if not isinstance(table, dict):
        raise src.error("submit", "expected a table: [submit] confirm_above_runs, confirm_above_gpu_hours")
    check_keys(src, table, SUBMIT_KEYS, "submit")
    out: list[Any] = [CONFIRM_RUNS, CONFIRM_GPU_HOURS]
    for i, key in enumerate(SUBMIT_KEYS):
        value = table.get(key, out[i])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise src.error(f"submit.{key}", "expected a number >= 0 (0: every submission asks for --yes)")
        out[i] = value
    return int(out[0]), float(out[1])


def confirm_size(matrix: Matrix, runs: Sequence[Run], bounds: tuple[int, float], yes: bool) -> None:
    """Refuse (one line, showing what it asks for) a submission of ``runs`` above ``bounds`` unless ``yes``."""
    if yes or not runs:
        return
    asked = gpu_hours(matrix, [r.cell for r in runs])
    most_runs, most_hours = bounds
    if len(runs) <= most_runs and asked.hours <= most_hours:
        return
    basis = f"; {asked.basis()}" if asked.basis() else ""
    raise UserError(f"campaign {matrix.name}: this submit asks for {plural(len(runs), 'run', grouped=True)} and "
                    f"{asked.text()} (time limit {matrix.slurm.time} each{basis}), above "
                    f"{plural(most_runs, 'run', grouped=True)} or {most_hours:,.0f} GPU-hours (the site file's "
                    "[submit] confirm_above_runs, confirm_above_gpu_hours): `submit --yes` "
                    "submits it; `plan` lists its cells")


def write_refusal(campaign_dir: Path) -> str:
    """'' when ``submit`` can write the campaign folder (or it is not made yet), else the one line that says why
    not: a read-only mount, another user's folder (a full disk is told by the write that fails)."""
    from dlperf_slurm.campaign.folders import MANIFEST, why_read_only, writable

    if not (campaign_dir / MANIFEST).exists() or writable(campaign_dir):
        return ""
    why = why_read_only(campaign_dir) or "this user cannot write it"
    return (f"{campaign_dir}: {why}: submit writes the campaign (manifest, scripts, logs): make it writable by you, "
            "or submit under another name (--campaign NAME); status, collect --out DIR and compare only read it")
