"""What the disk can do to a campaign, told in one line: a damaged manifest, a full disk, a read-only folder
(:func:`storage_problem`); a log that is gone, unreadable or not text (:func:`unreadable`); a log's identity
(:func:`log_identity`), which a verdict read from it is kept with, so a changed log is read again; a disk too
full for a run to write its log (:func:`disk_full`), and the room a job needs to say so (:func:`reserve_room`)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Any


def log_identity(path: str | os.PathLike) -> str:
    """A log's identity, as a verdict read from it is recorded with (``runs.log_id``): size, mtime (ns) and
    inode, the parse cache's key; ``absent`` for no file; marked ``unreadable`` while this user cannot read it (a
    chmod changes none of the three: the log made readable again is read again). Another identity later: the
    verdict is read again."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as err:
        return f"error {err.errno}"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}" + ("" if os.access(path, os.R_OK) else ":unreadable")


#: the manifests this process opened, latest last: what :func:`storage_problem` names
OPENED: list[Path] = []


def damaged(err: BaseException) -> bool:
    """Whether an SQLite error says the file itself is damaged (not: the disk is full, the folder read-only)."""
    low = str(err).lower()
    return "malformed" in low or "not a database" in low or "file is encrypted" in low


def storage_problem(err: BaseException) -> str:
    """One line for an SQLite error the disk caused (a damaged manifest, a full disk, a read-only folder): the
    file, what is wrong and what to do. Nothing recorded before is lost: every write is one transaction."""
    path = OPENED[-1] if OPENED else Path("manifest.sqlite")
    text = str(err)
    low = text.lower()
    if damaged(err):
        return (f"{path}: the manifest is damaged ({text}); `dlperf-slurm doctor {path.parent.name}` rebuilds it from "
                "the campaign's scripts, logs, exit markers and the scheduler (the damaged file is kept beside it)")
    if "full" in low or "disk i/o" in low:
        return (f"{path}: could not write the manifest ({text}): is the disk full? Free space on {path.parent} and "
                "run the command again; what the manifest held before is kept (each write is one transaction)")
    if "readonly" in low or "read-only" in low or "unable to open" in low or "permission" in low:
        try:
            ro = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
        except OSError:
            ro = False
        return (f"{path}: could not open or write the manifest ({text}"
                + ("; its file system is mounted read-only" if ro else "") + f"): make {path.parent} and the file "
                "writable by you and run the command again")
    return f"{path}: the manifest could not be used ({type(err).__name__}: {text})"


def open_log(path: str | os.PathLike, mode: str = "rb", **kwargs: Any) -> IO[Any]:
    """``open(path, mode, **kwargs)`` for reading a log, refusing (OSError) what is not a regular file: a FIFO, a
    socket or a device named like a log would block a plain ``open`` (a FIFO until a writer comes: ``collect``
    hung for ever on one) or read for ever. Every reader of a log opens it here (or with :func:`read_start`)."""
    fd = _open_regular(path)
    try:
        os.set_blocking(fd, True)
        return open(fd, mode, **kwargs)  # the caller's with-block closes it
    except BaseException:
        os.close(fd)
        raise


def _open_regular(path: str | os.PathLike) -> int:
    """A descriptor of ``path`` opened for reading, not blocking; OSError for what is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)", os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_start(path: str | os.PathLike, size: int) -> bytes:
    """The first ``size`` bytes of the log at ``path`` (fewer: all of it), refused as :func:`open_log` refuses;
    without a file object (its buffer and wrappers were three quarters of a small log's open and read)."""
    fd = _open_regular(path)
    try:
        parts = []
        while size > 0:  # a regular file: O_NONBLOCK changes nothing; a short read only at its end (or a signal)
            b = os.read(fd, size)
            if not b:
                break
            parts.append(b)
            size -= len(b)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    finally:
        os.close(fd)


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
        return (f"the log is not text ({100 * bad // len(head)}% of its first {len(head):,} bytes are binary): "
                "garbage or a binary written over it")
    return ""


#: a file system with less than this free to an ordinary user is full: a run can write neither its log nor its
#: exit marker there (a log of a real program grows by KiBs; the marker and the runner's queue need a block each)
FULL_BELOW = 64 * 1024
#: what a job script reserves, before anything else, for its exit marker (``<run>.exit.spare``): on a disk that
#: fills while it runs, the marker is written over these blocks in place and renamed (templates/sbatch.sh.j2)
SPARE_BYTES = 16 * 1024


def disk_full(folder: str | os.PathLike) -> str:
    """'' unless the file system holding ``folder`` has less than :data:`FULL_BELOW` bytes free (to an ordinary
    user: ``f_bavail``); then where and how much: ``FOLDER: N KiB free``."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return ""
    free = st.f_bavail * st.f_frsize
    return "" if free >= FULL_BELOW else f"{folder}: {free // 1024} KiB free"


def reserve_room(marker: str | os.PathLike, output: str = "") -> None:
    """Made before a run is submitted, so that a job starting on a disk already full can still start and say so:
    room in its scheduler output file (``output``, when it has one; see :func:`_preallocate`) and the room its
    exit marker needs (``<marker>.spare``, :data:`SPARE_BYTES`), which the job script writes its marker over when
    nothing else can be written (templates/sbatch.sh.j2)."""
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        _preallocate(output, SPARE_BYTES)
    spare = Path(f"{os.fspath(marker)}.spare")
    if not spare.exists():
        spare.write_bytes(b" " * SPARE_BYTES)


def _preallocate(path: str, size: int) -> None:
    """Create ``path`` (empty) with ``size`` bytes of blocks reserved past its end (Linux ``fallocate`` with
    FALLOC_FL_KEEP_SIZE): what is appended to it later needs no free space (submitit's wrapper, which prints to
    it unbuffered before it runs the job script, dies on a full disk otherwise). Elsewhere: the empty file."""
    import ctypes

    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
        fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
        fallocate(fd, 1, 0, size)  # 1: FALLOC_FL_KEEP_SIZE; a file system without it: nothing reserved
    except (AttributeError, OSError):  # no libc fallocate (not Linux)
        pass
    finally:
        os.close(fd)


def full_reason(full: str, ended: str, where: str = "") -> str:
    """A run's reason when the disk holding its log was full (``full``: :func:`disk_full`'s words): not started
    (``ended`` ''), else what it could not write, how it ended and where its log stops; then what to do."""
    again = f" ({full}); free space, then `dlperf-slurm submit --retry-failed` runs it again"
    if not ended:
        return f"no space left on device: not started, no room for its log{again}"
    return (f"no space left on device while it ran: its log could not be written in full; {ended}"
            + (f"; the log stops {where}" if where else "") + again)
