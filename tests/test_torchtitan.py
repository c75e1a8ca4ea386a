"""The torchtitan suite (``torchtitan/llama3``): its parser on the lines torchtitan really prints (the real-log corpus,
tests/fixtures/real/torchtitan/, holds whole excerpts; here the cases those excerpts show: every rank's copy of a
line, a line cut by buffering, the validator's line, a foreign log), the parallel layout and its drop reasons, and
the command line it renders, checked against torchtitan 0.3.0's own parser where its venv is built."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.status import Status

HERE = Path(__file__).resolve().parent
REAL = HERE / "fixtures" / "real"
TT = suites.get("torchtitan/llama3")
#: https://github.com/pytorch/torchtitan/pull/2389 (2026-02-24): a run whose every rank prints the metrics line
#: without a rank label, so each step's line comes 8 times (an MoE model's run; the line is the same program's)
EIGHT_RANKS = "\n".join(
    ["[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: "
     "66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%"] * 8
    + ["[titan] 2026-02-24 19:46:19,145 - root - INFO - step:  5  loss:  7.07623  grad_norm: 46.5000  memory: "
       "66.91GiB(37.51%)  tps: 10,007  tflops: 313.36  mfu: 13.93%"] * 8)


def _ctx(gpus=2, bs=2, warmup=2, measure=18) -> ParseContext:
    return ParseContext(nodes=1, gpus_per_node=gpus, batch_size=bs, warmup_steps=warmup, measure_steps=measure)


def _cpu_log() -> list[str]:
    return (REAL / "torchtitan" / "0.3.0" / "llama3_debugmodel_cpu_fsdp2.log").read_text().splitlines()


def test_the_cpu_run_reads_tokens_per_second_over_both_ranks_and_torchtitans_own_figures():
    res = TT.parse(lp.iter_text_lines("\n".join(_cpu_log())), _ctx())
    assert res.status == Status.OK, res.reason
    tps = [float(line.split("tps: ")[1].split()[0].replace(",", "")) for line in _cpu_log() if " step: " in line
           or "step:  " in line][2:20]
    assert res.throughput_speed == pytest.approx(2 * sum(tps) / len(tps))  # tps is per device: x 2 ranks
    # the time flavour: 4 sequences of 256 tokens a step (the trainer's own line), over steps 3..20's stamps
    assert res.extra["tokens_per_step"] == 4 * 256
    assert res.throughput == pytest.approx(18 * 1024 / (29.472 - 6.825), rel=1e-6)
    assert res.mem_allocator_mib == pytest.approx(0.86 * 1024)  # the highest memory: field
    assert res.extra["program_finished"] is True and res.extra["program_peak_tflops"] == pytest.approx(312.0)
    assert "flops_per_sample" not in res.extra  # tflops 0.02: too few digits to give FLOPs per token


def test_every_ranks_copy_of_a_line_is_read_once():
    res = TT.parse(lp.iter_text_lines(EIGHT_RANKS), ParseContext(nodes=1, gpus_per_node=8, batch_size=1,
                                                                 warmup_steps=4, measure_steps=1))
    assert res.status == Status.OK and res.extra["duplicate_lines"] == 14
    assert res.throughput_speed == pytest.approx(8 * 10_007)  # thousands separators read
    assert res.latency_ms == pytest.approx(1637.0)
    assert res.extra["flops_per_sample"] == pytest.approx(313.36e12 / 10_007)


def test_a_line_cut_by_buffering_is_glued_and_the_validators_line_is_not_a_step(tmp_path):
    lines = _cpu_log()
    i = next(k for k, line in enumerate(lines) if "step: 20" in line)
    cut = lines[i].index("tps:")
    text = lines[:i] + [lines[i][:cut], "[rank0]:" + lines[i][cut:]] + [
        "[rank0]:[titan] 2026-12-01 22:05:30,100 - root - INFO - validate step: 20  loss:  2.90000  tps: 9,999"] + \
        lines[i + 1:]
    whole = TT.parse(lp.iter_text_lines("\n".join(lines)), _ctx())
    (tmp_path / "cut.log").write_text("\n".join(text) + "\n")
    for read in (lp.iter_text_lines("\n".join(text)), lp.read_lines(tmp_path / "cut.log")):  # in memory, in blocks
        res = TT.parse(read, _ctx())
        assert res.status == Status.OK and "garbled_lines" not in res.extra
        assert res.throughput_speed == pytest.approx(whole.throughput_speed)
        assert res.throughput == pytest.approx(whole.throughput)


def test_a_short_run_is_incomplete_and_a_foreign_log_launch_failed():
    end = next(k for k, line in enumerate(_cpu_log()) if "step: 10" in line)
    short = _cpu_log()[:end + 1]  # 10 of the 2 + 18 steps
    assert TT.parse(lp.iter_text_lines("\n".join(short)), _ctx()).status == Status.INCOMPLETE
    foreign = TT.parse(lp.read_lines(REAL / "pytorch_examples_rn50_2n8g.excerpt.log"), _ctx(16, 8))
    assert foreign.status == Status.LAUNCH_FAILED and foreign.throughput_speed is None


def test_a_nan_loss_makes_the_run_nonfinite():
    lines = [line.replace("loss:  3.30048", "loss:      nan") for line in _cpu_log()]
    assert TT.parse(lp.iter_text_lines("\n".join(lines)), _ctx()).status == Status.NONFINITE


# ------------------------------------------------------------------------------------------ layout

def _cell(devices="1x8", bs=2, precision="bf16", xla=False, launcher="torchrun", **params) -> Cell:
    n, g = (int(v) for v in devices.split("x"))
    full = {**TT.axis_defaults, **params}
    return Cell(suite=TT.name, model="llama3", framework="torchtitan", nodes=n, gpus_per_node=g, batch_size=bs,
                precision=precision, xla=xla, launcher=launcher, params=tuple(sorted(full.items())))


@pytest.mark.parametrize("params,why", [
    ({}, None),
    ({"tp": 2, "pp": 2, "dp_replicate": 2}, None),  # dp_shard -1: the 1 GPU left of 8
    ({"tp": 3}, "8 GPUs (1n8g) are not a multiple of dp_replicate 1 x cp 1 x tp 3 x pp 1 = 3: no whole dp_shard"),
    ({"dp_shard": 2, "tp": 2}, "dp_replicate 1 x dp_shard 2 x cp 1 x tp 2 x pp 1 = 4 ranks, the cell has 8 GPUs"),
    ({"flavor": "8B", "tp": 16, "dp_shard": 1}, "tp 16 x pp 1 = 16 ranks, the cell has 8 GPUs"),
    ({"flavor": "8B", "tp": 8, "dp_shard": 1, "dp_replicate": 1}, None),
    ({"flavor": "debugmodel", "tp": 8}, None),
    ({"flavor": "405B", "tp": 4, "pp": 2}, "llama3_405b config trains in Float8 only: precision fp8"),
    ({"ep": 2}, "dense model: expert parallelism (ep) must be 1"),
    ({"flavor": "13B"}, "flavor '13B' is none of torchtitan's configs"),
    ({"dp_shard": 0}, "dp_shard = 0: a parallel degree is >= 1 (dp_shard -1: the GPUs the others leave)"),
    ({"cp": 0}, "cp = 0: a parallel degree is >= 1"),
    ({"tp": 2.5}, "tp = 2.5: a whole number is wanted"),  # never cut to 2
    ({"ep": True}, "ep = True: a whole number is wanted"),
    ({"seq_len": 10 ** 20}, "seq_len 100000000000000000000 is not in 1..131,072 (the model's max_seq_len)"),
    ({"seq_len": 8191, "tp": 8}, "seq_len 8191 is not a multiple of tp 8 = 8"),
    ({"seq_len": 8190, "cp": 2}, "seq_len 8190 is not a multiple of tp 1 x 2 x cp 2 = 4"),
    ({"seq_len": 8192, "cp": 2, "tp": 2}, None),
    ({"flavor": "debugmodel", "pp": 8}, "16 pipeline stages of pp 8 (2 a rank: Interleaved1F1B), more than its 6 "
                                        "layers + embedding + output"),
    ({"flavor": "debugmodel", "pp": 4}, None),  # 8 stages over 6 layers + 2
    ({"global_batch": 20}, "global_batch 20 is not a multiple of local batch 2 x data-parallel size 8 = 16"),
    ({"global_batch": 64}, None),
])
def test_drop_reasons(params, why):
    reason = TT.drop_reason(_cell(**params))
    assert (reason is None) if why is None else (why in (reason or "")), reason


def test_tensor_parallel_must_divide_the_key_value_heads():
    assert "llama3 8B: 8 key/value heads cannot be split over tp 16" in TT.drop_reason(
        _cell("2x8", flavor="8B", tp=16, dp_shard=1))
    assert TT.drop_reason(_cell("2x8", flavor="debugmodel", tp=16, dp_shard=1)) is None  # 16 heads, no GQA


def test_float8_only_where_torchtitan_has_a_config_for_it():
    assert TT.drop_reason(_cell(precision="fp8")) is None
    assert TT.drop_reason(_cell(precision="fp8", flavor="405B", xla=True, tp=8)) is None  # llama3_405b is Float8
    assert "runs only compiled: xla = true" in TT.drop_reason(_cell(precision="fp8", flavor="405B", tp=8))
    assert "no float8 config for llama3 8B (it has one for debugmodel, 405B)" in TT.drop_reason(
        _cell(precision="fp8", flavor="8B"))
    assert "--config llama3_debugmodel_float8" in " ".join(TT.program(_cell(precision="fp8"), Measure(), TT.options))
    assert "precision 'amp'" in TT.drop_reason(_cell(precision="amp"))


def test_layout_global_batch_and_accumulation():
    hsdp = _cell("4x8", bs=2, dp_replicate=2, dp_shard=2, tp=4, pp=2, global_batch=32)
    assert TT.layout(hsdp) == {"dp_shard": 2, "dp_replicate": 2, "tp": 4, "pp": 2, "cp": 1, "ep": 1, "dp": 4,
                               "micro": 2, "global": 32, "accumulation": 4, "seq": 2048}
    assert TT.global_batch(_cell("2x8", bs=1, tp=2)) == 8  # dp_shard -1: 16 / 2
    assert TT.global_batch(_cell("1x8", bs=4, cp=2, dp_shard=4)) == 16


def test_program_flags():
    argv = TT.program(_cell("2x8", bs=1, xla=True, flavor="8B", tp=2, seq_len=8192, activation_checkpointing="full"),
                      Measure(warmup_steps=10, measure_steps=50), {**TT.options, "hf_assets_path": "/a", "overrides":
                                                                   "--training.gc-freq 10"})
    joined = " ".join(argv)
    assert argv[:3] == ["python3", "-m", "torchtitan.train"]
    for want in ("--module llama3 --config llama3_8b", "--training.steps 60", "--training.local-batch-size 1",
                 "--training.global-batch-size 8", "--training.seq-len 8192",
                 "--parallelism.data-parallel-shard-degree 8", "--parallelism.tensor-parallel-degree 2",
                 "--compile.enable --compile.components model,loss", "--metrics.log-freq 1",
                 "--checkpoint.no-enable", "--validator.no-enable", "--profiler.no-enable-profiling",
                 "--metrics.no-enable-tensorboard",
                 "--dump-folder {run_dir}", "--hf-assets-path /a", "--training.gc-freq 10"):
        assert want in joined, want
    assert argv[-1] == "activation-checkpoint:full"  # tyro's subcommand: after every flag
    srun = TT.program(_cell("2x8", launcher="srun"), Measure(), TT.options)
    assert srun[:2] == ["bash", "-c"] and 'RANK="$SLURM_PROCID"' in srun[2]


def test_options_are_checked():
    assert "cannot be split" in TT.option_error("overrides", "--a 'b")
    # a flag the suite sets from the cell would run another cell than the one labelled
    why = TT.option_error("overrides", "--parallelism.tensor_parallel_degree 4 --training.steps=1000")
    assert "--parallelism.tensor_parallel_degree, --training.steps=1000: set by the suite from the cell" in why
    assert TT.option_error("overrides", "--parallelism.pipeline-parallel-schedule Interleaved1F1B") is None
    assert "must name a data set" in TT.option_error("dataset", "")
    assert "Python module name" in TT.option_error("entry", "torchtitan.train; rm -rf /")
    assert TT.option_error("entry", "torchtitan.train") is None


def _venv_python():
    sys.path.insert(0, str(HERE / "frameworks"))
    import venvs

    return venvs.python_for("torchtitan")


_READ_BACK = ("import sys, json\nfrom torchtitan.config import ConfigManager\nc = ConfigManager().parse_args(sys.argv[1:])\n"
              "p, t = c.parallelism, c.training\nprint(json.dumps([p.data_parallel_replicate_degree, "
              "p.data_parallel_shard_degree, p.tensor_parallel_degree, p.pipeline_parallel_degree, "
              "p.context_parallel_degree, t.local_batch_size, t.global_batch_size, t.seq_len, t.steps, "
              "t.mixed_precision_param, c.compile.enable, type(c.activation_checkpoint).__name__, c.dump_folder]))")


@pytest.mark.slow
def test_torchtitans_own_parser_takes_every_flag_the_suite_renders(tmp_path):
    """torchtitan 0.3.0's ConfigManager (tyro) parses the rendered argv of a layout with every degree set and
    compile: each flag is one it knows, with the value the suite meant. Its float8 config is refused here as
    torchtitan refuses it on any GPU older than SM89 (this machine has none)."""
    py, why = _venv_python()
    if py is None:
        pytest.skip(why)

    def read_back(cell):
        argv = TT.program(cell, Measure(warmup_steps=2, measure_steps=3), {**TT.options, "dataset_path": "/d"})
        args = [a.replace("{run_dir}", str(tmp_path)) for a in argv[3:]]
        return subprocess.run([str(py), "-c", _READ_BACK, *args], capture_output=True, text=True, timeout=300)

    layout = dict(dp_replicate=2, dp_shard=2, tp=2, pp=2, cp=2, global_batch=32, seq_len=512)
    p = read_back(_cell("4x8", bs=2, precision="fp32", xla=True, activation_checkpointing="none", **layout))
    assert p.returncode == 0, p.stderr[-3000:]
    import json

    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got == [2, 2, 2, 2, 2, 2, 32, 512, 5, "float32", True, "NoneType", str(tmp_path)], got
    p = read_back(_cell("4x8", bs=2, precision="fp8", **layout))
    assert p.returncode != 0 and "float8 is only supported on NVIDIA SM89 or later" in p.stderr, p.stderr[-3000:]


DS = suites.get("torchtitan/deepseek-v3")


def _ds_cell(devices="1x8", **params) -> Cell:
    n, g = (int(v) for v in devices.split("x"))
    full = {**DS.axis_defaults, **params}
    return Cell(suite=DS.name, model="deepseek-v3", framework="torchtitan", nodes=n, gpus_per_node=g, batch_size=2,
                precision="bf16", xla=False, launcher="torchrun", params=tuple(sorted(full.items())))


@pytest.mark.parametrize("params,why", [
    ({"ep": 8}, None),  # the debug model's 8 experts over the 8 ranks dp_shard lends
    ({"ep": 4, "tp": 2}, None),  # ep borrows from dp_shard 4 x tp 2
    ({"ep": 16}, "ep 16 must divide the 8 routed experts of deepseek_v3 debugmodel and dp_shard x cp x tp = 8"),
    ({"flavor": "16B", "ep": 3}, "ep 3 must divide the 64 routed experts"),
    ({"flavor": "16B", "ep": 4, "dp_replicate": 2}, None),  # dp_shard 4: ep 4 fits
    ({"flavor": "16B", "ep": 8, "dp_replicate": 2}, "dp_shard x cp x tp = 4"),  # dp_replicate lends no ranks
])
def test_expert_parallel_borrows_from_fsdp_and_tensor_parallel(params, why):
    reason = DS.drop_reason(_ds_cell(**params))
    assert (reason is None) if why is None else (why in (reason or "")), reason


def test_expert_or_pipeline_parallel_turn_torchtitans_cuda_graphs_off():
    flag = "--training.disable-cuda-graphs"
    assert flag in DS.program(_ds_cell(ep=8), Measure(), DS.options)
    assert flag not in DS.program(_ds_cell(), Measure(), DS.options)
    assert flag in TT.program(_cell(pp=2), Measure(), TT.options)
    assert "--module deepseek_v3 --config deepseek_v3_16b" in " ".join(
        DS.program(_ds_cell(flavor="16B", ep=8), Measure(), DS.options))
    assert "no float8 config for deepseek_v3 16B (it has one for 671B)" in DS.drop_reason(
        dataclasses.replace(_ds_cell(flavor="16B"), precision="fp8"))


def test_a_memory_field_of_zero_on_every_line_is_no_figure():
    """pytorch/torchtitan#1437's run printed ``memory:  0.00GiB(0.00%)`` on every line: no measurement, not 0 MiB."""
    res = DS.parse(lp.read_lines(REAL / "torchtitan" / "2025-07" / "deepseek_v3_debugmodel_flex_1n8g.excerpt.log"),
                   ParseContext(nodes=1, gpus_per_node=8, batch_size=8, warmup_steps=3, measure_steps=7))
    assert res.status == Status.OK and res.mem_allocator_mib is None and "0.00GiB" in res.mem_reason


