"""The Megatron-Bridge suites (``megatron-bridge/llama3``, ``qwen3``, ``deepseek-v3``, ``gpt-oss``): the recipe's command
line they render, read back by Megatron-Bridge's own released parser of its performance scripts (0.4.0 and 0.6.0,
tests/fixtures/real/Megatron-Bridge/argument_parser/), the layouts refused before submission as Megatron-core would
refuse them, and its real logs in tokens (the corpus, tests/test_real_corpus.py, reads them as the other suites'
logs)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from dlperf_slurm import events as ev
from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.matrix import loader
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.status import Status

HERE = Path(__file__).resolve().parent
MB = HERE / "fixtures" / "real" / "Megatron-Bridge"
ROOT = HERE.parent
LLAMA = suites.get("megatron-bridge/llama3")
QWEN = suites.get("megatron-bridge/qwen3")
DSV3 = suites.get("megatron-bridge/deepseek-v3")


def _cell(suite=LLAMA, devices="8x8", bs=1, precision="bf16", launcher="srun", **params) -> Cell:
    n, g = (int(v) for v in devices.split("x"))
    full = {**suite.axis_defaults, **params}
    c = Cell(suite=suite.name, model=suite.model, framework=suite.framework, nodes=n, gpus_per_node=g, batch_size=bs,
             precision=precision, xla=False, launcher=launcher, params=tuple(sorted(full.items())))
    import dataclasses

    return dataclasses.replace(c, program_batch=suite.global_batch(c))


def _bridge_parser(version: str):
    """Megatron-Bridge's released ``argument_parser.py`` of that version, loaded as its scripts load it; its one
    import outside the standard library (nemo_run.config.get_nemorun_home, the --nemo_home default) stood in for."""
    fake = types.ModuleType("nemo_run.config")
    fake.get_nemorun_home = lambda: "/tmp/nemo_run"  # type: ignore[attr-defined]
    sys.modules.setdefault("nemo_run", types.ModuleType("nemo_run"))
    sys.modules["nemo_run.config"] = fake
    path = MB / "argument_parser" / f"argument_parser_v{version}.py"
    spec = importlib.util.spec_from_file_location(f"mb_argument_parser_{version.replace('.', '_')}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.parse_cli_args()


def _argv(suite, cell, measure=Measure(warmup_steps=10, measure_steps=40), **options):
    argv = suite.program(cell, measure, {**suite.options, **options})
    if argv[0] == "bash":  # under srun: bash -c '<ranks>' dlperf python3 script ...
        argv = argv[4:]
    return [a.replace("{run_dir}", "/runs/r0.work") for a in argv]


@pytest.mark.parametrize("version", ["0.4.0", "0.6.0"])
def test_megatron_bridges_own_parser_takes_every_flag_the_suite_renders(version):
    """Each rank's run_script.py / bootstrap.py parses its command line with parse_known_args: every flag the suite
    renders is one that release knows, with the value the cell meant, and what it does not know is exactly the
    Hydra-style overrides (the logging keys), which its scripts apply to the recipe."""
    parser = _bridge_parser(version)
    cell = _cell(devices="8x8", recipe="llama3_70b", tensor_parallel=4, pipeline_parallel=8, virtual_pipeline=5,
                 global_batch=256, precision="fp8")
    argv = _argv(LLAMA, cell)
    assert argv[:2] == ["python3", "/opt/Megatron-Bridge/scripts/performance/bootstrap.py"]
    args, unknown = parser.parse_known_args(argv[2:])
    assert (args.model_family_name, args.model_recipe_name, args.gpu, args.compute_dtype) == \
        ("llama", "llama3_70b", "h100", "fp8_cs")
    assert (args.num_gpus, args.gpus_per_node) == (64, 8)
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size,
            args.virtual_pipeline_model_parallel_size) == (4, 8, 1, 5)
    assert (args.micro_batch_size, args.global_batch_size, args.seq_length, args.max_steps) == (1, 256, 8192, 50)
    assert args.use_megatron_fsdp is False and args.save_config_filepath == "/runs/r0.work/ConfigContainer.yaml"
    assert unknown == ["logger.log_interval=1", "logger.log_throughput=true", "ddp.use_megatron_fsdp=false"]
    # run_script.py (0.4-0.5): NeMo-Run's PerfEnvPlugin's manual garbage collection, which bootstrap.py's recipe sets
    args, unknown = parser.parse_known_args(_argv(LLAMA, cell, script="scripts/performance/run_script.py")[2:])
    assert unknown[-2:] == ["train.manual_gc=true", "train.manual_gc_interval=100"]
    # a mixture of experts: expert and expert-tensor degrees; no interleaving is "-vp None"; MXFP8 on a GB200
    cell = _cell(QWEN, devices="2x4", bs=4, precision="mxfp8", gpu="gb200", expert_parallel=8, global_batch=512)
    args, unknown = parser.parse_known_args(_argv(QWEN, cell, log_energy=True)[2:])
    assert (args.model_family_name, args.model_recipe_name, args.gpu, args.compute_dtype) == \
        ("qwen", "qwen3_30b_a3b", "gb200", "fp8_mx")
    assert (args.expert_model_parallel_size, args.expert_tensor_parallel_size) == (8, 1)
    assert args.virtual_pipeline_model_parallel_size is None and args.seq_length == 4096
    assert unknown == ["logger.log_interval=1", "logger.log_throughput=true", "ddp.use_megatron_fsdp=false",
                       "logger.log_energy=true"]


def test_the_matrix_of_the_published_h100_rows_plans_their_layouts():
    m = loader.load(ROOT / "matrices" / "megatron-bridge-h100.toml", site=False)
    got = {(c.suite, c.shape, c.param("recipe", suites.get(c.suite).axis_defaults["recipe"]), c.global_batch)
           for c in m.cells}
    assert got == {("megatron-bridge/llama3", "8n8g", "llama3_70b", 256),
                   ("megatron-bridge/qwen3", "2n8g", "qwen3_30b_a3b", 1024),
                   ("megatron-bridge/gpt-oss", "8n8g", "gpt_oss_120b", 1280)}
    assert not m.dropped  # every published row plans (the [axes] cells themselves are excluded, not dropped)
    lay = {c.suite: suites.get(c.suite).layout(c) for c in m.cells}
    assert lay["megatron-bridge/llama3"]["dp"] == 2 and lay["megatron-bridge/llama3"]["accumulation"] == 128
    assert lay["megatron-bridge/qwen3"]["dp"] == 16 and lay["megatron-bridge/qwen3"]["accumulation"] == 64
    assert lay["megatron-bridge/gpt-oss"]["dp"] == 16 and lay["megatron-bridge/gpt-oss"]["accumulation"] == 80


@pytest.mark.parametrize("suite,devices,params,precision,why", [
    (LLAMA, "8x8", {"recipe": "llama3_70b", "tensor_parallel": 4, "pipeline_parallel": 8, "virtual_pipeline": 5,
                    "global_batch": 256}, "fp8", None),  # the published H100 row
    (LLAMA, "2x8", {"tensor_parallel": 3}, "bf16", "16 GPUs (2n8g) are not a multiple of tensor_parallel x "
                                                  "pipeline_parallel x context_parallel = 3 x 1 x 1 = 3"),
    (LLAMA, "1x8", {"tensor_parallel": 16, "context_parallel": 1}, "bf16", "not a multiple of"),
    (QWEN, "1x8", {"tensor_parallel": 8}, "bf16", "qwen3_30b_a3b: 32 attention heads and 4 key/value groups cannot be "
                                                 "split over tensor_parallel 8"),
    (LLAMA, "1x8", {"context_parallel": 4, "seq_length": 4100}, "bf16",
     "seq_length 4100 is not a multiple of 2 x context_parallel 4 = 8"),
    (LLAMA, "1x8", {"tensor_parallel": 8, "seq_length": 8196}, "bf16",
     "seq_length 8196 is not a multiple of tensor_parallel 8 = 8 (Megatron-core splits the sequence over them)"),
    (LLAMA, "8x8", {"recipe": "llama3_70b", "pipeline_parallel": 3, "tensor_parallel": 1, "context_parallel": 1},
     "bf16", "not a multiple of"),
    (LLAMA, "6x8", {"recipe": "llama3_70b", "pipeline_parallel": 3}, "bf16",
     "llama3_70b: 80 layers do not split into pipeline_parallel x virtual_pipeline = 3 x 1 = 3 stages evenly"),
    (LLAMA, "8x8", {"recipe": "llama3_70b", "pipeline_parallel": 8, "virtual_pipeline": 3, "global_batch": 64},
     "bf16", "80 layers do not split into pipeline_parallel x virtual_pipeline = 8 x 3 = 24 stages"),
    (LLAMA, "128x8", {"recipe": "llama31_405b", "tensor_parallel": 8, "pipeline_parallel": 8, "context_parallel": 2,
                      "virtual_pipeline": 8, "global_batch": 1536}, "fp8", None),  # (126 + 2) / 64: the published
    (LLAMA, "128x8", {"recipe": "llama31_405b", "tensor_parallel": 8, "pipeline_parallel": 8, "context_parallel": 2,
                      "virtual_pipeline": 4, "global_batch": 1536}, "fp8", None),
    (LLAMA, "128x8", {"recipe": "llama31_405b", "tensor_parallel": 8, "pipeline_parallel": 8, "context_parallel": 2,
                      "virtual_pipeline": 5, "global_batch": 1536}, "fp8",
     "126 layers + embedding + loss do not split into pipeline_parallel x virtual_pipeline = 8 x 5 = 40 stages"),
    (DSV3, "32x8", {"pipeline_parallel": 8, "virtual_pipeline": 4, "expert_parallel": 32, "global_batch": 256}, "bf16",
     None),
    (DSV3, "32x8", {"pipeline_parallel": 2, "expert_parallel": 32}, "bf16",
     "deepseek_v3: its recipe has a pipeline layout of its 61 layers for (pipeline_parallel, virtual_pipeline) in"),
    (LLAMA, "1x8", {"global_batch": 12}, "bf16", "global_batch 12 is not a multiple of micro batch 1 x data-parallel "
                                                "size 8 = 8"),
    (LLAMA, "1x8", {"virtual_pipeline": 2}, "bf16", "virtual_pipeline > 1 (2) needs pipeline_parallel > 1"),
    (LLAMA, "1x8", {"pipeline_parallel": 4, "virtual_pipeline": 2, "global_batch": 6}, "bf16",
     "micro batches of a step (3: global_batch / (micro batch x data-parallel size)) to be a multiple of "
     "pipeline_parallel 4"),
    (LLAMA, "8x8", {"pipeline_parallel": 8, "virtual_pipeline": 8, "global_batch": 64}, "bf16",
     "llama3_8b: 32 layers do not split into pipeline_parallel x virtual_pipeline = 8 x 8 = 64 stages evenly"),
    (QWEN, "1x8", {"expert_parallel": 16}, "bf16", "8 GPUs are not a multiple of expert_tensor_parallel x "
                                                  "expert_parallel x pipeline_parallel = 1 x 16 x 1 = 16"),
    (QWEN, "3x8", {"expert_parallel": 3, "tensor_parallel": 1}, "bf16",
     "qwen3_30b_a3b: its 128 experts are not a multiple of expert_parallel 3"),
    (DSV3, "2x8", {"expert_parallel": 32}, "bf16", "16 GPUs are not a multiple of expert_tensor_parallel x "
                                                  "expert_parallel x pipeline_parallel = 1 x 32 x 1 = 32"),
    (LLAMA, "1x8", {}, "mxfp8", "MXFP8 (mxfp8) needs a Blackwell GPU, which h100 is not"),
    (LLAMA, "1x8", {"gpu": "b200"}, "nvfp4", None),
    (LLAMA, "1x8", {"gpu": "a100"}, "bf16", "gpu 'a100' is none of Megatron-Bridge's recipe GPUs"),
    (LLAMA, "1x8", {"recipe": "llama3_1b"}, "bf16", "recipe 'llama3_1b' is none of the suite's Megatron-Bridge recipes of family llama"),
    (LLAMA, "1x8", {"tensor_parallel": 0}, "bf16", "tensor_parallel = 0: a parallel degree"),
    (LLAMA, "1x8", {"tensor_parallel": "2"}, "bf16", "tensor_parallel = '2': a whole number is wanted"),
    (LLAMA, "1x8", {}, "fp32", "megatron-bridge/llama3 has no precision 'fp32'"),
])
def test_drop_reasons(suite, devices, params, precision, why):
    got = suite.drop_reason(_cell(suite, devices=devices, precision=precision, **params))
    if why is None:
        assert got is None
    else:
        assert got is not None and why in got, got


def test_a_dense_model_has_no_expert_axes_and_the_matrix_says_so(tmp_path):
    assert "expert_parallel" not in LLAMA.axes and "expert_parallel" in QWEN.axes
    p = tmp_path / "m.toml"
    p.write_text('suite = "megatron-bridge/llama3"\nname = "x"\n[axes]\ndevices = ["1x8"]\nbatch_size = [1]\n'
                 'precision = ["bf16"]\nexpert_parallel = [2]\n')
    from dlperf_slurm.errors import UserError

    with pytest.raises(UserError) as err:
        loader.load(p, site=False)
    assert "expert_parallel" in str(err.value)


def test_overrides_may_add_flags_but_change_none_the_suite_sets():
    assert LLAMA.option_error("overrides", "--moe_flex_dispatcher_backend deepep comm_overlap.tp_comm_overlap=false") \
        is None
    for word in ("-tp 2", "--max_steps=9", "train.train_iters=5", "+logger.log_energy=true", "-hf secret",
                 "--max_step 9", "--global_batch 64", "--tensor_model 2", "--num_layers 4", "--data rp2"):
        why = LLAMA.option_error("overrides", word)
        assert why and "set by the suite from the cell" in why, (word, why)
    assert "cannot be split" in LLAMA.option_error("overrides", "'unclosed")


def _job_line(command: str) -> str:
    return ev.format_line(ev.EV_JOB, **{ev.COMMAND: command})


def test_the_real_025_log_reads_in_tokens_from_the_commands_sequence_length():
    """Megatron-Bridge 0.2.0rc7's real log (2025-10: one 10-iteration interval, global batch 512, its Step Time
    line's TFLOP/s/GPU as printed): with the job's command saying -sl 1024, tokens/s are the samples x 1024 and
    the model FLOPs per token the program's own TFLOP/s over them; [after training is done] is the normal end."""
    text = (MB / "2025-10" / "llama32_1b_8xh100.excerpt.log").read_text()
    ctx = ParseContext(nodes=1, gpus_per_node=8, batch_size=1, warmup_steps=0, measure_steps=10, precision="bf16")
    cmd = "srun ... python3 /opt/Megatron-Bridge/scripts/performance/run_script.py -m llama -sl 1024 -ms 10"
    res = LLAMA.parse(lp.iter_text_lines(_job_line(cmd) + "\n" + text), ctx)
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(512 * 1024 * 10 / (10 * 4.6478))
    assert res.latency_ms == pytest.approx(4647.8)
    assert res.extra["seq_length"] == 1024 and "-sl 1024" in res.extra["tokens_basis"]
    assert res.extra["reported_tflops_per_gpu_mean"] == 59892.5  # as the program printed it
    assert res.extra["flops_per_sample"] == pytest.approx(59892.5e12 * 8 / (512 * 1024 / 4.6478))
    assert res.extra.get("program_finished") is True
    # the same log without a job event: no sequence length, so its figures stay samples/s, and it says why
    res = LLAMA.parse(lp.iter_text_lines(text), ctx)
    assert res.throughput == pytest.approx(512 / 4.6478)
    assert res.extra["tokens_basis"].startswith("none: the job's command gives no -sl")


