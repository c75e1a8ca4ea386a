"""Published reference sets: the shipped figures are the READMEs' figures (re-read from the stored README text),
every entry names a suite this tool has or plans and a valid shape, and `compare ref:SET NEW` reports ratios and
the conditions that differ, without a verdict and without gating unless asked."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
sys.path.insert(0, str(Path(__file__).parent))
import readme_tables  # noqa: E402
from testlib import cli  # noqa: E402

from dlperf_slurm import suites as suite_registry  # noqa: E402
from dlperf_slurm.compare import (
    published,  # noqa: E402
    references,  # noqa: E402
)
from dlperf_slurm.matrix.axes import PRECISIONS  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "real" / "references"
REAL = Path(__file__).parent / "fixtures" / "real"
#: the suites the issue names for the reference sets (some are added on other branches)
PLANNED = {"ngc-pytorch/resnet50", "ngc-pytorch/bert-base", "ngc-tf1/resnet50", "ngc-tf1/bert-base",
           "ngc-mxnet/resnet50", "oneflow/resnet50", "oneflow/bert-base", "paddle/resnet50", "paddle/bert-base",
           "mindspore/resnet50", "mindspore/bert-base", "tf2/resnet50", "tf2/bert-base", "pytorch-examples/resnet50",
           "mxnet-gluon/resnet50", "mxnet-gluon/bert-base"}
FIXTURE_DIR = {"dlperf-v100": "dlperf", "ngc-a100": "ngc", "torchtitan-h100": "torchtitan",
               "megatron-bridge-h100": "megatron-bridge"}


def raw(name):
    return tomllib.loads(resources.files("dlperf_slurm.compare.references").joinpath(f"{name}.toml").read_text())


def readme(name, path):
    """The stored README text a table of set ``name`` was copied from."""
    stem = path.replace("/", "_")
    found = [p for p in (FIX / FIXTURE_DIR[name]).iterdir()
             if p.name == stem or p.name.startswith(stem[:-3] + ".lines")]
    assert len(found) == 1, f"no stored README text for {path}: {found}"
    return found[0].read_text()


def readme_rows(name, table):
    """The table's rows as the README has them, batch from the table or, where it has no batch column, from
    the heading (DLPerf) or as the set gives it (checked by test_the_a100_batch_sizes_are_the_readmes)."""
    batch = table["rows"][0][1]
    return [(d, b, float(v)) for d, b, v in
            readme_tables.entries(readme(name, table["source"]), table["headings"], table["column"], batch)]


def test_the_sets_ship_and_load():
    assert set(references.names()) == {"dlperf-v100", "ngc-a100", "torchtitan-h100", "megatron-bridge-h100"}
    cfg = (Path(__file__).parent.parent / "setup.cfg").read_text()
    assert "dlperf_slurm.compare.references = *.toml" in cfg  # package data: pip install . ships the sets
    for name in references.names():
        ref = references.load(name)
        assert ref.entries and ref.commit and ref.repository.startswith("https://github.com/")
        for key in ("gpu", "gpus", "interconnect", "data", "repeats", "window"):
            assert ref.conditions.get(key), (name, key)


@pytest.mark.parametrize("name", ["dlperf-v100", "ngc-a100"])
def test_every_entry_names_a_known_suite_and_a_valid_shape(name):
    ref = references.load(name)
    known = PLANNED | set(suite_registry.names())
    mains = {}
    for e in ref.entries:
        assert e.suite in known, e
        assert e.suite in ref.suites and {"framework", "container", "code"} <= set(ref.suites[e.suite]), e.suite
        assert e.nodes in (1, 2, 4) and e.gpus_per_node in (1, 2, 4, 8), e
        assert e.precision in PRECISIONS and e.batch_size > 0 and e.value > 0, e
        if not e.variant:  # one main figure per key: the match is unambiguous
            assert e.key not in mains, (e, mains.get(e.key))
            mains[e.key] = e
    # every variant figure stands beside a main one for the same key
    assert all(e.key in mains for e in ref.entries if e.variant)
    # DLPerf: every suite the issue lists has its V100 tables
    if name == "dlperf-v100":
        assert {e.suite for e in ref.entries} == PLANNED


@pytest.mark.parametrize("name", ["dlperf-v100", "ngc-a100"])
def test_every_table_is_the_readmes_table(name):
    """Each table's rows are exactly the README table's rows (all of them, the same figures as written)."""
    for t in raw(name)["table"]:
        rows = [(d, b, float(v)) for d, b, v in t["rows"]]
        assert rows == readme_rows(name, t), (t["source"], t["headings"])


def _torchtitan_rows_checked(t) -> list[tuple[str, str]]:
    """(what the set says, what the stored file says) of each row of a torchtitan table: its figure per GPU, its
    local batch (the heading's), its GPUs (the heading's) and the settings the row's label or the heading state."""
    text = readme("torchtitan-h100", t["source"])
    figures = readme_tables.labelled(text, t["headings"], t["label_column"], t["column"])
    heading = t["headings"][0]
    out = []
    for devices, batch, value, own in t["rows"]:
        n, g = (int(v) for v in devices.split("x"))
        out.append((str(value), figures[own["row"]]))
        out.append((f"{n * g} GPUs", re.search(r"(\d+) GPUs", heading).group(0)))
        out.append((f"Local batch size {batch}", re.search(r"Local batch size \d+", heading).group(0)))
        if "seq_len" in own:  # the row's own sequence length: the table's column of it
            seqs = readme_tables.labelled(text, t["headings"], t["label_column"], "Sequence Length")
            out.append((str(own["seq_len"]), seqs[own["row"]]))
        cp = re.search(r"CP (\d+)", own["row"])
        if cp:
            out.append((str(own.get("cp", 1)), cp.group(1)))
        flavor = t["params"]["flavor"]
        out.append((f"Llama 3.1 {flavor} model", re.search(r"Llama 3\.1 \S+ model", heading).group(0)))
        ac = t["params"]["activation_checkpointing"].capitalize()
        out.append((f"{ac} activation checkpointing", re.search(r"\w+ activation checkpointing", heading).group(0)))
        for k, word in (("tp", "TP"), ("pp", "PP")):
            if k in t["params"]:
                out.append((f"{word}{t['params'][k]}", re.search(word + r" ?(\d+)", heading).group(0).replace(" ", "")))
    return out


