"""A campaign against a published reference set (``python -m dlperf_slurm compare ref:dlperf-v100 NEW``).

A reference has ONE figure per case (a published median, an epoch average): no repeats, so no interval and no
faster/slower verdict. Each matched cell gets new/reference ("x0.62 of DLPerf's V100") and a plain list of the
conditions that differ between the campaign and the reference — GPU model (from the runs' provenance: the
``nvidia-smi`` lines of the job event), container, framework version, and for multi-node cells the interconnect —
and of those this tool cannot tell (data, interconnect: not recorded by ``collect``). Batch per device, precision
and XLA are the same by construction: they are part of the match (suite + shape + batch per device + precision +
XLA; the campaign cell's variant is ignored, see :mod:`dlperf_slurm.compare.references`).

The exit status is 0 whatever the ratios: a cell below a published figure measured elsewhere is not a regression.
Only ``--threshold F``, given explicitly, gates: exit 1 when a matched cell's ratio is below 1 - F or it has no OK
run.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm.compare import references
from dlperf_slurm.model.status import Status
from dlperf_slurm.outcome.decision import status_without_figure
from dlperf_slurm.words import plural

SAME, DIFFERS, UNKNOWN = "same", "differs", "unknown"


@dataclass(kw_only=True)
class RefRow:
    cell_id: str
    suite: str
    devices: str
    batch_size: int
    precision: str
    xla: bool
    new_median: float | None
    new_n: int
    status: str  # the campaign cell's status (OK when it has an OK run)
    unit: str
    reference: float | None  # the published figure (None: no figure for this cell)
    ratio: float | None  # new_median / reference
    source: str | None  # the README the figure comes from
    note: str  # the table's note
    also: list[str] = field(default_factory=list)  # the variant tables' figures for the same key
    mfu: str = ""  # the published model TFLOP/s per GPU against the GPU's peak and the ceiling measured here
    conditions: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> {status, here, reference}
    below_gate: bool = False

    @property
    def statement(self) -> str:
        """The conditions that differ, then those that cannot be told: what the ratio must be read with."""
        differ = [f"{k} ({c['here']} here; {c['reference']} in the reference)"
                  for k, c in self.conditions.items() if c["status"] == DIFFERS]
        unknown = [k for k, c in self.conditions.items() if c["status"] == UNKNOWN]
        same = [k for k, c in self.conditions.items() if c["status"] == SAME]
        parts = ["differs: " + ", ".join(differ) if differ else "no recorded condition differs"]
        if unknown:
            parts.append("not known here: " + ", ".join(unknown))
        parts.append("same: " + ", ".join(same))
        return "; ".join(parts)


# ================================================================================== the campaign's side


def _gpu_names(prov: Iterable[Mapping[str, Any]]) -> list[str]:
    """The GPU models the runs' job events saw (``nvidia-smi`` csv lines: index, name, driver, ...)."""
    names = set()
    for p in prov:
        for line in p.get("gpus") or []:
            fields = [f.strip() for f in str(line).split(",")]
            if len(fields) > 1 and fields[1]:
                names.add(fields[1])
    return sorted(names)


def _gpu_model(text: str) -> tuple[str | None, str | None]:
    """(model, memory) of a GPU name: 'Tesla V100-SXM2-16GB' -> ('V100', '16'); 'A100 80GB (DGX)' -> ('A100', '80')."""
    model = re.search(r"\b([A-Z]{1,2}\d{2,3}[A-Z]?)\b", text.replace("-", " ").upper())
    mem = re.search(r"(\d+)\s*GB", text.upper())
    return (model.group(1) if model else None), (mem.group(1) if mem else None)


#: the reference's framework (its first word) -> the distributions the job event's versions name it by
_FRAMEWORK_DISTS = {"pytorch": ("torch",), "tensorflow": ("tensorflow", "tensorflow-cpu"), "mxnet": ("mxnet",),
                    "oneflow": ("oneflow",), "paddlepaddle": ("paddlepaddle", "paddlepaddle-gpu"),
                    "mindspore": ("mindspore",)}


def _condition(status: str, here: str, reference: str) -> dict[str, str]:
    return {"status": status, "here": here, "reference": reference}


