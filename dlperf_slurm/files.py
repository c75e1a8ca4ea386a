"""Atomic file writes: a reader (a job, a ``collect`` running at the same time) sees the old file or the new
one, never half of one."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterable, Iterator


def atomic_write(path: str | os.PathLike, data: bytes | str, *, executable: bool = False,
                 durable: bool = False) -> Path:
    """Write ``path`` through ``.<name>.<pid>.tmp`` in the same folder and a rename; the folder is made if
    missing. Permissions follow the umask (``executable`` adds the x bits); ``durable`` also fsyncs."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    mode = 0o777 if executable else 0o666
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError) and err.filename is None:  # a write or fsync names no file: it was this one
            raise OSError(err.errno, err.strerror or str(err), str(path)) from err
        raise
    return path


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