def test_overrides_may_change_no_flag_the_suite_renders():
    """The list the overrides are checked against is every flag the program sets, for layouts that render each of
    its optional flags: a flag added to the program and not to the list fails here."""
    from dlperf_slurm.suites.torchtitan import OWN_FLAGS, flag_key

    options = {**TT.options, "dataset_path": "/d", "hf_assets_path": "/a"}
    rendered = {flag_key(a) for cell in (_cell(), _cell(xla=True, pp=2), _ds_cell(ep=8))
                for a in (TT if cell.suite == TT.name else DS).program(cell, Measure(), options) if a.startswith("--")}
    assert rendered == OWN_FLAGS, (rendered - OWN_FLAGS, OWN_FLAGS - rendered)
    for word in ("--checkpoint.enable", "--validator.enable", "--profiler.no-enable-profiling", "--training.steps=9"):
        assert "set by the suite from the cell" in TT.option_error("overrides", word), word


def test_a_refused_start_reads_the_ranks_error_not_torchruns_wrapper():
    """torchtitan 0.3.0 refusing its float8 config on this CPU (a real run): torchrun's ChildFailedError comes
    after the rank's ValueError and says only that a rank failed."""
    res = TT.parse(lp.read_lines(REAL / "torchtitan" / "0.3.0" / "llama3_debugmodel_float8_refused_on_cpu.log"),
                   _ctx(warmup=2, measure=4))
    assert res.status == Status.LAUNCH_FAILED
    assert "last error: ValueError: Failed to swap to Float8Linear because float8 is only supported on NVIDIA SM89" \
        in res.reason, res.reason


