"""``tensorpack/resnet50``: Tensorpack's multi-GPU benchmark, tensorpack/benchmarks ``ResNet-MultiGPU/
resnet-multigpu.py`` (ResNet-50 on fake data, the trainers compared with tf_cnn_benchmarks), beside
``tf-cnn/resnet50`` in one campaign: the seed's table (rows GPUs, columns tensorpack per ``--fake-location`` vs
tf_cnn_benchmarks) is ``dlperf_slurm.report.studies``.

The program's argv: ``resnet-multigpu.py --fake-location {gpu,cpu,python-queue,python-dataset,zmq-consume}
--variable-update {replicated,parameter_server,horovod} --batch N [--use-fp16] [--use-xla-compile]`` (axes
``fake_location``, ``variable_update``; precision fp16 = ``--use-fp16``, the script's fp16 with fp32 master weights;
xla = ``--use-xla-compile``).

Launch. With replicated or parameter_server the script is one process that counts the node's GPUs
(``get_nr_gpu``) and builds one tower per GPU (SyncMultiGPUTrainerReplicated / ParameterServer): the launcher is
``tf_config``, the registered per-node launcher that starts the program as it is (one task per node; on one node
the plain program from the batch shell) — ``node_ips`` and ``mp_spawn`` append arguments the script's argparse
rejects, and the per-GPU launchers would start one copy per GPU. Those cells run on one node: across nodes the
script trains only with ``--variable-update horovod`` (its ``--job ps:0 --ps-hosts --worker-hosts`` mode needs
parameter-server processes this suite does not start). Horovod is one rank per GPU (HorovodTrainer) under mpirun
or horovodrun. ``zmq-consume`` reads from a ``--fake-location zmq-serve`` producer on ``ipc://testpipe`` that
must run beside it: cells of it are dropped with that reason. (``python-dataset`` fails in tensorpack 0.11 on
TF 2.21: its TFDatasetInput reads ``output_types``, which tf.data datasets no longer have.)

The window. The script hard-codes ``steps_per_epoch=50, max_epoch=10`` (500 steps) and logs per epoch, not per
step, so the window is made of whole epochs: set ``warmup_steps`` and ``measure_steps`` to multiples of 50
(``warmup_steps = 50, measure_steps = 450``: epoch 1 is the warm-up, epochs 2-10 are timed). A window edge inside
an epoch moves to the epoch's end; a window that keeps fewer than 90% of its steps that way is UNMEASURED.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites import Suite, register

FAKE_LOCATIONS = ("gpu", "cpu", "python-queue", "python-dataset", "zmq-consume")
UPDATES = ("replicated", "parameter_server", "horovod")
STEPS_PER_EPOCH = 50  # resnet-multigpu.py's TrainConfig(steps_per_epoch=50, max_epoch=10)


@register
class TensorpackResNet50(Suite):
    framework = "tensorpack"
    imports = ("tensorpack",)
    model = "resnet50"
    description = ("tensorpack/benchmarks ResNet-MultiGPU/resnet-multigpu.py (fake data; epochs of 50 steps, "
                   "10 epochs: window in whole epochs)")
    sample_unit = "img/s"
    launcher = "tf_config"
    launchers = ("tf_config", "mpirun", "horovodrun")
    precisions = ("fp32", "fp16")
    supports_xla = True
    axes = {"fake_location": FAKE_LOCATIONS, "variable_update": UPDATES}
    axis_defaults = {"fake_location": "gpu", "variable_update": "replicated"}
    options = {"script": "/workspace/benchmarks/ResNet-MultiGPU/resnet-multigpu.py", "python": "python3"}

    def drop_reason(self, cell) -> str | None:
        if (why := super().drop_reason(cell)) is not None:
            return why
        update = cell.param("variable_update", "replicated")
        if cell.param("fake_location", "gpu") == "zmq-consume":
            return ("fake_location zmq-consume reads from a `--fake-location zmq-serve` producer on ipc://testpipe "
                    "that this suite does not start")
        if update == "horovod":
            if cell.launcher == "tf_config":
                return "variable_update horovod is one rank per GPU: launcher mpirun or horovodrun"
            return None
        if cell.launcher != "tf_config":
            return (f"variable_update {update}: one process drives all of the node's GPUs (launcher tf_config), "
                    f"not one per GPU under {cell.launcher}")
        if cell.nodes > 1:
            return (f"variable_update {update} across nodes is resnet-multigpu.py's --job ps/worker mode, whose "
                    "parameter-server processes this suite does not start: across nodes use horovod")
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [options["python"], options["script"], "--fake-location", cell.param("fake_location", "gpu"),
                "--variable-update", cell.param("variable_update", "replicated"), "--batch", str(cell.batch_size)]
        if cell.precision == "fp16":
            argv.append("--use-fp16")
        if cell.xla:
            argv.append("--use-xla-compile")
        return argv

    def environment(self, cell, options: Mapping[str, Any]) -> dict[str, str]:
        # tensorpack's layers call tf.layers, which Keras 3 (TF >= 2.16) removed: tf-keras's legacy Keras instead
        return {"TF_USE_LEGACY_KERAS": "1"}

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return parse_tensorpack(lines, ctx)


# ----------------------------------------------------------------------------------------------- parsing
# tensorpack's logger (stdout; rank 0 only under Horovod: the script filters the other ranks' logger):
#   [1122 15:17:06 @base.py:282] Epoch 1 (global_step 10) finished, time:0.264 second.
#   [1123 12:54:05 @monitor.py:476] Throughput (samples/sec): 5858.9        ThroughputTracker, per epoch
#   [.. @monitor.py:476] PeakMemory(MB)/gpu:0: 1.2e+04                       GPUMemoryTracker, per epoch and GPU
#   [.. @base.py:287] Training has finished!
# The stamps are whole seconds (no clock). An epoch line gives the epoch's global step at its end and its
# duration (humanize_time_delta: 3 significant digits below a minute, whole seconds above); an epoch spans the
# steps since the previous epoch line (the first line seen: global_step / epoch, epochs of equal steps from 0,
# so an excerpt or a resumed log still times its first epoch). Time flavour: the
# global batch x the window's steps / the sum of its epochs' durations; speed flavour: the mean of the window's
# epochs' ThroughputTracker figures (samples_per_step = batch x GPUs, over the same span: callbacks after an epoch
# are outside both).

_NUM = lp.NUM
_EPOCH = re.compile(r"Epoch (\d+) \(global_step (\d+)\) finished, time:(.*?)\.?\s*$")
_DELTA = re.compile(r"(" + _NUM + r") (day|hour|minute|second)s?\b")
_UNIT = {"day": 86400.0, "hour": 3600.0, "minute": 60.0, "second": 1.0}
_THROUGHPUT = re.compile(r"Throughput \((samples|steps)/sec\): (" + _NUM + r")\s*$")
_PEAK = re.compile(r"PeakMemory\(MB\)(\S*): (" + _NUM + r")\s*$")
_NEEDLES = ("finished, time:", "Throughput (", "PeakMemory(MB)", "Training has finished")


def humanized_seconds(text: str) -> float | None:
    """Seconds of a ``humanize_time_delta`` text ("0.264 second", "1 minute 27 seconds"); None if none."""
    parts = _DELTA.findall(text)
    if not parts:
        return None
    total = 0.0
    for value, unit in parts:
        v = lp.to_float(value)
        if v is None:
            return None
        total += v * _UNIT[unit]
    return total


@dataclass(kw_only=True)
class _Epoch:
    """An epoch's end, held until the throughput line after it is read."""

    step: int
    t: float | None  # the summed epoch durations up to it
    span: int  # its steps
    seconds: float | None  # its duration
    speed: float | None = None  # from the throughput line


