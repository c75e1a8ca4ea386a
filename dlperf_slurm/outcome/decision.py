"""THE run-status decision: one function turns what is known of a run into its status (method.md, "A run's
status"). ``status`` (and ``--wait``), ``collect`` and ``submit --retry-failed`` all go through
:func:`decide_run` (the table below, :func:`decide`, then a failure's own error line quoted from its log), so
they never disagree.

The evidence (:class:`Evidence`):

- the scheduler's answer (:class:`~dlperf_slurm.model.result.JobInfo`, its state already mapped to a Status by the
  scheduler backend), or that it has no record, or that it could not be asked; or, where it is not asked
  (``collect``), what the campaign's manifest recorded of the run (:class:`Record`): a status the manifest
  decided with the log as it still is stands, one still being submitted is PENDING, one never submitted is
  UNSUBMITTED, and the scheduler's last word it recorded stands in for asking;
- the job script's exit marker (``{"rc", "signal", "end", "disk_full", ...}``, written atomically whatever ends it);
- the log's verdict: the suite parser's :class:`~dlperf_slurm.model.result.RunResult` (OOM text, NaN loss, steps against
  the window, a Slurm kill banner inside the log);
- a kill banner or cgroup OOM line from the job's scheduler output file;
- whether ``dlperf-slurm cancel`` asked for the run to end, and the time limit.

Precedence, first match wins:

====  ==================================================================  ==========================================
 1    an unknown scheduler state                                          undecided (never guessed)
 2    the scheduler holds the job and there is no exit marker             PENDING / RUNNING / REQUEUED
 3    nothing says the run ended (no marker, no record, not asked)        undecided, or the log's verdict (no
                                                                          scheduler at all: a DLPerf tree); a log
                                                                          with no step its suite knows but plenty
                                                                          of output (lines that look like
                                                                          progress): UNRECOGNISED
 4    out of memory: the log, the scheduler (OUT_OF_MEMORY), cgroup       OOM
 5    the loss went non-finite                                            NONFINITE
 6    the job script's watchdog stopped it (the marker's ``hang``)        HANG (with the seconds it saved)
 7    the job's health gate failed (the marker's ``health``, ok false):   UNHEALTHY (its problems and the nodes
      the job ended before training, so nothing later can explain more    it blamed, which ``submit
      (unless it was killed meanwhile: row 9)                             --retry-failed`` excludes)
 8    the job script ended with a failure (its marker) while the         RUNNING (undecided until the scheduler's
      scheduler still runs the job: a cgroup OOM kill is only stated     final state, e.g. OUT_OF_MEMORY)
      when the job ends
 9    killed: scheduler state, kill banner, or the marker's signal        TIMEOUT / CANCELLED / NODE_FAIL /
                                                                          PREEMPTED (a signal with no record: by
                                                                          the time limit, else CANCELLED)
      but NODE_FAIL after the script ended with exit 0, window complete   OK: the figure stands (the reason says so)
10    the disk holding its log was full while it ran (the local runner    LAUNCH_FAILED (not started: no log) /
      or the job script saw it), unless it ended well (exit 0, window)    FAILED, "no space left on device ..."
11    no log                                                              LOG_MISSING when the exit marker shows
                                                                          the script ran (or the log is there but
                                                                          unreadable or not text, or, in a run that
                                                                          ended well, changed after its end: written
                                                                          after the exit marker, or read OK before,
                                                                          now with no or too few steps), else
                                                                          LAUNCH_FAILED (CANCELLED when cancel
                                                                          was asked)
12    non-zero exit or scheduler FAILED                                   FAILED (LAUNCH_FAILED when the log has
                                                                          no step)
13    gone without an exit marker or a scheduler record                   FAILED (killed hard), CANCELLED when
                                                                          cancel was asked, LAUNCH_FAILED when the
                                                                          log has no step; OK when the window is
                                                                          complete and the program printed its own
                                                                          end of training (program_finished)
14    ended well (exit 0 / COMPLETED)                                     the log's verdict: OK, INCOMPLETE,
                                                                          UNMEASURED, PARSE_ERROR, NOT_CONVERGED;
                                                                          INCOMPLETE: "the run had N steps, the
                                                                          window needs M"; no step its suite knows:
                                                                          UNRECOGNISED (never a launch failure)
====  ==================================================================  ==========================================
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from dlperf_slurm import disk
from dlperf_slurm.model.result import JobInfo, RunResult
from dlperf_slurm.model.status import ACTIVE, FAILURES, FINAL, Status, status_of
from dlperf_slurm.parsing import accuracy
from dlperf_slurm.words import plural

KILLED = (Status.TIMEOUT, Status.CANCELLED, Status.NODE_FAIL, Status.PREEMPTED)
#: Statuses whose figures stay on the record: OK's are results; NONFINITE's and a late OOM's are evidence.
KEEPS_FIGURES = (Status.OK, Status.NONFINITE, Status.OOM)
TIME_LIMIT_SLACK_S = 60  # a signal this close to the time limit, with no scheduler record, is the time limit
CANCELLED_BY_US = "cancelled by `dlperf-slurm cancel`"
#: the log's verdicts a log cut after its run ended gives (no step, too few, no timing): with evidence of damage,
#: LOG_MISSING, never UNRECOGNISED ("a program version dlperf_slurm does not know") nor INCOMPLETE
DAMAGE_SHOWS = (Status.LAUNCH_FAILED, Status.INCOMPLETE, Status.UNMEASURED)


@dataclass(kw_only=True)
class Evidence:
    """Everything known about one run. Only what is known is given; the rest stays None/False."""

    job: JobInfo | None = None  # the scheduler's answer; None: no record (asked) or not asked
    asked: bool = False  # the scheduler was asked and answered (so job=None means it has no record)
    marker: Mapping[str, Any] | None = None  # the exit marker
    log: RunResult | None = None  # the log's verdict; None when the log was not read
    has_log: bool = False
    banner: tuple[Status, str] | None = None  # from the job's scheduler output file
    cancel_requested: bool = False
    time_limit_s: float | None = None
    started_at: float | None = None  # the job's start (its provenance line), for the time-limit inference
    log_id: str | None = None  # the log's identity (size, mtime, inode) when it was read, kept with the verdict
    damage: str = ""  # why the log is not what the run wrote (evidence.changed_after_end): truncated, emptied
    record: Record | None = None  # what the manifest recorded (collect, which does not ask the scheduler)


#: what each row of the table above is called (``collect --explain`` names the row that decided a run)
RULES = {1: "an unknown scheduler state", 2: "the scheduler holds the job", 3: "nothing says the run ended: the log's "
         "verdict", 4: "out of memory", 5: "the loss went non-finite", 6: "stopped by the hang watchdog",
         7: "the health gate failed", 8: "the script failed, the job not ended", 9: "killed", 10: "the disk was full",
         11: "no log", 12: "a failure exit", 13: "gone without a trace", 14: "ended well: the log's verdict"}


@dataclass(frozen=True, kw_only=True)
class Record:
    """What a campaign's manifest recorded of a run, for a decision made without asking the scheduler
    (``collect``): its status (None: no manifest, e.g. a ``--from`` tree), reason and exit code, and whether that
    status was decided with the log as the log still is."""

    status: Status | None = None
    reason: str = ""
    exit_code: int | None = None
    with_log: bool = False  # the manifest keeps the log's verdict: the status was decided with the log
    same_log: bool = True  # the log is the one that verdict was read from (unchanged since)


#: final statuses a manifest may have recorded from the scheduler alone, before any log was read
SCHEDULER_WORDS = (Status.OK, Status.OOM, Status.TIMEOUT, Status.NODE_FAIL, Status.PREEMPTED, Status.CANCELLED,
                   Status.FAILED)


@dataclass(frozen=True)
class Outcome:
    status: Status
    reason: str = ""
    exit_code: int | None = None
    rule: int = 0  # the row of the decision table that gave it (0: not decided here, e.g. the manifest's record)


def exit_code(ev: Evidence) -> int | None:
    if ev.marker is not None:
        try:
            return int(ev.marker["rc"])
        except (KeyError, TypeError, ValueError):
            return None
    if ev.job is not None:
        return ev.job.exit_code
    return ev.record.exit_code if ev.record is not None and ev.record.status is not None else None


def decide_run(ev: Evidence, log: str | Path | None = None) -> Outcome | None:
    """THE decision for one run, the one both callers make: ``status`` (the scheduler asked now, ``ev.job``) and
    ``collect`` (``ev.record``: what the manifest recorded). The manifest's own verdicts first (a status decided
    with this very log stands; not submitted; being submitted), then :func:`decide`'s table; a failure whose log
    is ``log`` quotes the log's own error line (``path:line``). None: nothing can be concluded yet."""
    rec = ev.record
    decided = _as_recorded(ev, rec) if rec is not None else None
    if decided is None:
        decided = decide(ev)
        if rec is not None:  # collect always concludes: the log's own verdict when the table cannot
            if decided is None:
                decided = Outcome(*((ev.log.status, ev.log.reason) if ev.log is not None else
                                    (Status.LAUNCH_FAILED, "no log")))
            if rec.status is not None and decided.status == rec.status and rec.reason:
                decided = Outcome(rec.status, rec.reason, decided.exit_code)  # the same verdict: its own words
    if decided is not None and log is not None and ev.has_log and decided.status in QUOTES_ERROR:
        from dlperf_slurm.suites import recognise

        decided = quote_error(decided, str(log), recognise.last_error(log))
    return decided


