"""What a log is, when its suite finds no step in it: which registered suites do find steps there (the suites' own
parsers decide), the lines that look like progress, and the log's own last error line.

- :func:`readers`: the suites whose parsers find training steps in a log that does not say it ran another
  suite's model (:func:`other_model`) (``collect --from DIR`` with ``--suite auto``, the default, picks its suite
  with :func:`choose_suite`; a given ``--suite`` that reads none of a tree's sampled logs is refused);
- :func:`unread`: what a log its suite reads no step of holds (read once, when its verdict is "no step": the result
  is kept in the parse cache): the lines that look like progress (a number beside ``samples/s``, ``img/s``,
  ``ips``, ``tokens/s``, ``throughput``, ``it/s``..., step and iteration counters), the suites that read it, and
  whether it is "plenty of output" (what makes a ``--from`` log UNRECOGNISED rather than LAUNCH_FAILED);
- :func:`last_error`: the line that says why a run failed, with its line number: the exception that ends the first
  Python traceback, else a launcher's refusal (mpirun as root), else the last line that says error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dlperf_slurm.disk import open_log
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.words import plural

if TYPE_CHECKING:
    pass

# units a program prints its rate in, with a number beside them (before or after)
_UNITS = (r"samples?/s(?:ec)?|samples?_per_sec(?:ond)?|samples?_?per_?s|SamplesPerSec|img/s|imgs/s|images?/s(?:ec)?|"
          r"ips|examples?/s(?:ec)?|examples?_per_sec(?:ond)?|examples/second|tokens?/s(?:ec)?|tks/s|tgs|throughput|"
          r"it/s|iters?/s|seq/s|sentences?/s")
_NUMBER = r"\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?\s*[KkMG]?"
#: a number beside a rate unit (``ips: 444.4 samples/s``, ``total_ips : 395.8``, ``throughput=122.0K tks/s``)
RATE = re.compile(rf"(?i)(?:{_NUMBER}\s*(?:{_UNITS})\b|(?<![A-Za-z])(?:{_UNITS})\s*[:=]?\s*\(?\s*{_NUMBER})")
#: a step or iteration counter (``[step 249]``, ``Epoch[0] Batch[100]``, ``iteration 10/ 500000``)
COUNTER = re.compile(r"(?i)\b(?:step|iter(?:ation)?|batch|global_step|epoch)\s*[:=#]?\s*\[?\s*\d+\s*(?:/\s*\d+)?")

_TRACEBACK = "Traceback (most recent call last)"
# launchers' refusals and fatal words a log states its failure with, besides a Python traceback
_REFUSAL = re.compile(r"has detected an attempt to run as root|was unable to (?:launch|find|start)|"
                      r"There are not enough slots available|ORTE was unable|prterun was unable|"
                      r"srun: error:|slurmstepd: error:|command not found|"
                      r"Segmentation fault|terminate called after|what\(\):")
_ERRORISH = re.compile(r"(?:\b[A-Z]\w*Error\b|\berror:|\bERROR\b|\bError\b|\bFATAL\b|\bFatal\b|Killed|Aborted|"
                       r"No such file or directory|not found)")
#: a line its program logged at a level below error (an INFO, DEBUG or WARNING line: ``NCCL INFO``, glog's
#: ``I1123``/``W20261127``, ``[    INFO]``, tensorpack's ``WRN``, ``INFO:root:``): never the run's "last error",
#: whatever words it holds ("No such file or directory" in NCCL's plugin probe, "not found" in a warning)
_BELOW_ERROR = re.compile(r"^[IWD]\d{4}[\d ]\d|(?<![A-Za-z])(?:INFO|DEBUG|WARNING|WARN|WRN|INF|DBG|TRACE)(?![A-Za-z])")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure)\b:?")

TRACEBACK_LINES = 400  # lines a traceback may take before its exception line
QUOTE = 160  # characters of a log line quoted in a reason
SAMPLE_LINES = 4  # progress lines quoted: the first three and the last
PLENTY_PROGRESS = 3  # a --from log with this many progress lines is output the suite does not read
PLENTY_LINES = 1000  # ... or this many lines and no error line
TAIL_BYTES = 1 << 20  # how much of a log's end :func:`last_error` reads
HEAD_BYTES = 8 << 20  # how much of a log :func:`readers` gives each suite's parser: this many bytes ...
HEAD_LINES = 50_000  # ... or lines (the first step of a 512-rank job follows some 25,000 lines of NCCL set-up)
UNREAD_BYTES = 256 << 20  # how much of a no-step log :func:`unread` reads


def _clip(text: str, n: int = QUOTE) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass
class Scan:
    """What one pass over a log's lines found (line numbers count from 1, in the file)."""

    lines: int = 0
    rates: list[tuple[int, str]] = field(default_factory=list)  # lines with a rate: the first few and the last
    counters: list[tuple[int, str]] = field(default_factory=list)  # lines with only a step counter: the same
    progress_count: int = 0  # lines with either
    error: tuple[int, str] | None = None

    @property
    def progress(self) -> list[tuple[int, str]]:
        """The progress lines to quote: those with a rate, else those with a step counter."""
        return self.rates or self.counters

    def add_progress(self, n: int, text: str, rate: bool) -> None:
        self.progress_count += 1
        kept = self.rates if rate else self.counters
        if len(kept) < SAMPLE_LINES:
            kept.append((n, _clip(text)))
        else:  # the first SAMPLE_LINES - 1 stay; the last place holds the latest
            kept[-1] = (n, _clip(text))


