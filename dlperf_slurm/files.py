"""Atomic file writes: a reader (a job, a ``collect`` running at the same time) sees the old file or the new
one, never half of one."""

from __future__ import annotations

import os
from pathlib import Path


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
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def remove_stale_tmp(folder: str | os.PathLike) -> list[Path]:
    """Remove the ``.<name>.<pid>.tmp`` files :func:`atomic_write` left in ``folder`` when the process that wrote
    them was killed (SIGKILL leaves no chance to clean up); another live process's are left alone."""
    removed = []
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
