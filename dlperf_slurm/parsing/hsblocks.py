"""The block reader's scan of a block of ASCII text without ``\\r`` (most logs, whole) with Hyperscan (the
``hyperscan`` package, Intel's compiled multi-pattern matcher): one pass over the block finds the needles' lines,
the short lines a suite asks for and the lines that start with a rank label, where the numpy sieve of
:mod:`.blocks` makes a dozen passes over it and pays a fixed cost per block that, on logs of tens of KB, was most
of a log's parse. Without the package (or for a block with a byte that is not ASCII, or a ``\\r``), the numpy
path reads the block; both give the Scanner the same lines where it matters (``tests/test_fastpath.py`` runs its
comparisons with each).

What is found, exactly (the numpy sieve finds a superset):

- each line holding a needle (``nocase``: in any ASCII case);
- each line whose text, rank label removed, is shorter than ``short``'s length and starts with one of its
  characters (for a labelled line: shorter by the label and one space, whatever its first character, as the numpy
  path does); where the suite gives ``short.heads``, an unlabelled line is found by those patterns instead (the
  short lines its handler can take as a record's head: a tighter superset, which spares the scan and the loop the
  many short lines of a log that are no head);
- each line starting with a rank label: :data:`.reading.RANK_BYTES` itself reads it (its rank, in file order); Hyperscan
  only finds where to look.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlperf_slurm.parsing.reading import Short

hyperscan: Any
try:  # an optional, compiled dependency (setup.cfg's ``fast`` extra): the numpy path reads every block without it
    hyperscan = importlib.import_module("hyperscan")
except ImportError:  # pragma: no cover - the CI image installs it; tests run both paths where it is
    hyperscan = None

#: ``DLPERF_SLURM_SCAN=numpy`` (or no ``hyperscan`` package): every block is read by the numpy path
ENABLED = hyperscan is not None and os.environ.get("DLPERF_SLURM_SCAN", "") != "numpy"

NEEDLE, SHORT, LABEL = 0, 1, 2  # what a match found
# reading.RANK_BYTES's forms, at a line start, without its groups (Hyperscan has none); one pattern each: as one
# alternation they made the scan of a 42 KB log 6 times slower (98 us instead of 17)
_LABELS = (rb"^ [ \t\x0b\x0c\x1c-\x1f]{0,7}[0-9]{1,6}: ", rb"^[0-9]{1,6}: ", rb"^\[(?:rank|default)[0-9]{1,6}\]:",
           rb"^\[[0-9]+,[0-9]{1,6}\]<std(?:out|err)>:", rb"^\[[0-9]{1,6}\]<std(?:out|err)>:")

_DBS: dict[tuple, Any] = {}


def database(needles: tuple[str, ...], nocase: tuple[str, ...], short: Short | None) -> Any:
    """The compiled patterns of a sieve (once a process: a suite's Scanner is made once per log)."""
    key = (needles, nocase, short)
    db = _DBS.get(key)
    if db is None:
        exprs, ids, flags = [], [], []
        for text, nc in [(n, False) for n in needles] + [(n, True) for n in nocase]:
            b = text.encode("utf-8")
            if b.isascii():  # a needle with a byte that is not ASCII: never in an ASCII block
                exprs.append(re.escape(b))
                ids.append(NEEDLE)
                flags.append(hyperscan.HS_FLAG_CASELESS if nc else 0)
        if short is not None and short.heads:  # the suite's own, tighter patterns for unlabelled short lines
            exprs += short.heads
            ids += [SHORT] * len(short.heads)
            flags += [hyperscan.HS_FLAG_MULTILINE] * len(short.heads)
        elif short is not None and short.length >= 2:
            first = b"".join(re.escape(bytes([c])) for c in short.first.encode("ascii"))
            exprs.append(rb"^[" + first + rb"][^\n]{0," + str(short.length - 2).encode() + rb"}$")
            ids.append(SHORT)
            flags.append(hyperscan.HS_FLAG_MULTILINE)
        exprs += _LABELS
        ids += [LABEL] * len(_LABELS)
        flags += [hyperscan.HS_FLAG_MULTILINE] * len(_LABELS)
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=exprs, ids=ids, elements=len(exprs), flags=flags)
        _DBS[key] = db
    return db


def block_lines(reader: Any, db: Any, data: bytes, rank_re: re.Pattern) -> Iterator[str]:
    """The lines of ``data`` (whole lines of ASCII text without ``\\r``; the last one may lack its ``\\n`` only at
    the end of the file) that ``reader`` (a :class:`~dlperf_slurm.parsing.blocks.BlockLines`) yields, decoded;
    ``reader.lines`` and ``reader.ranks`` get what every line contributes."""
    end = len(data)
    found: list[int] = []  # match end * 4 + what
    add = found.append
    db.scan(data, match_event_handler=lambda what, _from, to, _flags, _ctx: add(to * 4 + what))
    reader.lines += data.count(b"\n") + (data[-1] != 10)
    rfind, find = data.rfind, data.find
    starts: set[int] = set()
    short = reader.short.length if reader.short is not None else -1  # -1: no short lines
    labelled = -1
    for x in found:
        to, what = x >> 2, x & 3
        s = rfind(b"\n", 0, to - 1) + 1  # every match holds at least one byte of its line and no "\n"
        if what != LABEL:
            starts.add(s)
        elif s != labelled:  # one label a line, in file order
            labelled = s
            e = find(b"\n", s)
            e = end if e < 0 else e
            m = rank_re.match(data, s, e)
            if m is not None:
                reader._rank(int(m.group(m.lastindex or 1)))
                if e - m.end() - 1 < short:
                    starts.add(s)
    pending = reader.pending
    at = 0  # where the next line not yet yielded starts
    for s in sorted(starts):
        while pending and at < s:  # a held fragment: the Scanner sees every line until it is resolved
            e = find(b"\n", at)
            e = end if e < 0 else e
            yield data[at:e].decode("ascii")
            at = e + 1
        if s < at:
            continue
        e = find(b"\n", s)
        e = end if e < 0 else e
        yield data[s:e].decode("ascii")
        at = e + 1
    while pending and at < end:
        e = find(b"\n", at)
        e = end if e < 0 else e
        yield data[at:e].decode("ascii")
        at = e + 1


_CLASSES: dict[bytes, Any] = {}


def holds_any(chars: bytes, data: bytes) -> bool | None:
    """Whether ``data`` holds one of the bytes ``chars`` (one Hyperscan pass: a tenth of ``bytes.translate``'s
    time on a 42 KB log); None without Hyperscan."""
    if not ENABLED:
        return None
    db = _CLASSES.get(chars)
    if db is None:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[b"[" + b"".join(b"\\x%02x" % c for c in sorted(set(chars))) + b"]"], ids=[0],
                   elements=1, flags=[hyperscan.HS_FLAG_SINGLEMATCH])
        _CLASSES[chars] = db
    found: list[int] = []
    db.scan(data, match_event_handler=lambda *_: found.append(1))
    return bool(found)

