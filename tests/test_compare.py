"""compare: ratio of medians with a bootstrap interval, a noise-aware verdict, a CI-gating exit status."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm import compare as cmp  # noqa: E402
from dlperf_slurm.model import Status  # noqa: E402


def side(values, statuses=None):
    return cmp.Side(tuple(values), tuple(statuses or [Status.OK] * len(values)))


def noisy(center, n=7, spread=0.01, seed=1):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_the_same_runs_are_no_change():
    base = noisy(1000)
    r = cmp.compare_cell("c", side(base), side(base), 0.05)
    assert r.verdict == "no change" and r.ratio == 1 and r.low <= 1 <= r.high and not r.regressed


def test_a_clear_speedup_and_a_clear_slowdown():
    up = cmp.compare_cell("c", side(noisy(1000, seed=1)), side(noisy(1100, seed=2)), 0.05)
    assert up.verdict == "faster" and 1.05 < up.low and up.high < 1.15 and not up.regressed
    down = cmp.compare_cell("c", side(noisy(1000, seed=1)), side(noisy(900, seed=2)), 0.05)
    assert down.verdict == "slower" and down.regressed and 0.85 < down.low and down.high < 0.95


def test_slower_inside_the_threshold_is_reported_but_not_a_regression():
    r = cmp.compare_cell("c", side(noisy(1000, spread=0.002, seed=1)), side(noisy(980, spread=0.002, seed=2)), 0.05)
    assert r.verdict == "slower" and not r.regressed


def test_a_difference_inside_the_runs_spread_is_no_change():
    # 3 % apart, but each side's repeats spread over +-10 %: the interval includes 1
    r = cmp.compare_cell("c", side(noisy(1000, spread=0.10, seed=3)), side(noisy(970, spread=0.10, seed=4)), 0.05)
    assert r.verdict == "no change" and r.low < 1 < r.high and not r.regressed


def test_the_interval_is_reproducible_and_covers_the_ratio():
    a, b = noisy(1000, seed=5), noisy(1200, seed=6)
    assert cmp.ratio_interval(a, b) == cmp.ratio_interval(a, b)
    low, high = cmp.ratio_interval(a, b)
    assert low <= cmp.statistics.median(b) / cmp.statistics.median(a) <= high


def test_failures_missing_cells_and_too_few_runs():
    ok = side(noisy(1000))
    oom = side([], [Status.OOM] * 5 + [Status.TIMEOUT] * 2)
    assert cmp.compare_cell("c", ok, oom, 0.05).verdict == "now OOM" and cmp.compare_cell("c", ok, oom, 0.05).regressed
    fixed = cmp.compare_cell("c", oom, ok, 0.05)
    assert fixed.verdict == "fixed (was OOM)" and not fixed.regressed
    assert cmp.compare_cell("c", ok, None, 0.05).verdict == "only in base"
    assert cmp.compare_cell("c", None, ok, 0.05).verdict == "only in new"
    few = cmp.compare_cell("c", side([1000]), ok, 0.05)
    assert few.verdict == "too few runs" and few.ratio is not None and few.low is None and not few.regressed


def test_a_cell_without_an_ok_run_reads_what_collect_reads_whatever_the_hash_seed():
    """Its status is outcome.cell_status's (most frequent failure, ties to the most severe; unfinished runs first),
    the same in every process: it was a max over a set, whose order changes with PYTHONHASHSEED."""
    import subprocess
    from collections import Counter

    from dlperf_slurm import outcome

    cases = [("OOM", "TIMEOUT"), ("TIMEOUT", "OOM", "FAILED", "FAILED"), ("OOM", "TIMEOUT", "PENDING")]
    for statuses in cases:
        assert side([], statuses).status == outcome.cell_status(Counter(statuses))
    code = ("from dlperf_slurm.compare import Side; "
            f"print([str(Side((), s).status) for s in {cases!r}])")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).parent.parent, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in range(8)}
    assert seen == {"['OOM', 'FAILED', 'PENDING']\n"}


def _campaign(tmp_path, name, step_s):
    mx = write_matrix(tmp_path, name=name, repeats=3)
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--templates", str(TEMPLATES),
            "--wait", env={"DLPERF_TEST_STEP_S": str(step_s)})
    assert p.returncode == 0, p.stdout + p.stderr


def test_compare_two_campaigns_from_the_cli(tmp_path):
    _campaign(tmp_path, "before", 1.0)
    _campaign(tmp_path, "after", 1.25)  # every step 25 % longer: 20 % fewer samples/s
    logs, out = str(tmp_path / "logs"), str(tmp_path / "summaries")
    p = cli("--logs", logs, "compare", "before", "after", "--out", out)
    assert p.returncode == 1, p.stdout + p.stderr  # a regression gates
    doc = json.loads((tmp_path / "summaries" / "compare.before.after.json").read_text())
    (cell,) = doc["cells"]
    assert cell["verdict"] == "slower" and cell["regressed"] and cell["ratio"] == pytest.approx(0.8)
    assert cell["base_n"] == cell["new_n"] == 3
    assert "**slower, regressed**" in p.stdout
    p = cli("--logs", logs, "compare", "before", "before", "--out", out)
    assert p.returncode == 0 and "no change" in p.stdout
    # a collect summary serves as the base as well as its campaign does
    assert cli("--logs", logs, "collect", "before", "--no-plots", "--out", out).returncode == 0
    p = cli("--logs", logs, "compare", str(tmp_path / "summaries" / "before.json"), "after", "--out", out)
    assert p.returncode == 1 and "slower" in p.stdout
    p = cli("--logs", logs, "compare", "before", "after", "--threshold", "0.3", "--out", out)
    assert p.returncode == 0, p.stdout  # 20 % slower is inside a 30 % threshold


def test_bad_inputs_are_clear_errors(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    p = cli("--logs", str(tmp_path), "compare", str(bad), str(bad))
    assert p.returncode == 2 and "not a collect summary" in p.stderr
    p = cli("--logs", str(tmp_path), "compare", "nope", "nope")
    assert p.returncode == 2 and "no campaign 'nope'" in p.stderr
    p = cli("--logs", str(tmp_path), "compare", str(bad), str(bad), "--threshold", "2")
    assert p.returncode == 2 and "--threshold" in p.stderr