def _as_recorded(ev: Evidence, rec: Record) -> Outcome | None:
    """The manifest's verdicts that stand without the table: never submitted, being submitted, decided once
    with the log as it still is; and, with no manifest record, no log and no exit marker: not started."""
    if rec.status == Status.UNSUBMITTED:
        return Outcome(Status.UNSUBMITTED, rec.reason or "not submitted")
    if rec.status == Status.SUBMITTING:
        return Outcome(Status.PENDING, "being submitted")
    if rec.status in FINAL and (rec.with_log or rec.status not in SCHEDULER_WORDS) and rec.same_log:
        return Outcome(rec.status, rec.reason, rec.exit_code)  # decided once, with the log
    if rec.status is None and not ev.has_log and ev.marker is None:
        return Outcome(Status.UNSUBMITTED, "no log yet")
    return None


def decide(ev: Evidence) -> Outcome | None:
    """The run's status and reason from the evidence (the table in this module's docstring), or None when
    nothing can be concluded yet (the caller keeps what it had)."""
    job, marker, log = ev.job, ev.marker, ev.log
    rec = ev.record if job is None and ev.record is not None and ev.record.status is not None else None
    sched, state, job_reason = ((job.status, job.state, job.reason) if job is not None else
                                (rec.status, str(rec.status), rec.reason) if rec is not None else (None, "", ""))
    said = job is not None or rec is not None  # the scheduler's word: asked now, or as the manifest recorded it
    rc = exit_code(ev)
    sig = str((marker or {}).get("signal") or "")
    exit_note = f"exit code {rc}" + (f" (SIG{sig})" if sig else "") if rc not in (None, 0) else ""
    where = _where(log)

    row = 0  # the row of the table deciding (Outcome.rule)

    def out(status: Status, reason: str) -> Outcome:
        return Outcome(status, reason, rc, row)

    row = 1  # a state word the scheduler backend does not know
    if job is not None and sched is None:
        return None
    row = 2  # with the scheduler
    if sched in ACTIVE and marker is None:
        if log is not None and log.status == Status.OK:
            return out(sched, f"{sched.lower()} (window complete, job not finished)")
        return out(sched, job_reason if sched != Status.RUNNING else "")
    row = 3  # nothing says it ended
    if marker is None and not said and not ev.asked:
        if log is None:
            return None
        if log.status == Status.INCOMPLETE:
            return out(log.status, log.reason + "; no exit marker and no scheduler state: still running, "
                                                "or killed without a trace")
        if log.status == Status.LAUNCH_FAILED and _unrecognised(log, "")[0]:
            return out(Status.UNRECOGNISED, _unrecognised(log, "no exit marker, plenty of output")[1])
        return out(*(accuracy.verdict(log) or (log.status, log.reason)))  # a --from tree: the log's word is final
    row = 4  # out of memory
    if log is not None and log.status == Status.OOM:
        return out(Status.OOM, log.reason)
    if sched == Status.OOM:
        return out(Status.OOM, f"the scheduler says {state} (host memory limit) {where}".rstrip())
    if ev.banner is not None and ev.banner[0] == Status.OOM:
        return out(Status.OOM, f"out of memory {where}: {ev.banner[1]}")
    row = 5  # non-finite loss
    if log is not None and log.status == Status.NONFINITE:
        return out(Status.NONFINITE, log.reason)
    row = 6  # stopped by the job script's hang watchdog
    hang = (marker or {}).get("hang")
    if isinstance(hang, Mapping):
        return out(Status.HANG, _hang_reason(ev, hang, where))
    row = 7  # the health gate failed: the job ended before training. Unless the job was killed meanwhile (a
    # cancel, a node failure, a preemption during the gate: its srun died with it, so the gate failed for that reason)
    health = (marker or {}).get("health")
    killed = sched in KILLED or bool(sig) or (ev.banner is not None and ev.banner[0] in KILLED)
    if isinstance(health, Mapping) and health.get("ok") is False and not killed:
        return out(Status.UNHEALTHY, _health_reason(health))
    row = 8  # the script failed but the job has not ended: a cgroup OOM kill (of the batch step) is only stated
    # once it has (OUT_OF_MEMORY, the slurmstepd banner), so a FAILED now would be final and wrong
    if sched == Status.RUNNING and (rc not in (None, 0) or sig):
        return out(Status.RUNNING, f"the job script ended ({exit_note}); waiting for the scheduler's final state")
    row = 9  # killed. Except a node that failed after the job script had ended well (exit marker 0, no signal) and
    # the log's window is complete: the figure was measured, timed by the log itself, before the node went; it stands
    if sched == Status.NODE_FAIL and marker is not None and rc == 0 and not sig and ev.banner is None \
            and log is not None and log.status == Status.OK:
        return out(Status.OK, f"the scheduler says {state}, but the job script had ended with exit code 0 and "
                              "the window was complete: the node failed after the measurement; the figure stands")
    kill = _killed(ev, sched, state, job_reason, sig, where)
    if kill is not None:
        return out(*kill)
    row = 10  # the disk holding its log was full while it ran (the local runner, or the job script: its marker)
    full = (job.disk_full if job is not None else "") or str((marker or {}).get("disk_full") or "")
    ended_well = rc in (None, 0) and sched != Status.FAILED and log is not None and log.status == Status.OK
    if full and not ended_well and (log is not None or not ev.has_log):  # a log not read yet: decided with it
        if not ev.has_log and (marker is None or marker.get("started") is False):
            return out(Status.LAUNCH_FAILED, disk.full_reason(full, ""))
        return out(Status.FAILED, disk.full_reason(full, exit_note or "no exit marker", where))
    row = 11  # no log, or one that cannot be read: the script's own exit marker proves it started, so a log
    # missing then was deleted or moved (never "never started"); a log there but unreadable or not text likewise
    if log is not None and log.status == Status.LOG_MISSING:
        return out(Status.LOG_MISSING, log.reason + (f"; {exit_note}" if exit_note else ""))
    if ev.damage and log is not None and log.status in DAMAGE_SHOWS and rc in (None, 0) and sched != Status.FAILED:
        return out(Status.LOG_MISSING, f"{ev.damage}, {plural(log.steps_seen, 'step')}: truncated, emptied or "
                                       "overwritten after the run, not what the run wrote; --retry-failed runs it "
                                       "again")
    if not ev.has_log and marker is not None:
        return out(Status.LOG_MISSING, "no log, though the job script ran and ended (its exit marker"
                                       + (f": {exit_note}" if exit_note else ", exit code 0")
                                       + "): the log was deleted or moved")
    if not ev.has_log:
        if marker is None and not said and ev.cancel_requested:
            return out(Status.CANCELLED, f"{CANCELLED_BY_US} (no scheduler record left)")
        if marker is None and not said:
            return out(Status.LAUNCH_FAILED, "the job left the queue without ever starting (no log, no scheduler "
                                             "record)")
        why = "; ".join(x for x in (exit_note, job_reason) if x)
        return out(Status.LAUNCH_FAILED, "the job script never started (no log)" + (f"; {why}" if why else ""))
    row = 12  # a failure exit
    if rc not in (None, 0) or sched == Status.FAILED:
        note = exit_note or f"the scheduler says {state}" + (f" ({job_reason})" if job_reason else "")
        if log is not None and log.status == Status.LAUNCH_FAILED:
            return out(Status.LAUNCH_FAILED, f"{note}; {log.reason}")
        if log is None or log.status == Status.OK:
            return out(Status.FAILED, note + (" after the window completed" if log is not None else ""))
        return out(Status.FAILED, f"{note}; {log.reason}")
    row = 13  # gone without a trace
    if marker is None and sched is None:
        if ev.cancel_requested:
            return out(Status.CANCELLED, f"{CANCELLED_BY_US} (no scheduler record left)")
        if log is not None and log.status == Status.LAUNCH_FAILED:
            return out(Status.LAUNCH_FAILED, f"{log.reason}; the job left the queue without an exit marker")
        if log is not None and log.status == Status.OK and log.extra.get("program_finished"):
            return out(Status.OK, "the job left the queue without an exit marker, but the program printed its own "
                                  "end of training after the complete window: the figure stands")
        return out(Status.FAILED, "the job left the queue without an exit marker (killed hard: out of memory, "
                                  "node failure or SIGKILL?) and the scheduler keeps no record"
                                  + (f"; the log stops {where}" if log is not None and log.status != Status.OK
                                     else ""))
    row = 14  # ended well: the log decides
    if log is None:
        return out(Status.OK, "")
    if log.status == Status.LAUNCH_FAILED:  # the program finished: what it printed is not what its suite reads
        return out(Status.UNRECOGNISED, _unrecognised(log, "exit code 0" if rc == 0 else "ended well")[1])
    needs = log.extra.get("window_needs") if log.status == Status.INCOMPLETE else None
    if needs and not log.extra.get("restarts"):  # the program ended on its own before the window's end
        return out(log.status, f"the run had {plural(log.steps_seen, 'step')}, the window needs {needs}; use "
                               "--measure-steps and --warmup-steps (collect --from) or the matrix's [measure] to fit "
                               "the window in "
                               "the run, or run it longer")
    return out(*(accuracy.verdict(log) or (log.status, log.reason)))  # an accuracy run short of its target


