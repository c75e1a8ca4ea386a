"""Tests of the built-in pytorch-ddp workloads: models, launch environment, log lines, NVML sampler, real runs."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from dlperf_slurm.events import PREFIX, emit, format_line, parse_line
from dlperf_slurm.workloads import distenv, gpumem, loop

REPO = Path(__file__).resolve().parents[1]
CPU_REASON = "no CUDA device (CPU run): GPU memory not measured"
CPU_ENERGY_REASON = "no CUDA device (CPU run): GPU energy not measured"


# ----------------------------------------------------------------------------------------------- log lines
def test_emit_writes_one_compact_json_line_and_parse_line_reads_it_back():
    buf = io.StringIO()
    line = emit("step", stream=buf, step=3, loss=float("nan"), hi=float("inf"), lo=-math.inf, d={"x": [1.5]})
    text = buf.getvalue()
    assert text == line + "\n" and text.count("\n") == 1
    assert line.startswith(PREFIX) and " " not in line[len(PREFIX):]
    raw = json.loads(line[len(PREFIX):])
    assert raw == {"event": "step", "step": 3, "loss": "nan", "hi": "inf", "lo": "-inf", "d": {"x": [1.5]}}
    back = parse_line(line)
    assert back["event"] == "step" and back["step"] == 3 and math.isnan(back["loss"])
    assert back["hi"] == math.inf and back["lo"] == -math.inf


@pytest.mark.parametrize("line", ["", "hello", ":::DLPERF not json", ':::DLPERF [1, 2]', ':::DLPERF {"no_event": 1}'])
def test_parse_line_ignores_other_lines(line):
    assert parse_line(line) is None


def test_parse_line_accepts_srun_label_prefix():
    assert parse_line("0: " + format_line("summary", throughput=1.0)) == {"event": "summary", "throughput": 1.0}


# ------------------------------------------------------------------------------------------ launcher env
def test_distenv_single_process():
    env = distenv.detect({})
    assert (env.rank, env.world_size, env.local_rank, env.nodes, env.launcher) == (0, 1, 0, 1, "single")


def test_distenv_torchrun():
    env = distenv.detect({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                          "MASTER_ADDR": "n01", "MASTER_PORT": "1234",
                          "SLURM_PROCID": "0", "OMPI_COMM_WORLD_RANK": "0"})  # torchrun wins
    assert env == distenv.DistEnv(rank=5, world_size=8, local_rank=1, local_world_size=4, nodes=2, master_addr="n01",
                                  master_port=1234, launcher="torchrun")


def test_distenv_slurm_uses_scontrol_first_host_and_job_port():
    asked = []

    def first_host(nodelist):
        asked.append(nodelist)
        return "gpu07"

    fake = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_NNODES": "2",
            "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "gpu[07-08]",
            "SLURM_JOB_ID": "4242"}
    env = distenv.detect(fake, first_host=first_host)
    assert asked == ["gpu[07-08]"]
    assert env == distenv.DistEnv(rank=5, world_size=8, local_rank=1, local_world_size=4, nodes=2,
                                  master_addr="gpu07", master_port=distenv.slurm_port("4242"), launcher="slurm")
    assert 10000 <= env.master_port < 60000
    # step variables win over job ones; explicit MASTER_ADDR/PORT win and scontrol is not asked
    fake.update(SLURM_STEP_NUM_TASKS="3", SLURM_STEP_NUM_NODES="2", SLURM_STEP_TASKS_PER_NODE="2,1",
                MASTER_ADDR="login1", MASTER_PORT="2222")
    env = distenv.detect(fake, first_host=first_host)
    assert (env.world_size, env.local_world_size, env.master_addr, env.master_port) == (3, 1, "login1", 2222)
    assert asked == ["gpu[07-08]"]


def test_distenv_mpirun_wins_over_inherited_slurm_vars_and_uses_mpi4py_rendezvous():
    fake = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    env = distenv.detect(fake, mpi_rendezvous=lambda: ("node0", 40001))
    assert env == distenv.DistEnv(rank=3, world_size=4, local_rank=1, local_world_size=2, nodes=2,
                                  master_addr="node0", master_port=40001, launcher="mpi")
    env = distenv.detect({**fake, "MASTER_ADDR": "h", "MASTER_PORT": "7"}, mpi_rendezvous=lambda: pytest.fail())
    assert (env.master_addr, env.master_port) == ("h", 7)
    with pytest.raises(RuntimeError, match="MASTER_ADDR"):
        distenv.detect(fake, mpi_rendezvous=lambda: None)  # multi-node, no mpi4py, no MASTER_ADDR
    single_node = {**fake, "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    env = distenv.detect(single_node, mpi_rendezvous=lambda: None)
    assert (env.master_addr, env.master_port, env.nodes) == ("127.0.0.1", distenv.DEFAULT_PORT, 1)


@pytest.mark.parametrize("nodelist, first", [("gpu[07-09,12],cpu1", "gpu07"), ("n1,n2", "n1"), ("solo", "solo"),
                                             ("a-b[001-004]", "a-b001"), ("x[3,1]", "x3")])
def test_expand_first_host(nodelist, first):
    assert distenv.expand_first_host(nodelist) == first


def test_scontrol_first_host_falls_back_without_scontrol(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert distenv.scontrol_first_host("node[3-4]") == "node3"


def test_tasks_on_node_and_export():
    assert [distenv.tasks_on_node("2(x3),1", i) for i in range(4)] == [2, 2, 2, 1]
    target: dict[str, str] = {}
    distenv.DistEnv(rank=1, world_size=2, local_rank=1, local_world_size=2, nodes=1, master_addr="h", master_port=5,
                    launcher="slurm").export(target)
    assert target == {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "5"}


# ------------------------------------------------------------------------------------------- NVML sampler
class FakeNvml(types.SimpleNamespace):
    """Enough of pynvml for the sampler: per-GPU scripted memory (MiB) and utilization."""

    class NVMLError(Exception):
        pass

    def __init__(self, used_mib, util, uuids=None, init_error=None):
        super().__init__()
        self.used_mib, self.util, self.calls, self.shutdowns = used_mib, util, [0] * len(used_mib), 0
        self.uuids = uuids or [f"GPU-{i}" for i in range(len(used_mib))]
        self.init_error = init_error

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.used_mib)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return self.uuids[h].encode()

    def nvmlDeviceGetMemoryInfo(self, h):
        seq = self.used_mib[h]
        value = seq[min(self.calls[h], len(seq) - 1)]
        self.calls[h] += 1
        return types.SimpleNamespace(used=int(value * gpumem.MIB), total=80 * 1024 * gpumem.MIB)

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=self.util[h], memory=0)


def _manual_sampler(nvml, visible=""):
    s = gpumem.GpuMemSampler(period=3600, nvml=nvml, visible_devices=visible, host="h0")
    assert s.start()
    return s


def test_sampler_records_peak_per_gpu_and_window_utilization():
    nvml = FakeNvml(used_mib=[[100, 900, 300, 200], [50, 60, 70, 80]], util=[40, 80])
    s = _manual_sampler(nvml)  # start() takes the first sample (outside the window)
    s.sample_once()
    s.window_start()
    s.sample_once()
    s.sample_once()
    s.window_end()
    rep = s.stop()
    assert rep.peak_used_mib == {0: 900.0, 1: 80.0}
    assert rep.util_mean == pytest.approx(60.0) and rep.samples == 4 and rep.reason is None
    assert nvml.shutdowns == 1
    assert rep.as_dict()["host"] == "h0"


def test_sampler_respects_cuda_visible_devices_by_index_and_uuid():
    nvml = FakeNvml(used_mib=[[1], [2], [3]], util=[0, 0, 0], uuids=["GPU-a", "GPU-b", "GPU-c"])
    assert _manual_sampler(nvml, "2,0").stop().peak_used_mib == {2: 3.0, 0: 1.0}
    assert _manual_sampler(nvml, "GPU-b").stop().peak_used_mib == {1: 2.0}
    assert _manual_sampler(nvml, "MIG-unknown").stop().peak_used_mib.keys() == {0, 1, 2}


def test_nvml_id_for_maps_the_cuda_index_through_cuda_visible_devices():
    assert gpumem.nvml_id_for(0, "3,5") == "3" and gpumem.nvml_id_for(1, "GPU-a, GPU-b") == "GPU-b"
    assert gpumem.nvml_id_for(2, "") == "2" and gpumem.nvml_id_for(0, "7") == "7"


def test_sampler_takes_a_final_sample_when_the_window_was_shorter_than_the_period():
    s = _manual_sampler(FakeNvml(used_mib=[[10]], util=[55]))
    s.window_start()
    s.window_end()
    assert s.stop().util_mean == 55.0


def test_sampler_thread_samples_periodically():
    s = gpumem.GpuMemSampler(period=0.01, nvml=FakeNvml(used_mib=[list(range(100, 1000))], util=[30]),
                             visible_devices="")
    assert s.start()
    s.window_start()
    time.sleep(0.2)
    rep = s.stop()
    assert rep.samples >= 5 and rep.peak_used_mib[0] > 100 and rep.util_mean == 30.0


@pytest.mark.parametrize("nvml, reason", [
    (FakeNvml([[1]], [0], init_error=FakeNvml.NVMLError("Driver Not Loaded")), "NVML unavailable"),
    (FakeNvml([], []), "NVML sees no GPU"),
])
def test_sampler_degrades_with_a_reason_not_zeros(nvml, reason):
    s = gpumem.GpuMemSampler(nvml=nvml, visible_devices="")
    assert not s.start()
    rep = s.stop()
    assert reason in rep.reason and rep.peak_used_mib == {} and rep.util_mean is None
    assert reason in rep.energy_reason and "energy not read" in rep.energy_reason and rep.energy_j == {}


def test_sampler_without_pynvml(monkeypatch):
    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(gpumem, "_load_pynvml", missing)
    s = gpumem.GpuMemSampler()
    assert not s.start() and "not installed" in s.report.reason


def test_sampler_real_nvml_here():
    """On this machine: either real figures (a GPU box) or a reason (no driver), never zeros."""
    s = gpumem.GpuMemSampler(period=0.05)
    if s.start():
        time.sleep(0.1)
        rep = s.stop()
        assert rep.peak_used_mib and all(v > 0 for v in rep.peak_used_mib.values())
    else:
        rep = s.stop()
        assert rep.reason and rep.peak_used_mib == {} and rep.util_mean is None
        assert rep.energy_j == {} and rep.energy_reason  # the real pynvml without a driver: why, never zeros


# ---------------------------------------------------------------------------------------- loop + summary
def _fake_clock(monkeypatch, step_seconds):
    t = iter([1000.0 + sum(step_seconds[:i]) for i in range(len(step_seconds) + 1)])
    monkeypatch.setattr(loop.time, "time", lambda: next(t))


def test_timed_loop_events_and_summary(monkeypatch):
    _fake_clock(monkeypatch, [5.0, 1.0, 2.0, 2.0, 4.0])
    events, marks = [], []
    losses = iter([3.0, 2.5, float("nan"), 2.0, float("inf")])
    res = loop.timed_loop(lambda: next(losses), 5, 2, 16, rank0=True, log=lambda e, **f: events.append((e, f)),
                          on_window_start=lambda: marks.append("start"), on_window_end=lambda: marks.append("end"),
                          tiny=True)
    steps = [f for e, f in events if e == "step"]
    assert [f["step"] for f in steps] == [1, 2, 3, 4, 5] and marks == ["start", "end"]
    assert [f["step_time"] for f in steps] == [5.0, 1.0, 2.0, 2.0, 4.0]
    assert steps[2]["throughput"] == 8.0 and all(f["samples"] == 16 and f["tiny"] for f in steps)
    errors = [f for e, f in events if e == "error"]
    assert len(errors) == 1 and errors[0]["kind"] == "nonfinite_loss" and errors[0]["step"] == 3
    assert res.nonfinite_steps == [3, 5]
    summary = loop.summarize(res, 2, 3, 16, flops_per_sample=1e12, peak_tflops_total=10.0)
    assert summary["throughput"] == pytest.approx(16 * 3 / 8.0) and summary["latency_ms"] == pytest.approx(8000 / 3)
    assert summary["throughput_mean"] == pytest.approx((8 + 8 + 4) / 3)
    assert summary["nonfinite_loss"] is True and summary["tflops"] == pytest.approx(6.0)
    assert summary["mfu"] == pytest.approx(0.6) and summary["steps"] == 5


def test_timed_loop_other_ranks_log_nothing(monkeypatch):
    events = []
    res = loop.timed_loop(lambda: 1.0, 3, 1, 4, rank0=False, log=lambda *a, **k: events.append(a))
    assert events == [] and res.steps == 0
    assert loop.summarize(res, 1, 2, 4, 1.0, None)["throughput"] is None


def test_memory_event_merges_ranks_and_nodes():
    from dlperf_slurm.workloads import train

    assert train._memory_event(False, [], "h")["reason"] == CPU_REASON
    nvml = [{"host": "a", "peak_used_mib": {1: 900.0, 0: 1000.0}, "util_mean": 90.0, "samples": 3, "reason": None},
            {"host": "b", "peak_used_mib": {0: 1200.0}, "util_mean": 70.0, "samples": 3, "reason": None}]
    gathered = [{"rank": 0, "max_allocated_mib": 500.0, "max_reserved_mib": 600.0, "nvml": nvml[0]},
                {"rank": 1, "max_allocated_mib": 510.0, "max_reserved_mib": 610.0, "nvml": None},
                {"rank": 2, "max_allocated_mib": 520.0, "max_reserved_mib": 620.0, "nvml": nvml[1]}]
    ev = train._memory_event(True, gathered, "a")
    assert ev["max_allocated_mib"] == {"0": 500.0, "1": 510.0, "2": 520.0}
    assert ev["nvml_peak_used_mib"] == {"a:0": 1000.0, "a:1": 900.0, "b:0": 1200.0}
    assert ev["nvml_gpu0_mib"] == 1000.0 and ev["gpu_util_mean"] == 80.0 and ev["reason"] is None
    no_nvml = {"host": "a", "peak_used_mib": {}, "util_mean": None, "samples": 0, "reason": "NVML unavailable (x)"}
    ev = train._memory_event(True, [{**gathered[0], "nvml": no_nvml}], "a")
    assert ev["nvml_peak_used_mib"] is None and ev["max_allocated_mib"] == {"0": 500.0}
    assert "NVML unavailable" in ev["reason"]


def test_cli_rejects_bad_values():
    from dlperf_slurm.workloads import train

    with pytest.raises(SystemExit):
        train.parse_args(["--model", "resnet50", "--batch-size", "0"])
    with pytest.raises(SystemExit):
        train.parse_args(["--model", "vgg", "--batch-size", "2"])
    args = train.parse_args(["--model", "bert-base", "--batch-size", "2"])
    assert (args.warmup_steps, args.measure_steps, args.precision, args.compile) == (20, 100, "fp32", 0)


def test_package_init_does_not_import_torch():
    code = "import sys, dlperf_slurm.workloads, dlperf_slurm.workloads.train; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------- models
def _torch():
    """torch, single-threaded: other processes on a 2-core box make OpenMP's spinning threads crawl."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def test_resnet50_v15_parameter_count_and_stride_on_the_3x3_conv():
    torch = _torch()
    from dlperf_slurm.workloads.resnet import resnet50

    with torch.device("meta"):
        m = resnet50(init_weights=False)
    assert sum(p.numel() for p in m.parameters()) == 25_557_032
    m = resnet50(init_weights=False)
    stages = [m.layer1, m.layer2, m.layer3, m.layer4]
    assert [len(s) for s in stages] == [3, 4, 6, 3]
    for i, stage in enumerate(stages):
        first = stage[0]
        stride = (1, 1) if i == 0 else (2, 2)
        assert first.conv1.stride == (1, 1) and first.conv3.stride == (1, 1)  # v1 would stride conv1
        assert first.conv2.stride == stride and first.conv2.kernel_size == (3, 3)
        assert first.downsample[0].stride == stride
        assert all(b.conv2.stride == (1, 1) and b.downsample is None for b in list(stage)[1:])
    m = resnet50(init_weights=False).eval()  # real CPU tensors: cheaper than meta kernels' first use
    with torch.no_grad():
        x = m.maxpool(m.conv1(torch.zeros(1, 3, 224, 224)))
        shapes = []
        for stage in stages:
            x = stage(x)
            shapes.append(tuple(x.shape[1:]))
        assert shapes == [(256, 56, 56), (512, 28, 28), (1024, 14, 14), (2048, 7, 7)]
        assert m(torch.zeros(2, 3, 224, 224)).shape == (2, 1000)


