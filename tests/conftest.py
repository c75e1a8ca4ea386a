"""Shared pytest options. ``--update-golden`` rewrites the golden files instead of comparing with them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import fakeslurm  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current templates instead of comparing")


GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def golden(request):
    """``golden(name, text)``: compare a rendered script with ``tests/golden/<name>.sbatch`` (with
    ``--update-golden``: write it there first)."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / f"{name}.sbatch"
        if request.config.getoption("--update-golden"):
            path.write_text(text)
        assert path.is_file(), f"no golden file {path}: run pytest --update-golden"
        assert text == path.read_text(), f"{name}: rendered script differs from {path} (pytest --update-golden)"

    return check


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake Slurm (tests/slurm/fakeslurm.py) first on PATH; returns its state file."""
    state = tmp_path / "slurm.json"
    for k, v in fakeslurm.install(tmp_path / "bin", state).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("DLPERF_SLURM_NO_SACCT", raising=False)
    return state