def test_every_torchtitan_row_is_the_benchmark_files_row():
    """torchtitan's tables name their rows (FSDP, FSDP + torch.compile, ...): each entry's TPS/GPU is that row's,
    its GPUs, local batch, model, checkpointing and layout are what the table's heading and row say, and every row
    of each table is in the set."""
    tables = raw("torchtitan-h100")["table"]
    for t in tables:
        for said, stored in _torchtitan_rows_checked(t):
            assert said == stored, (t["headings"][0][:40], said, stored)
    seen: dict[str, set[str]] = {}
    for t in tables:
        seen.setdefault(t["headings"][0], set()).update(own["row"] for *_, own in t["rows"])
    for heading, rows in seen.items():
        t = next(t for t in tables if t["headings"][0] == heading)
        text = readme("torchtitan-h100", t["source"])
        assert rows == set(readme_tables.labelled(text, [heading], t["label_column"], t["column"])), heading


def test_a_typo_in_a_torchtitan_figure_fails_the_check():
    t = raw("torchtitan-h100")["table"][0]
    t["rows"][0][2] += 1
    assert any(said != stored for said, stored in _torchtitan_rows_checked(t))


def test_the_torchtitan_set_matches_a_cell_by_its_layout_and_scales_its_figure_per_gpu():
    ref = references.load("torchtitan-h100")
    suite = suite_registry.get("torchtitan/llama3")
    base = {k: str(v) for k, v in suite.axis_defaults.items()}
    fsdp = {**base, "flavor": "8B", "seq_len": "8192"}

    def lookup(*key, settings):
        return ref.lookup("torchtitan/llama3", *key, settings, base)

    main, also = lookup("1x8", 2, "bf16", False, settings=fsdp)
    assert main is not None and main.value == 5762 * 8 and main.per_gpu == 5762 and main.row == "FSDP" and not also
    assert lookup("1x8", 2, "bf16", False, settings={**fsdp, "tp": "2"})[0] is None  # another layout
    assert lookup("1x8", 2, "bf16", False, settings={**fsdp, "seq_len": "4096"})[0] is None
    cp = lookup("1x8", 1, "fp8", True, settings={**fsdp, "activation_checkpointing": "full", "cp": "4",
                                                 "seq_len": "131072"})[0]
    assert cp is not None and cp.value == 1071 * 8 and cp.row == "FSDP 2, CP 4"
    two_d, also = lookup("32x8", 16, "fp8", True, settings={**base, "flavor": "70B", "tp": "8", "seq_len": "8192",
                                                            "activation_checkpointing": "full"})
    assert two_d.value == 829 * 256 and [e.variant for e in also] == ["AsyncTP"] and also[0].value == 876 * 256
    # every main figure is one per key and its settings; every entry names the suite's axes only
    keys = [(e.key, e.params) for e in ref.entries if not e.variant]
    assert len(keys) == len(set(keys)) and all(k in suite.axes for e in ref.entries for k, _ in e.params or ())


