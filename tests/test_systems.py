"""Named systems and partitions of the site file: --system NAME[:PARTITION] on plan, render, submit and search;
layers site < system < partition < matrix; a matrix key a system also sets is reported; the hardware keys."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402
from dlperf_slurm.errors import UserError  # noqa: E402
from dlperf_slurm.matrix import loader  # noqa: E402
from dlperf_slurm.store import database  # noqa: E402

SITE = """default_system = "alpha"
[slurm]
account = "bench"
time = "01:00:00"
[systems.alpha]
description = "GPU cluster"
gpu_model = "A100-SXM4-80GB"
gpus_per_node = 8
interconnect = "4x HDR200 InfiniBand"
busbw_gbs = 180
slurm = { partition = "gpu", gpu_request = "gres" }
health = { min_busbw_gbs = 150 }
[systems.alpha.partitions.small]
gpus_per_node = 2
slurm = { partition = "small", constraint = "a100" }
[systems.ci]
slurm = { gpu_request = "none" }
"""


@pytest.fixture
def site(tmp_path):
    p = tmp_path / "site.toml"
    p.write_text(SITE)
    return p


def _matrix(tmp_path, slurm: str = "") -> Path:
    p = tmp_path / "m.toml"
    p.write_text('suite = "pytorch-ddp/resnet50"\nname = "m"\n[axes]\ndevices = ["1x1", "1x4", "2x8"]\n'
                 f'batch_size = [32]\n[slurm]\n{slurm}\n')
    return p


def test_layers_site_system_partition_matrix(tmp_path, site):
    m = loader.load(_matrix(tmp_path), site=site)  # the default system
    assert m.system.label == "alpha" and m.system.gpus_per_node == 8 and m.system.busbw_gbs == 180.0
    assert (m.slurm.partition, m.slurm.gpu_request, m.slurm.account, m.slurm.time) == ("gpu", "gres", "bench",
                                                                                        "01:00:00")
    # the gate's threshold is alpha's expected busbw, not its [health] 150 (said: tests/test_gate_threshold.py)
    assert m.health.min_busbw_gbs == 180 and m.health.expected_by == "alpha" and not m.dropped
    assert m.overridden == (f"{site}:12: [systems.alpha.health] min_busbw_gbs = 150 is not used: the health "
                            "gate's threshold is system alpha's expected busbw_gbs, 180 GB/s",)
    m = loader.load(_matrix(tmp_path), site=site, system="alpha:small")
    assert (m.slurm.partition, m.slurm.constraint, m.slurm.gpu_request) == ("small", "a100", "gres")
    assert m.system.gpus_per_node == 2 and m.system.gpu_model == "A100-SXM4-80GB"  # the system's, kept
    assert [d.cell.shape for d in m.dropped] == ["1n4g", "2n8g"]
    assert m.dropped[0].reason == "system alpha:small has 2 GPUs per node, the cell asks 4"
    m = loader.load(_matrix(tmp_path), site=site, system="ci")
    assert m.slurm.gpu_request == "none" and m.slurm.partition is None and m.system.gpus_per_node is None
    assert loader.load(_matrix(tmp_path), site=False).system is None


def test_a_matrix_key_the_system_sets_wins_and_is_reported(tmp_path, site, capsys):
    mx = _matrix(tmp_path, 'partition = "mine"\ngpu_request = "gres"\ntime = "00:20:00"')
    m = loader.load(mx, site=site)
    assert m.slurm.partition == "mine"
    # gpu_request: the same value as the system's, nothing to say; time: the site's, not a system's
    assert m.overridden[1:] == (f"{mx}:7: [slurm] partition = 'mine' wins over system alpha's 'gpu'",)
    assert main(["plan", str(mx), "--site", str(site)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # lines wrapped at 100 columns
    assert "system alpha (GPU cluster; A100-SXM4-80GB x 8/node; 4x HDR200 InfiniBand; busbw 180 GB/s expected)" in out
    assert "[slurm] partition = 'mine' wins over system alpha's 'gpu'" in out
    assert main(["render", str(mx), "--site", str(site), "--out", str(tmp_path / "r")]) == 0
    assert "wins over system alpha's 'gpu'" in capsys.readouterr().err


def test_render_writes_the_partitions_directives(tmp_path, site):
    assert main(["render", str(_matrix(tmp_path)), "--site", str(site), "--system", "alpha:small",
                 "--out", str(tmp_path / "r")]) == 0
    script = sorted((tmp_path / "r").rglob("*.sbatch"))[0]  # 1 cell x 7 repeats
    text = script.read_text()
    for line in ("#SBATCH --partition=small", "#SBATCH --constraint=a100", "#SBATCH --account=bench",
                 "#SBATCH --gres=gpu:1"):
        assert line in text


def test_bad_systems_are_one_line(tmp_path, site, capsys):
    mx = str(_matrix(tmp_path))
    assert main(["plan", mx, "--site", str(site), "--system", "beta"]) == 2
    assert "--system beta: site file" in (err := capsys.readouterr().err) and "(its systems: alpha, ci)" in err
    assert main(["plan", mx, "--site", str(site), "--system", "alpha:big"]) == 2
    assert "(partitions of alpha: small)" in capsys.readouterr().err
    assert main(["plan", mx, "--no-site", "--system", "alpha"]) == 2
    assert "no site file" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text(SITE.replace("gpus_per_node = 8", 'gpus_per_node = "eight"'))
    with pytest.raises(UserError, match=r"bad.toml:8: systems.alpha.gpus_per_node: expected a whole number"):
        loader.load(mx, site=bad)
    bad.write_text(SITE.replace("busbw_gbs = 180", "busbw = 180"))
    with pytest.raises(UserError, match=r"bad.toml:10: systems.alpha.busbw: unknown key \(did you mean 'busbw_gbs'"):
        loader.load(mx, site=bad)


def test_a_campaign_submitted_for_a_system_is_stored_under_it(tmp_path, site, monkeypatch):
    """submit --system ci (the CPU-only system) records the system in the campaign; collect files the cells under
    it in the results store without being told."""
    monkeypatch.setenv("DLPERF_SLURM_STORE", str(tmp_path / "results.sqlite"))
    mx = write_matrix(tmp_path, name="sys", repeats=2)
    mx.write_text(mx.read_text().replace('gpu_request = "none"\n', ""))  # the system says how (not) to ask for GPUs
    logs = str(tmp_path / "logs")
    p = cli("--logs", logs, "submit", str(mx), "--site", str(site), "--system", "ci", "--executor", "local",
            "--templates", str(TEMPLATES), "--wait")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "--gpus-per-node" not in next((tmp_path / "logs" / "sys").rglob("*.sbatch")).read_text()
    p = cli("--logs", logs, "collect", "sys", "--no-plots", "-q", "--out", str(tmp_path / "s"))
    assert p.returncode == 0 and "1 cell added" in p.stdout, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        assert conn.execute(f"SELECT system_name, partition_name, n_ok FROM {database.TABLE}").fetchall() == [("ci", "", 2)]


def test_no_example_matrix_carries_a_site_key():
    site_keys = ("gpu_request", "partition", "account", "qos", "constraint")
    for path in sorted((Path(__file__).parent.parent / "matrices").glob("*.toml")):
        m = loader.load(path, site=False)  # still loads
        import tomllib

        slurm = tomllib.loads(path.read_text()).get("slurm", {})
        assert not [k for k in site_keys if k in slurm], f"{path.name} sets a site key"
        assert m.system is None


def test_a_bad_value_a_system_gives_is_reported_at_its_own_line(tmp_path, site):
    """A system's [slurm] value that no #SBATCH line may hold names the site file and the system's line, not the
    matrix's [slurm] table."""
    bad = tmp_path / "bad.toml"
    bad.write_text(SITE.replace('constraint = "a100"', 'constraint = "a100;rm -rf ~"'))
    with pytest.raises(UserError, match=r"bad.toml:15: systems.alpha.partitions.small.slurm.constraint: "
                                        r"'a100;rm -rf ~' is not allowed here"):
        loader.load(_matrix(tmp_path), site=bad, system="alpha:small")
    loader.load(_matrix(tmp_path), site=bad, system="alpha")  # the partition's value is not alpha's


