"""The GPT suites (megatron/gpt, deepspeed/gpt, oneflow/gpt): the parser on real lines of the real programs (each
fixture in tests/fixtures/real/<program>/<version>/ says where it comes from, in its SOURCE.toml and header), expected
figures computed from those lines; the parallel layout and its drop reasons; the programs' flags and the DeepSpeed
config."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.status import Status
from dlperf_slurm.suites import gpt, gpt_flops, gpt_log

REAL = Path(__file__).parent / "fixtures" / "real"


def _find(name: str) -> Path:
    """A real log of the corpus by its file name (tests/fixtures/real/<program>/<version>/)."""
    return next(REAL.rglob(name))

MEG, DS, OF = suites.get("megatron/gpt"), suites.get("deepspeed/gpt"), suites.get("oneflow/gpt")


def _parse(suite, name: str, nodes=1, gpus=1, bs=1, warmup=0, measure=1, precision="fp16"):
    path = _find(name)
    return suite.parse(lp.read_lines(path), ParseContext(nodes=nodes, gpus_per_node=gpus, batch_size=bs,
                                                         warmup_steps=warmup, measure_steps=measure,
                                                         precision=precision))


def _fields(name: str, pattern: str) -> list[tuple[str, ...]]:
    return re.findall(pattern, _find(name).read_text(), re.M)


# ------------------------------------------------------------------------------------------ Megatron-LM

def test_megatron_2024_line_with_its_own_tflops():
    rows = _fields("megatron_2024_tflops.excerpt.log", r"iteration\s+(\d+)/.*?\(ms\): (\S+) \| throughput per GPU "
                                                       r"\(TFLOP/s/GPU\): (\S+) \|.*global batch size:\s+(\d+)")
    res = _parse(MEG, "megatron_2024_tflops.excerpt.log", nodes=2, gpus=8, bs=1, warmup=10, measure=2)
    assert res.status == Status.OK, res.reason
    window = [(float(ms) / 1000, float(t), int(gb)) for it, ms, t, gb in rows if int(it) > 10]
    seconds = sum(s for s, _, _ in window)
    assert res.throughput == pytest.approx(128 * 2 / seconds)
    assert res.latency_ms == pytest.approx(1000 * seconds / 2)
    assert res.throughput_speed == pytest.approx(sum(gb / s for s, _, gb in window) / 2)
    x = res.extra
    assert x["format"] == "megatron" and x["reported_tflops_per_gpu_mean"] == pytest.approx((130.1 + 128.1) / 2)
    # the program's own FLOPs per sample: its TFLOP/s per GPU x 16 GPUs / the line's samples/s
    assert x["flops_per_sample"] == pytest.approx(sum(t * 1e12 * 16 / (gb / s) for s, t, gb in window) / 2)
    assert "the program's own" in x["flops_basis"] and res.loss_finite is True


def test_megatron_2025_six_digit_scientific_learning_rate_and_loss():
    res = _parse(MEG, "megatron_2025_lr6e.excerpt.log", gpus=4, bs=1, warmup=1, measure=1)
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(4 / 0.3703) and res.latency_ms == pytest.approx(370.3)


def test_megatron_fp16_interval_whose_iterations_were_all_skipped():
    """No "lm loss" field (every iteration of the interval skipped by the loss scaler): still a timed interval, the
    skipped iterations are counted, the loss is unknown (not non-finite)."""
    res = _parse(MEG, "megatron_fp16_skipped.excerpt.log", gpus=4, bs=1, warmup=0, measure=10)
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(4 * 10 / (10 * 0.3562))  # the interval's 10 iterations, 356.2 ms each
    assert res.extra["skipped_iterations"] == 10 and res.loss_finite is None
    assert res.window["start"] == 0  # recovered from the interval's span: there is no line at iteration 0


def test_megatron_pre_2024_lines_without_stamp():
    rows = {int(i): float(ms) for i, ms in _fields("megatron_2023_no_stamp.excerpt.log",
                                                    r"iteration\s+(\d+)/.*?\(ms\): (\S+) \|")}
    res = _parse(MEG, "megatron_2023_no_stamp.excerpt.log", nodes=16, gpus=8, bs=8, warmup=122, measure=3)
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(1024 * 3 / (sum(rows[i] for i in (123, 124, 125)) / 1000))
    # a missing stretch (126..181) is timed by the next line's interval only: no window across it
    gap = _parse(MEG, "megatron_2023_no_stamp.excerpt.log", nodes=16, gpus=8, bs=8, warmup=124, measure=60)
    assert gap.status == Status.OK and gap.window["steps"] == 184 - 124


def test_a_mixture_of_experts_without_the_programs_own_tflops_gets_no_dense_formula_figure():
    """The 2023 real log (no TFLOP/s field) read as it is, then with Megatron's arguments dump naming 8 experts in
    front of it (the dump's own line form, `  num_experts ....... 8`): the dense formula, which would count every
    expert, gives no FLOPs for the MoE run; the dense run keeps its formula figure."""
    text = _find("megatron_2023_no_stamp.excerpt.log").read_text()
    ctx = ParseContext(nodes=16, gpus_per_node=8, batch_size=8, warmup_steps=122, measure_steps=3, precision="fp16")
    dump = ("  num_layers ...................................... 40\n  hidden_size ..................................... "
            "5120\n  seq_length ...................................... 2048\n")
    dense = MEG.parse(lp.iter_text_lines(dump + text), ctx)
    assert dense.status == Status.OK and dense.extra["flops_per_sample"] > 0
    moe = MEG.parse(lp.iter_text_lines(dump + "  num_experts ..................................... 8\n" + text), ctx)
    assert moe.status == Status.OK and "flops_per_sample" not in moe.extra
    assert moe.extra["flops_basis"].startswith("none: a mixture of 8 experts")


@pytest.mark.parametrize("width", [80, 100, 120])
def test_megatron_records_a_paste_wrapped_are_refused_with_the_reason(tmp_path, width):
    """The real 2024 log re-flowed at WIDTH columns, as an issue or mail client wraps a paste: its records are not
    read as steps (no window is guessed from the pieces), and the run says why before what it quotes."""
    import textwrap

    from dlperf_slurm.collect import drive, gather

    text = _find("megatron_2024_tflops.excerpt.log").read_text()
    wrapped = "\n".join(piece for line in text.splitlines()
                        for piece in (textwrap.wrap(line, width) if "iteration" in line else [line]))
    ctx = ParseContext(nodes=2, gpus_per_node=8, batch_size=1, warmup_steps=10, measure_steps=2, precision="fp16")
    res = MEG.parse(lp.iter_text_lines(wrapped), ctx)
    assert res.throughput is None and res.extra["wrapped_records"] == 3
    assert res.reason.startswith("3 step records are wrapped over several lines")
    tree = tmp_path / "t" / "2n8g"
    tree.mkdir(parents=True)
    (tree / "megatron_gpt_b1_fp16_0.log").write_text(wrapped + "\n")
    (run,) = drive.collect([gather.runs_from_tree(tree.parent, "megatron/gpt", 10, 2, name="t")], jobs=1,
                           name="t").runs
    assert run.status == Status.UNRECOGNISED and run.reason.startswith("3 step records are wrapped"), run.reason


def test_deepspeed_timer_records_a_paste_wrapped_are_refused_with_the_reason():
    """DeepSpeed 0.19's real ThroughputTimer lines (this project's CPU run of the engine) re-flowed at 80 columns:
    the record's end (``MaxMemAllocated=...GB``) is lines later, so no step is read, and the reason says why."""
    import textwrap

    text = _find("deepspeed_0198_cpu_tiny.log").read_text()
    wrapped = "\n".join(piece for line in text.splitlines()
                        for piece in (textwrap.wrap(line, 80) if "SamplesPerSec" in line else [line]))
    ctx = ParseContext(nodes=1, gpus_per_node=2, batch_size=2, warmup_steps=3, measure_steps=5, precision="fp32")
    assert DS.parse(lp.iter_text_lines(text), ctx).status == Status.OK  # as the program wrote it
    res = DS.parse(lp.iter_text_lines(wrapped), ctx)
    assert res.throughput is None and res.extra["wrapped_records"] >= 1
    assert "step records are wrapped over several lines" in res.reason, res.reason


