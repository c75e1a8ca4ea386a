"""Parsers of every suite in this issue: real log excerpts, synthetic logs in each literal format (exact
figures), messy logs (rank labels, split records, bad bytes, truncation, kills, empty files), statuses, the
status combination with the scheduler, flat memory, and hypothesis fuzzing with random and mutated logs."""

from __future__ import annotations

import math
import random
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"
NGC_RN50_2N8G = REAL / "DeepLearningExamples" / "pytorch-20.03" / "ngc_pytorch_rn50_2n8g_r50_b128_fp32_5.excerpt.log"
DLLOGGER_EXAMPLE = REAL / "DeepLearningExamples" / "pytorch-2019-10" / "dllogger_example_resnet_log.json"
sys.path.insert(0, str(FIXTURES))
import logsynth as ls

ALL_STATUSES = set(Status)
CASES = [(suite, i) for suite, writers in ls.WRITERS.items() for i in range(len(writers))]
IDS = [f"{s}-{ls.WRITERS[s][i].__name__}" for s, i in CASES]


def parse(suite: str, text: str, ctx: ParseContext) -> RunResult:
    return suites.get(suite).parse(lp.iter_text_lines(text), ctx)


def ctx_of(spec: ls.Spec, **kw) -> ParseContext:
    return ParseContext(nodes=spec.nodes, gpus_per_node=spec.gpus, batch_size=spec.batch, warmup_steps=spec.warmup,
                        measure_steps=spec.measure,
                        options={"batches_per_iter": spec.bpi}, **kw)


def close(a: float | None, b: float | None, rel: float = 1e-9) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rel)


# ------------------------------------------------------------------------------------------ real excerpts


def test_real_ngc_pytorch_rn50_excerpt_hand_computed():
    """DLPerf README log (2n8g, bs128, world_size 16): window = end of iteration 2 -> end of iteration 12."""
    res = suites.get("ngc-pytorch/resnet50").parse(
        lp.read_lines(NGC_RN50_2N8G), ParseContext(nodes=2, gpus_per_node=8, batch_size=128, warmup_steps=2,
                                                   measure_steps=10))
    seconds = (18.553769 - 14.427490)  # 14:29:18.553769 - 14:29:14.427490
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(2048 * 10 / seconds, rel=1e-9)
    assert res.latency_ms == pytest.approx(1000 * seconds / 10, rel=1e-9)
    ips = [6928.79, 11124.52, 10131.38, 11064.93, 10879.48, 10044.52, 10547.30, 10007.33, 9872.60, 10393.54]
    assert res.throughput_speed == pytest.approx(sum(ips) / 10, rel=1e-12)
    assert res.steps_seen == 12 and res.loss_finite is True
    assert "global_batch_mismatch" not in res.extra  # PARAMETER line: world_size 16 x batch_size 128 = 2048
    assert res.extra["parameters"]["world_size"] == "16"
    assert res.mem_peak_mib is None and "no GPU memory" in res.mem_reason


def test_real_ngc_excerpt_against_the_default_window_is_incomplete():
    res = suites.get("ngc-pytorch/resnet50").parse(
        lp.read_lines(NGC_RN50_2N8G), ParseContext(nodes=2, gpus_per_node=8, batch_size=128))
    assert res.status == Status.INCOMPLETE and res.throughput is None
    assert "step 12 of 120" in res.reason


def test_real_dllogger_json_stream():
    """NVIDIA/dllogger's example: print_freq 5 (a coarse log), two epochs, validation lines in between."""
    res = suites.get("ngc-pytorch/resnet50").parse(lp.read_lines(DLLOGGER_EXAMPLE),
                                                   ParseContext(nodes=1, gpus_per_node=1, batch_size=128,
                                                                warmup_steps=5, measure_steps=15))
    assert res.status == Status.OK, res.reason
    seconds = 924.688333 - 921.842053  # step [0, 20] - step [0, 5] (1570716924.688333 - 1570716921.842053)
    assert res.throughput == pytest.approx(128 * 15 / seconds, rel=1e-9)
    assert res.throughput_speed == pytest.approx((674.7180797941068 + 674.8162169210029 + 674.787389360117) / 3)
    assert res.steps_seen == 40  # epoch 1 continues after epoch 0's 20 iterations; validation lines skipped
    assert res.extra["reported_throughput"] == pytest.approx(661.9801574510492)
    assert res.extra["formats"] == ["dllogger-json"]


