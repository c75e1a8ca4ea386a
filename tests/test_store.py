"""The results store: every collect adds its cells, to SQLite by default or to a real PostgreSQL server (Debian's
package, started for the tests on a loopback port); collecting again updates the rows, never duplicates them."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import pgserver  # noqa: E402
import synthcampaigns as sc  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402
from dlperf_slurm.errors import UserError  # noqa: E402
from dlperf_slurm.report import system as sysversions  # noqa: E402
from dlperf_slurm.store import (
    database,  # noqa: E402
    filing,  # noqa: E402
)


@pytest.fixture(scope="module")
def pg():
    why = pgserver.why_not()
    if why:
        pytest.skip(why)
    server = pgserver.start()
    print(f"\n[pg] throwaway PostgreSQL server up in {server.seconds_to_start:.2f} s at {server.url}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "store" / "results.sqlite")
    server = request.getfixturevalue("pg")
    import psycopg

    with psycopg.connect(server.url, autocommit=True) as conn:  # each test its own empty store
        conn.execute(f"DROP TABLE IF EXISTS {database.TABLE}")
        conn.execute("DROP TABLE IF EXISTS dlperf_schema")
    return server.url


def _counts(result, url: str, system: str) -> tuple[int, int]:
    filed = filing.record_collect(result, url, system)
    return filed.added, filed.updated


def test_collect_adds_its_cells_and_collecting_again_updates_them(url, tmp_path):
    monday = sc.result(tmp_path / "trees", "monday", 1.0, oom=(2,))
    filed = filing.record_collect(monday, url, "alpha:gpu")
    assert (filed.added, filed.updated) == (2, 0)
    with database.Store(url) as st:
        cells = {c.cell_id: c for c in st.cells()}
        first = {c.cell_id: c.first_collected for c in cells.values()}
    for row in monday.cells:  # what the store holds is what collect computed
        got = cells[row.cell_id]
        assert (got.system, got.partition, got.campaign, got.suite) == ("alpha", "gpu", "monday", sc.SUITE)
        assert (got.median, got.ci_low, got.ci_high, got.n, got.n_ok, got.status) == \
               (row.median, row.ci_low, row.ci_high, row.n, row.n_ok, str(row.status))
        assert sorted(got.ok_values) == sorted(r.throughput for r in monday.runs
                                               if r.cell_id == row.cell_id and r.status == "OK")
    oom = next(c for c in cells.values() if c.n_ok == 0)
    assert oom.status == "OOM" and oom.median is None and set(oom.statuses) == {"OOM"}
    assert _counts(monday, url, "alpha:gpu") == (0, 2)  # again: updated, never duplicated
    assert _counts(monday, url, "beta") == (2, 0)  # another system: its own rows
    with database.Store(url) as st:
        assert st.count() == 4
        again = [c for c in st.cells(system="alpha")]
        assert {c.cell_id: c.first_collected for c in again} == first
        assert all(c.collected_at > c.first_collected for c in again)
        assert [c.cell_id for c in st.cells(pattern="*1x2*", system="beta")] == [oom.cell_id]
        assert [c.system for c in st.cells(cell_ids={oom.cell_id, "not.stored"})] == ["alpha", "beta"]
        assert st.cells(cell_ids=()) == [] and len(st.cells(cell_ids=set(first))) == 4
        assert st.cells(pattern="resnet50.tf-cnn.1x_.b8%") == []  # LIKE's wildcards are literal in a glob
        assert st.cells(since="2999-01-01") == []


def test_the_postgresql_store_at_scale(pg, tmp_path):
    """Figures for the record: 200 campaigns of 4 cells into the real server, then all of them again (upserts)."""
    res = sc.result(tmp_path / "trees", "base", 1.0, gpus=(1, 2, 4, 8))
    import psycopg

    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {database.TABLE}")
    rows = filing.records(res, system="alpha")
    campaigns = [[database.StoredCell(**{**r.__dict__, "campaign": f"c{k:03d}", "campaign_key": f"c{k:03d}@x"})
                  for r in rows] for k in range(200)]
    with database.Store(pg.url) as st:
        t0 = time.perf_counter()
        for cells in campaigns:
            assert st.add(cells) == (len(cells), 0)
        t_add = time.perf_counter() - t0
        t0 = time.perf_counter()
        for cells in campaigns:
            assert st.add(cells) == (0, len(cells))
        t_again = time.perf_counter() - t0
        t0 = time.perf_counter()
        hist = st.cells(pattern="*1x8*", system="alpha")
        t_query = time.perf_counter() - t0
        assert st.count() == 800 and len(hist) == 200
    print(f"\n[pg] 200 collects of 4 cells: added 800 rows in {t_add:.2f} s, updated all 800 again in {t_again:.2f} s "
          f"(still {800} rows), one cell's history (200 rows) read in {t_query * 1000:.1f} ms")


def test_collect_cli_stores_by_default_in_the_data_folder_and_to_a_url(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    tree = sc.tree(tmp_path / "trees", "monday", 1.0)
    args = ["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-plots", "-q", "--out", str(tmp_path / "s")]
    assert main(args) == 0
    default = tmp_path / "data" / "dlperf_slurm" / "results.sqlite"
    assert f"results store {default}: 2 cells added, 0 updated" in capsys.readouterr().out
    assert main([*args, "--system", "alpha:gpu"]) == 0 and "2 cells added" in capsys.readouterr().out
    assert main([*args, "--no-cache"]) == 0 and "0 cells added, 2 updated" in capsys.readouterr().out
    with sqlite3.connect(default) as conn:
        assert conn.execute(f"SELECT COUNT(*), COUNT(DISTINCT system_name) FROM {database.TABLE}").fetchone() == (4, 2)
    # the site file's [store] url, and the environment variable before it
    site = tmp_path / "site.toml"
    site.write_text(f'[store]\nurl = "{tmp_path / "site.sqlite"}"\n')
    assert main([*args, "--site", str(site)]) == 0 and "site.sqlite: 2 cells added" in capsys.readouterr().out
    monkeypatch.setenv("DLPERF_SLURM_STORE", str(tmp_path / "env.sqlite"))
    assert main([*args, "--site", str(site)]) == 0 and "env.sqlite: 2 cells added" in capsys.readouterr().out
    assert main([*args, "--no-store"]) == 0 and "results store" not in capsys.readouterr().out


def test_a_store_that_cannot_be_reached_is_one_line_after_the_summaries(tmp_path, capsys):
    tree = sc.tree(tmp_path / "trees", "monday", 1.0)
    out = tmp_path / "s"
    port = pgserver._free_port()  # nothing listens there
    args = ["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-plots", "-q", "--out", str(out)]
    assert main([*args, "--store", f"postgresql://u:secret@127.0.0.1:{port}/db"]) == 1
    err = capsys.readouterr().err
    assert "cannot open it" in err and "secret" not in err and "u:***@127.0.0.1" in err
    assert err.count("\n") == 1 and json.loads((out / "monday.json").read_text())["cells"]
    for url, said in (("postgresql://u:secret@[bad/db", "u:***@[bad/db: cannot open it"),  # libpq quotes the URL
                      ("postgresql://u:secret@host:port/db", "u:***@host:port/db: cannot open it"),
                      (f"postgresq://u:secret@127.0.0.1:{port}/db", "not a store URL")):  # no file of that name
        assert main([*args, "--store", url]) == 1, url
        err = capsys.readouterr().err
        assert said in err and "secret" not in err and err.count("\n") == 1, err
    assert not Path("postgresq:").exists()
    (tmp_path / "file").write_text("")
    assert main([*args, "--store", str(tmp_path / "file" / "results.sqlite")]) == 1
    assert "results store" in capsys.readouterr().err
    site = tmp_path / "site.toml"
    site.write_text("[store]\nurl = 5\n")
    assert main([*args, "--site", str(site)]) == 1 and "[store] url" in capsys.readouterr().err


def test_a_server_killed_under_an_open_store_is_one_line(tmp_path):
    """The real fault: a server of this test's own dies while a store is open on it (its postmaster and the backend
    serving the store's connection killed with SIGKILL, by their PIDs: the backend, left alone, would notice its
    postmaster's death only when it next wakes); reading and adding then fail with one line naming the store,
    not psycopg's traceback."""
    why = pgserver.why_not()
    if why:
        pytest.skip(why)
    server = pgserver.start()
    try:
        rows = filing.records(sc.result(tmp_path / "trees", "monday", 1.0), system="alpha")
        with database.Store(server.url) as st:
            assert st.add(rows) == (2, 0)
            pid = int((server.folder / "data" / "postmaster.pid").read_text().split()[0])
            for victim in (pid, st.conn.info.backend_pid):
                os.kill(victim, signal.SIGKILL)
            for call, what in ((st.cells, "cannot read it"), (lambda: st.add(rows), "cannot add the cells")):
                with pytest.raises(UserError) as err:
                    call()
                assert str(err.value).startswith(f"results store {server.url}: {what}: ")
                assert "\n" not in str(err.value)
    finally:
        server.stop()


