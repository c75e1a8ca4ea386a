"""Read a table out of a README's markdown the way a person finds it: follow a chain of headings (each the first
line after the previous one whose text, without its markdown marks, equals it), then take the first table after
the last one. Used by tests/test_references.py to check the shipped reference figures against the stored README
text (tests/fixtures/real/references/)."""

from __future__ import annotations

import re


def _norm(line: str) -> str:
    return " ".join(line.strip().lstrip("-#* ").split()).strip()


def cells(line: str) -> list[str]:
    return [c.strip().replace("**", "").strip() for c in line.strip().strip("|").split("|")]


def table(text: str, headings: list[str]) -> tuple[list[str], list[list[str]]]:
    """(header cells, body rows) of the first table after the heading chain; ValueError when a heading is missing."""
    lines = text.splitlines()
    pos = 0
    for h in headings:
        want = _norm(h)
        for i in range(pos, len(lines)):
            if not lines[i].lstrip().startswith("|") and _norm(lines[i]) == want:
                pos = i + 1
                break
        else:
            raise ValueError(f"heading {h!r} not found after line {pos}")
    start = next(i for i in range(pos, len(lines)) if lines[i].lstrip().startswith("|"))
    end = start
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    rows = [cells(x) for x in lines[start:end]]
    body = [r for r in rows[1:] if not all(re.fullmatch(r":?-+:?", c) for c in r)]
    return rows[0], body


def entries(text: str, headings: list[str], column: str, batch: int | None = None) -> list[tuple[str, int, str]]:
    """The table's (devices "NxG", batch per device, figure as written) rows: nodes from node_num / num_nodes /
    Nodes (else 1), GPUs per node from gpu_num_per_node / GPUs per node, or the total (gpu_num / GPUs) over the
    nodes; the batch from batch_size_per_device, else ``batch``; the figure from ``column``, its first word."""
    header, body = table(text, headings)
    low = [h.lower() for h in header]

    def col(*names: str) -> int | None:
        return next((low.index(n) for n in names if n in low), None)

    nodes_c, per_c = col("node_num", "num_nodes", "nodes"), col("gpu_num_per_node", "gpus / node")
    total_c, batch_c = col("gpu_num", "gpus"), col("batch_size_per_device")
    value_c = low.index(column.lower())
    out = []
    for r in body:
        nodes = int(r[nodes_c]) if nodes_c is not None else 1
        per = int(r[per_c]) if per_c is not None else int(r[total_c]) // nodes
        b = int(r[batch_c]) if batch_c is not None else batch
        out.append((f"{nodes}x{per}", b, r[value_c].split()[0]))
    return out


def labelled(text: str, headings: list[str], label_column: str, column: str) -> dict[str, str]:
    """A table whose rows are named, not keyed by GPUs (torchtitan's benchmarks: ``| FSDP + torch.compile | 6,667
    | 77.0 |``): row label -> the figure in ``column`` as written, thousands separators removed."""
    header, body = table(text, headings)
    low = [h.lower() for h in header]
    label_c, value_c = low.index(label_column.lower()), low.index(column.lower())
    return {r[label_c]: r[value_c].replace(",", "") for r in body}