def test_real_workload_log_agrees_with_the_workloads_own_summary():
    """A log written by our pytorch-ddp workload (tiny ResNet-50, 2 CPU processes under torchrun)."""
    res = suites.get("pytorch-ddp/resnet50").parse(
        lp.read_lines(REAL / "dlperf_slurm-workload" / "37a2126" / "pytorch_ddp_tiny_1n2g_b4_fp32_0.log"),
                                                   ParseContext(nodes=1, gpus_per_node=2, batch_size=4,
                                                                warmup_steps=2, measure_steps=5))
    assert res.status == Status.OK and res.tiny is True
    seconds = 519.0784872 - 518.170091  # end of step 7 - end of step 2 (1795301519.0784872 - 1795301518.170091)
    assert res.throughput == pytest.approx(8 * 5 / seconds, rel=1e-6)
    assert res.throughput == pytest.approx(44.03364749914044, rel=1e-12)  # the summary event's figure
    assert res.throughput_speed == pytest.approx(45.63464022960788, rel=1e-12)  # its throughput_mean
    assert "reported_mismatch" not in res.extra and res.extra["reported_throughput"] == res.throughput
    assert res.mem_reason == "no CUDA device (CPU run): GPU memory not measured" and res.mem_peak_mib is None
    assert res.job["command"].startswith("torchrun --standalone")


def test_pytorch_ddp_summary_disagreeing_with_steps_is_noted():
    spec = ls.Spec()
    text = ls.dlperf(spec)[0]  # its summary event says throughput 1.0
    res = parse("pytorch-ddp/resnet50", text, ctx_of(spec))
    assert res.status == Status.OK and "reported_mismatch" in res.extra


@pytest.mark.parametrize("name", ["oneflow_gpt_pretrain.excerpt.log", "pytorch_examples_rn50_2n8g.excerpt.log",
                                  "pytorch_examples_rn50_4n8g_interleaved_ranks.excerpt.log"])
@pytest.mark.parametrize("suite", sorted(ls.WRITERS))
def test_a_foreign_log_is_launch_failed_never_a_number(suite, name):
    res = suites.get(suite).parse(lp.read_lines(REAL / name), ParseContext(nodes=1, gpus_per_node=8, batch_size=32))
    assert res.status == Status.LAUNCH_FAILED, (res.status, res.reason)
    assert res.throughput is None
    # "memory.used [MiB]" (OneFlow-GPT's nvidia-smi samples) is no out-of-memory message
    assert res.status != Status.OOM


# -------------------------------------------------------------------------------- synthetic, every format


@pytest.mark.parametrize("suite,which", CASES, ids=IDS)
@pytest.mark.parametrize("mode", ["plain", "srun-l", "split"])
def test_synthetic_logs_give_the_exact_figures(suite, which, mode):
    spec = ls.Spec(nodes=2, gpus=4, batch=16, noise=1, seed=which + 3)
    text, exp = ls.write(suite, spec, which)
    if mode != "plain":
        text = ls.label_ranks(text, spec.world, seed=5)
    if mode == "split":
        text = ls.split_records(text, seed=7, ratio=0.3, world=spec.world)
    res = parse(suite, text, ctx_of(spec))
    assert res.status == Status.OK, res.reason
    assert close(res.throughput, exp["throughput"]), (res.throughput, exp["throughput"])
    if exp.get("speed") is not None:
        assert close(res.throughput_speed, exp["speed"]), (res.throughput_speed, exp["speed"])
    else:
        assert res.throughput_speed is None
    if "latency_ms" in exp:
        assert close(res.latency_ms, exp["latency_ms"])
    assert res.extra.get("garbled_lines", 0) == 0
    assert res.steps_seen >= spec.warmup + spec.measure


def test_pytorch_ddp_memory_provenance_and_tiny_label():
    spec = ls.Spec(nodes=2, gpus=8, tiny=True)
    text, exp = ls.dlperf(spec)
    res = parse("pytorch-ddp/resnet50", text, ctx_of(spec))
    assert res.status == Status.OK and res.tiny is True
    assert res.mem_peak_mib == exp["mem_peak"] and res.mem_gpu0_mib == exp["mem_gpu0"]
    assert res.mem_allocator_mib == exp["mem_alloc"] and res.gpu_util == 97.5
    assert res.extra["mem_reserved_mib"] == 10000.0
    assert res.job["job_id"] == "4242" and "env" not in res.job


