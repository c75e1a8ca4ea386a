"""The model FLOPs of a GPT suite's run (``flops_per_sample`` in its extra, which ``cells`` turns into TFLOP/s per GPU
and MFU), as :mod:`.gpt_log` describes them: the program's own TFLOP/s per GPU where its log prints it, else
Narayanan et al. 2021 (eq. 3) over the model's size, from the log's arguments dump else the launch command's flags.
"""

from __future__ import annotations

import re
from typing import Any

from dlperf_slurm import events as ev
from dlperf_slurm.words import plural
from dlperf_slurm.model.result import ParseContext, RunResult

_FLAGS = {"num_layers": r"--num-layers[ =](\d+)|model\.cfg\.hidden_layers=(\d+)",  # LiBai: hidden_layers
          "hidden_size": r"--hidden-size[ =](\d+)|model\.cfg\.hidden_size=(\d+)",
          "seq_length": r"--seq-length[ =](\d+)|model\.cfg\.max_seq_length=(\d+)",
          "vocab_size": r"--vocab-size[ =](\d+)|model\.cfg\.vocab_size=(\d+)",
          "tensor_model_parallel_size": r"--tensor-model-parallel-size[ =](\d+)"
                                        r"|train\.dist\.tensor_parallel_size=(\d+)"}
_FULL_RECOMPUTE = re.compile(r"--checkpoint-activations\b|--recompute-granularity[ =]full\b"
                             r"|train\.activation_checkpoint\.enabled=True\b")
GPT2_VOCAB = 50257  # the GPT-2 BPE vocabulary, Megatron's default tokenizer's


def as_int(v: Any) -> int | None:
    """An arguments dump's value as an int, None where it is none."""
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def model_size(dump: dict[str, str], command: str) -> dict[str, Any]:
    """The model's size and recomputation: the log's arguments dump first, then the launch command's flags."""
    size: dict[str, Any] = {}
    for key, pattern in _FLAGS.items():
        v = as_int(dump.get(key))
        if v is None:
            m = re.search(pattern, command)
            v = int(m.group(1) or m.group(2)) if m else None
        if v is not None:
            size[key] = v
    if "padded_vocab_size" in dump and as_int(dump["padded_vocab_size"]):
        size["vocab_size"] = as_int(dump["padded_vocab_size"])
    if "checkpoint_activations" in dump or "recompute_granularity" in dump:
        size["full_recompute"] = (dump.get("checkpoint_activations") == "True"
                                  or dump.get("recompute_granularity") == "full")
    else:
        size["full_recompute"] = bool(_FULL_RECOMPUTE.search(command))
    return size


def _experts(command: str) -> int | None:
    m = re.search(r"--num-experts[ =](\d+)", command)
    return int(m.group(1)) or None if m else None


def flops_per_sample(seq: int, layers: int, hidden: int, vocab: int, full_recompute: bool) -> float:
    """Narayanan et al. 2021, eq. 3, per sample: 24 f s l h^2 (1 + s/(6h) + V/(16 l h)), f = 4 with full
    recomputation else 3."""
    f = 4 if full_recompute else 3
    return 24.0 * f * seq * layers * hidden ** 2 * (1 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))


def _gpu_name(job: dict[str, Any] | None) -> str | None:
    gpus = (job or {}).get(ev.GPUS)
    if isinstance(gpus, list) and gpus:
        parts = [p.strip() for p in str(gpus[0]).split(",")]
        return parts[1] if len(parts) > 1 else None
    return None


def model_flops(x: dict[str, Any], res: RunResult, tflops: list[tuple[float, float]], dump: dict[str, str],
                job: dict[str, Any] | None, ctx: ParseContext) -> str | None:
    """The run's tokens/s and model FLOPs into its extra ``x``: from the program's own TFLOP/s per GPU (``tflops``:
    those in the window, with their lines' samples/s), else from the model's size; and the peak of the job's GPU
    they are held against. Returns that GPU's name (None where the job event names none)."""
    from dlperf_slurm.workloads.peaks import peak_basis, peak_tflops

    size = model_size(dump, str((job or {}).get(ev.COMMAND) or ""))
    seq = size.get("seq_length")
    if seq and res.throughput is not None:
        x["tokens_per_s"] = res.throughput * seq
    if tflops:
        per = [t * 1e12 * ctx.world_size / s for t, s in tflops if t and s and t > 0 and s > 0]
        if per:
            x["flops_per_sample"] = sum(per) / len(per)
            x["flops_basis"] = "the program's own TFLOP/s per GPU x GPUs / its samples/s"
            x["reported_tflops_per_gpu_mean"] = sum(t for t, _ in tflops) / len(tflops)
    moe = as_int(dump.get("num_experts")) or _experts(str((job or {}).get(ev.COMMAND) or ""))
    if "flops_per_sample" not in x and moe:  # the dense formula counts every expert: no figure rather than a wrong one
        x["flops_basis"] = (f"none: a mixture of {plural(moe, 'expert')}, whose FLOPs the dense formula does not "
                            "give, and no TFLOP/s of the program's own in the window")
    elif "flops_per_sample" not in x and seq and size.get("num_layers") and size.get("hidden_size"):
        tp = size.get("tensor_model_parallel_size") or 1
        vocab = size.get("vocab_size") or -(-GPT2_VOCAB // (128 * tp)) * 128 * tp  # Megatron's padding
        x["flops_per_sample"] = flops_per_sample(seq, size["num_layers"], size["hidden_size"], vocab,
                                                 size["full_recompute"])
        x["flops_basis"] = ("24 f s l h^2 (1 + s/6h + V/16lh), Narayanan et al. 2021 eq. 3, f = "
                            f"{4 if size['full_recompute'] else 3} (s={seq}, l={size['num_layers']}, "
                            f"h={size['hidden_size']}, V={vocab})")
    gpu = _gpu_name(job)
    if gpu and "flops_per_sample" in x:
        peak = peak_tflops(gpu, peak_basis(ctx.precision, False))
        if peak:
            x["peak_tflops_per_gpu"], x["peak_basis"] = peak, f"{gpu}, {peak_basis(ctx.precision, False)}"
    return gpu
