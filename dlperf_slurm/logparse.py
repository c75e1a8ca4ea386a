"""Streaming log reading shared by every suite's parser (method.md, "One run" and "A run's status").

A parser reads one run's log once, line by line, and keeps only what the measurement needs: the times at the
window's two ends, the per-step throughputs inside the window and a few facts (OOM text, the last error line,
provenance). Memory stays flat whatever the size of the log.

What is here:

- :func:`read_lines`: lines of a file, decoded as UTF-8 with ``errors='replace'``; ``\\r`` also ends a line
  (progress bars); a physical line longer than :data:`MAX_LINE` comes in pieces (flat memory).
- :func:`split_rank`: rank labels written by launchers: ``srun -l`` (``0: ``, `` 3: ``), ``torchrun --tee``
  (``[rank0]:``, ``[default0]:``) and OpenMPI ``--tag-output`` (``[1,0]<stdout>:``).
- :class:`Scanner`: runs a suite's line handler over a log: rank filtering, re-joining a record that buffering
  split over two labelled lines, OOM / Slurm-kill / error text on every rank, ``:::DLPERF`` job, memory and error
  events in every suite's log.
- :class:`Window`: the measurement window of method.md — skip ``warmup`` steps, time the next ``measure``; coarse
  logs are measured over the logged intervals that lie wholly inside the window.
- :func:`finish`: the :class:`~dlperf_slurm.suites.RunResult` and its status, from the log alone. The collector
  then combines it with the scheduler state and the exit marker (:func:`combine`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dlperf_slurm.suites import ParseContext, RunResult, Status
from dlperf_slurm.workloads.dlperf_log import PREFIX as DLPERF_PREFIX
from dlperf_slurm.workloads.dlperf_log import parse_event  # the one reader of our line format

MAX_LINE = 1 << 20  # characters per line piece: a longer physical line is read in pieces
MAX_FRAGMENT = 1 << 16  # a split record longer than this is given up (garbled)
MAX_REASON = 300  # characters of a log line quoted in a reason

NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|NaN|Inf)"  # a number as logs print one

# ------------------------------------------------------------------------------------------------ reading


def read_lines(path: Any) -> Iterator[str]:
    """The lines of the file at ``path``, streamed, without their line ends.

    Bytes that are not UTF-8 become U+FFFD; ``\\n``, ``\\r\\n`` and a lone ``\\r`` end a line (universal
    newlines); a truncated last line (no newline) is yielded as it is; a line longer than :data:`MAX_LINE`
    characters comes in several pieces, so memory stays flat for any file.
    """
    with open(path, encoding="utf-8", errors="replace", newline=None) as f:
        readline = f.readline
        while True:
            line = readline(MAX_LINE)
            if not line:
                return
            if line[-1:] == "\n":
                line = line[:-1]
            yield line


def iter_text_lines(text: str) -> Iterator[str]:
    """The lines of an in-memory log (tests, fuzzing): the same splitting rules as :func:`read_lines`."""
    yield from text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    # a trailing "\n" yields one empty last line, which every parser ignores


# ------------------------------------------------------------------------------------------------- ranks

_RANK = re.compile(r"(?:\s{0,8}(\d{1,6}): |\[(?:rank|default)(\d{1,6})\]:\s?|\[\d+,(\d{1,6})\]<std(?:out|err)>:\s?)")


def split_rank(line: str) -> tuple[int | None, str]:
    """``(rank, text)`` of a line labelled by a launcher, ``(None, line)`` for an unlabelled one."""
    c = line[:1]
    if c == " " or c == "[" or c.isdigit():
        m = _RANK.match(line)
        if m:
            return int(m.group(m.lastindex or 1)), line[m.end():]
    return None, line


# --------------------------------------------------------------------------------------------- text facts

# TensorFlow's BFC allocator warns "ran out of memory trying to allocate ... The caller indicates that this is
# not a failure": training goes on, so that line is no OOM.
_NOT_A_FAILURE = "not a failure"


_OOM_WORDS = ("out of memory", "cuda_error_out_of_memory", "resource_exhausted", "resourceexhausted",
              "oom when allocating", "oom-kill", "oom_kill", "outofmemoryerror", "exceeded job memory limit")


def oom_text(line: str) -> bool:
    """Whether the line reports an out-of-memory failure (method.md's list, plus TF's and the kernel's)."""
    if ("emory" in line or "EMORY" in line or "OOM" in line or "oom" in line or "xhausted" in line
            or "XHAUSTED" in line):
        low = line.lower()
        return any(w in low for w in _OOM_WORDS) and _NOT_A_FAILURE not in low
    return False


_SLURM_KILL = re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))?\s*\*\*\*")
_SLURM_CAUSE = {"TIME LIMIT": Status.TIMEOUT, "NODE FAILURE": Status.NODE_FAIL, "PREEMPTION": Status.PREEMPTED,
                "JOB REQUEUE": Status.REQUEUED}