def test_the_versions_of_a_system_object_are_its_majority_groups():
    """The System object collect writes (``"system"`` in the JSON, schema dlperf_slurm.system/1, docs/method.md):
    the store keeps the majority node group's GPU, driver, the framework's own CUDA, cuDNN and NCCL beside the
    node's toolkit's, Python, frameworks and container."""
    section = {"schema": "dlperf_slurm.system/1",
               "node_groups": [{"nodes": ["n1", "n2"], "runs": 14,
                                "gpu": {"model": "NVIDIA H100 80GB HBM3", "count": 8, "driver": "550.54.15"},
                                "framework_cuda": "12.1", "framework_cudnn": "8.9.2", "framework_nccl": "2.18.1",
                                "cuda": "12.4", "cudnn": "9.1.0", "nccl": "2.21.5", "python": "3.10.12",
                                "framework": {"torch": "2.3.0"}, "libraries": {"numpy": "1.26.4"},
                                "container": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "digest": "sha256:ab"},
                                "modules": [], "partition": "gpu", "qos": None, "program": "v1.2", "tool": "0.9"},
                               {"nodes": ["n3"], "runs": 1, "gpu": {"model": "NVIDIA H100 80GB HBM3", "count": 8,
                                                                    "driver": "535.104.05"}}],
               "differs": [], "without_provenance": []}
    assert sysversions.versions_of(section, []) == {
        "gpu": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "framework_cuda": "12.1", "framework_cudnn": "8.9.2",
        "framework_nccl": "2.18.1", "cuda": "12.4", "cudnn": "9.1.0", "nccl": "2.21.5",
        "python": "3.10.12", "program": "v1.2", "torch": "2.3.0", "container": "nvcr.io/nvidia/pytorch:24.05-py3",
        "container_digest": "sha256:ab"}
    assert sysversions.partition_of(section) == "gpu" and sysversions.partition_of(None) == ""


