"""Rendering: golden scripts per launcher (``pytest --update-golden`` rewrites them), ``bash -n`` on every
rendered script, and hostile matrix values that must stay inert text when the script runs."""

from __future__ import annotations

import os
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest

from dlperf_slurm import launchers
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import loader
from dlperf_slurm.model import cell
from dlperf_slurm.schedulers.slurm import options as slurm_options
from dlperf_slurm.submit import render
from dlperf_slurm.suites import Suite, registered

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"


class _EchoSuite(Suite):
    """A test-only suite that every launcher accepts."""

    framework = "test-echo"
    model = "echo"
    launcher = "srun"
    launchers = launchers.names()
    precisions = ("fp32", "amp")
    options = {"word": "hello"}

    def program(self, cell, measure, options):
        return ["python3", "train.py", "--batch", str(cell.batch_size), "--word", options["word"]]


@pytest.fixture(autouse=True, scope="module")
def _echo_suite():
    """The test-only suite is registered while this module's tests run, and only then."""
    with registered(_EchoSuite):
        yield


CASES = {
    "torchrun_1x2_local": """
        suite = "pytorch-ddp/resnet50"
        name = "golden"
        [axes]
        devices = ["1x2"]
        batch_size = [4]
        [options]
        tiny = true
        threads = 1
        [measure]
        repeats = 1
        warmup_steps = 2
        measure_steps = 5
        [slurm]
        gpu_request = "none"
        time = "00:10:00"
        """,
    "torchrun_2x8_pyxis": """
        suite = "pytorch-ddp/bert-base"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [96]
        precision = ["amp"]
        xla = [true]
        [slurm]
        partition = "gpu"
        account = "dl-bench"
        qos = "normal"
        exclusive = true
        time = "00:30:00"
        [environment]
        env = { NCCL_DEBUG = "WARN" }
        [environment.container]
        type = "pyxis"
        image = "nvcr.io/nvidia/pytorch:24.03-py3"
        mounts = ["/data:/data", "/scratch:/scratch"]
        """,
    "srun_2x4_gres": """
        suite = "ngc-pytorch/resnet50"
        name = "golden"
        [axes]
        devices = ["2x4"]
        batch_size = [256]
        precision = ["amp"]
        launcher = ["srun"]
        [slurm]
        gpu_request = "gres"
        constraint = "a100"
        cpus_per_task = 8
        mem = "0"
        extra_directives = ["--reservation=bench", "--switches=1"]
        """,
    "mpirun_2x2_env": """
        suite = "tf-cnn/resnet50"
        name = "golden"
        [axes]
        devices = ["2x2"]
        batch_size = [64]
        precision = ["fp16"]
        xla = [true]
        "env.NCCL_ALGO" = ["Ring"]
        launcher_args = [["--mca", "btl", "self,tcp"]]
        [environment]
        modules = ["cuda/12.4", "openmpi/4.1"]
        setup = ["source /opt/venv/bin/activate"]
        env = { OMP_NUM_THREADS = "4" }
        """,
    "horovodrun_1x8": """
        suite = "horovod-synthetic/resnet50"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [64]
        """,
    "paddle_2x8": """
        suite = "test-echo/echo"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [32]
        launcher = ["paddle"]
        """,
    "paddle_resnet50_1x1": """
        suite = "paddle/resnet50"
        name = "golden"
        [axes]
        devices = ["1x1"]
        batch_size = [128]
        """,
    "paddle_resnet50_4x8_amp": """
        suite = "paddle/resnet50"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [224]
        precision = ["amp"]
        dynamic_loss_scaling = [false]
        """,
    "mp_spawn_1x1_ptex_rn50": """
        suite = "pytorch-examples/resnet50"
        name = "golden"
        [axes]
        devices = ["1x1"]
        batch_size = [128]
        [measure]
        warmup_steps = 26
        measure_steps = 100
        """,
    "mp_spawn_1x8_ptex_rn50": """
        suite = "pytorch-examples/resnet50"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [128]
        """,
    "mp_spawn_2x8_ptex_rn50": """
        suite = "pytorch-examples/resnet50"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [128]
        [options]
        dummy = true
        """,
    "mp_spawn_4x8_ptex_rn50_apptainer": """
        suite = "pytorch-examples/resnet50"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [128]
        [environment.container]
        type = "apptainer"
        image = "/images/pytorch 1.6.sif"
        mounts = ["/data"]
        """,
    "paddle_bert_2x8_amp": """
        suite = "paddle/bert-base"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [64]
        precision = ["amp"]
        """,
    "deepspeed_gpt_1x8_zero2": """
        suite = "deepspeed/gpt"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [8]
        precision = ["fp16"]
        zero_stage = [2]
        [measure]
        repeats = 1
        """,
    "deepspeed_gpt_2x8_tp2_bf16": """
        suite = "deepspeed/gpt"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [4]
        precision = ["bf16"]
        model_size = ["1.3B"]
        tensor_parallel = [2]
        global_batch = [256]
        [measure]
        repeats = 1
        """,
    "torchtitan_llama3_2x8_fsdp_tp2": """
        suite = "torchtitan/llama3"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [1]
        precision = ["bf16"]
        flavor = ["8B"]
        tp = [2]
        seq_len = [8192]
        [options]
        hf_assets_path = "/data/hf/Llama-3.1-8B"
        dataset = "c4"
        [measure]
        repeats = 1
        """,
    "torchtitan_llama3_4x8_srun_hsdp_pp2_cp2": """
        suite = "torchtitan/llama3"
        name = "golden"
        [axes]
        launcher = ["srun"]
        devices = ["4x8"]
        batch_size = [2]
        precision = ["bf16"]
        xla = [true]
        flavor = ["70B"]
        dp_replicate = [2]
        dp_shard = [2]
        tp = [4]
        pp = [2]
        cp = [1]
        global_batch = [32]
        activation_checkpointing = ["full"]
        [options]
        hf_assets_path = "/data/hf/Llama-3.1-70B"
        dataset = "c4_test"
        dataset_path = "/data/c4_test"
        overrides = "--parallelism.pipeline-parallel-schedule Interleaved1F1B"
        [measure]
        repeats = 1
        """,
    "torchtitan_deepseek_v3_2x8_ep8": """
        suite = "torchtitan/deepseek-v3"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [4]
        precision = ["bf16"]
        flavor = ["16B"]
        ep = [8]
        seq_len = [4096]
        [options]
        hf_assets_path = "/data/hf/DeepSeek-V2-Lite"
        [measure]
        repeats = 1
        """,
    "megatron_gpt_4x8_tp4_pp4": """
        suite = "megatron/gpt"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [8]
        precision = ["fp16"]
        model_size = ["24x2304x24"]
        tensor_parallel = [4]
        pipeline_parallel = [4]
        global_batch = [512]
        [measure]
        repeats = 1
        warmup_steps = 30
        """,
    "megatron_gpt_4x8_tp2_pp2_vpp2_cp2_moe8_ep4": """
        suite = "megatron/gpt"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [1]
        precision = ["bf16"]
        model_size = ["24x2048x16"]
        tensor_parallel = [2]
        pipeline_parallel = [2]
        virtual_pipeline = [2]
        context_parallel = [2]
        num_experts = [8]
        expert_parallel = [4]
        seq_length = [4096]
        global_batch = [64]
        [measure]
        repeats = 1
        """,
    "megatron_bridge_llama3_70b_8x8_tp4_pp8_vp5_fp8_pyxis": """
        suite = "megatron-bridge/llama3"
        name = "golden"
        [axes]
        devices = ["8x8"]
        batch_size = [1]
        precision = ["fp8"]
        recipe = ["llama3_70b"]
        tensor_parallel = [4]
        pipeline_parallel = [8]
        virtual_pipeline = [5]
        global_batch = [256]
        [environment.container]
        type = "pyxis"
        image = "nvcr.io/nvidia/nemo:26.04.01"
        [options]
        script = "scripts/performance/run_script.py"
        [measure]
        repeats = 1
        warmup_steps = 10
        measure_steps = 40
        """,
    "megatron_bridge_qwen3_30b_2x4_ep8_mxfp8_gb200_energy": """
        suite = "megatron-bridge/qwen3"
        name = "golden"
        [axes]
        devices = ["2x4"]
        batch_size = [4]
        precision = ["mxfp8"]
        gpu = ["gb200"]
        expert_parallel = [8]
        global_batch = [512]
        [options]
        log_energy = true
        overrides = "--moe_flex_dispatcher_backend deepep"
        [measure]
        repeats = 1
        """,
    "oneflow_gpt_2x8_tp2": """
        suite = "oneflow/gpt"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [8]
        precision = ["fp16"]
        model_size = ["16x1536x16"]
        tensor_parallel = [2]
        [measure]
        repeats = 1
        """,
    "oneflow_1x8": """
        suite = "test-echo/echo"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [32]
        launcher = ["oneflow"]
        """,
    "oneflow_4x8": """
        suite = "test-echo/echo"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [32]
        launcher = ["oneflow"]
        """,
    "torchrun_1x2_apptainer": """
        suite = "pytorch-ddp/resnet50"
        name = "golden"
        [axes]
        devices = ["1x2"]
        batch_size = [4]
        [environment.container]
        type = "apptainer"
        image = "/images/pt.sif"
        mounts = ["/data"]
        """,
    "torchrun_2x8_apptainer": """
        suite = "ngc-pytorch/resnet50"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [256]
        precision = ["amp"]
        [environment.container]
        type = "apptainer"
        image = "/images/ngc pytorch.sif"
        mounts = ["/data", "/scratch:/scratch"]
        options = ["--writable-tmpfs"]
        """,
    "mpirun_2x2_apptainer": """
        suite = "tf-cnn/resnet50"
        name = "golden"
        [axes]
        devices = ["2x2"]
        batch_size = [64]
        [environment.container]
        type = "apptainer"
        image = "/images/tf1.sif"
        """,
    "paddle_1x8_apptainer": """
        suite = "test-echo/echo"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [32]
        launcher = ["paddle"]
        [environment.container]
        type = "apptainer"
        image = "/images/paddle.sif"
        """,
    "oneflow_2x8_apptainer": """
        suite = "test-echo/echo"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [32]
        launcher = ["oneflow"]
        [slurm]
        gpu_request = "none"
        [environment.container]
        type = "apptainer"
        image = "/images/oneflow.sif"
        """,
    "tf_config_2x8_apptainer": """
        suite = "tf2/resnet50"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [128]
        precision = ["amp"]
        xla = [true]
        [environment.container]
        type = "apptainer"
        image = "/images/tf2.sif"
        mounts = ["/data"]
        """,
    "msrun_1x1_mindspore_rn50": """
        suite = "mindspore/resnet50"
        name = "golden"
        [axes]
        devices = ["1x1"]
        batch_size = [128]
        [measure]
        warmup_steps = 100
        measure_steps = 100
        """,
    "msrun_1x8_mindspore_bert_gkf": """
        suite = "mindspore/bert-base"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [32]
        xla = [true]
        """,
    "msrun_2x8_mindspore_rn50_amp": """
        suite = "mindspore/resnet50"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [256]
        precision = ["amp"]
        [measure]
        warmup_steps = 100
        measure_steps = 100
        """,
    "msrun_4x8_mindspore_bert_amp_pyxis": """
        suite = "mindspore/bert-base"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [64]
        precision = ["amp"]
        [environment.container]
        type = "pyxis"
        image = "mindspore/mindspore-gpu:1.1.0"
        mounts = ["/data:/data", "/logs:/logs"]
        """,
    "msrun_2x8_apptainer": """
        suite = "mindspore/resnet50"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [128]
        [environment.container]
        type = "apptainer"
        image = "/images/mindspore.sif"
        mounts = ["/data"]
        """,
    "mpirun_4x8_mindspore_rn50": """
        suite = "mindspore/resnet50"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [128]
        launcher = ["mpirun"]
        [measure]
        warmup_steps = 100
        measure_steps = 100
        """,
    "node_ips_1x1_oneflow_rn50": """
        suite = "oneflow/resnet50"
        name = "golden"
        [axes]
        devices = ["1x1"]
        batch_size = [128]
        """,
    "node_ips_1x8_oneflow_rn50_synthetic": """
        suite = "oneflow/resnet50"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [128]
        [options]
        data_dir = ""
        """,
    "node_ips_4x8_oneflow_rn50_amp": """
        suite = "oneflow/resnet50"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [256]
        precision = ["amp"]
        """,
    "node_ips_2x8_oneflow_bert_amp_pyxis": """
        suite = "oneflow/bert-base"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [128]
        precision = ["amp"]
        [environment.container]
        type = "pyxis"
        image = "oneflowinc/oneflow:0.3.1-cuda10.2"
        mounts = ["/datasets:/datasets"]
        """,
    "node_ips_4x8_oneflow_bert_apptainer": """
        suite = "oneflow/bert-base"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [96]
        [environment.container]
        type = "apptainer"
        image = "/images/oneflow 0.3.1.sif"
        mounts = ["/datasets"]
        """,
    "oneflow_1x8_oneflow_bert_launch": """
        suite = "oneflow/bert-base"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [64]
        launcher = ["oneflow"]
        [options]
        python = "/opt/of/bin/python"
        """,
}