MB = Path(__file__).parent / "fixtures" / "real" / "Megatron-Bridge"


def test_megatron_bridge_step_time_line_gives_the_intervals_tflops():
    """Megatron-Bridge's log (NVIDIA/cloudai's tests; SOURCE.toml): its Step Time line's MODEL_TFLOP/s/GPU goes with
    the iteration line after it (which has no TFLOP/s field of its own), behind NeMo-Run's task prefix, the stamp
    to the second; one 50-iteration interval timed by the iteration line."""
    log = MB / "2025-12" / "megatron_bridge_fp8_mx.excerpt.log"
    ctx = ParseContext(nodes=1, gpus_per_node=8, batch_size=1, warmup_steps=0, measure_steps=50, precision="bf16")
    res = MEG.parse(lp.iter_text_lines(log.read_text()), ctx)
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(512 / 9.0890) and res.latency_ms == pytest.approx(9089.0)
    assert res.extra["reported_tflops_per_gpu_mean"] == 663.5
    assert res.extra["flops_per_sample"] == pytest.approx(663.5e12 * 8 / (512 / 9.0890))
    assert res.extra["flops_basis"].startswith("the program's own TFLOP/s per GPU")


def test_megatron_bridge_step_time_lines_before_model_tflops():
    """The form before 2025-11-07 ("TFLOP/s/GPU"), as Megatron-Bridge's own tutorial quotes four runs: each line
    gives the TFLOP/s the iteration line after it is read with."""
    lines = [line for line in (MB / "2025-10" / "step_time_lines.txt").read_text().splitlines()
             if line.startswith("Step Time")]
    got = []
    for line in lines:
        m = gpt_log._MB_STEP.search(line)
        assert m is not None, line
        got.append((float(m.group(1)), float(m.group(2))))
    assert got == [(11.65, 1158.1), (8.57, 1574.0), (8.63, 1562.8), (7.47, 1805.6)]