def scan(lines: Iterable[str], first: int = 1, progress: bool = True) -> Scan:
    """One pass over ``lines`` (numbered from ``first``): the progress-like lines and the error line
    (:func:`last_error`'s rule)."""
    from dlperf_slurm.parsing import split_rank

    out = Scan()
    in_tb: dict[Any, int] = {}  # rank -> lines read since its traceback began
    first_tb: tuple[int, str] | None = None
    refusal: tuple[int, str] | None = None
    generic: tuple[int, str] | None = None
    n = first - 1
    for n, line in enumerate(lines, first):
        if not line:
            continue
        rank, text = split_rank(line)
        if in_tb.get(rank):
            # a traceback's frames are indented; a paste or a terminal may wrap them: any line but the exception's
            # stays in the traceback, for at most TRACEBACK_LINES lines
            if _EXCEPTION.match(text.strip()) and text[:1] not in (" ", "\t"):
                in_tb[rank] = 0
                if first_tb is None:
                    first_tb = (n, _clip(text))
                continue
            in_tb[rank] += 1
            if in_tb[rank] < TRACEBACK_LINES:
                continue
            in_tb[rank] = 0
        if _TRACEBACK in text:
            in_tb[rank] = 1
            continue
        if ":::DLPERF" in text:
            continue
        bare = text.lstrip()
        if _BELOW_ERROR.search(bare, 0, 80) and not _EXCEPTION.match(bare):
            pass  # logged as INFO or a warning: not why the run failed
        elif refusal is None and _REFUSAL.search(text):
            refusal = (n, _clip(text))
        elif _ERRORISH.search(text):
            generic = (n, _clip(text))
        if progress:
            if RATE.search(text):
                out.add_progress(n, text, True)
            elif COUNTER.search(text):
                out.add_progress(n, text, False)
    out.lines = n - first + 1
    out.error = first_tb or refusal or generic
    return out


def _lines_from(path: str | os.PathLike, offset: int, limit: int | None = None,
                max_lines: int | None = None) -> Iterator[str]:
    from dlperf_slurm.parsing.lines import text_lines

    read = 0
    for n, line in enumerate(text_lines(path, offset), 1):
        read += len(line) + 1
        yield line
        if (limit is not None and read >= limit) or (max_lines is not None and n >= max_lines):
            return


def last_error(path: str | os.PathLike) -> tuple[int, str] | None:
    """The line of the log at ``path`` that says why its run failed, as ``(line number, text)``, from its last
    :data:`TAIL_BYTES`: the exception line that ends the first Python traceback there (the root cause: the
    launcher's own wrap-up comes after it), else a launcher's refusal or fatal message (mpirun refusing to run as
    root, ``srun: error:``, a segmentation fault), else the last line that says error. None when there is none
    (or no file)."""
    try:
        size = os.path.getsize(path)
        offset, before = 0, 0
        if size > TAIL_BYTES:
            with open_log(path) as f:
                start = size - TAIL_BYTES
                f.seek(start)
                chunk = f.read(TAIL_BYTES)
                cut = chunk.find(b"\n")
                offset = start + cut + 1 if cut >= 0 else size
                f.seek(0)
                left = offset
                while left > 0:
                    block = f.read(min(left, 1 << 24))
                    if not block:
                        break
                    before += block.count(b"\n")
                    left -= len(block)
        return scan(_lines_from(path, offset), first=before + 1, progress=False).error
    except OSError:
        return None


# ============================================================================================ which suites