def bert_base_expected_params(vocab=30522, hidden=768, layers=12, inter=3072, positions=512, types=2):
    lin = lambda i, o: i * o + o  # noqa: E731
    ln = 2 * hidden
    embeddings = (vocab + positions + types) * hidden + ln
    layer = 4 * lin(hidden, hidden) + ln + lin(hidden, inter) + lin(inter, hidden) + ln
    pooler = lin(hidden, hidden)
    mlm_head = lin(hidden, hidden) + ln + vocab  # decoder weight tied to word embeddings: only its bias
    nsp = lin(hidden, 2)
    return embeddings + layers * layer + pooler + mlm_head + nsp


def test_bert_base_parameter_count_and_tied_decoder():
    torch = _torch()
    from dlperf_slurm.workloads.bert import BERT_BASE, BertForPreTraining

    assert bert_base_expected_params() == 110_106_428  # HF BertForPreTraining, bert-base-uncased
    with torch.device("meta"):
        m = BertForPreTraining(BERT_BASE, init_weights=False)
    assert sum(p.numel() for p in m.parameters()) == 110_106_428
    assert m.mlm_decoder.weight is m.embeddings.word_embeddings.weight
    with torch.device("meta"):
        ids = torch.zeros(2, 128, dtype=torch.long)
        mlm, nsp = m(ids, ids, torch.zeros(2, 20, dtype=torch.long))
    assert mlm.shape == (2, 20, 30522) and nsp.shape == (2, 2)