def test_a_torchtitan_campaign_against_the_set_names_the_row_and_the_settings():
    ref = references.load("torchtitan-h100")
    runs = [{"cell_id": "llama3.torchtitan.1x8.b2.bf16.xla1.flavor-8B.seq_len-8192", "suite": "torchtitan/llama3",
             "nodes": 1, "gpus_per_node": 8, "batch_size": 2, "precision": "bf16", "xla": True, "status": Status.OK,
             "throughput": t, "unit": "tokens/s", "variant": "flavor=8B, seq_len=8192", "provenance": H100}
            for t in (50_000.0, 52_000.0, 51_000.0)]
    rows, unmatched = published.compare(runs, ref)
    (row,) = rows
    assert not unmatched and row.reference == 6667 * 8 and row.ratio == pytest.approx(51_000 / (6667 * 8))
    assert "6667 per GPU x 8 GPUs" in row.note and "row 'FSDP + torch.compile'" in row.note
    assert row.conditions["settings"]["status"] == "same" and "flavor=8B" in row.conditions["settings"]["here"]
    gpu = row.conditions["GPU"]  # an H100 80GB here, the H100 96GB of torchtitan's hosts there
    assert gpu["status"] == "differs" and "80GB" in gpu["here"] and "96GB" in gpu["reference"], gpu
    other = [{**r, "variant": "flavor=8B, seq_len=8192, tp=2", "cell_id": "x"} for r in runs]
    assert published.compare(other, ref) == ([], ["x"])  # tensor parallel 2: no published figure


#: the summary's columns -> the entry's params (its shape, batch and precision checked apart)
_MB_COLUMNS = {"GBS": "global_batch", "Sequence Length": "seq_length", "TP": "tensor_parallel",
               "PP": "pipeline_parallel", "CP": "context_parallel", "VP": "virtual_pipeline", "EP": "expert_parallel"}


def _bridge_rows_checked(t) -> list[tuple[str, str]]:
    """(what the set says, what the stored summary says) of each row of a Megatron-Bridge table: its Tokens / sec /
    GPU, #-GPUs, Precision, MBS, FSDP (0: DDP) and every layout column ("n/a": the suite's default 1)."""
    text = readme("megatron-bridge-h100", t["source"])
    out = []
    for devices, batch, value, own in t["rows"]:
        def col(name, row=own["row"]):
            return readme_tables.labelled(text, t["headings"], t["label_column"], name)[row]

        n, g = (int(v) for v in devices.split("x"))
        out += [(str(value), col(t["column"])), (str(n * g), col("#-GPUs")), (str(batch), col("MBS")),
                ({"fp8": "FP8", "bf16": "BF16", "mxfp8": "MXFP8", "nvfp4": "NVFP4"}[t["precision"]], col("Precision")),
                ("0" if not t["params"]["megatron_fsdp"] else "FSDP > 0", col("FSDP"))]
        for column, key in _MB_COLUMNS.items():
            stated = col(column)
            out.append((str(t["params"].get(key, 1)), "1" if stated == "n/a" else stated))
        out.append((str(own["tflops_per_gpu"]), col("Model TFLOP / sec / GPU")))
    return out


def test_every_megatron_bridge_row_is_the_performance_summarys_row():
    tables = raw("megatron-bridge-h100")["table"]
    for t in tables:
        for said, stored in _bridge_rows_checked(t):
            assert said == stored, (t["headings"][-1], said, stored)
    # every DGX-H100 row of the release's pre-training tables is in the set
    text = readme("megatron-bridge-h100", tables[0]["source"])
    models = re.findall(r"^#### (Model: .+)$", text.split("### SFT")[0], re.M)
    with_h100 = {m for m in models if "DGX-H100" in readme_tables.labelled(
        text, ["26.04.01 NeMo Container", "Pre-Training Performance", m], "System", "Tokens / sec / GPU")}
    # but Nemotron 3 Nano's (a hybrid Mamba-Transformer MoE, whose family no megatron-bridge suite has)
    assert with_h100 == {t["headings"][-1] for t in tables} | {"Model: Nemotron_3_Nano"}


def test_a_typo_in_a_megatron_bridge_layout_fails_the_check():
    t = raw("megatron-bridge-h100")["table"][0]
    t["params"]["pipeline_parallel"] = 4
    assert any(said != stored for said, stored in _bridge_rows_checked(t))


