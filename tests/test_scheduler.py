"""scheduler.py: job-id parsing, state mapping, squeue/sacct parsing, batching and sacct fallback (fake Slurm)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import fakeslurm  # noqa: E402

from dlperf_slurm.campaign.monitor import Backoff  # noqa: E402
from dlperf_slurm.errors import ControllerUnreachable, SubmissionRefused  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402
from dlperf_slurm.schedulers import slurmctl as scheduler  # noqa: E402
from dlperf_slurm.schedulers.slurmctl import Slurm  # noqa: E402


@pytest.mark.parametrize("text, expected", [
    ("123", ("123", None)),
    ("123_4", ("123", [4])),
    ("123_[1-6%2]", ("123", [1, 2, 3, 4, 5, 6])),
    ("123_[1,3-4]", ("123", [1, 3, 4])),
    ("123_[0-10:5]", ("123", [0, 5, 10])),
    ("123_[7]", ("123", [7])),
    ("55+1", ("55", None)),
])
def test_split_job_id(text, expected):
    assert scheduler.split_job_id(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "123_", "123_x", "12 3", "123_[1-2"])
def test_split_job_id_rejects(bad):
    with pytest.raises(ValueError):
        scheduler.split_job_id(bad)


def test_expand_job_id():
    assert scheduler.expand_job_id("7_[0-2%1]") == ["7_0", "7_1", "7_2"]
    assert scheduler.expand_job_id("7") == ["7"]


@pytest.mark.parametrize("raw, status", [
    ("PENDING", Status.PENDING), ("PD", Status.PENDING), ("REQUEUE_HOLD", Status.PENDING),
    ("RUNNING", Status.RUNNING), ("COMPLETING", Status.RUNNING), ("CG", Status.RUNNING),
    ("COMPLETED", Status.OK), ("FAILED", Status.FAILED), ("CANCELLED by 0", Status.CANCELLED),
    ("CANCELLED+", Status.CANCELLED), ("TIMEOUT", Status.TIMEOUT), ("DEADLINE", Status.TIMEOUT),
    ("OUT_OF_MEMORY", Status.OOM), ("OOM", Status.OOM), ("NODE_FAIL", Status.NODE_FAIL),
    ("BOOT_FAIL", Status.NODE_FAIL), ("PREEMPTED", Status.PREEMPTED), ("REQUEUED", Status.REQUEUED),
    ("SPECIAL_EXIT", Status.FAILED), ("running", Status.RUNNING), ("WEIRD_NEW_STATE", None),
])
def test_map_state(raw, status):
    assert scheduler.map_state(raw) == status


def test_parse_squeue_expands_pending_ranges_and_keeps_reasons():
    text = ("1_[2-5%2]|1|tok|PENDING|JobArrayTaskLimit|\n"
            "1_0|3|tok|RUNNING|None|n1\n"
            "2|2|other|FAILED|NonZeroExitCode|n2\n"
            "garbage line\n")
    info = scheduler.parse_squeue(text)
    assert sorted(info) == ["1_0", "1_2", "1_3", "1_4", "1_5", "2"]
    assert info["1_4"].status == Status.PENDING and info["1_4"].reason == "JobArrayTaskLimit"
    assert info["1_0"].status == Status.RUNNING and info["1_0"].reason == "" and info["1_0"].raw_id == "3"
    assert info["2"].status == Status.FAILED and info["2"].nodes == "n2"


def test_parse_sacct_skips_steps_and_reads_cancel_by():
    text = ("8_0|9|CANCELLED by 0|0:15|None|n1\n"
            "8_0.batch|9.batch|CANCELLED|0:15||n1\n"
            "8_[1-3%1]|8|CANCELLED by 0|0:0|JobArrayTaskLimit|None assigned\n"
            "10|10|OUT_OF_MEMORY|0:125|None|n2\n"
            "11|11|NODE_FAIL|1:0|None|n1\n")
    info = scheduler.parse_sacct(text)
    assert sorted(info) == ["10", "11", "8_0", "8_1", "8_2", "8_3"]
    assert info["8_0"].status == Status.CANCELLED and info["8_0"].reason == "by 0"
    assert info["8_2"].reason.startswith("by 0") and info["8_2"].nodes == ""
    assert info["10"].status == Status.OOM and info["10"].exit_code == 0
    assert info["11"].status == Status.NODE_FAIL


def test_parse_sacct_reads_consumed_energy_where_a_plugin_counts_it():
    """ConsumedEnergyRaw (integer joules): a figure where positive; 0 or empty (no energy plugin) is none; a pending
    array range's line gives no task a figure."""
    info = scheduler.parse_sacct("7|7|COMPLETED|0:0|None|n1|5421\n8|8|COMPLETED|0:0|None|n1|0\n"
                                 "9|9|FAILED|1:0|None|n2|\n10_[1-3]|10|PENDING|0:0|None|None assigned|0\n")
    assert info["7"].energy_j == 5421.0 and info["8"].energy_j is None and info["9"].energy_j is None
    assert info["10_2"].energy_j is None
    assert scheduler.parse_sacct("11|11|COMPLETED|0:0|None|n1")["11"].energy_j is None  # an older format
    # the real test cluster's sacct (Slurm 22.05, acct_gather_energy/none): 0 once a job ended, empty while it runs
    real = scheduler.parse_sacct("89_5|89|COMPLETED|0:0|JobHeldUser|n1|0\n96_1|96|RUNNING|0:0|None|n1|\n")
    assert real["89_5"].energy_j is None and real["96_1"].energy_j is None and real["89_5"].status == Status.OK


