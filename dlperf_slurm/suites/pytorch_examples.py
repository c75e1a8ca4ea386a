"""``pytorch-examples``: ResNet-50 with pytorch/examples ``imagenet/main.py`` as DLPerf ran it
(DLPerf ``PyTorch/resnet50v1.5/scripts/single_node_train.sh``), under the ``mp_spawn`` launcher: one process per
node (``--multiprocessing-distributed``: main.py spawns one rank per GPU itself), ``--world-size <nodes> --rank
<node rank> --dist-url tcp://<first host>:<port>`` added by the launcher.

DLPerf's flags: ``--arch resnet50 --epochs 1 --batch-size <per-GPU batch x GPUs of the node> --lr <that batch /
1000> --workers 8 --momentum 0.125 --print-freq 1 --multiprocessing-distributed --dist-backend nccl`` and the
ImageNet folder; FP32 only (DLPerf's README: "Automatic mixed precision (AMP): No"; main.py has no AMP flag).

How a run is bounded: main.py has no step limit. DLPerf ran one epoch (its README: "one epoch by default; Ctrl+C
to stop earlier") and read the first 120 counted lines. Here the run is one epoch of what ``data_dir`` holds (set
``epochs``, or point ``data_dir`` at an ImageFolder subset of at least (warm-up + measure + 1) x global batch
training images to keep it short); with ``dummy = true`` main.py's ``--dummy`` FakeData (1,281,167 images, so a
full-length epoch) replaces the data. A run that stops before the window's end reads INCOMPLETE, never a figure.

Which lines are read: main.py prints a ProgressMeter line on EVERY rank, so all ranks' lines (srun's node labels
``0: ``, mpirun's ``[1,0]<stdout>:`` or none) are read; the lines of one node's ranks share a label and interleave.
Time flavour (DLPerf's): its extract_pytorch_logs_time.py summed the current ``Time`` (the per-iteration time, the
first number) of counted lines and published total batch / mean time. Here each step's time is the mean of the
``Time`` its ranks printed for it; the window (skip ``warmup`` steps, time the next ``measure``) sums those.
DLPerf's window counts lines (ranks mixed; iteration indices <= 5 skipped, then 20 lines, then 100): on one GPU
that is steps 27..126, which ``warmup_steps = 26, measure_steps = 100`` reproduce; with several GPUs per log its
100 lines are ~100/G iterations of G ranks, ours 100 iterations of every rank. Speed flavour: the mean of global
batch / step time over the window's steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import evals as lp_evals
from dlperf_slurm.suites import Suite, register
from dlperf_slurm.words import plural


@register
class ResNet50(Suite):
    framework = "pytorch-examples"
    imports = ("torch",)
    model = "resnet50"
    description = "pytorch/examples imagenet/main.py --arch resnet50 (DLPerf's flags), one spawning process per node"
    launcher = "mp_spawn"
    launchers = ("mp_spawn",)
    precisions = ("fp32",)
    published = "time"
    sample_unit = "img/s"
    evaluations = ("torchvision",)  # main.py's validate(): " *   Acc@1 92.424 Acc@5 99.327" (percents)
    # accuracy runs: --epochs of the ImageFolder data_dir, main.py's validate() after every epoch (its own loop);
    # main.py has no flag to stop at a target: it trains every epoch, and collect reads from its evaluations whether
    # and at which epoch the target was reached (NOT_CONVERGED if never; its lines carry no time: no time to target).
    # No --seed: main.py seeds nothing without it (each repeat starts from its own random state), and with it turns
    # on cuDNN's deterministic mode, which would slow the processing rate the run also measures
    accuracy = True
    options = {"workdir": "/workspace/examples/imagenet", "script": "main.py", "python": "python3",
               "data_dir": "/data/imagenet", "dummy": False, "epochs": 1, "workers": 8, "dist_backend": "nccl"}
    option_minimum = {"epochs": (1, "main.py's --epochs"), "workers": (0, "its data loader processes")}

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "dist_backend" and value not in ("nccl", "gloo"):
            return "dist_backend must be nccl (DLPerf's) or gloo"
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        node_batch = cell.batch_size * cell.gpus_per_node  # main.py divides -b by its GPUs per node
        epochs = measure.epochs if measure.accuracy else options["epochs"]
        argv = [options["python"], f"{options['workdir']}/{options['script']}", "--arch", "resnet50",
                "--epochs", str(epochs), "--batch-size", str(node_batch),
                "--lr", f"{node_batch / 1000:g}",  # DLPerf: LR = total_bz / 1000 (its total_bz: the node's batch)
                "--workers", str(options["workers"]), "--momentum", "0.125", "--print-freq", "1",
                "--multiprocessing-distributed", "--dist-backend", options["dist_backend"]]
        return argv + (["--dummy"] if options["dummy"] else [options["data_dir"]])

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        if options["dummy"]:
            return ("options.dummy", "an accuracy run evaluates on real data, not --dummy FakeData: set dummy = false "
                                     "and data_dir to an ImageFolder of train/ and val/")
        return None

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse(lines, ctx, self.evaluations)


# ----------------------------------------------------------------------------------------------- parsing
# The line formats, one per program generation (each ``[i/N]`` counts batches within its epoch; steps are counted
# across epochs, N per epoch):
#   pytorch/examples main.py ProgressMeter (fields joined by tabs; DLPerf's 49ec0bd printed ``display(i)``, 0-based,
#   today's main.py ``display(i + 1)``), every rank:
#     Epoch: [0][ 5/13]\tTime  0.362 ( 2.620)\tData  0.106 ( 0.075)\tLoss 1.4081e+01 (3.0098e+01)\tAcc@1 ... Acc@5 ...
#   torchvision references/classification/train.py MetricLogger.log_every (2019+; what PyTorch users run today
#   instead of main.py), rank 0 only, ``i`` 0-based, every --print-freq batches; ``time`` is the mean iteration time
#   (data included) over the last 20 iterations, ``img/s`` one process's batch over that step's compute (data loading
#   excluded), ``max mem`` torch.cuda.max_memory_allocated in MiB (absent on CPU in later versions):
#     Epoch: [0]  [  10/5005]  eta: 16:04:31  lr: 0.1  img/s: 12.32699510677423  loss: 6.9894 (6.9822)  acc1: ...
#         time: 11.5858  data: 5.7029  max mem: 3524
_NUM = lp.NUM
_LINE = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/\s*(\d+)\]\s+Time\s+(" + _NUM + r")\s+\(\s*(?:" + _NUM + r")\)")
_LOSS = re.compile(r"\bLoss\s+(" + _NUM + r")\s")
_TV = re.compile(r"Epoch: \[(\d+)\]\s+\[\s*(\d+)/(\d+)\]\s+eta: \S+\s+(.*?)\btime: (" + _NUM + r")\s+data: (?:" + _NUM
                 + r")(?:\s+max mem: (" + _NUM + r"))?")
_TV_IPS = re.compile(r"\bimg/s: (" + _NUM + r")")
_TV_LOSS = re.compile(r"\bloss: (" + _NUM + r")")
_END = re.compile(r"\s*Training time \d+:\d\d:\d\d\s*$")
_MAX_STEPS = 1 << 20  # distinct steps kept (a full ImageNet epoch at batch 1 is 1.28 M: far beyond any window)


def _starts(text: str) -> bool:
    return "Epoch: [" in text


def _record(steps: dict, epoch: int, index: int, batches: int, t: float | None) -> list | None:
    """The record of step ``(epoch, index)`` (new when unseen; None past :data:`_MAX_STEPS`), with one rank's
    time ``t`` added to it."""
    rec = steps.get((epoch, index))
    if rec is None:
        if len(steps) >= _MAX_STEPS:
            return None
        rec = steps[(epoch, index)] = [0.0, 0, None, batches, 0.0, 0]
    if t is not None and lp.finite(t) and t >= 0:
        rec[0] += t
        rec[1] += 1
    return rec


@dataclass(slots=True)
class _State:
    """What a parse learns: its steps, and beside them its line handler's findings (:meth:`handler`)."""

    evals: lp_evals.Reader  # rank 0's evaluation lines
    # (epoch, index) -> [sum of the ranks' Time, lines, last loss, batches in the epoch, sum of img/s, img/s lines]
    steps: dict[tuple[int, int], list] = field(default_factory=dict)
    zero: bool = False  # a ProgressMeter line of index 0: its indices are 0-based
    tv: bool = False  # torchvision references MetricLogger lines
    mem: float = 0.0  # torchvision's largest "max mem" (MiB); 0: none printed
    done: str = ""  # torchvision's last line ("Training time ..."), once printed
    epoch: int | None = None  # the last training line's epoch, 1-based: the epoch an evaluation line closes

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        """Each rank's training lines into :attr:`steps`, rank 0's evaluations into :attr:`evals`."""
        if _END.match(text):  # torchvision's train.py printed its last line: the run finished
            self.done = text.strip()
            return lp.CONSUMED
        m = _LINE.search(text)
        if m is None:
            if (tv := _TV.search(text)) is not None:
                if not final and tv.end() >= len(text.rstrip()):
                    return lp.FRAGMENT  # its last number may be cut short: the rest may follow
                return _torchvision(text, tv, self.steps, self)
            if not final and _starts(text) and ("eta: " in text or "Time" not in text[text.index("Epoch: [") + 8:]):
                return lp.FRAGMENT  # cut before its time (Time) field
            # every rank prints it; it closes the epoch of the training lines before it
            return lp.CONSUMED if rank in (None, 0) and self.evals.read(text, self.epoch) else lp.NOT_MINE
        if not final and not text.rstrip().endswith(")"):
            return lp.FRAGMENT  # a ProgressMeter line ends with ``( avg)``: the rest may follow
        epoch, index, batches = int(m.group(1)), int(m.group(2)), int(m.group(3))
        self.epoch = epoch + 1
        t = lp.to_float(m.group(4))
        if index == 0:
            self.zero = True
        loss = _LOSS.search(text, m.end())
        rec = _record(self.steps, epoch, index, batches, t)
        if rec is None:
            return lp.CONSUMED
        if loss:
            rec[2] = lp.to_float(loss.group(1))
        return lp.CONSUMED