def test_pytorch_ddp_cpu_run_says_why_memory_is_missing():
    spec = ls.Spec(mem=False)
    res = parse("pytorch-ddp/resnet50", ls.dlperf(spec)[0], ctx_of(spec))
    assert res.status == Status.OK and res.mem_peak_mib is None
    assert res.mem_reason == "no CUDA device (CPU run): GPU memory not measured"


def test_pytorch_ddp_warmup_zero_recovers_the_start_from_the_first_step_time():
    spec = ls.Spec(warmup=0, measure=50)
    text, exp = ls.dlperf(spec)
    res = parse("pytorch-ddp/resnet50", text, ctx_of(spec))
    assert res.status == Status.OK and res.window["start"] == 0
    assert close(res.throughput, exp["throughput"], rel=1e-9)


def test_a_restart_inside_the_window_is_measured_within_one_attempt():
    """A log holding two attempts (a torchrun restart, a requeued job's appended output): the first stops inside
    the window, the second starts again from step 1, 1000 s later. The window is timed within the attempt that ran
    through it, never from the first attempt's warm-up end to the second's window end (gap included)."""
    first, _ = ls.dlperf(ls.Spec(warmup=5, measure=20, steps=15, seed=0))
    spec = ls.Spec(warmup=5, measure=20, seed=1)  # starts 1000 s after the first (logsynth's time base)
    second, exp = ls.dlperf(spec)
    res = parse("pytorch-ddp/resnet50", first + second, ctx_of(spec))
    assert res.status == Status.OK and close(res.throughput, exp["throughput"])
    assert close(res.latency_ms, exp["latency_ms"]) and close(res.throughput_speed, exp["speed"])
    assert res.extra["restarts"] == 1 and "restart" in res.reason


def test_a_restart_after_a_complete_window_keeps_the_attempt_that_timed_it():
    spec = ls.Spec(warmup=5, measure=20, seed=0)
    first, exp = ls.dlperf(spec)
    second, _ = ls.dlperf(ls.Spec(warmup=5, measure=20, steps=12, seed=1))
    res = parse("pytorch-ddp/resnet50", first + second, ctx_of(spec))
    assert res.status == Status.OK and close(res.throughput, exp["throughput"])
    assert res.extra["restarts"] == 1


def test_a_restart_from_a_checkpoint_inside_the_window_is_not_a_measurement():
    """Resumed at step 15 of a 5->25 window: no uninterrupted stretch times 90 % of the window."""
    w = lp.Window(5, 20)
    for s in range(1, 18):
        w.add(s, 0.1 * s)
    for s in range(15, 30):
        w.add(s, 1000.0 + 0.1 * s)
    assert w.reached and w.restarts == 1 and w.figures(32.0) is None
    assert "restart" in w.describe()


def test_a_step_line_out_of_place_is_no_restart():
    """Step 60's line before step 50's (both with their own times): no restart, the window as it was."""
    w = lp.Window(20, 100)
    seq = list(range(1, 121))
    seq[49], seq[59] = seq[59], seq[49]
    for s in seq:
        w.add(s, 0.1 * s)
    fig = w.figures(32.0)
    assert w.restarts == 0 and (fig.start, fig.end) == (20, 120) and close(fig.throughput, 320.0)


def test_pytorch_ddp_header_window_wins_over_the_context():
    spec = ls.Spec(warmup=5, measure=30)
    text, exp = ls.dlperf(spec)
    res = parse("pytorch-ddp/resnet50", text, ParseContext(nodes=1, gpus_per_node=1, batch_size=32, warmup_steps=20,
                                                           measure_steps=100))  # e.g. an import with defaults
    assert res.status == Status.OK and close(res.throughput, exp["throughput"])
    assert "window_from_log" in res.extra


def test_tf2_unlabelled_workers_are_told_apart_and_the_median_taken():
    spec = ls.Spec(nodes=3, gpus=8, workers=3, log_steps=10, seed=4)
    text, exp = ls.tf2_timehistory(spec)
    res = parse("tf2/resnet50", text, ctx_of(spec))
    assert res.status == Status.OK, res.reason
    assert res.extra["workers_measured"] == 3
    assert close(res.throughput, exp["throughput"]) and close(res.throughput_speed, exp["speed"])