def test_history_and_last_good_from_the_postgresql_store(pg, tmp_path, capsys):
    """The same record through the real server: three campaigns collected into it, history judges them, compare
    last-good finds monday."""
    import psycopg

    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {database.TABLE}")
    gpus = "0, NVIDIA A100-SXM4-80GB, {}, 81920 MiB, 1410 MHz"
    out = tmp_path / "s"
    for name, scale, driver in (("monday", 1.0, "535.104.05"), ("tuesday", 0.8, "550.54.15"),
                                ("wednesday", 0.8, "550.54.15")):
        tree = sc.tree(tmp_path / "t", name, scale, job={"gpus": [gpus.format(driver)]}, seed=len(name))
        assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-plots", "-q", "--store", pg.url,
                     "--system", "alpha", "--out", str(out)]) == 0
    capsys.readouterr()
    t0 = time.perf_counter()
    assert main(["history", "--store", pg.url, "--system", "alpha"]) == 0
    seconds = time.perf_counter() - t0
    text = capsys.readouterr().out
    assert text.count("slower, REGRESSED *") == 2 and text.count("tuesday: driver 535.104.05 -> 550.54.15") == 2
    with capsys.disabled():
        print(f"\n[pg] history of 2 cells x 3 campaigns from PostgreSQL in {seconds * 1000:.0f} ms")
    assert main(["compare", "last-good", str(out / "wednesday.json"), "--store", pg.url, "--system", "alpha",
                 "--out", str(tmp_path / "cmp")]) == 1
    assert "--base last-good: monday" in capsys.readouterr().out