def _matrix(tmp_path: Path, text: str, name: str = "m.toml") -> cell.Matrix:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return loader.load(p, site=False)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, tmp_path, golden):
    m = _matrix(tmp_path, CASES[case])
    run = loader.runs(m, Path("logs") / m.name)[0]
    text = render.render_run(m, run)
    golden(case, text)
    check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_golden_files_cover_every_launcher():
    rendered = {p.read_text().split("# launch (")[1].split(")")[0] for p in GOLDEN.glob("*.sbatch")}
    assert rendered == set(launchers.names())


def test_directives_follow_the_cell_and_slurm_config(tmp_path):
    m = _matrix(tmp_path, CASES["srun_2x4_gres"])
    run = loader.runs(m, tmp_path)[0]
    d = slurm_options(render.run_resources(m, run))
    assert d["nodes"] == 2 and d["ntasks-per-node"] == 4 and d["gres"] == "gpu:4"
    assert "gpus-per-node" not in d and d["constraint"] == "a100" and d["cpus-per-task"] == 8
    text = render.render_run(m, run)
    assert "#SBATCH --gres=gpu:4\n" in text and "#SBATCH --reservation=bench\n" in text
    m = _matrix(tmp_path, CASES["torchrun_2x8_pyxis"], "t.toml")
    d = slurm_options(render.run_resources(m, loader.runs(m, tmp_path)[0]))
    assert d["ntasks-per-node"] == 1 and d["gpus-per-node"] == 8 and d["exclusive"] is True


