"""Separate, cached virtual environments for the real-framework tests (their numpy pins conflict: MXNet wants
numpy<1.24, MindSpore and OneFlow numpy<2, TF/torch/paddle numpy 2).

Each framework has a requirements file beside this module (``<name>.txt``: pip lines, and ``--no-deps <pkg>``
lines installed after the rest; a ``# python: X.Y`` line names the interpreter the venv is made with, for a
framework with no build for this one: pyenv's newest ``X.Y.*``, else ``pythonX.Y`` on PATH; a ``# needs: VAR``
line names the variable its tests need besides, an upstream checkout: ``--all`` builds it only where that is set),
and optionally a
build script ``<name>.sh``, run with bash after pip with the venv's folder as its argument (for what pip alone
cannot install: a patched sdist). Its venv lives in ``$DLPERF_VENV_CACHE`` (default
``~/.cache/dlperf_slurm/venvs``) under ``<name>-<hash of the file(s)>`` (and of the interpreter's version), so a
changed file builds a new one and an unchanged one is reused between CI runs on the same machine. The
dlperf_slurm package itself is put on the
venv's path (a ``.pth`` file naming this checkout), never installed into it.

    python tests/frameworks/venvs.py [NAME ...|--all]    # build what is missing, print each venv's python
    python tests/frameworks/venvs.py --list
    python tests/frameworks/venvs.py --lock NAME ...     # write <name>.lock from its built venv

A ``<name>.lock`` beside the file (``pip freeze`` of a venv that passed the tests, less what pip did not install
from an index and this checkout) is given to every pip of the build as constraints (``PIP_CONSTRAINT``, so the
build script's pip too): a rebuild on a fresh machine gets the same versions of every package, the unpinned and
the transitive ones included, not whatever was released since.

Tests use :func:`python_for` (the venv's interpreter, or None with the reason: the test then skips and says how
to build it). A failed build leaves ``<venv>.failed`` with pip's output, and is not retried until the file
changes or that marker is removed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def cache_dir() -> Path:
    return Path(os.environ.get("DLPERF_VENV_CACHE", Path.home() / ".cache" / "dlperf_slurm" / "venvs"))


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.txt"))


def needs(name: str) -> list[str]:
    """The environment variables a framework's tests need besides its venv (``# needs: VAR`` lines of its file)."""
    return [line.split(":", 1)[1].strip() for line in (HERE / f"{name}.txt").read_text().splitlines()
            if line.startswith("# needs:")]


