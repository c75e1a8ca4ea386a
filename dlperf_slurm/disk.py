"""What the disk can do to a campaign, told in one line: a damaged manifest, a full disk, a read-only folder
(:func:`storage_problem`); atomic writes (:func:`atomic_write`: a reader, a job or a ``collect`` running at the
same time, sees the old file or the new one, never half of one); a log opened without hanging on a FIFO
(:func:`open_log`; whether it is text is :mod:`dlperf_slurm.parsing.head`'s); a log's identity
(:func:`log_identity`), which a verdict read from it is kept with, so a changed log is read again; a disk too
full for a run to write its log (:func:`disk_full`), and the room a job needs to say so (:func:`reserve_room`)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import IO, Any, Iterable, Iterator


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


#: a file system with less than this free to an ordinary user is full: a run can write neither its log nor its
#: exit marker there (a log of a real program grows by KiBs; the marker and the runner's queue need a block each)
FULL_BELOW = 64 * 1024
#: what a job script reserves, before anything else, for its exit marker (``<run>.exit.spare``): on a disk that
#: fills while it runs, the marker is written over these blocks in place and renamed (templates/job.sh.j2)
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
    nothing else can be written (templates/job.sh.j2)."""
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


def atomic_write(path: str | os.PathLike, data: bytes | str, *, executable: bool = False,
                 durable: bool = False) -> Path:
    """Write ``path`` through ``.<name>.<pid>.tmp`` in the same folder and a rename; the folder is made if
    missing. Permissions follow the umask (``executable`` adds the x bits); ``durable`` also fsyncs."""
    name = os.fspath(path)  # string work: 10^5 scripts in a render, where pathlib's parsing was a fifth of it
    folder, base = os.path.split(name)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    mode = 0o777 if executable else 0o666
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:
        os.makedirs(folder or ".", exist_ok=True)
        fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError) and err.filename is None:  # a write or fsync names no file: it was this one
            raise OSError(err.errno, err.strerror or str(err), name) from err
        raise
    return path if isinstance(path, Path) else Path(name)


@contextlib.contextmanager
def no_more_open_than(folders: Iterable[str | os.PathLike], umask: str | None = None) -> Iterator[int]:
    """While inside, files and folders this process creates are no more open than any of ``folders`` (the group
    and other bits a folder lacks are added to the umask: a private folder's files are private; a read-only
    folder's owner bits are no privacy and stay) nor than ``umask`` (octal text, the site's ``[provenance]
    umask``; None: the user's own). A folder that does not exist yet is made first, under that umask. Yields the
    umask in force."""
    old = os.umask(0o077)
    mask = old | (int(umask, 8) if umask else 0)
    try:
        os.umask(mask)
        for folder in folders:
            path = Path(folder)
            path.mkdir(parents=True, exist_ok=True)
            mask |= ~stat.S_IMODE(path.stat().st_mode) & 0o077
        os.umask(mask)
        yield mask
    finally:
        os.umask(old)


def private_file(path: str | os.PathLike, sides: Iterable[str] = ("-wal", "-shm", "-journal")) -> Path:
    """Make ``path`` the user's alone: its folder 700, the file 600, created empty if missing (before a database
    opens it: SQLite gives its ``-wal``/``-shm`` files the database file's mode), and ``sides`` beside it that an
    older version left more open tightened to 600."""
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(path.parent.stat().st_mode) & 0o077:
        os.chmod(path.parent, stat.S_IMODE(path.parent.stat().st_mode) & 0o700)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for p in (path, *(path.with_name(path.name + side) for side in sides)):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_IMODE(p.stat().st_mode) & 0o077:
                os.chmod(p, stat.S_IMODE(p.stat().st_mode) & 0o600)
    return path


def remove_stale_tmp(folder: str | os.PathLike) -> list[Path]:
    """Remove the ``.<name>.<pid>.tmp`` files :func:`atomic_write` left in ``folder`` when the process that wrote
    them was killed (SIGKILL leaves no chance to clean up); another live process's are left alone."""
    removed: list[Path] = []
    try:
        candidates = list(Path(folder).glob(".*.tmp"))
    except OSError:
        return removed
    for tmp in candidates:
        pid = tmp.name[:-4].rsplit(".", 1)[-1]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its writer still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # someone else's live process
        try:
            tmp.unlink()
            removed.append(tmp)
        except OSError:
            pass
    return removed