def test_the_megatron_bridge_set_matches_a_cell_only_with_the_published_layout():
    ref = references.load("megatron-bridge-h100")
    suite = suite_registry.get("megatron-bridge/llama3")
    base = {k: str(v) for k, v in suite.axis_defaults.items()}
    row = {**base, "recipe": "llama3_70b", "global_batch": "256", "tensor_parallel": "4", "pipeline_parallel": "8",
           "virtual_pipeline": "5"}
    main, also = ref.lookup("megatron-bridge/llama3", "8x8", 1, "fp8", False, row, base)
    assert main is not None and main.value == 1664 * 64 and main.per_gpu == 1664 and not also
    assert ref.lookup("megatron-bridge/llama3", "8x8", 1, "fp8", False, {**row, "pipeline_parallel": "4"},
                      base)[0] is None
    assert ref.lookup("megatron-bridge/llama3", "8x8", 1, "bf16", False, row, base)[0] is None
    # every entry names only its suite's axes, and plans as a cell its suite accepts
    for e in ref.entries:
        s = suite_registry.get(e.suite)
        assert all(k in s.axes for k, _ in e.params or ()), e
    from dlperf_slurm.model.cell import Cell

    for e in ref.entries:
        s = suite_registry.get(e.suite)
        params = {k: (v == "True") if k == "megatron_fsdp" else (int(v) if v.isdigit() else v) for k, v in e.params}
        cell = Cell(suite=e.suite, model=s.model, framework=s.framework, nodes=e.nodes, gpus_per_node=e.gpus_per_node,
                    batch_size=e.batch_size, precision=e.precision, xla=e.xla, launcher="srun",
                    params=tuple(sorted({**s.axis_defaults, **params}.items())))
        assert s.drop_reason(cell) is None, (e.headings[-1], s.drop_reason(cell))


def test_a_typo_in_a_figure_fails_the_check():
    t = raw("dlperf-v100")["table"][0]
    t["rows"][0][2] = round(t["rows"][0][2] + 0.01, 2)
    assert [(d, b, float(v)) for d, b, v in t["rows"]] != readme_rows("dlperf-v100", t)


def test_the_batch_of_a_table_without_a_batch_column_is_in_its_heading():
    for t in raw("dlperf-v100")["table"]:
        header, _ = readme_tables.table(readme("dlperf-v100", t["source"]), t["headings"])
        if "batch_size_per_device" not in [h.lower() for h in header]:
            assert {b for _, b, _ in t["rows"]} == {t["rows"][0][1]}
            assert str(t["rows"][0][1]) in " ".join(t["headings"]), t["headings"]


def test_the_a100_batch_sizes_are_the_readmes():
    a100 = {(e.suite, e.batch_size) for e in references.load("ngc-a100").entries}
    configs = (FIX / "ngc" / "PyTorch_Classification_ConvNets_configs.yml.lines140-162.yml").read_text()
    dgx = configs[configs.index("DGXA100:"):]
    assert "arch: resnet50" in dgx and ("ngc-pytorch/resnet50", int(dgx.split("batch_size:")[1].split()[0])) in a100
    mx = readme("ngc-a100", "MxNet/Classification/RN50v1.5/README.md")
    assert ("ngc-mxnet/resnet50", int(mx.split(" -b ")[1].split()[0])) in a100  # benchmark.py -b: per GPU


# ====================================================================================== compare


def _run(cell_id, suite, nodes, gpus, batch, precision, xla, status, throughput, provenance):
    return {"cell_id": cell_id, "suite": suite, "nodes": nodes, "gpus_per_node": gpus, "batch_size": batch,
            "precision": precision, "xla": xla, "status": status, "throughput": throughput, "unit": "img/s",
            "provenance": provenance}


H100 = {"job_id": "7", "gpus": ["0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 1980 MHz"],
        "versions": {"python": "3.11.7", "torch": "2.13.0"}}


def _summary(tmp_path, factor, oom=True):
    """A collect summary whose cells match dlperf-v100 figures (their medians = factor x the figure), one cell
    with no OK run and one the set has no figure for."""
    ref = references.load("dlperf-v100")
    one = ref.lookup("ngc-pytorch/resnet50", "1x1", 256, "amp", False)[0]
    multi = ref.lookup("ngc-pytorch/resnet50", "2x8", 128, "fp32", False)[0]
    runs = [_run("rn50.1x1.amp", one.suite, 1, 1, 256, "amp", False, Status.OK, one.value * factor * k, H100)
            for k in (0.99, 1.0, 1.01)]
    runs += [_run("rn50.2x8.fp32", multi.suite, 2, 8, 128, "fp32", False, Status.OK, multi.value * factor, H100)]
    if oom:
        runs += [_run("rn50.1x8.fp32", multi.suite, 1, 8, 128, "fp32", False, Status.OOM, None, H100)]
    runs += [_run("rn50.1x8.b7", multi.suite, 1, 8, 7, "fp32", False, Status.OK, 1.0, H100)]
    path = tmp_path / "site.json"
    path.write_text(json.dumps({"name": "site", "runs": runs}))
    return path, one, multi


