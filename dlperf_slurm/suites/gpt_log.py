"""Reading the logs of the GPT suites (``megatron/gpt``, ``deepspeed/gpt``, ``oneflow/gpt``): one parser for the
lines these programs really print, whichever of them a log holds, and the model FLOPs behind TFLOP/s and MFU.

Step records, in the forms read (each maybe behind a launcher's rank label; every rank is read, because Megatron
prints its iteration line on the *last* rank, ``print_rank_last``):

- Megatron-LM ``training_log`` (``megatron/training/training.py``), one line per ``--log-interval`` iterations::

    [2024-03-30 20:02:40] iteration       10/  500000 | consumed samples:         1280 | elapsed time per iteration
    (ms): 9496.4 | throughput per GPU (TFLOP/s/GPU): 137.5 | learning rate: 2.000E-06 | global batch size:   128 |
    lm loss: 2.092005E-01 | loss scale: 1.0 | grad norm: 51.010 | number of skipped iterations:   0 | number of nan
    iterations:   0 |

  (the stamp and the TFLOP/s field only in 2024+ builds; ``lm loss`` is missing while fp16 loss scaling skips every
  iteration of the interval). With ``--log-energy`` (2025+) the line also holds the interval's ``energy per GPU
  (J/iter/GPU): 1992.5 | power per GPU (W/GPU): 647.8 |`` (its energy monitor's joules over the interval, per
  iteration, divided by the world size): the run's energy over the window from the program's own lines
  (:mod:`dlperf_slurm.parsing.energy`).
  Megatron-Bridge (which trains with Megatron-core's training_log) prints before each interval's line its ``Step
  Time : 9.09s GPU utilization: 663.5MODEL_TFLOP/s/GPU`` (before 2025-11-07 ``...TFLOP/s/GPU``): that line's
  TFLOP/s goes with the iteration line after it.
  Megatron-DeepSpeed adds ``samples per second: X | ... | TFLOPs: Y |``; GPT-NeoX
  (DeepSpeed's issue threads) prints ``samples/sec: X | iteration N/ M | ... | approx flops per GPU: 112.9TFLOPS |
  lm_loss: ...`` with the unit glued on; bigscience-workshop's fork (BLOOM) prints ``elapsed time per iteration
  (s): 105.22``. The interval's ``elapsed time per iteration`` is timed with a barrier
  over the whole interval: the clock is the sum of those intervals; the speed is the line's global batch over it
  (or the program's own ``samples per second``).
- The DeepSpeed engine's ``ThroughputTimer`` (``deepspeed/utils/timer.py``), every ``steps_per_print`` steps and only
  with the engine's logger at INFO (``"log_level": "info"`` in DeepSpeed 0.19)::

    [2026-11-23 12:18:45,572] [INFO] [timer.py:264:stop] epoch=0/micro_step=3/global_step=3,
    RunningAvgSamplesPerSec=172.89, CurrSamplesPerSec=172.88, MemAllocated=0.38GB, MaxMemAllocated=0.38GB

  (before DeepSpeed 0.7: ``[timer.py:189:stop] 0/40, SamplesPerSec=83.48, MemAllocated=...``, a running mean over
  micro steps; around 0.7: ``[timer.py:207:stop] 0/2498, RunningAvgSamplesPerSec=3.06, CurrSamplesPerSec=2.22,
  MemAllocated=...``, epoch/micro step). Clock: the lines' millisecond stamps; speed: ``CurrSamplesPerSec`` (the
  step's global samples/s).
- The DeepSpeed ``PipelineEngine`` (``deepspeed/runtime/pipe/engine.py``, pipeline parallelism), every
  ``steps_per_print`` steps on global rank 0: ``steps: 40 loss: 1.0123 iter time (s): 0.538 samples/sec: 14.858``
  (newer builds put the model's extra losses after ``loss``: ``lm loss: 5.5103 moe loss: 0.0405``), where ``iter
  time`` is the mean step time over the interval and ``samples/sec`` the global batch over it; clock: the sum of
  each interval's steps x its iter time; the global batch is samples/sec x iter time.
- OneFlow-Benchmark ``oneflow_gpt`` (``oneflow_gpt/util.py`` Metric): ``| 10 | 320 | 5120 | 35.88042 | 14.26962 |
  11.23708 |`` (step, micro batches, samples, samples/s, s/iteration, loss) or ``step=10,micro_batches=320,samples=
  5120,throughput=35.88042,latency=14.26962,loss=11.23708,``; clock: the interval's samples over its throughput.
- LiBai (``libai/utils/events.py``): ``[09/10 10:40:56 lb.utils.events]:  eta: ...  iteration: 19/10000
  consumed_samples: 80  total_loss: 9.895  time: 7.5187 s/iter ... total_throughput: 0.53 samples/s`` (0-based
  iteration); clock: LiBai's own step timer. Its ``IterationTimer`` hook (``libai/engine/hooks.py``, warm-up 3)
  times every iteration from the 3rd on, and ``time`` is the mean of those so far, so ``time x (N - 2)`` is the
  timed seconds through the N-th iteration (the 2nd ends at 0; a line without ``time`` is one of the first two).
  The timer leaves out the hooks' work after each step (logging, checkpoints); the stamps, to the second, cannot
  time iterations of a few ms. (A resumed run, LiBai's ``--resume``, counts from its start iteration: not read.)

When a log holds several forms (Megatron-DeepSpeed with the engine at INFO), the first of Megatron, OneFlow, LiBai,
DeepSpeed that it holds is measured; the others' figures are kept in ``extra``.

Model FLOPs (``flops_per_sample`` in the run's extra, which ``cells`` turns into TFLOP/s per GPU and MFU): where the
log prints its own TFLOP/s per GPU, ``reported TFLOP/s x GPUs / the same line's samples/s`` (the program's formula);
else Narayanan et al. 2021 (arXiv 2104.04473, eq. 3), per sample of ``s`` tokens for ``l`` layers of hidden size
``h`` and vocabulary ``V``::

    F = 24 f s l h^2 (1 + s / (6 h) + V / (16 l h)),   f = 4 with full activation recomputation, else 3

the formula of Megatron-DeepSpeed's ``throughput_calculator`` and of DLPerf's GPT report (recomputation counted,
so with it the "MFU" column is a hardware-FLOPs utilization). The model's size comes from the program's own
arguments dump in the log (``  hidden_size ........ 2304``), else from the job's launch command.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites.gpt_flops import as_int, model_flops
from dlperf_slurm.words import noun, plural

_NUM = lp.NUM
_F = r"(" + _NUM + r")"
# ---- Megatron family
_MEG_ITER = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEG_MS = re.compile(r"elapsed time per iteration \((ms|s)\):\s*" + _F)  # (s): bigscience's fork
_MEG_GB = re.compile(r"global batch size:\s*(\d+)")
_MEG_LOSS = re.compile(r"\blm[ _]loss:\s*" + _F)
_MEG_SKIP = re.compile(r"number of skipped iterations:\s*(\d+)")
_MEG_NAN = re.compile(r"number of nan iterations:\s*(\d+)")
_MEG_SPS = re.compile(r"(?:samples per second|samples/sec):\s*" + _F)
_MEG_TFLOPS = re.compile(r"(?:throughput per GPU \(TFLOP/s/GPU\)|\bTFLOPs|approx flops per GPU):\s*" + _F
                         + r"\s*(?:TFLOPS)?")
# Megatron-Bridge (2025-09+) prints its achieved model TFLOP/s per GPU on a line of its own before the interval's
# iteration line (print_rank_0): "Step Time : 9.09s GPU utilization: 663.5MODEL_TFLOP/s/GPU" (before 2025-11-07:
# "...: 1158.1TFLOP/s/GPU")
_MB_STEP = re.compile(r"Step Time :\s*" + _F + r"s GPU utilization:\s*" + _F + r"\s*(?:MODEL_)?TFLOP/s/GPU")
_MEG_ENERGY = re.compile(r"energy per GPU \(J/iter/GPU\):\s*" + _F + r"\s*\|\s*power per GPU \(W/GPU\):\s*" + _F)
_MEG_MEM = re.compile(r"memory \(MB\) \| allocated: " + _F + r" \| max allocated: " + _F + r" \| reserved: " + _F
                      + r" \| max reserved: " + _F)
# ---- DeepSpeed engine
_DS_NEW = re.compile(r"global_step=(\d+), RunningAvgSamplesPerSec=" + _F + r", CurrSamplesPerSec=" + _F)
_DS_OLD = re.compile(r"\] (\d+)/(\d+), SamplesPerSec=" + _F)
_DS_07 = re.compile(r"\] (\d+)/(\d+), RunningAvgSamplesPerSec=" + _F + r", CurrSamplesPerSec=" + _F)
_DS_PIPE = re.compile(r"\bsteps?: *(\d+)(?: */ *\d+)? +loss: " + _F + r" .*?iter time \(s\): " + _F
                      + r" samples/sec: " + _F)
_DS_END = re.compile(r"MaxMemAllocated=" + _NUM + r"GB\s*$")  # what ends the ThroughputTimer's record
_DS_MEM = re.compile(r"MaxMemAllocated=" + _F + r"GB")
_DS_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d{3})\]")
# ---- OneFlow-Benchmark oneflow_gpt, LiBai
_OF_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*" + _F + r"\s*\|\s*" + _F + r"\s*\|(?:\s*" + _F
                     + r"\s*\|)?")
_OF_KV = re.compile(r"^step=(\d+),micro_batches=(\d+),samples=(\d+),throughput=" + _F + r",latency=" + _F
                    + r",(?:loss=" + _F + ",)?")
_SMI = re.compile(r"^\d+ %, (\d+) MiB\s*$")
_LIBAI = re.compile(r"^\[(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d) lb\.utils\.events\]:.*?\biteration: (\d+)/(\d+)"
                    r"\s+consumed_samples: (\d+)")
_LIBAI_LOSS = re.compile(r"\btotal_loss: " + _F)
_LIBAI_TPUT = re.compile(r"total_throughput: " + _F + r" samples/s")
_LIBAI_TIME = re.compile(r"\btime: " + _F + r" s/iter")
LIBAI_UNTIMED = 2  # LiBai's IterationTimer(warmup_iter=3) times iterations from the 3rd on
# ---- the model's size: an arguments dump line, or flags of the launch command
_DUMP = re.compile(r"(?:^|\s)([a-z][a-z0-9_]*) \.{2,} (\S.*?)\s*$")
_DUMP_KEYS = {"num_layers", "hidden_size", "num_attention_heads", "seq_length", "padded_vocab_size", "vocab_size",
              "checkpoint_activations", "recompute_granularity", "global_batch_size", "train_batch_size",
              "tensor_model_parallel_size", "pipeline_model_parallel_size", "zero_optimization_stage", "num_experts"}
KINDS = ("megatron", "oneflow", "libai", "deepspeed", "deepspeed-pipe")


#: Megatron-LM's and Megatron-Bridge's own line at the end of training (``print_datetime``), before its last checkpoint
#: and evaluation: the program ended its training normally
_DONE = "[after training is done]"


def _wanted(text: str) -> bool:
    return ("iteration" in text or _DONE in text or "Step Time" in text or "SamplesPerSec" in text
            or "iter time (s)" in text or "timer.py:" in text
            or text[:1] == "|" or text[:5] == "step=" or " .." in text or " MiB" in text)


class _Kind:
    """One source of step records: its window, clock and figures."""

    def __init__(self, ctx: ParseContext):
        self.window = lp.Window(ctx.warmup_steps, ctx.measure_steps)
        self.prev = 0  # last step read
        self.clock = 0.0
        self.gbs: list[float] = []  # global batch per record, where the record says it
        self.tflops: list[tuple[float, float]] = []  # (reported TFLOP/s per GPU, that line's samples/s), in window
        self.reported: list[float] = []  # the program's own samples/s figures, in the window
        self.energy: list[tuple[int, float, float]] = []  # (iterations, J/iter/GPU, W/GPU) of each line in window
        self.skipped = 0
        self.samples: int | None = None  # the last record's count of samples so far (OneFlow, LiBai)

    def in_window(self, step: int) -> bool:
        return self.window.warmup < step <= self.window.end_step


class _Reader:
    """The line handler (:meth:`handler`), a method per form of step record, and what it reads: each form's
    :class:`_Kind`, the arguments dump, the programs' own memory figures."""

    def __init__(self, ctx: ParseContext):
        self.kinds = {k: _Kind(ctx) for k in KINDS}
        self.dump: dict[str, str] = {}
        self.mem: dict[str, float] = {}
        self.iso = lp.IsoClock()
        self.smi_mib: list[float] = []
        self.step_tflops: float | None = None  # Megatron-Bridge's Step Time line, for the iteration line after it
        self.wrapped = 0  # step records cut into several lines (the line that starts one does not end it)
        self.done = False  # the program's own end-of-training line (_DONE)

    def add(self, kind: _Kind, step: int, t: float | None, *, speed=None, loss=None, seconds=None, gb=None) -> None:
        span = step - kind.prev if step > kind.prev else 1
        if gb is not None and gb > 0:
            kind.gbs.append(gb)
        kind.window.add(step, t, speed=speed, loss=loss, span_from=step - span if seconds is not None else None,
                        span_seconds=seconds)
        kind.prev = max(kind.prev, step)

    def megatron(self, text: str, m: re.Match, final: bool) -> int:
        ms = _MEG_MS.search(text, m.end())
        if ms is None:  # the record goes on on the next lines (a paste re-flowed it, maybe right after a field's
            self.wrapped += 1  # " |", as Megatron-Bridge's PR #841 shows): its time is not on this line
            return lp.NOT_MINE
        if not final and not text.rstrip().endswith("|"):
            return lp.FRAGMENT  # the record ends with " |": a line cut by buffering is glued with its tail first
        k, step = self.kinds["megatron"], int(m.group(1))
        span = step - k.prev if step > k.prev else 1
        sec = (lp.to_float(ms.group(2)) or 0.0) / (1000.0 if ms.group(1) == "ms" else 1.0)
        gbm, spm, tfl = _MEG_GB.search(text), _MEG_SPS.search(text), _MEG_TFLOPS.search(text)
        reported = float(tfl.group(1)) if tfl else self.step_tflops  # the line's own, else Megatron-Bridge's
        self.step_tflops = None
        sps = float(spm.group(1)) if spm else None  # the program's samples/s (a matched number always parses)
        gb = float(gbm.group(1)) if gbm else (sps * sec if sps is not None and sec > 0 else None)
        loss_m, nan_m, skip_m = _MEG_LOSS.search(text), _MEG_NAN.search(text), _MEG_SKIP.search(text)
        loss = lp.to_float(loss_m.group(1)) if loss_m else None
        if nan_m and int(nan_m.group(1)) > 0:
            loss = float("nan")  # Megatron counts an iteration whose loss is NaN/inf as a "nan iteration"
        k.skipped += int(skip_m.group(1)) if skip_m else 0
        speed = gb / sec if gb and sec > 0 else None
        if k.in_window(step):
            if sps is not None:
                k.reported.append(sps)
            if reported is not None and speed:
                k.tflops.append((reported, sps if sps is not None else speed))
            en = _MEG_ENERGY.search(text)  # --log-energy (Megatron-LM 2025+): the interval's means
            if en:
                k.energy.append((span, float(en.group(1)), float(en.group(2))))
        k.clock += span * sec
        self.add(k, step, k.clock if sec > 0 else None, speed=speed, loss=loss,
                 seconds=span * sec if sec > 0 else None, gb=gb)
        return lp.CONSUMED

    def deepspeed(self, text: str, final: bool) -> int:
        # DeepSpeed ~0.7 prints epoch/step, then the running mean and the step's own figure; older ones the mean
        m = _DS_NEW.search(text) or _DS_OLD.search(text) or _DS_07.search(text)
        if m is None:
            return lp.NOT_MINE
        if not final and not _DS_END.search(text):
            return lp.FRAGMENT
        k = self.kinds["deepspeed"]
        if m.re is _DS_NEW:  # step, the running mean, the step's own samples/s
            step, mean, speed = int(m.group(1)), float(m.group(2)), float(m.group(3))
        elif m.re is _DS_07:  # epoch/step, the running mean, the step's own samples/s
            step, mean, speed = int(m.group(2)), float(m.group(3)), float(m.group(4))
        else:  # epoch/step, the running mean only
            step, mean, speed = int(m.group(2)), float(m.group(3)), None
        if step <= k.prev:  # every rank's engine may print it: the first one read counts
            return lp.CONSUMED
        stamp = _DS_STAMP.search(text)
        t = self.iso.seconds(stamp.group(1).replace(",", ".")) if stamp else None
        if k.in_window(step):
            k.reported.append(mean)
        mm = _DS_MEM.search(text)
        if mm:
            mem = self.mem
            mem["ds_max_allocated_gib"] = max(mem.get("ds_max_allocated_gib", 0.0), lp.to_float(mm.group(1)) or 0.0)
        self.add(k, step, t, speed=speed)
        return lp.CONSUMED

    def pipe(self, m: re.Match) -> int:
        k, step = self.kinds["deepspeed-pipe"], int(m.group(1))
        loss, sec, sps = lp.to_float(m.group(2)), lp.to_float(m.group(3)), lp.to_float(m.group(4))
        if step > k.prev and not (sec and sec > 0 and sps and sps > 0):
            self.add(k, step, None, loss=loss)
        elif step > k.prev and sec and sps:
            gb = sps * sec  # the engine's train_batch_size over its mean step time: the batch, to the rounding
            gb = float(round(gb)) if abs(gb - round(gb)) <= 0.02 * gb else gb
            if k.in_window(step):
                k.reported.append(sps)
            k.clock += (step - k.prev) * sec
            self.add(k, step, k.clock, speed=sps, loss=loss, seconds=(step - k.prev) * sec, gb=gb)
        return lp.CONSUMED

    def oneflow(self, m: re.Match) -> int:
        k = self.kinds["oneflow"]
        step, samples, tput = int(m.group(1)), int(m.group(3)), lp.to_float(m.group(4))
        span = step - k.prev if step > k.prev else 1
        done = samples - k.samples if k.samples is not None else samples
        k.samples = samples
        sec = done / tput if tput and tput > 0 and done > 0 else None
        if sec is not None:
            k.clock += sec
        self.add(k, step, k.clock if sec is not None else None, speed=tput, seconds=sec,
                 loss=lp.to_float(m.group(6)) if m.group(6) else None, gb=done / span if done > 0 else None)
        return lp.CONSUMED

    def libai(self, m: re.Match, text: str) -> int:
        k = self.kinds["libai"]
        step, samples = int(m.group(6)) + 1, int(m.group(8))
        tp, loss, tm = _LIBAI_TPUT.search(text), _LIBAI_LOSS.search(text), _LIBAI_TIME.search(text)
        mean = lp.to_float(tm.group(1)) if tm else None
        t = mean * (step - LIBAI_UNTIMED) if mean is not None and step > LIBAI_UNTIMED else (
            0.0 if step == LIBAI_UNTIMED and tm is None else None)
        gb = (samples - k.samples) / (step - k.prev) if k.samples is not None and step > k.prev else None
        k.samples = samples
        self.add(k, step, t, speed=lp.to_float(tp.group(1)) if tp else None, gb=gb,
                 loss=lp.to_float(loss.group(1)) if loss else None)
        return lp.CONSUMED

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if "Step Time :" in text:
            m = _MB_STEP.search(text)
            if m is not None:
                self.step_tflops = float(m.group(2))
                return lp.CONSUMED
        if "iteration" in text:
            m = _MEG_ITER.search(text)
            if m is not None:
                return self.megatron(text, m, final)
            m = _LIBAI.search(text)
            if m is not None:
                return self.libai(m, text)
        if "timer.py:" in text and "stop]" in text and not _DS_END.search(text):
            self.wrapped += 1  # a ThroughputTimer record whose end (MaxMemAllocated=...GB) is on a later line
        if "SamplesPerSec=" in text:
            return self.deepspeed(text, final)
        if "iter time (s)" in text:
            m = _DS_PIPE.search(text)
            if m is None or (not final and m.end() == len(text.rstrip())):
                return lp.FRAGMENT if m is not None else lp.NOT_MINE  # its last figure may be cut short
            return self.pipe(m)
        if text[:1] == "|" or text[:5] == "step=":
            m = _OF_ROW.match(text) or _OF_KV.match(text)
            return self.oneflow(m) if m else lp.NOT_MINE
        if _DONE in text:
            self.done = True
            return lp.CONSUMED
        if "memory (MB)" in text:
            m = _MEG_MEM.search(text)
            if m:
                self.mem["max_allocated"] = max(self.mem.get("max_allocated", 0.0), lp.to_float(m.group(2)) or 0.0)
                self.mem["max_reserved"] = max(self.mem.get("max_reserved", 0.0), lp.to_float(m.group(4)) or 0.0)
                return lp.CONSUMED
        if " MiB" in text:
            m = _SMI.match(text)
            if m:
                self.smi_mib.append(float(m.group(1)))
                return lp.CONSUMED
        if " .." in text:
            m = _DUMP.search(text)
            if m and m.group(1) in _DUMP_KEYS and m.group(1) not in self.dump:
                self.dump[m.group(1)] = m.group(2)
        return lp.NOT_MINE


