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


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake Slurm (tests/slurm/fakeslurm.py) first on PATH; returns its state file."""
    state = tmp_path / "slurm.json"
    for k, v in fakeslurm.install(tmp_path / "bin", state).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("DLPERF_SLURM_NO_SACCT", raising=False)
    return state