def test_flops_per_sample_hooks_match_torch_flop_counter_and_the_formula():
    torch = _torch()
    from torch.utils.flop_counter import FlopCounterMode

    from dlperf_slurm.workloads import flops
    from dlperf_slurm.workloads.bert import BertForPreTraining
    from dlperf_slurm.workloads.resnet import resnet50

    def torch_count(build, inputs):
        with torch.device("meta"):
            model, args = build().eval(), inputs()
        with FlopCounterMode(display=False) as counter:
            model(*args)
        return counter.get_total_flops()

    image = lambda: (torch.zeros(1, 3, 224, 224),)  # noqa: E731
    rn = flops.forward_flops(resnet50(), image())
    assert rn == 8_178_368_512  # 4.09 GMACs, the usual "4.1 GFLOPs" that counts a multiply-add once
    assert rn == torch_count(lambda: resnet50(init_weights=False), image)
    s, h, L, v, p = 128, 768, 12, 30522, 20
    analytic = L * s * 2 * (4 * h * h + 2 * h * 3072) + L * 2 * 2 * s * s * h + 2 * p * (h * h + h * v) \
        + 2 * h * h + 2 * h * 2
    bert_in = lambda: (torch.zeros(1, s, dtype=torch.long),) * 2 + (torch.zeros(1, p, dtype=torch.long),)  # noqa: E731
    model = BertForPreTraining()
    assert flops.forward_flops(model, bert_in()) == analytic == 23_309_663_232 and model.training
    assert torch_count(lambda: BertForPreTraining(init_weights=False), bert_in) == analytic
    assert flops.peak_tflops("NVIDIA A100-SXM4-80GB", "16bit") == 312.0
    assert flops.peak_tflops("NVIDIA A10", "16bit") == 125.0 and flops.peak_tflops("Quadro X", "fp32") is None
    assert flops.peak_basis("amp", False) == "16bit" and flops.peak_basis("fp32", True) == "tf32"