def test_the_real_2025_12_log_behind_nemo_runs_task_prefix():
    text = (MB / "2025-12" / "megatron_bridge_fp8_mx.excerpt.log").read_text()
    ctx = ParseContext(nodes=1, gpus_per_node=8, batch_size=1, warmup_steps=0, measure_steps=50, precision="mxfp8")
    res = QWEN.parse(lp.iter_text_lines(_job_line("python3 run_script.py --seq_length=4096") + "\n" + text), ctx)
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(512 * 4096 / 9.0890)
    assert res.extra["reported_tflops_per_gpu_mean"] == 663.5


#: NVIDIA-NeMo/Megatron-Bridge PR #841 (2025-10-01), its description: a run's log as pasted there, re-flowed at 88
#: columns, so that no iteration record stands on one line
PR_841 = """\
 [2025-10-02 22:52:07] iteration       10/      50 | consumed samples:         5120 |
elapsed time per iteration (ms): 13212.7 | learning rate: 3.000000E-04 | global batch
size:   512 | lm loss: 4.474437E+00 | loss scale: 1.0 | grad norm: 0.704 | number of s
kipped iterations:   0 | number of nan iterations:   0 |
[Rank 0] (after 10 iterations) memory (MB) | allocated: 11908.05029296875 | max alloca
ted: 12712.43603515625 | reserved: 12954.0 | max reserved: 12954.0
Step Time : 14.26s GPU utilization: 58.2TFLOP/s/GPU
 [2025-10-02 22:54:30] iteration       20/      50 | consumed samples:        10240 |
elapsed time per iteration (ms): 14260.3 | learning rate: 2.604594E-04 | global batch
size:   512 | lm loss: 8.797448E-02 | loss scale: 1.0 | grad norm: 0.170 | number of s
kipped iterations:   0 | number of nan iterations:   0 |
"""


