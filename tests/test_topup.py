"""``submit --top-up``: more repeats where a cell's median is not yet tight enough, through the normal submit path
(local executor, the test payloads of tests/slurm/templates: DLPERF_TEST_SPREAD makes odd repeats slower)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.collect import topup  # noqa: E402
from dlperf_slurm.model.rows import CellRow  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402


def test_top_up_adds_repeats_only_to_the_cell_whose_interval_is_too_wide(tmp_path):
    mx = tmp_path / "tu.toml"
    mx.write_text(write_matrix(tmp_path, name="tu", repeats=6).read_text().replace(
        '[measure]', '"env.DLPERF_TEST_SPREAD" = ["0", "0.3"]\n[measure]'))
    logs = tmp_path / "logs"
    args = ["--logs", str(logs), "submit", str(mx), "--executor", "local", "-j", "2", "--templates", str(TEMPLATES)]
    p = cli(*args, "--wait")
    assert p.returncode == 0, p.stdout + p.stderr
    cdir = logs / "tu"
    per_cell = Counter(r.cell_id for r in manifest.load_manifest(cdir))
    assert sorted(per_cell.values()) == [6, 6]
    wide = next(c for c in per_cell if "SPREAD-0.3" in c)

    p = cli(*args, "--top-up", "--wait")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"top-up: {wide}: 6 -> 9 repeats (95% interval" in p.stdout, p.stdout
    assert "campaign tu: 15 runs (2 cells, 6 to 9 repeats each)" in p.stdout, p.stdout  # not "2 cells x 6"
    runs = manifest.load_manifest(cdir)
    per_cell = Counter(r.cell_id for r in runs)
    assert per_cell[wide] == 9 and sorted(per_cell.values()) == [6, 9]
    assert all(r.status == Status.OK for r in runs)
    # a plain submit afterwards keeps the added repeats (nothing missing, nothing submitted)
    p = cli(*args)
    assert p.returncode == 0 and "nothing to submit" in p.stdout, p.stdout
    # the cap: no cell beyond --max-repeats, and then nothing to add
    p = cli(*args, "--top-up", "--max-repeats", "9")
    assert p.returncode == 0 and "nothing to add" in p.stdout, p.stdout
    for bad in ("1", "1001"):  # a matrix's own bound on repeats holds for a top-up too
        p = cli(*args, "--top-up", "--max-repeats", bad)
        assert p.returncode == 2 and "--max-repeats between 2 and 1,000" in p.stderr, p.stderr
    # collect sees every repeat: the wide cell's n is 9
    out = tmp_path / "summaries"
    p = cli("--logs", str(logs), "collect", "tu", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "9/9" in (out / "tu.md").read_text()


def _cell(n_ok, median, low, high, cov, cv=0.01) -> CellRow:
    fields = {f: None for f in CellRow.__dataclass_fields__}
    fields.update(cell_id="c", n=n_ok, n_ok=n_ok, median=median, ci_low=low, ci_high=high, ci_coverage=cov, cv=cv)
    return CellRow(**fields)


def test_plan_rules():
    top = topup.TopUp(target=0.05, cap=12)
    assert topup.plan([_cell(7, 100.0, 99.0, 101.0, 0.984)], {}, top) == {}  # 2 % wide: tight enough
    assert topup.plan([_cell(7, 100.0, 90.0, 110.0, 0.984)], {}, top)["c"][0] == 11  # 7 + ceil(7/2)
    assert topup.plan([_cell(4, 100.0, 99.0, 101.0, 0.875)], {}, top)["c"][0] == 6  # no 95 % interval from 4 runs
    assert topup.plan([_cell(7, 100.0, 99.0, 101.0, 0.984, cv=0.08)], {}, top)["c"][1].startswith("CV 8.0%")
    assert topup.plan([_cell(10, 100.0, 90.0, 110.0, 0.98)], {"c": 11}, top)["c"][0] == 12  # capped
    assert topup.plan([_cell(12, 100.0, 90.0, 110.0, 0.96)], {"c": 12}, top) == {}  # at the cap
    assert topup.plan([_cell(0, None, None, None, None)], {}, top) == {}  # no OK run: --retry-failed's job
