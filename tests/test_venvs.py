"""tests/frameworks/venvs.py: a framework's optional ``<name>.sh`` build step runs after pip with the venv's folder,
is part of the venv's hash, and leaves every framework without one on the hash it always had; its optional
``<name>.lock`` (pip freeze of the tested venv) is part of the hash, is given to pip as constraints and agrees with
the versions the requirements file pins."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "frameworks"))
import venvs  # noqa: E402


def test_a_venv_without_build_script_keeps_its_hash():
    for name in venvs.names():
        if venvs.build_script(name) is None and venvs.wanted_python(name) is None:  # (oneflow: its own Python)
            lock = venvs.lock_file(name)
            text = (venvs.HERE / f"{name}.txt").read_bytes() + (lock.read_bytes() if lock else b"")
            digest = hashlib.sha256(text + sys.version.encode()).hexdigest()[:12]
            assert venvs.venv_dir(name).name == f"{name}-{digest}"
    assert venvs.build_script("horovod") is not None  # the one that has a build step


def test_the_build_script_runs_with_the_venv_and_is_hashed(tmp_path, monkeypatch):
    here = tmp_path / "frameworks"
    here.mkdir()
    (here / "toy.txt").write_text("# nothing from pip\n")
    (here / "toy.sh").write_text('set -eu\n"$1/bin/python" -c "import sys; print(sys.prefix)" > "$1/built-by-sh"\n')
    monkeypatch.setattr(venvs, "HERE", here)
    monkeypatch.setenv("DLPERF_VENV_CACHE", str(tmp_path / "cache"))
    first = venvs.venv_dir("toy")
    py = venvs.build("toy", out=lambda s: None)
    assert py == first / "bin" / "python" and (first / "built-by-sh").read_text().strip() == str(first)
    assert venvs.python_for("toy") == (py, "")
    (here / "toy.sh").write_text('exit 3\n')  # a changed build step is a new venv; a failing one is recorded
    assert venvs.venv_dir("toy") != first
    assert venvs.build("toy", out=lambda s: None) is None
    assert venvs.python_for("toy")[0] is None and "failed" in venvs.python_for("toy")[1]


def test_the_lock_is_given_to_every_pip_as_constraints_and_is_hashed(tmp_path, monkeypatch):
    here = tmp_path / "frameworks"
    here.mkdir()
    (here / "toy.txt").write_text("numpy\n--no-deps tabulate==0.9.0\n")
    monkeypatch.setattr(venvs, "HERE", here)
    monkeypatch.setenv("DLPERF_VENV_CACHE", str(tmp_path / "cache"))
    unlocked = venvs.venv_dir("toy")
    (here / "toy.lock").write_text("# pins\nnumpy==1.26.4\ntabulate==0.9.0\n")
    assert venvs.venv_dir("toy") != unlocked
    ran = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    def run(cmd, **kw):
        ran.append((cmd, (kw.get("env") or {}).get("PIP_CONSTRAINT")))
        if cmd[1:3] == ["-m", "venv"]:  # a venv folder as venv makes it, without making one
            (Path(cmd[3]) / "lib" / "python3" / "site-packages").mkdir(parents=True)
        return Done()

    monkeypatch.setattr(venvs.subprocess, "run", run)
    assert venvs.build("toy", out=lambda s: None) is not None
    assert {env for _, env in ran} == {str(here / "toy.lock")}  # every step: the venv, both pips
    pips = [c for c, _ in ran if c[1:4] == ["-m", "pip", "install"]]
    assert len(pips) == 2 and pips[0][-1] == "numpy" and pips[1][-2:] == ["--no-deps", "tabulate==0.9.0"]


def _pins(lines):
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].replace("--no-deps", "").strip()
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s+;]+)(?:\+\S+)?", line)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def test_every_lock_agrees_with_its_requirements_file():
    locks = [n for n in venvs.names() if venvs.lock_file(n)]
    assert locks  # the frameworks' venvs are locked
    for name in locks:
        wanted = _pins((venvs.HERE / f"{name}.txt").read_text().splitlines())
        locked = _pins(venvs.lock_file(name).read_text().splitlines())
        for pkg, version in wanted.items():
            assert locked.get(pkg) == version, f"{name}.lock has {pkg} {locked.get(pkg)}, {name}.txt pins {version}"
