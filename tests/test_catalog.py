"""``suites`` lists every registered suite with its example matrix; every example matrix in matrices/ loads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, cli  # noqa: E402

from dlperf_slurm import suites  # noqa: E402
from dlperf_slurm.matrix import loader  # noqa: E402
from dlperf_slurm.suites import catalog  # noqa: E402

MATRICES = sorted((REPO / "matrices").glob("*.toml"))


def test_suites_lists_every_registered_suite():
    p = cli("suites", "--json")
    assert p.returncode == 0, p.stderr
    rows = {r["suite"]: r for r in json.loads(p.stdout)}
    assert set(rows) == set(suites.names())
    for r in rows.values():
        assert r["launchers"] and r["default_launcher"] in r["launchers"] and r["precisions"]
        assert r["published"] in ("time", "speed") and r["program"]
    examples = catalog.examples()
    assert all(rows[s]["examples"] == examples.get(s, []) for s in rows)
    assert any(rows[s]["examples"] for s in rows)
    text = cli("suites").stdout
    assert all(f"{s}  [" in text for s in rows)


@pytest.mark.parametrize("path", MATRICES, ids=[p.name for p in MATRICES])
def test_every_example_matrix_loads_and_expands(path):
    m = loader.load(path, site=False)
    assert m.cells and all(s.name in suites.names() for s in m.suites)
    assert loader.runs(m, REPO / "logs" / "_never_written")  # expansion only: nothing is written


def test_output_into_a_closed_pipe_ends_quietly():
    """``dlperf-slurm suites | head -3``: the reader has gone before the output is written; the command stops
    without a traceback (as ``cat`` would, exit 128 + SIGPIPE), and nothing is printed about a broken pipe."""
    import os
    import subprocess

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (head) has exited: every write gets EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "dlperf_slurm", "suites"], stdout=write_end, stderr=subprocess.PIPE,
                           text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    finally:
        os.close(write_end)
    assert p.returncode == 141, p.stderr
    assert p.stderr == ""


def test_a_folder_that_cannot_be_made_is_one_line_not_a_traceback(tmp_path, capsys):
    """``--out`` below a file (or anywhere the user cannot write): one line naming the path, exit 1."""
    from dlperf_slurm import cli

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    summary = tmp_path / "s.json"
    summary.write_text(json.dumps({"name": "s", "runs": []}))
    rc = cli.main(["compare", str(summary), str(summary), "--out", str(blocker / "summaries")])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert err.startswith("dlperf-slurm: error: ") and str(blocker / "summaries") in err and err.count("\n") == 1
