"""outcome.decide, THE run-status decision, over its whole input space.

Every scheduler answer (each status a backend maps to, a word it does not know, no record, not asked) x exit
marker (none, exit 0, exit 3, SIGTERM, SIGKILL, stopped by the hang watchdog, ended by a failed health gate, exit 0
after a passed one) x the log's verdict (no log, each verdict a parser gives) x a kill banner in the scheduler's
output file (none, TIMEOUT, cgroup OOM) x a cancel request: 6,864 combinations.
The precedence table in outcome's docstring is checked as properties over all of them, then row by row on
named cases."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.model.result import JobInfo, ParseContext, RunResult
from dlperf_slurm.model.status import ACTIVE, FINAL, Status
from dlperf_slurm.outcome import decision
from dlperf_slurm.schedulers import local, slurmctl  # noqa: E402

UNKNOWN = "unknown word"
NO_RECORD = "no record"
NOT_ASKED = "not asked"
#: every status a scheduler backend maps its state words to (read from the backends, so a new mapping is covered)
BACKEND_STATES = sorted(set(slurmctl._STATE_MAP.values()) | set(local._STATES.values()))
SCHEDULER = [*BACKEND_STATES, UNKNOWN, NO_RECORD, NOT_ASKED]
MARKERS = {"none": None, "rc0": {"rc": 0, "signal": "", "end": 100.0}, "rc3": {"rc": 3, "signal": "", "end": 100.0},
           "term": {"rc": 143, "signal": "TERM", "end": 100.0}, "kill": {"rc": 137, "signal": "KILL", "end": 100.0},
           "hang": {"rc": 143, "signal": "", "end": 100.0, "hang": {"silent_s": 61, "bound_s": 60, "at": 90.0}},
           "unhealthy": {"rc": 3, "signal": "", "end": 100.0, "hang": None,
                         "health": {"ok": False, "blamed": ["n2"], "busbw_gbs": 1.0, "min_busbw_gbs": 460.0,
                                    "problems": ["all-reduce bus bandwidth 1 GB/s < 460 GB/s (threshold)"]}},
           "healthy": {"rc": 0, "signal": "", "end": 100.0, "hang": None,
                       "health": {"ok": True, "blamed": [], "problems": [], "busbw_gbs": 480.0}}}
LOGS = ["no log", "not read", Status.OK, Status.OOM, Status.NONFINITE, Status.INCOMPLETE, Status.UNMEASURED,
        Status.LAUNCH_FAILED, Status.PARSE_ERROR, Status.TIMEOUT, Status.CANCELLED]  # the last two: banner in log
BANNERS = {"none": None, "timeout": (Status.TIMEOUT, "*** JOB 7 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***"),
           "oom": (Status.OOM, "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.batch")}


def _log(verdict) -> RunResult | None:
    if verdict in ("no log", "not read"):
        return None
    steps = 0 if verdict == Status.LAUNCH_FAILED else (3 if verdict in (Status.OK, Status.UNMEASURED) else 1)
    res = RunResult(status=verdict, reason=f"log says {verdict}", steps_seen=steps)
    if verdict in (Status.OK, Status.NONFINITE):
        res.throughput, res.latency_ms = 100.0, 10.0
    return res


def _evidence(sched, marker, log, banner, cancel) -> decision.Evidence:
    job = None
    if sched == UNKNOWN:
        job = JobInfo(job_id="7", status=None, state="WEIRD_STATE")
    elif sched not in (NO_RECORD, NOT_ASKED):
        job = JobInfo(job_id="7", status=sched, state=str(sched), reason="Resources" if sched == Status.PENDING else "")
    return decision.Evidence(job=job, asked=sched != NOT_ASKED, marker=MARKERS[marker], log=_log(log),
                            has_log=log != "no log", banner=BANNERS[banner], cancel_requested=cancel,
                            time_limit_s=3600.0, started_at=0.0)


SPACE = list(itertools.product(SCHEDULER, MARKERS, LOGS, BANNERS, (False, True)))


def test_the_space_is_complete():
    # the backends map to every scheduler-side status and never to a verdict only a log can give
    assert set(BACKEND_STATES) == {Status.OK, Status.FAILED, Status.OOM, Status.TIMEOUT, Status.NODE_FAIL,
                                   Status.PREEMPTED, Status.CANCELLED, Status.PENDING, Status.RUNNING,
                                   Status.REQUEUED}
    assert len(SPACE) == len(SCHEDULER) * 8 * 11 * 3 * 2 == 6864


@pytest.fixture(scope="module")
def decided():
    return {case: decision.decide(_evidence(*case)) for case in SPACE}


def test_every_decision_is_a_status_or_undecided(decided):
    for case, o in decided.items():
        assert o is None or (isinstance(o.status, Status) and o.status in FINAL | ACTIVE), case


def test_an_unknown_scheduler_word_is_never_guessed(decided):
    for (sched, *_), o in decided.items():
        if sched == UNKNOWN:
            assert o is None


def test_a_queued_or_running_job_without_an_exit_marker_stays_with_the_scheduler(decided):
    for (sched, marker, *_), o in decided.items():
        if sched in ACTIVE and marker == "none":
            assert o.status == sched


def test_nothing_says_it_ended_means_undecided_or_the_logs_own_verdict(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        if sched == NOT_ASKED and marker == "none":
            assert (o is None) if log in ("no log", "not read") else (o.status == log)


def test_out_of_memory_anywhere_wins_once_the_run_ended(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        ended = sched not in (UNKNOWN, NOT_ASKED) and not (sched in ACTIVE and marker == "none")
        if ended and (log == Status.OOM or sched == Status.OOM or banner == "oom"):
            assert o.status == Status.OOM, (sched, marker, log, banner, cancel, o)


def test_a_failed_script_of_a_job_still_running_waits_for_the_schedulers_final_state(decided):
    """Row 8: a cgroup OOM kill of the batch step is stated (OUT_OF_MEMORY, banner) only after the script ended."""
    for (sched, marker, log, banner, cancel), o in decided.items():
        if sched == Status.RUNNING and marker in ("rc3", "term", "kill") and log not in (Status.OOM, Status.NONFINITE) \
                and banner != "oom":
            assert o.status == Status.RUNNING and "waiting for the scheduler" in o.reason, (marker, log, banner, o)
        if o is not None and o.status == Status.RUNNING:
            assert sched == Status.RUNNING, (sched, marker, log, banner, o)


def test_a_nonfinite_loss_is_never_hidden_by_an_exit_code_or_a_kill(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        ended = sched not in (UNKNOWN, NOT_ASKED) and not (sched in ACTIVE and marker == "none")
        if ended and log == Status.NONFINITE and sched != Status.OOM and banner != "oom":
            assert o.status == Status.NONFINITE


def test_a_run_the_watchdog_stopped_is_a_hang_unless_memory_or_the_loss_explain_more(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        if marker == "hang" and sched not in (UNKNOWN, Status.OOM) and log not in (Status.OOM, Status.NONFINITE) \
                and banner != "oom":
            assert o.status == Status.HANG and "stopped by the job script" in o.reason, (sched, log, banner, o)


def test_a_failed_health_gate_is_unhealthy_unless_memory_or_the_loss_explain_more(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        killed = sched in decision.KILLED or banner == "timeout"  # killed meanwhile: the kill explains the gate
        if marker == "unhealthy" and sched not in (UNKNOWN, Status.OOM) and log not in (Status.OOM, Status.NONFINITE) \
                and banner != "oom" and not killed:
            assert o.status == Status.UNHEALTHY, (sched, log, banner, o)
            assert "health gate failed" in o.reason and "n2" in o.reason and "460" in o.reason
        if o is not None and o.status == Status.UNHEALTHY:
            assert marker == "unhealthy"  # only the gate's own verdict makes a run UNHEALTHY


def test_a_passed_health_gate_changes_nothing(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        if marker == "healthy":
            assert o == decided[(sched, "rc0", log, banner, cancel)]


def test_a_scheduler_kill_is_what_it_says_unless_memory_or_the_loss_explain_more(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        if sched in decision.KILLED and log not in (Status.OOM, Status.NONFINITE) and banner != "oom" \
                and marker != "hang":
            if sched == Status.NODE_FAIL and marker in ("rc0", "healthy") and log == Status.OK and banner == "none":
                # the node failed after the script ended well and the window was complete: the figure stands
                assert o.status == Status.OK and "the figure stands" in o.reason, (marker, banner, o)
            else:
                assert o.status == sched


def test_ok_only_from_a_clean_end_and_a_complete_window(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        if o is not None and o.status == Status.OK and not (sched == NOT_ASKED and marker == "none"):
            assert marker in ("none", "rc0", "healthy"), (sched, marker)
            assert sched in (Status.OK, NO_RECORD, NOT_ASKED, *ACTIVE) or (sched == Status.NODE_FAIL and
                                                                          "the figure stands" in o.reason), (sched, marker)
            assert log in (Status.OK, "not read") and banner == "none"
            assert not (marker == "none" and sched == NO_RECORD)  # gone without a trace is never OK


def test_each_log_verdict_survives_a_clean_exit(decided):
    """Row 14: exit 0 / COMPLETED hands the decision to the log: NONFINITE, INCOMPLETE, UNMEASURED, ... reach
    the manifest (and --retry-failed) instead of an OK the exit code alone would give; a log with no step its
    suite knows is UNRECOGNISED there (the program finished: never a launch failure)."""
    for (sched, marker, log, banner, cancel), o in decided.items():
        if sched in (Status.OK, NO_RECORD) and marker == "rc0" and banner == "none" and log not in ("no log", "not read"):
            assert o.status == (Status.UNRECOGNISED if log == Status.LAUNCH_FAILED else log)
            assert o.rule in (4, 5, 9, 14)  # a log's OOM, non-finite loss or kill banner: their own rows


def test_unrecognised_only_when_the_program_finished(decided):
    # issue 20.2: a run whose program ended well is never LAUNCH_FAILED for a log its suite does not read; a
    # failure exit, a kill or a hang keep their own status
    for (sched, marker, log, banner, cancel), o in decided.items():
        if o is not None and o.status == Status.UNRECOGNISED:
            assert log == Status.LAUNCH_FAILED and marker in ("rc0", "healthy", "none"), (sched, marker, log, o)
            assert sched not in (Status.FAILED, Status.OOM, *decision.KILLED), (sched, marker, log, o)
            assert "finds no training step it knows" in o.reason
        if o is not None and o.status == Status.LAUNCH_FAILED and marker in ("rc0", "healthy") and log != "no log":
            assert sched not in (Status.OK, NO_RECORD) or banner != "none", (sched, marker, log, banner, o)


def _no_step_log(progress: int, lines: int, error=None) -> RunResult:
    res = RunResult(status=Status.LAUNCH_FAILED, reason="no training step in the log")
    res.extra["unread"] = {"suite": "paddle/resnet50", "lines": lines, "progress_count": progress,
                           "progress": [[3, "ips: 444.4 samples/s"]] if progress else [], "readers": [],
                           "plenty": progress >= 3 or (lines >= 1000 and error is None), "error": error}
    return res


def test_a_tree_log_with_plenty_of_output_is_unrecognised_else_launch_failed():
    # row 3 (no exit marker, no scheduler: a DLPerf tree): plenty of output makes it UNRECOGNISED
    plenty = decision.decide(decision.Evidence(log=_no_step_log(40, 200), has_log=True))
    assert plenty.status == Status.UNRECOGNISED and plenty.rule == 3
    assert "no exit marker, plenty of output" in plenty.reason and "line 3: 'ips: 444.4 samples/s'" in plenty.reason
    little = decision.decide(decision.Evidence(log=_no_step_log(0, 12, [12, "RuntimeError: x"]), has_log=True))
    assert little.status == Status.LAUNCH_FAILED and little.rule == 3
    # a failure exit stays a failure whatever the log holds
    failed = decision.decide(decision.Evidence(log=_no_step_log(40, 200), has_log=True, asked=True,
                                             marker=MARKERS["rc3"]))
    assert failed.status == Status.LAUNCH_FAILED and failed.rule == 12


def test_the_retry_leaves_unrecognised_runs_and_force_reruns_them():
    from dlperf_slurm.submit.journal import RETRYABLE, SubmitReport, to_submit

    assert Status.UNRECOGNISED not in RETRYABLE and Status.LAUNCH_FAILED in RETRYABLE
    assert Status.UNRECOGNISED in decision.FAILURES  # never in a median: only OK runs are

    class Run:  # what to_submit reads of a run
        def __init__(self, key):
            self.key = key

    runs = [Run("unread"), Run("failed"), Run("ok")]
    statuses = {"unread": Status.UNRECOGNISED, "failed": Status.LAUNCH_FAILED, "ok": Status.OK}
    report = SubmitReport()
    assert [r.key for r in to_submit(runs, statuses, True, False, report)] == ["failed"]
    assert report.kept == {Status.UNRECOGNISED: 1, Status.OK: 1}
    assert [r.key for r in to_submit(runs, statuses, False, True, SubmitReport())] == ["unread", "failed", "ok"]


def test_a_run_that_ended_well_short_of_the_window_says_how_to_fit_it():
    """Part 4 of #20: a program that finished on its own (exit 0) before the window's end is INCOMPLETE with the
    steps it had and the steps the window needs, on a real log: MindSpore's model zoo ResNet-50 (five epochs of 312
    steps, tests/fixtures/real/MindSpore-models/8ab20db7/) read with a window of 312 + 2000."""
    path = Path(__file__).parent / "fixtures" / "real" / "MindSpore-models" / "8ab20db7" / \
        "resnet50_imagenet_8p_zoo.excerpt.log"
    log = suites.get("mindspore/resnet50").parse(lp.read_lines(path), ParseContext(nodes=1, gpus_per_node=8,
                                                                                   batch_size=256, warmup_steps=312,
                                                                                   measure_steps=2000))
    assert log.status == Status.INCOMPLETE and log.steps_seen == 1560
    o = decision.decide(decision.Evidence(job=None, asked=True, marker=MARKERS["rc0"], log=log, has_log=True))
    assert o.status == Status.INCOMPLETE
    assert o.reason.startswith("the run had 1560 steps, the window needs 2312; use --measure-steps")
    # still running, or killed without a trace: the log's own words, not advice to shorten the window
    o = decision.decide(decision.Evidence(job=None, asked=False, marker=None, log=log, has_log=True))
    assert o.status == Status.INCOMPLETE and "the log stops at step 1560 of 2312" in o.reason


def test_a_disk_full_while_it_ran_explains_a_run_that_did_not_end_well(decided):
    """Row 10: the backend saw the disk holding the log full while the run ran (the local runner's ``disk_full``).
    A run the rows before it decide (queued, OOM, NaN, hang, health gate, killed) keeps their status; one that
    ended well with a complete window stays OK; every other run reads LAUNCH_FAILED (no log, no exit marker) or
    FAILED, saying "no space left on device" and what to do. A log not read yet changes nothing (it is read next)."""
    full = "/x/logs/c/1n1g: 0 KiB free"
    changed = {}
    for case, before in decided.items():
        ev = _evidence(*case)
        if ev.job is None or ev.job.status is None:
            continue
        ev.job = dataclasses.replace(ev.job, disk_full=full)
        o = decision.decide(ev)
        if before is None or before.rule < 10 or before.status == Status.OK or case[2] == "not read":
            assert o == before, (case, before, o)
            continue
        changed[case] = o.status if o is not None else None
        assert o is not None and o.rule == 10 and o.reason.startswith("no space left on device"), (case, o)
        assert full in o.reason and "--retry-failed" in o.reason, (case, o)
        assert o.status == (Status.LAUNCH_FAILED if case[1] == "none" and case[2] == "no log" else Status.FAILED), \
            (case, o)
    # the local runner's words: a held run it did not start; a run whose log stops short; one that ended well
    assert changed[(Status.FAILED, "none", "no log", "none", False)] == Status.LAUNCH_FAILED
    assert changed[(Status.FAILED, "none", Status.INCOMPLETE, "none", False)] == Status.FAILED
    assert changed[(Status.OK, "rc0", Status.LAUNCH_FAILED, "none", False)] == Status.FAILED
    assert (Status.OK, "rc0", Status.OK, "none", False) not in changed


def test_the_job_scripts_word_on_the_disk_decides_as_the_runners_does(decided):
    """Row 10 under Slurm: the job script's exit marker carries ``disk_full`` (templates/sbatch.sh.j2). For every
    run with a marker, the same outcome as when the backend said it (the local runner's ``JobInfo.disk_full``); a
    job that found the disk full as it started (``"started": false``, no log) reads LAUNCH_FAILED, not started."""
    full = "/x/logs/c/1n1g: 0 KiB free"
    seen = 0
    for case in decided:
        ev = _evidence(*case)
        if ev.marker is None or ev.job is None or ev.job.status is None:
            continue
        by_job = decision.decide(dataclasses.replace(ev, job=dataclasses.replace(ev.job, disk_full=full)))
        by_marker = decision.decide(dataclasses.replace(ev, marker={**ev.marker, "disk_full": full}))
        assert by_marker == by_job, (case, by_job, by_marker)
        seen += by_marker is not None and by_marker.rule == 10
    assert seen > 100, seen
    job = JobInfo(job_id="7", status=Status.FAILED, state="FAILED", reason="NonZeroExitCode")
    for log, has_log, want in ((None, False, Status.LAUNCH_FAILED), (_log(Status.LAUNCH_FAILED), True, Status.FAILED)):
        marker = {"rc": 1, "signal": "", "end": 100.0, "disk_full": full, "started": False}
        o = decision.decide(decision.Evidence(job=job, asked=True, marker=marker, log=log, has_log=has_log))
        assert o.status == want and o.rule == 10 and full in o.reason, o
        assert ("not started" in o.reason) == (want == Status.LAUNCH_FAILED), o


def test_a_failed_exit_is_never_ok(decided):
    for (sched, marker, log, banner, cancel), o in decided.items():
        if marker in ("rc3", "term", "kill", "hang", "unhealthy") or sched == Status.FAILED:
            assert o is None or o.status != Status.OK


def test_the_cancel_request_only_turns_killed_or_vanished_runs_into_cancelled(decided):
    for (sched, marker, log, banner, _), o in decided.items():
        without, with_ = decided[(sched, marker, log, banner, False)], decided[(sched, marker, log, banner, True)]
        if without is None or with_ is None:
            assert without is None and with_ is None
        elif without.status != with_.status:
            assert with_.status == Status.CANCELLED, (sched, marker, log, banner, without, with_)


def test_exit_code_comes_from_the_marker_else_the_scheduler(decided):
    for (sched, marker, *_), o in decided.items():
        if o is not None and MARKERS[marker] is not None:
            assert o.exit_code == MARKERS[marker]["rc"]


# ------------------------------------------------------------------------------------------------ row by row

ROWS = [
    # (scheduler, marker, log, banner, cancel) -> status, words in the reason
    ((Status.PENDING, "none", "no log", "none", False), Status.PENDING, "Resources"),
    ((Status.RUNNING, "none", Status.OK, "none", False), Status.RUNNING, "window complete"),
    ((NOT_ASKED, "none", Status.INCOMPLETE, "none", False), Status.INCOMPLETE, "no exit marker"),
    ((Status.OK, "rc0", Status.OOM, "none", False), Status.OOM, "log says OOM"),
    ((NO_RECORD, "kill", "not read", "oom", False), Status.OOM, "oom-kill"),
    ((Status.OK, "rc0", Status.NONFINITE, "none", False), Status.NONFINITE, "log says NONFINITE"),
    ((Status.TIMEOUT, "term", Status.INCOMPLETE, "none", False), Status.TIMEOUT, "scheduler says TIMEOUT"),
    ((Status.CANCELLED, "term", Status.INCOMPLETE, "none", True), Status.CANCELLED, "dlperf-slurm cancel"),
    ((NO_RECORD, "term", Status.INCOMPLETE, "timeout", False), Status.TIMEOUT, "TIME LIMIT"),
    ((NO_RECORD, "term", Status.INCOMPLETE, "none", False), Status.CANCELLED, "no scheduler record"),
    ((NO_RECORD, "term", Status.CANCELLED, "none", True), Status.CANCELLED, "dlperf-slurm cancel"),
    ((NO_RECORD, "term", "not read", "timeout", True), Status.TIMEOUT, "TIME LIMIT"),
    # the exit marker proves the script ran: a log missing then was deleted or moved, never "never started"
    ((NO_RECORD, "rc3", "no log", "none", False), Status.LOG_MISSING, "deleted or moved"),
    ((Status.OK, "rc0", "no log", "none", False), Status.LOG_MISSING, "exit code 0"),
    # the node died after the script ended well with a complete window (issue #22): the figure stands
    ((Status.NODE_FAIL, "rc0", Status.OK, "none", False), Status.OK, "the figure stands"),
    ((Status.NODE_FAIL, "none", Status.OK, "none", False), Status.NODE_FAIL, "after the window completed"),
    ((NO_RECORD, "none", "no log", "none", False), Status.LAUNCH_FAILED, "without ever starting"),
    ((NO_RECORD, "none", "no log", "none", True), Status.CANCELLED, "dlperf-slurm cancel"),
    ((Status.FAILED, "rc3", Status.INCOMPLETE, "none", False), Status.FAILED, "exit code 3"),
    ((Status.FAILED, "rc3", Status.LAUNCH_FAILED, "none", False), Status.LAUNCH_FAILED, "exit code 3"),
    ((Status.OK, "rc3", Status.OK, "none", False), Status.FAILED, "after the window completed"),
    ((NO_RECORD, "none", Status.INCOMPLETE, "none", False), Status.FAILED, "without an exit marker"),
    ((Status.OK, "rc0", Status.OK, "none", False), Status.OK, ""),
    ((Status.FAILED, "hang", Status.INCOMPLETE, "none", False), Status.HANG, "90 s, 3510 s before its time limit"),
    ((Status.TIMEOUT, "hang", Status.INCOMPLETE, "timeout", False), Status.HANG, "no progress for 61 s"),
    ((Status.OK, "rc0", Status.UNMEASURED, "none", False), Status.UNMEASURED, "log says UNMEASURED"),
    ((Status.FAILED, "unhealthy", Status.LAUNCH_FAILED, "none", False), Status.UNHEALTHY, "blamed: n2"),
    ((NO_RECORD, "unhealthy", Status.LAUNCH_FAILED, "none", True), Status.UNHEALTHY, "< 460 GB/s"),
    # a cancel (or a node failure) during the gate killed its srun: the kill explains the failed gate (issue #22)
    ((Status.CANCELLED, "unhealthy", Status.LAUNCH_FAILED, "none", False), Status.CANCELLED, "CANCELLED"),
    ((Status.CANCELLED, "unhealthy", Status.LAUNCH_FAILED, "none", True), Status.CANCELLED, "dlperf-slurm cancel"),
    ((Status.NODE_FAIL, "unhealthy", Status.LAUNCH_FAILED, "none", False), Status.NODE_FAIL, "NODE_FAIL"),
    ((Status.OK, "unhealthy", Status.OOM, "none", False), Status.OOM, "log says OOM"),
    ((Status.OK, "healthy", Status.OK, "none", False), Status.OK, ""),
    ((Status.OK, "rc0", Status.PARSE_ERROR, "none", False), Status.PARSE_ERROR, "log says PARSE_ERROR"),
]


@pytest.mark.parametrize("case, status, words", ROWS, ids=[f"{r[0][0]}-{r[0][1]}-{r[0][2]}-{r[0][3]}-{r[0][4]}"
                                                            for r in ROWS])
def test_precedence_row(case, status, words):
    o = decision.decide(_evidence(*case))
    assert o is not None and o.status == status and words in o.reason, o


def test_time_limit_is_inferred_from_the_marker_when_the_scheduler_forgot_the_job():
    ev = _evidence(NO_RECORD, "term", Status.INCOMPLETE, "none", False)
    ev.marker = {"rc": 143, "signal": "TERM", "end": 3590.0}
    o = decision.decide(ev)
    assert o.status == Status.TIMEOUT and "at the time limit" in o.reason


def test_apply_keeps_figures_only_for_results_and_evidence():
    for status in Status:
        res = _log(Status.OK)
        decision.apply(res, decision.Outcome(status, "x"))
        kept = res.throughput is not None
        assert kept == (status in (Status.OK, Status.NONFINITE)), status


def test_cell_status_and_worst_failure():
    assert decision.cell_status({Status.OK: 1, Status.OOM: 6}) == Status.OK
    assert decision.cell_status({Status.RUNNING: 1, Status.OOM: 6}) == Status.RUNNING
    assert decision.cell_status({Status.SUBMITTING: 1, Status.OOM: 6}) == Status.PENDING
    assert decision.cell_status({Status.OOM: 2, Status.FAILED: 2}) == Status.OOM  # a tie: the more severe
    assert decision.cell_status({Status.OOM: 1, Status.FAILED: 2}) == Status.FAILED  # the most frequent
    assert decision.cell_status({}) == Status.UNSUBMITTED
    assert decision.worst_failure({Status.OK: 3, Status.TIMEOUT: 1, Status.CANCELLED: 1}) == Status.TIMEOUT
    assert decision.worst_failure({Status.OK: 3}) is None
