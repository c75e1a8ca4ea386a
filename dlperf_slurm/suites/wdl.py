"""``wdl``: Wide & Deep (Criteo), DLPerf's latency-and-memory study: ``oneflow/wdl`` and ``hugectr/wdl``.

DLPerf's W&D table (reports/WideDeepLearning): per ``deep_vocab_size`` (3.2M .. 819.2M), latency per iteration (ms) and
GPU memory (MiB) of OneFlow and HugeCTR side by side, batch 16384, hidden units 7, embedding vec size 16 or 32;
``dlperf_slurm.report.widedeep`` builds that table from a campaign's cells. The figures of merit are latency and memory
(samples/s too). ``batch_size`` is per device, as everywhere in this tool: DLPerf's "batch_size = 16384" on 1n8g
is a global batch of 16384, i.e. ``batch_size = 2048``.

Programs, as DLPerf's 2021 rerun ran them:
- ``oneflow/wdl``: OneFlow-Inc/models ``wide_and_deep/train.py`` in graph mode under ``python -m
  oneflow.distributed.launch`` (the ``oneflow`` launcher: one per node, node rank from SLURM_NODEID).
- ``hugectr/wdl``: DLPerf's ``HugeCTR/wdl/scripts/wdl.py`` (HugeCTR's Python API: one process drives every GPU of
  its node through ``vvgpu``; nodes are MPI ranks). No JSON is written: the values go in as wdl.py's flags; the
  embedding workspaces are ``floor(vocab x vec x 4 B / 1 MiB)`` per GPU (DLPerf's vocab_size_x2.sh: 12 and 195
  MiB at 3.2M, vec 16, scaled by the vocab's multiple: the same rule, up to 2% smaller). One plain process per
  node: the ``tf_config`` launcher is the registry's launcher that starts exactly that (the TF_CONFIG it also
  exports is ignored by HugeCTR); across nodes srun starts one task per node and HugeCTR's MPI needs srun's PMI
  (``launcher_args = ["--mpi=pmix"]``).

GPU memory: neither program prints it; DLPerf ran ``gpu_memory_usage.py`` (NVML, device 0, every 1 s) beside
them. With ``[options] memwatch = true`` (default) the program runs under ``python -m
dlperf_slurm.workloads.memwatch`` (the same sampling, on the node's GPUs, printed as a ``:::DLPERF`` memory event
at the end), started by the program's own interpreter, which must therefore import dlperf_slurm (and pynvml for
figures; ``memwatch = false``: no memory figures).
DLPerf's own sampler line (``max device0 memory usage is: <bytes>``) is read too when a log holds it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.parsing import evals as lp_evals
from dlperf_slurm.suites import REPEAT, Suite, register

MEMWATCH = "dlperf_slurm.workloads.memwatch"


class _WDL(Suite):
    model = "wdl"
    precisions = ("fp32",)
    axes = {"deep_vocab_size": (), "embedding_vec_size": (), "hidden_units_num": ()}
    axis_defaults = {"deep_vocab_size": 2322444, "embedding_vec_size": 32, "hidden_units_num": 7}
    sample_unit = "samples/s"
    # DLPerf printed every 100 iterations and dropped the first printed interval
    dlperf_window = (100, 1000)
    # print_every: train.py's cur_iter % loss_print_every_n_iter, HugeCTR's display: the interval lines the runs
    # are measured from; hidden_size: OneFlow's nn.Linear(0, 1) fails; eval_batches: HugeCTR's max_eval_batches
    # (0 kept: the runs never evaluate)
    option_minimum = {"print_every": (1, "iterations between two interval lines, which the runs are measured from"),
                      "hidden_size": (1, "units per deep layer"),
                      "data_part_num": (1, "the OFRecord part files the reader splits over its ranks"),
                      "eval_batches": (0, "HugeCTR's max_eval_batches; the runs never evaluate")}

    def drop_reason(self, cell):
        why = super().drop_reason(cell)
        if why:
            return why
        for name in self.axes:
            v = cell.param(name, self.axis_defaults[name])
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                return f"{self.name}: {name} must be a positive integer, got {v!r}"
        return None


    def wrap(self, argv: list[str], options: Mapping[str, Any]) -> list[str]:
        """``argv`` (``python script args``) under the memory sampler (option ``memwatch``): ``python -m memwatch --
        script args``, the script then run by the sampler's own interpreter (the program's: a per-node launcher
        such as oneflow's forks ``python -m memwatch`` with its interpreter)."""
        if not options.get("memwatch", True):
            return argv
        return [argv[0], "-m", MEMWATCH, "--", *argv[1:]]

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse(self, lines, ctx)