def test_tf2_dlperf_window_of_literal_lines():
    """suites-reference.md §3.8: log_steps 100, DLPerf skipped the first interval and measured 500 steps."""
    spec = ls.Spec(batch=128, warmup=100, measure=500, log_steps=100, thr=327.0)
    text, exp = ls.tf2_timehistory(spec)
    res = parse("tf2/resnet50", text, ctx_of(spec))
    assert res.status == Status.OK and res.window == {**res.window, "start": 100, "end": 600}
    assert close(res.throughput, exp["throughput"]) and close(res.throughput_speed, exp["speed"])
    assert res.window["speed_points"] == 5


def test_tf2_coarse_log_that_cannot_time_the_window_is_unmeasured():
    spec = ls.Spec(warmup=20, measure=100, log_steps=100, steps=200)
    res = parse("tf2/resnet50", ls.tf2_timehistory(spec)[0], ctx_of(spec))
    assert res.status == Status.UNMEASURED and res.throughput is None
    assert "window 20->120" in res.reason


def test_glog_clock_crosses_new_year():
    clock = lp.GlogClock()
    a = clock.seconds("1231", "23:59:59.500000")
    b = clock.seconds("0101", "00:00:00.250000")
    assert b - a == pytest.approx(0.75)


def test_horovod_time_flavour_is_the_harmonic_figure_and_speed_the_printed_total():
    spec = ls.Spec(nodes=1, gpus=4, batch=32, jitter=0.2, seed=9)
    text, exp = ls.horovod(spec)
    res = parse("horovod-synthetic/resnet50", text, ctx_of(spec))
    assert close(res.throughput, exp["throughput"]) and close(res.throughput_speed, exp["speed"])
    assert res.throughput < res.throughput_speed  # harmonic <= arithmetic mean
    assert res.loss_finite is None  # the benchmark prints no loss


# ----------------------------------------------------------------------------------------------- statuses


@pytest.mark.parametrize("suite,which", CASES, ids=IDS)
def test_killed_mid_run_is_incomplete(suite, which):
    spec = ls.Spec(steps=60)
    res = parse(suite, ls.write(suite, spec, which)[0], ctx_of(spec))
    assert res.status == Status.INCOMPLETE and res.throughput is None
    assert "of 120" in res.reason


@pytest.mark.parametrize("suite,which", CASES, ids=IDS)
def test_out_of_memory(suite, which):
    spec = ls.Spec(steps=3, oom=True)
    res = parse(suite, ls.write(suite, spec, which)[0], ctx_of(spec))
    assert res.status == Status.OOM, res.reason
    assert "out of memory" in res.reason.lower() or "oom" in res.reason.lower()
    assert res.throughput is None


@pytest.mark.parametrize("suite,which", [c for c in CASES if c[0] != "horovod-synthetic/resnet50"],
                         ids=[i for c, i in zip(CASES, IDS) if c[0] != "horovod-synthetic/resnet50"])
def test_non_finite_loss(suite, which):
    spec = ls.Spec(nan_at=50)
    res = parse(suite, ls.write(suite, spec, which)[0], ctx_of(spec))
    assert res.status == Status.NONFINITE, res.reason
    assert res.loss_finite is False


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "torch.OutOfMemoryError: CUDA out of memory.",
    "F external/xla/xla/stream_executor/cuda/cuda_driver.cc:1234] CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "(0) RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[256,64,112,112]",
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: failed to allocate",
    "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=12.0. Some of your processes may have been killed",
])
def test_every_oom_message_is_recognised(line):
    spec = ls.Spec()
    text = ls.dll_rn50(spec)[0] + line + "\n"
    res = parse("ngc-pytorch/resnet50", text, ctx_of(spec))
    assert res.status == Status.OOM and line[:40] in res.reason


def test_tf_allocator_warning_that_is_not_a_failure_stays_ok():
    spec = ls.Spec(log_steps=10)
    text, _exp = ls.tf2_timehistory(spec)
    warn = ("W tensorflow/core/common_runtime/bfc_allocator.cc:246] Allocator (GPU_0_bfc) ran out of memory trying "
            "to allocate 2.19GiB with freed_by_count=0. The caller indicates that this is not a failure, but may "
            "mean that there could be performance gains if more memory were available.")
    lines = text.splitlines()
    text = "\n".join(lines[:3] + [warn] + lines[3:]) + "\n"
    assert parse("tf2/resnet50", text, ctx_of(spec)).status == Status.OK


