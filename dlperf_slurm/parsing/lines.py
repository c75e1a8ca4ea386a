"""The facts any log holds (OOM text, Slurm kill banners, errors, ``:::DLPERF`` events) and the :class:`Scanner`
that runs a suite's line handler over a log read by :mod:`.reading` (re-exported here: :func:`read_lines`,
:func:`split_rank`, :data:`MAX_LINE`, ...).

- :class:`Scanner`: runs a suite's line handler over a log: rank filtering, re-joining a record that buffering
  split over two labelled lines, OOM / Slurm-kill / error text on every rank, ``:::DLPERF`` job, memory and error
  events in every suite's log.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from dlperf_slurm import events as ev
from dlperf_slurm.events import PREFIX as DLPERF_PREFIX
from dlperf_slurm.events import parse_event  # the one reader of our line format
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing.reading import (  # noqa: F401
    MAX_LINE,
    LogLines,
    Short,
    iter_text_lines,
    read_lines,
    split_rank,  # re-exported: what a parser reads with
    text_lines,
)

MAX_FRAGMENT = 1 << 16  # a split record longer than this is given up (garbled)
MAX_REASON = 300  # characters of a log line quoted in a reason

NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|NaN|Inf)"  # a number as logs print one

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


def slurm_kill(line: str) -> Status | None:
    """The status a ``slurmstepd`` kill banner states (``*** STEP 12.0 ON n1 CANCELLED AT ... DUE TO TIME
    LIMIT ***``), or None."""
    if "CANCELLED AT" not in line:
        return None
    m = _SLURM_KILL.search(line)
    if not m:
        return None
    return _SLURM_CAUSE.get((m.group(1) or "").strip(), Status.CANCELLED)


_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b:?")
#: a launcher's own exception for a rank that failed (torchrun's, after the rank's traceback; a launcher's
#: subprocess): it says a rank failed, not why, so it never replaces the rank's own exception read before it
_WRAPPER_EXCEPTIONS = ("ChildFailedError", "CalledProcessError")


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


def finite(x: Any) -> TypeGuard[float]:
    """Whether ``x`` is a finite number (an int or a float, never a bool); a checked ``x`` is typed as a float."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ------------------------------------------------------------------------------------------------ scanner

#: ``collect --explain`` sets this while it parses one log: every ``Window.add`` appends its ``(step, time,
#: speed)`` here, and a Scanner reports each record its handler read (``TRACE.consumed(rank)``). None (the default):
#: nothing is kept
TRACE: Any = None

# A handler reads one line's text (rank label removed) and answers:
NOT_MINE, CONSUMED, FRAGMENT = 0, 1, 2

#: What the loop looks for in any line besides the handler's needles (events and their cut prefixes, the error and
#: Slurm-kill facts); with the out-of-memory words (any case), every line without one of these is noise to it.
SCANNER_NEEDLES = (":::", "Error", "error", "xception", "Killed", "CANCELLED AT")
#: False (``DLPERF_SLURM_PARSER=lines``): every file is read line by line (the block path is off)
BLOCKS = os.environ.get("DLPERF_SLURM_PARSER", "") != "lines"


@dataclass
class Facts:
    """What any log says besides its steps."""

    lines: int = 0
    garbled: int = 0  # records split by buffering that could not be put back together
    oom: str | None = None  # the first OOM line
    oom_rank: int | None = None
    slurm: Status | None = None  # status stated by a slurmstepd kill banner
    slurm_line: str | None = None
    last_exception: str | None = None
    last_error: str | None = None
    job: dict[str, Any] | None = None  # provenance (the sbatch script's :::DLPERF job line), env left out
    memories: list[dict[str, Any]] = field(default_factory=list)  # :::DLPERF memory events (memwatch: one a node)
    health: dict[str, Any] | None = None  # the health gate's :::DLPERF health event
    nodes: list[dict[str, Any]] = field(default_factory=list)  # :::DLPERF node events (provenance, one a node)
    errors: list[dict[str, Any]] = field(default_factory=list)  # :::DLPERF error events (first few)
    ranks: set = field(default_factory=set)  # rank labels seen


_JOB_KEYS = tuple(k for k in ev.JOB_KEYS if k != ev.ENV)  # the job event's keys a run keeps (not the environment)