def parse(lines: Iterable[str], ctx: ParseContext, *, no_memory_reason: str) -> RunResult:
    r = _Reader(ctx)
    # a PipelineEngine line starts a record: one that follows a cut one is never its tail
    facts = lp.Scanner(r.handler, ranks="all", wanted=_wanted,
                       starts=lambda text: text.startswith(("steps: ", "step: ")),
                       block_needles=("iteration", _DONE, "Step Time", "SamplesPerSec", "timer.py:", "iter time (s)",
                                      "|", "step=", " ..", " MiB")
                       ).run(lines)
    res = _finish(r.kinds, facts, ctx, r.dump, r.mem, r.smi_mib, no_memory_reason)
    if r.done:
        res.extra["program_finished"] = True  # evidence of a normal end where the job left no exit marker
    if r.wrapped and not any(k.window.points for k in r.kinds.values()):
        res.extra["wrapped_records"] = r.wrapped
        why = (f"{plural(r.wrapped, 'step record')} {noun(r.wrapped, 'is', 'are')} wrapped over several lines (the "
               "line that starts one does not end it: a paste re-flowed the log?), and each record is read on one "
               "line, as the program prints it: give the log as the program wrote it")
        res.extra["no_step_why"] = why  # the decision's UNRECOGNISED reason says it first (outcome.decision)
        res.reason = f"{why}; {res.reason}"
    return res