@dataclass
class _State:
    """What a parse learns beside its window, and its line handler (:meth:`handler`), one method a record."""

    window: lp.Window
    gb: float  # the global batch
    pending: _Epoch | None = None
    prev: int = 0  # the highest step an epoch line ended at
    clock: float = 0.0
    epochs: int = 0  # epoch lines read
    done: bool = False  # "Training has finished"
    peak: dict[str, float] = field(default_factory=dict)  # device -> its PeakMemory(MB), the largest
    steps_per_epoch: set[int] = field(default_factory=set)
    unit: str | None = None  # the throughput line's unit: samples or steps (per second)

    def flush(self) -> None:
        if self.pending is not None:
            e = self.pending
            self.window.add(e.step, e.t, speed=e.speed, span_from=e.step - e.span, span_seconds=e.seconds)
            self.pending = None

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if "finished, time:" in text:
            return self._epoch(text, final)
        if "Throughput (" in text:
            return self._throughput(text, final)
        if "PeakMemory(MB)" in text:
            return self._memory(text, final)
        if "Training has finished" in text:
            self.done = True
            return lp.CONSUMED
        return lp.NOT_MINE

    def _epoch(self, text: str, final: bool) -> int:
        m = _EPOCH.search(text)
        if not final and (m is None or not text.rstrip().endswith(".")):
            return lp.FRAGMENT  # the duration ends the line: it may be cut short
        if m is None:
            return lp.NOT_MINE
        self.flush()
        epoch, step = int(m.group(1)), int(m.group(2))
        secs = humanized_seconds(m.group(3))
        if self.prev:
            span = step - self.prev if step > self.prev else step
        else:  # the first epoch line (of a log that may start later): epochs of equal steps from step 0
            span = step // epoch if epoch > 0 and step % epoch == 0 else step
        self.steps_per_epoch.add(span)
        self.prev = max(self.prev, step)
        self.epochs += 1
        t = None
        if secs is not None:
            self.clock += secs
            t = self.clock
        self.pending = _Epoch(step=step, t=t, span=span, seconds=secs)
        return lp.CONSUMED

    def _throughput(self, text: str, final: bool) -> int:
        if not final:
            return lp.FRAGMENT  # the figure ends the line
        m = _THROUGHPUT.search(text)
        if m is None:
            return lp.NOT_MINE
        v = lp.to_float(m.group(2))
        self.unit = m.group(1)
        if self.pending is not None and v is not None:
            # samples/sec when the script gave samples_per_step; steps/sec otherwise (x the global batch)
            self.pending.speed = v if m.group(1) == "samples" else v * self.gb
        return lp.CONSUMED

    def _memory(self, text: str, final: bool) -> int:
        if not final:
            return lp.FRAGMENT
        m = _PEAK.search(text)
        if m is None:
            return lp.NOT_MINE
        v = lp.to_float(m.group(2))
        if v is not None:
            dev = m.group(1).lstrip("/") or "gpu"
            self.peak[dev] = max(v, self.peak.get(dev, 0.0))
        return lp.CONSUMED


