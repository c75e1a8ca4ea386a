"""The real-log corpus: output of the real programs, each version users run, read by every suite as `collect --from`
reads a DLPerf tree.

Every folder ``tests/fixtures/real/<program>/<version-or-date>/`` with a ``SOURCE.toml`` holds logs that nobody here
wrote (pasted in public issues and READMEs, committed in public repositories, or printed by the real program on this
project's test cluster), each described by one ``[[log]]`` entry::

    program = "PaddleClas"            # the program that printed the logs
    version = "2.5"                   # its version, or the date of the logs when no version is known

    [[log]]
    file = "r50_8gpu_excerpt.log"     # beside SOURCE.toml
    source = "https://github.com/PaddlePaddle/PaddleClas/issues/1234"   # where it was taken from
    suites = ["paddle/resnet50"]      # the suites that must read it
    shape = "1n8g"                    # nodes x GPUs of the run (what the log or its source says)
    batch = 64                        # batch size per device
    precision = "fp32"                # optional, default fp32
    window = [1, 5]                   # optional: warmup and measured steps (default: the suite's DLPerf window)
    options = {}                      # optional: the suite's [options] the run had
    status = "OK"                     # the status the run must read as
    stated = 444.43                   # optional: a figure the log itself states (a printed average, a summary)
    stated_flavour = "speed"          # optional: which of our figures it must match within 0.5 %:
                                      # "published" (default), "time" or "speed"
    note = "..."                      # optional: what is special about this log
    evaluated = { top1 = 0.76046, top5 = 0.92876, evaluations = 1 }   # optional: the evaluations the log prints
                                      # (how many, the last one's top-1 and top-5 as fractions, or auc, lfw;
                                      # best_<metric> where the best is not the last; time_to_target_s to the
                                      # first that reaches the best, where the log stamps both): its accuracy

The corpus test reads each log through the same path as ``collect --from`` (a one-log DLPerf tree), checks its
status, and the stated figure within 0.5 %; a log with ``evaluated`` is read as an accuracy run too (``collect --from
--target``): its evaluations as it states them, a target at its best reached (OK), one above it NOT_CONVERGED when
its log is OK. The coverage test asks of every registered suite at least three real logs
from at least two versions of its program.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dlperf_slurm import suites
from dlperf_slurm.collect import drive, gather
from dlperf_slurm.model.cell import METRICS, Target
from dlperf_slurm.parsing import accuracy

REAL = Path(__file__).parent / "fixtures" / "real"
TOLERANCE = 0.005
FLAVOURS = {"published": "throughput", "time": "throughput_time", "speed": "throughput_speed"}
KEYS = {"file", "source", "suites", "shape", "batch", "precision", "window", "options", "status", "stated",
        "stated_flavour", "note", "evaluated"}


@dataclass(frozen=True)
class RealLog:
    path: Path
    program: str
    version: str
    source: str
    suites: tuple[str, ...]
    shape: str
    batch: int
    precision: str = "fp32"
    window: tuple[int, int] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    status: str = "OK"
    stated: float | None = None
    stated_flavour: str = "published"
    evaluated: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        return str(self.path.relative_to(REAL))


def corpus() -> list[RealLog]:
    logs = []
    for index in sorted(REAL.rglob("SOURCE.toml")):
        doc = tomllib.loads(index.read_text())
        for entry in doc.get("log", []):
            unknown = set(entry) - KEYS
            assert not unknown, f"{index}: unknown keys {sorted(unknown)}"
            logs.append(RealLog(
                path=index.parent / entry["file"], program=doc["program"], version=str(doc["version"]),
                source=entry["source"], suites=tuple(entry["suites"]), shape=entry["shape"],
                batch=int(entry["batch"]), precision=entry.get("precision", "fp32"),
                window=tuple(entry["window"]) if "window" in entry else None,
                options=dict(entry.get("options", {})), status=entry.get("status", "OK"),
                stated=entry.get("stated"), stated_flavour=entry.get("stated_flavour", "published"),
                evaluated=entry.get("evaluated")))
    return logs


CORPUS = corpus()
CASES = [(log, suite) for log in CORPUS for suite in log.suites]


def test_the_corpus_entries_are_well_formed():
    assert CORPUS, "no SOURCE.toml under tests/fixtures/real"
    known = set(suites.names())
    for log in CORPUS:
        assert log.path.is_file(), f"{log.id}: no such file"
        assert log.source.startswith(("https://", "this project's")), f"{log.id}: source must say where it came from"
        assert set(log.suites) <= known, f"{log.id}: unknown suites {set(log.suites) - known}"
        assert log.stated_flavour in FLAVOURS, f"{log.id}: stated_flavour {log.stated_flavour!r}"
        assert log.path.parent.parent.parent == REAL, f"{log.id}: not under <program>/<version>/"


def read(log: RealLog, suite: str, tmp_path: Path, target: Target | None = None):
    shape_dir = tmp_path / "tree" / log.shape
    shape_dir.mkdir(parents=True)
    shutil.copyfile(log.path, shape_dir / f"model_b{log.batch}_{log.precision}_0.log")
    warmup, measure = log.window if log.window else (None, None)
    col = gather.runs_from_tree(tmp_path / "tree", suite, warmup, measure, log.options or None, target=target)
    res = drive.collect([col], jobs=1)
    assert len(res.runs) == 1
    return res.runs[0]


@pytest.mark.parametrize(("log", "suite"), CASES, ids=[f"{suite}:{log.id}" for log, suite in CASES])
def test_a_real_log_reads_as_its_program_ran(log, suite, tmp_path):
    row = read(log, suite, tmp_path)
    assert str(row.status) == log.status, f"{log.id} as {suite}: {row.status} ({row.reason})"
    if log.stated is not None:
        ours = getattr(row, FLAVOURS[log.stated_flavour])
        assert ours is not None, f"{log.id} as {suite}: no {log.stated_flavour} figure ({row.reason})"
        assert abs(ours - log.stated) <= TOLERANCE * abs(log.stated), \
            f"{log.id} as {suite}: {ours:.6g} against the log's own {log.stated:.6g}"


EVALUATED = [(log, suite) for log, suite in CASES if log.evaluated]


@pytest.mark.parametrize(("log", "suite"), EVALUATED, ids=[f"{suite}:{log.id}" for log, suite in EVALUATED])
def test_a_real_log_s_evaluations_are_its_run_s_accuracy(log, suite, tmp_path):
    """The evaluations the program printed are the run's accuracy (the fields the accuracy table and the target check
    read), and a target decides as the program's own figures say: reached at its best, NOT_CONVERGED above it."""
    stated = log.evaluated
    row = read(log, suite, tmp_path / "plain")
    assert len(row.extra.get("evals") or []) == stated["evaluations"], f"{log.id}: {row.extra.get('evals')}"
    for key in METRICS:
        assert row.extra.get(key) == pytest.approx(stated.get(key), abs=1e-6), f"{log.id} as {suite}: final {key}"
    metric = next((m for m in METRICS if stated.get(f"best_{m}", stated.get(m))), "top1")
    best = stated.get(f"best_{metric}", stated.get(metric)) or 0.0
    if best > 0:  # a log whose every evaluation is 0 reaches no target
        hit = read(log, suite, tmp_path / "reached", Target(metric, best))
        assert hit.extra["reached"] is True and str(hit.status) == log.status, f"{log.id}: {hit.status} ({hit.reason})"
        if "time_to_target_s" in stated:  # from the log's first stamped training line to the evaluation
            assert hit.extra["time_to_target_s"] == pytest.approx(stated["time_to_target_s"]), log.id
    missed = read(log, suite, tmp_path / "missed", Target(metric, min(1.0, best + 0.01)))
    assert missed.extra["reached"] is False
    assert str(missed.status) == ("NOT_CONVERGED" if log.status == "OK" else log.status), missed.reason
    if log.status == "OK":
        assert f"short of the target {accuracy.fmt(metric, min(1.0, best + 0.01))}" in missed.reason


