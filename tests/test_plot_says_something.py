"""The plots say what was measured (issue #32, part 5): the throughput axis is labelled at the data's ends (two
real runs of the built-in workload at 157 samples/s sat under the lowest label, 200), and a campaign
whose cells ran on one GPU count gets no plot (one point a line, an efficiency of 100 % by definition) but a
sentence saying why, in the HTML report."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from dlperf_slurm.cli import main

WORKLOAD = Path(__file__).parent / "fixtures" / "real" / "dlperf_slurm-workload"
ONE_GPU = WORKLOAD / "85a9eb7" / "smoke_resnet50_tiny_1n1g_b4_fp32_0.log"
TWO_GPUS = WORKLOAD / "88bbfb2" / "resnet50_tiny_1n2g_b4_fp32_torchrun.log"


def _collect(tmp_path: Path, logs: dict[str, Path]) -> Path:
    for shape, log in logs.items():
        (tmp_path / "t" / shape).mkdir(parents=True)
        shutil.copyfile(log, tmp_path / "t" / shape / "resnet50_b4_fp32_0.log")
    out = tmp_path / "s"
    assert main(["collect", "--from", str(tmp_path / "t"), "--suite", "pytorch-ddp/resnet50", "--warmup-steps", "2",
                 "--measure-steps", "5", "--out", str(out), "--no-store", "-q"]) == 0
    return out


def test_the_throughput_axis_is_labelled_at_the_datas_ends(tmp_path):
    out = _collect(tmp_path, {"1n1g": ONE_GPU, "1n2g": TWO_GPUS})
    (svg,) = out.glob("*.svg")
    left = [t for x, t in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="end" font-size="12">([^<]*)<',
                                     svg.read_text()) if float(x) < 100]  # the left panel's y labels
    medians = sorted(c["median"] for c in json.loads((out / "t.json").read_text())["cells"])
    assert f"{medians[0]:.3g}" in left, (left, medians)  # 157: both medians round to it, one label


def test_a_one_shape_campaign_gets_no_plot_and_a_sentence_why(tmp_path):
    out = _collect(tmp_path, {"1n1g": ONE_GPU})
    assert not list(out.glob("*.svg"))
    page = (out / "t.html").read_text()
    assert "<svg" not in page and "pytorch-ddp/resnet50: no plot: every cell with a figure ran on 1 GPU (1n1g)" in page


def test_every_decade_keeps_its_label_beside_a_data_end(tmp_path):
    """Issue #32 part 5: labelled at every decade and at the data's ends. A lowest median just above 1,000 sat
    within a label's height of the 1k decade, and the decade's label gave way to the end's (1.01k): the axis then
    had no decade labelled. The decade stays; the end's label gives way to it."""
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    import synthcampaigns as sc

    tree = sc.tree(tmp_path / "t", "near", 10.1, gpus=(1, 2, 4))
    out = tmp_path / "s"
    assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "--out", str(out), "--no-store", "-q"]) == 0
    (svg,) = out.glob("*.svg")
    left = [t for x, t in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="end" font-size="12">([^<]*)<',
                                     svg.read_text()) if float(x) < 100]
    medians = sorted(c["median"] for c in json.loads((out / "near.json").read_text())["cells"])
    assert 1000 < medians[0] < 1030 and medians[-1] > 4000, medians
    assert "1k" in left and f"{medians[0] / 1000:.3g}k" not in left, (left, medians)  # the decade, not 1.01k
    assert f"{medians[-1] / 1000:.3g}k" in left, left  # the highest median: its own label