def requirements(name: str) -> tuple[list[str], list[str]]:
    """(pip requirement lines, --no-deps lines) of a framework's file."""
    deps, nodeps = [], []
    for line in (HERE / f"{name}.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("--no-deps "):
            nodeps.append(line[len("--no-deps "):].strip())
        else:
            deps.append(line)
    return deps, nodeps


def wanted_python(name: str) -> str | None:
    """The ``X.Y`` of a ``# python: X.Y`` line in the framework's file (None: this interpreter)."""
    for line in (HERE / f"{name}.txt").read_text().splitlines():
        key, _, value = line.lstrip("# ").partition(":")
        if line.startswith("#") and key.strip() == "python" and value.strip():
            return value.strip()
    return None


def interpreter(name: str) -> tuple[str | None, str]:
    """(the interpreter to make the venv with, its sys.version), or (None, why) when the wanted one is absent."""
    want = wanted_python(name)
    if want is None:
        return sys.executable, sys.version
    found = shutil.which(f"python{want}")
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(pyenv.glob(f"{want}.*/bin/python{want}"), key=lambda p: [
        int(x) if x.isdigit() else 0 for x in p.parents[1].name.split(".")])
    for exe in [c for c in [*reversed(candidates), found] if c]:
        p = subprocess.run([str(exe), "-c", "import sys; print(sys.version)"], capture_output=True, text=True)
        if p.returncode == 0:
            return str(exe), p.stdout.strip()
    return None, (f"{name} needs Python {want} (`# python: {want}` in {name}.txt): no python{want} on PATH "
                  f"nor in {pyenv}")


def build_script(name: str) -> Path | None:
    """The framework's optional build script ``<name>.sh`` (run after pip, with the venv's folder as $1)."""
    sh = HERE / f"{name}.sh"
    return sh if sh.exists() else None


def lock_file(name: str) -> Path | None:
    """The framework's optional ``<name>.lock`` (pip constraints: every package's version, as last tested)."""
    lock = HERE / f"{name}.lock"
    return lock if lock.exists() else None


def write_lock(name: str) -> Path:
    """``<name>.lock`` from the built venv's ``pip freeze`` (packages pip installed from an index only)."""
    py, why = python_for(name)
    if py is None:
        raise SystemExit(why)
    frozen = subprocess.run([str(py), "-m", "pip", "freeze", "--disable-pip-version-check"], capture_output=True,
                            text=True, check=True).stdout.splitlines()
    pins = sorted((line for line in frozen if "==" in line and " @ " not in line  # from an index
                   and not line.lower().startswith(("dlperf_slurm==", "dlperf-slurm=="))), key=str.lower)
    lock = HERE / f"{name}.lock"
    lock.write_text(f"# pip freeze of the {name} venv the tests passed with (`python tests/frameworks/venvs.py "
                    f"--lock {name}`); pip constraints\n" + "\n".join(pins) + "\n")
    return lock


def venv_dir(name: str) -> Path:
    version = interpreter(name)[1] if wanted_python(name) else sys.version
    # the .sh, when there is one, is hashed after the .txt: a venv without one keeps the hash it always had
    sh = build_script(name)
    lock = lock_file(name)
    text = ((HERE / f"{name}.txt").read_bytes() + (sh.read_bytes() if sh else b"")
            + (lock.read_bytes() if lock else b""))
    digest = hashlib.sha256(text + version.encode()).hexdigest()[:12]
    return cache_dir() / f"{name}-{digest}"


def python_for(name: str) -> tuple[Path | None, str]:
    """The venv's interpreter if it is built, else (None, why)."""
    exe, why = interpreter(name)
    if exe is None:
        return None, why
    v = venv_dir(name)
    py = v / "bin" / "python"
    if (v / ".complete").exists() and py.exists():
        return py, ""
    failed = Path(f"{v}.failed")
    if failed.exists():
        tail = failed.read_text().strip().splitlines()[-3:]
        return None, f"the {name} venv failed to build ({failed}): {' | '.join(tail)}"
    return None, f"no {name} venv: build it with `python tests/frameworks/venvs.py {name}` (cached in {cache_dir()})"


def build(name: str, out=print) -> Path | None:
    v = venv_dir(name)
    if (v / ".complete").exists():
        return v / "bin" / "python"
    failed = Path(f"{v}.failed")
    if failed.exists():
        out(f"{name}: skipped, an earlier build failed: {failed}")
        return None
    exe, why = interpreter(name)
    if exe is None:
        out(f"{name}: skipped: {why}")
        return None
    shutil.rmtree(v, ignore_errors=True)
    v.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    deps, nodeps = requirements(name)
    log = []
    steps = [[exe, "-m", "venv", str(v)]]
    pip = [str(v / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if deps:
        steps.append(pip + deps)
    if nodeps:
        steps.append(pip + ["--no-deps"] + nodeps)
    if build_script(name):
        steps.append(["bash", str(build_script(name)), str(v)])
    lock = lock_file(name)
    env = dict(os.environ, PIP_CONSTRAINT=str(lock)) if lock else None  # every pip of the build, the .sh's too
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        log.append(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}")
        if p.returncode != 0:
            failed.write_text("\n".join(log))
            shutil.rmtree(v, ignore_errors=True)
            out(f"{name}: FAILED after {time.time() - t0:.0f} s (see {failed})")
            return None
    site = next((v / "lib").glob("python*/site-packages"))
    (site / "dlperf_slurm_checkout.pth").write_text(str(REPO) + "\n")
    (v / ".complete").write_text(f"{time.time() - t0:.1f}\n")
    out(f"{name}: built in {time.time() - t0:.0f} s: {v}")
    return v / "bin" / "python"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--list"]:
        for n in names():
            py, why = python_for(n)
            print(f"{n}: {py or why}")
        return 0
    if argv[:1] == ["--lock"]:
        for n in argv[1:]:
            print(f"{n}: {write_lock(n)}")
        return 0
    if not argv or argv[:1] == ["--all"]:  # each venv whose tests can run here (no checkout they need: skipped)
        wanted = [n for n in names() if all(os.environ.get(v) for v in needs(n))]
        for n in sorted(set(names()) - set(wanted)):
            print(f"{n}: not built: its tests need {', '.join(needs(n))} (an upstream checkout), unset here")
    else:
        wanted = argv
    unknown = [n for n in wanted if n not in names()]
    if unknown:
        print(f"unknown framework venv(s): {', '.join(unknown)}; known: {', '.join(names())}", file=sys.stderr)
        return 2
    for n in wanted:
        build(n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
