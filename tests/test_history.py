"""history: each cell's median over the stored campaigns, judged by compare's rule, with what changed between
them; compare --base last-good."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import synthcampaigns as sc  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402
from dlperf_slurm.compare import rule as cmp  # noqa: E402
from dlperf_slurm.store import (
    database,  # noqa: E402
    history,  # noqa: E402
)

A100 = "0, NVIDIA A100-SXM4-80GB, {driver}, 81920 MiB, 1410 MHz"


def _job(driver: str, tf: str = "2.15.0", image: str | None = None) -> dict:
    job = {"versions": {"python": "3.10.12", "tensorflow": tf}, "gpus": [A100.format(driver=driver)] * 2}
    if image:
        job["container_image"] = image
    return job


@pytest.fixture
def three(tmp_path, monkeypatch, capsys):
    """monday; tuesday, after a driver upgrade, 20 % slower; wednesday, a new container, as fast as tuesday. Each
    collected with the CLI into the store of ``tmp_path``."""
    url = str(tmp_path / "results.sqlite")
    monkeypatch.setenv("DLPERF_SLURM_STORE", url)
    for name, scale, job, seed in (("monday", 1.0, _job("535.104.05"), 0),
                                   ("tuesday", 0.8, _job("550.54.15"), 10),
                                   ("wednesday", 0.8, _job("550.54.15", image="nvcr.io/nvidia/tensorflow:24.01"), 20)):
        tree = sc.tree(tmp_path / "trees", name, scale, job=job, seed=seed)
        assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-plots", "-q", "--system", "alpha:gpu",
                     "--out", str(tmp_path / "summaries")]) == 0
    capsys.readouterr()
    return tmp_path


def test_history_of_three_campaigns(three, capsys):
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    print(out)  # the record (pytest -s)
    assert all(len(line) <= 100 for line in out.splitlines()), "history fits 100 columns"
    blocks = out.split("\n\n")
    assert len(blocks) == 3 and blocks[-1].startswith("2 cells; 2 changes beyond noise (*), 2 regressions")
    for block in blocks[:2]:
        head, _, _, monday, tuesday, wednesday, left_out, *notes = block.splitlines()
        assert head.endswith("on alpha:gpu (img/s)")
        assert monday.startswith("monday") and "*" not in monday
        assert "slower, REGRESSED *" in tuesday and tuesday.split()[-1].startswith("≥")
        assert float(tuesday.split("x0.")[1][:3]) / 1000 == pytest.approx(0.8, abs=0.005)
        assert "no change" in wednesday and "*" not in wednesday
        assert 0 < float(wednesday.split("≥")[1].rstrip("%")) < 2  # the slowdown it would have caught
        # the changed column does not fit 100 columns with the catches: its names are in the lines below
        assert left_out == "(left out to fit 100 columns: changed; in the lines below, or --wide)"
        assert notes == ["  tuesday: driver 535.104.05 -> 550.54.15",
                         "  wednesday: container (none) -> nvcr.io/nvidia/tensorflow:24.01",
                         "  campaign to campaign: not known yet (fewer than 3 campaigns with the same versions)"]
    # the figures are collect's: each campaign's summary holds the same medians and intervals
    for name in ("monday", "tuesday", "wednesday"):
        doc = json.loads((three / "summaries" / f"{name}.json").read_text())
        for cell in doc["cells"]:
            line = next(b for b in blocks if b.startswith(cell["cell_id"])).splitlines()
            row = next(r for r in line if r.startswith(name))
            assert f"{cell['median']:,.2f}" in row and f"{cell['ci_low']:,.2f}-{cell['ci_high']:,.2f}" in row


def test_history_filters_and_bad_input(three, capsys):
    assert main(["history", "*1x2*", "--system", "alpha:gpu"]) == 0
    out = capsys.readouterr().out
    assert "1x2.b8" in out and "1x1.b8" not in out and "\n1 cell; 1 change beyond noise" in out
    assert main(["history", "--system", "beta"]) == 1
    assert "no stored cell on beta" in capsys.readouterr().err
    assert main(["history", "--since", "2999-01-01"]) == 1
    assert main(["history", "--since", "yesterday"]) == 2
    assert "--since yesterday: expected a date as YYYY-MM-DD" in capsys.readouterr().err
    assert main(["history", "--wide"]) == 0


def test_compare_base_last_good(three, capsys):
    """tuesday regressed against monday, wednesday is new: the last good campaign is monday, and wednesday is
    judged against it (20 % slower: exit 1)."""
    summaries = three / "summaries"
    assert main(["compare", "last-good", str(summaries / "wednesday.json"), "--out", str(three / "cmp")]) == 1
    out = capsys.readouterr().out
    assert "--base last-good: monday" in out and "# wednesday against monday" in out
    doc = json.loads((three / "cmp" / "compare.monday.wednesday.json").read_text())
    assert [c["verdict"] for c in doc["cells"]] == ["slower", "slower"]
    # tuesday's own last good is monday too; with only the regressed campaign before it there is none
    with database.Store(str(three / "results.sqlite")) as st:
        cells = st.cells()
    key = {c.campaign: c.key for c in cells}
    assert history.last_good(cells, key["wednesday"], {c.cell_id for c in cells}) == key["monday"]
    assert history.last_good([c for c in cells if c.campaign != "monday"], key["wednesday"],
                             {c.cell_id for c in cells}) == key["tuesday"]  # the first has nothing to regress from
    assert main(["compare", "last-good", str(summaries / "monday.json"), "--system", "beta",
                 "--out", str(three / "cmp")]) == 2
    assert "no campaign of matrix tree:tf-cnn/resnet50 on beta that ran before monday shares a cell" in \
        capsys.readouterr().err


def test_compare_dash_dash_base_is_the_same_as_base_first(three, capsys):
    """The issue's spelling, ``compare --base last-good NEW``, judges NEW against the same campaign as
    ``compare last-good NEW``; both sides twice, or NEW missing, is one line and exit 2."""
    summaries = three / "summaries"
    wed = str(summaries / "wednesday.json")
    assert main(["compare", "--base", "last-good", wed, "--out", str(three / "cmp2")]) == 1
    assert "--base last-good: monday" in capsys.readouterr().out
    assert (three / "cmp2" / "compare.monday.wednesday.json").is_file()
    assert main(["compare", "--base", "last-good", wed, wed, "--out", str(three / "cmp2")]) == 2
    assert "with --base give NEW alone" in capsys.readouterr().err
    assert main(["compare", wed, "--out", str(three / "cmp2")]) == 2
    assert "NEW is missing" in capsys.readouterr().err


def test_campaigns_are_ordered_by_when_they_ran_not_when_first_collected(three, capsys):
    """monday's tree, collected again after wednesday (and a monday never collected before, first now): history
    still reads monday, tuesday, wednesday, each dated by its runs (its logs' time), not by its collect."""
    import os

    old = sc.tree(three / "trees", "sunday", 1.0, seed=30)  # ran two days before monday, collected last
    t = (three / "trees" / "monday" / "1n1g" / "r50_b8_fp32_0.log").stat().st_mtime - 2 * 86400
    for log in old.rglob("*.log"):
        os.utime(log, (t, t))
    for tree in (three / "trees" / "monday", old):
        assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-plots", "-q", "--no-cache",
                     "--system", "alpha:gpu", "--out", str(three / "summaries")]) == 0
    said = capsys.readouterr().out
    assert said.index("0 cells added, 2 updated") < said.index("2 cells added, 0 updated")  # monday again, sunday
    assert main(["history", "*1x1*"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines() if line.split()[:1] and line.split()[0] in
             ("sunday", "monday", "tuesday", "wednesday")]
    assert names == ["sunday", "monday", "tuesday", "wednesday"], out
    sunday = next(line for line in out.splitlines() if line.startswith("sunday"))
    assert sunday.split()[1] == time.strftime("%Y-%m-%d", time.gmtime(t))  # the ran column: its logs' day


def test_campaign_to_campaign_variation_widens_the_verdict_and_is_shown(tmp_path, monkeypatch, capsys):
    """Issue #32.3: repeats inside a campaign share nodes and hours, two campaigns do not. Four campaigns of the
    same versions whose medians move 2-3 % from one to the next while each campaign's runs spread 0.3 %: a fifth,
    2 % below the fourth, is "slower" by the runs' own spread, but not beyond the cell's measured campaign-to-
    campaign variation (its SD over the four: the verdict says c2c, and cannot tell). A driver change after them
    is judged against its own versions' campaigns: none, so by the runs' spread again."""
    monkeypatch.setenv("DLPERF_SLURM_STORE", str(tmp_path / "results.sqlite"))
    for i, scale in enumerate((1.0, 1.03, 0.97, 1.02, 1.0, 0.8)):
        job = _job("550.54.15" if i < 5 else "560.35.03")
        tree = sc.tree(tmp_path / "trees", f"c{i}", scale, job=job, seed=10 * i, gpus=(1,))
        assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-plots", "-q", "--system", "alpha:gpu",
                     "--out", str(tmp_path / "summaries")]) == 0
        time.sleep(0.01)
    capsys.readouterr()
    with database.Store(str(tmp_path / "results.sqlite")) as st:
        cells = st.cells()
    (steps,) = [history.judge(s) for s in history.series(cells).values()]
    assert [s.cell.campaign for s in steps] == [f"c{i}" for i in range(6)]
    by_runs = [s.against for s in steps[1:3]]
    assert all(a.noise == "runs" and a.between is None for a in by_runs)  # fewer than 3 earlier campaigns alike
    assert steps[3].against.between_k == 3
    fifth = steps[4].against
    assert fifth.noise == "campaigns" and fifth.between_k == 4 and 0.015 < fifth.between < 0.04
    within = cmp.compare_cell("c", history.side(steps[3].cell), history.side(steps[4].cell), 0.05)
    assert within.verdict == "slower" and within.noise == "runs"  # what the runs' spread alone said
    assert fifth.verdict == "cannot tell" and not fifth.regressed and "campaigns" in fifth.reason
    sixth = steps[5].against  # a new driver: its base (c4) has 5 campaigns of its versions before it
    assert sixth.verdict == "slower" and sixth.regressed and sixth.between_k == 5
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "c2c" in out and all(len(line) <= 100 for line in out.splitlines())
    sd, k, _ = history.variation([s.cell for s in steps])
    assert k == 5 and f"campaign to campaign, nothing changed: {100 * cmp.math.expm1(sd):.1f} % (SD over 5 " in out
    # compare reads the same variation from the store, for two summaries and for --base last-good
    summaries, cmp_out = tmp_path / "summaries", str(tmp_path / "cmp")
    assert main(["compare", str(summaries / "c3.json"), str(summaries / "c4.json"), "--out", cmp_out]) == 0
    out = capsys.readouterr().out
    (cell,) = json.loads((tmp_path / "cmp" / "compare.c3.c4.json").read_text())["cells"]
    assert cell["verdict"] == "cannot tell" and cell["noise"] == "campaigns" and cell["between_k"] == 4
    assert "campaigns" in out and "(k=4)" in out
    assert main(["compare", "last-good", str(summaries / "c4.json"), "--out", cmp_out]) == 0
    assert "--base last-good: c3" in capsys.readouterr().out
    (cell,) = json.loads((tmp_path / "cmp" / "compare.c3.c4.json").read_text())["cells"]
    assert cell["noise"] == "campaigns" and cell["between_k"] == 4
    # a store that does not exist is not made by compare (nor read): the runs' own spread
    monkeypatch.setenv("DLPERF_SLURM_STORE", str(tmp_path / "none.sqlite"))
    assert main(["compare", str(summaries / "c3.json"), str(summaries / "c4.json"), "--out", cmp_out]) == 0
    (cell,) = json.loads((tmp_path / "cmp" / "compare.c3.c4.json").read_text())["cells"]
    assert cell["noise"] == "runs" and cell["verdict"] == "slower" and not (tmp_path / "none.sqlite").exists()