def _torchvision(text: str, m: "re.Match[str]", steps: dict, st: _State) -> int:
    """A torchvision MetricLogger line (``m`` its match): one step of rank 0."""
    epoch, index, batches = int(m.group(1)), int(m.group(2)), int(m.group(3))
    st.tv, st.epoch = True, epoch + 1
    t = lp.to_float(m.group(5))
    ips = _TV_IPS.search(m.group(4))
    loss = _TV_LOSS.search(m.group(4))
    mem = lp.to_float(m.group(6)) if m.group(6) else None
    if mem is not None and lp.finite(mem) and mem > 0:
        st.mem = max(st.mem, mem)
    rec = _record(steps, epoch, index, batches, t)
    if rec is None:
        return lp.CONSUMED
    if ips is not None and (v := lp.to_float(ips.group(1))) is not None and lp.finite(v) and v > 0:
        rec[4] += v
        rec[5] += 1
    if loss:
        rec[2] = lp.to_float(loss.group(1))
    return lp.CONSUMED


def _add_steps(window: lp.Window, steps: dict, offsets: dict[int, int], base: int, gb: float,
               devices: int) -> list[int]:
    """Every recorded step into the window in step order, its time the clock of the steps' mean Time (or its
    speed torchvision's img/s x the processes); returns how many ranks printed each timed step."""
    clock, prev, per_step = 0.0, 0, []
    for (epoch, index), (tsum, n, loss, _, ips_sum, ips_n) in sorted(steps.items()):
        step = offsets[epoch] + index + base
        if step <= 0:
            continue
        seconds = speed = t = None
        span = step - prev if step > prev else 1
        if n:
            mean = tsum / n
            per_step.append(n)
            seconds = span * mean  # a print-freq gap: its steps taken as long as the printed one
            clock += seconds
            t = clock
            speed = gb / mean if mean > 0 else None
        if ips_n:  # torchvision: one process's img/s, the same on every rank of a data-parallel job
            speed = ips_sum / ips_n * devices
        window.add(step, t, speed=speed, loss=loss, span_from=step - span if seconds is not None else None,
                   span_seconds=seconds)
        prev = max(prev, step)
    return per_step