def test_compare_against_a_reference_reports_ratios_and_what_differs(tmp_path):
    path, one, multi = _summary(tmp_path, 0.5)
    p = cli("compare", "ref:dlperf-v100", str(path), "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr  # half a V100 figure is no failure: no gate asked for
    doc = json.loads((tmp_path / "compare.ref-dlperf-v100.site.json").read_text())
    cells = {c["cell_id"]: c for c in doc["cells"]}
    assert cells["rn50.1x1.amp"]["reference"] == one.value and cells["rn50.1x1.amp"]["ratio"] == pytest.approx(0.5)
    assert cells["rn50.2x8.fp32"]["ratio"] == pytest.approx(0.5)
    assert cells["rn50.1x8.fp32"]["ratio"] is None and cells["rn50.1x8.fp32"]["status"] == Status.OOM
    assert doc["unmatched"] == ["rn50.1x8.b7"]
    cond = cells["rn50.2x8.fp32"]["conditions"]
    assert cond["GPU"] == {"status": "differs", "here": "NVIDIA H100 80GB HBM3", "reference": "Tesla V100-SXM2-16GB"}
    assert cond["container"]["status"] == "differs" and cond["container"]["here"] == "none"
    assert cond["framework"]["status"] == "differs" and "torch 2.13.0" in cond["framework"]["here"]
    assert cond["interconnect"]["status"] == cond["data"]["status"] == "unknown"
    assert "interconnect" not in cells["rn50.1x1.amp"]["conditions"]  # one node: no network in the figure
    statement = cells["rn50.1x1.amp"]["statement"]
    assert statement.startswith("differs: GPU (NVIDIA H100 80GB HBM3 here; Tesla V100-SXM2-16GB in the reference)")
    assert "same: precision, batch per device, XLA" in statement
    assert cells["rn50.1x1.amp"]["also"] and "static-loss-scale" in cells["rn50.1x1.amp"]["also"][0]
    table = p.stdout.split("| cell |")[1]
    assert "x0.50 of DLPerf's V100" in table and "slower" not in table and "faster" not in table
    assert "no OK run (OOM)" in table and "rn50.1x8.b7" in p.stdout.split("No published figure")[1]


def test_a_cell_without_an_ok_run_reads_what_collect_reads_whatever_the_hash_seed():
    """Its status is outcome.cell_status's (ties to the most severe failure), in every process: it was a max over
    a set, whose order changes with PYTHONHASHSEED."""
    import os
    import subprocess

    code = ("from dlperf_slurm.compare import published, references; from dlperf_slurm.model.status import Status; "
            "multi = references.load('dlperf-v100').lookup('ngc-pytorch/resnet50', '2x8', 128, 'fp32', False)[0]; "
            "run = lambda st: {'cell_id': 'c', 'suite': multi.suite, 'nodes': 2, 'gpus_per_node': 8, "
            "'batch_size': 128, 'precision': 'fp32', 'xla': False, 'status': st, 'throughput': None}; "
            "rows, _ = published.compare([run(Status.TIMEOUT), run(Status.OOM)], references.load('dlperf-v100')); "
            "print(str(rows[0].status))")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).parent.parent, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in range(8)}
    assert seen == {"OOM\n"}


def test_a_reference_gates_only_when_asked(tmp_path):
    out = str(tmp_path)
    path, _, _ = _summary(tmp_path, 0.5, oom=False)
    assert cli("compare", "ref:dlperf-v100", str(path), "--out", out).returncode == 0
    p = cli("compare", "ref:dlperf-v100", str(path), "--out", out, "--threshold", "0.05")
    assert p.returncode == 1 and "**below the gate**" in p.stdout, p.stdout
    doc = json.loads((tmp_path / "compare.ref-dlperf-v100.site.json").read_text())
    assert doc["threshold"] == 0.05 and all(c["below_gate"] for c in doc["cells"])
    path, _, _ = _summary(tmp_path, 1.2, oom=False)
    assert cli("compare", "ref:dlperf-v100", str(path), "--out", out, "--threshold", "0.05").returncode == 0
    path, _, _ = _summary(tmp_path, 1.2, oom=True)  # a matched cell without an OK run fails an explicit gate
    p = cli("compare", "ref:dlperf-v100", str(path), "--out", out, "--threshold", "0.05")
    assert p.returncode == 1 and p.stdout.count("**below the gate**") == 1, p.stdout


