"""tests/frameworks/venvs.py: a framework's optional ``<name>.sh`` build step runs after pip with the venv's folder,
is part of the venv's hash, and leaves every framework without one on the hash it always had."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "frameworks"))
import venvs  # noqa: E402


def test_a_venv_without_build_script_keeps_its_hash():
    for name in venvs.names():
        if venvs.build_script(name) is None and venvs.wanted_python(name) is None:  # (oneflow: its own Python)
            digest = hashlib.sha256((venvs.HERE / f"{name}.txt").read_bytes() + sys.version.encode()).hexdigest()[:12]
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
