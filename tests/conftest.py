"""Shared pytest options. ``--update-golden`` rewrites the golden files instead of comparing with them."""

from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current templates instead of comparing")