def _own_energy(lines: list[tuple[int, float, float]]) -> tuple[float, float] | None:
    """Megatron's J/iter/GPU and W/GPU over the window: its interval lines' means weighted by their iterations."""
    iters = sum(n for n, _, _ in lines)
    if not iters:
        return None
    return sum(n * j for n, j, _ in lines) / iters, sum(n * w for n, _, w in lines) / iters


def _finish(kinds: dict[str, _Kind], facts: lp.Facts, ctx: ParseContext, dump: dict[str, str],
            mem: dict[str, float], smi_mib: list[float], no_memory_reason: str) -> RunResult:
    name = next((n for n in KINDS if kinds[n].window.points), KINDS[0])
    k = kinds[name]
    x: dict[str, Any] = {"format": name}
    for other in KINDS:
        o = kinds[other]
        if other != name and o.reported:
            x[f"{other}_reported_samples_per_s_mean"] = sum(o.reported) / len(o.reported)
    gb = k.gbs[-1] if k.gbs else (as_int(dump.get("global_batch_size")) or as_int(dump.get("train_batch_size")))
    if not gb:
        gb = ctx.global_batch
        x["global_batch_basis"] = "the matrix's batch x GPUs (the log states no global batch)"
    if len(set(k.gbs)) > 1:
        x["global_batch_varies"] = sorted(set(k.gbs))
    if k.reported:
        x["reported_samples_per_s_mean"] = sum(k.reported) / len(k.reported)
    if k.skipped:
        x["skipped_iterations"] = k.skipped  # fp16 loss scaling: iterations whose update was skipped
    if "zero_optimization_stage" in dump:
        x["zero_stage"] = as_int(dump["zero_optimization_stage"])
    x["clock"] = {"megatron": "sum of the printed per-interval iteration times",
                  "oneflow": "sum of each interval's samples / its throughput",
                  "libai": "LiBai's step timer: its mean s/iter x the iterations it timed (from the 3rd)",
                  "deepspeed": "log stamps",
                  "deepspeed-pipe": "sum of each interval's steps x its printed iter time"}[name]
    res = lp.finish(k.window, facts, ctx, global_batch=float(gb), extra=x, no_memory_reason=no_memory_reason,
                    own_energy=_own_energy(k.energy))
    x = res.extra  # finish copies what it is given
    gpu = model_flops(x, res, k.tflops, dump, facts.job, ctx)
    # memory: the programs' own figures
    if smi_mib and res.mem_peak_mib is None:
        res.mem_peak_mib, res.mem_reason = max(smi_mib), ""  # oneflow_gpt's nvidia-smi samples: every GPU, used
    if "max_allocated" in mem and res.mem_allocator_mib is None:
        res.mem_allocator_mib = mem["max_allocated"]  # Megatron's report_memory: torch's max allocated, MB
        x["mem_reserved_mib"] = mem["max_reserved"]
    if "ds_max_allocated_gib" in mem:
        x["engine_max_mem_allocated_gib"] = mem["ds_max_allocated_gib"]  # the DeepSpeed engine's, 0.01 GB steps
        if gpu and res.mem_allocator_mib is None:
            res.mem_allocator_mib = mem["ds_max_allocated_gib"] * 1024.0
    return res