@functools.lru_cache(maxsize=256)
def _one_line_needles(needles: tuple[str, ...]) -> bool:
    """Whether every needle is a non-empty part of one line (the block path's condition; asked once per log)."""
    return all(n and "\n" not in n and "\r" not in n for n in needles)


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
                 on_event: Callable[[dict[str, Any], int | None], None] | None = None,
                 block_needles: Sequence[str] | None = None, block_short: Short | tuple[str, int] | None = None):
        trace = TRACE
        if trace is not None and hasattr(trace, "consumed"):  # collect --explain: the records the handler read
            def traced(text: str, rank: int | None, final: bool, _inner=handler) -> int:
                r = _inner(text, rank, final)
                if r == CONSUMED:
                    trace.consumed(rank)
                return r

            handler = traced
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
            self._wanted = re.compile("|".join(re.escape(n) for n in needles)).search
        # The block path (a file from read_lines) needs substrings one of which every line the handler does
        # anything with contains: ``needles``, or ``block_needles`` with ``wanted`` (a superset of its lines).
        self._block_needles = tuple(block_needles) if block_needles is not None else (
            tuple(needles) if needles is not None and wanted is None else None)
        # ``block_short`` (first characters, length): besides the lines holding a block needle, the lines whose
        # text is shorter than ``length`` and starts with one of the characters (what a ``wanted`` says of short
        # lines, records cut by buffering; cheaper at block level than a needle that every such line holds)
        self._block_short = block_short

    def run(self, lines: Iterable[str]) -> Facts:
        """Read ``lines`` (any iterable of lines; the unstarted result of :func:`read_lines` is read in blocks, only
        the lines that can matter reaching the loop) and return the log's :class:`Facts`."""
        if isinstance(lines, LogLines) and not lines.started and self._block_needles is not None and BLOCKS:
            from dlperf_slurm.parsing import blocks  # numpy: imported by the first log read in blocks

            if _one_line_needles(self._block_needles):
                src = blocks.BlockLines(lines.path, blocks.sieve(self._block_needles + SCANNER_NEEDLES,
                                                                 _OOM_WORDS), self._pending, self._block_short,
                                         data=lines.data)
                facts = self._loop(src)
                facts.lines, facts.ranks = src.lines, src.ranks  # what every line contributed, the others included
                return facts
        return self._loop(lines)

    def _loop(self, lines: Iterable[str]) -> Facts:
        # The hot loop, and the reference implementation: the block path feeds it only the lines that can matter.
        # A log is mostly step records and noise (NCCL INFO, warnings), so each line costs a few substring tests;
        # the text facts are looked for only in lines no handler took as a record.
        facts = self.facts
        handle = self._handle
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
                    if ("Error" in text or "error" in text or "emory" in text or "EMORY" in text or "OOM" in text
                            or "oom" in text or "***" in text or "xception" in text or "Killed" in text
                            or "EXHAUSTED" in text):
                        text_facts(text, rank)
                    continue
            if pending:
                head = pending.pop(rank, None)
                if head is not None and self._glued(head, text, rank, event):
                    continue
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
                if ("Error" in text or "error" in text or "emory" in text or "EMORY" in text or "OOM" in text
                        or "oom" in text or "***" in text or "xception" in text or "Killed" in text
                        or "EXHAUSTED" in text):
                    text_facts(text, rank)
            elif r == FRAGMENT:
                pending[rank] = text
        self._flush()
        facts.lines = n
        return facts

    def _glued(self, head: str, text: str, rank: int | None, event: bool) -> bool:
        """Read the fragment ``head`` held for ``rank`` with that rank's next line: True where ``text`` was its
        tail (glued back and read, the line is done), False where the head was read alone (``text`` is yet to be
        read). Only lines that follow a held fragment come here, not the loop's every line."""
        if not event and not self._starts(text) and len(head) + len(text) < MAX_FRAGMENT:
            if self._handle(head + text, rank, True) == CONSUMED:  # the record's tail: glue it back
                if ("Error" in text or "error" in text or "emory" in text or "EMORY" in text
                        or "OOM" in text or "oom" in text or "***" in text or "EXHAUSTED" in text):
                    self._text_facts(text, rank)
                return True
        if self._handle(head, rank, True) != CONSUMED:  # the head was whole after all, or is lost
            self.facts.garbled += 1
        return False

    def _flush(self) -> None:
        """At the end of the log: each held fragment read alone, as far as it goes."""
        pending = self._pending
        for rank, head in list(pending.items()):
            if self._handle(head, rank, True) != CONSUMED:
                self.facts.garbled += 1
        pending.clear()

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

    def _event(self, event: dict[str, Any], rank: int | None) -> None:
        kind = event.get(ev.EVENT)
        if kind == ev.EV_JOB:
            if self.facts.job is None:
                self.facts.job = {k: event.get(k) for k in _JOB_KEYS if k in event}
        elif kind == ev.EV_NODE:
            if len(self.facts.nodes) < 4096:
                self.facts.nodes.append({k: event[k] for k in ev.NODE_KEYS if k in event})
            if self.facts.job is not None and not event.get(ev.ERROR):
                # the job record's GPUs and versions, as older logs' job events held them: the first node's
                for k in ev.JOB_KEYS_BEFORE_NODES:
                    if k in event and k not in self.facts.job:
                        self.facts.job[k] = event[k]
        elif kind == ev.EV_MEMORY:
            if len(self.facts.memories) < 4096:
                self.facts.memories.append(event)
        elif kind == ev.EV_HEALTH:
            self.facts.health = {k: v for k, v in event.items() if k != ev.EVENT}
        elif kind == ev.EV_ERROR:
            if len(self.facts.errors) < 8:
                self.facts.errors.append(event)
            if event.get(ev.KIND) == ev.KIND_OOM and self.facts.oom is None:
                self.facts.oom = _clip(str(event.get(ev.MESSAGE) or "out of memory (error event)"))
                self.facts.oom_rank = rank
        if self.on_event is not None and (self.all_ranks or rank in (None, 0)):
            self.on_event(event, rank)

    def _text_facts(self, text: str, rank: int | None) -> None:
        facts = self.facts
        if facts.oom is None and oom_text(text):
            facts.oom = _clip(text)
            facts.oom_rank = rank
        if "Error" in text or "error" in text or "xception" in text or "Killed" in text:
            if _EXCEPTION.match(text):
                if facts.last_exception is None or not any(w in text for w in _WRAPPER_EXCEPTIONS):
                    facts.last_exception = _clip(text)
            else:
                facts.last_error = _clip(text)
        if facts.slurm is None and "***" in text:
            state = slurm_kill(text)
            if state:
                facts.slurm, facts.slurm_line = state, _clip(text)
