"""The matrix meets the site before the queue does (#31 part 2): shapes relative to the GPUs a node has
(``1xall``, ``2xall``, ``1xhalf``), resolved from the site file, the system or the cluster; the cells a node's
GPUs cannot hold counted and named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dlperf_slurm.cli import main
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import loader

ROOT = Path(__file__).resolve().parent.parent

RELATIVE = """
suite = "pytorch-ddp/bert-base"
[axes]
devices = ["1x1", "1xhalf", "1xall", "2xall"]
batch_size = [32]
"""


def write(tmp_path: Path, text: str, name: str = "m.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def shapes(m) -> list[str]:
    return [f"{c.nodes}x{c.gpus_per_node}" for c in m.cells]


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("DLPERF_SLURM_GPUS_PER_NODE")


def test_relative_shapes_from_the_site_files_gpus_per_node(tmp_path, no_env):
    site = write(tmp_path, "[slurm]\ngpus_per_node = 4\n", "site.toml")
    m = loader.load(write(tmp_path, RELATIVE), site=site)
    assert shapes(m) == ["1x1", "1x2", "1x4", "2x4"]
    assert m.node_gpus == "shapes: 'all' is 4 GPUs a node, 'half' 2 ([slurm] gpus_per_node)"


def test_relative_shapes_from_the_systems_hardware(tmp_path, no_env):
    site = write(tmp_path, "[systems.dgx]\ngpus_per_node = 8\n", "site.toml")
    m = loader.load(write(tmp_path, RELATIVE), site=site, system="dgx")
    assert shapes(m) == ["1x1", "1x4", "1x8", "2x8"]
    assert "(system dgx's gpus_per_node)" in m.node_gpus


def test_relative_shapes_from_the_clusters_partition(tmp_path, no_env, fake):
    import fakeslurm

    fakeslurm.update(fake, lambda s: s.update(partitions="gpu*|gpu|4|infinite|gpu:a100:4(S:0-1)|1-infinite\n"
                                                         "big|big|2|infinite|gpu:8|1-infinite"))
    m = loader.load(write(tmp_path, RELATIVE), site=False)
    assert shapes(m) == ["1x1", "1x2", "1x4", "2x4"]
    assert m.node_gpus.endswith("(the nodes of partition gpu, as sinfo says)")
    m = loader.load(write(tmp_path, RELATIVE + '[slurm]\npartition = "big"\n'), site=False)
    assert shapes(m) == ["1x1", "1x4", "1x8", "2x8"]


def test_a_relative_shape_that_comes_to_a_given_one_is_kept_once(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_SLURM_GPUS_PER_NODE", "1")
    m = loader.load(write(tmp_path, RELATIVE.replace('"1xhalf", ', "")), site=False)
    assert shapes(m) == ["1x1", "2x1"]


def test_nothing_to_resolve_a_relative_shape_by_is_one_line_naming_what_to_set(tmp_path, no_env, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm client
    with pytest.raises(UserError) as err:
        loader.load(write(tmp_path, RELATIVE), site=False)
    text = str(err.value)
    assert "\n" not in text and "axes.devices" in text and "gpus_per_node = N under [slurm]" in text
    assert "no Slurm client" in text


def test_a_cluster_partition_without_gpus_is_named(tmp_path, no_env, fake):
    with pytest.raises(UserError, match="partition debug have no GPU GRES"):
        loader.load(write(tmp_path, RELATIVE), site=False)


def test_cells_a_node_cannot_hold_are_dropped_counted_and_named(tmp_path, no_env, capsys):
    site = write(tmp_path, "[slurm]\ngpus_per_node = 4\n", "site.toml")
    path = write(tmp_path, RELATIVE.replace('"1xhalf", "1xall", "2xall"', '"1x8", "2x8", "1xall"'))
    m = loader.load(path, site=site)
    assert shapes(m) == ["1x1", "1x4"]
    assert [d.reason for d in m.dropped] == ["the nodes have 4 GPUs ([slurm] gpus_per_node); it asks 8"] * 2
    assert main(["plan", str(path), "--site", str(site)]) == 0
    out = capsys.readouterr().out
    assert "shapes: 'all' is 4 GPUs a node, 'half' 2 ([slurm] gpus_per_node)" in out
    assert "dropped 2 cells:" in out and "bert-base.pytorch-ddp.2x8.b32.fp32.xla0: the nodes have 4 GPUs" in out


def test_dlperf_bert_fits_a_4_gpu_site_as_an_8_gpu_one(tmp_path, no_env):
    four = write(tmp_path, "[slurm]\ngpus_per_node = 4\n", "four.toml")
    eight = write(tmp_path, "[slurm]\ngpus_per_node = 8\n", "eight.toml")
    m4, m8 = loader.load(ROOT / "matrices/bert.toml", site=four), loader.load(ROOT / "matrices/bert.toml", site=eight)
    assert (len(m4.cells), len(m4.dropped)) == (len(m8.cells), len(m8.dropped)) == (24, 0)
    assert sorted({f"{c.nodes}x{c.gpus_per_node}" for c in m4.cells}) == ["1x1", "1x4", "2x4", "4x4"]
    assert sorted({f"{c.nodes}x{c.gpus_per_node}" for c in m8.cells}) == ["1x1", "1x8", "2x8", "4x8"]


@pytest.mark.parametrize("value, needle", [(0, ">= 1"), (65, "1 to 64"), ("4", "expected an integer")])
def test_gpus_per_node_is_checked(tmp_path, value, needle):
    with pytest.raises(UserError, match=needle):
        loader.load(write(tmp_path, RELATIVE + f"[slurm]\ngpus_per_node = {value!r}\n".replace("'", '"')),
                    site=False)


# -- what the site leaves out that the cluster needs: one line each at plan and at submit --dry-run

BERT_4 = RELATIVE.replace('"1xhalf", ', "") + '[slurm]\ngpu_request = "none"\n'


def _lines(tmp_path, capsys, *extra: str) -> tuple[list[str], list[str]]:
    path = write(tmp_path, BERT_4)
    assert main(["plan", str(path), "--no-site", "--wide", *extra]) == 0  # --wide: its lines unwrapped
    plan = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cluster: ")]
    assert main(["--logs", str(tmp_path / "logs"), "submit", str(path), "--no-site", "--dry-run",
                 "--executor", "slurm"]) == 0
    dry = [line for line in capsys.readouterr().out.splitlines() if line.startswith("dry run: ")
           and "nothing is written" not in line]
    return plan, dry


def test_no_partition_and_no_default_partition_is_one_line(tmp_path, capsys, fake):
    import fakeslurm

    fakeslurm.update(fake, lambda s: s.update(partitions="gpu|gpu|4|infinite|gpu:4|1-infinite\n"
                                                         "big|big|2|infinite|gpu:8|1-infinite"))
    plan, dry = _lines(tmp_path, capsys)
    want = ("no partition is set and this cluster has no default partition: sbatch would refuse every job; set "
            'partition = "NAME" under [slurm] in your site file (its partitions: big, gpu)')
    assert plan == [f"cluster: {want}"] and dry == [f"dry run: {want}"]


def test_no_partition_says_which_partition_the_jobs_go_to(tmp_path, capsys, fake):
    import fakeslurm

    fakeslurm.update(fake, lambda s: s.update(partitions="gpu*|gpu|4|infinite|gpu:4|1-infinite"))
    plan, dry = _lines(tmp_path, capsys)
    want = "no partition is set: the jobs go to the cluster's default partition, gpu (4 nodes of 4 GPUs; its " \
           "partitions: gpu)"
    assert plan == [f"cluster: {want}"] and dry == [f"dry run: {want}"]


@pytest.mark.parametrize("user, accounts, has", [
    ("", ["physics", "bench"], "user {me} has no default account (its accounts: bench, physics)"),
    (None, [], "user {me} has no account on this cluster (ask its administrators for one)"),
])
def test_an_account_the_cluster_requires_is_one_line(tmp_path, capsys, fake, user, accounts, has):
    import fakeslurm

    from dlperf_slurm.schedulers.slurmlimits import user as me

    def knobs(s):
        s.update(config={"AccountingStorageEnforce": "associations,limits"}, accounts=accounts)
        if user is not None:
            s["defaultaccount"] = user
    fakeslurm.update(fake, knobs)
    plan, dry = _lines(tmp_path, capsys)
    want = (f"no account is set and {has.format(me=me())}, where this cluster requires one "
            '(AccountingStorageEnforce=associations,limits): sbatch would refuse every job; set account = "NAME" '
            "under [slurm] in your site file")
    assert plan[1:] == [f"cluster: {want}"] and dry[1:] == [f"dry run: {want}"], (plan, dry)


def test_an_account_set_or_a_default_one_or_no_enforcement_says_nothing(tmp_path, capsys, fake):
    import fakeslurm

    fakeslurm.update(fake, lambda s: s.update(config={"AccountingStorageEnforce": "associations"},
                                              defaultaccount="bench"))
    plan, dry = _lines(tmp_path, capsys)
    assert len(plan) == len(dry) == 1  # the default partition's line only
    fakeslurm.update(fake, lambda s: s.update(config={"AccountingStorageEnforce": "none"}, defaultaccount=""))
    plan, dry = _lines(tmp_path, capsys)
    assert len(plan) == len(dry) == 1
