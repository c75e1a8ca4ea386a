"""The fast path of :class:`~dlperf_slurm.parsing.lines.Scanner` over a log file: read it in large blocks, find the
lines that can matter (a block of ASCII text without ``\\r``: one Hyperscan pass, :mod:`.hsblocks`; any other block,
or without the ``hyperscan`` package: one table lookup per byte pair, numpy, :mod:`.npblocks`), decode only those
and hand them to the Scanner's own line loop, the reference implementation, which reads them exactly as it would
have in a pass over every line.

Which lines can matter (a superset: a line taken needlessly costs time, never a figure):

- a line holding one of the *needles*: the suite's (every line its handler does anything with contains one), the
  Scanner's own (``:::`` for the ``:::DLPERF`` events and their cut prefixes; ``Error``, ``error``, ``xception``,
  ``Killed``, ``CANCELLED AT`` for the error and Slurm-kill facts; the out-of-memory words, in any ASCII case);
- a line holding a byte that is not ASCII (its decoded text may hold anything: such lines are always read whole,
  so Unicode digits, spaces and case never need a byte-level rule);
- while a record cut by buffering is held (a FRAGMENT), every line, until the Scanner has put it back together.

What every line contributes, the others included, is counted here at block level with the same rules: the number
of lines (``\\n``, ``\\r\\n`` and a lone ``\\r`` end one; a last line without an end counts) and the launcher
rank labels (:func:`~dlperf_slurm.parsing.reading.split_rank`'s, in file order). A physical line of
:data:`~dlperf_slurm.parsing.reading.MAX_LINE` bytes or more, which the line reader cuts into pieces, sends the rest
of the file through the line reader itself (:func:`~dlperf_slurm.parsing.reading.text_lines`).

``tests/test_fastpath.py`` checks that both paths give equal results over every log fixture and over fuzzed logs.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, NamedTuple

from dlperf_slurm.disk import open_log
from dlperf_slurm.parsing import hsblocks
from dlperf_slurm.parsing.reading import MAX_LINE, RANK_BYTES, Short, split_rank, text_lines

BLOCK = 1 << 19  # bytes read at a time; less than MAX_LINE, so a line inside one read is never cut into pieces


class Needles(NamedTuple):
    """What the lines that can matter hold: ``needles`` (case-sensitive), ``nocase`` (in any ASCII case)."""

    needles: tuple[str, ...]
    nocase: tuple[str, ...]


def sieve(needles: tuple[str, ...], nocase: tuple[str, ...]) -> Needles:
    """The needles a :class:`BlockLines` looks for (each scanner compiles them once a process)."""
    return Needles(tuple(needles), tuple(nocase))


class BlockLines:
    """Iterating yields the lines the Scanner must see (decoded as :func:`~dlperf_slurm.parsing.reading.read_lines`
    does) of the file at ``path``; ``lines`` and ``ranks`` then hold what every line of it contributes: the number of
    lines and the rank labels (at most 4,096, the first in file order, as the Scanner keeps them). ``pending`` is the
    Scanner's dict of held fragments: while it holds one, every line is yielded."""

    def __init__(self, path: Any, needles: Needles, pending: dict, short: Short | tuple[str, int] | None = None,
                 data: bytes | None = None):
        self.path = path
        self.data = data  # the file's content, when the caller has read it whole
        self.needles = needles
        self.pending = pending
        # ``short``: a suite's short lines (records cut by buffering), yielded too (:class:`.reading.Short`; a pair
        # (first characters, length) is one without Hyperscan patterns)
        self.short = Short(*short) if short is not None else None
        self.lines = 0
        self.ranks: set = set()
        self._db = (hsblocks.database(needles.needles, needles.nocase, self.short)  # Hyperscan's patterns, if installed
                    if hsblocks.ENABLED else None)

    def _rank(self, rank: int | None) -> None:
        if rank is not None and len(self.ranks) < 4096:
            self.ranks.add(rank)

    def __iter__(self) -> Iterator[str]:
        with io.BytesIO(self.data) if self.data is not None else open_log(self.path, "rb", buffering=0) as f:
            offset, carry, eof = 0, b"", False
            while not eof:
                chunk = f.read(BLOCK)
                eof = not chunk
                buf = carry + chunk if carry else chunk
                if eof:
                    end = len(buf)
                else:
                    end = max(buf.rfind(b"\n"), buf.rfind(b"\r"))
                    if end == len(buf) - 1 and buf[end] == 13:  # "\r" last: its "\n" may be in the next read
                        end = max(buf.rfind(b"\n", 0, end), buf.rfind(b"\r", 0, end))
                    end += 1
                first = _first_end(buf, end)
                if first >= MAX_LINE or (end == 0 and len(buf) >= MAX_LINE):
                    # a line the line reader cuts into pieces: read the rest of the file as it does
                    yield from self._line_reader(offset)
                    return
                if end:
                    yield from self._block(buf, end, eof)
                carry, offset = buf[end:], offset + end

    def _line_reader(self, offset: int) -> Iterator[str]:
        for line in text_lines(self.path, offset):
            self.lines += 1
            if line:
                c = line[0]
                if c == " " or c == "[" or c.isdigit():
                    self._rank(split_rank(line)[0])
            yield line

    def _block(self, buf: bytes, end: int, eof: bool) -> Iterator[str]:
        if self._db is not None:
            data = buf if end == len(buf) else buf[:end]
            if data.isascii() and data.find(b"\r") < 0:  # most blocks of most logs: one Hyperscan pass
                return hsblocks.block_lines(self, self._db, data, RANK_BYTES)
        return self._numpy_block(buf, end, eof)

    def _numpy_block(self, buf: bytes, end: int, eof: bool) -> Iterator[str]:
        from dlperf_slurm.parsing import npblocks  # numpy: imported by the first block that needs it

        return npblocks.block_lines(self, buf, end, eof)


def _first_end(buf: bytes, end: int) -> int:
    """Where the first line of ``buf[:end]`` ends (``end`` when it has no line end)."""
    n = buf.find(b"\n", 0, end)
    r = buf.find(b"\r", 0, n if n >= 0 else end)
    return r if r >= 0 else (n if n >= 0 else end)
