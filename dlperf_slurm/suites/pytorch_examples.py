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
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model import ParseContext, RunResult
from dlperf_slurm.suites import Suite, register


@register
class ResNet50(Suite):
    framework = "pytorch-examples"
    model = "resnet50"
    description = "pytorch/examples imagenet/main.py --arch resnet50 (DLPerf's flags), one spawning process per node"
    launcher = "mp_spawn"
    launchers = ("mp_spawn",)
    precisions = ("fp32",)
    published = "time"
    sample_unit = "img/s"
    options = {"workdir": "/workspace/examples/imagenet", "script": "main.py", "python": "python3",
               "data_dir": "/data/imagenet", "dummy": False, "epochs": 1, "workers": 8, "dist_backend": "nccl"}
    option_minimum = {"epochs": (1, "main.py's --epochs"), "workers": (0, "its data loader processes")}

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "dist_backend" and value not in ("nccl", "gloo"):
            return "dist_backend must be nccl (DLPerf's) or gloo"
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        node_batch = cell.batch_size * cell.gpus_per_node  # main.py divides -b by its GPUs per node
        argv = [options["python"], f"{options['workdir']}/{options['script']}", "--arch", "resnet50",
                "--epochs", str(options["epochs"]), "--batch-size", str(node_batch),
                "--lr", f"{node_batch / 1000:g}",  # DLPerf: LR = total_bz / 1000 (its total_bz: the node's batch)
                "--workers", str(options["workers"]), "--momentum", "0.125", "--print-freq", "1",
                "--multiprocessing-distributed", "--dist-backend", options["dist_backend"]]
        return argv + (["--dummy"] if options["dummy"] else [options["data_dir"]])

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse(lines, ctx)


# ----------------------------------------------------------------------------------------------- parsing
# main.py's ProgressMeter line (fields joined by tabs; DLPerf's pytorch/examples 49ec0bd printed ``display(i)``,
# 0-based, today's main.py ``display(i + 1)``):
#   Epoch: [0][ 5/13]\tTime  0.362 ( 2.620)\tData  0.106 ( 0.075)\tLoss 1.4081e+01 (3.0098e+01)\tAcc@1 ... Acc@5 ...
_NUM = lp.NUM
_LINE = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/\s*(\d+)\]\s+Time\s+(" + _NUM + r")\s+\(\s*(?:" + _NUM + r")\)")
_LOSS = re.compile(r"\bLoss\s+(" + _NUM + r")\s")
_MAX_STEPS = 1 << 20  # distinct steps kept (a full ImageNet epoch at batch 1 is 1.28 M: far beyond any window)


def _starts(text: str) -> bool:
    return "Epoch: [" in text


def _parse(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    # (epoch, displayed index) -> [sum of the ranks' Time, lines, last loss, batches in the epoch]
    steps: dict[tuple[int, int], list] = {}
    st = {"zero": False}

    def handler(text: str, rank: int | None, final: bool) -> int:
        m = _LINE.search(text)
        if m is None:
            if not final and _starts(text) and "Time" not in text[text.index("Epoch: [") + 8:]:
                return lp.FRAGMENT  # cut before its Time field
            return lp.NOT_MINE
        if not final and not text.rstrip().endswith(")"):
            return lp.FRAGMENT  # a ProgressMeter line ends with ``( avg)``: the rest may follow
        epoch, index, batches = int(m.group(1)), int(m.group(2)), int(m.group(3))
        t = lp.to_float(m.group(4))
        if index == 0:
            st["zero"] = True
        loss = _LOSS.search(text, m.end())
        rec = steps.get((epoch, index))
        if rec is None:
            if len(steps) >= _MAX_STEPS:
                return lp.CONSUMED
            rec = steps[(epoch, index)] = [0.0, 0, None, batches]
        if t is not None and lp.finite(t) and t >= 0:
            rec[0] += t
            rec[1] += 1
        if loss:
            rec[2] = lp.to_float(loss.group(1))
        return lp.CONSUMED

    facts = lp.Scanner(handler, ranks="all", starts=_starts, needles=("Epoch: [",)).run(lines)
    window = lp.Window(ctx.warmup_steps, ctx.measure_steps)
    gb = float(ctx.global_batch)
    base = 1 if st["zero"] else 0  # 0-based indices (display(i)): the line of index i ends step i + 1
    offsets: dict[int, int] = {}
    total = 0
    for epoch in sorted({e for e, _ in steps}):  # steps are counted across epochs, from 1
        offsets[epoch] = total
        total += max(r[3] for (e, _), r in steps.items() if e == epoch)
    clock, prev, per_step = 0.0, 0, []
    for (epoch, index), (tsum, n, loss, _) in sorted(steps.items()):
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
        window.add(step, t, speed=speed, loss=loss, span_from=step - span if seconds is not None else None,
                   span_seconds=seconds)
        prev = max(prev, step)
    extra: dict[str, Any] = {"clock": "sum of the steps' Time (mean over the ranks that printed the step)",
                             "indices": "0-based (display(i))" if st["zero"] else "1-based (display(i + 1))"}
    if per_step:
        extra["ranks_per_step_max"] = max(per_step)
        extra["ranks_per_step_min"] = min(per_step)
    return lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                     no_memory_reason="pytorch/examples main.py reports no GPU memory")
