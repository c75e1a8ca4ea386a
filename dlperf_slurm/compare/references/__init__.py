"""Published reference figures shipped with the tool: one TOML file per set in this folder (``dlperf-v100``:
DLPerf's V100 tables; ``ngc-a100``: NVIDIA DeepLearningExamples' DGX A100 tables; ``torchtitan-h100``: torchtitan's
Llama 3.1 benchmarks on H100; ``megatron-bridge-h100``: Megatron-Bridge's LLM pre-training on DGX-H100), each
table copied from a README and checked against its stored text by ``tests/test_references.py``.

A set has its conditions (GPU, nodes, interconnect, data, repeats, window), per suite what differs (framework,
container, code, GPU), and tables: a suite, a precision, XLA, an optional ``variant`` (another setting the README
also published, e.g. static loss scale), the README's path and headings, and rows ``[devices, batch, figure]``.

An entry is found by suite + shape (``NxG``) + batch per device + precision + XLA (:meth:`ReferenceSet.lookup`);
the table without a variant is THE figure for that key, the variant tables' figures come with it as "also
published". A campaign cell's own variant (its extra axes) plays no part in the match, except for an entry that
states its own settings (``params``: a table's, and a row's as a fourth element ``{row = "the README's row label",
k = v}``; an LLM's model, sequence length and parallel layout; and ``tflops_per_gpu``, the model TFLOP/s per GPU
published beside the figure, which is no setting): then every extra axis of the cell must be the
entry's value, or the suite's default where the entry states none. A table with ``per_gpu = true`` publishes a
figure per GPU: the entry's figure is that times the shape's GPUs, in the unit of the campaign's.
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
    params: tuple[tuple[str, str], ...] | None = None  # the settings the entry states (None: a table of the older
    # kind, which states none and matches any variant of the cell), values as text
    per_gpu: float | None = None  # the figure per GPU the README printed, where value is it x GPUs
    row: str = ""  # the README's row label, where its rows are named (not keyed by GPUs)
    tflops_per_gpu: float | None = None  # the model TFLOP/s per GPU the README published beside the figure

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

    def lookup(self, suite: str, devices: str, batch_size: int, precision: str, xla: bool,
               params: dict[str, str] | None = None,
               defaults: dict[str, str] | None = None) -> tuple[Entry | None, list[Entry]]:
        """(the main figure for this key or None, the variant figures for the same key). ``params``: the cell's
        every extra axis (text), which an entry that states settings must equal: each it states, and the others
        at the suite's ``defaults``."""
        key = (suite, devices, batch_size, precision, xla)
        found = [e for e in self.entries if e.key == key and (e.params is None or params is None
                                                               or _same_settings(e.params, params, defaults or {}))]
        main = next((e for e in found if not e.variant), None)
        return main, [e for e in found if e.variant]


def _same_settings(stated: tuple[tuple[str, str], ...], cell: dict[str, str], defaults: dict[str, str]) -> bool:
    """The cell's settings are the entry's: each it states, and each it does not at its default."""
    entry = {**defaults, **dict(stated)}
    return all(cell.get(k) == v for k, v in entry.items()) and all(k in entry for k in cell)


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
        for devices, batch, value, *own in t["rows"]:
            stated = {**t.get("params", {}), **(own[0] if own else {})}
            label = str(stated.pop("row", ""))
            tflops = stated.pop("tflops_per_gpu", None)
            gpus = int(devices.split("x")[0]) * int(devices.split("x")[1])
            per_gpu = float(value) if t.get("per_gpu") else None
            entries.append(Entry(suite=t["suite"], devices=devices, batch_size=int(batch), precision=t["precision"],
                                 xla=bool(t["xla"]), value=float(value) * (gpus if per_gpu else 1),
                                 variant=t.get("variant", ""), note=t.get("note", ""), source=t["source"],
                                 headings=tuple(t["headings"]), column=t["column"], row=label, per_gpu=per_gpu,
                                 tflops_per_gpu=float(tflops) if tflops is not None else None,
                                 params=tuple(sorted((k, str(v)) for k, v in stated.items())) if "params" in t
                                 or own else None))
    return ReferenceSet(name=doc["name"], title=doc["title"], label=doc["label"], repository=doc["repository"],
                        commit=doc["commit"], unit=doc["unit"], figure=doc["figure"],
                        conditions=dict(doc["conditions"]), suites={k: dict(v) for k, v in doc["suite"].items()},
                        entries=tuple(entries))