@pytest.mark.parametrize("path", sorted((ROOT / "matrices").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_matrix_renders_valid_bash(path, tmp_path):
    m = loader.load(path, site=False)
    scripts = render.write_scripts(m, loader.runs(m, tmp_path))
    assert len(scripts) == m.runs
    for s in scripts[:: m.measure.repeats]:  # one per cell; repeats differ only in paths
        r = subprocess.run(["bash", "-n", str(s)], capture_output=True, text=True)
        assert r.returncode == 0, (s, r.stderr)
        assert os.access(s, os.X_OK)


def test_user_template_folder_overrides_a_builtin(tmp_path):
    m = _matrix(tmp_path, CASES["horovodrun_1x8"])
    user = tmp_path / "tpl" / "launchers"
    user.mkdir(parents=True)
    (user / "horovodrun.sh.j2").write_text("my-horovodrun -np {{ world_size }} {{ program|qjoin }}\n")
    text = render.render_run(m, loader.runs(m, tmp_path)[0], str(tmp_path / "tpl"))
    assert "\ndlperf_launch() {\nmy-horovodrun -np 8 python3 " in text  # the launch, run beside the hang watchdog
    assert "\ndlperf_launch &\ndlperf_wait $!\n" in text


def test_missing_user_template_folder_is_an_error(tmp_path, capsys):
    """A mistyped --templates folder stops with one line naming it, instead of rendering the built-ins."""
    from dlperf_slurm import cli
    from dlperf_slurm.errors import UserError

    m = _matrix(tmp_path, CASES["horovodrun_1x8"])
    missing = tmp_path / "no-such-templates"
    with pytest.raises(UserError, match="no-such-templates: no such folder"):
        render.render_run(m, loader.runs(m, tmp_path)[0], str(missing))
    rc = cli.main(["render", str(ROOT / "matrices" / "smoke.toml"), "--no-site", "--out", str(tmp_path / "out"),
                   "--templates", str(missing)])
    assert rc == 2 and "no such folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    for dry in (["--dry-run"], []):  # submit: refused before a campaign folder is made, dry run or not
        rc = cli.main(["--logs", str(tmp_path / "logs"), "submit", str(ROOT / "matrices" / "smoke.toml"), "--no-site",
                       "--executor", "local", "--templates", str(missing), *dry])
        assert rc == 2 and "no such folder" in capsys.readouterr().err
        assert not (tmp_path / "logs").exists()


def test_render_never_overwrites_a_submitted_campaign(tmp_path, capsys):
    """The scripts of a submitted campaign are what ran: ``render`` into its folder is refused, nothing changes."""
    from dlperf_slurm import cli

    logs, smoke = tmp_path / "logs", str(ROOT / "matrices" / "smoke.toml")
    assert cli.main(["--logs", str(logs), "submit", smoke, "--no-site", "--executor", "local", "--dry-run"]) == 0
    assert cli.main(["--logs", str(logs), "render", smoke, "--no-site"]) == 0  # nothing submitted yet: allowed
    capsys.readouterr()
    cdir = logs / "smoke"
    (cdir / "manifest.sqlite").write_bytes(b"")  # submitted (the manifest is what submit leaves)
    scripts = {p: p.read_bytes() for p in cdir.rglob("*.sbatch")}
    for p in scripts:
        p.write_bytes(b"#!/bin/bash\n# what ran\n")
    for argv in (["--logs", str(logs), "render", smoke, "--no-site"], ["render", smoke, "--no-site", "--out", str(cdir)]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "is a submitted campaign" in err and "--out DIR" in err and err.count("\n") == 1
    assert scripts and all(p.read_bytes() == b"#!/bin/bash\n# what ran\n" for p in scripts)
    assert cli.main(["render", smoke, "--no-site", "--out", str(tmp_path / "elsewhere")]) == 0


def test_rendered_scripts_name_absolute_paths(tmp_path, monkeypatch, capsys):
    """``render`` from a relative --logs/--out: the scripts still name their log, marker and Slurm output by
    absolute path (as submit's do), so ``sbatch`` of one from another folder does not fail on a missing
    relative output folder."""
    from dlperf_slurm import cli

    monkeypatch.chdir(tmp_path)
    smoke = str(ROOT / "matrices" / "smoke.toml")
    for argv in (["--logs", "rel-logs", "render", smoke, "--no-site"], ["render", smoke, "--no-site", "--out", "out"]):
        assert cli.main(argv) == 0
    capsys.readouterr()
    scripts = [*tmp_path.glob("rel-logs/smoke/1n*g/*.sbatch"), *tmp_path.glob("out/1n*g/*.sbatch")]
    assert len(scripts) == 12
    for script in scripts:
        text = script.read_text()
        for key in ("#SBATCH --output=", "export DLPERF_CAMPAIGN_DIR="):
            value = text.split(key, 1)[1].split()[0]
            assert value.startswith(str(tmp_path.resolve()) + "/"), (script, key, value)
        # the log (and the marker beside it) under that folder
        assert "\nDLPERF_LOG=$DLPERF_CAMPAIGN_DIR/1n" in text and "\nDLPERF_MARKER=${DLPERF_LOG%.log}.exit\n" in text


@pytest.mark.parametrize("text, needle", [("# mine\nhorovodrun {{ no_such_variable }}\n", "is undefined"),
                                          ("# mine\nhorovodrun {% if %}\n", "Expected an expression"),
                                          ("# mine\nhorovodrun {{ program|nofilter }}\n", "No filter named")])
def test_a_user_template_mistake_is_an_error_naming_its_file_and_line(tmp_path, text, needle):
    """A mistake in a --templates override is one line naming the template and its line (was a Jinja traceback)."""
    m = _matrix(tmp_path, CASES["horovodrun_1x8"])
    user = tmp_path / "tpl" / "launchers"
    user.mkdir(parents=True)
    (user / "horovodrun.sh.j2").write_text(text)
    with pytest.raises(UserError) as err:
        render.render_run(m, loader.runs(m, tmp_path)[0], str(tmp_path / "tpl"))
    assert str(err.value).startswith(f"{user / 'horovodrun.sh.j2'}:2: template error: ") and needle in str(err.value)


HOSTILE = ["'; touch {pwned}; #", "$(touch {pwned})", "`touch {pwned}`", '"; touch {pwned}; "', "x\ntouch {pwned}"]


@pytest.mark.parametrize("launcher", ["torchrun", "mpirun", "srun"])
def test_hostile_values_stay_inert(tmp_path, launcher):
    """Hostile strings in every free-text place of a matrix reach the program as literal text; nothing runs."""
    pwned = tmp_path / "pwned"
    bad = [h.format(pwned=pwned) for h in HOSTILE]
    toml_str = lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    text = textwrap.dedent(f"""
        suite = "test-echo/echo"
        name = "inj"
        [axes]
        devices = ["1x1"]
        batch_size = [4]
        launcher = ["{launcher}"]
        "env.HOSTILE_AXIS" = [{toml_str(bad[1])}]
        launcher_args = [[{toml_str(bad[2])}, {toml_str(bad[0])}]]
        [options]
        word = {toml_str(bad[0].replace(chr(10), ' '))}
        [environment]
        env = {{ HOSTILE_A = {toml_str(bad[3])}, HOSTILE_B = {toml_str(bad[4])} }}
        [measure]
        repeats = 1
        """)
    m = _matrix(tmp_path, text)
    run = loader.runs(m, tmp_path / "logs")[0]
    [script] = render.write_scripts(m, [run])
    # fake launchers: record argv and the hostile environment, run nothing
    bindir = tmp_path / "bin"
    bindir.mkdir()
    argv_file = tmp_path / "argv.txt"
    for name in ("torchrun", "mpirun", "srun", "scontrol"):
        fake = bindir / name
        fake.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {argv_file}\n'
                        f'printf "%s\\n" "$HOSTILE_A" "$HOSTILE_B" "$HOSTILE_AXIS" >> {argv_file}\n')
        fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = f"{bindir}:{env['PATH']}"
    r = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    log = run.log.read_text()
    assert r.returncode == 0, log
    assert not pwned.exists(), "a hostile matrix value was executed"
    recorded = argv_file.read_text()
    for value in (bad[0].replace("\n", " "), bad[2], bad[3], bad[1]):
        assert value in recorded, (value, recorded)
    assert bad[4] in recorded  # the multi-line value arrives whole, as data
    assert run.marker.is_file() and '"rc": 0' in run.marker.read_text()


def test_marker_records_failure_and_provenance_line(tmp_path):
    m = _matrix(tmp_path, CASES["oneflow_1x8"])
    run = loader.runs(m, tmp_path / "logs")[0]
    [script] = render.write_scripts(m, [run])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SECRET_API_TOKEN"] = "hunter2"
    env["NCCL_SOCKET_IFNAME"] = "lo"
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0  # oneflow is not installed here: python -m oneflow... fails
    marker = run.marker.read_text()
    assert f'"rc": {r.returncode}' in marker
    log = run.log.read_text()
    job_lines = [l for l in log.splitlines() if l.startswith(':::DLPERF {"event": "job"')]
    assert len(job_lines) == 1
    import json

    job = json.loads(job_lines[0][len(":::DLPERF "):])
    assert job["run"] == run.key and "oneflow.distributed.launch" in job["command"]
    assert "SECRET_API_TOKEN" not in job["env"] and "hunter2" not in log  # not on the allow-list
    assert job["env"]["NCCL_SOCKET_IFNAME"] == "lo" and "PATH" in job["env"]  # what explains performance is kept


def test_tf2_time_history_interval_divides_the_window(tmp_path):
    """TimeHistory logs every log_steps steps; the window's ends must be logged or nothing can be timed. It is the
    --log_steps flag: classifier_trainer applies its flags after --params_override, so a
    train.time_history.log_steps override would lose to the flag's default (100)."""
    m = _matrix(tmp_path, CASES["tf_config_2x8_apptainer"] + "\n[measure]\nwarmup_steps = 30\nmeasure_steps = 120\n")
    text = render.render_run(m, loader.runs(m, tmp_path)[0])
    assert " --log_steps=30 " in text and "train.steps=150," in text and "log_steps=" not in text.replace(" --log_steps=30 ", "")


def test_a_campaign_folder_with_a_space_stays_one_sbatch_value(tmp_path):
    """sbatch refused a rendered script whose folder held a space ("Invalid directive found in batch script");
    a line break in it would end the #SBATCH line and run the rest as a command: refused."""
    m = _matrix(tmp_path, CASES["horovodrun_1x8"])
    run = loader.runs(m, tmp_path / "my runs")[0]
    text = render.render_run(m, run)
    [line] = [x for x in text.splitlines() if x.startswith("#SBATCH --output=")]
    assert shlex.split(line) == ["#SBATCH", f"--output={run.base}.slurm-%j.out"], line
    assert "#SBATCH --nodes=1\n" in text  # plain values stay as they were
    with pytest.raises(UserError, match="line break"):
        render.render_run(m, loader.runs(m, tmp_path / "x\ntouch y")[0])
