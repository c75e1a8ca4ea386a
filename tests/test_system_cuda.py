"""The System section gives the CUDA, cuDNN and NCCL the framework was built with and runs with, and the node's
toolkit (nvcc) apart and labelled: a CPU build of torch on a machine with CUDA 13.0's nvcc on PATH said "CUDA
13.0.88" (issue #32, part 4). Driven by real logs: the built-in workload's (smoke, CPU torch), gluon-cv's."""

from __future__ import annotations

from pathlib import Path

from dlperf_slurm.collect import runparse
from dlperf_slurm.model.cell import Cell
from dlperf_slurm.report import system

REAL = Path(__file__).parent / "fixtures" / "real"
SMOKE = REAL / "dlperf_slurm-workload" / "85a9eb7" / "smoke_resnet50_tiny_1n1g_b4_fp32_0.log"
GLUONCV = REAL / "gluon-cv" / "5677756" / "train_imagenet_resnet50_v1b_digits_accuracy_run.log"


def _rows(log: Path, suite: str, framework: str, batch: int) -> dict[str, str]:
    cell = Cell(suite=suite, model="resnet50", framework=framework, nodes=1, gpus_per_node=1, batch_size=batch,
                precision="fp32", xla=False, launcher="", params=())
    row = runparse.parse_run(runparse.RunSpec(key="r0", cell=cell, repeat=0, log=str(log), warmup_steps=2,
                                              measure_steps=5))
    md = system.markdown(system.describe([row]))
    return {line.split("|")[1].strip(): line.split("|")[2].strip() for line in md if line.startswith("| ")
            and line.count("|") == 3}


def test_a_cpu_build_of_torch_says_none_and_the_toolkit_is_labelled():
    rows = _rows(SMOKE, "pytorch-ddp/resnet50", "pytorch-ddp", 4)
    assert rows["CUDA (framework: built with, runs with)"] == "none (CPU build)", rows
    assert rows["cuDNN (framework)"] == rows["NCCL (framework)"] == "none (CPU build)", rows
    assert rows["CUDA toolkit (nvcc)"] == "13.0.88" and "CUDA" not in rows, rows  # (the node's nvcc: the same file)


def test_another_frameworks_log_keeps_the_toolkit_labelled_and_no_framework_rows():
    rows = _rows(GLUONCV, "mxnet-gluon/resnet50", "mxnet-gluon", 32)
    assert rows["CUDA toolkit (nvcc)"] == "13.0.88" and not any("(framework" in k for k in rows), rows


def test_a_gpu_build_reports_what_it_was_built_with_and_loaded():
    own = system.framework_stack({"torch": "2.5.1+cu124", "cuda": "12.4", "cudnn": 90100, "nccl": "2.21.5",
                                  "cuda_used": True})
    assert own == {"framework_cuda": "12.4", "framework_cudnn": "9.1.0", "framework_nccl": "2.21.5"}
    assert system.framework_stack({"torch": "2.5.1", "cuda": None, "cudnn": None, "nccl": None}) == dict.fromkeys(
        system.OWN, "none used (a CPU run)")  # an older workload's CPU run of a build that may have CUDA
    assert system.framework_stack({"torch": "2.5.1", "cuda": None, "cuda_used": False}) == dict.fromkeys(
        system.OWN, "none (CPU build)")


def test_the_html_page_holds_every_row_of_the_markdowns_system_section(tmp_path):
    """One report, two forms (part 5, its System rows): the HTML page showed a flat list ("cuda 13.0.88")."""
    import html
    import shutil

    from dlperf_slurm.cli import main

    tree = tmp_path / "smoke" / "1n1g"
    tree.mkdir(parents=True)
    shutil.copyfile(SMOKE, tree / "resnet50_b4_fp32_0.log")
    out = tmp_path / "s"
    assert main(["collect", "--from", str(tree.parent), "--suite", "pytorch-ddp/resnet50", "--warmup-steps", "2",
                 "--measure-steps", "5", "--out", str(out), "--no-store", "-q"]) == 0
    md = (out / "smoke.md").read_text()
    section = md[md.index("## System"):].split("\n## ")[0].split("\nMethod")[0]
    page = html.unescape((out / "smoke.html").read_text())
    rows = [line[2:-2].split(" | ", 1) for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| | |", "| --- |"))]
    assert len(rows) > 10 and ["CUDA toolkit (nvcc)", "13.0.88"] in rows
    for what, value in rows:
        assert f"<td>{what}</td><td>{value}</td>" in page, (what, value)