def test_compare_help_states_the_reference_gate_it_applies(tmp_path):
    """--threshold F against ref:SET: below 1 - F of the figure fails, as compare --help says (it said "below F")."""
    out = str(tmp_path)
    path, _, _ = _summary(tmp_path, 0.5, oom=False)
    assert cli("compare", "ref:dlperf-v100", str(path), "--out", out, "--threshold", "0.6").returncode == 0
    assert cli("compare", "ref:dlperf-v100", str(path), "--out", out, "--threshold", "0.4").returncode == 1
    text = " ".join(cli("compare", "--help").stdout.split())
    assert "exit 1 when a matched cell is below 1 - F of its published figure" in text


def test_a100_figures_and_a_campaign_on_the_same_gpu(tmp_path):
    ref = references.load("ngc-a100")
    e = ref.lookup("ngc-pytorch/resnet50", "1x8", 256, "fp32", False)[0]
    a100 = {"gpus": [f"{i}, NVIDIA A100-SXM4-80GB, 535.104.05, 81920 MiB, 1410 MHz" for i in range(8)],
            "container_image": "nvcr.io/nvidia/pytorch:21.03-py3", "versions": {"torch": "1.9.0a0+df837d0"}}
    rows, unmatched = published.compare(
        [_run("c", e.suite, 1, 8, 256, "fp32", False, Status.OK, e.value * 1.1, a100)], ref)
    (row,) = rows
    assert not unmatched and row.ratio == pytest.approx(1.1) and row.reference == e.value
    assert row.conditions["GPU"]["status"] == row.conditions["container"]["status"] == "same"
    assert row.conditions["precision"]["status"] == "unknown" and "TF32" in row.conditions["precision"]["reference"]
    # the README names the container, not the framework's version: that cannot be told
    assert row.conditions["framework"] == {"status": "unknown", "here": "torch 1.9.0a0+df837d0",
                                           "reference": ref.suites["ngc-pytorch/resnet50"]["framework"]}
    # DLPerf names the version: the same one is "same", the container image too
    v100 = references.load("dlperf-v100")
    e = v100.lookup("ngc-pytorch/resnet50", "1x8", 128, "fp32", False)[0]
    dlperf = {"gpus": ["0, Tesla V100-SXM2-16GB, 440.33.01, 16160 MiB, 1530 MHz"],
              "container_image": "nvcr.io/nvidia/pytorch:20.03-py3",
              "versions": {"torch": "1.5.0a0+8f84ded", "dlperf_slurm": "0.1.0"}}
    (same,), _ = published.compare([_run("c", e.suite, 1, 8, 128, "fp32", False, Status.OK, e.value, dlperf)], v100)
    assert {k: c["status"] for k, c in same.conditions.items()} == {
        "GPU": "same", "container": "same", "framework": "same", "precision": "same", "batch per device": "same",
        "XLA": "same", "data": "unknown"}
    assert same.statement.startswith("no recorded condition differs; not known here: data; same: GPU, container")
    assert published.ratio_text(row, ref) == "x1.10 of NVIDIA's DGX A100"
    assert not row.below_gate  # no threshold given


def test_compare_a_real_collected_dlperf_log_with_its_published_table(tmp_path):
    """DLPerf's own NGC PyTorch log (2n8g, b128, fp32; a real excerpt) collected as a DLPerf log tree and set
    beside the figure DLPerf published for that case: no provenance, so GPU, container and framework are unknown."""
    tree = tmp_path / "tree" / "2n8g"
    tree.mkdir(parents=True)
    shutil.copy(REAL / "DeepLearningExamples" / "pytorch-20.03" / "ngc_pytorch_rn50_2n8g_r50_b128_fp32_5.excerpt.log",
                tree / "r50_b128_fp32_5.log")
    out = str(tmp_path / "out")
    cli("collect", "--from", str(tree.parent), "--suite", "ngc-pytorch/resnet50", "--warmup-steps", "2",
        "--measure-steps", "10", "--no-plots", "--out", out, "--name", "dlperf-real", "-q", check=True)
    summary = json.loads((tmp_path / "out" / "dlperf-real.json").read_text())
    (run,) = summary["runs"]
    assert run["status"] == Status.OK
    p = cli("compare", "ref:dlperf-v100", str(tmp_path / "out" / "dlperf-real.json"), "--out", out)
    assert p.returncode == 0, p.stdout + p.stderr
    (cell,) = json.loads((tmp_path / "out" / "compare.ref-dlperf-v100.dlperf-real.json").read_text())["cells"]
    figure = references.load("dlperf-v100").lookup("ngc-pytorch/resnet50", "2x8", 128, "fp32", False)[0].value
    assert cell["reference"] == figure and cell["ratio"] == pytest.approx(run["throughput"] / figure)
    assert cell["source"].endswith("NVIDIADeepLearningExamples/PyTorch/resnet50v1.5/README.md")
    assert {k for k, c in cell["conditions"].items() if c["status"] == "unknown"} == \
        {"GPU", "container", "framework", "data", "interconnect"}
    assert cell["statement"].startswith("no recorded condition differs; not known here: GPU, container")