def test_neox_line_with_tflops_glued_to_its_unit_and_the_deepspeed_timer_beside_it():
    res = _parse(DS, "neox_deepspeed_glued_tflops.excerpt.log", gpus=1, bs=1, warmup=0, measure=34, precision="bf16")
    assert res.status == Status.OK, res.reason
    x = res.extra
    assert x["format"] == "megatron" and x["reported_tflops_per_gpu_mean"] == 112.9
    assert res.throughput == pytest.approx(7.799) and res.latency_ms == pytest.approx(4103.1)  # samples/sec x time
    assert x["flops_per_sample"] == pytest.approx(112.9e12 / 7.799)
    assert x["deepspeed_reported_samples_per_s_mean"] == pytest.approx(7.864669709950182)  # kept, not measured


# ------------------------------------------------------------------------------------------ DeepSpeed engine

def _stamps(name: str, pattern: str) -> dict[int, datetime]:
    return {int(step): datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f") for stamp, step in _fields(name, pattern)}


def test_deepspeed_0198_engine_lines_of_a_real_cpu_run():
    name = "deepspeed_0198_cpu_tiny.log"
    t = _stamps(name, r"^\[(\S+ \S+)\] \[INFO\] \[timer\.py:\d+:stop\] epoch=0/micro_step=\d+/global_step=(\d+),")
    curr = {int(s): float(c) for s, c in _fields(name, r"global_step=(\d+), RunningAvgSamplesPerSec=\S+, "
                                                       r"CurrSamplesPerSec=([^,]+),")}
    res = _parse(DS, name, gpus=2, bs=2, warmup=3, measure=5, precision="fp32")
    assert res.status == Status.OK, res.reason
    assert res.extra["format"] == "deepspeed" and res.extra["zero_stage"] == 1
    assert res.throughput == pytest.approx(4 * 5 / (t[8] - t[3]).total_seconds())  # train_batch_size 4 from the config dump
    assert res.throughput_speed == pytest.approx(sum(curr[s] for s in range(4, 9)) / 5)
    assert res.extra["engine_max_mem_allocated_gib"] == 0.38 and res.mem_allocator_mib is None  # CPU: no GPU memory


def test_deepspeed_before_07_running_mean_lines():
    t = _stamps("deepspeed_old_samplespersec.excerpt.log", r"^\[(\S+ \S+)\] \[INFO\] \[timer\.py:189:stop\] 0/(\d+),")
    res = _parse(DS, "deepspeed_old_samplespersec.excerpt.log", gpus=1, bs=8, warmup=40, measure=10)
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(8 * 10 / (t[50] - t[40]).total_seconds())
    assert "global_batch_basis" in res.extra  # no config dump in the excerpt: the matrix's batch x GPUs
    assert res.extra["reported_samples_per_s_mean"] == pytest.approx(83.73838805358588)


# ------------------------------------------------------------------------------------------ OneFlow

def test_oneflow_gpt_table_args_dump_and_nvidia_smi_memory():
    text = (REAL / "oneflow_gpt_pretrain.excerpt.log").read_text()
    rows = {int(b): (int(s), float(tp)) for b, s, tp in re.findall(r"^\| (\d+)\s+\| \d+\s+\| (\d+)\s+\| (\S+)",
                                                                    text, re.M)}
    res = _parse(OF, "oneflow_gpt_pretrain.excerpt.log", nodes=4, gpus=8, bs=8, warmup=10, measure=90)
    assert res.status == Status.OK, res.reason
    seconds = sum((rows[b][0] - rows[b - 10][0]) / rows[b][1] for b in range(20, 101, 10))
    assert res.throughput == pytest.approx(512 * 90 / seconds)
    assert res.throughput_speed == pytest.approx(sum(rows[b][1] for b in range(20, 101, 10)) / 9)
    assert res.mem_peak_mib == max(float(m) for m in re.findall(r"^\d+ %, (\d+) MiB$", text, re.M))
    dump = dict(re.findall(r"^  (\w+) \.+ (\S+)$", text, re.M))  # its own arguments: 24 x 2304, seq 2048
    s, l, h, v = (int(dump[k]) for k in ("seq_length", "num_layers", "hidden_size", "padded_vocab_size"))
    assert dump["checkpoint_activations"] == "True"
    assert res.extra["flops_per_sample"] == pytest.approx(96 * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)))
    assert res.extra["tokens_per_s"] == pytest.approx(res.throughput * s)


_LIBAI_LINE = r"iteration: (\d+)/\d+\s+consumed_samples: (\d+) .*?time: (\S+) s/iter.*?total_throughput: (\S+) samples/s"


def _libai_clock(name: str) -> dict[int, tuple[int, float, float]]:
    """1-based step -> (consumed samples, LiBai's timed seconds through it: mean s/iter x (step - 2), its
    total_throughput), from the fixture's lines."""
    return {int(i) + 1: (int(c), float(t) * (int(i) + 1 - 2), float(tp)) for i, c, t, tp in _fields(name, _LIBAI_LINE)}


