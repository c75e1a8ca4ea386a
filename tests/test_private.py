"""Private stays private (issue #32, part 6): the default results store is created 600 in a 700 folder (an older
one left more open is tightened); a campaign's parse cache and summaries take the campaign folder's permissions;
a store shared by a center (PostgreSQL) is said so in one line at a campaign's first collect into it. Driven by a
real log of the built-in workload (the smoke matrix), collected as a ``--from`` tree."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import pgserver  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402
from dlperf_slurm.store import database  # noqa: E402

SMOKE = (Path(__file__).parent / "fixtures" / "real" / "dlperf_slurm-workload" / "85a9eb7"
         / "smoke_resnet50_tiny_1n1g_b4_fp32_0.log")
SHARED = "is shared (a center's PostgreSQL)"


def mode(p: Path) -> str:
    return oct(stat.S_IMODE(p.stat().st_mode))


@pytest.fixture
def umask022():
    old = os.umask(0o022)  # the usual one: what made the store and the summaries 644
    yield
    os.umask(old)


def private_tree(root: Path, name: str = "smoke") -> Path:
    tree = root / name
    (tree / "1n1g").mkdir(parents=True)
    for rep in range(2):
        shutil.copyfile(SMOKE, tree / "1n1g" / f"resnet50_b4_fp32_{rep}.log")
    tree.chmod(0o700)
    return tree


def collect(tree: Path, out: Path, *store_args: str) -> int:
    return main(["collect", "--from", str(tree), "--suite", "pytorch-ddp/resnet50", "--warmup-steps", "2",
                 "--measure-steps", "5", "--out", str(out), "--no-site", "-q", *store_args])


def test_the_default_store_and_a_private_campaigns_summaries_and_cache_are_the_users_alone(tmp_path, monkeypatch,
                                                                                         umask022):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv(database.ENV, raising=False)
    tree = private_tree(tmp_path / "campaigns")
    out = tmp_path / "summaries"
    assert collect(tree, out) == 0
    db = database.default_path()
    assert db.is_relative_to(tmp_path) and (mode(db), mode(db.parent)) == ("0o600", "0o700")
    assert all(mode(p) == "0o600" for p in db.parent.iterdir()), {p.name: mode(p) for p in db.parent.iterdir()}
    written = [p for p in out.iterdir() if p.is_file()]
    assert {".smoke.cache.sqlite", "smoke.md", "smoke.csv", "smoke.json"} <= {p.name for p in written}
    assert all(mode(p) == "0o600" for p in written), {p.name: mode(p) for p in written}
    assert mode(out) == "0o700"


def test_an_older_default_store_left_open_is_tightened(tmp_path, monkeypatch, umask022):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv(database.ENV, raising=False)
    db = database.default_path()
    db.parent.mkdir(parents=True)
    with database.Store(str(tmp_path / "elsewhere.sqlite")):  # a store another path names keeps the umask's mode
        pass
    assert mode(tmp_path / "elsewhere.sqlite") == "0o644"
    shutil.copyfile(tmp_path / "elsewhere.sqlite", db)
    db.chmod(0o644)
    db.parent.chmod(0o755)
    with database.Store(str(db)):
        pass
    assert (mode(db), mode(db.parent)) == ("0o600", "0o700")


def test_a_shared_postgresql_store_is_said_once_at_a_campaigns_first_collect(tmp_path, capsys):
    why = pgserver.why_not()
    if why:
        pytest.skip(why)
    server = pgserver.start()
    try:
        import psycopg

        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {database.TABLE}")
        tree = private_tree(tmp_path / "campaigns")
        assert collect(tree, tmp_path / "s", "--store", server.url) == 0
        first = capsys.readouterr().out
        lines = [line for line in first.splitlines() if SHARED in line]
        assert len(lines) == 1 and "medians, versions and folders" in lines[0] and "--no-store" in lines[0], first
        assert collect(tree, tmp_path / "s", "--store", server.url) == 0
        assert SHARED not in capsys.readouterr().out  # the second collect of it: said already
    finally:
        server.stop()
