"""Terminal output fits 100 columns by default (the files keep every column); --wide prints the rest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import synthcampaigns as sc  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402
from dlperf_slurm.termtext import TERMINAL_WIDTH, fit_table  # noqa: E402

MATRICES = sorted((Path(__file__).parent.parent / "matrices").glob("*.toml"))


def widest(text: str, path: Path | None = None) -> int:
    """The longest line; with ``path``, of the lines that do not name a file under it (a path is never cut)."""
    return max(len(line) for line in text.splitlines() if path is None or str(path) not in line)


def test_fit_table_drops_in_order_then_cuts_free_text():
    headers = ["id", "extra", "reason"]
    rows = [["a" * 30, "x" * 30, "because " * 12]]
    text, dropped = fit_table(headers, rows, drop=("extra",), cut=("reason",))
    assert dropped == ["extra"] and widest(text) <= TERMINAL_WIDTH and "a" * 30 in text and "…" in text
    assert fit_table(headers, rows, wide=True) == (fit_table(headers, rows, wide=True)[0], [])
    assert widest(fit_table(headers, rows, wide=True)[0]) > TERMINAL_WIDTH and "x" * 30 in fit_table(
        headers, rows, wide=True)[0]
    short = [["a", "b", "c"]]
    assert fit_table(headers, short, drop=("extra",)) == (fit_table(headers, short, wide=True)[0], [])


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda p: p.stem)
def test_plan_of_every_example_matrix_fits(matrix, capsys):
    assert main(["plan", str(matrix), "--no-site"]) == 0
    out = capsys.readouterr().out
    assert widest(out) <= TERMINAL_WIDTH, [line for line in out.splitlines() if len(line) > TERMINAL_WIDTH][:3]
    assert main(["plan", str(matrix), "--no-site", "--wide"]) == 0
    assert "| global" in capsys.readouterr().out.replace("  ", " ")


def test_collect_and_compare_fit(tmp_path, capsys):
    out = str(tmp_path / "s")
    monday = sc.tree(tmp_path / "t", "monday", 1.0, gpus=(1, 2, 4, 8))
    tuesday = sc.tree(tmp_path / "t", "tuesday", 0.9, gpus=(1, 2, 4), oom=(4,))
    for tree in (monday, tuesday):
        assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "--no-store", "--out", out]) == 0
    text = capsys.readouterr().out
    assert widest(text, tmp_path) <= TERMINAL_WIDTH and "left out to fit 100 columns: GPU mem MiB, latency" in text
    assert main(["collect", "--from", str(monday), "--suite", sc.SUITE, "--no-store", "--out", out, "--wide"]) == 0
    text = capsys.readouterr().out
    assert "GPU mem MiB (peak / GPU0)" in text and "left out" not in text and widest(text) > TERMINAL_WIDTH
    assert main(["compare", f"{out}/monday.json", f"{out}/tuesday.json", "--out", out]) == 1
    text = capsys.readouterr().out
    assert widest(text, tmp_path) <= TERMINAL_WIDTH and "slower, REGRESSED" in text and "now OOM, REGRESSED" in text
    md = (tmp_path / "s" / "compare.monday.tuesday.md").read_text()  # the file keeps the whole table
    assert ("| cell | base median | new median | new/base | interval | noise | would catch | runs (base/new) "
            "| verdict |") in md