def _unrecognised(log: RunResult, exited: str) -> tuple[bool, str]:
    """Whether a no-step log is plenty of output, and an UNRECOGNISED run's reason
    (:mod:`dlperf_slurm.suites.recognise`)."""
    from dlperf_slurm.suites import recognise

    info = (log.extra or {}).get("unread")
    info = dict(info) if isinstance(info, Mapping) else {}
    why = str((log.extra or {}).get("no_step_why") or "")  # the suite's parser knows why (records wrapped, ...)
    return bool(info.get("plenty")), (why + "; " if why else "") + recognise.unrecognised_reason(info, exited)


def _hang_reason(ev: Evidence, hang: Mapping[str, Any], where: str) -> str:
    reason = " ".join(x for x in (f"no progress for {hang.get('silent_s')} s", where,
                                  f"(hang bound {hang.get('bound_s')} s): stopped by the job script") if x)
    try:
        ran = float(hang["at"]) - float(ev.started_at) if ev.started_at is not None else None
    except (KeyError, TypeError, ValueError):
        ran = None
    if ran is not None:
        reason += f" after {ran:.0f} s"
        if ev.time_limit_s:
            reason += f", {max(0.0, ev.time_limit_s - ran):.0f} s before its time limit"
    return reason


def _health_reason(health: Mapping[str, Any]) -> str:
    problems = [str(p) for p in health.get("problems") or ()] or ["no reason given"]
    blamed = [str(n) for n in health.get("blamed") or ()]
    if health.get("unreachable") and not blamed:
        return (f"health gate could not check the nodes: {health['unreachable']}: no node's fault, none blamed; "
                "--retry-failed runs it again as it is")
    return ("health gate failed before training: " + "; ".join(problems)
            + (f" (blamed: {', '.join(blamed)}; --retry-failed excludes them)" if blamed else ""))


