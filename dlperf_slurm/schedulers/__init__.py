"""Scheduler backends behind one small registry (ReFrame's ``register_scheduler``): a backend is one module
with one :class:`~dlperf_slurm.schedulers.base.Scheduler` subclass, registered by name. The built-in ones
(``slurm``, ``local``) are imported on first lookup, so the CLI starts without them; a site or a test
registers its own with :func:`register`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from dlperf_slurm.errors import UserError
from dlperf_slurm.schedulers.base import Scheduler

_BUILTIN = {"slurm": "dlperf_slurm.schedulers.slurm", "local": "dlperf_slurm.schedulers.local"}
_REGISTRY: dict[str, type[Scheduler]] = {}
#: ``auto`` picks the first of these that is available on this machine
AUTO_ORDER = ["slurm", "local"]


def register(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator (or call): make a backend known by its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def _load(name: str) -> None:
    if name not in _REGISTRY and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])


def names() -> list[str]:
    return sorted(set(_BUILTIN) | set(_REGISTRY))


def get(name: str) -> type[Scheduler]:
    _load(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UserError(f"unknown executor {name!r}: expected auto, {', '.join(names())}") from None


def choose(kind: str, campaign_dir: str | Path, **options: Any) -> Scheduler:
    """The backend ``kind`` names (``auto``: the first available of :data:`AUTO_ORDER`)."""
    if kind == "auto":
        kind = next(n for n in AUTO_ORDER if get(n).available())
    return get(kind)(campaign_dir, **options)


def for_campaign(campaign_dir: str | Path, used: set[str] | None = None, default: Scheduler | None = None,
                 **options: Any) -> dict[str, Scheduler]:
    """The backends able to answer for a campaign's runs, by name: those its runs used (``used``; all built-in
    ones when None) that this machine has, plus ``default``."""
    out: dict[str, Scheduler] = {}
    for name in sorted(used if used is not None else set(_BUILTIN)):
        try:
            cls = get(name)
        except UserError:
            continue
        if cls.available():
            out[name] = cls(campaign_dir, **options)
    if default is not None:
        out[default.name] = default
    return out
