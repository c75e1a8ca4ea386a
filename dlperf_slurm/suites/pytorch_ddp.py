"""``pytorch-ddp``: our built-in PyTorch reference workloads (``dlperf_slurm.workloads``), runnable anywhere.

Launch spec and parser side by side; the log is our own ``:::DLPERF {json}`` line format.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dlperf_slurm.suites import ParseContext, RunResult, Status, Suite, register

CPU_REASON = "no CUDA device (CPU run): GPU memory not measured"


class _PytorchDDP(Suite):
    framework = "pytorch-ddp"
    launcher = "torchrun"
    launchers = ("torchrun", "srun", "mpirun")
    precisions = ("fp32", "amp", "fp16", "bf16")
    supports_xla = True
    xla_name = "torch.compile"
    axes = {"data_location": ("device", "host")}
    axis_defaults = {"data_location": "device"}
    options = {"tiny": False, "threads": 0, "python": "python3", "seed": 0}

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
        return argv

    # ------------------------------------------------------------------------------------------- parsing
    # Our own format: ``:::DLPERF {json}`` lines on rank 0 (header, step, memory, summary, error). The header's
    # window and global batch are what the workload really ran; they win over the context's when present.

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        from dlperf_slurm import logparse as lp

        state: dict[str, Any] = {"header": None, "summary": None, "tiny": False, "window": None}

        def window() -> lp.Window:
            if state["window"] is None:
                h = state["header"] or {}
                warm = h.get("warmup_steps") if isinstance(h.get("warmup_steps"), int) else ctx.warmup_steps
                meas = h.get("measure_steps") if isinstance(h.get("measure_steps"), int) else ctx.measure_steps
                state["window"] = lp.Window(warm, meas)
            return state["window"]

        def on_event(ev: dict, rank: int | None) -> None:
            kind = ev.get("event")
            if ev.get("tiny") is True:
                state["tiny"] = True
            if kind == "header":
                if state["header"] is None and state["window"] is None:
                    state["header"] = ev
            elif kind == "step":
                step = ev.get("step")
                if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                    return
                t = lp.to_float(ev.get("time"))
                st = lp.to_float(ev.get("step_time"))
                window().add(step, t, speed=lp.to_float(ev.get("throughput")), loss=lp.to_float(ev.get("loss")),
                             span_from=step - 1 if st is not None else None, span_seconds=st)
            elif kind == "summary":
                state["summary"] = ev

        facts = lp.Scanner(lambda text, rank, final: lp.NOT_MINE, needles=(), on_event=on_event).run(lines)
        w = window()
        h = state["header"] or {}
        gb = h.get("global_batch") if lp.finite(h.get("global_batch")) and h.get("global_batch") > 0 else None
        extra: dict[str, Any] = {}
        if h:
            for key in ("world_size", "device", "device_name", "precision", "compile", "launcher", "versions",
                        "flops_per_sample", "peak_tflops_per_gpu", "params"):
                if key in h:
                    extra[key] = h[key]
            if gb is not None and gb != ctx.global_batch:
                extra["global_batch_mismatch"] = f"log {gb}, matrix {ctx.global_batch}"
            if (h.get("warmup_steps"), h.get("measure_steps")) != (ctx.warmup_steps, ctx.measure_steps):
                extra["window_from_log"] = f"{w.warmup}+{w.measure} (matrix {ctx.warmup_steps}+{ctx.measure_steps})"
        summ = state["summary"] or {}
        for key in ("throughput", "tflops", "mfu"):
            v = lp.to_float(summ.get(key))
            if v is not None and (key != "throughput"):
                extra[key] = v
            elif key == "throughput" and v is not None:
                extra["reported_throughput"] = v
        device = h.get("device")
        res = lp.finish(w, facts, ctx, global_batch=gb, tiny=state["tiny"],
                        no_memory_reason=CPU_REASON if device == "cpu" else "no memory event in the log",
                        extra=extra)
        rep = extra.get("reported_throughput")
        if res.throughput is not None and rep and abs(res.throughput / rep - 1) > 1e-3:
            # the workload's own summary disagrees with its step lines (lost lines, another window): say so
            res.extra["reported_mismatch"] = f"the workload's summary says {rep:.2f}, its step lines {res.throughput:.2f}"
        if res.status == Status.OK:  # the step lines were lost, but the summary or an error event says so
            flagged = [ev.get("step") for ev in facts.errors if ev.get("kind") == "nonfinite_loss"]
            if flagged or summ.get("nonfinite_loss") is True:
                res.status, res.loss_finite = Status.NONFINITE, False
                res.reason = "the workload reports a non-finite loss" + (f" at step {flagged[0]}" if flagged else "")
        return res


@register
class ResNet50(_PytorchDDP):
    model = "resnet50"
    description = "ResNet-50 v1.5, synthetic ImageNet-shaped data, SGD+momentum, DDP"
    sample_unit = "img/s"


@register
class BertBase(_PytorchDDP):
    model = "bert-base"
    description = "BERT-base pre-training (MLM+NSP), seq 128, synthetic tokens, AdamW, DDP"
    sample_unit = "seq/s"
