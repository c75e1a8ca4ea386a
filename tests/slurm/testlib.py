"""Helpers shared by the submission tests (tests/test_{scheduler,campaign,executors,slurm_integration}.py, and the
health and provenance tests' tiny matrices)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"  # fake payloads driven by DLPERF_TEST_MODE (ok, fail, oom, sleep, wait)
REPO = HERE.parent.parent


def matrix_text(name: str = "t", devices=("1x1",), modes=("ok",), repeats: int = 2, time_limit: str = "00:10:00",
                launchers=("torchrun",), extra: str = "", slurm_extra: str = "") -> str:
    q = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"  # noqa: E731
    return f"""suite = "pytorch-ddp/resnet50"
name = "{name}"
[axes]
devices = {q(devices)}
batch_size = [1]
launcher = {q(launchers)}
"env.DLPERF_TEST_MODE" = {q(modes)}
[measure]
repeats = {repeats}
warmup_steps = 1
measure_steps = 1
[slurm]
time = "{time_limit}"
gpu_request = "none"
{slurm_extra}
{extra}
"""


def tiny_matrix_text(name: str, devices: str = "1x1", *, axes: str = "", slurm: str = "", extra: str = "") -> str:
    """A matrix of the built-in workload at its smallest (the tiny model, one thread, one repeat of one warm-up and
    two measured steps, no GPU asked for): ``axes`` lines join [axes], ``slurm`` lines [slurm]; ``extra`` follows."""
    return (f'suite = "pytorch-ddp/resnet50"\nname = "{name}"\n[axes]\ndevices = ["{devices}"]\nbatch_size = [2]\n'
            f"{axes}[options]\ntiny = true\nthreads = 1\n[measure]\nrepeats = 1\nwarmup_steps = 1\nmeasure_steps = 2\n"
            f'[slurm]\n{slurm}gpu_request = "none"\n{extra}')


def write_matrix(directory: Path, **kw) -> Path:
    p = directory / f"{kw.get('name', 't')}.toml"
    p.write_text(matrix_text(**kw))
    return p


def cli(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 300,
        check: bool = False) -> subprocess.CompletedProcess:
    """``python -m dlperf_slurm ARGS`` in a subprocess (the way users run it)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = f"{REPO}{os.pathsep}{full_env.get('PYTHONPATH', '')}"
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm", *args], capture_output=True, text=True, env=full_env,
                       cwd=cwd, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"dlperf_slurm {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def wait_until(predicate, timeout: float = 60, interval: float = 0.2, what: str = "condition"):
    end = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def cluster_up() -> str | None:
    """Why the Slurm tests cannot run here (None: the test cluster of tests/slurm/start.sh answers, n1 and n2)."""
    import shutil

    if shutil.which("scontrol") is None or shutil.which("sbatch") is None:
        return "no Slurm client on PATH (start the test cluster: bash tests/slurm/start.sh)"
    p = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if p.returncode != 0 or "UP" not in p.stdout:
        return f"no Slurm test cluster answers `scontrol ping` ({(p.stdout + p.stderr).strip()}); start it with " \
               "bash tests/slurm/start.sh"
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout.split()
    if not {"n1", "n2"} <= set(nodes):
        return f"the Slurm cluster up has nodes {sorted(set(nodes))}, the tests need n1 and n2 (tests/slurm/start.sh 2)"
    return None


def memory_enforced() -> str | None:
    """Why the running test cluster does not enforce a job's memory (None: it does: proctrack/cgroup, task/cgroup
    with ConstrainRAMSpace and memory as a consumable resource, i.e. tests/slurm/start.sh with SLURM_CI_CGROUP=1)."""
    why = cluster_up()
    if why is not None:
        return why
    import faults

    conf = faults.show_config()
    missing = [f"{k} = {conf.get(k, '?')}" for k, want in (("ProctrackType", "proctrack/cgroup"),
                                                            ("TaskPlugin", "task/cgroup"),
                                                            ("ConstrainRAMSpace", "yes"),
                                                            ("SelectTypeParameters", "MEMORY"))
               if want not in conf.get(k, "")]
    if missing:
        return ("the running Slurm test cluster does not enforce memory (" + ", ".join(missing) + "); restart it "
                "with SLURM_CI_CGROUP=1 bash tests/slurm/start.sh (.ci/run does, for `pytest -m cgroup`)")
    return None