def test_a_reflowed_paste_is_refused_with_its_reason_not_read_as_steps():
    ctx = ParseContext(nodes=1, gpus_per_node=8, batch_size=1, warmup_steps=10, measure_steps=10, precision="bf16")
    res = LLAMA.parse(lp.iter_text_lines(PR_841), ctx)
    assert res.throughput is None and res.extra.get("wrapped_records", 0) >= 1
    assert "wrapped over several lines" in res.reason, res.reason


def test_the_programs_end_of_training_line_is_evidence_of_a_normal_end():
    """A job gone from the queue without an exit marker (killed hard after training: during the final checkpoint
    or evaluation that Megatron runs after it) is FAILED unless its log has the complete window and Megatron's own
    "[after training is done]": then the figure stands (row 13 of outcome.decision's table)."""
    from dlperf_slurm.outcome import decision

    text = (MB / "2025-10" / "llama32_1b_8xh100.excerpt.log").read_text()
    ctx = ParseContext(nodes=1, gpus_per_node=8, batch_size=1, warmup_steps=0, measure_steps=10, precision="bf16")
    done = LLAMA.parse(lp.iter_text_lines(text), ctx)
    cut = LLAMA.parse(lp.iter_text_lines(text.split("[after training is done]")[0]), ctx)
    assert done.status == cut.status == Status.OK and "program_finished" not in cut.extra
    got = decision.decide(decision.Evidence(asked=True, log=done, has_log=True))
    assert got is not None and got.status == Status.OK and "end of training" in got.reason and got.rule == 13
    got = decision.decide(decision.Evidence(asked=True, log=cut, has_log=True))
    assert got is not None and got.status == Status.FAILED and "without an exit marker" in got.reason


