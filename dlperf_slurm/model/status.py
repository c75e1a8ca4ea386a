"""A run's status, the one vocabulary every stage and every file uses: :class:`Status` and its orders
(:data:`FAILURES` by severity, :data:`ACTIVE`, :data:`FINAL`, the display order). No other module writes a status
as a string (tests/test_structure.py holds it)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """A run's status (method.md, "A run's status"). A ``StrEnum``: members are their own names as strings,
    so they serialise as-is (JSON, SQLite, CSV) and compare equal to those strings."""

    OK = "OK"
    OOM = "OOM"
    NONFINITE = "NONFINITE"  # loss NaN/inf inside the run
    HANG = "HANG"  # no progress for longer than the hang bound: the job script stopped it (well before its limit)
    UNHEALTHY = "UNHEALTHY"  # the job's health gate failed (GPUs, ECC/XID, clocks, all-reduce): it never trained
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    CANCELLED = "CANCELLED"
    LAUNCH_FAILED = "LAUNCH_FAILED"  # no training step at all (or no log)
    FAILED = "FAILED"  # non-zero exit, cause unknown
    INCOMPLETE = "INCOMPLETE"  # fewer steps than the window
    NOT_CONVERGED = "NOT_CONVERGED"  # an accuracy run ended (its last epoch) without reaching its target
    UNMEASURED = "UNMEASURED"  # past the window, but the log does not time it (e.g. coarse logging)
    PARSE_ERROR = "PARSE_ERROR"  # the parser itself failed on this log (a bug to report; never a number)
    # the program finished (exit 0; in a tree without exit markers: plenty of output) but its suite finds no step it
    # knows in the log: another program version's format, or another suite's log. Never a number, never a launch
    # failure, never resubmitted by --retry-failed (the same program prints the same); its reason quotes the lines
    # that look like progress and names the suites that read the log
    UNRECOGNISED = "UNRECOGNISED"
    # the run ended but its log is gone, unreadable, not text, or changed after the run ended (truncated, emptied:
    # written after the exit marker, or read OK before): no figure to read; --retry-failed runs it again
    LOG_MISSING = "LOG_MISSING"
    REQUEUED = "REQUEUED"
    RUNNING = "RUNNING"
    PENDING = "PENDING"
    SUBMITTING = "SUBMITTING"  # recorded, its sbatch not yet confirmed (the submit journal)
    UNSUBMITTED = "UNSUBMITTED"

    @property
    def active(self) -> bool:
        """The scheduler holds the run (queued or running): it may still change."""
        return self in ACTIVE

    @property
    def final(self) -> bool:
        return self in FINAL

    @property
    def failure(self) -> bool:
        return self in FAILURES


#: Failures, most severe first: a cell with no OK run reads its most frequent failure, ties broken in this order.
FAILURES: tuple[Status, ...] = (
    Status.OOM, Status.NONFINITE, Status.HANG, Status.UNHEALTHY, Status.TIMEOUT, Status.NODE_FAIL, Status.PREEMPTED,
    Status.CANCELLED, Status.LAUNCH_FAILED, Status.FAILED, Status.INCOMPLETE, Status.UNMEASURED, Status.UNRECOGNISED,
    Status.PARSE_ERROR, Status.NOT_CONVERGED, Status.LOG_MISSING)


#: With the scheduler: queued, requeued or running.
ACTIVE: frozenset[Status] = frozenset({Status.PENDING, Status.RUNNING, Status.REQUEUED})


#: Not ended yet, whether or not it reached a scheduler.
UNFINISHED: frozenset[Status] = ACTIVE | {Status.SUBMITTING, Status.UNSUBMITTED}


FINAL: frozenset[Status] = frozenset(FAILURES) | {Status.OK}


#: The order statuses are listed in (counts, progress lines).
DISPLAY_ORDER: tuple[Status, ...] = (Status.OK, Status.RUNNING, Status.PENDING, Status.REQUEUED, Status.SUBMITTING,
                                     *FAILURES, Status.UNSUBMITTED)


def status_of(word: Any) -> Status | None:
    """The Status a stored word names, None for anything else (never a dunder or a near miss)."""
    try:
        return Status(str(word))
    except ValueError:
        return None