def test_libai_lines_zero_based_iterations_and_the_step_timer_clock():
    res = _parse(OF, "libai_gpt2_npu.excerpt.log", gpus=1, bs=4, warmup=20, measure=80)
    assert res.status == Status.OK, res.reason
    assert res.extra["format"] == "libai" and res.steps_seen == 100  # "iteration: 99/10000" is the 100th
    clock = _libai_clock("libai_gpt2_npu.excerpt.log")
    # consumed samples 80 -> 400 over 80 iterations: 4 per iteration; LiBai's own timer from step 20 to 100
    assert res.throughput == pytest.approx((clock[100][0] - clock[20][0]) / (clock[100][1] - clock[20][1]))
    assert res.throughput_speed == pytest.approx(sum(clock[s][2] for s in (40, 60, 80, 100)) / 4)
    # the stamps (10:40:56 -> 10:51:22) agree to their second
    assert 4 * 80 / res.throughput == pytest.approx(10 * 60 + 26, abs=1.0)


def test_libai_on_cpu_two_ranks_times_a_window_inside_one_second():
    """The real program on CPU (the suite's argv, 1x2): every iteration's line falls in the same second, so only
    LiBai's own step timer can time the window; the first two iterations print no time (its timer skips them)."""
    name = "libai_cpu_dp2.excerpt.log"
    res = _parse(OF, name, gpus=2, bs=2, warmup=3, measure=6, precision="fp32")
    assert res.status == Status.OK, res.reason
    assert res.extra["format"] == "libai" and res.steps_seen == 9
    clock = _libai_clock(name)
    assert sorted(clock) == list(range(3, 10))  # steps 1 and 2: no time, no throughput
    stamps = set(re.findall(r"^\[(\S+ \S+) lb\.utils\.events\]", _find(name).read_text(), re.M))
    assert len(stamps) == 1  # one second: the stamps cannot time it
    gb = (clock[9][0] - clock[3][0]) / 6
    assert gb == 4  # micro batch 2 x 2 ranks
    assert res.throughput == pytest.approx(gb * 6 / (clock[9][1] - clock[3][1]))
    assert res.latency_ms == pytest.approx(1000 * (clock[9][1] - clock[3][1]) / 6)
    assert res.throughput_speed == pytest.approx(sum(clock[s][2] for s in range(4, 10)) / 6)
    # LiBai's own summary says the same: 7 timed iterations at the last line's mean
    overall = re.search(r"Overall training speed: (\d+) iterations in \S+ \((\S+) s / it\)", _find(name).read_text())
    assert int(overall.group(1)) == 9 - gpt_log.LIBAI_UNTIMED and float(overall.group(2)) * 7 == clock[9][1]


@pytest.mark.parametrize("suite", ["megatron/gpt", "deepspeed/gpt", "oneflow/gpt"])
def test_a_foreign_log_is_launch_failed(suite):
    res = suites.get(suite).parse(lp.read_lines(REAL / "pytorch_examples_rn50_2n8g.excerpt.log"),
                                  ParseContext(nodes=2, gpus_per_node=8, batch_size=8))
    assert res.status == Status.LAUNCH_FAILED and res.throughput is None


def test_an_iteration_line_cut_by_buffering_is_glued():
    line = _find("megatron_2025_lr6e.excerpt.log").read_text().splitlines()[-1]
    cut = line.index("| lm loss")
    text = "\n".join(_find("megatron_2025_lr6e.excerpt.log").read_text().splitlines()[:-1] + [line[:cut], line[cut:]])
    res = MEG.parse(lp.iter_text_lines(text), ParseContext(nodes=1, gpus_per_node=4, batch_size=1, warmup_steps=1,
                                                           measure_steps=1))
    assert res.status == Status.OK and res.throughput == pytest.approx(4 / 0.3703) and "garbled_lines" not in res.extra


def test_nan_iterations_make_the_run_nonfinite():
    line = _find("megatron_2025_lr6e.excerpt.log").read_text().splitlines()[-1]
    bad = line.replace("number of nan iterations:   0", "number of nan iterations:   1")
    res = MEG.parse(lp.iter_text_lines(line + "\n" + bad.replace("iteration        2/", "iteration        3/")),
                    ParseContext(nodes=1, gpus_per_node=4, batch_size=1, warmup_steps=1, measure_steps=1))
    assert res.status == Status.NONFINITE


# ------------------------------------------------------------------------------------------ layout

def _cell(suite, devices="1x8", bs=8, precision="fp16", **params) -> Cell:
    n, g = (int(v) for v in devices.split("x"))
    full = {**suite.axis_defaults, **params}
    return Cell(suite=suite.name, model="gpt", framework=suite.framework, nodes=n, gpus_per_node=g, batch_size=bs,
                precision=precision, xla=False, launcher=suite.launcher, params=tuple(sorted(full.items())))


