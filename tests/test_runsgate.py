"""Exit codes a CI job can use (issue #32.7): ``status`` and ``collect`` exit 1 when every run failed, or with
``--fail-on STATUS,...`` when a run has one of those statuses; 0 otherwise (compare's are tests/test_compare.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import synthcampaigns as sc  # noqa: E402
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402
from dlperf_slurm.errors import UserError  # noqa: E402
from dlperf_slurm.model.status import FAILURES, Status  # noqa: E402
from dlperf_slurm.outcome import exitstatus  # noqa: E402


def test_every_run_failed_and_fail_on():
    assert exitstatus.reasons([Status.OOM, Status.OOM, Status.TIMEOUT]) == ["every run failed (3: OOM 2, TIMEOUT 1)"]
    assert exitstatus.reasons([Status.OOM, Status.OK]) == []  # one OK run: the campaign did not fail
    assert exitstatus.reasons([Status.OOM, Status.RUNNING]) == []  # still going: not (yet) failed
    assert exitstatus.reasons([]) == []
    oom = exitstatus.parse_fail_on("oom, Timeout")
    assert oom == {Status.OOM, Status.TIMEOUT}
    assert exitstatus.reasons([Status.OK, Status.OOM, Status.OK], oom) == ["1 of 3 runs OOM 1 (--fail-on OOM,TIMEOUT)"]
    assert exitstatus.reasons([Status.OK, Status.HANG], oom) == []
    assert exitstatus.parse_fail_on("any") == set(FAILURES)
    assert exitstatus.reasons([Status.OK, Status.HANG], exitstatus.parse_fail_on("any")) == [
        "1 of 2 runs HANG 1 (--fail-on any)"]
    assert exitstatus.parse_fail_on(None) == frozenset() == exitstatus.parse_fail_on("")
    for bad in ("OOMM", "OK", "oom,,nope"):
        with pytest.raises(UserError, match="is no run status"):
            exitstatus.parse_fail_on(bad)


def test_collect_of_a_tree_whose_every_run_failed_exits_1(tmp_path, capsys):
    out = ["--no-plots", "-q", "--no-store", "--out", str(tmp_path / "s"), "--suite", sc.SUITE]
    every = sc.tree(tmp_path / "trees", "every", oom=(1, 2))
    assert main(["collect", "--from", str(every), *out]) == 1
    assert "dlperf-slurm: collect fails: every run failed (10: OOM 10)" in capsys.readouterr().err
    assert (tmp_path / "s" / "every.json").is_file()  # the summaries are written all the same
    some = sc.tree(tmp_path / "trees", "some", oom=(2,))
    assert main(["collect", "--from", str(some), *out]) == 0
    assert main(["collect", "--from", str(some), *out, "--fail-on", "OOM"]) == 1
    assert "collect fails: 5 of 10 runs OOM 5 (--fail-on OOM)" in capsys.readouterr().err
    assert main(["collect", "--from", str(some), *out, "--fail-on", "TIMEOUT,HANG"]) == 0
    assert main(["collect", "--from", str(some), *out, "--fail-on", "nope"]) == 2
    assert "--fail-on nope: 'nope' is no run status" in capsys.readouterr().err


def test_status_of_a_local_campaign(tmp_path):
    logs = tmp_path / "logs"
    for name, modes in (("bad", ("oom",)), ("mixed", ("ok", "oom"))):
        mx = write_matrix(tmp_path, name=name, modes=modes, repeats=2)
        p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "-j", "2", "--no-site", "--templates",
                str(TEMPLATES), "--wait", cwd=tmp_path)
        assert p.returncode == 1 and " done  " in p.stderr, p.stdout + p.stderr  # submit --wait: a run failed
    p = cli("--logs", str(logs), "status", "bad", cwd=tmp_path)
    assert p.returncode == 1 and p.stderr == "dlperf-slurm: status fails: every run failed (2: OOM 2)\n", p.stderr
    p = cli("--logs", str(logs), "status", "mixed", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = cli("--logs", str(logs), "status", "mixed", "--fail-on", "OOM", "--cells", cwd=tmp_path)
    assert p.returncode == 1 and "status fails: 2 of 4 runs OOM 2 (--fail-on OOM)" in p.stderr, p.stderr
    p = cli("--logs", str(logs), "collect", "bad", "--no-plots", "--no-store", "--out", str(tmp_path / "s"),
            cwd=tmp_path)
    assert p.returncode == 1 and "collect fails: every run failed (2: OOM 2)" in p.stderr, p.stderr
