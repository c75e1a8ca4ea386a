"""Whether a log can be read as text at all, before any suite's parser sees it: its head (the first
:data:`HEAD` bytes) read once, and "not text" (garbage, a binary written over it) told from a text log with a few
odd bytes by the share of bytes no text log holds (:data:`NOT_TEXT_SHARE`); Hyperscan counts them when it is
installed (:mod:`dlperf_slurm.parsing.hsblocks`). Reading a file safely (FIFOs, devices) is
:mod:`dlperf_slurm.disk`'s."""

from __future__ import annotations

from pathlib import Path

from dlperf_slurm.disk import read_start
from dlperf_slurm.words import plural

#: a log whose first block has more than this share of bytes no text log holds (NUL, other C0 controls than
#: tab/newline/CR/ESC/backspace, invalid UTF-8) is not text (garbage, a binary written over it)
NOT_TEXT_SHARE = 0.3
_TEXT_CONTROLS = frozenset(b"\t\n\r\x1b\x08\x0c")
_TEXT_BYTES = bytes(b for b in range(256) if b >= 32 or b in _TEXT_CONTROLS)  # deleted: what is left is binary
_BINARY = bytes(b for b in range(32) if b not in _TEXT_CONTROLS)  # the bytes no text log holds (but invalid UTF-8)


HEAD = 65536  # bytes of a log looked at by unreadable


def unreadable(path: str | Path) -> str:
    """Why the log at ``path`` cannot be read as a log ('' when it can, or when it is simply absent): not
    readable (permissions, a folder in its place, an I/O error) or not text."""
    return read_head(path)[0]


def read_head(path: str | Path) -> tuple[str, bytes | None]:
    """:func:`unreadable`'s answer, and the log's bytes when it read them all (a log of at most :data:`HEAD`
    bytes: its parser need not open it again), else None."""
    try:
        data = read_start(path, HEAD + 1)
    except FileNotFoundError:
        return "", None
    except OSError as err:
        return f"the log cannot be read ({err.strerror or type(err).__name__}: {path})", None
    head = data[:HEAD]
    return _not_text(head), data if len(data) <= HEAD else None


def _not_text(head: bytes) -> str:
    """Why a log whose first bytes are ``head`` is not text ('' when it is)."""
    if not head:
        return ""
    from dlperf_slurm.parsing import hsblocks  # a leaf module (parsing/__init__ imports this one)

    if head.isascii() and hsblocks.holds_any(_BINARY, head) is False:  # most logs: no byte to count
        return ""
    bad = len(head.translate(None, _TEXT_BYTES))  # in C: a byte at a time in Python cost 1 ms a log
    if not head.isascii():
        bad += head.decode("utf-8", errors="replace").count("\ufffd")
    if bad > NOT_TEXT_SHARE * len(head):
        return (f"the log is not text ({100 * bad // len(head)}% of its first "
                f"{plural(len(head), 'byte', grouped=True)} are binary): "
                "garbage or a binary written over it")
    return ""