def finds_steps(res: RunResult) -> bool:
    """Whether a parse found training steps (whatever it made of them)."""
    return res.status in (Status.OK, Status.INCOMPLETE, Status.UNMEASURED, Status.NONFINITE) or res.steps_seen > 0


def other_model(name: str, res: RunResult) -> str | None:
    """The registered suite of ``name``'s framework whose model the log says its program ran (the parser's
    ``extra["log_model"]``: tf_cnn_benchmarks' ``Model:       vgg16``), when that is not ``name``'s own: such a log
    is not ``name``'s to read (a VGG16 run read as ResNet-50's, its network explained with ResNet-50's parameters).
    None when the log names no model, ``name``'s, or one no other suite of the framework has (tf_cnn's
    ``resnet20``, ``inception3``: read as before)."""
    from dlperf_slurm import suites

    said = res.extra.get("log_model")
    framework, _, model = name.partition("/")
    if not isinstance(said, str) or said.lower() == model.lower():
        return None
    other = f"{framework}/{said.lower()}"
    return other if other in suites.names() else None


def _heads(path: str | os.PathLike, names: Sequence[str] | None, skip: str) -> list[tuple[str, RunResult]]:
    """Each suite of ``names`` (default all; ``skip`` left out) with its parse of the head of the log at ``path``
    (its first :data:`HEAD_LINES` lines, at most :data:`HEAD_BYTES`); none for a parser that fails on it."""
    from dlperf_slurm import suites
    from dlperf_slurm.parsing import lines as window  # its TRACE

    found: list[tuple[str, RunResult]] = []
    try:
        head = list(_lines_from(path, 0, HEAD_BYTES, HEAD_LINES))  # a program prints its steps early or not at all
    except OSError:  # no suite reads a log that cannot be read (its run says why: storage.unreadable)
        return found
    trace, window.TRACE = window.TRACE, None  # collect --explain traces the run's own suite, not these
    try:
        for name in names if names is not None else suites.names():
            if name == skip:
                continue
            suite = suites.get(name)
            try:
                res = suite.parse(iter(head), ParseContext(nodes=1, gpus_per_node=1, batch_size=1, warmup_steps=0,
                                                           measure_steps=1, options=dict(suite.options)))
            except Exception:  # noqa: BLE001, S112 - a parser that fails on a foreign log does not read it
                continue
            found.append((name, res))
    finally:
        window.TRACE = trace
    return found


def readers(path: str | os.PathLike, names: Sequence[str] | None = None, skip: str = "") -> list[str]:
    """The registered suites (of ``names``, default all; ``skip`` left out) whose parsers find training steps in
    the head of the log at ``path`` (:func:`_heads`) that it does not say was written for another suite's model
    (:func:`other_model`)."""
    return [name for name, res in _heads(path, names, skip) if finds_steps(res) and other_model(name, res) is None]


def written_for(path: str | os.PathLike, name: str) -> tuple[str, str] | None:
    """(the other suite, the model as the log prints it) when suite ``name``'s parser finds steps in the log at
    ``path`` but the log says it ran another suite's model (:func:`other_model`); else None."""
    for _, res in _heads(path, [name], ""):
        other = other_model(name, res)
        if other is not None and finds_steps(res):
            return other, str(res.extra["log_model"])
    return None


def another_models_logs(paths: Sequence[str], name: str) -> str | None:
    """Why suite ``name`` reads none of ``paths`` when they were written for another suite's model (the first of
    them that says so: :func:`written_for`), in words that say what to do; None when none of them says so."""
    for p in paths:
        if (found := written_for(p, name)) is not None:
            return (f"{name} reads none of {len(paths)} sampled logs: they were written for another model ({p} says "
                    f"'Model: {found[1]}', not {name.partition('/')[2]}): --suite {found[0]}")
    return None


def unread(path: str | os.PathLike, suite_name: str) -> dict[str, Any]:
    """What a log ``suite_name`` finds no step in holds (kept in its result's ``extra["unread"]``): its lines, the
    lines that look like progress (line number, text), the suites that do read it, whether it is plenty of output
    (:data:`PLENTY_PROGRESS` progress lines, or :data:`PLENTY_LINES` lines and no error line), and the error
    line."""
    s = scan(_lines_from(path, 0, UNREAD_BYTES))
    return {"suite": suite_name, "log": str(path), "lines": s.lines, "progress": [list(p) for p in s.progress],
            "progress_count": s.progress_count, "readers": readers(path, skip=suite_name),
            "plenty": s.progress_count >= PLENTY_PROGRESS or (s.lines >= PLENTY_LINES and s.error is None),
            "error": list(s.error) if s.error else None}