def _params(cell) -> tuple[int, int, int]:
    d = _WDL.axis_defaults
    return (int(cell.param("deep_vocab_size", d["deep_vocab_size"])),
            int(cell.param("embedding_vec_size", d["embedding_vec_size"])),
            int(cell.param("hidden_units_num", d["hidden_units_num"])))


@register
class OneFlowWDL(_WDL):
    framework = "oneflow"
    imports = ("oneflow",)
    description = ("OneFlow-Inc/models wide_and_deep/train.py, graph mode (DLPerf's 2021 W&D rerun): latency per "
                   "iteration and GPU memory per deep_vocab_size")
    launcher = "oneflow"
    launchers = ("oneflow",)
    options = {"python": "python3", "script": "/workspace/models/wide_and_deep/train.py",
               "data_dir": "/data/wdl_ofrecord", "data_part_num": 256, "print_every": 100, "hidden_size": 1024,
               "memwatch": True}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        vocab, vec, hidden = _params(cell)
        argv = [options["python"], options["script"], "--learning_rate", "0.001",
                "--batch_size", str(cell.global_batch), "--batch_size_per_proc", str(cell.batch_size),
                "--data_dir", options["data_dir"], "--loss_print_every_n_iter", str(options["print_every"]),
                "--eval_interval", "0", "--deep_dropout_rate", "0.5",
                "--max_iter", str(measure.warmup_steps + measure.measure_steps),
                "--hidden_size", str(options["hidden_size"]), "--wide_vocab_size", str(vocab),
                "--deep_vocab_size", str(vocab), "--hidden_units_num", str(hidden),
                "--deep_embedding_vec_size", str(vec), "--data_part_num", str(options["data_part_num"]),
                "--data_part_name_suffix_length", "5", "--execution_mode", "graph"]
        return self.wrap(argv, options)

    def environment(self, cell, options):
        # DLPerf's vocab_x2.sh (its LD_PRELOAD of tcmalloc is site-specific: set it in [environment] env)
        return {"ONEFLOW_KERNEL_ENABLE_CUDA_GRAPH": "1", "ONEFLOW_THREAD_ENABLE_LOCAL_MESSAGE_QUEUE": "1",
                "ONEFLOW_KERNEL_DISABLE_BLOB_ACCESS_CHECKER": "1", "ONEFLOW_ACTOR_ENABLE_LIGHT_ACTOR": "1"}


