"""Reading a log, what the :class:`~dlperf_slurm.parsing.lines.Scanner` and its block reader
(:mod:`.blocks`) share: lines streamed with flat memory, and launcher rank labels.

- :func:`read_lines`: lines of a file, decoded as UTF-8 with ``errors='replace'``; ``\\r`` also ends a line
  (progress bars); a physical line longer than :data:`MAX_LINE` comes in pieces (flat memory).
- :func:`split_rank`: rank labels written by launchers: ``srun -l`` (``0: ``, `` 3: ``), ``torchrun --tee``
  (``[rank0]:``, ``[default0]:``), OpenMPI ``--tag-output`` (``[1,0]<stdout>:``) and ``horovodrun --gloo``
  (``[0]<stdout>:``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from dlperf_slurm.disk import open_log

MAX_LINE = 1 << 20  # characters per line piece: a longer physical line is read in pieces


class Short(NamedTuple):
    """A suite's short lines, which the block reader yields besides its needles' (a record cut by buffering: its
    head holds no needle yet): each line whose text (rank label removed) is shorter than ``length`` and starts with
    one of ``first``'s characters (for a labelled line: shorter by the label and one space, whatever its first
    character). ``heads``: Hyperscan patterns (bytes, multi-line) that find a tighter superset of the unlabelled
    short lines the suite's handler does anything with; where given, the Hyperscan sieve takes them for the
    unlabelled lines instead of the length rule (the numpy sieve keeps the rule)."""

    first: str
    length: int
    heads: tuple[bytes, ...] = ()

# ------------------------------------------------------------------------------------------------ reading


def read_lines(path: Any, data: bytes | None = None) -> "LogLines":
    """The lines of the file at ``path``, streamed, without their line ends.

    Bytes that are not UTF-8 become U+FFFD; ``\\n``, ``\\r\\n`` and a lone ``\\r`` end a line (universal
    newlines); a truncated last line (no newline) is yielded as it is; a line longer than :data:`MAX_LINE`
    characters comes in several pieces, so memory stays flat for any file.

    The result iterates like a generator of those lines; a :class:`Scanner` given it unstarted reads the file in
    large blocks instead and looks only at the lines that can matter (:mod:`dlperf_slurm.parsing.blocks`), with
    the same result. ``data``: the file's whole content, when the caller has just read it (the block reader then
    reads it instead of opening the file again).
    """
    return LogLines(path, data)


class LogLines:
    """The lines of one log file, as :func:`read_lines` gives them: an iterator over :func:`text_lines` that also
    says which file it reads (``path``), its content when already read (``data``) and whether iteration has begun
    (``started``)."""

    def __init__(self, path: Any, data: bytes | None = None):
        self.path = path
        self.data = data
        self._it: Iterator[str] | None = None

    @property
    def started(self) -> bool:
        return self._it is not None

    def __iter__(self) -> "LogLines":
        return self

    def __next__(self) -> str:
        if self._it is None:
            self._it = text_lines(self.path)
        return next(self._it)


def text_lines(path: Any, offset: int = 0) -> Iterator[str]:
    """The line reader itself (see :func:`read_lines`), from byte ``offset``, which must start a line."""
    with open_log(path, "r", encoding="utf-8", errors="replace", newline=None) as f:
        if offset:
            f.seek(offset)
        readline = f.readline
        while True:
            line = readline(MAX_LINE)
            if not line:
                return
            if line[-1:] == "\n":
                line = line[:-1]
            yield line


def iter_text_lines(text: str) -> Iterator[str]:
    """The lines of an in-memory log (tests, fuzzing): the same splitting rules as :func:`read_lines`."""
    yield from text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    # a trailing "\n" yields one empty last line, which every parser ignores


# ------------------------------------------------------------------------------------------------- ranks

_RANK = re.compile(r"(?:\s{0,8}(\d{1,6}): |\[(?:rank|default)(\d{1,6})\]:\s?|\[\d+,(\d{1,6})\]<std(?:out|err)>:\s?"
                   r"|\[(\d{1,6})\]<std(?:out|err)>:\s?)")  # the last: horovodrun --gloo's [0]<stdout>:


# split_rank's rule in bytes (the block reader's), exact for a label made of ASCII (Python's \s also takes
# \x1c-\x1f); a line with a byte that is not ASCII that this does not match is read by split_rank itself.
RANK_BYTES = re.compile(rb"(?: [ \t\x0b\x0c\x1c-\x1f]{0,7}([0-9]{1,6}): |([0-9]{1,6}): "
                        rb"|\[(?:rank|default)([0-9]{1,6})\]:|\[[0-9]+,([0-9]{1,6})\]<std(?:out|err)>:"
                        rb"|\[([0-9]{1,6})\]<std(?:out|err)>:)")


def split_rank(line: str) -> tuple[int | None, str]:
    """``(rank, text)`` of a line labelled by a launcher, ``(None, line)`` for an unlabelled one."""
    c = line[:1]
    if c == " " or c == "[" or c.isdigit():
        m = _RANK.match(line)
        if m:
            return int(m.group(m.lastindex or 1)), line[m.end():]
    return None, line