def _where(log: RunResult | None) -> str:
    if log is None:
        return ""
    return "before any step" if log.status == Status.LAUNCH_FAILED else f"at step {log.steps_seen}"


def _killed(ev: Evidence, sched: Status | None, state: str, job_reason: str, sig: str,
            where: str) -> tuple[Status, str] | None:
    log = ev.log
    after = " after the window completed" if log is not None and log.status == Status.OK else (
        f" {where}" if where else "")
    if sched in KILLED:  # the scheduler's word (asked now, or as the manifest recorded it)
        reason = f"the scheduler says {state}{after}"
        if job_reason:
            reason += f" ({job_reason})"
        if sched == Status.CANCELLED and ev.cancel_requested:
            reason = CANCELLED_BY_US + f" ({state}{after})"
        if sig:
            reason += f"; script got SIG{sig}"
        if log is not None and log.status not in (Status.OK,) and log.reason:
            reason += f"; {log.reason}"
        return sched, reason
    seen = None
    if log is not None and log.status in KILLED:  # a slurmstepd banner inside the log
        seen = log.status, log.reason
    elif ev.banner is not None and ev.banner[0] in KILLED:
        seen = ev.banner[0], f"{ev.banner[1]}{after}"
    if seen is not None:
        if seen[0] == Status.CANCELLED and ev.cancel_requested:
            return Status.CANCELLED, f"{CANCELLED_BY_US} ({seen[1]})"
        return seen
    if sig and sched is None:
        if ev.cancel_requested:
            return Status.CANCELLED, f"{CANCELLED_BY_US} (SIG{sig})"
        end = (ev.marker or {}).get("end")
        start = ev.started_at
        try:
            ran = float(end) - float(start) if end is not None and start is not None else None
        except (TypeError, ValueError):
            ran = None
        if ev.time_limit_s and ran is not None and ran >= ev.time_limit_s - TIME_LIMIT_SLACK_S:
            return Status.TIMEOUT, (f"killed by SIG{sig} after {ran:.0f} s, at the time limit (inferred from the "
                                    "exit marker: no scheduler record)")
        return Status.CANCELLED, f"killed by SIG{sig} (no scheduler record: scancel, preemption or node shutdown)"
    return None