def workspace_mb(vocab: int, vec: int) -> int:
    """DLPerf's HugeCTR embedding workspace per GPU (MiB) for ``vocab`` keys of ``vec`` floats (at least 1)."""
    return max(1, vocab * vec * 4 // (1024 * 1024))


@register
class HugeCTRWDL(_WDL):
    evaluations = ("hugectr_auc",)  # "Evaluation, AUC: 0.767348" (its eval_interval)
    framework = "hugectr"
    imports = ("hugectr",)
    description = ("DLPerf's HugeCTR/wdl/scripts/wdl.py (HugeCTR Python API): latency per iteration and GPU "
                   "memory per deep_vocab_size")
    launcher = "tf_config"
    launchers = ("tf_config",)
    # accuracy runs: wdl.py has no epochs (its reader repeats the data set): iters_per_epoch, the iterations of one
    # pass over data_dir/train at the global batch, makes max_iter = epochs x it and an evaluation (eval_batches
    # batches of data_dir/val: "Evaluation, AUC: ...") every it; no stop at a target (time to target from its AUCs)
    accuracy = True
    options = {"python": "python3", "script": "/workspace/HugeCTR/wdl/wdl.py", "data_dir": "/data/criteo_parquet",
               "print_every": 100, "hidden_size": 1024, "eval_batches": 20,
               "memwatch": True, "iters_per_epoch": 0}
    option_minimum = {**_WDL.option_minimum, "iters_per_epoch": (0, "0: unset; an accuracy run needs it")}

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        if not options["iters_per_epoch"]:
            return "options.iters_per_epoch", ("set it to the iterations of one pass over data_dir/train at the "
                                               "global batch (wdl.py counts iterations, not epochs)")
        if not options["eval_batches"]:
            return "options.eval_batches", "set the batches of data_dir/val each evaluation's AUC is taken over"
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        vocab, vec, hidden = _params(cell)
        steps = measure.warmup_steps + measure.measure_steps
        every = steps + 1  # no evaluation inside a throughput run (DLPerf: 10000 > max_iter)
        if measure.accuracy:
            steps, every = measure.epochs * options["iters_per_epoch"], options["iters_per_epoch"]
        argv = [options["python"], options["script"], "--data_dir", options["data_dir"],
                "--gpu_num_per_node", str(cell.gpus_per_node), "--num_nodes", str(cell.nodes),
                # wdl.py's batch is HugeCTR's solver batch: the global one
                "--batch_size", str(cell.global_batch), "--eval_batchs", str(options["eval_batches"]),
                "--eval_interval", str(every), "--max_iter", str(steps),
                "--loss_print_every_n_iter", str(options["print_every"]),
                "--deep_embedding_vec_size", str(vec), "--hidden_units_num", str(hidden),
                "--hidden_size", str(options["hidden_size"]),
                "--wide_workspace_size_per_gpu_in_mb", str(workspace_mb(vocab, 1)),
                "--deep_workspace_size_per_gpu_in_mb", str(workspace_mb(vocab, vec))]
        if measure.accuracy:
            argv += ["--seed", REPEAT]  # each repeat its own seed (HugeCTR's solver seed)
        return self.wrap(argv, options)


# ----------------------------------------------------------------------------------------------- parsing
# The records, each the end of an interval of ``print_every`` iterations:
#   OneFlow-Benchmark wdl_train_eval.py (2020)  100 time 1602836839.6445205 loss 0.5471092355251312
#                                               1000 eval_loss 0.49 eval_auc 0.74   (an evaluation)
#   OneFlow models train.py (2021)   [rank:0] iter: 100/1200, loss: 0.0831..., latency(ms): 81.58... | 2021-12-01 13:19:02.625  # noqa: E501
#   HugeCTR, old logger              [02d07h54m43s][HUGECTR][INFO]: Iter: 3000 Time(1000 iters): 5.381177s Loss: 0.133510 lr:9.003000  # noqa: E501
#                                    [HUGECTR][02:51:59][INFO][RANK0]: Iter: 100 Time(100 iters): 0.315066s Loss: ...
#   HugeCTR, core23 logger           [HCTR][03:10:49.588][INFO][RK0][main]: Iter: 1000 Time(1000 iters): 8.70458s Loss: ...  # noqa: E501
#                                    [HCTR][...]: Eval Time for 4000 iters: 4.47924s    (after "Evaluation, AUC: ...")
# Clocks: wdl_train_eval.py's unix stamps; train.py's millisecond stamps (its latency(ms) is the interval's mean);
# HugeCTR's printed interval times, summed (the old logger's stamps have whole seconds only). HugeCTR's timer keeps
# running through an evaluation, so the interval after one holds the eval time: the printed ``Eval Time`` is taken
# off that interval. A OneFlow interval with an evaluation in it (its time is not printed) is left out whole: its
# iterations and its seconds leave the count, later iterations are renumbered (``extra.dropped_steps``).

_HCTR = re.compile(r"Iter: (\d+) Time\((\d+) iters\): (" + lp.NUM + r")s(?: Loss: (" + lp.NUM + r"))?")
_HCTR_EVAL = re.compile(r"Eval Time for \d+ iters: (" + lp.NUM + r")s")
_OF21 = re.compile(r"iter: (\d+)/\d+, loss: (" + lp.NUM + r")(?:, latency\(ms\): (" + lp.NUM + r"))?"
                   r"(?: \| (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+))?")
_OF20 = re.compile(r"^(\d+) time (\d+(?:\.\d*)?) loss (" + lp.NUM + r")")
_OF20_EVAL = re.compile(r"^\d+ eval_loss ")
_MEM = re.compile(r"max device0 memory usage is: (\d+(?:\.\d*)?)")
_NAN_STOP = "Loss cannot converge"


def _wanted(text: str) -> bool:
    return ("iters)" in text or "Eval Time" in text or " time " in text or "iter: " in text or "eval_loss" in text
            or "memory usage is" in text or _NAN_STOP in text or "AUC: " in text)


class Gaps:
    """Intervals left out of a clock: after :meth:`drop`, the next point's interval (its steps and its seconds)
    leaves the count, and every later point is shifted back by what left."""

    def __init__(self) -> None:
        self.prev: tuple[int, float] | None = None
        self.tainted = False
        self.steps = 0
        self.seconds = 0.0

    def drop(self) -> None:
        self.tainted = True

    def point(self, step: int, t: float) -> tuple[int, float]:
        if self.tainted and self.prev is not None and step > self.prev[0]:
            self.steps += step - self.prev[0]
            self.seconds += t - self.prev[1]
        self.tainted = False
        self.prev = (step, t)
        return step - self.steps, t - self.seconds


@dataclass(slots=True)
class _State:
    """What a parse learns beside its window, and its line handler (:meth:`handler`)."""

    window: lp.Window
    reader: lp_evals.Reader  # the evaluation lines' reader
    iso: lp.IsoClock
    gaps: Gaps
    clock: float = 0.0  # HugeCTR: its printed interval times, summed
    eval_s: float = 0.0  # HugeCTR: the eval time printed since the last interval
    evals: int = 0  # evaluations read
    forms: set[str] = field(default_factory=set)  # the line formats read
    mem: float | None = None  # the memory sampler's device 0 (MiB)
    prev: int = 0  # the last step with a time
    nan: int | None = None  # HugeCTR stopped on a loss that cannot converge: the step after the last timed one
    printed_ms: list[tuple[int, float | None]] = field(default_factory=list)  # OneFlow-models' (iter, latency(ms))

    def add(self, step: int, t: float | None, loss: float | None, form: str) -> None:
        self.forms.add(form)
        if t is None:
            self.window.add(step, None, loss=loss)
            return
        s, tt = self.gaps.point(step, t)
        self.window.add(s, tt, loss=loss)
        self.prev = step

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if (m := _HCTR.search(text)) is not None:
            if not final and text.endswith(tuple("0123456789")):
                return lp.FRAGMENT
            step, seconds = int(m.group(1)), lp.to_float(m.group(3))
            if seconds is None or not math.isfinite(seconds):
                return lp.CONSUMED
            self.clock += max(0.0, seconds - self.eval_s)  # the eval time printed since the last interval
            self.eval_s = 0.0
            self.add(step, self.clock, lp.to_float(m.group(4)) if m.group(4) else None, "hugectr")
            return lp.CONSUMED
        if (m := _HCTR_EVAL.search(text)) is not None:
            self.eval_s += lp.to_float(m.group(1)) or 0.0
            self.evals += 1
            return lp.CONSUMED
        if (m := _OF21.search(text)) is not None:
            if not final and text.endswith(tuple("0123456789")):
                return lp.FRAGMENT
            t = self.iso.seconds(m.group(4)) if m.group(4) else None
            if m.group(3):
                self.printed_ms.append((int(m.group(1)), lp.to_float(m.group(3))))
            self.add(int(m.group(1)), t, lp.to_float(m.group(2)), "oneflow-models")
            return lp.CONSUMED
        if (m := _OF20.search(text)) is not None:
            if not final and text.endswith(tuple("0123456789")):
                return lp.FRAGMENT
            self.add(int(m.group(1)), lp.to_float(m.group(2)), lp.to_float(m.group(3)), "oneflow-benchmark")
            return lp.CONSUMED
        if _OF20_EVAL.search(text):
            self.gaps.drop()
            self.evals += 1
            return lp.CONSUMED
        if (m := _MEM.search(text)) is not None:
            self.mem = float(m.group(1)) / (1024 * 1024)
            return lp.CONSUMED
        if _NAN_STOP in text:  # HugeCTR throws instead of printing a NaN loss
            self.nan = self.prev + 1
            return lp.NOT_MINE  # its error text is a fact too
        return lp.CONSUMED if self.reader.read(text) else lp.NOT_MINE


def _parse(suite: _WDL, lines: Iterable[str], ctx: ParseContext) -> RunResult:
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), lp_evals.Reader(suite.evaluations), lp.IsoClock(),
                Gaps())
    window, evals, gaps = st.window, st.reader, st.gaps
    facts = lp.Scanner(st.handler, starts=_wanted, wanted=_wanted, block_needles=(
        "iters)", "Eval Time", " time ", "iter: ", "eval_loss", "memory usage is", _NAN_STOP, "AUC: ")).run(lines)
    if st.nan is not None:
        window.add(max(st.nan, window.max_step), None, loss=float("nan"))
    extra: dict[str, Any] = {**evals.extra(), "formats": sorted(st.forms),
                             "clock": ("the printed interval times, summed, each interval after an evaluation "
                                       "less the printed eval time" if "hugectr" in st.forms
                                       else "the log's time stamps")}
    if st.evals:
        extra["evaluations"] = st.evals
    if gaps.steps:
        extra["dropped_steps"] = gaps.steps
        extra["dropped_seconds"] = gaps.seconds
    if st.printed_ms:
        # DLPerf's 2021 extractor: the mean of the printed latency(ms), first and last left out
        pts = [v for _, v in st.printed_ms[1:-1] if v is not None]
        if pts:
            extra["printed_latency_ms_mean"] = sum(pts) / len(pts)
    res = lp.finish(window, facts, ctx, extra=extra,
                    no_memory_reason="no memory sampler output in the log (options.memwatch)")
    if st.mem is not None and res.mem_gpu0_mib is None:
        res.mem_gpu0_mib = res.mem_peak_mib = st.mem
        res.mem_reason = "DLPerf's gpu_memory_usage.py: NVML device 0, every 1 s"
    return res