@pytest.mark.parametrize("model", ["resnet50", "bert-base"])
@pytest.mark.parametrize("precision, data", [("fp32", "host"), ("amp", "device"), ("bf16", "device"),
                                             ("fp16", "device")])
def test_tiny_training_step_in_process(model, precision, data):
    torch = _torch()
    from dlperf_slurm.workloads.workload import WorkloadConfig, build, make_step

    torch.manual_seed(0)
    cfg = WorkloadConfig(model=model, tiny=True, batch_size=4, precision=precision, device=torch.device("cpu"),
                         channels_last=model == "resnet50" and data == "host", data_location=data, workers=0,
                         seed=0, total_steps=3)
    work = build(cfg)
    before = [p.detach().clone() for p in work.model.parameters()]
    step = make_step(work, work.model, precision, cfg.device)
    losses = [float(step()) for _ in range(5)]  # fp16 loss scaling may skip the first steps (overflow)
    assert all(math.isfinite(x) for x in losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, work.model.parameters(), strict=True))
    dtypes = {p.dtype for p in work.model.parameters()}
    if precision in ("fp16", "bf16"):
        assert {"fp16": torch.float16, "bf16": torch.bfloat16}[precision] in dtypes
    else:
        assert dtypes == {torch.float32}


# ------------------------------------------------------------------------------------- real launches
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "SLURM_", "OMPI_", "PMIX_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    return env


