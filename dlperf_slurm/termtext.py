"""Tables that fit a terminal: :func:`fit_table` leaves out the columns a user can do without (said in one line,
:func:`left_out_line`) and cuts long cells until a table fits :data:`TERMINAL_WIDTH` columns (``--wide``: every
column, whole); ``status``, ``compare``, ``history`` and ``plan`` print with it."""

from __future__ import annotations

from collections.abc import Sequence

#: the width terminal tables fit by default (the files keep every column; ``--wide`` prints them all)
TERMINAL_WIDTH = 100


def fit_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, wide: bool = False,
              drop: Sequence[str] = (), cut: Sequence[str] = (), tablefmt: str = "simple",
              width: int = TERMINAL_WIDTH) -> tuple[str, list[str]]:
    """A table as tabulate prints it, fitting ``width`` columns unless ``wide``: first the headers wider than their
    values wrap at their spaces; then the columns whose header starts with one of ``drop`` are left out, in that
    order, until it fits; then the values of the columns named in ``cut`` (free text: reasons), then of the widest
    column, are cut (ending in "…") until it does. Returns the text and the headers left out."""
    import textwrap

    from tabulate import tabulate

    def render(h: Sequence[str], r: Sequence[Sequence[str]]) -> str:
        if tablefmt == "github":
            fast = github_table(h, r)
            if fast is not None:
                return fast
        return tabulate(r, headers=list(h), tablefmt=tablefmt, disable_numparse=True)

    def too_wide(text: str) -> int:
        return max((len(line) for line in text.splitlines()), default=0) - width

    h, r = list(headers), [list(map(str, row)) for row in rows]
    text = render(h, r)
    if wide or too_wide(text) <= 0:
        return text, []
    for k, name in enumerate(h):
        values = max((len(row[k]) for row in r), default=0)
        if len(name) > max(values, 8):
            h[k] = "\n".join(textwrap.wrap(name, max(values, 8), break_long_words=False))
    text = render(h, r)
    dropped: list[str] = []
    for prefix in drop:
        if too_wide(text) <= 0:
            return text, dropped
        i = next((k for k, name in enumerate(h) if name.replace("\n", " ").startswith(prefix)), None)
        if i is None:
            continue
        dropped.append(h.pop(i).replace("\n", " "))
        for row in r:
            del row[i]
        text = render(h, r)
    free = [k for k, name in enumerate(h) if any(name.startswith(c) for c in cut)]
    for step in range(len(free) + len(h) * 2):  # the free-text columns first, then the widest, until it fits
        excess = too_wide(text)
        if excess <= 0:
            break
        sizes = [max([len(x) for x in h[k].splitlines()] + [len(row[k]) for row in r]) for k in range(len(h))]
        k = free[step] if step < len(free) else max(range(len(h)), key=lambda j: sizes[j])
        keep = max(16 if step < len(free) else 6, sizes[k] - excess)
        if keep >= sizes[k]:
            if step < len(free):
                continue
            break
        h[k] = "\n".join(x if len(x) <= keep else x[:keep - 1] + "…" for x in h[k].splitlines())
        for row in r:
            if len(row[k]) > keep:
                row[k] = row[k][:keep - 1] + "…"
        text = render(h, r)
    return text, dropped


def left_out_line(dropped: Sequence[str], where: str = "the summary files") -> str:
    """The line under a fitted table that names what it left out."""
    import textwrap

    names = ", ".join(dict.fromkeys(d.split(" (")[0] for d in dropped))
    return textwrap.fill(f"(left out to fit {TERMINAL_WIDTH} columns: {names}; in {where}, or --wide)",
                         TERMINAL_WIDTH, break_on_hyphens=False)


def terminal_height() -> int:
    """The lines a screen shows: the terminal's ($LINES first), 24 when the output is no terminal. ``status`` and
    ``plan`` print their long tables whole only when they fit it."""
    import shutil

    return shutil.get_terminal_size((TERMINAL_WIDTH, 24)).lines


def github_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """tabulate's ``github`` format of text cells (``disable_numparse``: every column left-aligned), written
    directly: the same text, in a fraction of the time on tables of 10^4-10^5 rows. None where tabulate must do it
    (a header of several lines, a cell that is not plain ASCII on one line, whose width only it measures)."""
    cells = [list(headers), *rows]
    if not all(isinstance(x, str) and x.isascii() and "\n" not in x for row in cells for x in row):
        return None
    if any(len(row) != len(headers) for row in rows) or not headers:
        return None
    rows = [[x.strip() for x in row] for row in rows]  # tabulate strips the values' white space, not the headers'
    cells = [list(headers), *rows]
    # tabulate's MIN_PADDING: a column is at least its header and two more
    widths = [max([len(headers[k]) + 2] + [len(row[k]) for row in rows]) for k in range(len(headers))]
    lines = ["| " + " | ".join(x.ljust(w) for x, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