@pytest.mark.parametrize("params,why", [
    ({"tensor_parallel": 3}, "not a multiple of tensor_parallel x pipeline_parallel = 3 x 1 = 3"),
    ({"tensor_parallel": 2, "pipeline_parallel": 8}, "are not a multiple"),
    ({"model_size": "24x2304x12", "tensor_parallel": 8}, "12 heads over hidden 2304 cannot be split over tensor_parallel 8"),
    ({"model_size": "16x1536x16", "pipeline_parallel": 8, "tensor_parallel": 1}, None),
    ({"model_size": "24x1024x16", "pipeline_parallel": 16}, "GPUs"),
    ({"model_size": "1.3B", "global_batch": 100}, "not a multiple of micro batch 8 x data-parallel size 8"),
    ({"model_size": "huge"}, "no preset"),
])
def test_drop_reasons(params, why):
    reason = MEG.drop_reason(_cell(MEG, **params))
    assert (reason is None) if why is None else (why in reason), reason


@pytest.mark.parametrize("params, why", [  # 1 node x 8 GPUs, micro batch 8 (_cell), Megatron-LM's own checks
    ({"context_parallel": 2, "seq_length": 4096}, None),
    ({"context_parallel": 3}, "tensor_parallel x pipeline_parallel x context_parallel = 1 x 1 x 3 = 3"),
    ({"context_parallel": 2, "seq_length": 4098}, "seq_length 4098 is not a multiple of 2 x context_parallel = 4"),
    ({"pipeline_parallel": 2, "virtual_pipeline": 2, "global_batch": 128}, None),
    ({"pipeline_parallel": 2, "virtual_pipeline": 5, "global_batch": 128},
     "24 layers cannot be split into pipeline_parallel x virtual_pipeline = 2 x 5 = 10 stages"),
    ({"pipeline_parallel": 2, "virtual_pipeline": 2}, "micro batches of a step (1: global_batch"),
    ({"pipeline_parallel": 4, "virtual_pipeline": 2, "global_batch": 96}, "(6: global_batch"),
    ({"virtual_pipeline": 2}, "virtual_pipeline > 1 (2) needs pipeline_parallel > 1"),
    ({"expert_parallel": 2}, "expert_parallel > 1 (2) needs num_experts > 0"),
    ({"num_experts": 8, "expert_parallel": 8}, None),
    ({"num_experts": 6, "expert_parallel": 4}, "num_experts 6 is not a multiple of expert_parallel 4"),
    ({"num_experts": 8, "expert_parallel": 8, "tensor_parallel": 4},
     "tensor_parallel x expert_parallel x pipeline_parallel = 4 x 8 x 1 = 32"),
    ({"context_parallel": "two"}, "must be integers"),
    ({"virtual_pipeline": 0}, "must be >= 1"),
])
def test_megatron_context_virtual_pipeline_and_expert_layouts_are_checked_before_submission(params, why):
    reason = MEG.drop_reason(_cell(MEG, **params))
    assert (reason is None) if why is None else (why in reason), reason