TRAIN = ["-m", "dlperf_slurm.workloads.train"]


def _args(model, warmup=2, measure=3, extra=()):
    return ["--model", model, "--tiny", "--batch-size", "4", "--warmup-steps", str(warmup),
            "--measure-steps", str(measure), "--threads", "1", *extra]


def _run(cmd, timeout=180):
    proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\nSTDOUT:\n{proc.stdout[-3000:]}\nSTDERR:\n{proc.stderr[-5000:]}"
    return proc.stdout


def check_contract(stdout, model, world, launcher, warmup=2, measure=3, batch=4):
    """Validate a whole run's :::DLPERF output against the contract; return the events."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith(PREFIX)]
    events = [parse_line(ln) for ln in lines]
    assert all(e is not None for e in events)
    kinds = [e["event"] for e in events]
    n = warmup + measure
    assert kinds == ["header"] + ["step"] * n + ["memory", "summary"], kinds  # once each: rank 0 only
    header, steps, memory, summary = events[0], events[1:-2], events[-2], events[-1]
    for key in ("suite", "model", "tiny", "rank", "world_size", "local_world_size", "nodes", "device", "device_name",
                "precision", "amp_dtype", "compile", "channels_last", "batch_size", "global_batch", "warmup_steps",
                "measure_steps", "data_location", "backend", "launcher", "versions", "hostname", "params",
                "flops_per_sample", "time"):
        assert key in header, key
    assert header["suite"] == f"pytorch-ddp/{model}" and header["tiny"] is True and header["rank"] == 0
    assert (header["world_size"], header["launcher"], header["backend"]) == (world, launcher, "gloo")
    assert header["global_batch"] == batch * world and header["device"] == "cpu"
    assert set(header["versions"]) >= {"torch", "cuda", "nccl", "python"} and header["versions"]["cuda"] is None
    assert header["versions"]["cuda_used"] is False  # a CPU build: none of its CUDA (System: "none (CPU build)")
    assert header["params"] > 0 and header["flops_per_sample"] > 0
    assert [s["step"] for s in steps] == list(range(1, n + 1))
    times = [s["time"] for s in steps]
    assert times == sorted(times) and times[0] >= header["time"]
    for s in steps:
        assert s["samples"] == batch * world and s["tiny"] is True and math.isfinite(s["loss"])
        assert s["throughput"] == pytest.approx(s["samples"] / s["step_time"])
    assert memory == {"event": "memory", "max_allocated_mib": None, "max_reserved_mib": None,
                      "nvml_peak_used_mib": None, "nvml_gpu0_mib": None, "gpu_util_mean": None, "reason": CPU_REASON,
                      "energy_j": None, "energy_s": None, "energy_basis": None, "energy_reason": CPU_ENERGY_REASON}
    window = times[warmup + measure - 1] - times[warmup - 1]
    assert summary["tiny"] is True and summary["nonfinite_loss"] is False and summary["steps"] == n
    assert summary["throughput"] == pytest.approx(batch * world * measure / window, rel=1e-9)
    assert summary["latency_ms"] == pytest.approx(1000 * window / measure, rel=1e-9)
    assert summary["tflops"] == pytest.approx(summary["throughput"] * header["flops_per_sample"] / 1e12)
    assert summary["mfu"] is None
    return events


@pytest.mark.parametrize("model, extra", [("resnet50", ()), ("bert-base", ("--data-location", "host",
                                                                            "--precision", "amp"))])
def test_torchrun_two_rank_gloo_ddp(model, extra):
    pytest.importorskip("torch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *TRAIN,
           *_args(model, extra=extra)]
    events = check_contract(_run(cmd), model, 2, "torchrun")
    assert events[0]["local_world_size"] == 2 and events[0]["nodes"] == 1
    if extra:
        assert events[0]["amp_dtype"] == "bfloat16" and events[0]["data_location"] == "host"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (OpenMPI) not on PATH")
@pytest.mark.parametrize("model, via_mpi4py", [("resnet50", False), ("bert-base", True)])
def test_mpirun_two_rank_gloo_ddp(model, via_mpi4py):
    pytest.importorskip("torch")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    if via_mpi4py:
        pytest.importorskip("mpi4py")  # rank 0 broadcasts its hostname and a free port
    else:
        cmd += ["-x", "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={_free_port()}"]
    events = check_contract(_run(cmd + [sys.executable, *TRAIN, *_args(model)]), model, 2, "mpi")
    if via_mpi4py:
        assert events[0]["master_addr"] == socket.gethostname()
    else:
        assert events[0]["master_addr"] == "127.0.0.1"


def _main_in_process(argv, monkeypatch, capsys):
    """Run the CLI in this process as a single-process launch (saves a ~4 s torch import per test)."""
    _torch()
    from dlperf_slurm.workloads import train

    for key in list(os.environ):
        if key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") or key.startswith(("SLURM_", "OMPI_")):
            monkeypatch.delenv(key)
    capsys.readouterr()
    try:
        code = train.main(argv)
    except Exception as exc:  # noqa: BLE001
        code = exc
    return code, capsys.readouterr().out


def test_nan_at_step_run_exits_0_and_parses_nonfinite_at_that_step():
    """--nan-at-step 2: a real run whose loss turns NaN at step 2 goes on to the end, exits 0, says so in its
    header, and the pytorch-ddp parser calls it NONFINITE at step 2 (never a result)."""
    pytest.importorskip("torch")
    from dlperf_slurm import parsing as lp
    from dlperf_slurm import suites
    from dlperf_slurm.model.result import ParseContext
    from dlperf_slurm.model.status import Status

    out = _run([sys.executable, *TRAIN, *_args("resnet50", extra=("--nan-at-step", "2"))])  # asserts exit 0
    events = [e for e in map(parse_line, out.splitlines()) if e]
    assert [e["event"] for e in events] == ["header", "step", "step", "error", "step", "step", "step", "memory",
                                            "summary"]
    header, summary = events[0], events[-1]
    assert header["nan_at_step"] == 2 and any("--nan-at-step" in n for n in header["notes"])
    losses = [e["loss"] for e in events if e["event"] == "step"]
    assert math.isfinite(losses[0]) and all(math.isnan(x) for x in losses[1:])
    assert events[3]["kind"] == "nonfinite_loss" and events[3]["step"] == 2
    assert summary["nonfinite_loss"] is True and summary["nonfinite_steps"] == 4
    res = suites.get("pytorch-ddp/resnet50").parse(lp.iter_text_lines(out), ParseContext(nodes=1, gpus_per_node=1,
                                                                                         batch_size=4, warmup_steps=2,
                                                                                         measure_steps=3))
    assert res.status == Status.NONFINITE and res.loss_finite is False
    assert "at step 2" in res.reason and "--nan-at-step" in res.reason, res.reason
    assert res.extra["nan_at_step"] == 2


def test_nan_at_step_is_off_by_default_and_rejects_negatives():
    from dlperf_slurm.workloads import train

    assert train.parse_args(["--model", "resnet50", "--batch-size", "2"]).nan_at_step == 0
    with pytest.raises(SystemExit):
        train.parse_args(["--model", "resnet50", "--batch-size", "2", "--nan-at-step", "-1"])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_nan_at_step_poisons_the_real_loss_and_gradients(precision):
    """In process: steps before K are finite; from K on the loss is NaN. Without loss scaling the NaN gradients
    reach the weights; fp16's loss scaling skips those steps, so its weights stay finite but the loss stays NaN."""
    torch = _torch()
    from dlperf_slurm.workloads.workload import WorkloadConfig, build, make_step

    torch.manual_seed(0)
    cfg = WorkloadConfig(model="resnet50", tiny=True, batch_size=2, precision=precision, device=torch.device("cpu"),
                         channels_last=False, data_location="device", workers=0, seed=0, total_steps=4)
    work = build(cfg)
    step = make_step(work, work.model, precision, cfg.device, nan_at_step=3)
    losses = [float(step()) for _ in range(4)]
    assert all(math.isfinite(x) for x in losses[:2]) and all(math.isnan(x) for x in losses[2:])
    weights_nan = any(torch.isnan(p).any() for p in work.model.parameters())
    assert weights_nan == (precision == "fp32")