def wait_campaign(cdir: Path, timeout: float = 300) -> dict[str, str]:
    """Wait (as ``status --wait`` does) until no run of the campaign is queued or running; its runs' statuses."""
    from dlperf_slurm import schedulers
    from dlperf_slurm.campaign import manifest, monitor

    m = manifest.Manifest(cdir)
    try:
        monitor.wait(m, schedulers.for_campaign(cdir), out=lambda s: None, timeout=timeout)
    finally:
        m.close()
    return {r.key: r.status for r in manifest.load_manifest(cdir)}


def submit_and_wait(tmp_path: Path, matrix_text: str, timeout: float = 300) -> tuple[Path, list]:
    """Write the matrix, ``submit`` it to the test cluster through the CLI, wait for it: (logs folder, its runs)."""
    import tomllib

    from dlperf_slurm.campaign import manifest

    name = tomllib.loads(matrix_text)["name"]
    mx = tmp_path / f"{name}.toml"
    mx.write_text(matrix_text)
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site")
    assert p.returncode == 0, p.stdout + p.stderr
    wait_campaign(logs / name, timeout)
    return logs, manifest.load_manifest(logs / name)


def collect_summary(logs: Path, name: str) -> dict:
    """``collect`` a campaign through the CLI (no plots); its JSON summary. A campaign whose every run failed exits
    1 saying so, and nothing else (dlperf_slurm/outcome/exitstatus.py): its summary is read as any other."""
    import json

    out = logs.parent / "summaries"
    p = cli("--logs", str(logs), "collect", name, "--no-plots", "--out", str(out))
    all_failed = p.returncode == 1 and p.stderr.strip().startswith("dlperf-slurm: collect fails: every run failed") \
        and len(p.stderr.strip().splitlines()) == 1
    assert p.returncode == 0 or all_failed, p.stdout + p.stderr
    return json.loads((out / f"{name}.json").read_text())


def nvidia_libs(python: Path | str) -> str:
    """LD_LIBRARY_PATH for a framework venv whose CUDA build links the nvidia-* wheels' libraries (OneFlow 0.9:
    cuDNN 8, cuBLAS 11; tests/frameworks/oneflow.txt): their lib folders in the venv of ``python``."""
    return ":".join(str(p) for p in sorted(Path(python).parent.parent.glob("lib/python3*/site-packages/nvidia/*/lib")))


def framework_on_cluster(name: str) -> tuple[Path | None, list]:
    """For a test that launches a real framework on the test cluster: the framework venv's python
    (``tests/frameworks/<name>.txt``) and the test module's marks, which skip it with the reason when the cluster
    or the venv is missing."""
    import pytest

    sys.path.insert(0, str(REPO / "tests" / "frameworks"))
    import venvs

    why = cluster_up()
    python, no_venv = venvs.python_for(name)
    return python, [pytest.mark.slurm, pytest.mark.slow, pytest.mark.skipif(why is not None, reason=why or ""),
                    pytest.mark.skipif(python is None, reason=no_venv)]


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "1m") mounted at ``where/fs`` for a disk-full or read-only fault, unmounted after;
    the test skips, saying why, without root or ``mount``."""
    import pytest

    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root and mount (a small tmpfs that fills)")
    fs = where / "fs"
    fs.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(fs)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield fs
    finally:
        subprocess.run(["umount", "-l", str(fs)], capture_output=True)


def fill(fs: Path) -> Path:
    """Write zeros until the file system is full (to its last 4 KiB block); the filler, to remove later."""
    filler = fs / "filler"
    with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as f:
        while True:
            f.write(b"\0" * 4096)
    assert shutil.disk_usage(fs).free < 4096 * 2
    return filler
