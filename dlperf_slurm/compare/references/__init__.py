"""Published reference figures shipped with the tool: one TOML file per set in this folder (``dlperf-v100``:
DLPerf's V100 tables; ``ngc-a100``: NVIDIA DeepLearningExamples' DGX A100 tables), each table copied from a README
and checked against its stored text by ``tests/test_references.py``.

A set has its conditions (GPU, nodes, interconnect, data, repeats, window), per suite what differs (framework,
container, code, GPU), and tables: a suite, a precision, XLA, an optional ``variant`` (another setting the README
also published, e.g. static loss scale), the README's path and headings, and rows ``[devices, batch, figure]``.

An entry is found by suite + shape (``NxG``) + batch per device + precision + XLA (:meth:`ReferenceSet.lookup`);
the table without a variant is THE figure for that key, the variant tables' figures come with it as "also
published". A campaign cell's own variant (its extra axes) plays no part in the match.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from dlperf_slurm.errors import UserError

PREFIX = "ref:"  # how compare names a reference set as its BASE: ref:dlperf-v100


@dataclass(frozen=True)
class Entry:
    """One published figure."""

    suite: str
    devices: str  # "NxG": nodes x GPUs per node
    batch_size: int  # per device
    precision: str
    xla: bool
    value: float
    variant: str  # "" for the README's main table; else the other setting it also published
    note: str
    source: str  # the README's path in the set's repository
    headings: tuple[str, ...]  # the headings above the table, in order
    column: str  # the table's column the figure comes from

    @property
    def key(self) -> tuple[str, str, int, str, bool]:
        return (self.suite, self.devices, self.batch_size, self.precision, self.xla)

    @property
    def nodes(self) -> int:
        return int(self.devices.split("x")[0])

    @property
    def gpus_per_node(self) -> int:
        return int(self.devices.split("x")[1])


@dataclass(frozen=True)
class ReferenceSet:
    name: str
    title: str
    label: str  # "DLPerf's V100": a ratio reads "x0.62 of DLPerf's V100"
    repository: str
    commit: str
    unit: str
    figure: str  # what one figure is (a median over repeats, an average over an epoch, ...)
    conditions: dict[str, str]
    suites: dict[str, dict[str, str]]  # per suite: framework, container, code (and gpu where it differs)
    entries: tuple[Entry, ...] = field(repr=False)

    def url(self, entry: Entry) -> str:
        """Where the figure's table is: the README at the set's commit."""
        return f"{self.repository}/blob/{self.commit}/{entry.source}"

    def conditions_for(self, suite: str) -> dict[str, str]:
        """The set's conditions with the suite's own on top (framework, container, code, gpu)."""
        return {**self.conditions, **self.suites.get(suite, {})}

    def lookup(self, suite: str, devices: str, batch_size: int, precision: str,
               xla: bool) -> tuple[Entry | None, list[Entry]]:
        """(the main figure for this key or None, the variant figures for the same key)."""
        key = (suite, devices, batch_size, precision, xla)
        found = [e for e in self.entries if e.key == key]
        main = next((e for e in found if not e.variant), None)
        return main, [e for e in found if e.variant]


def names() -> list[str]:
    """The shipped sets' names, sorted."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".toml"))


def load(name: str) -> ReferenceSet:
    """The set called ``name`` (``dlperf-v100``, or ``ref:dlperf-v100``); UserError naming the sets if none."""
    name = name.removeprefix(PREFIX)
    if name not in names():
        raise UserError(f"no reference set {name!r}: the shipped sets are {', '.join(names())} "
                        "(python -m dlperf_slurm references)")
    doc = tomllib.loads(resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8"))
    return parse(doc)


def parse(doc: dict[str, Any]) -> ReferenceSet:
    entries = []
    for t in doc.get("table", []):
        for devices, batch, value in t["rows"]:
            entries.append(Entry(suite=t["suite"], devices=devices, batch_size=int(batch), precision=t["precision"],
                                 xla=bool(t["xla"]), value=float(value), variant=t.get("variant", ""),
                                 note=t.get("note", ""), source=t["source"], headings=tuple(t["headings"]),
                                 column=t["column"]))
    return ReferenceSet(name=doc["name"], title=doc["title"], label=doc["label"], repository=doc["repository"],
                        commit=doc["commit"], unit=doc["unit"], figure=doc["figure"],
                        conditions=dict(doc["conditions"]), suites={k: dict(v) for k, v in doc["suite"].items()},
                        entries=tuple(entries))