def test_compile_flag_path_single_process(monkeypatch, capsys):
    """--compile 1 through dynamo + AOTAutograd (backend aot_eager: no C++ code generation, so it is fast)."""
    pytest.importorskip("torch")
    code, out = _main_in_process(_args("bert-base", 1, 2, ("--compile", "1", "--compile-backend", "aot_eager")),
                                 monkeypatch, capsys)
    assert code == 0
    events = check_contract(out, "bert-base", 1, "single", 1, 2)
    assert events[0]["compile"] is True and events[0]["compile_backend"] == "aot_eager"


@pytest.mark.skipif(os.environ.get("DLPERF_SLOW_TESTS") != "1",
                    reason="inductor compiles C++ on CPU: 50-130 s on 2 cores; set DLPERF_SLOW_TESTS=1")
def test_compile_inductor_single_process():
    pytest.importorskip("torch")
    out = _run([sys.executable, *TRAIN, *_args("bert-base", 1, 2, ("--compile", "1"))], timeout=600)
    assert check_contract(out, "bert-base", 1, "single", 1, 2)[0]["compile_backend"] == "inductor"


def test_compile_failure_is_a_clear_error_event(monkeypatch, capsys):
    pytest.importorskip("torch")
    code, out = _main_in_process(_args("resnet50", 1, 1, ("--compile", "1", "--compile-backend", "nosuch")),
                                 monkeypatch, capsys)
    assert isinstance(code, Exception)
    events = [e for e in map(parse_line, out.splitlines()) if e]
    assert [e["event"] for e in events] == ["header", "error"]
    assert events[1]["kind"] == "compile_failed" and "nosuch" in events[1]["message"]