def parse_tensorpack(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    gb = float(ctx.global_batch)
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), gb)
    facts = lp.Scanner(st.handler, starts=lambda t: any(n in t for n in _NEEDLES), needles=_NEEDLES).run(lines)
    st.flush()
    extra: dict[str, Any] = {"epochs_logged": st.epochs,
                             "steps_per_epoch": sorted(st.steps_per_epoch),
                             "clock": "sum of the logged epoch durations (humanize_time_delta text)",
                             "window_rule": "whole epochs: each edge at the first epoch end at or after it"}
    if st.unit == "steps":
        extra["throughput_tracker"] = "steps/sec (no samples_per_step): multiplied by the global batch"
    if st.done:
        extra["training_finished"] = True
    res = lp.finish(st.window, facts, ctx, global_batch=gb, extra=extra,
                    no_memory_reason="no GPUMemoryTracker line (PeakMemory(MB)) in the log")
    if st.peak and res.mem_peak_mib is None:
        # GPUMemoryTracker: tf.contrib MaxBytesInUse per GPU, printed in MB (1e6 bytes)
        peaks = {d: v * 1e6 / 2**20 for d, v in st.peak.items()}
        res.mem_peak_mib = max(peaks.values())
        res.mem_gpu0_mib = peaks.get("gpu:0")
        res.mem_reason = "tensorpack GPUMemoryTracker (TF allocator's MaxBytesInUse, MB), the largest over its GPUs"
        res.extra["peak_memory_mib_by_device"] = peaks
    return res