def test_oom_on_another_rank_counts():
    spec = ls.Spec(nodes=1, gpus=8, steps=30)
    text = ls.label_ranks(ls.dll_rn50(spec)[0], 8, other_ranks=False) + "5: RuntimeError: CUDA out of memory.\n"
    res = parse("ngc-pytorch/resnet50", text, ctx_of(spec))
    assert res.status == Status.OOM and "(rank 5)" in res.reason


def test_slurm_time_limit_banner_in_the_log():
    spec = ls.Spec(steps=70)
    text = ls.tf_cnn(spec)[0] + "slurmstepd: error: *** STEP 1234.0 ON node3 CANCELLED AT 2024-05-01T10:00:00 " \
                                "DUE TO TIME LIMIT ***\n"
    res = parse("tf-cnn/resnet50", text, ctx_of(spec))
    assert res.status == Status.TIMEOUT and "TIME LIMIT" in res.reason


def test_launch_failure_quotes_the_exception():
    text = "Traceback (most recent call last):\n  File \"train.py\", line 3\nModuleNotFoundError: No module named 'horovod'\n"
    res = parse("horovod-synthetic/resnet50", text, ParseContext(nodes=1, gpus_per_node=1, batch_size=32))
    assert res.status == Status.LAUNCH_FAILED
    assert "ModuleNotFoundError: No module named 'horovod'" in res.reason


def test_pytorch_ddp_error_event_reason():
    text = ':::DLPERF {"event":"error","kind":"launch","step":0,"message":"RuntimeError: NCCL error in init"}\n'
    res = parse("pytorch-ddp/bert-base", text, ParseContext(nodes=1, gpus_per_node=2, batch_size=8))
    assert res.status == Status.LAUNCH_FAILED and "NCCL error in init" in res.reason


# --------------------------------------------------------------------------------------------- messy files


def _write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "run.log"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("suite,which", CASES, ids=IDS)
def test_empty_file(tmp_path, suite, which):
    res = suites.get(suite).parse(lp.read_lines(_write(tmp_path, b"")), ParseContext(nodes=1, gpus_per_node=1,
                                                                                     batch_size=32))
    assert res.status == Status.LAUNCH_FAILED and res.reason == "empty log: no training step"


@pytest.mark.parametrize("suite,which", CASES, ids=IDS)
def test_bad_bytes_crlf_and_carriage_returns(tmp_path, suite, which):
    spec = ls.Spec(noise=1)
    text, exp = ls.write(suite, spec, which)
    data = text.replace("\n", "\r\n").encode()
    # invalid UTF-8 inside noise lines and a progress bar redrawn with \r
    data = data.replace(b"NCCL INFO", b"NCCL \xff\xfe\xc3INFO").replace(b"libibverbs", b"\r 12%|##  |\r 50%|#####|\rlibibverbs")
    res = suites.get(suite).parse(lp.read_lines(_write(tmp_path, data)), ctx_of(spec))
    assert res.status == Status.OK, res.reason
    assert close(res.throughput, exp["throughput"])


@pytest.mark.parametrize("suite,which", CASES, ids=IDS)
def test_truncated_last_line(tmp_path, suite, which):
    spec = ls.Spec(steps=80)
    text, _ = ls.write(suite, spec, which)
    data = text.encode()
    cut = data.rstrip(b"\n").rfind(b"\n") + 7  # a few bytes into the last line, no newline at the end
    res = suites.get(suite).parse(lp.read_lines(_write(tmp_path, data[:cut])), ctx_of(spec))
    assert res.status in (Status.INCOMPLETE, Status.LAUNCH_FAILED)
    assert res.throughput is None


def test_a_truncated_record_after_a_complete_window_still_counts(tmp_path):
    spec = ls.Spec(steps=125)
    text, exp = ls.dll_rn50(spec)
    data = text.encode()
    cut = data.rstrip(b"\n").rfind(b"\n") + 60
    res = suites.get("ngc-pytorch/resnet50").parse(lp.read_lines(_write(tmp_path, data[:cut])), ctx_of(spec))
    assert res.status == Status.OK and close(res.throughput, exp["throughput"])


def test_an_overlong_line_is_read_in_pieces(tmp_path):
    spec = ls.Spec()
    text, exp = ls.dlperf(spec)
    data = ("x" * (3 * lp.MAX_LINE + 17) + "\n" + text).encode()
    pieces = list(lp.read_lines(_write(tmp_path, data)))
    assert max(len(p) for p in pieces) <= lp.MAX_LINE
    res = suites.get("pytorch-ddp/resnet50").parse(iter(pieces), ctx_of(spec))
    assert res.status == Status.OK and close(res.throughput, exp["throughput"])