def test_nonfinite_loss_is_reported_and_training_goes_on(monkeypatch, capsys):
    """A huge learning rate drives the loss to inf/NaN: an error event, all steps still run, summary says so."""
    pytest.importorskip("torch")
    code, out = _main_in_process(_args("bert-base", 1, 3, ("--lr", "1e30")), monkeypatch, capsys)
    assert code == 0
    events = [e for e in map(parse_line, out.splitlines()) if e]
    errors = [e for e in events if e["event"] == "error"]
    assert len(errors) == 1 and errors[0]["kind"] == "nonfinite_loss"
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3, 4]
    assert events[-1]["event"] == "summary" and events[-1]["nonfinite_loss"] is True


def test_num_classes_and_image_size_reach_the_resnet_from_the_matrix():
    """The pytorch-ddp/resnet50 axis num_classes and option image_size (what `search --axis num_classes` and the
    cgroup test vary) become the workload's flags and its model's classifier width and input size."""
    torch = _torch()
    import dataclasses

    from dlperf_slurm import suites
    from dlperf_slurm.model.cell import Cell, Measure
    from dlperf_slurm.workloads import train
    from dlperf_slurm.workloads.workload import WorkloadConfig, build

    suite = suites.get("pytorch-ddp/resnet50")
    cell = Cell(suite=suite.name, model="resnet50", framework="pytorch-ddp", nodes=1, gpus_per_node=1, batch_size=2,
                precision="fp32", xla=False, launcher="torchrun", params=(("num_classes", 37),))
    argv = suite.program(cell, Measure(repeats=1, warmup_steps=1, measure_steps=1),
                         {**suite.options, "tiny": True, "image_size": 48})
    args = train.parse_args(argv[3:])
    assert (args.num_classes, args.image_size) == (37, 48)
    assert "--num-classes" not in suite.program(dataclasses.replace(cell, params=()), Measure(), suite.options)
    assert suite.drop_reason(dataclasses.replace(cell, params=(("num_classes", 1),))) is not None
    assert suite.drop_reason(cell) is None
    cfg = WorkloadConfig(model="resnet50", tiny=True, batch_size=2, precision="fp32", device=torch.device("cpu"),
                         channels_last=False, data_location="device", workers=0, seed=0, total_steps=1,
                         image_size=args.image_size, num_classes=args.num_classes)
    work = build(cfg)
    assert work.model.fc.out_features == 37 and work.details["num_classes"] == 37 and work.details["image_size"] == 48


def test_each_repeat_trains_from_its_own_seed():
    """--repeat R trains from --seed + R (the header says which): two repeats of a cell are two seeds (their first
    losses differ), one repeat run twice is the same run (CPU, one thread: the same first loss)."""
    pytest.importorskip("torch")

    def first(repeat):
        out = _run([sys.executable, *TRAIN, *_args("resnet50", 1, 1, ("--seed", "5", "--repeat", str(repeat),
                                                                       "--ceiling", "0"))])
        events = [parse_line(ln) for ln in out.splitlines() if ln.startswith(PREFIX)]
        return events[0]["seed"], next(e["loss"] for e in events if e["event"] == "step")

    (s1, loss1), (s2, loss2), (s2b, loss2b) = first(0), first(1), first(1)
    assert (s1, s2, s2b) == (5, 6, 6)
    assert loss2 == loss2b and loss1 != loss2, (loss1, loss2, loss2b)