def conditions(runs: list[Mapping[str, Any]], ref_conditions: Mapping[str, str],
               entry: references.Entry) -> dict[str, dict[str, str]]:
    """What is the same, what differs and what this cell's runs did not record, against one reference figure."""
    prov = [r.get("provenance") or {} for r in runs]
    provenance_seen = any(prov)
    out: dict[str, dict[str, str]] = {}
    gpus = _gpu_names(prov)
    ref_gpu = ref_conditions.get("gpu", "")
    if not gpus:
        out["GPU"] = _condition(UNKNOWN, "not recorded (no nvidia-smi line in the runs' provenance)", ref_gpu)
    else:
        same = all(_gpu_model(g) == _gpu_model(ref_gpu) or (_gpu_model(g)[0] == _gpu_model(ref_gpu)[0]
                                                            and None in (_gpu_model(g)[1], _gpu_model(ref_gpu)[1]))
                   for g in gpus)
        out["GPU"] = _condition(SAME if same else DIFFERS, " + ".join(gpus), ref_gpu)
    images = sorted({p["container_image"] for p in prov if p.get("container_image")})
    ref_container = ref_conditions.get("container", "")
    if images:
        same = len(images) == 1 and images[0] == ref_container.split()[0]
        out["container"] = _condition(SAME if same else DIFFERS, " + ".join(images), ref_container)
    elif provenance_seen:
        out["container"] = _condition(DIFFERS if ref_container.startswith("nvcr.io") else UNKNOWN, "none",
                                      ref_container)
    else:
        out["container"] = _condition(UNKNOWN, "not recorded (no provenance)", ref_container)
    ref_fw = ref_conditions.get("framework", "")
    dists = _FRAMEWORK_DISTS.get(ref_fw.split(" ")[0].lower(), ())
    versions = sorted({(k, str(v)) for p in prov for k, v in (p.get("versions") or {}).items() if k in dists})
    if versions and not re.search(r"\d+\.\d+\.\d+", ref_fw):  # the reference names no version (NGC 21.03)
        out["framework"] = _condition(UNKNOWN, ", ".join(f"{k} {v}" for k, v in versions), ref_fw)
    elif versions:
        same = all(re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", ref_fw) for _, v in versions)
        out["framework"] = _condition(SAME if same else DIFFERS, ", ".join(f"{k} {v}" for k, v in versions), ref_fw)
    else:
        out["framework"] = _condition(UNKNOWN, "not recorded", ref_fw)
    tf32 = "TF32" in entry.note
    out["precision"] = _condition(UNKNOWN if tf32 else SAME, entry.precision,
                                  f"{entry.precision} ({entry.note})" if tf32 else entry.precision)
    out["batch per device"] = _condition(SAME, str(entry.batch_size), str(entry.batch_size))
    if entry.params:
        said = ", ".join(f"{k}={v}" for k, v in entry.params)
        out["settings"] = _condition(SAME, said, said)  # part of the match
    out["XLA"] = _condition(SAME, str(entry.xla).lower(), str(entry.xla).lower())
    out["data"] = _condition(UNKNOWN, "not recorded by collect", ref_conditions.get("data", ""))
    if entry.nodes > 1:
        out["interconnect"] = _condition(UNKNOWN, "not recorded by collect", ref_conditions.get("interconnect", ""))
    return out


def cell_settings(row: Mapping[str, Any]) -> tuple[dict[str, str] | None, dict[str, str]]:
    """(a run row's every extra axis of its suite, the suite's default where the cell's variant states none; the
    suite's defaults), as text, as a reference entry states its settings; (None, {}) for a suite this tool does not
    know."""
    from dlperf_slurm import suites

    try:
        suite = suites.get(str(row["suite"]))
    except KeyError:
        return None, {}
    said = dict(part.split("=", 1) for part in str(row.get("variant") or "").split(", ") if "=" in part)
    defaults = {k: str(suite.axis_defaults.get(k)) for k in suite.axes}
    return {k: said.get(k, defaults[k]) for k in suite.axes}, defaults


def _note(entry: references.Entry) -> str:
    """The entry's note, with the figure per GPU it was scaled from and the README's row it is."""
    parts = [entry.note] if entry.note else []
    if entry.per_gpu is not None:
        gpus = entry.nodes * entry.gpus_per_node
        parts.append(f"{figure(entry.per_gpu)} per GPU x {plural(gpus, 'GPU')}")
    if entry.row:
        parts.append(f"row {entry.row!r}")
    return "; ".join(parts)


def published_mfu(entry: references.Entry, ref_gpu: str, ceilings: Iterable[Mapping[str, Any]]) -> str:
    """The published model TFLOP/s per GPU as an MFU: against the reference GPU's datasheet peak for the precision,
    and against the matmul ceiling the compared campaign measured on a GPU of the same model in the same precision
    (``<campaign>/.ceiling/``: FP8 apart from 16-bit), or that none was measured; "" without a published TFLOP/s."""
    if entry.tflops_per_gpu is None:
        return ""
    from dlperf_slurm.workloads.peaks import peak_basis, peak_tflops

    tf = entry.tflops_per_gpu
    model = _gpu_model(ref_gpu)[0] or ref_gpu
    basis = peak_basis(entry.precision, False)
    parts = [f"{figure(tf)} model TFLOP/s per GPU"]
    peak = peak_tflops(ref_gpu, basis)
    parts.append(f"{100 * tf / peak:.1f}% of the {model}'s {basis} datasheet peak {peak:g}" if peak else
                 f"no {basis} datasheet peak of the {model} known here")
    same = [c for c in ceilings if str(c.get("precision")) == entry.precision
            and _gpu_model(str(c.get("device_name")))[0] == _gpu_model(ref_gpu)[0]]
    if same:
        best = max(same, key=lambda c: float(c["tflops"]))  # the best measured: a slow one must not inflate the MFU
        top = float(best["tflops"])
        parts.append(f"{100 * tf / top:.1f}% of the ceiling measured here ({top:.1f} TFLOP/s, "
                     f"{best.get('dtype', entry.precision)} on {best['device_name']})")
    else:
        parts.append(f"no {entry.precision} ceiling measured by the campaign on a GPU of that model ({model})")
    return "; ".join(parts)


def compare(runs: Iterable[Mapping[str, Any]], ref: references.ReferenceSet,
            threshold: float | None = None,
            ceilings: Iterable[Mapping[str, Any]] = ()) -> tuple[list[RefRow], list[str]]:
    """(a row per campaign cell that has a published figure, the ids of the cells that have none). ``ceilings``: the
    matmul ceilings the campaign measured (:func:`dlperf_slurm.probes.ceiling.kept`), for the published MFU."""
    ceilings = list(ceilings)
    cells: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        cells.setdefault(r["cell_id"], []).append(r)
    rows, unmatched = [], []
    for cid, rs in cells.items():
        first = rs[0]
        devices = f"{int(first['nodes'])}x{int(first['gpus_per_node'])}"
        entry, also = ref.lookup(first["suite"], devices, int(first["batch_size"]), first["precision"],
                                 bool(first["xla"]), *cell_settings(first))
        if entry is None:
            unmatched.append(cid)
            continue
        ok = [float(r["throughput"]) for r in rs
              if r["status"] == Status.OK and isinstance(r.get("throughput"), (int, float))]
        median = statistics.median(ok) if ok else None
        row = RefRow(cell_id=cid, suite=first["suite"], devices=devices, batch_size=entry.batch_size,
                     precision=entry.precision, xla=entry.xla, new_median=median, new_n=len(ok),
                     status=Status.OK if ok else status_without_figure(r["status"] for r in rs),
                     unit=first.get("unit") or "samples/s", reference=entry.value,
                     ratio=median / entry.value if median is not None else None, source=ref.url(entry),
                     note=_note(entry), also=[f"{e.variant}: {figure(e.value)}" for e in also],
                     mfu=published_mfu(entry, ref.conditions_for(entry.suite).get("gpu", ""), ceilings),
                     conditions=conditions(rs, ref.conditions_for(entry.suite), entry))
        if threshold is not None:
            row.below_gate = row.ratio is None or row.ratio < 1 - threshold
        rows.append(row)
    return rows, unmatched


# ============================================================================================= output


def figure(v: float) -> str:
    """A published figure as the README wrote it (less trailing zeros): 13442.66, 938."""
    return repr(v).removesuffix(".0")


def ratio_text(row: RefRow, ref: references.ReferenceSet) -> str:
    if row.ratio is None:
        return f"no OK run ({row.status})"
    return f"x{row.ratio:.2f} of {ref.label}"


def markdown(ref: references.ReferenceSet, new_name: str, rows: list[RefRow], unmatched: list[str],
             threshold: float | None) -> str:
    lines = [f"# {new_name} against {ref.title} ({ref.name})", "",
             f"Each cell's median beside {ref.label} published figure for the same suite, shape, batch per device, "
             f"precision and XLA ({ref.figure}). The conditions differ (below, per cell), so a ratio says how "
             "this campaign's number relates to that published one; it is not a verdict that one set-up is "
             "faster or slower than the other.", "",
             "Reference conditions: " + "; ".join(f"{k}: {v}" for k, v in ref.conditions.items()) + ".",
             f"Source: {ref.repository} at {ref.commit[:12]}.", ""]
    if threshold is not None:
        lines += [f"Gate asked for (--threshold {threshold}): a matched cell below {1 - threshold:.2f} of its "
                  "reference figure, or without an OK run, fails.", ""]
    lines += [f"| cell | median ({rows[0].unit if rows else ref.unit}) | runs | published | new/published | "
              "conditions | source |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        median = "—" if r.new_median is None else f"{r.new_median:,.2f}"
        published = f"{r.reference:,.2f}" + (f" ({r.note})" if r.note else "") + (f"; MFU: {r.mfu}" if r.mfu else "")
        if r.also:
            published += "; also published: " + ", ".join(r.also)
        ratio = ratio_text(r, ref) + (" **below the gate**" if r.below_gate else "")
        lines.append(f"| {r.cell_id} | {median} | {r.new_n} | {published} | {ratio} | {r.statement} | "
                     f"[README]({r.source}) |")
    lines += ["", plural(len(rows), 'cell has', 'cells have') + " a published figure"
              + (f"; {sum(r.below_gate for r in rows)} below the gate" if threshold is not None else "") + "."]
    if unmatched:
        lines += [f"No published figure in {ref.name} for {plural(len(unmatched), 'cell')} (suite, shape, batch per "
                  f"device, precision or XLA not in its tables; `python -m dlperf_slurm references {ref.name}`): "
                  + ", ".join(unmatched) + "."]
    return "\n".join(lines) + "\n"