def test_split_rank_labels():
    assert lp.split_rank("0: DLL x") == (0, "DLL x")
    assert lp.split_rank(" 3: hello") == (3, "hello")
    assert lp.split_rank("12: a: b") == (12, "a: b")
    assert lp.split_rank("[rank1]:Epoch") == (1, "Epoch")
    assert lp.split_rank("[default0]: x") == (0, "x")
    assert lp.split_rank("[1,2]<stdout>:Iter #0") == (2, "Iter #0")
    assert lp.split_rank("10\timages/sec: 1.0") == (None, "10\timages/sec: 1.0")  # tf_cnn's step lines
    assert lp.split_rank("I0826 15:12:50.1 1 x.py:1] y")[0] is None


_RSS_PROBE = """
import sys
from dlperf_slurm import parsing as lp, suites
from dlperf_slurm.model.result import ParseContext
n = int(sys.argv[1])

def lines():
    yield "DLL 2020-09-15 14:28:53.498443 - PARAMETER batch_size : 128  world_size : 1 "
    for k in range(1, n + 1):
        s, us = divmod(k * 1000, 1_000_000)
        yield (f"DLL 2020-09-15 {(s // 3600) % 24:02d}:{(s // 60) % 60:02d}:{s % 60:02d}.{us:06d} - Epoch: 0 "
               f"Iteration: {k}  train.loss : 6.5  train.total_ips : 128000.00 img/s")
        if k % 3 == 0:
            yield f"node1:1234:1250 [3] NCCL INFO comm 0x55d5c8 rank 3 nranks 8 cudaDev 3 busId 1a000 line {k}"

ctx = ParseContext(nodes=1, gpus_per_node=1, batch_size=128, warmup_steps=20, measure_steps=100)
res = suites.get("ngc-pytorch/resnet50").parse(lines(), ctx)
assert res.status == "OK" and res.steps_seen == n, res
print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")))  # KiB
"""


def test_flat_memory_on_a_long_stream():
    """Streaming: 8x more log (120 k steps, ~17 MB of text) costs no more memory than 15 k steps."""
    import subprocess

    def peak_kib(n: int) -> int:
        out = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(n)], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).parent.parent)
        return int(out.stdout.strip())

    small, large = peak_kib(15_000), peak_kib(120_000)
    assert large - small < 4 * 1024, (small, large)  # KiB


# ----------------------------------------------------------------------------------------------- fuzzing

_ALPHABET = st.sampled_from(["DLL ", "DLLL {", ":::DLPERF ", "{", "}", '"step":', "Iteration: ", "Epoch: ", "  ",
                             "TimeHistory: ", " seconds, ", " examples/second between steps ", " and ", "Train Step: ",
                             "images/sec: ", "total images/sec: ", "Iter #", " img/sec per GPU", "0: ", "\n", "\r",
                             "\t", "nan", "inf", "-", ".", ":", "1", "7", "99", "1e308", "2020-09-15 14:29:13.473765",
                             "I0826 15:12:50.113950 1 x.py:1] ", "out of memory", "***", "\x00", "\ufffd", "é"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, max_size=120), st.sampled_from(sorted(ls.WRITERS)))
def test_fuzz_random_token_soup_never_crashes(tokens, suite):
    res = parse(suite, "".join(tokens), ParseContext(nodes=1, gpus_per_node=2, batch_size=4, warmup_steps=2,
                                                     measure_steps=5, options={"batches_per_iter": 1}))
    _check_result(res)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000), st.sampled_from(sorted(ls.WRITERS)))
def test_fuzz_random_bytes_never_crash(tmp_path_factory, data, suite):
    p = tmp_path_factory.mktemp("fuzz") / "x.log"
    p.write_bytes(data)
    _check_result(suites.get(suite).parse(lp.read_lines(p), ParseContext(nodes=2, gpus_per_node=2, batch_size=8)))


_MUTATIONS = ("drop", "dup", "swap", "cut", "garbage", "split", "nan", "digits")