def test_megatron_flags_of_the_llm_axes_and_the_data_parallel_size_they_leave():
    cell = _cell(MEG, "4x8", bs=1, model_size="24x2048x16", tensor_parallel=2, pipeline_parallel=2,
                 virtual_pipeline=2, context_parallel=2, num_experts=8, expert_parallel=4, seq_length=4096,
                 global_batch=64)
    assert MEG.drop_reason(cell) is None
    lay = MEG.layout(cell)
    assert (lay["dp"], lay["accumulation"]) == (32 // 8, 64 // 4)  # GPUs / (tp x pp x cp); global / (micro x dp)
    argv = " ".join(MEG.program(cell, Measure(), MEG.options))
    for want in ("--context-parallel-size 2", "--num-virtual-stages-per-pipeline-rank 2", "--num-experts 8",
                 "--expert-model-parallel-size 4", "--global-batch-size 64"):
        assert want in argv, want
    assert "--log-energy" not in argv and "--log-energy" in MEG.program(cell, Measure(), {**MEG.options,
                                                                                          "log_energy": True})
    plain = " ".join(MEG.program(_cell(MEG), Measure(), MEG.options))  # the defaults add no flag: older builds run
    assert not any(f in plain for f in ("--context-parallel", "--num-virtual", "--num-experts", "--expert-model"))
    assert MEG.global_batch(_cell(MEG, context_parallel=2)) == 8 * 4  # micro 8 x dp (8 GPUs / cp 2)


def test_the_llm_axes_are_megatrons_only():
    assert {"context_parallel", "virtual_pipeline", "num_experts", "expert_parallel"} <= set(MEG.axes)
    assert not {"context_parallel", "virtual_pipeline", "num_experts", "expert_parallel"} & (set(DS.axes) | set(OF.axes))


def test_zero_2_with_pipeline_and_selective_on_libai_are_dropped():
    assert "ZeRO stage 0 or 1" in DS.drop_reason(_cell(DS, zero_stage=2, pipeline_parallel=2))
    assert "full or none" in OF.drop_reason(_cell(OF, activation_checkpointing="selective"))
    assert "precision 'bf16'" in OF.drop_reason(_cell(OF, precision="bf16"))


def test_megatron_flags_for_dlperfs_four_node_case():
    cell = _cell(MEG, "4x8", model_size="24x2304x24", tensor_parallel=4, pipeline_parallel=4, global_batch=512)
    argv = MEG.program(cell, Measure(warmup_steps=30, measure_steps=100), MEG.options)
    joined = " ".join(argv)
    for want in ("--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 4", "--num-layers 24",
                 "--hidden-size 2304", "--num-attention-heads 24", "--seq-length 2048", "--micro-batch-size 8",
                 "--global-batch-size 512", "--train-iters 130", "--log-interval 1", "--fp16",
                 "--recompute-granularity full", "--log-throughput"):
        assert want in joined, want
    assert MEG.layout(cell)["accumulation"] == 512 // (8 * 2)
    mock = MEG.program(cell, Measure(), {**MEG.options, "data_path": ""})
    assert "--mock-data" in mock and "--data-path" not in mock


def test_deepspeed_config_and_flags():
    cell = _cell(DS, "2x8", bs=4, zero_stage=2, global_batch=256)
    cfg = json.loads(DS.files(cell, Measure(), DS.options)["ds_config.json"])
    assert cfg["train_batch_size"] == 256 and cfg["train_micro_batch_size_per_gpu"] == 4
    assert cfg["gradient_accumulation_steps"] == 256 // (4 * 16) and cfg["zero_optimization"] == {"stage": 2}
    assert cfg["steps_per_print"] == 1 and cfg["log_level"] == "info" and cfg["fp16"]["enabled"] is True
    argv = DS.program(cell, Measure(), DS.options)
    assert argv[-5:] == ["--deepspeed", "--deepspeed_config", "{run_dir}/ds_config.json", "--zero-stage", "2"]
    assert "--checkpoint-activations" in argv and "--no-pipeline-parallel" in argv


def test_libai_overrides():
    cell = _cell(OF, "2x8", model_size="2.7B", tensor_parallel=2, pipeline_parallel=2, activation_checkpointing="none")
    argv = OF.program(cell, Measure(warmup_steps=2, measure_steps=3), OF.options)
    over = dict(a.split("=", 1) for a in argv[4:])
    layers, hidden, heads = gpt.PRESETS["2.7B"]
    # LiBai's GPT config key for the depth is hidden_layers (num_layers would be a new, ignored key)
    assert over["model.cfg.hidden_layers"] == str(layers) and over["model.cfg.hidden_size"] == str(hidden)
    assert "model.cfg.num_layers" not in over
    assert over["train.dist.data_parallel_size"] == "4" and over["train.train_iter"] == "5"
    assert over["train.amp.enabled"] == "True" and over["train.activation_checkpoint.enabled"] == "False"
    assert over["train.output_dir"] == "{run_dir}" and over["train.log_period"] == "1"
    # the data sets get the model's sequence and the data (gpt2_pretrain.py copied its own at load time; the test
    # loader is built even with evaluation off)
    seq = over["model.cfg.max_seq_length"]
    assert over["dataloader.train.dataset.0.max_seq_length"] == seq == over["dataloader.test.0.dataset.max_seq_length"]
    prefix = OF.options["data_prefix"]
    assert {over[f"dataloader.{d}.{p}data_prefix"] for d in ("train.dataset.0", "test.0.dataset")
            for p in ("", "indexed_dataset.")} == {prefix}
    assert over["train.dist.device_type"] == "cuda" and not any(k.endswith("_fusion") for k in over)


def test_libai_on_cpu_turns_the_fused_cuda_ops_off_and_takes_more_overrides():
    cell = _cell(OF, "1x2", bs=2, precision="fp32", model_size="2x64x4", seq_length=32, activation_checkpointing="none")
    opts = {**OF.options, "device": "cpu", "overrides": "graph.enabled=False 'train.seed=7'"}
    argv = OF.program(cell, Measure(warmup_steps=3, measure_steps=6), opts)
    over = dict(a.split("=", 1) for a in argv[4:])
    assert over["train.dist.device_type"] == "cpu"
    assert {k: v for k, v in over.items() if k.endswith("_fusion")} == {
        "model.cfg.scale_mask_softmax_fusion": "False", "model.cfg.bias_gelu_fusion": "False",
        "model.cfg.bias_dropout_fusion": "False"}
    assert argv[-2:] == ["graph.enabled=False", "train.seed=7"]  # after the suite's: LiBai applies them last
    assert OF.option_error("device", "tpu") and OF.option_error("device", "cpu") is None
    assert OF.option_error("overrides", "graph.enabled") and OF.option_error("overrides", "a='b") is not None
    assert OF.option_error("overrides", "graph.enabled=False") is None


def test_the_flops_formula_is_the_papers():
    # Narayanan et al. 2021 eq. 3 per sample: 96 s l h^2 (1 + s/6h + V/16lh) with recomputation
    assert gpt_flops.flops_per_sample(2048, 24, 2304, 50688, True) == pytest.approx(
        96 * 2048 * 24 * 2304 ** 2 * (1 + 2048 / (6 * 2304) + 50688 / (16 * 24 * 2304)))
    assert gpt_flops.flops_per_sample(1024, 24, 1024, 50304, False) == pytest.approx(
        gpt_flops.flops_per_sample(1024, 24, 1024, 50304, True) * 3 / 4)


@pytest.mark.parametrize("suite", [MEG, DS], ids=["megatron", "deepspeed"])
def test_under_srun_each_task_gets_its_rank_from_slurm(suite, tmp_path):
    """srun starts one task per GPU; the program's env:// rendezvous reads RANK/LOCAL_RANK/WORLD_SIZE, which the
    suite's wrapper sets from the task's Slurm variables (run here with bash for real)."""
    cell = Cell(**{**_cell(suite, "2x4").__dict__, "launcher": "srun"})
    argv = suite.program(cell, Measure(), suite.options)
    assert argv[:4] == ["bash", "-c", suites.SRUN_RANKS, "dlperf"] and argv[5].endswith("pretrain_gpt.py")
    probe = [*argv[:4], sys.executable, "-c", "import os; print(os.environ['RANK'], os.environ['LOCAL_RANK'], "
                                              "os.environ['WORLD_SIZE'])"]
    env = {**os.environ, "SLURM_PROCID": "6", "SLURM_LOCALID": "2", "SLURM_NTASKS": "8"}
    assert subprocess.run(probe, env=env, capture_output=True, text=True, check=True).stdout.split() == ["6", "2", "8"]
    assert suite.program(_cell(suite, "2x4"), Measure(), suite.options)[0] == "python3"  # its own launcher: as is


def test_megatron_deepspeed_line_from_the_last_rank_memory_lines_and_an_oom_kill():
    """Megatron prints its iteration line on the last rank (label 3 under srun -l): it is read; the ranks' Megatron
    memory reports give the allocator's peak; the cgroup OOM kill makes the run OOM."""
    res = _parse(DS, "megatron_deepspeed_srun_oom.excerpt.log", gpus=4, bs=4, warmup=0, measure=1)
    assert res.status == Status.OOM and "oom_kill" in res.reason
    assert res.throughput == pytest.approx(32 / 31.5917)  # global batch / the interval: the printed 1.013 samples/s
    text = _find("megatron_deepspeed_srun_oom.excerpt.log").read_text()
    assert res.mem_allocator_mib == max(float(v) for v in re.findall(r"max allocated: (\S+) \|", text))
    assert res.extra["mem_reserved_mib"] == max(float(v) for v in re.findall(r"max reserved: (\S+)$", text, re.M))
    assert res.extra["ranks_seen"] == 3


def test_megatron_deepspeed_unwrapped_line_samples_per_second_and_tflops():
    """Megatron-DeepSpeed's own figures on a real unwrapped iteration line (argonne-lcf ALCF/README.md), beside the
    DeepSpeed engine's timer lines: its "samples per second" and "TFLOPs" (per GPU) are read in the window, and the
    interval's clock (its elapsed ms) gives the same samples/s as the program printed."""
    name = "megatron_deepspeed_alcf_tgs.excerpt.log"
    rows = _fields(name, r"^iteration\s+(\d+)/.*?\(ms\): (\S+) \|.*global batch size:\s+(\d+) \|.*actual seqlen:\s+(\d+) "
                         r"\|.*samples per second: (\S+) \| tokens per gpu per second \(tgs\): (\S+) \| TFLOPs: (\S+) \|$")
    assert [int(r[0]) for r in rows] == [199, 200]
    it, ms, gb, seq, sps, tgs, tflops = rows[1]
    world = round(float(sps) * int(seq) / float(tgs))  # the line's own tokens per GPU per second give the GPUs
    res = _parse(DS, name, nodes=world // 4, gpus=4, bs=8, warmup=199, measure=1)
    assert res.status == Status.OK, res.reason
    x = res.extra
    assert x["format"] == "megatron" and res.window["steps"] == 1
    assert x["reported_samples_per_s_mean"] == float(sps) and x["reported_tflops_per_gpu_mean"] == float(tflops)
    assert res.throughput == pytest.approx(int(gb) / (float(ms) / 1000)) == pytest.approx(float(sps), rel=1e-4)
    assert x["flops_per_sample"] == pytest.approx(float(tflops) * 1e12 * world / float(sps))
    # the program's TFLOPs agree with the paper's formula for its model (32 x 4096, seq 4096, full recomputation)
    # with the Llama tokenizer's 32000 tokens (ALCF's train_llama_alcf_*.sh): a check of the GPUs, not a figure
    assert x["flops_per_sample"] == pytest.approx(gpt_flops.flops_per_sample(int(seq), 32, 4096, 32000, True), rel=1e-3)
    # the DeepSpeed engine's own figure of the same step (its running mean) is kept beside it, not mixed in
    engine = {int(st): float(v) for st, v in _fields(name, r"global_step=(\d+), RunningAvgSamplesPerSec=(\S+),")}
    assert x["deepspeed_reported_samples_per_s_mean"] == engine[200]
    assert x["engine_max_mem_allocated_gib"] == 19.52


def test_bigscience_fork_elapsed_time_in_seconds():
    """bigscience-workshop's Megatron-DeepSpeed (BLOOM-176B, real lines behind torchrun's [default7] label) prints
    the iteration time in seconds, "(s): 106.46": the clock takes it as seconds, and its own figures are read."""
    name = "bigscience_bloom176b_seconds.excerpt.log"
    rows = [(int(i), float(sec), int(gb), float(sps), float(t)) for i, sec, gb, sps, t in _fields(
        name, r"iteration\s+(\d+)/.*?iteration \(s\): (\S+) \|.*global batch size:\s+(\d+) \|"
              r".*samples per second: (\S+) \| TFLOPs: (\S+) \|$")]
    first, window = rows[0][0], rows[1:]
    res = _parse(DS, name, nodes=48, gpus=8, bs=2, warmup=first, measure=len(window), precision="bf16")
    assert res.status == Status.OK, res.reason
    seconds = sum(sec for _, sec, _, _, _ in window)
    assert res.window["seconds"] == pytest.approx(seconds)
    assert res.throughput == pytest.approx(sum(gb for _, _, gb, _, _ in window) / seconds)
    assert res.latency_ms == pytest.approx(1000 * seconds / len(window))
    assert res.extra["reported_samples_per_s_mean"] == pytest.approx(sum(r[3] for r in window) / len(window))
    assert res.extra["reported_tflops_per_gpu_mean"] == pytest.approx(sum(r[4] for r in window) / len(window))
    # the printed samples/s is the global batch over the printed seconds (to their 2 decimals)
    assert all(sps == pytest.approx(gb / sec, rel=2e-3) for _, sec, gb, sps, _ in rows)
    assert res.loss_finite is True  # a loss spike (5.10), not a NaN


def test_mfu_inputs_from_the_gpus_the_job_saw_and_the_model_in_its_command():
    """The job's provenance line (written by every job script: nvidia-smi's GPUs, the launch command) gives the peak
    and, with no arguments dump in the log, the model's size: cells turns flops_per_sample and peak_tflops_per_gpu
    into TFLOP/s per GPU and MFU. Here beside the real Megatron lines of a 2024 build (issue #756)."""
    from dlperf_slurm import events as ev
    from dlperf_slurm.collect.cells import _compute_rate
    from dlperf_slurm.workloads.peaks import peak_tflops

    job = ev.format_line(ev.EV_JOB, **{ev.GPUS: ["0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 1980 MHz"],
                                       ev.COMMAND: "torchrun ... pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                                                   "--seq-length 4096 --recompute-granularity full"})
    text = job + "\n" + _find("megatron_2024_tflops.excerpt.log").read_text()
    res = MEG.parse(lp.iter_text_lines(text), ParseContext(nodes=2, gpus_per_node=8, batch_size=1, warmup_steps=10,
                                                           measure_steps=2, precision="bf16"))
    assert res.status == Status.OK, res.reason
    x = res.extra
    assert x["peak_tflops_per_gpu"] == peak_tflops("H100", "16bit") and x["tokens_per_s"] == res.throughput * 4096
    rate = _compute_rate(res.throughput, 16, [x])
    # the program's own TFLOP/s per GPU comes back out (its FLOPs per sample were derived from it)
    assert rate["tflops_per_gpu"] == pytest.approx(x["reported_tflops_per_gpu_mean"], rel=0.02)
    assert rate["mfu"] == pytest.approx(rate["tflops_per_gpu"] / peak_tflops("H100", "16bit"))
    # without the program's own figure, the paper's formula on the command's model (f = 4: full recomputation)
    plain = re.sub(r" throughput per GPU \(TFLOP/s/GPU\): \S+ \|", "", text)
    res = MEG.parse(lp.iter_text_lines(plain), ParseContext(nodes=2, gpus_per_node=8, batch_size=1, warmup_steps=10,
                                                            measure_steps=2, precision="bf16"))
    assert res.extra["flops_per_sample"] == pytest.approx(gpt_flops.flops_per_sample(4096, 32, 4096, 50304, True))


@pytest.mark.parametrize("name", ["megatron-gpt", "deepspeed-gpt", "oneflow-gpt"])
def test_global_batch_is_the_batch_the_program_is_given(name):
    # issue 20.6: with tensor/pipeline parallelism the global batch is not GPUs x batch per GPU (a tp8 cell of
    # micro batch 8 gives the program 8, not 64): plan, the summaries and the parse all take the program's figure
    from dlperf_slurm.matrix import loader as matrix_mod

    m = matrix_mod.load(Path(__file__).parents[1] / "matrices" / f"{name}.toml", site=False)
    suite = m.suites[0]
    parallel = 0
    for cell in m.cells:
        if suite is DS:
            given = json.loads(DS.files(cell, m.measure, m.options_for(cell))["ds_config.json"])["train_batch_size"]
        else:
            argv = suite.program(cell, m.measure, {**suite.options, **m.options_for(cell)})
            if suite is MEG:
                given = int(argv[argv.index("--global-batch-size") + 1])
            else:
                given = int(dict(a.split("=", 1) for a in argv if "=" in a)["train.global_batch_size"])
        assert cell.global_batch == given, cell.id
        assert cell.as_dict()["global_batch"] == given and Cell.from_dict(cell.as_dict()).global_batch == given
        parallel += int(cell.param("tensor_parallel", 1)) * int(cell.param("pipeline_parallel", 1)) > 1
    assert parallel, "the matrix has no tensor/pipeline-parallel cell"