def test_the_references_command_and_clear_errors(tmp_path):
    p = cli("references")
    assert p.returncode == 0 and "dlperf-v100" in p.stdout and "ngc-a100" in p.stdout
    assert "Tesla V100-SXM2-16GB" in p.stdout and "nvcr.io/nvidia/pytorch:20.03-py3" in p.stdout
    assert max(map(len, p.stdout.splitlines())) <= 100, p.stdout  # the conditions wrapped
    for name in references.names():  # every figure's row, fitting 100 columns; --wide: the whole table
        fit, wide = cli("references", name).stdout, cli("references", name, "--wide").stdout
        ref = references.load(name)
        assert max(map(len, fit.splitlines())) <= 100 and max(map(len, wide.splitlines())) > 100
        rows = [line for line in fit.splitlines() if line.startswith("| ") and "| suite " not in line]
        assert [r.split("|")[5].strip() for r in rows] == [published.figure(e.value) for e in ref.entries]
        left_out = "note, variant, row, xla, settings" if any(e.params for e in ref.entries) else "note, variant, xla"
        assert f"{left_out} left out" in " ".join(fit.split()), fit
        assert all(f"{e.source}: {' > '.join(e.headings)}" in wide for e in ref.entries)
    p = cli("references", "ngc-a100", "--json")
    (doc,) = json.loads(p.stdout)
    assert len(doc["entries"]) == len(references.load("ngc-a100").entries)
    assert all(e["source"].startswith("https://github.com/NVIDIA/DeepLearningExamples/blob/") for e in doc["entries"])
    p = cli("compare", "ref:nope", str(tmp_path))
    assert p.returncode == 2 and "no reference set 'nope'" in p.stderr and "dlperf-v100" in p.stderr
    p = cli("compare", str(tmp_path), "ref:dlperf-v100")
    assert p.returncode == 2 and "is the BASE" in p.stderr


# DLPerf's v1 report (reports/dlperf_benchmark_test_report_v1.md) shows the main figures of the framework READMEs
# side by side: per table, its columns after "node num | device num" as (suite, precision, batch, xla, variant)
_R, _B = "ResNet50 V1.5 throughput (img/s)", "BERT Base Pretrain throughput (sentences/sec)"
V1_REPORT = {
    (_R, "FP32, batch size = 128"): [(s, "fp32", 128, False, "") for s in (
        "oneflow/resnet50", "ngc-mxnet/resnet50", "ngc-tf1/resnet50", "ngc-pytorch/resnet50", "mxnet-gluon/resnet50",
        "tf2/resnet50", "pytorch-examples/resnet50", "paddle/resnet50")],
    (_R, "AMP, batch size = 256"): [
        ("oneflow/resnet50", "amp", 256, False, ""), ("ngc-mxnet/resnet50", "fp16", 256, False, ""),
        ("ngc-tf1/resnet50", "amp", 224, True, ""), ("ngc-tf1/resnet50", "amp", 224, False, ""),
        ("ngc-pytorch/resnet50", "amp", 256, False, ""), ("mxnet-gluon/resnet50", "amp", 256, False, ""),
        ("tf2/resnet50", "amp", 256, False, ""), ("paddle/resnet50", "amp", 196, False, "")],
    (_B, "FP32, batch size = 32"): [
        ("oneflow/bert-base", "fp32", 32, False, ""), ("ngc-tf1/bert-base", "fp32", 32, False, ""),
        ("ngc-pytorch/bert-base", "fp32", 32, False, ""), ("paddle/bert-base", "fp32", 32, False, ""),
        ("oneflow/bert-base", "fp32", 32, False, "no-clip"), ("mxnet-gluon/bert-base", "fp32", 32, False, "")],
    (_B, "FP32, batch size = max"): [
        ("oneflow/bert-base", "fp32", 96, False, ""), ("ngc-tf1/bert-base", "fp32", 48, False, ""),
        ("ngc-pytorch/bert-base", "fp32", 48, False, ""), ("paddle/bert-base", "fp32", 96, False, ""),
        ("oneflow/bert-base", "fp32", 96, False, "no-clip"), ("mxnet-gluon/bert-base", "fp32", 64, False, "")],
    (_B, "AMP, batch size = 64"): [
        ("oneflow/bert-base", "amp", 64, False, ""), ("ngc-tf1/bert-base", "amp", 64, False, ""),
        ("ngc-tf1/bert-base", "amp", 64, True, ""), ("ngc-pytorch/bert-base", "amp", 64, False, ""),
        ("paddle/bert-base", "amp", 64, False, ""), ("oneflow/bert-base", "amp", 64, False, "no-clip"),
        ("mxnet-gluon/bert-base", "amp", 64, False, "")],
    (_B, "AMP, batch size = max"): [
        ("oneflow/bert-base", "amp", 160, False, ""), ("ngc-tf1/bert-base", "amp", 64, False, ""),
        ("ngc-tf1/bert-base", "amp", 96, True, ""), ("ngc-pytorch/bert-base", "amp", 96, False, ""),
        ("paddle/bert-base", "amp", 160, False, ""), ("oneflow/bert-base", "amp", 160, False, "no-clip"),
        ("mxnet-gluon/bert-base", "amp", 128, False, "")],
}


