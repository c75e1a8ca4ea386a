"""Where campaigns live: a campaign is a folder holding a manifest (:data:`MANIFEST`); :func:`find_campaign` and
:func:`campaigns` find them under the logs folder, :func:`campaign_lock` keeps two ``submit``/``cancel`` from
interleaving in one, and :func:`journal_mode` picks the SQLite journal its filesystem can hold. Files only: what
the manifest holds is :mod:`dlperf_slurm.campaign.manifest`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path
from typing import Iterator

from dlperf_slurm.errors import UserError

MANIFEST = "manifest.sqlite"
LOCK = ".lock"

_NETWORK_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "glusterfs", "panfs", "fuse")

# ============================================================================================ filesystem


def _fs_type(path: Path) -> str:
    """Filesystem type of ``path`` from /proc/mounts (longest matching mount point); '' if unknown."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    best, kind = "", ""
    p = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and (p == parts[1] or p.startswith(parts[1].rstrip("/") + "/")) \
                and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


def journal_mode(directory: Path) -> str:
    """WAL on local disks (readers never block); the rollback journal on network filesystems, where
    SQLite's WAL shared memory does not work across hosts. ``DLPERF_SLURM_SQLITE_JOURNAL`` overrides."""
    forced = os.environ.get("DLPERF_SLURM_SQLITE_JOURNAL")
    if forced:
        return forced.upper()
    kind = _fs_type(directory)
    return "DELETE" if kind.startswith(_NETWORK_FS) else "WAL"


def writable(campaign_dir: Path) -> bool:
    """Whether this user can write the campaign: its folder and the manifest's files (a colleague's campaign, a
    read-only mount: not)."""
    files = [campaign_dir / f"{MANIFEST}{side}" for side in ("", "-wal", "-shm", "-journal")]
    return os.access(campaign_dir, os.W_OK) and all(os.access(f, os.W_OK) for f in files if f.exists())


def why_read_only(campaign_dir: Path) -> str:
    """Why the campaign is read for reading alone ('' when it can be written): its file system mounted read-only,
    not writable by this user, or its disk full (:func:`dlperf_slurm.disk.disk_full`)."""
    from dlperf_slurm.disk import disk_full

    try:
        if os.statvfs(campaign_dir).f_flag & os.ST_RDONLY:
            return "its file system is mounted read-only"
    except OSError:
        pass
    if not writable(campaign_dir):
        return "this user cannot write it"
    full = disk_full(campaign_dir)
    return f"its disk is full ({full.rsplit(': ', 1)[-1]})" if full else ""


def read_only_note(campaign_dir: Path, why: str) -> str:
    """The one line a reading command says when it skips the scheduler and the manifest's updates."""
    return (f"dlperf-slurm: {campaign_dir}: {why}: read as its manifest recorded it (scheduler not asked, nothing "
            "written)")


# ================================================================================================ lock


@contextlib.contextmanager
def campaign_lock(campaign_dir: Path, wait_s: float = 30.0) -> Iterator[None]:
    """Exclusive lock on the campaign for submit/cancel; a second one waits, then says who holds it."""
    campaign_dir.mkdir(parents=True, exist_ok=True)
    path = campaign_dir / LOCK
    f = open(path, "a+")
    deadline = time.time() + wait_s
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.time() > deadline:
                f.seek(0)
                holder = f.read().strip() or "another process"
                f.close()
                raise UserError(f"{campaign_dir}: the campaign is busy ({holder} holds {path}); try again later") \
                    from None
            time.sleep(0.2)
    try:
        with contextlib.suppress(OSError):  # who holds it, for the message above; a full disk cannot take it
            f.seek(0)
            f.truncate()
            f.write(f"pid {os.getpid()} ({' '.join(sys.argv[:3])})\n")
            f.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            f.truncate(0)
        fcntl.flock(f, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            f.close()


# ================================================================================================ finding


def find_campaign(logs: str, name: str | None) -> Path:
    """A campaign folder: a path, a name under ``logs``, or (no name) the most recently updated one."""
    if name:
        p = Path(name)
        if (p / MANIFEST).exists():
            return p.resolve()
        q = Path(logs) / name
        if (q / MANIFEST).exists():
            return q.resolve()
        lost = next((d for d in (p, q) if (d / "matrix.toml").exists()), None)  # the copy submit keeps
        raise UserError(f"{lost}: the campaign's {MANIFEST} is missing; `dlperf-slurm doctor {name}` rebuilds it "
                        "from its files and the scheduler" if lost else
                        f"no campaign {name!r}: neither {p} nor {q} holds a {MANIFEST}")
    found = sorted(campaigns(logs), key=lambda p: (p / MANIFEST).stat().st_mtime)
    if not found:
        raise UserError(f"no campaign under {logs}/: submit a matrix first")
    return found[-1].resolve()


def campaigns(logs: str) -> list[Path]:
    """The campaign folders under ``logs`` (those holding a manifest), by name."""
    return sorted(p.parent for p in Path(logs).glob(f"*/{MANIFEST}"))