def unrecognised_reason(info: dict[str, Any], exited: str = "") -> str:
    """The reason of an UNRECOGNISED run: what its suite did not read, the lines that look like progress, and the
    suites that read the log (or that none does)."""
    suite = info.get("suite") or "its suite"
    head = f"{suite} finds no training step it knows in this log ({exited + '; ' if exited else ''}" \
           f"{plural(int(info.get('lines') or 0), 'line', grouped=True)})"
    shown = info.get("progress") or []
    count = int(info.get("progress_count") or 0)
    if shown:
        quoted = "; ".join(f"line {n}: {text!r}" for n, text in shown)
        head += f"; lines that look like progress ({count:,} in all): {quoted}"
    else:
        head += "; no line looks like progress"
    who = rank_readers(info.get("readers") or [], str(info.get("log") or ""))
    if who:
        head += (f"; read by {', '.join(who)}: collect it with --suite {who[0]}"
                 + ("" if len(who) == 1 else " (or another of them)"))
    else:
        head += "; no registered suite reads it: a program version whose output dlperf_slurm does not know yet"
    return head + "; never a figure, and --retry-failed leaves it (running it again prints the same)"


# ============================================================================================ --suite auto


def sample(paths: Sequence[str], k: int = 8) -> list[str]:
    """Up to ``k`` of ``paths``, spread evenly over them in their order (the first and the last included)."""
    if len(paths) <= k:
        return list(paths)
    step = (len(paths) - 1) / (k - 1)
    return list(dict.fromkeys(paths[round(i * step)] for i in range(k)))


@dataclass
class Choice:
    """``--suite auto``'s answer: the suite, the sampled logs each suite read, and what was said of a tie."""

    suite: str | None
    counts: dict[str, int]
    sampled: int
    note: str = ""


#: words in a path or file name that name a suite's model (DLPerf's logs: r50_, rn50_, bert-base-adam-training_)
MODEL_WORDS = {"resnet50": ("resnet50", "resnet", "rn50", "r50"), "vgg16": ("vgg",), "bert-base": ("bert",),
               "gpt": ("gpt",), "wdl": ("wdl", "wide"), "insightface": ("insightface", "arcface", "face")}


def hint_score(name: str, hint: str) -> int:
    """How well a path names suite ``name``: 2 for its framework (``megatron``, ``ngc-pytorch``, ``paddle``...),
    1 for its model (:data:`MODEL_WORDS`), both counted."""
    framework, _, model = name.partition("/")
    low = hint.lower().replace("_", "-")
    words = MODEL_WORDS.get(model, (model,))
    return 2 * (framework.lower() in low or framework.split("-")[0].lower() in low) + any(w in low for w in words)


def rank_readers(names: Sequence[str], hint: str) -> list[str]:
    """``names`` with those ``hint`` (a path) names best first (:func:`hint_score`), then in name order."""
    return sorted(names, key=lambda n: (-hint_score(n, hint), n))


def choose_suite(paths: Sequence[str], hint: str = "") -> Choice:
    """The suite that reads the most of a sample of ``paths`` (:func:`sample`; every suite tries them in order until
    one reads one, the rest are tried by the suites that read it). Suites that share a parser (a
    framework's ResNet-50 and BERT) read the same logs: a tie goes to the suite ``hint`` (the tree's path and
    file names) names best (:func:`hint_score`), else to the first in name order; the note says which and why."""
    picked = sample(sorted(paths))
    # every suite tries the sampled logs until one of them reads one; the other logs, only the suites that read that
    # one (each suite's parse of a large log's head costs up to a second)
    found: dict[str, list[str]] = {}
    candidates: list[str] | None = None
    for p in picked:
        found[p] = readers(p, candidates)
        if candidates is None and found[p]:
            candidates = found[p]
    counts: dict[str, int] = {}
    for names in found.values():
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return Choice(None, counts, len(picked))
    best = max(counts.values())
    tied = rank_readers([n for n, c in counts.items() if c == best], hint)
    if len(tied) == 1:
        return Choice(tied[0], counts, len(picked))
    pick = tied[0]
    score = hint_score(pick, hint)
    why = ("first in name order (the logs' path names none of them better)" if score == hint_score(tied[1], hint)
           else "the logs' path names its " + ("framework" if score >= 2 else "model"))
    return Choice(pick, counts, len(picked),
                  f"{', '.join(sorted(tied))} each read {best} of the {len(picked)} sampled logs; chose {pick}: {why}"
                  " (--suite NAME chooses another)")