def test_the_main_figures_are_those_of_dlperfs_v1_report():
    """The report is a second publication of the same numbers: it picks, per framework, the figure we take as
    the main one (dynamic loss scale, gradient clipping, 48 DataLoader workers, ...)."""
    text = (FIX / "dlperf" / "reports_dlperf_benchmark_test_report_v1.md").read_text()
    ref = references.load("dlperf-v100")
    checked = 0
    for headings, columns in V1_REPORT.items():
        header, body = readme_tables.table(text, list(headings))
        assert len(header) == 2 + len(columns), headings
        for r in body:
            nodes, total = int(r[0]), int(r[1])
            for (suite, precision, batch, xla, variant), cell in zip(columns, r[2:]):
                main, also = ref.lookup(suite, f"{nodes}x{total // nodes}", batch, precision, xla)
                e = main if not variant else next(a for a in also if a.variant == variant)
                assert e.value == float(cell), (headings, suite, nodes, total, e.value, cell)
                checked += 1
    assert checked == 4 * sum(len(c) for c in V1_REPORT.values())


def test_a_megatron_bridge_campaign_against_the_set_gets_the_published_mfu(tmp_path):
    """A campaign cell of the published Llama 3 70B layout matches its row; the row's published model TFLOP/s per GPU
    is given as an MFU of the H100's FP8 datasheet peak, and of the FP8 matmul ceiling the campaign measured on an
    H100 (its .ceiling/ file), never of its bf16 one; without an FP8 ceiling it says none was measured."""
    from dlperf_slurm.probes import ceiling

    ref = references.load("megatron-bridge-h100")
    variant = ("global_batch=256, pipeline_parallel=8, recipe=llama3_70b, tensor_parallel=4, virtual_pipeline=5")
    runs = [{"cell_id": "llama3.megatron-bridge.8x8.b1.fp8.xla0.x", "suite": "megatron-bridge/llama3", "nodes": 8,
             "gpus_per_node": 8, "batch_size": 1, "precision": "fp8", "xla": False, "status": Status.OK,
             "throughput": t, "unit": "tokens/s", "variant": variant, "provenance": H100}
            for t in (100_000.0, 104_000.0, 102_000.0)]
    (tmp_path / ".ceiling").mkdir()
    for precision, tflops, dtype in (("bf16", 780.0, "bfloat16"), ("fp8", 1400.0, "float8_e4m3fn")):
        (tmp_path / ".ceiling" / f"NVIDIA-H100-80GB-HBM3.{precision}.json").write_text(json.dumps(
            {"tflops": tflops, "dtype": dtype, "device_name": "NVIDIA H100 80GB HBM3", "precision": precision}))
    rows, unmatched = published.compare(runs, ref, ceilings=ceiling.kept(tmp_path))
    (row,) = rows
    assert not unmatched and row.reference == 1664 * 64 and row.ratio == pytest.approx(102_000 / (1664 * 64))
    assert row.mfu == ("731 model TFLOP/s per GPU; 36.9% of the H100's fp8 datasheet peak 1978.9; 52.2% of the "
                       "ceiling measured here (1400.0 TFLOP/s, float8_e4m3fn on NVIDIA H100 80GB HBM3)"), row.mfu
    (row,) = published.compare(runs, ref, ceilings=[c for c in ceiling.kept(tmp_path) if c["precision"] == "bf16"])[0]
    assert row.mfu.endswith("no fp8 ceiling measured by the campaign on a GPU of that model (H100)"), row.mfu
    text = published.markdown(ref, "c", [row], [], None)
    assert "MFU: 731 model TFLOP/s per GPU; 36.9% of the H100's fp8 datasheet peak" in text