def test_the_summary_tables_show_each_cells_layout_from_a_campaign_not_from_a_bare_tree(tmp_path):
    """The layout the campaign gave the program (degrees, data-parallel size, accumulation) is a column of the
    cell's table; a log read without a manifest (collect --from) knows only its shape, so it gets no layout."""
    from dlperf_slurm.collect import cells, runparse
    from dlperf_slurm.report import tables

    cell = _cell(devices="8x8", recipe="llama3_70b", tensor_parallel=4, pipeline_parallel=8, virtual_pipeline=5,
                 global_batch=256, precision="fp8")
    assert LLAMA.layout_text(cell) == "tp4 pp8 cp1 dp2 vpp5 GA128"
    moe = _cell(QWEN, devices="2x8", expert_parallel=16, global_batch=1024, precision="fp8")
    assert QWEN.layout_text(moe) == "tp1 pp1 cp1 dp16 ep16 GA64"
    log = tmp_path / "r.log"
    log.write_text(_job_line("python3 run_script.py -sl 8192") + "\n"
                   + (MB / "2025-10" / "llama32_1b_8xh100.excerpt.log").read_text())
    spec = runparse.RunSpec(key=f"{cell.id}.r0", cell=cell, repeat=0, log=str(log), state="OK", warmup_steps=0,
                            measure_steps=10, campaign="c")
    row = runparse.parse_run(spec)
    assert row.extra["layout"] == "tp4 pp8 cp1 dp2 vpp5 GA128"
    (c,) = cells.cells_of([row])
    headers, rows = tables.group_table([c])
    assert headers[:3] == ["shape", "GPUs", "layout"] and rows[0][:3] == ["8n8g", "64", "tp4 pp8 cp1 dp2 vpp5 GA128"]
    bare = runparse.parse_run(runparse.RunSpec(key="x.r0", cell=cell, repeat=0, log=str(log), warmup_steps=0,
                                               measure_steps=10))
    assert "layout" not in bare.extra and "layout" not in tables.group_table(cells.cells_of([bare]))[0]


def test_the_hub_is_online_for_the_recipes_model_config_unless_the_site_says_offline():
    """As NeMo-Run's launch: Transformers offline, the Hugging Face hub online (each recipe reads its model's config
    from it); option offline puts the hub offline too, for nodes without internet and a prefetched HF_HOME."""
    cell = _cell()
    assert LLAMA.environment(cell, LLAMA.options) == {"TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "0",
                                                      "TOKENIZERS_PARALLELISM": "False"}
    assert LLAMA.environment(cell, {**LLAMA.options, "offline": True})["HF_HUB_OFFLINE"] == "1"
    assert "HF_TOKEN" not in LLAMA.environment(cell, LLAMA.options)  # a secret is the submitter's, never rendered
