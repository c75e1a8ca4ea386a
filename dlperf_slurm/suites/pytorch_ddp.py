"""``pytorch-ddp``: our built-in PyTorch reference workloads (``dlperf_slurm.workloads``), runnable anywhere.

Launch spec and parser side by side; the log is our own ``:::DLPERF {json}`` line format.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dlperf_slurm import events as ev
from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import accuracy
from dlperf_slurm.suites import REPEAT, Suite, register

# header keys copied into RunResult.extra
_HEADER_EXTRA = (ev.WORLD_SIZE, ev.DEVICE, ev.DEVICE_NAME, ev.PRECISION, ev.COMPILE, ev.LAUNCHER, ev.VERSIONS,
                 ev.FLOPS_PER_SAMPLE, ev.PEAK_TFLOPS_PER_GPU, ev.CEILING_TFLOPS_PER_GPU, ev.CEILING_BASIS, ev.PARAMS)


class _PytorchDDP(Suite):
    framework = "pytorch-ddp"
    imports = ("torch",)
    launcher = "torchrun"
    launchers = ("torchrun", "srun", "mpirun")
    precisions = ("fp32", "amp", "fp16", "bf16")
    supports_xla = True
    xla_name = "torch.compile"
    axes = {"data_location": ("device", "host")}
    axis_defaults = {"data_location": "device"}
    # nan_at_step K > 0: the workload makes its loss NaN from step K on (a NONFINITE run on purpose, for tests);
    # hang_at_step K > 0: every rank stops at step K (a HANG on purpose: a test of the job script's watchdog)
    # ceiling: rank 0 reads, or measures once per campaign, the device's matmul ceiling (MFU against it)
    # image_size N > 0: ResNet's input size (0: the model's, 224, tiny 32); memory per sample grows as N^2
    options = {"tiny": False, "threads": 0, "python": "python3", "seed": 0, "nan_at_step": 0, "hang_at_step": 0,
               "ceiling": True, "image_size": 0, "dataset": "digits"}
    option_minimum = {"threads": (0, "0: torch's own number of threads"), "nan_at_step": (0, "0: off"),
                      "hang_at_step": (0, "0: off"), "image_size": (0, "0: the model's own")}

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "dataset" and value not in ("digits",):
            return "the one real dataset the built-in workload trains on is \"digits\" (scikit-learn's)"
        if name == "image_size" and value and self.model != "resnet50":
            return "only ResNet-50 takes an image size"
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [
            options["python"], "-m", "dlperf_slurm.workloads.train",
            "--model", self.model,
            "--batch-size", str(cell.batch_size),
            "--precision", cell.precision,
            "--compile", str(int(cell.xla)),
            "--warmup-steps", str(measure.warmup_steps),
            "--measure-steps", str(measure.measure_steps),
            "--data-location", str(cell.param("data_location", "device")),
            "--seed", str(options["seed"]),
        ]
        if options["threads"]:
            argv += ["--threads", str(options["threads"])]
        if options["tiny"]:
            argv.append("--tiny")
        if not options["ceiling"]:
            argv += ["--ceiling", "0"]
        if options["nan_at_step"]:
            argv += ["--nan-at-step", str(options["nan_at_step"])]
        if options["hang_at_step"]:
            argv += ["--hang-at-step", str(options["hang_at_step"])]
        if options["image_size"]:
            argv += ["--image-size", str(options["image_size"])]
        if cell.param("num_classes", 0):
            argv += ["--num-classes", str(cell.param("num_classes"))]
        if measure.accuracy:  # epochs of a real dataset, evaluated after each (the window: the first epoch's)
            argv += ["--epochs", str(measure.epochs), "--dataset", options["dataset"], "--repeat", REPEAT]
            if measure.target is not None:
                argv += ["--target", f"{measure.target.metric}:{measure.target.value:g}"]
        return argv

    # ------------------------------------------------------------------------------------------- parsing
    # Our own format: ``:::DLPERF {json}`` lines on rank 0 (dlperf_slurm.events: header, step, memory, summary,
    # error). The header's window and global batch are what the workload really ran; they win over the context's
    # when present.

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        seen = _Seen(ctx)
        facts = lp.Scanner(lambda text, rank, final: lp.NOT_MINE, needles=(), on_event=seen.on_event).run(lines)
        w = seen.window()
        h = seen.header or {}
        said = h.get(ev.GLOBAL_BATCH)
        gb = said if lp.finite(said) and said > 0 else None
        summ = seen.summary or {}
        reported = lp.to_float(summ.get(ev.THROUGHPUT))
        res = lp.finish(w, facts, ctx, global_batch=gb, tiny=seen.tiny,
                        no_memory_reason=ev.CPU_MEMORY_REASON if h.get(ev.DEVICE) == ev.DEVICE_CPU
                        else "no memory event in the log", extra=_extra(h, summ, reported, w, gb, ctx))
        if res.throughput is not None and reported and abs(res.throughput / reported - 1) > 1e-3:
            # the workload's own summary disagrees with its step lines (lost lines, another window): say so
            res.extra["reported_mismatch"] = (f"the workload's summary says {reported:.2f}, "
                                              f"its step lines {res.throughput:.2f}")
        if res.status == Status.OK:  # the step lines were lost, but the summary or an error event says so
            flagged = [e.get(ev.STEP) for e in facts.errors if e.get(ev.KIND) == ev.KIND_NONFINITE_LOSS]
            if flagged or summ.get(ev.NONFINITE_LOSS) is True:
                res.status, res.loss_finite = Status.NONFINITE, False
                res.reason = "the workload reports a non-finite loss" + (f" at step {flagged[0]}" if flagged else "")
        if seen.evals or h.get(ev.EPOCHS):
            res.extra.update(accuracy.extra(seen.evals, first_step_time=seen.first_step_time,
                                            epochs=h.get(ev.EPOCHS), target=h.get(ev.TARGET)))
        injected = h.get(ev.NAN_AT_STEP)
        if isinstance(injected, int) and not isinstance(injected, bool) and injected > 0:
            res.extra[ev.NAN_AT_STEP] = injected
            if res.status == Status.NONFINITE:
                res.reason += f" (made NaN on purpose from step {injected}: --nan-at-step)"
        return res


def _extra(h: dict[str, Any], summ: dict[str, Any], reported: float | None, w: lp.Window, gb: Any,
           ctx: ParseContext) -> dict[str, Any]:
    """The run's extra from the header (its settings; where its window and global batch differ from the matrix's)
    and the summary (the workload's own throughput, TFLOP/s and MFU)."""
    extra: dict[str, Any] = {}
    if h:
        for key in _HEADER_EXTRA:
            if key in h:
                extra[key] = h[key]
        if gb is not None and gb != ctx.global_batch:
            extra["global_batch_mismatch"] = f"log {gb}, matrix {ctx.global_batch}"
        if (h.get(ev.WARMUP_STEPS), h.get(ev.MEASURE_STEPS)) != (ctx.warmup_steps, ctx.measure_steps):
            extra["window_from_log"] = f"{w.warmup}+{w.measure} (matrix {ctx.warmup_steps}+{ctx.measure_steps})"
    if reported is not None:
        extra["reported_throughput"] = reported
    for key in (ev.TFLOPS, ev.MFU):
        v = lp.to_float(summ.get(key))
        if v is not None:
            extra[key] = v
    return extra


class _Seen:
    """What the parser keeps of a log's events (:meth:`on_event` reads each)."""

    def __init__(self, ctx: ParseContext) -> None:
        self.ctx = ctx
        self.header: dict[str, Any] | None = None  # the first header event (before any step)
        self.summary: dict[str, Any] | None = None  # the last summary event
        self.tiny = False  # an event said tiny: true
        self._window: lp.Window | None = None  # the parsing Window, made at the first step (or at the end)
        self.evals: list[Any] = []  # accuracy.Evaluation of each eval event (accuracy runs)
        self.first_step_time: float | None = None  # the first step's time (the start of a time to target)

    def window(self) -> lp.Window:
        """The window the header states (what the workload really ran), else the context's."""
        if self._window is None:
            h = self.header or {}
            warm, meas = h.get(ev.WARMUP_STEPS), h.get(ev.MEASURE_STEPS)
            self._window = lp.Window(warm if isinstance(warm, int) else self.ctx.warmup_steps,
                                     meas if isinstance(meas, int) else self.ctx.measure_steps)
        return self._window

    def on_event(self, event: dict, rank: int | None) -> None:
        kind = event.get(ev.EVENT)
        if event.get(ev.TINY) is True:
            self.tiny = True
        if kind == ev.EV_HEADER:
            if self.header is None and self._window is None:
                self.header = event
        elif kind == ev.EV_STEP:
            step = event.get(ev.STEP)
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                return
            t = lp.to_float(event.get(ev.TIME))
            st = lp.to_float(event.get(ev.STEP_TIME))
            if step == 1 and t is not None and st is not None:
                self.first_step_time = t - st  # when training began: the first step's start
            self.window().add(step, t, speed=lp.to_float(event.get(ev.THROUGHPUT)),
                              loss=lp.to_float(event.get(ev.LOSS)),
                              span_from=step - 1 if st is not None else None, span_seconds=st)
        elif kind == ev.EV_SUMMARY:
            self.summary = event
        elif kind == ev.EV_EVAL:
            e = accuracy.evaluation(event)
            if e is not None:
                self.evals.append(e)


@register
class ResNet50(_PytorchDDP):
    model = "resnet50"
    description = "ResNet-50 v1.5, synthetic ImageNet-shaped data, SGD+momentum, DDP"
    sample_unit = "img/s"
    accuracy = True
    # num_classes: the classifier's width (0: the model's, 1000, tiny 10); its weights, gradients, momentum and
    # logits grow with it: `search --axis num_classes` finds the widest that fits, as InsightFace's "max num_classes"
    axes = {**_PytorchDDP.axes, "num_classes": ()}
    axis_defaults = {**_PytorchDDP.axis_defaults, "num_classes": 0}

    def drop_reason(self, cell):
        n = cell.param("num_classes", 0)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0 or n == 1:
            return f"{self.name}: num_classes must be an integer >= 2 (0: the model's own), got {n!r}"
        return super().drop_reason(cell)


@register
class BertBase(_PytorchDDP):
    model = "bert-base"
    description = "BERT-base pre-training (MLM+NSP), seq 128, synthetic tokens, AdamW, DDP"
    sample_unit = "seq/s"