QW = suites.get("torchtitan/qwen3")

_CONFIGS = ("import sys, json\nfrom torchtitan.config import ConfigManager\nout = []\n"
            "for argv in json.loads(sys.argv[1]):\n"
            "    try:\n"
            "        c = ConfigManager().parse_args(argv)\n"
            "        out.append(c.parallelism.expert_parallel_degree)\n"
            "    except BaseException as err:\n"
            "        out.append(f'{type(err).__name__}: {err}')\n"
            "print(json.dumps(out))")


@pytest.mark.slow
def test_every_flavors_config_is_one_torchtitan_has(tmp_path):
    """Each flavor of each torchtitan suite (llama3, qwen3, gpt_oss, deepseek_v3), rendered as the suite renders it (expert
    parallel 2 for a mixture of experts), is parsed by torchtitan 0.3.0's own ConfigManager: its --config is one the
    registry has for its --module, with the expert degree meant; a Float8 config is refused as torchtitan refuses it
    on any GPU before SM89 (this machine has none), which shows the config is there."""
    py, why = _venv_python()
    if py is None:
        pytest.skip(why)
    import json

    cases, argvs = [], []
    for s in (TT, QW, suites.get("torchtitan/gpt-oss"), DS):
        for name, fl in s.flavors.items():
            for precision in [p for p, c in (("bf16", fl.config), ("fp8", fl.float8)) if c]:
                ep = 2 if fl.experts else 1
                c = Cell(suite=s.name, model=s.model, framework="torchtitan", nodes=1, gpus_per_node=8, batch_size=1,
                         precision=precision, xla=fl.compiled, launcher="torchrun",
                         params=tuple(sorted({**s.axis_defaults, "flavor": name, "ep": ep, "seq_len": 256}.items())))
                argv = s.program(c, Measure(warmup_steps=1, measure_steps=1), {**s.options, "dataset_path": "/d"})
                cases.append((s.module, name, precision, ep))
                argvs.append([a.replace("{run_dir}", str(tmp_path)) for a in argv[3:]])
    p = subprocess.run([str(py), "-c", _CONFIGS, json.dumps(argvs)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    bad = [(case, g) for case, g in zip(cases, got)
           if g != case[3] and not (case[2] == "fp8" and "float8 is only supported on NVIDIA SM89" in str(g))]
    assert not bad, bad


def test_qwen3_layouts_follow_its_models():
    def cell(devices="1x8", **params):
        n, g = (int(v) for v in devices.split("x"))
        return Cell(suite=QW.name, model="qwen3", framework="torchtitan", nodes=n, gpus_per_node=g, batch_size=1,
                    precision="bf16", xla=False, launcher="torchrun",
                    params=tuple(sorted({**QW.axis_defaults, **params}.items())))

    assert QW.drop_reason(cell(flavor="30B-A3B", ep=8, seq_len=4096)) is None
    assert "4 key/value heads cannot be split over tp 8" in QW.drop_reason(cell(flavor="30B-A3B", tp=8))
    assert "a dense model: expert parallelism (ep) must be 1" in QW.drop_reason(cell(flavor="14B", ep=2))
    assert "seq_len 8192 is not in 1..4,096" in QW.drop_reason(cell(flavor="debugmodel", seq_len=8192))
    assert "no float8 config for qwen3 debugmodel" in QW.drop_reason(dataclasses.replace(cell(), precision="fp8"))
    argv = QW.program(cell(flavor="debugmodel_moe", ep=2, seq_len=256), Measure(warmup_steps=2, measure_steps=3),
                      QW.options)
    assert argv[3:7] == ["--module", "qwen3", "--config", "qwen3_moe_debug"]
    assert argv[argv.index("--parallelism.expert-parallel-degree") + 1] == "2"
