"""Campaigns in the results store by identity, not name: two campaigns of one name (two clones' ``smoke``) are two
campaigns, collecting one again updates its own rows; a schema-1 store (keyed by name, written by the released
code itself: fixtures/store_v1.py) migrates with every row kept, on SQLite and PostgreSQL; ``compare --base
last-good`` looks only at campaigns of NEW's matrix on NEW's system and partition."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import pgserver  # noqa: E402
import store_v1  # noqa: E402
import store_v2  # noqa: E402
import synthcampaigns as sc  # noqa: E402
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm.store import (
    database,  # noqa: E402
    filing,  # noqa: E402
)

FAST = "[health]\nenabled = false\n"


def _campaign(logs: Path, name: str, matrix_name: str | None = None, step_s: str = "1", campaign: str = "") -> None:
    """A real local campaign of the test payload (one cell, 2 repeats), submitted and waited for."""
    logs.mkdir(parents=True, exist_ok=True)
    mx = write_matrix(logs.parent, name=matrix_name or name, extra=FAST)
    p = cli("--logs", str(logs), "submit", str(mx), "--no-site", "--executor", "local", "--templates",
            str(TEMPLATES), "--wait", *(["--campaign", campaign] if campaign else []),
            env={"DLPERF_TEST_STEP_S": step_s})
    assert p.returncode == 0, p.stdout + p.stderr


def _collect(logs: Path, name: str, store_url: str, *more: str) -> str:
    p = cli("--logs", str(logs), "collect", name, "--no-plots", "-q", "--no-cache", "--store", store_url,
            "--out", str(logs.parent / "summaries"), *more)
    assert p.returncode == 0, p.stdout + p.stderr
    return " ".join(p.stdout.split())


def test_two_campaigns_of_one_name_are_two_and_collecting_one_again_updates_it(tmp_path):
    """The review's case: two clones each run the README's smoke campaign into their own logs folder; the second
    clone's collect said '0 cells added, 1 updated' (it overwrote the first's rows). Now each is its own."""
    url = str(tmp_path / "results.sqlite")
    a, b = tmp_path / "cloneA" / "logs", tmp_path / "cloneB" / "logs"
    _campaign(a, "smoke")
    _campaign(b, "smoke", step_s="2")  # half as fast
    said = _collect(a, "smoke", url)
    assert "1 cell added, 0 updated" in said and "other campaign" not in said
    said = _collect(b, "smoke", url)
    assert f"1 cell added, 0 updated (campaign smoke of {b / 'smoke'}, ran " in said, said
    assert f"the store holds 1 other campaign named smoke: {a / 'smoke'}, ran " in said, said
    said = _collect(a, "smoke", url)
    assert "0 cells added, 1 updated" in said and f"named smoke: {b / 'smoke'}" in said
    html = (a.parent / "summaries" / "smoke.html").read_text()  # the trend plot tells the two apart as history does
    assert "smoke#1: " in html and "smoke#2: " in html, html[html.find("<svg"):][:3000]
    with database.Store(url) as st:
        cells = st.cells()
    assert len(cells) == 2 and len({c.key for c in cells}) == 2
    assert [c.where for c in cells] == [str(a / "smoke"), str(b / "smoke")]  # in the order they ran
    assert cells[1].median == pytest.approx(cells[0].median / 2, rel=0.01)
    # history tells them apart: smoke#1, smoke#2, and which folder each is
    p = cli("history", "--store", url)
    assert p.returncode == 0, p.stderr
    rows = [line.split()[:2] for line in p.stdout.splitlines() if line.startswith("smoke#")]
    assert [r[0] for r in rows] == ["smoke#1", "smoke#2"] and "slower, REGRESSED" in p.stdout
    tail = " ".join(p.stdout.split("Campaigns of one name:")[1].split())
    assert tail.startswith(f"smoke#1 {a / 'smoke'} (ran ") and f"; smoke#2 {b / 'smoke'} (ran " in tail
    # the same folder, deleted and submitted again: another campaign (its manifest's creation time)
    shutil.rmtree(a / "smoke")
    _campaign(a, "smoke")
    assert "1 cell added, 0 updated" in _collect(a, "smoke", url)
    with database.Store(url) as st:
        assert st.count() == 3


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "store" / "results.sqlite")
    why = pgserver.why_not()
    if why:
        pytest.skip(why)
    server = pgserver.start()
    request.addfinalizer(server.stop)
    return server.url


def test_a_schema_1_store_migrates_with_every_row_and_its_campaigns_take_them_over(url, tmp_path):
    """Rows written by the released schema-1 code: opened by this version, every row is kept (its values, its
    first collect), marked legacy:<name>; collecting monday again updates its rows (none added); another campaign
    named monday, in another folder, is added beside it."""
    monday, tuesday = (sc.result(tmp_path / "t", name, scale) for name, scale in (("monday", 1.0), ("tuesday", 0.8)))
    assert store_v1.record_collect(monday, url, "alpha:gpu") == (2, 0)
    assert store_v1.record_collect(tuesday, url, "alpha:gpu") == (2, 0)
    with store_v1.Store(url) as old:
        before = {(c.campaign, c.cell_id): c for c in old.cells()}
    with database.Store(url) as st:
        after = {(c.campaign, c.cell_id): c for c in st.cells()}
        cur = st.conn.cursor()
        cur.execute("SELECT version FROM dlperf_schema")
        assert cur.fetchall() == [(database.SCHEMA_VERSION,)]
    assert set(after) == set(before) and len(after) == 4
    for k, c in after.items():
        o = before[k]
        assert (c.median, c.ci_low, c.ci_high, c.n, c.n_ok, c.status, c.ok_values, c.statuses, c.versions,
                c.first_collected, c.collected_at, c.system, c.partition) == \
               (o.median, o.ci_low, o.ci_high, o.n, o.n_ok, o.status, o.ok_values, o.statuses, o.versions,
                o.first_collected, o.collected_at, o.system, o.partition)
        assert c.key == f"legacy:{c.campaign}" and c.ran_at == o.first_collected and c.matrix == ""
        assert c.ok_energy == ()  # schema 1 kept no energy
    filed = filing.record_collect(monday, url, "alpha:gpu")
    assert (filed.added, filed.updated) == (0, 2)  # taken over: the same campaign, collected again
    with database.Store(url) as st:
        rows = st.cells(campaign="monday")
        assert st.count() == 4 and {c.key for c in rows} == {f"monday@{tmp_path / 't' / 'monday'}"}
        assert {c.first_collected for c in rows} == {c.first_collected for k, c in before.items() if k[0] == "monday"}
    other = sc.result(tmp_path / "elsewhere", "monday", 1.1)
    filed = filing.record_collect(other, url, "alpha:gpu")
    assert (filed.added, filed.updated) == (2, 0)
    assert [w for _k, w, _t in filed.namesakes[filed.campaigns[0].key]] == [str(tmp_path / "t" / "monday")]
    with database.Store(url) as st:
        assert st.count() == 6
        database.Store(url).close()  # opening a migrated store again changes nothing
        assert st.count() == 6


def test_last_good_is_of_the_same_matrix_system_and_partition(tmp_path):
    """a1 (matrix a, alpha:p1), b1 (matrix b, the same cell, alpha:p1), a3 (matrix a, alpha:p2), a2 (matrix a,
    alpha:p1), a4 (matrix a, alpha:p1), run in that order: a2's last good campaign is a1. b1 and a3 ran after a1
    and are good, but of another matrix, another partition; a4 ran after a2. (Before: b1, the latest campaign
    sharing the cell on the system.)"""
    url = str(tmp_path / "results.sqlite")
    logs = tmp_path / "logs"
    runs = (("a1", "a", "alpha:p1"), ("b1", "b", "alpha:p1"), ("a3", "a", "alpha:p2"), ("a2", "a", "alpha:p1"),
            ("a4", "a", "alpha:p1"))
    for campaign, matrix, system in runs:
        _campaign(logs, campaign, matrix_name=matrix, campaign=campaign)
        _collect(logs, campaign, url, "--system", system)
    with database.Store(url) as st:
        assert [(c.campaign, c.matrix, c.system_label) for c in st.cells()] == list(runs)  # in the order they ran
    for new in ("a2", str(tmp_path / "summaries" / "a2.json")):  # NEW as a campaign, or as its summary
        p = cli("--logs", str(logs), "compare", "last-good", new, "--store", url, "--out", str(tmp_path / "cmp"))
        assert p.returncode == 0 and "--base last-good: a1" in p.stdout, p.stdout + p.stderr
    p = cli("--logs", str(logs), "compare", "last-good", "a2", "--store", url, "--system", "alpha:p2",
            "--out", str(tmp_path / "cmp"))
    assert p.returncode == 0 and "--base last-good: a3" in p.stdout, p.stdout + p.stderr  # asked for p2
    p = cli("--logs", str(logs), "compare", "last-good", "b1", "--store", url, "--out", str(tmp_path / "cmp"))
    assert p.returncode == 2 and "no campaign of matrix b on" not in p.stderr  # no system asked: b1's own
    assert "no campaign of matrix b that ran before b1 shares a cell" in p.stderr, p.stderr


def test_a_schema_2_store_gains_the_energy_column_with_every_row_kept(url, tmp_path):
    """Rows written by the released schema-2 code (fixtures/store_v2.py): opened by this version, every row and value
    is kept, with no energy (schema 2 kept none); the next collect of the campaign updates its rows, energy too."""
    monday = sc.result(tmp_path / "t", "monday", 1.0)
    rows = filing.records(monday, system="alpha", partition="gpu")
    old_fields = {f for f in store_v2.StoredCell.__dataclass_fields__}
    with store_v2.Store(url) as old:
        assert old.add([store_v2.StoredCell(**{k: getattr(c, k) for k in old_fields}) for c in rows]) == (2, 0)
        before = {c.cell_id: c for c in old.cells()}
    with database.Store(url) as st:
        after = {c.cell_id: c for c in st.cells()}
        cur = st.conn.cursor()
        cur.execute("SELECT version FROM dlperf_schema")
        assert cur.fetchall() == [(3,)]
    assert set(after) == set(before) and len(after) == 2
    for cid, c in after.items():
        assert {k: getattr(c, k) for k in old_fields} == {k: getattr(before[cid], k) for k in old_fields}
        assert c.ok_energy == ()
    filed = filing.record_collect(monday, url, "alpha:gpu")
    assert (filed.added, filed.updated) == (0, 2)