def _mutate(text: str, ops: list[tuple[str, int]]) -> str:
    lines = text.split("\n")
    for op, seed in ops:
        if not lines:
            break
        rng = random.Random(seed)
        i = rng.randrange(len(lines))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut":
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif op == "garbage":
            lines[i] = lines[i] + "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randrange(1, 20)))
        elif op == "split":
            cut = rng.randrange(len(lines[i]) + 1)
            lines[i:i + 1] = [lines[i][:cut], lines[i][cut:]]
        elif op == "nan":
            lines[i] = lines[i].replace("7.", "nan", 1).replace("1", "inf", 1)
        elif op == "digits":
            lines[i] = "".join(str(rng.randrange(10)) if ch.isdigit() else ch for ch in lines[i])
    return "\n".join(lines)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.lists(st.tuples(st.sampled_from(_MUTATIONS), st.integers(0, 10**6)), max_size=12),
       st.booleans())
def test_fuzz_mutated_logs(case, ops, labelled):
    suite, which = case
    spec = ls.Spec(warmup=3, measure=20, noise=1, bpi=2, log_steps=1)
    text, exp = ls.write(suite, spec, which)
    if labelled:
        text = ls.label_ranks(text, 4, seed=len(ops))
    res = parse(suite, _mutate(text, ops), ctx_of(spec))
    _check_result(res)
    if not ops:
        assert res.status == Status.OK and close(res.throughput, exp["throughput"])


def _check_result(res: RunResult) -> None:
    assert isinstance(res, RunResult)
    assert res.status in ALL_STATUSES
    assert isinstance(res.reason, str)
    assert isinstance(res.steps_seen, int) and res.steps_seen >= 0
    if res.status == Status.OK:
        assert res.throughput is not None and math.isfinite(res.throughput) and res.throughput > 0
        assert res.latency_ms is not None and math.isfinite(res.latency_ms) and res.latency_ms > 0
    else:
        assert res.reason
    for v in (res.throughput, res.throughput_speed, res.latency_ms):
        assert v is None or isinstance(v, float)


def test_horovodrun_gloo_label_is_a_rank_label():
    """horovodrun --gloo labels every line ``[R]<stdout>:`` (no job index, unlike OpenMPI's ``[1,R]``): a real
    Horovod 0.28.1 log; both the line loop and the block path read rank 0's lines, with the label taken off."""
    path = REAL / "horovod-examples" / "0.28.1" / "pytorch_synthetic_benchmark_gloo_2cpu_b2.log"
    assert lp.split_rank("[0]<stdout>:Iter #0: 0.2 img/sec per CPU") == (0, "Iter #0: 0.2 img/sec per CPU")
    suite = suites.get("horovod-synthetic/resnet50")
    ctx = ParseContext(nodes=1, gpus_per_node=2, batch_size=2, warmup_steps=2, measure_steps=6,
                       options={"batches_per_iter": 2})
    for lines in (lp.iter_text_lines(path.read_text()), lp.read_lines(path)):
        res = suite.parse(lines, ctx)
        assert res.status == Status.OK and res.extra["ranks_seen"] == 2, res.reason
        assert "batch_mismatch" not in res.extra and "world_size_mismatch" not in res.extra
        assert res.throughput_speed == pytest.approx(2 * 0.2) and res.extra["reported_throughput"] == 0.4
    # the label is taken off before "Batch size: 2" is read: a context of batch 4 is told apart
    other = suite.parse(lp.read_lines(path), ParseContext(nodes=1, gpus_per_node=2, batch_size=4, warmup_steps=2,
                                                          measure_steps=6, options={"batches_per_iter": 2}))
    assert "batch_mismatch" in other.extra


def test_dle_bert_summary_without_a_unit_is_the_reported_figure():
    """DLE PyTorch BERT's last line has no unit after its figure (``-  e2e_train_time : 931.02
    training_sequences_per_second : 4058.34  final_loss : ...``): the next metric says the number ended."""
    path = REAL / "DeepLearningExamples" / "pytorch-20.06" / "bert_run_pretraining_8gpu_fp16_bs64_acc132.dll_lines.log"
    stated = float(re.search(r"training_sequences_per_second : (\S+)", path.read_text()).group(1))
    for lines in (lp.iter_text_lines(path.read_text()), lp.read_lines(path)):
        res = suites.get("ngc-pytorch/bert-base").parse(lines, ParseContext(nodes=1, gpus_per_node=8, batch_size=8448,
                                                                            warmup_steps=1, measure_steps=49))
        assert res.status == Status.OK and res.extra["reported_throughput"] == stated, res.reason
        assert abs(res.throughput - stated) < 0.005 * stated  # the window 1..50 against the program's own figure
