"""The summary's markdown as HTML, for the HTML report's sections that have no form of their own there (the method,
the runs' line and the health gate's, notes, across suites, set-ups, the network, accuracy and W&D tables, Nodes
and stragglers): the markdown the summary writes (:func:`dlperf_slurm.report.writers.markdown`), in the few forms it
uses:
``##`` headings, GitHub tables, ``-`` lists, ``>`` quotes, paragraphs, ``**bold**`` and ```code```."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence


def inline(text: str) -> str:
    """A markdown line's text as HTML: escaped; ``**bold**`` and ```code``` kept; ``\\|`` a bar."""
    out = html.escape(text.replace("\\|", "|"), quote=False)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def sections(text: str) -> list[tuple[str, list[str]]]:
    """``(heading, lines)`` in order; the lines before the first ``##`` heading under heading ''."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((line[3:].strip(), []))
        elif not line.startswith("# "):
            out[-1][1].append(line)
    return out


def to_html(lines: Iterable[str]) -> str:
    """Markdown lines (no heading of level 1 or 2) as HTML."""
    out: list[str] = []
    block: list[str] = []
    kind = ""

    def flush() -> None:
        nonlocal kind
        if kind == "table" and block:
            head, body = _cells(block[0]), [_cells(b) for b in block[2:]]
            out.append("<table><thead><tr>" + "".join(f"<th>{inline(h)}</th>" for h in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in body)
                       + "</tbody></table>")
        elif kind == "list" and block:
            out.append("<ul>" + "".join(f"<li>{inline(b)}</li>" for b in block) + "</ul>")
        elif kind == "quote" and block:
            out.append('<p class="note">' + inline(" ".join(block)) + "</p>")
        elif kind == "para" and block:
            out.append("<p>" + inline(" ".join(block)) + "</p>")
        block.clear()
        kind = ""

    for line in [*lines, ""]:
        new = ("table" if line.startswith("|") else "list" if line.startswith("- ") else
               "quote" if line.startswith("> ") else "para" if line.strip() else "")
        if new != kind or new == "":
            flush()
            kind = new
        if new:
            block.append(line[2:] if new in ("list", "quote") else line)
    return "\n".join(out)


def extra_sections(markdown: str, skip: Sequence[str]) -> tuple[str, str]:
    """The HTML of the summary's preamble after its System section (the method, runs, health gate, notes), and of
    every section but ``skip``'s headings (the ones the HTML report draws itself) and the System section."""
    parts = sections(markdown)
    pre = [line for line in parts[0][1] if not line.startswith("Generated ")]
    rest = []
    for title, lines in parts[1:]:
        if title == "System":
            cut = next((i for i, line in enumerate(lines) if line.startswith("Method")), len(lines))
            pre += lines[cut:]  # the preamble the markdown writes after its System section
        elif title not in skip:
            rest.append(f"<h2>{inline(title)}</h2>\n{to_html(lines)}")
    return to_html(pre), "\n".join(rest)