def apply(result: RunResult, outcome: Outcome) -> RunResult:
    """Put the decision on the parsed result, in place: only an OK run's figures are results (a NONFINITE run's,
    and an OOM run's that completed its window, stay as evidence)."""
    if outcome.status not in KEEPS_FIGURES or (outcome.status == Status.OOM and result.status != Status.OOM):
        result.throughput = result.throughput_speed = result.latency_ms = None
    result.status, result.reason = outcome.status, outcome.reason
    if outcome.exit_code is not None:
        result.exit_code = outcome.exit_code
    return result


# ================================================================================================ cells


def cell_status(statuses: Counter | Mapping[Any, int]) -> Status:
    """A cell's status from its runs' statuses: OK when any run is OK; RUNNING/PENDING while any run has not
    ended; else its most frequent failure, ties broken by :data:`dlperf_slurm.model.status.FAILURES` (most severe
    first)."""
    counts = {Status(k): v for k, v in statuses.items() if v}
    if counts.get(Status.OK):
        return Status.OK
    if counts.get(Status.RUNNING):
        return Status.RUNNING
    if any(counts.get(s) for s in (Status.PENDING, Status.REQUEUED, Status.SUBMITTING, Status.UNSUBMITTED)):
        return Status.PENDING  # its display says how many are pending, running or not submitted
    fails = [(n, -FAILURES.index(s), s) for s, n in counts.items() if s in FAILURES]
    return max(fails)[2] if fails else Status.UNSUBMITTED


