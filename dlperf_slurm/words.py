"""A count and its noun as a reader expects them: ``plural(1, "cell")`` is "1 cell", ``plural(2, "cell")`` "2 cells".
Every message that puts a count before a noun says it with :func:`plural` (tests/test_words.py checks the messages,
and that no f-string puts a count straight before a plural noun). It imports nothing: any module may use it, the
job-side probes too."""

from __future__ import annotations


def noun(n: float, one: str, many: str | None = None) -> str:
    """``one`` for a count of 1, else ``many`` (default: ``one`` + "s"); words as well as nouns ("run waits",
    "runs wait")."""
    return one if n == 1 else (many if many is not None else one + "s")


def plural(n: float, one: str, many: str | None = None, *, grouped: bool = False) -> str:
    """``n`` and its noun: "1 cell", "2 cells"; ``many`` for an irregular plural ("1 matrix", "2 matrices");
    ``grouped``: thousands separated ("1,000 runs")."""
    return f"{n:,} {noun(n, one, many)}" if grouped else f"{n} {noun(n, one, many)}"
