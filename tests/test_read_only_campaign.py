"""Reading a campaign needs only read access (issue #31, part 6): ``status``, ``collect --out DIR`` and ``compare``
work on a campaign the user can read but not write (a read-only mount; a colleague's folder), the scheduler refresh
and the manifest's updates skipped and said in one line; ``status`` works on a full disk. ``submit`` there is one
line saying why it cannot write. Run as users run them (the CLI in a subprocess); the mounts need root and
``mount``, the colleague's folder root and ``setpriv`` (root writes anything: the commands run without its
CAP_DAC_OVERRIDE on a folder another user owns). They skip, saying why, without them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
sys.path.insert(0, str(Path(__file__).parent))
from test_faults_local import campaign, ok_runs, one_line_error  # noqa: E402
from testlib import REPO, TEMPLATES, cli, fill, small_tmpfs  # noqa: E402

NOTE = "read as its manifest recorded it (scheduler not asked, nothing written)"


def _state(cdir: Path) -> dict[str, bytes]:
    """Every file of the campaign and its bytes: what a reading command must leave as it was."""
    return {str(p.relative_to(cdir)): p.read_bytes() for p in sorted(cdir.rglob("*")) if p.is_file()}


@pytest.fixture
def read_only_view(tmp_path):
    """A finished local campaign (4 OK runs) and the same folder through a read-only bind mount: (matrix, logs,
    campaign folder, the view of logs)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root and mount (a read-only bind mount)")
    mx, logs, cdir = campaign(tmp_path)
    view = tmp_path / "ro"
    view.mkdir()
    p = subprocess.run(["mount", "--bind", str(logs), str(view)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {p.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        yield mx, logs, cdir, view
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)


def test_status_collect_and_compare_read_a_read_only_mount(read_only_view, tmp_path):
    mx, logs, cdir, view = read_only_view
    before = _state(cdir)
    p = cli("--logs", str(view), "status", "f", "--wide", cwd=tmp_path)
    assert p.returncode == 0 and ok_runs(p.stdout) == 4, p.stdout + p.stderr
    assert p.stderr.strip() == f"dlperf-slurm: {view / 'f'}: its file system is mounted read-only: {NOTE}", p.stderr
    out = tmp_path / "mine"
    p = cli("--logs", str(view), "collect", "f", "--no-plots", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0 and "4/4" in p.stdout, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [f"dlperf-slurm: {view / 'f'}: its file system is mounted read-only: "
                                             f"{NOTE}"], p.stderr
    assert (out / "f.md").is_file() and (out / "f.json").is_file()
    p = cli("--logs", str(view), "compare", "f", str(view / "f"), "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0 and "no change" in p.stdout and "Traceback" not in p.stderr, p.stdout + p.stderr
    # writing is what it cannot do: one line, naming why
    p = cli("--logs", str(view), "submit", str(mx), "--executor", "local", "--no-site", "--templates", str(TEMPLATES),
            "--force", cwd=tmp_path)
    err = one_line_error(p, str(view / "f"), "read-only", "writable")
    assert "--campaign" in err, err
    assert _state(cdir) == before, "a reading command changed the campaign"


def test_status_and_collect_read_a_colleagues_campaign(tmp_path):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (a campaign of another user, read without CAP_DAC_OVERRIDE)")
    mx, logs, cdir = campaign(tmp_path)
    subprocess.run(["chown", "-R", "nobody", str(logs)], check=True)  # a colleague's: 755 folders, 644 files
    before = _state(cdir)
    caps = "-dac_override,-dac_read_search,-fowner"
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def as_reader(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", sys.executable, "-m",
                               "dlperf_slurm", "--logs", str(logs), *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    line = f"dlperf-slurm: {cdir}: this user cannot write it: {NOTE}"
    p = as_reader("status", "f", "--wide")
    assert p.returncode == 0 and ok_runs(p.stdout) == 4 and p.stderr.strip() == line, p.stdout + p.stderr
    p = as_reader("collect", "f", "--no-plots", "-q", "--out", str(tmp_path / "mine"))
    assert p.returncode == 0 and p.stderr.strip() == line, p.stdout + p.stderr
    assert (tmp_path / "mine" / "f.md").is_file()
    p = as_reader("compare", "f", "f", "--out", str(tmp_path / "mine"))
    assert p.returncode == 0 and "no change" in p.stdout, p.stdout + p.stderr
    one_line_error(as_reader("submit", str(mx), "--executor", "local", "--no-site", "--templates", str(TEMPLATES),
                             "--force"), "cannot write it", "writable")
    assert _state(cdir) == before, "a reading command changed the campaign"


def test_status_works_on_a_full_disk(tmp_path):
    with small_tmpfs(tmp_path, "1m") as fs:
        _mx, logs, cdir = campaign(fs)
        for side in ("-wal", "-shm"):  # closed cleanly: a reader would have to make them, on a full disk
            assert not (cdir / f"manifest.sqlite{side}").exists()
        filler = fill(fs)
        p = cli("--logs", str(logs), "status", "f", "--wide", cwd=tmp_path)
        assert p.returncode == 0 and ok_runs(p.stdout) == 4, p.stdout + p.stderr
        assert p.stderr.strip().startswith(f"dlperf-slurm: {cdir}: its disk is full (") and \
            p.stderr.strip().endswith(NOTE) and len(p.stderr.strip().splitlines()) == 1, p.stderr
        filler.unlink()
        p = cli("--logs", str(logs), "status", "f", cwd=tmp_path)
        assert p.returncode == 0 and p.stderr == "", p.stderr


def test_an_older_manifest_is_read_without_its_upgrade(tmp_path):
    """A manifest of schema 3 (no runs.log_id, no per-run window) on a read-only mount: read as it is (the columns
    it lacks are None: the campaign's window), not upgraded."""
    import sqlite3

    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root and mount (a read-only bind mount)")
    _mx, logs, cdir = campaign(tmp_path)
    db = sqlite3.connect(cdir / "manifest.sqlite")
    with db:
        for col in ("log_id", "warmup_steps", "measure_steps"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {col}")
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', '3')")
    db.close()
    view = tmp_path / "ro"
    view.mkdir()
    subprocess.run(["mount", "--bind", str(logs), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        p = cli("--logs", str(view), "status", "f", "--wide", cwd=tmp_path)
        assert p.returncode == 0 and ok_runs(p.stdout) == 4, p.stdout + p.stderr
        p = cli("--logs", str(view), "collect", "f", "--no-plots", "-q", "--no-store", "--out", str(tmp_path / "s"),
                cwd=tmp_path)
        assert p.returncode == 0 and "4 read" in p.stdout, p.stdout + p.stderr
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)