def slurm_kill(line: str) -> str | None:
    """The status a ``slurmstepd`` kill banner states (``*** STEP 12.0 ON n1 CANCELLED AT ... DUE TO TIME
    LIMIT ***``), or None."""
    if "CANCELLED AT" not in line:
        return None
    m = _SLURM_KILL.search(line)
    if not m:
        return None
    return _SLURM_CAUSE.get((m.group(1) or "").strip(), Status.CANCELLED)


_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b:?")


def _clip(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 1] + "…"


def to_float(value: Any) -> float | None:
    """A number from JSON or text (``"nan"``, ``"inf"`` included), None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# -------------------------------------------------------------------------------------------- timestamps

_EPOCH = datetime(1970, 1, 1)


class IsoClock:
    """``2020-09-15 14:29:13.473765`` (naive, as dllogger prints it) to seconds since the first stamp the parser
    read: small numbers keep every microsecond of a difference (absolute epoch seconds would lose ~0.2 us).
    Only differences are used, so the time zone does not matter. None when malformed."""

    def __init__(self) -> None:
        self.base: datetime | None = None
        self._minute: str | None = None  # "YYYY-MM-DD HH:MM" of the last stamp, and its offset from base
        self._minute_offset = 0.0

    def seconds(self, text: str) -> float | None:
        # Stamps of one minute share their first 16 characters: only the seconds are read again (fast path).
        if len(text) > 17 and text[16] == ":" and text[:16] == self._minute:
            sec = text[17:]
            if sec[:2].isdigit() and (len(sec) == 2 or (sec[2] == "." and sec[3:].isdigit())):
                return self._minute_offset + float(sec)
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            return None
        if d.tzinfo is not None:
            d = d.replace(tzinfo=None) - d.utcoffset()  # type: ignore[operator]
        if self.base is None:
            self.base = d
        minute = d.replace(second=0, microsecond=0)
        if d.tzinfo is None and len(text) > 17 and text[16] == ":":
            self._minute = text[:16]
            self._minute_offset = (minute - self.base).total_seconds()
        return (d - self.base).total_seconds()


class EpochClock:
    """Unix timestamps written as text (dllogger's ``"timestamp": "1570716921.842053"``) to seconds since the
    first one read, without the float rounding of large epoch values."""

    def __init__(self) -> None:
        self.base: int | None = None

    def seconds(self, value: Any) -> float | None:
        if isinstance(value, str):
            whole, _dot, frac = value.strip().partition(".")
            if not whole.lstrip("-").isdigit() or (frac and not frac.isdigit()):
                return to_float(value) if self.base is None else None
            w = int(whole)
            if self.base is None:
                self.base = w
            return (w - self.base) + (float("0." + frac) if frac else 0.0)
        v = to_float(value)
        if v is None or not math.isfinite(v):
            return None
        if self.base is None:
            self.base = int(v)
        return v - self.base


class GlogClock:
    """absl/glog timestamps (``I0826 15:12:50.113950``) carry no year: count seconds in a leap year and add a
    year whenever the clock jumps back by more than half a year (a run across New Year). Seconds are counted
    from the first stamp read."""

    _YEAR = 366 * 86400.0

    def __init__(self) -> None:
        self.offset = 0.0
        self.last: float | None = None
        self.base: float | None = None

    def seconds(self, mmdd: str, hms: str) -> float | None:
        try:
            month, day = int(mmdd[:2]), int(mmdd[2:4])
            h, m, s = hms.split(":")
            whole, _, frac = s.partition(".")
            t = (datetime(2000, month, day, int(h), int(m), int(whole)) - _EPOCH).total_seconds()
        except (ValueError, IndexError):
            return None
        if self.base is None:
            self.base = t
        t = t - self.base + self.offset
        if self.last is not None and t < self.last - self._YEAR / 2:
            self.offset += self._YEAR
            t += self._YEAR
        self.last = t
        return t + (float("0." + frac) if frac.isdigit() else 0.0)


# ------------------------------------------------------------------------------------------------ window


@dataclass
class WindowFigures:
    start: int  # the window's first boundary: end of this step (or start of training when 0)
    end: int
    seconds: float
    throughput: float  # time flavour
    latency_ms: float
    speed: float | None  # mean of the printed per-step (or per-interval) throughputs in (start, end]
    speed_points: int

    @property
    def steps(self) -> int:
        return self.end - self.start


class Window:
    """Where a run's steps fall relative to the window, kept in O(measure) memory.

    Feed every logged step in log order with :meth:`add`. A step's ``time`` is the wall time at its end; a line
    that also says how long the steps since ``span_from`` took (``span_seconds``) lets the window's start be
    recovered when the line for the boundary step itself is missing (warm-up 0, a coarse log, a garbled line).
    """

    COVERAGE = 0.9  # a window with fewer measured steps than this fraction of ``measure`` is not a measurement

    def __init__(self, warmup: int, measure: int):
        self.warmup = max(0, int(warmup))
        self.measure = max(1, int(measure))
        self.end_step = self.warmup + self.measure
        self.max_step = 0
        self.points = 0  # step lines seen
        self._start: tuple[int, float] | None = None  # first logged step >= warmup, with its time
        self._derived: tuple[int, float] | None = None  # start recovered from a span, (step, time)
        self._last: tuple[int, float] | None = None  # last logged step <= end, with its time
        self._speeds: dict[int, tuple[int, float]] = {}  # step -> (span_from, speed) for steps in (warmup, end]
        self.nonfinite: tuple[int, float] | None = None  # first (step, loss) not finite
        self.last_loss: float | None = None
        self.out_of_order = 0

    def add(self, step: int, time: float | None = None, *, speed: float | None = None, loss: float | None = None,
            span_from: int | None = None, span_seconds: float | None = None) -> None:
        self.points += 1
        if step < self.max_step:
            self.out_of_order += 1
        self.max_step = max(self.max_step, step)
        if loss is not None:
            self.last_loss = loss
            if not math.isfinite(loss) and self.nonfinite is None:
                self.nonfinite = (step, loss)
        if time is None or not math.isfinite(time):
            return
        if step >= self.warmup and self._start is None:
            self._start = (step, time)
        if step <= self.end_step and (self._last is None or step > self._last[0]):
            self._last = (step, time)
        if (span_from is not None and span_seconds is not None and finite(span_seconds) and span_seconds >= 0
                and span_from >= self.warmup and self._derived is None and span_from < step):
            self._derived = (span_from, time - span_seconds)
        if speed is not None and self.warmup < step <= self.end_step and step not in self._speeds:
            self._speeds[step] = (span_from if span_from is not None else step - 1, speed)

    @property
    def reached(self) -> bool:
        """The run went at least to the end of the window."""
        return self.max_step >= self.end_step

    def figures(self, global_batch: float) -> WindowFigures | None:
        """The window's throughput and latency, or None when the log does not cover it (see COVERAGE)."""
        start = self._start
        if self._derived is not None and (start is None or self._derived[0] < start[0]):
            start = self._derived
        last = self._last
        if start is None or last is None or last[0] <= start[0]:
            return None
        steps = last[0] - start[0]
        seconds = last[1] - start[1]
        if steps < self.COVERAGE * self.measure or not (seconds > 0) or not math.isfinite(seconds):
            return None
        speeds = [v for s, (f, v) in self._speeds.items() if f >= start[0] and s <= last[0] and finite(v)]
        return WindowFigures(start[0], last[0], seconds, global_batch * steps / seconds, 1000.0 * seconds / steps,
                             sum(speeds) / len(speeds) if speeds else None, len(speeds))

    def describe(self) -> str:
        """What the log covers, for a reason text."""
        s = self._start
        d = self._derived
        first = min(x[0] for x in (s, d) if x) if (s or d) else None
        return (f"logged steps reach {self.max_step}; window {self.warmup}->{self.end_step}; first timed step at or "
                f"after the warm-up: {first if first is not None else 'none'}; last timed step in the window: "
                f"{self._last[0] if self._last else 'none'}")


# ------------------------------------------------------------------------------------------------ scanner

# A handler reads one line's text (rank label removed) and answers:
NOT_MINE, CONSUMED, FRAGMENT = 0, 1, 2


@dataclass
class Facts:
    """What any log says besides its steps."""

    lines: int = 0
    garbled: int = 0  # records split by buffering that could not be put back together
    oom: str | None = None  # the first OOM line
    oom_rank: int | None = None
    slurm: str | None = None  # status stated by a slurmstepd kill banner
    slurm_line: str | None = None
    last_exception: str | None = None
    last_error: str | None = None
    job: dict[str, Any] | None = None  # provenance (the sbatch script's :::DLPERF job line), env left out
    memory: dict[str, Any] | None = None  # a :::DLPERF memory event
    errors: list[dict[str, Any]] = field(default_factory=list)  # :::DLPERF error events (first few)
    ranks: set = field(default_factory=set)  # rank labels seen


_JOB_KEYS = ("run", "job_id", "array_job_id", "array_task_id", "nodelist", "hostname", "gpus", "gpu_reason", "cuda",
             "nccl", "container_image", "versions", "command", "git", "error", "time")


class Scanner:
    """Run a suite's line handler over the lines of a log that come from the ranks the suite reads.

    ``handler(text, rank, final)`` gets each line's text (rank label removed) and returns :data:`CONSUMED` for a
    record it read, :data:`NOT_MINE` for any other line, or :data:`FRAGMENT` for a record whose end may have been
    cut by buffering (a value at the end of the line may be short of digits). A fragment is held (per rank); when
    the next line of the same rank does not start a record (``starts(text)``), the two are glued and read with
    ``final=True``; if that is no record, or the next line starts one, the held line is read alone with
    ``final=True`` (then the handler reads what it can and must not answer FRAGMENT). The same happens at the
    end of the log, so a truncated last line is read as far as it goes.

    ``ranks``: ``"rank0"`` keeps unlabelled lines and rank 0's (the default); ``"all"`` keeps every line (the
    handler gets the rank). OOM, Slurm-kill and error text are looked for on every rank. ``:::DLPERF`` events
    (job, memory, error; our workloads' own events) reach ``on_event`` as dicts.
    """

    def __init__(self, handler: Callable[[str, int | None, bool], int], *, ranks: str = "rank0",
                 starts: Callable[[str], bool] | None = None, needles: Sequence[str] | None = None,
                 wanted: Callable[[str], Any] | None = None,
                 on_event: Callable[[dict[str, Any], int | None], None] | None = None):
        self.handler = handler
        self.starts = starts or (lambda text: False)
        self.all_ranks = ranks == "all"
        self.on_event = on_event
        self.facts = Facts()
        self._pending: dict[int | None, str] = {}
        # ``needles``: substrings one of which every line the handler cares about contains (None: call it on
        # every line), or ``wanted(text)``, a predicate to the same end. Other lines are noise and skip the
        # handler: the hot loop's fast path.
        if wanted is not None:
            self._wanted: Callable[[str], Any] = wanted
        elif needles is None:
            self._wanted = lambda text: True
        elif len(needles) == 0:
            self._wanted = lambda text: False
        elif len(needles) == 1:
            needle = needles[0]
            self._wanted = lambda text: needle in text
        else:
            self._wanted = re.compile("|".join(re.escape(n) for n in needles)).search  # type: ignore[assignment]

    def run(self, lines: Iterable[str]) -> Facts:
        # The hot loop: a log is mostly step records and noise (NCCL INFO, warnings), so each line costs a few
        # substring tests; the text facts are looked for only in lines no handler took as a record.
        facts = self.facts
        handle = self._handle
        starts = self._starts
        pending = self._pending
        all_ranks = self.all_ranks
        text_facts = self._text_facts
        wanted = self._wanted
        handler = self.handler
        prefix_fragment = self._prefix_fragment
        ranks = facts.ranks
        n = 0
        for line in lines:
            n += 1
            if not line:
                continue
            c = line[0]
            if c == " " or c == "[" or c.isdigit():
                rank, text = split_rank(line)
                if rank is not None and len(ranks) < 4096:
                    ranks.add(rank)
            else:
                rank, text = None, line
            if ":::DLPERF" in text:
                event = True
            else:
                event = False
                if not all_ranks and rank is not None and rank != 0:
                    if ("rror" in text or "emory" in text or "EMORY" in text or "OOM" in text or "oom" in text
                            or "***" in text or "xception" in text or "Killed" in text or "EXHAUSTED" in text):
                        text_facts(text, rank)
                    continue
            if pending:
                head = pending.pop(rank, None)
                if head is not None:
                    if not event and not starts(text) and len(head) + len(text) < MAX_FRAGMENT:
                        if handle(head + text, rank, True) == CONSUMED:  # the record's tail: glue it back
                            if ("rror" in text or "emory" in text or "EMORY" in text or "OOM" in text
                                    or "oom" in text or "***" in text or "EXHAUSTED" in text):
                                text_facts(text, rank)
                            continue
                    if handle(head, rank, True) != CONSUMED:  # the head was whole after all, or is lost
                        facts.garbled += 1
            if event:
                r = handle(text, rank, False)
            elif wanted(text):
                r = handler(text, rank, False)  # the rank was filtered above
                if r == NOT_MINE and ":::" in text:
                    r = prefix_fragment(text)
            elif ":::" in text:
                r = prefix_fragment(text)
            else:
                r = NOT_MINE
            if r == NOT_MINE:
                if ("rror" in text or "emory" in text or "EMORY" in text or "OOM" in text or "oom" in text
                        or "***" in text or "xception" in text or "Killed" in text or "EXHAUSTED" in text):
                    text_facts(text, rank)
            elif r == FRAGMENT:
                pending[rank] = text
        for rank, head in list(pending.items()):
            if handle(head, rank, True) != CONSUMED:
                facts.garbled += 1
        pending.clear()
        facts.lines = n
        return facts

    def _starts(self, text: str) -> bool:
        return DLPERF_PREFIX in text or self.starts(text)

    def _handle(self, text: str, rank: int | None, final: bool) -> int:
        if DLPERF_PREFIX in text:
            ev = parse_event(text)
            if ev is None:
                return NOT_MINE if final else FRAGMENT
            self._event(ev, rank)
            return CONSUMED
        if not self.all_ranks and rank is not None and rank != 0:
            return NOT_MINE
        r = self.handler(text, rank, final)
        if r == NOT_MINE and not final:
            return self._prefix_fragment(text)
        return r

    @staticmethod
    def _prefix_fragment(text: str) -> int:
        at = text.rfind(":::", max(0, len(text) - len(DLPERF_PREFIX)))
        if at >= 0 and DLPERF_PREFIX.startswith(text[at:]):
            return FRAGMENT  # the line ends inside a ":::DLPERF " prefix: its record follows
        return NOT_MINE

    def _event(self, ev: dict[str, Any], rank: int | None) -> None:
        kind = ev.get("event")
        if kind == "job":
            if self.facts.job is None:
                self.facts.job = {k: ev.get(k) for k in _JOB_KEYS if k in ev}
        elif kind == "memory":
            self.facts.memory = ev
        elif kind == "error":
            if len(self.facts.errors) < 8:
                self.facts.errors.append(ev)
            if ev.get("kind") == "oom" and self.facts.oom is None:
                self.facts.oom = _clip(str(ev.get("message") or "out of memory (error event)"))
                self.facts.oom_rank = rank
        if self.on_event is not None and (self.all_ranks or rank in (None, 0)):
            self.on_event(ev, rank)

    def _text_facts(self, text: str, rank: int | None) -> None:
        facts = self.facts
        if facts.oom is None and oom_text(text):
            facts.oom = _clip(text)
            facts.oom_rank = rank
        if "rror" in text or "xception" in text or "Killed" in text:
            if _EXCEPTION.match(text):
                facts.last_exception = _clip(text)
            else:
                facts.last_error = _clip(text)
        if facts.slurm is None and "***" in text:
            state = slurm_kill(text)
            if state:
                facts.slurm, facts.slurm_line = state, _clip(text)


# ------------------------------------------------------------------------------------------------- finish


def _memory_fields(mem: Mapping[str, Any] | None) -> dict[str, Any]:
    """RunResult memory fields from a ``:::DLPERF`` memory event."""
    out: dict[str, Any] = {"mem_peak_mib": None, "mem_gpu0_mib": None, "mem_allocator_mib": None, "gpu_util": None,
                           "mem_reason": ""}
    if not mem:
        return out

    def peak(obj: Any) -> float | None:
        if isinstance(obj, Mapping):
            vals = [v for v in (to_float(x) for x in obj.values()) if v is not None and math.isfinite(v)]
            return max(vals) if vals else None
        v = to_float(obj)
        return v if v is not None and math.isfinite(v) else None

    out["mem_peak_mib"] = peak(mem.get("nvml_peak_used_mib"))
    out["mem_gpu0_mib"] = peak(mem.get("nvml_gpu0_mib"))
    out["mem_allocator_mib"] = peak(mem.get("max_allocated_mib"))
    out["gpu_util"] = peak(mem.get("gpu_util_mean"))
    reason = mem.get("reason")
    out["mem_reason"] = str(reason) if reason else ""
    reserved = peak(mem.get("max_reserved_mib"))
    if reserved is not None:
        out["_reserved"] = reserved
    return out


def _why(facts: Facts) -> str:
    for ev in reversed(facts.errors):
        msg = ev.get("message")
        if msg:
            return f"{ev.get('kind', 'error')}: {_clip(str(msg))}"
    return facts.last_exception or facts.last_error or ""


def finish(window: Window, facts: Facts, ctx: ParseContext, *, global_batch: float | None = None,
           speed_scale: float = 1.0, tiny: bool = False, no_memory_reason: str = "",
           figures: WindowFigures | None = None, complete: bool | None = None,
           extra: dict[str, Any] | None = None) -> RunResult:
    """The run's result and status from its log alone (method.md, "A run's status").

    Order: OOM text, then a Slurm kill banner, then no step at all (LAUNCH_FAILED), a non-finite loss (NONFINITE),
    fewer steps than the window (INCOMPLETE), a window the log does not cover (UNMEASURED), else OK.
    ``figures``/``complete`` let a suite that measures itself (tf_cnn, Horovod) bypass the window arithmetic.
    """
    gb = float(global_batch if global_batch else ctx.global_batch)
    fig = figures if figures is not None else window.figures(gb)
    reached = window.reached if complete is None else complete
    x: dict[str, Any] = dict(extra or {})
    if facts.garbled:
        x["garbled_lines"] = facts.garbled
    if facts.job:
        x["job"] = facts.job
    if facts.ranks:
        x["ranks_seen"] = len(facts.ranks)
    if window.out_of_order:
        x["steps_out_of_order"] = window.out_of_order
    mem = _memory_fields(facts.memory)
    reserved = mem.pop("_reserved", None)
    if reserved is not None:
        x["mem_reserved_mib"] = reserved
    if not mem["mem_reason"] and mem["mem_peak_mib"] is None:
        mem["mem_reason"] = no_memory_reason or "the log reports no GPU memory"
    res = RunResult(status=Status.OK, steps_seen=window.max_step, tiny=tiny,
                    loss_finite=None if window.last_loss is None and window.nonfinite is None
                    else window.nonfinite is None, extra=x, **mem)
    if fig is not None:
        res.throughput = fig.throughput
        res.latency_ms = fig.latency_ms
        res.throughput_speed = fig.speed * speed_scale if fig.speed is not None else None
        x["window"] = {"start": fig.start, "end": fig.end, "steps": fig.steps, "seconds": fig.seconds,
                       "speed_points": fig.speed_points}
    where = f"at step {window.max_step} of {window.end_step}"
    why = _why(facts)
    if facts.oom is not None:
        rank = f" (rank {facts.oom_rank})" if facts.oom_rank is not None else ""
        res.status, res.reason = Status.OOM, f"out of memory {where}{rank}: {facts.oom}"
    elif facts.slurm is not None:
        res.status, res.reason = facts.slurm, f"Slurm ended the step {where}: {facts.slurm_line}"
    elif window.points == 0 and fig is None:
        res.status = Status.LAUNCH_FAILED
        res.reason = "no training step in the log" + (f"; last error: {why}" if why else "")
        if facts.lines == 0:
            res.reason = "empty log: no training step"
    elif window.nonfinite is not None:
        step, loss = window.nonfinite
        res.status, res.reason = Status.NONFINITE, (f"loss is {loss} at step {step}: a throughput with a " \
                                                   "non-finite loss is not a result")
    elif not reached:
        res.status = Status.INCOMPLETE
        res.reason = f"the log stops {where}" + (f"; last error: {why}" if why else "")
    elif fig is None:
        res.status = Status.UNMEASURED
        res.reason = f"the log does not time the window: {window.describe()}"
    else:
        res.reason = ""
        if fig.steps != window.measure:
            res.reason = f"measured steps {fig.start}->{fig.end} ({fig.steps} of {window.measure}): " \
                         "the log times no step nearer the window's ends"
    if res.status not in (Status.OK, Status.NONFINITE):
        # only an OK run's figures are results; a NONFINITE run keeps them as evidence (method.md)
        if res.status != Status.OOM or not reached:
            res.throughput = res.throughput_speed = res.latency_ms = None
    return res


# --------------------------------------------------------------------------------------- status combining

# Our statuses the manifest may hold that are no Slurm state (the submission stage's own words)
_MANIFEST_WORDS = {"SUBMITTING": Status.PENDING}
_KILLED = (Status.TIMEOUT, Status.CANCELLED, Status.NODE_FAIL, Status.PREEMPTED)
_ACTIVE = (Status.PENDING, Status.RUNNING, Status.REQUEUED)


def scheduler_status(state: str | None) -> str | None:
    """Our status for a sacct/squeue state (``CANCELLED by 123`` and ``RUNNING+`` included, mapped by
    :func:`dlperf_slurm.scheduler.map_state`) or for a status word the manifest recorded; None when it says
    nothing final about the measurement (COMPLETED or OK: the log decides; an unknown word)."""
    if not state:
        return None
    from dlperf_slurm.scheduler import map_state, normalize_state

    st = map_state(state)
    if st is None:
        word = normalize_state(state)
        st = _MANIFEST_WORDS.get(word) or (word if word in vars(Status).values() else None)
    return None if st == Status.OK else st


def combine(result: RunResult, *, state: str | None = None, rc: int | None = None, signal: str | None = None,
            has_log: bool = True, state_reason: str = "") -> RunResult:
    """Fold the scheduler state (sacct, else squeue) and the job's exit marker into the log's result, in place.

    Marker files alone miss TIMEOUT, OOM and node failures; sacct alone is missing on many clusters: each fills
    what the other lacks. Precedence: OOM (log text or Slurm OUT_OF_MEMORY), a job still pending or running,
    NONFINITE, a scheduler kill (TIMEOUT, CANCELLED, NODE_FAIL, PREEMPTED), a non-zero exit (FAILED), then the log.
    """
    sched = scheduler_status(state)
    log_status = result.status
    step = f"at step {result.steps_seen}" if result.steps_seen else "before any step"
    exit_note = ""
    if rc not in (None, 0):
        exit_note = f"exit code {rc}" + (f" (SIG{signal})" if signal else "")
    if state:
        result.extra["scheduler_state"] = str(state)
    if rc is not None:
        result.extra["exit_code"] = rc

    def set_(status: str, reason: str) -> None:
        if status not in (Status.OK, Status.NONFINITE) and status != Status.OOM:
            result.throughput = result.throughput_speed = result.latency_ms = None
        result.status, result.reason = status, reason

    if not has_log:  # nothing ran, or nothing has been written yet
        why = f" ({state_reason})" if state_reason else ""
        if sched in _ACTIVE or sched == Status.UNSUBMITTED:
            set_(sched, (sched.lower() if sched != Status.UNSUBMITTED else "not submitted") + why)
        elif sched is None and rc is None:
            set_(Status.UNSUBMITTED if state is None else Status.LAUNCH_FAILED,
                 "no log yet" if state is None else f"scheduler state {state} but no log")
        elif sched is not None and sched != Status.FAILED:
            set_(sched, f"{sched} before writing any log{why}")
        else:
            set_(Status.LAUNCH_FAILED, "no log" + (f"; {exit_note}" if exit_note else "") + why)
        return result
    if log_status == Status.OOM:
        return result
    if sched == Status.OOM:
        set_(Status.OOM, f"Slurm OUT_OF_MEMORY (host memory limit) {step}")
        return result
    if sched in _ACTIVE:
        note = "window complete, job not finished" if log_status == Status.OK else step
        set_(sched, f"{sched.lower()} ({note})" if has_log else sched.lower())
        return result
    if log_status == Status.NONFINITE:
        return result
    if sched in _KILLED:
        done = " after the window completed" if log_status == Status.OK else f" {step}"
        set_(sched, f"Slurm {state}{done}" + (f"; {result.reason}" if log_status not in (Status.OK,) and
                                                  result.reason else ""))
        return result
    if log_status in _KILLED:  # a slurmstepd banner in the log, no sacct
        return result
    if log_status == Status.OK:
        if exit_note:
            set_(Status.FAILED, f"{exit_note} after the window completed")
        elif sched == Status.FAILED:
            set_(Status.FAILED, f"Slurm {state} after the window completed")
        return result
    if log_status == Status.LAUNCH_FAILED:
        if exit_note or sched == Status.FAILED:
            result.reason = f"{exit_note or 'Slurm ' + str(state)}; {result.reason}"
        return result
    if log_status in (Status.INCOMPLETE, Status.UNMEASURED):
        if exit_note or sched == Status.FAILED:
            set_(Status.FAILED, f"{exit_note or 'Slurm ' + str(state)} {step}; {result.reason}")
        elif rc is None and sched is None and log_status == Status.INCOMPLETE:
            result.reason += "; no exit marker and no scheduler state: still running, or killed without a trace"
        return result
    return result