#: Suites still short of the corpus goal, with what was searched: each an xfail that must fail (strict), so the entry
#: goes as soon as its logs arrive. Issue #20 stays open while this holds anything.
GAPS = {
    "ngc-tf1/bert-base": ("only DeepLearningExamples tf1-20.06 logs found (wanghuancoder/PerformanceReport, AI-Rank: "
                          "both the 20.06-tf1 container); no issue or repository searched holds a TF1 BERT log of "
                          "another release"),
    **{f"megatron-bridge/{model}": (
        "two real Megatron-Bridge logs of two versions (verdimrc/playground-nemo-2.0-gh's 0.2.0rc7 run, 2025-10; "
        "NVIDIA/cloudai's test excerpt, 2025-12); Megatron-Bridge's own docs and tutorial quote single lines, "
        "PR #841's log is re-flowed (read as wrapped records, tests/test_megatron_bridge.py) and issue #5028's "
        "thread was not readable whole") for model in ("llama3", "qwen3", "deepseek-v3", "gpt-oss")},
    "torchtitan/gpt-oss": ("torchtitan's gpt-oss lines are its trainer's, as llama3's; no published gpt-oss log found: "
                           "pytorch/torchtitan PR #2432 gives its command only, PR #4604 (the 120b sweep) figures "
                           "only, PR #2389's 8-rank MoE excerpt names no model"),
    "torchtitan/qwen3": ("torchtitan's Qwen3 lines are its trainer's, as llama3's; found: pytorch/torchtitan PR #1690's "
                         "single lines of separate 32B runs (2025-09, one step each, no window); the real 0.3.0 CPU "
                         "run of this project is one log"),
}


@pytest.mark.parametrize("suite", [pytest.param(name, marks=pytest.mark.xfail(reason=GAPS[name], strict=True))
                                   if name in GAPS else name for name in suites.names()])
def test_every_suite_reads_three_real_logs_of_two_versions(suite):
    logs = [log for log in CORPUS if suite in log.suites]
    versions = {(log.program, log.version) for log in logs}
    assert len(logs) >= 3 and len(versions) >= 2, \
        f"{suite}: {len(logs)} real logs from {len(versions)} program versions (need 3 logs of 2 versions)"