def test_a_precision_the_systems_gpu_has_no_tensor_cores_for_is_dropped_in_one_line(tmp_path, site):
    """FP8 on the A100 system (before Hopper and Ada) and MXFP8 on an H100 one are dropped before anything is
    submitted, each with one line naming the system, the format and what it needs; bf16 there, and FP8 on a GPU
    this tool does not know, are left to the program."""
    p = tmp_path / "tt.toml"
    p.write_text('suite = "torchtitan/llama3"\nname = "tt"\n[axes]\ndevices = ["1x8"]\nbatch_size = [1]\n'
                 'precision = ["bf16", "fp8"]\n')
    m = loader.load(p, site=site)
    assert [c.precision for c in m.cells] == ["bf16"]
    (d,) = m.dropped
    assert d.reason == ("system alpha: FP8 (fp8) needs a Hopper or Ada (compute capability 8.9+) GPU, which "
                        "A100-SXM4-80GB is not"), d.reason
    h100 = tmp_path / "h100.toml"
    h100.write_text(SITE.replace('gpu_model = "A100-SXM4-80GB"', 'gpu_model = "H100 80GB HBM3"'))
    p.write_text('suite = "megatron-bridge/llama3"\nname = "mb"\n[axes]\ndevices = ["1x8"]\nbatch_size = [1]\n'
                 'precision = ["fp8", "mxfp8"]\ngpu = ["b200"]\n')
    m = loader.load(p, site=h100)
    assert [c.precision for c in m.cells] == ["fp8"]
    assert m.dropped[0].reason == "system alpha: MXFP8 (mxfp8) needs a Blackwell GPU, which H100 80GB HBM3 is not"
    other = tmp_path / "other.toml"
    other.write_text(SITE.replace('gpu_model = "A100-SXM4-80GB"', 'gpu_model = "Instinct MI300X"'))
    p.write_text('suite = "torchtitan/llama3"\nname = "tt"\n[axes]\ndevices = ["1x8"]\nbatch_size = [1]\n'
                 'precision = ["fp8"]\n')
    assert [c.precision for c in loader.load(p, site=other).cells] == ["fp8"]