def test_the_head_line_says_only_what_is_known(tmp_path, monkeypatch, capsys):
    """A cell collected without --system: its table's head line is its id and unit, not "on - (img/s)"; a unit
    the store does not hold leaves out "()"; a partition without a system is named as one."""
    monkeypatch.setenv("DLPERF_SLURM_STORE", str(tmp_path / "results.sqlite"))
    for name, scale, seed in (("monday", 1.0, 0), ("tuesday", 0.8, 10)):
        tree = sc.tree(tmp_path / "trees", name, scale, job=_job("535.104.05"), seed=seed, gpus=(1,))
        assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-plots", "-q",
                     "--out", str(tmp_path / "summaries")]) == 0
    capsys.readouterr()
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    heads = [block.splitlines()[0] for block in out.split("\n\n")[:-1]]
    assert heads and all(h.endswith(" (img/s)") and " on " not in h and h.split()[0] == h.split(" (")[0]
                         for h in heads), out
    assert " on -" not in out and "()" not in out
    with database.Store(str(tmp_path / "results.sqlite")) as st:
        cell = st.cells()[0]
    assert cell.system == "" and cell.unit == "img/s"
    replace = dataclasses.replace
    assert history.head_line("x", cell) == "x (img/s)"
    assert history.head_line("x", replace(cell, unit="")) == "x"
    assert history.head_line("x", replace(cell, system="alpha")) == "x on alpha (img/s)"
    assert history.head_line("x", replace(cell, system="alpha", partition="gpu", unit="")) == "x on alpha:gpu"
    assert history.head_line("x", replace(cell, partition="gpu")) == "x on partition gpu (img/s)"
    steps = {("-", "x"): history.judge([replace(cell, unit="")])}
    assert history.text(steps).splitlines()[0] == "x"
