"""Tables of the seed studies that compare two programs in one campaign.

Tensorpack vs tf_cnn_benchmarks (tensorpack/benchmarks ``ResNet-MultiGPU/README.md``): per ``variable_update``
(replicated, parameter_server, horovod), precision, XLA and batch per GPU, rows = GPU counts and columns =
``tensorpack/resnet50`` per ``fake_location`` (the README's "tensorpack(GPU/CPU/Python)") and
``tf-cnn/resnet50`` (per ``local_parameter_device`` when the campaign has both), each the cell's median img/s
over its OK runs (its state, e.g. ``OOM``, without one). A section of the markdown summary only when the
campaign holds cells of both suites (tf_cnn's synthetic-data cells: the comparison is on fake data).
"""

from __future__ import annotations

from typing import Sequence

from dlperf_slurm.model.rows import CellRow
from dlperf_slurm.report.tables import value_text
from dlperf_slurm.report.widedeep import _defaults, params

TENSORPACK, TFCNN = "tensorpack/resnet50", "tf-cnn/resnet50"
_FAKE_ORDER = ("gpu", "cpu", "python-queue", "python-dataset", "zmq-consume")


def tensorpack_vs_tfcnn(cells: Sequence[CellRow]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) per variable_update x precision x XLA x batch; [] unless both suites have cells."""
    if not ({c.suite for c in cells} >= {TENSORPACK, TFCNN}):
        return []
    groups: dict[tuple, dict[tuple[str, int], CellRow]] = {}
    for c in cells:
        if c.suite not in (TENSORPACK, TFCNN):
            continue
        p = {**_defaults(c.suite), **params(c.variant)}
        if c.suite == TENSORPACK:
            column = f"tensorpack {p.get('fake_location', '?')}"
        elif p.get("data", "synthetic") != "synthetic":
            continue
        else:
            column = f"tf_cnn (local_parameter_device {p.get('local_parameter_device', 'gpu')})"
        key = (p.get("variable_update", "?"), c.precision, bool(c.xla), c.batch_size, c.campaign or "")
        groups.setdefault(key, {})[(column, c.devices)] = c
    out = []
    for (update, prec, xla, batch, _camp), by in sorted(groups.items()):
        cols = list(dict.fromkeys(col for col, _ in by))
        tp = sorted((x for x in cols if x.startswith("tensorpack ")),
                    key=lambda x: _FAKE_ORDER.index(x[11:]) if x[11:] in _FAKE_ORDER else len(_FAKE_ORDER))
        tf = sorted(x for x in cols if not x.startswith("tensorpack "))
        if len(tf) == 1:  # one tf_cnn column: the README's plain "tensorflow/benchmarks"
            by = {(("tf_cnn" if col == tf[0] else col), d): c for (col, d), c in by.items()}
            tf = ["tf_cnn"]
        cols = tp + tf
        rows = [[str(d)] + [value_text(by[(col, d)]) if (col, d) in by else "" for col in cols]
                for d in sorted({d for _, d in by})]
        title = f"variable_update {update} · {prec} · XLA {'on' if xla else 'off'} · batch {batch}/GPU"
        out.append((title, ["GPUs"] + [f"{col} (img/s)" for col in cols], rows))
    return out


def markdown(cells: Sequence[CellRow]) -> list[str]:
    """The summary's Tensorpack vs tf_cnn_benchmarks section (lines), or [] without cells of both suites."""
    from tabulate import tabulate

    found = tensorpack_vs_tfcnn(cells)
    if not found:
        return []
    lines = ["## Tensorpack vs tf_cnn_benchmarks (tensorpack/benchmarks ResNet-MultiGPU's table)", "",
             "Median img/s over the OK runs; tensorpack per --fake-location, tf_cnn_benchmarks on synthetic data.",
             ""]
    for title, headers, rows in found:
        lines += [f"**{title}**", "", tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
    return lines