def status_without_figure(statuses: Iterable[Any]) -> Status:
    """The status of a cell none of whose runs gave a figure (``compare``'s sides, a reference comparison), from
    its runs' status words as a summary holds them: :func:`cell_status` of those that are not OK (an OK run without
    a figure counts for nothing); a word that is no status is left out."""
    return cell_status(Counter(s for s in map(status_of, statuses) if s is not None and s != Status.OK))


def worst_failure(statuses: Mapping[Any, int]) -> Status | None:
    """The failure a status table names for a cell: its most frequent failure (ties: most severe), or None."""
    fails = [(n, -FAILURES.index(Status(s)), Status(s)) for s, n in statuses.items() if n and Status(s) in FAILURES]
    return max(fails)[2] if fails else None


#: statuses whose reason quotes the log's own error line (:func:`quote_error`; an UNRECOGNISED run's quotes the
#: lines that look like progress and names the suites that read the log: :func:`unrecognised_reason`)
QUOTES_ERROR = (Status.LAUNCH_FAILED, Status.FAILED, Status.INCOMPLETE)


def quote_error(out: Outcome, log: str, error: tuple[int, str] | None) -> Outcome:
    """``out`` with its reason quoting the log's own error line, ``error`` = (line number, text) (it replaces the
    unnumbered ``last error: ...`` the parser put there from the same log); ``out`` itself when there is none or
    the reason quotes it already."""
    if error is None or f"{log}:" in out.reason:
        return out
    line, text = error
    quote = f"the log's last error ({log}:{line}): {text}"
    reason = re.sub(r"(^|; )last error: .*?(?=; |$)", lambda m: m.group(1) + quote, out.reason, count=1)
    if reason == out.reason:
        reason = "; ".join(x for x in (out.reason, quote) if x)
    return dataclasses.replace(out, reason=reason)