def _parse(lines: Iterable[str], ctx: ParseContext, evaluations: tuple[str, ...] = ()) -> RunResult:
    st = _State(lp_evals.Reader(evaluations))
    evals, steps = st.evals, st.steps
    facts = lp.Scanner(st.handler, ranks="all", starts=_starts, needles=("Epoch: [", "Training time ", *evals.needles)
                       ).run(lines)
    window = lp.Window(ctx.warmup_steps, ctx.measure_steps)
    gb = float(ctx.global_batch)
    # 0-based indices (display(i), torchvision's log_every): the line of index i ends step i + 1
    base = 1 if st.zero or st.tv else 0
    offsets: dict[int, int] = {}
    total = 0
    for epoch in sorted({e for e, _ in steps}):  # steps are counted across epochs, from 1
        offsets[epoch] = total
        total += max(r[3] for (e, _), r in steps.items() if e == epoch)
    per_step = _add_steps(window, steps, offsets, base, gb, ctx.nodes * ctx.gpus_per_node)
    if st.tv:
        extra: dict[str, Any] = {**evals.extra(),
            "format": "torchvision references MetricLogger",
            "clock": "per printed step, its 'time' (the mean iteration time of the last 20) x the steps since the "
                     "previous printed one",
            "speed": "img/s (rank 0's batch over its step's compute) x the job's processes"}
    else:
        extra = {**evals.extra(), "format": "pytorch/examples main.py ProgressMeter",
                 "clock": "sum of the steps' Time (mean over the ranks that printed the step)",
                 "indices": "0-based (display(i))" if st.zero else "1-based (display(i + 1))"}
    if per_step:
        extra["ranks_per_step_max"] = max(per_step)
        extra["ranks_per_step_min"] = min(per_step)
    res = lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                    no_memory_reason="pytorch/examples main.py reports no GPU memory" if not st.tv else
                    "torchvision's log prints no 'max mem' (a CPU run, or its memory was 0)")
    if res.status == Status.INCOMPLETE and st.done and total < window.end_step:
        epochs = len(offsets)
        res.reason = (f"the run had {plural(total, 'step')} ({plural(epochs, 'epoch')} of its [i/N] counter), "
                      f"the window needs {window.end_step}; use --warmup-steps/--measure-steps (the program finished: "
                      f"{st.done!r})")
    if st.mem and res.mem_allocator_mib is None:
        res.mem_allocator_mib = st.mem  # torchvision's "max mem": rank 0's torch.cuda.max_memory_allocated
        if res.mem_reason.startswith("torchvision's log prints no"):
            res.mem_reason = "torchvision's 'max mem' (rank 0's max_memory_allocated, MiB): allocator only"
    return res