def test_explain_names_the_cause():
    e = scheduler.explain(["sbatch"], "sbatch: error: Batch job submission failed: Invalid partition name specified")
    assert isinstance(e, SubmissionRefused) and "partition" in str(e) and "Invalid partition" in str(e)
    e = scheduler.explain(["sbatch"], "sbatch: error: Batch job submission failed: Invalid account or "
                                      "account/partition combination specified")
    assert isinstance(e, SubmissionRefused) and str(e).startswith("the account")
    e = scheduler.explain(["sbatch"], "sbatch: error: QOSMaxSubmitJobPerUserLimit")
    assert "submission limit" in str(e)
    e = scheduler.explain(["squeue"], "squeue: error: Unable to contact slurm controller (connect failure)")
    assert isinstance(e, ControllerUnreachable) and "unreachable" in str(e)


def test_backoff_doubles_caps_and_resets():
    b = Backoff(1, 8)
    assert [b.next() for _ in range(6)] == [1, 2, 4, 8, 8, 8]
    b.reset()
    assert b.next() == 1


def _jobs(state, specs):
    def fn(s):
        for jid, (name, st, in_q) in specs.items():
            s["jobs"][jid] = {"name": name, "state": st, "reason": "", "in_squeue": in_q, "exit_code": "0:0"}
    fakeslurm.update(state, fn)


def test_query_is_one_squeue_and_one_sacct_for_all_jobs(fake):
    specs = {f"{a}_{t}": ("x", "RUNNING", True) for a in (100, 101, 102) for t in range(7)}
    specs.update({f"103_{t}": ("x", "TIMEOUT", False) for t in range(7)})  # purged from squeue: sacct knows
    _jobs(fake, specs)
    s = Slurm()
    info = s.query(list(specs))
    assert len(info) == 28
    assert info["101_3"].status == Status.RUNNING and info["101_3"].source == "squeue"
    assert info["103_5"].status == Status.TIMEOUT and info["103_5"].source == "sacct"
    calls = fakeslurm.load(fake)["calls"]
    assert calls["squeue"] == 1
    assert calls["sacct"] == 2  # one probe, one query
    sq = [c for c in fakeslurm.load(fake)["log"] if c[0] == "squeue"][0]
    assert "-t" in sq and "all" in sq and "-r" in sq and "100,101,102,103" in sq  # base ids, batched


def test_query_reads_the_energy_of_the_jobs_squeue_says_ended_in_the_same_sacct_call(fake):
    """squeue keeps a job it saw end for MinJobAge with its final state but no energy: the one sacct call of the
    query asks for those too, and their record keeps squeue's state with sacct's ConsumedEnergyRaw."""
    _jobs(fake, {"200": ("x", "RUNNING", True), "201": ("x", "COMPLETED", True), "202": ("x", "TIMEOUT", False)})
    fakeslurm.set_state(fake, "201", "COMPLETED", energy=5421)
    fakeslurm.set_state(fake, "202", "TIMEOUT", in_squeue=False, energy=812)
    info = Slurm().query(["200", "201", "202"])
    assert info["201"].source == "squeue" and info["201"].energy_j == 5421.0
    assert info["202"].source == "sacct" and info["202"].energy_j == 812.0 and info["200"].energy_j is None
    assert fakeslurm.load(fake)["calls"]["sacct"] == 2  # one probe, one query


def test_query_without_sacct_uses_squeue_only(fake):
    fakeslurm.update(fake, lambda s: s.update(sacct="disabled"))
    _jobs(fake, {"100_0": ("x", "COMPLETED", True), "100_1": ("x", "COMPLETED", False)})
    s = Slurm()
    info = s.query(["100_0", "100_1"])
    assert set(info) == {"100_0"}
    assert "accounting storage is disabled" in s.sacct_problem
    # once known to be missing, sacct is not asked again
    s.query(["100_1"])
    assert fakeslurm.load(fake)["calls"]["sacct"] == 1


def test_no_sacct_env_toggle(fake, monkeypatch):
    monkeypatch.setenv("DLPERF_SLURM_NO_SACCT", "1")
    _jobs(fake, {"100_0": ("x", "COMPLETED", False)})
    s = Slurm()
    assert s.query(["100_0"]) == {}
    assert "sacct" not in fakeslurm.load(fake)["calls"]
    assert "DLPERF_SLURM_NO_SACCT" in s.sacct_problem


def test_squeue_unknown_single_id_is_empty_not_an_error(fake):
    assert Slurm().squeue(["999"]) == {}


def test_unreachable_controller_is_a_clear_error(fake):
    fakeslurm.update(fake, lambda s: s.update(ping="down"))
    with pytest.raises(ControllerUnreachable, match="unreachable"):
        Slurm().ping()
    with pytest.raises(ControllerUnreachable, match="Unable to contact slurm controller"):
        Slurm().squeue(["100"])


def test_max_array_size_read_once(fake):
    fakeslurm.update(fake, lambda s: s.update(max_array=5))
    s = Slurm()
    assert s.max_array_size() == 5 and s.max_array_size() == 5
    assert fakeslurm.load(fake)["calls"]["scontrol"] == 1


def test_cancel_is_one_scancel(fake):
    _jobs(fake, {f"100_{t}": ("x", "PENDING", True) for t in range(4)})
    Slurm().cancel(["100_0", "100_1", "100_3"])
    st = fakeslurm.load(fake)
    assert st["calls"]["scancel"] == 1
    assert [st["jobs"][f"100_{t}"]["state"] for t in range(4)] == ["CANCELLED", "CANCELLED", "PENDING", "CANCELLED"]
