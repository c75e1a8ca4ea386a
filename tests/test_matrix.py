"""Matrix loading: expansion, include/exclude, dropped cells, validation messages, site files, run paths."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlperf_slurm.errors import MatrixError, UserError
from dlperf_slurm.matrix import loader as matrix
from dlperf_slurm.matrix.gpuhours import gpu_hours
from dlperf_slurm.matrix.plan import plan_text
from dlperf_slurm.model import cell, config
from dlperf_slurm.submit.guard import confirm_size

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "m.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def load(tmp_path: Path, text: str, **kw) -> cell.Matrix:
    return matrix.load(write(tmp_path, text), site=kw.pop("site", False), **kw)


BASE = """
suite = "pytorch-ddp/bert-base"
[axes]
devices = ["1x1", "1x8", "2x8"]
batch_size = [32, 48]
precision = ["fp32", "amp"]
xla = [false, true]
"""


def test_shipped_matrices_load():
    smoke = matrix.load(ROOT / "matrices/smoke.toml", site=False)
    assert [s.name for s in smoke.suites] == ["pytorch-ddp/resnet50"]
    assert smoke.options_for(smoke.cells[0])["tiny"] is True
    assert [c.shape for c in smoke.cells] == ["1n1g", "1n2g"]
    bert = matrix.load(ROOT / "matrices/bert.toml", site=False)
    # 4 shapes x fp32 {32,48} x xla off, plus AMP {64,96} x xla {off,on}
    assert len(bert.cells) == 4 * 2 + 4 * 2 * 2
    assert bert.measure == cell.Measure(repeats=7, warmup_steps=20, measure_steps=100)
    rn = matrix.load(ROOT / "matrices/resnet50.toml", site=False)
    amp = [c for c in rn.cells if c.precision == "amp"]
    assert {c.batch_size for c in amp} == {256} and len(amp) == 5 * 2


def test_product_and_ids(tmp_path):
    m = load(tmp_path, BASE)
    assert len(m.cells) == 3 * 2 * 2 * 2
    assert len(set(c.id for c in m.cells)) == len(m.cells)
    ids = {c.id for c in m.cells}
    assert "bert-base.pytorch-ddp.2x8.b48.amp.xla1" in ids
    c = next(c for c in m.cells if c.id == "bert-base.pytorch-ddp.2x8.b48.amp.xla1")
    assert (c.nodes, c.gpus_per_node, c.devices, c.global_batch) == (2, 8, 16, 16 * 48)
    assert c.launcher == "torchrun"  # the suite's default


def test_devices_are_shapes_not_a_cartesian_product(tmp_path):
    m = load(tmp_path, BASE.replace('["1x1", "1x8", "2x8"]', '["1x1", "4x8"]'))
    assert sorted({c.shape for c in m.cells}) == ["1n1g", "4n8g"]


def test_include_adds_and_exclude_drops(tmp_path):
    m = load(tmp_path, BASE + """
    [[exclude]]
    precision = "amp"
    batch_size = 32
    [[include]]
    precision = "amp"
    batch_size = 96
    xla = false
    """)
    amp = [c for c in m.cells if c.precision == "amp"]
    assert not any(c.batch_size == 32 for c in amp)
    b96 = [c for c in amp if c.batch_size == 96]
    assert len(b96) == 3 and all(not c.xla for c in b96)  # every shape, only xla off
    assert len(m.cells) == 24 - 6 + 3


def test_include_duplicate_is_refused(tmp_path):
    with pytest.raises(MatrixError, match=r"include\[0\].*duplicate cell bert-base.pytorch-ddp.1x1.b32.fp32.xla0"):
        load(tmp_path, BASE + """
        [[include]]
        devices = "1x1"
        batch_size = 32
        precision = "fp32"
        xla = false
        """)


def test_dropped_cells_have_reasons(tmp_path):
    m = load(tmp_path, """
    suite = "ngc-pytorch/resnet50"
    [axes]
    devices = ["1x1", "1x8"]
    batch_size = [128]
    precision = ["fp32", "amp", "bf16"]
    xla = [false, true]
    """)
    assert len(m.cells) == 2 * 2  # fp32/amp without xla
    reasons = {d.cell.id: d.reason for d in m.dropped}
    assert len(reasons) == 2 * 3 * 2 - 4
    assert "no XLA mode" in reasons["resnet50.ngc-pytorch.1x8.b128.amp.xla1"]
    assert "no precision 'bf16'" in reasons["resnet50.ngc-pytorch.1x1.b128.bf16.xla0"]


def test_pyxis_with_mpirun_is_dropped(tmp_path):
    m = load(tmp_path, """
    suite = "tf-cnn/resnet50"
    [axes]
    devices = ["1x8"]
    batch_size = [64]
    launcher = ["mpirun", "srun"]
    [environment.container]
    type = "pyxis"
    image = "nvcr.io/nvidia/tensorflow:23.03-tf1-py3"
    """)
    assert [c.launcher for c in m.cells] == ["srun"]
    assert "pyxis" in m.dropped[0].reason


def test_extra_and_env_axes(tmp_path):
    m = load(tmp_path, """
    suite = "tf-cnn/resnet50"
    [axes]
    devices = ["1x1"]  # replicated on 1x8 is one process per node (tf_config): dropped under mpirun
    batch_size = [64]
    variable_update = ["horovod", "replicated"]
    "env.NCCL_ALGO" = ["Ring", "Tree"]
    launcher_args = [["--mca", "btl", "self,tcp"], []]
    """)
    assert len(m.cells) == 2 * 2 * 2
    ids = [c.id for c in m.cells]
    assert any(".variable_update-replicated." in i and ".NCCL_ALGO-Tree" in i for i in ids)
    # the default value of a suite axis stays out of the id
    assert any(".variable_update-" not in i for i in ids)
    assert {c.launcher_args for c in m.cells} == {("--mca", "btl", "self,tcp"), ()}
    assert len(set(ids)) == 8


@pytest.mark.parametrize("body, key, needle, line", [
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_sise = [4]\n', "axes.batch_sise",
     "did you mean 'batch_size'", 4),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [0]\n', "axes.batch_size",
     ">= 1", 4),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = []\n', "axes.batch_size",
     "empty axis", 4),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1", "8"]\nbatch_size = [4]\n', "axes.devices",
     "NODESxGPUS", 3),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1", "1x1"]\nbatch_size = [4]\n', "axes.devices",
     "duplicate value", 3),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\nprecision = ["fp23"]\n',
     "axes.precision", "did you mean 'fp32'", 5),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[mesure]\nrepeats = 7\n',
     "mesure", "did you mean 'measure'", 5),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[measure]\nrepeats = -1\n',
     "measure.repeats", ">= 1", 6),
    # bounds no benchmark reaches: a typo (1e9 repeats, an extra digit) was a render/submit that filled the memory
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[measure]\nrepeats = 1001\n',
     "measure.repeats", "at most 1,000, got 1,001", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1", "100001x8"]\nbatch_size = [4]\n', "axes.devices",
     "at most 100,000 nodes", 3),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x65"]\nbatch_size = [4]\n', "axes.devices",
     "at most 64 GPUs", 3),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [100000000000000000000]\n',
     "axes.batch_size", "at most 1,048,576 per device", 4),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[slurm]\npartition = "a b"\n',
     "slurm.partition", "not allowed", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[slurm]\ntime = "soon"\n',
     "slurm.time", "expected a Slurm time such as 00:30:00", 6),
    # "30 min" was refused for its space, with the shell-charset message (issue #22)
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[slurm]\ntime = "30 min"\n',
     "slurm.time", "expected a Slurm time such as 00:30:00 (or 1-00:00:00, a day), got '30 min'", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\ntiny = "yes"\n',
     "options.tiny", "expected bool", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\ntinny = true\n',
     "options.tinny", "did you mean 'tiny'", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nnan_at_step = -1\n',
     "options.nan_at_step", "at least 0", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nnan_at_step = "3"\n',
     "options.nan_at_step", "expected int", 6),
    # torch.set_num_threads(-1) fails on the node; batches_per_iter = 0 divided by zero in render (a traceback)
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nthreads = -1\n',
     "options.threads", "at least 0", 6),
    ('suite = "horovod-synthetic/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\n'
     'batches_per_iter = 0\n', "options.batches_per_iter", "at least 1", 6),
    # counts the programs divide by or size with (a ZeroDivisionError, an aborting CHECK or no measured interval
    # on the node, every run): OFRecord's reader needs a part per rank, the W&D programs print every print_every
    # iterations and build hidden_size-wide layers, MXNet's Speedometer takes count % frequent, Paddle's train.py
    # divides its lr schedule's step by ceil(total_images / batch)
    ('suite = "oneflow/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\ndata_part_num = 0\n',
     "options.data_part_num", "at least 1", 6),
    ('suite = "oneflow/insightface"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\n'
     'train_data_part_num = 0\n', "options.train_data_part_num", "at least 1", 6),
    ('suite = "oneflow/bert-base"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\ndata_part_num = -2\n',
     "options.data_part_num", "at least 1", 6),
    ('suite = "oneflow/wdl"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\ndata_part_num = 0\n',
     "options.data_part_num", "at least 1", 6),
    ('suite = "oneflow/wdl"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nprint_every = 0\n',
     "options.print_every", "at least 1", 6),
    ('suite = "hugectr/wdl"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nprint_every = -100\n',
     "options.print_every", "at least 1", 6),
    ('suite = "oneflow/wdl"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nhidden_size = 0\n',
     "options.hidden_size", "at least 1", 6),
    ('suite = "hugectr/wdl"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nhidden_size = -1\n',
     "options.hidden_size", "at least 1", 6),
    ('suite = "hugectr/wdl"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\neval_batches = -1\n',
     "options.eval_batches", "at least 0", 6),
    ('suite = "mxnet/insightface"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\nfrequent = 0\n',
     "options.frequent", "at least 1", 6),
    ('suite = "paddle/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[options]\ntotal_images = 0\n',
     "options.total_images", "at least 1", 6),
    # a directive the submit journal sets itself: --job-name carries the token an interrupted submit's jobs are
    # found by (overridden: the next submit sent them again), --output holds the banners status reads, --array
    # is the group's runs; sbatch takes a prefix of an option too
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[slurm]\n'
     'extra_directives = ["--reservation=bench", "--job-name=mine"]\n', "slurm.extra_directives", "--job-name is", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[slurm]\n'
     'extra_directives = ["--out=/tmp/x.out"]\n', "slurm.extra_directives", "--output is", 6),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[slurm]\n'
     'extra_directives = ["--array=0-9"]\n', "slurm.extra_directives", "--array is", 6),
    ('suite = "pytorch-dp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n', "suite",
     "did you mean 'pytorch-ddp/resnet50'", 1),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\n', "axes.batch_size", "missing axis", 2),
    ('suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[environment.env]\n"A-B" = "1"\n',
     "environment.env.A-B", "not a valid environment variable name", 6),
])
def test_validation_messages(tmp_path, body, key, needle, line):
    p = write(tmp_path, body)
    with pytest.raises(MatrixError) as err:
        matrix.load(p, site=False)
    msg = str(err.value)
    assert msg.startswith(str(p)), msg
    assert err.value.key == key, msg
    assert needle in msg, msg
    if line is not None:
        assert err.value.line == line, msg


# The line of keys a line-by-line search finds at the wrong place or not at all: the second entry of an array of
# tables, a quoted key holding a dot, keys inside an inline table (the README's way to write env and container),
# a quoted table name, dotted keys, and a key after a multi-line array of arrays (whose lines start with '[').
_RN = 'suite = "pytorch-ddp/resnet50"\n'


@pytest.mark.parametrize("body, key, line", [
    (_RN + '[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n\n[[include]]\nbatch_size = [8]\n\n[[include]]\n'
     'batch_size = [0]\n', "include[1].batch_size", 10),
    (_RN + '[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n"env.NCCL_ALGO" = [["Ring"]]\n', "axes.env.NCCL_ALGO", 5),
    (_RN + '[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[environment]\nenv = { NCCL_DEBUG = "WARN" }\n'
     'container = { type = "pyxs", image = "nvcr.io/x" }\n', "environment.container.type", 7),
    (_RN + '[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n[environment]\nenv = { NCCL_DEBUG = "WARN", "1X" = "y" }\n',
     "environment.env.1X", 6),
    ('suite = ["pytorch-ddp/resnet50", "pytorch-ddp/bert-base"]\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n'
     '[options]\ntiny = true\n[options."pytorch-ddp/bert-base"]\ntiny = 3\n', "options.pytorch-ddp/bert-base.tiny", 8),
    (_RN + 'axes.devices = ["1x1"]\naxes.batch_size = [4]\nmeasure.repeats = 0\n', "measure.repeats", 4),
    (_RN + '[axes]\ndevices = ["1x1"]\nlauncher_args = [\n  ["--mca", "btl", "self,tcp"],\n  [],\n]\n'
     'batch_size = [4]\nprecision = ["fp4"]\n', "axes.precision", 9),
])
def test_error_line_of_nested_quoted_and_inline_keys(tmp_path, body, key, line):
    p = write(tmp_path, body)
    with pytest.raises(MatrixError) as err:
        matrix.load(p, site=False)
    assert (err.value.key, err.value.line) == (key, line), str(err.value)
    assert str(err.value).startswith(f"{p}:{line}: {key}: ")


@pytest.mark.parametrize("site_text, key, line", [
    ('[slurm]\ntime = "00:10:00"\npartition = "a b"\n', "slurm.partition", 3),
    ('[environment]\nenv = { "1X" = "y" }\n', "environment.env.1X", 2),
    ('[slurm]\npartiton = "gpu"\n', "slurm.partiton", 2),
])
def test_a_bad_site_file_value_names_the_site_file_and_its_line(tmp_path, site_text, key, line):
    site = write(tmp_path, site_text, "site.toml")
    p = write(tmp_path, BASE + '[slurm]\ntime = "00:20:00"\n')
    with pytest.raises(MatrixError) as err:
        matrix.load(p, site=site)
    assert (err.value.path, err.value.key, err.value.line) == (str(site), key, line), str(err.value)


def test_a_matrix_value_wins_over_the_site_file_in_messages_too(tmp_path):
    site = write(tmp_path, '[slurm]\npartition = "gpu"\n', "site.toml")
    p = write(tmp_path, BASE + '[slurm]\npartition = "a b"\n')
    with pytest.raises(MatrixError) as err:
        matrix.load(p, site=site)
    assert (err.value.path, err.value.line) == (str(p), 9), str(err.value)


def test_missing_site_file_is_called_a_site_file(tmp_path):
    with pytest.raises(UserError, match="no such site file"):
        matrix.load(write(tmp_path, BASE), site=tmp_path / "nope.toml")


@pytest.mark.parametrize("values, what", [('["eth0,eth1", "eth0 eth1"]', "same id"),
                                           ('["ib_0", "ib-0"]', "same files")])
def test_values_that_differ_only_in_dropped_characters_are_refused(tmp_path, values, what):
    """Two cells whose values differ only where an id or a file name drops characters would share one log,
    script and marker (render wrote one cell's scripts over the other's; submit ran both into one log)."""
    p = write(tmp_path, _RN + f'[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n"env.NCCL_SOCKET_IFNAME" = {values}\n')
    with pytest.raises(MatrixError) as err:
        matrix.load(p, site=False)
    assert (err.value.key, err.value.line) == ("axes.env.NCCL_SOCKET_IFNAME", 5), str(err.value)
    assert what in str(err.value)


@pytest.mark.parametrize("options, expected", [("", None), ("nan_at_step = 0", None), ("nan_at_step = 3", "3")])
def test_nan_at_step_option_renders_into_the_program_argv(tmp_path, options, expected):
    m = load(tmp_path, 'suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n'
                       f"[options]\ntiny = true\n{options}\n")
    argv = m.suite_of(m.cells[0]).program(m.cells[0], m.measure, m.options_for(m.cells[0]))
    if expected is None:
        assert "--nan-at-step" not in argv
    else:
        assert argv[argv.index("--nan-at-step") + 1] == expected
    from dlperf_slurm.submit import render

    script = render.render_run(m, matrix.runs(m, tmp_path)[0])
    assert ("--nan-at-step 3" in script) == (expected == "3")


def test_toml_syntax_error_names_the_line(tmp_path):
    p = write(tmp_path, 'suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"\nbatch_size = [4]\n')
    with pytest.raises(MatrixError, match="not valid TOML") as err:
        matrix.load(p, site=False)
    assert err.value.line is not None and err.value.line >= 3


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such matrix file"):
        matrix.load(tmp_path / "nope.toml", site=False)


def test_site_file_defaults_and_override(tmp_path):
    site = write(tmp_path, """
    [slurm]
    partition = "gpu"
    account = "bench"
    time = "01:00:00"
    [environment]
    modules = ["cuda/12.4"]
    env = { NCCL_IB_HCA = "mlx5" }
    """, "site.toml")
    m = load(tmp_path, BASE + """
    [slurm]
    time = "00:20:00"
    [environment]
    env = { NCCL_DEBUG = "INFO" }
    """, site=site)
    assert (m.slurm.partition, m.slurm.account, m.slurm.time) == ("gpu", "bench", "00:20:00")
    assert m.environment.modules == ("cuda/12.4",)
    assert dict(m.environment.env) == {"NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "INFO"}


def test_site_file_from_environment(tmp_path, monkeypatch):
    site = write(tmp_path, '[slurm]\nqos = "high"\n', "site.toml")
    monkeypatch.setenv("DLPERF_SLURM_SITE", str(site))
    m = matrix.load(write(tmp_path, BASE), site=None)
    assert m.slurm.qos == "high"


EXCLUSIVE = """
suite = "pytorch-ddp/bert-base"
[axes]
devices = ["1x1", "1x2", "2x4"]
batch_size = [32]
[slurm]
time = "01:00:00"
exclusive = true
[measure]
repeats = 1
"""


def test_exclusive_gpu_hours_count_whole_nodes(tmp_path, monkeypatch):
    """exclusive: a run holds its nodes whole: 1 + 1 + 2 nodes of 8 GPUs, not 1 + 2 + 8 GPUs; plan and submit's
    guard count with the one function."""
    monkeypatch.delenv("DLPERF_SLURM_GPUS_PER_NODE", raising=False)
    m = load(tmp_path, EXCLUSIVE.replace("exclusive = true", "exclusive = true\ngpus_per_node = 8"))
    asked = gpu_hours(m, m.cells)
    assert (asked.hours, asked.floor, asked.node_gpus) == (32.0, False, 8)
    assert "asks for 32.0 GPU-hours at most (time limit 01:00:00 per run; exclusive: whole nodes of 8 GPUs)" \
        in plan_text(m)
    runs = matrix.runs(m, tmp_path / "c")  # the guard counts the same
    with pytest.raises(UserError, match=r"and 32\.0 GPU-hours at most \(time limit 01:00:00 each; exclusive: whole "
                                        r"nodes of 8 GPUs\), above 3 runs or 10 GPU-hours"):
        confirm_size(m, runs, (3, 10.0), yes=False)
    # where a node's GPUs are not known: the cells' own GPUs, said to be a floor
    m = load(tmp_path, EXCLUSIVE)
    asked = gpu_hours(m, m.cells)
    assert (asked.hours, asked.floor, asked.node_gpus) == (11.0, True, None)
    text = " ".join(plan_text(m).split())
    assert ("asks for at least 11.0 GPU-hours (time limit 01:00:00 per run; exclusive: whole nodes, whose GPUs "
            "nothing here says (set gpus_per_node under [slurm]); counted: the cells' own GPUs)") in text, text
    assert "GPU-hours at most" not in text
    with pytest.raises(UserError, match=r"and at least 11\.0 GPU-hours \(time limit"):
        confirm_size(m, matrix.runs(m, tmp_path / "c"), (3, 10.0), yes=False)
    monkeypatch.setenv("DLPERF_SLURM_GPUS_PER_NODE", "4")  # what the relative shapes go by says it too
    assert gpu_hours(load(tmp_path, EXCLUSIVE), m.cells).hours == 1 * 4 + 1 * 4 + 2 * 4
    # not exclusive: each run's own GPUs, as before
    m = load(tmp_path, EXCLUSIVE.replace("exclusive = true", "gpus_per_node = 8"))
    asked = gpu_hours(m, m.cells)
    assert (asked.hours, asked.floor, asked.basis()) == (11.0, False, "")
    assert "asks for 11.0 GPU-hours at most (time limit 01:00:00 per run)\n" in plan_text(m) + "\n"


def test_gpu_hours_and_run_paths(tmp_path):
    m = load(tmp_path, BASE + '\n[slurm]\ntime = "00:30:00"\n[measure]\nrepeats = 3\n')
    # sum of devices over cells: (1 + 8 + 16) x 8 variants; 3 repeats; half an hour each
    assert gpu_hours(m, m.cells * 3).hours == pytest.approx((1 + 8 + 16) * 8 * 3 * 0.5)
    runs = matrix.runs(m, tmp_path / "logs" / "bert")
    assert len(runs) == m.runs == 24 * 3
    r = next(r for r in runs if r.cell.id == "bert-base.pytorch-ddp.2x8.b48.amp.xla1" and r.repeat == 2)
    assert r.log == tmp_path / "logs/bert/2n8g/bert-base_b48_amp_xla_2.log"
    assert r.script.suffix == ".sbatch" and r.marker.suffix == ".exit"
    assert r.key == "bert-base.pytorch-ddp.2x8.b48.amp.xla1.r2"


@pytest.mark.parametrize("value, minutes", [("30", 30), ("05:30", 5.5), ("01:00:00", 60), ("1-00:00:00", 1440),
                                            ("2-12", 2 * 1440 + 720)])
def test_time_to_minutes(value, minutes):
    assert config.time_to_minutes(value) == pytest.approx(minutes)


def test_cli_reports_user_errors_in_one_line(tmp_path):
    p = write(tmp_path, 'suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["0x1"]\nbatch_size = [4]\n')
    r = subprocess.run([sys.executable, "-m", "dlperf_slurm", "plan", str(p), "--no-site"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert f"{p}:3: axes.devices" in r.stderr


@pytest.mark.parametrize("command", [["render", "--out", "{blocked}/x"],
                                     ["--logs", "{blocked}", "submit", "--executor", "local"]])
def test_cli_a_campaign_folder_that_cannot_be_made_is_one_line(tmp_path, command):
    """--out / --logs under a file (or where the folder cannot be made): one line, no traceback."""
    blocked = write(tmp_path, "not a folder", "blocked")
    p = write(tmp_path, 'suite = "pytorch-ddp/resnet50"\n[axes]\ndevices = ["1x1"]\nbatch_size = [4]\n')
    argv = [a.format(blocked=blocked) for a in command]
    i = argv.index("render") + 1 if "render" in argv else argv.index("submit") + 1
    argv[i:i] = [str(p), "--no-site"]
    r = subprocess.run([sys.executable, "-m", "dlperf_slurm", *argv], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "cannot create the campaign folder" in r.stderr, r.stderr


def test_cli_plan_lists_cells_counts_and_dropped(tmp_path):
    p = write(tmp_path, """
    suite = "ngc-pytorch/bert-base"
    [axes]
    devices = ["1x1", "1x8"]
    batch_size = [32]
    precision = ["fp32", "amp"]
    xla = [false, true]
    [slurm]
    time = "01:00:00"
    """)
    r = subprocess.run([sys.executable, "-m", "dlperf_slurm", "plan", str(p), "--no-site"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "4 cells x 7 repeats = 28 runs" in r.stdout
    assert "126.0 GPU-hours" in r.stdout  # (1 + 8) GPUs x 2 precisions x 7 repeats x 1 h
    assert "dropped 4 cells" in r.stdout and "has no XLA mode" in r.stdout


def test_launcher_axis_gives_distinct_ids_and_paths(tmp_path):
    m = load(tmp_path, """
    suite = "pytorch-ddp/resnet50"
    [axes]
    devices = ["1x2"]
    batch_size = [4]
    launcher = ["torchrun", "mpirun", "srun"]
    """)
    ids = [c.id for c in m.cells]
    assert ids == ["resnet50.pytorch-ddp.1x2.b4.fp32.xla0", "resnet50.pytorch-ddp.1x2.b4.fp32.xla0.launcher-mpirun",
                   "resnet50.pytorch-ddp.1x2.b4.fp32.xla0.launcher-srun"]
    logs = {r.log for r in matrix.runs(m, tmp_path)}
    assert len(logs) == 3 * 7


def _many(gpus: int, batches: int, repeats: int, extra: str = "") -> str:
    return (f'suite = "pytorch-ddp/resnet50"\n[axes]\n'
            f'devices = [{", ".join(f"{chr(34)}1x{g}{chr(34)}" for g in range(1, gpus + 1))}]\n'
            f'batch_size = [{", ".join(map(str, range(1, batches + 1)))}]\n{extra}[measure]\nrepeats = {repeats}\n')


@pytest.mark.parametrize("body, key, needle", [
    # the repeats are the largest factor
    (_many(4, 26, 1000), "measure.repeats", "104 cells (devices 4 x batch_size 26) x 1,000 repeats = 104,000 runs"),
    (_many(2, 26, 1000, '[[include]]\nbatch_size = [27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, '
                        '43, 44, 45, 46, 47, 48, 49, 50, 51, 52]\nprecision = "amp"\n'),
     "measure.repeats", "104 cells (devices 2 x batch_size 26, plus 1 [[include]] rule) x 1,000 repeats = 104,000"),
    (_many(64, 1600, 1), "axes.batch_size", "102,400 cells (devices 64 x batch_size 1,600) x 1 repeat = 102,400"),
    # with an exclude rule the cells are counted as they are made: never more than the limit is held
    (_many(64, 1600, 7, "[[exclude]]\nbatch_size = 3\n"), "axes.batch_size",
     "more than 14,285 cells (devices 64 x batch_size 1,600) x 7 repeats = more than 100,000 runs"),
], ids=["repeats", "include", "axes", "exclude"])
def test_more_runs_than_any_benchmark_needs_is_refused_at_load(tmp_path, body, key, needle):
    """A matrix's runs (cells x repeats) are bounded: render and submit --dry-run made every run's script or
    plan line first (memory growing with the runs: 1e9 repeats, OOM-killed at 24 GB)."""
    p = write(tmp_path, body)
    with pytest.raises(MatrixError) as err:
        matrix.load(p, site=False)
    assert err.value.key == key and needle in str(err.value), str(err.value)
    assert "at most 100,000 runs" in str(err.value) and str(err.value).startswith(f"{p}:")


def test_runs_up_to_the_bound_load(tmp_path):
    m = load(tmp_path, _many(4, 25, 1000))  # 100 cells x 1,000 repeats: 100,000 runs, the most a matrix may ask
    assert len(m.cells) * m.measure.repeats == 100_000


def test_duplicate_axis_values_are_found_as_list_count_found_them():
    from dlperf_slurm.matrix.axes import _duplicates

    assert _duplicates([4, 8, 16]) == set() and _duplicates([4, 8, 4]) == {"4"}
    assert _duplicates([1, 1.0]) == {"1", "1.0"}  # equal values, as == (list.count) says
    assert _duplicates([["-x", "1"], ["-x", "2"], ["-x", "1"]]) == {"['-x', '1']"}  # lists: launcher_args
    assert _duplicates(list(range(50_000)) + [7]) == {"7"}
