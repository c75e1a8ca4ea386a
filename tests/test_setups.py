"""A named axis of set-ups (bundles of launcher arguments and environment: the DDL network-scaling study's network
and MPI transport set-ups): matrix, rendered script, the study's table (rows GPU counts, columns set-ups, scaling
efficiency), and a real 2-node run of the built-in workload under mpirun with two transport set-ups."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import cli, cluster_up, wait_campaign  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.errors import UserError  # noqa: E402
from dlperf_slurm.matrix import loader as matrix
from dlperf_slurm.model import cell  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402
from dlperf_slurm.submit import render  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

STUDY = """suite = "pytorch-ddp/resnet50"
name = "net"
[axes]
devices = ["1x1", "2x1"]
batch_size = [2]
launcher = ["mpirun"]
setup = ["plain", "tcp-tuned"]
[setups.plain]
description = "OpenMPI's defaults"
[setups.tcp-tuned]
description = "the DDL study's TCP tuning"
launcher_args = ["--mca", "btl_tcp_sndbuf", "13107200", "--mca", "btl_tcp_rcvbuf", "13107200",
                 "--mca", "btl_tcp_links", "4", "--mca", "btl_tcp_if_include", "lo"]
env = { GLOO_SOCKET_IFNAME = "lo", DLPERF_SETUP_MARK = "tuned" }
[options]
tiny = true
threads = 1
[measure]
repeats = 1
warmup_steps = 1
measure_steps = 4
[slurm]
time = "00:05:00"
gpu_request = "none"
[environment.env]
OMPI_ALLOW_RUN_AS_ROOT = "1"
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = "1"
"""


def load(tmp_path: Path, text: str) -> cell.Matrix:
    p = tmp_path / "m.toml"
    p.write_text(text)
    return matrix.load(p, site=False)


def test_setups_are_an_axis_whose_bundle_reaches_the_launcher_and_environment(tmp_path):
    m = load(tmp_path, STUDY)
    assert [(c.shape, c.setup) for c in m.cells] == [("1n1g", "plain"), ("1n1g", "tcp-tuned"), ("2n1g", "plain"),
                                                     ("2n1g", "tcp-tuned")]
    assert m.cells[1].id.endswith(".setup-tcp-tuned") and "la-" not in m.cells[1].id  # the name, not the bundle
    tuned = render.render_run(m, matrix.runs(m, tmp_path / "c")[3])
    plain = render.render_run(m, matrix.runs(m, tmp_path / "c")[2])
    assert "mpirun" in tuned and "--mca btl_tcp_sndbuf 13107200" in tuned and "btl_tcp_sndbuf" not in plain
    assert "export DLPERF_SETUP_MARK=tuned" in tuned and "DLPERF_SETUP_MARK" not in plain
    # ``setup`` in a rule
    m = load(tmp_path, STUDY + '[[exclude]]\nsetup = "plain"\ndevices = "2x1"\n')
    assert [(c.shape, c.setup) for c in m.cells] == [("1n1g", "plain"), ("1n1g", "tcp-tuned"), ("2n1g", "tcp-tuned")]


@pytest.mark.parametrize("edit, key, words", [
    (('setup = ["plain", "tcp-tuned"]', 'setup = ["plain", "tcp-tune"]'), "axes.setup", "did you mean 'tcp-tuned'"),
    (('env = { GLOO', 'envv = { GLOO'), "setups.tcp-tuned.envv", "unknown key"),
    (('DLPERF_SETUP_MARK = "tuned"', '"BAD-NAME" = "x"'), "setups.tcp-tuned.env.BAD-NAME", "not a valid"),
])
def test_bad_setups_name_the_key_and_line(tmp_path, edit, key, words):
    with pytest.raises(UserError) as e:
        load(tmp_path, STUDY.replace(*edit))
    assert key in str(e.value) and words in str(e.value) and "m.toml:" in str(e.value), str(e.value)


def test_the_ddl_study_matrix_ships_and_expands():
    m = matrix.load(ROOT / "matrices" / "ddl-network-study.toml", site=False)
    assert sorted(m.setups) == ["host-tcp-tuned", "overlay-default"]
    assert {c.nodes for c in m.cells} == {1, 2, 4, 8} and {c.gpus_per_node for c in m.cells if c.devices > 1} == {2}
    assert {c.devices for c in m.cells if c.nodes == 1} == {1, 2}  # 1x1: the network explanation's baseline
    assert {c.launcher for c in m.cells} == {"mpirun"}
    # ResNet-50 at the study's 128 per GPU, VGG16 at 64 (at 128 its activations outgrow a 16 GB GPU)
    assert {(c.suite, c.batch_size) for c in m.cells} == {("tf-cnn/resnet50", 128), ("tf-cnn/vgg16", 64)}
    assert len(m.cells) == 2 * 5 * 2 * 2  # suites x device shapes x set-ups x data


@pytest.mark.slurm
@pytest.mark.skipif(cluster_up() is not None, reason=cluster_up() or "")
def test_two_node_study_runs_under_mpirun_with_two_transport_setups(tmp_path):
    mx = tmp_path / "net.toml"
    mx.write_text(STUDY)
    logs, out = tmp_path / "logs", tmp_path / "s"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site")
    assert p.returncode == 0, p.stdout + p.stderr
    wait_campaign(logs / "net", 300)
    runs = manifest.load_manifest(logs / "net")
    assert [r.status for r in runs] == [Status.OK] * 4, [(r.key, r.status, r.reason) for r in runs]
    for r in runs:
        text = r.log.read_text()
        header = next(json.loads(line.split(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith(':::DLPERF {"event":"header"'))
        assert header["world_size"] == r.cell.nodes and header["launcher"] == "mpi"
        assert ("--mca btl_tcp_sndbuf 13107200" in text) == (r.cell.setup == "tcp-tuned")  # the command it ran
    p = cli("--logs", str(logs), "collect", "net", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    md = (out / "net.md").read_text()
    table = md.split("## Set-ups compared:", 1)[1].split("\n## ", 1)[0]
    assert "| GPUs " in table and "plain:" in table and "tcp-tuned:" in table, table
    rows = [line for line in table.splitlines() if line.startswith("|") and line.split("|")[1].strip() in ("1", "2")]
    assert len(rows) == 2 and rows[0].count("(100.0%)") == 2 and "%)" in rows[1], table
