"""The health gate's all-reduce threshold from the site file's named systems: a system's (or partition's) expected
bus bandwidth (``busbw_gbs``) is the threshold; a ``[health] min_busbw_gbs`` that says otherwise (the site's, the
system's own, the matrix's) is said, as a matrix key a system also sets is; without one the ``[health]`` layers
decide. A run on a system whose expected busbw is above what the real gate measures reads UNHEALTHY, naming both."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import cli, tiny_matrix_text  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402
from dlperf_slurm.matrix import loader  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402
from dlperf_slurm.submit import render  # noqa: E402

SITE = """[health]
min_busbw_gbs = 50
[systems.alpha]
busbw_gbs = 180
slurm = { gpu_request = "none" }
[systems.alpha.partitions.slow]
busbw_gbs = 90
[systems.alpha.partitions.same]
health = { min_busbw_gbs = 180 }
[systems.beta]
health = { min_busbw_gbs = 20 }
[systems.huge]
busbw_gbs = 1e6
"""


@pytest.fixture
def site(tmp_path):
    p = tmp_path / "site.toml"
    p.write_text(SITE)
    return p


def _matrix(tmp_path: Path, health: str = "") -> Path:
    tmp_path.mkdir(exist_ok=True)
    p = tmp_path / "g.toml"
    p.write_text(tiny_matrix_text("g", "1x2", extra=f"[health]\n{health}\n" if health else ""))
    return p


def test_the_systems_expected_busbw_is_the_threshold_and_a_differing_one_is_said(tmp_path, site):
    m = loader.load(_matrix(tmp_path), site=site, system="alpha")
    assert (m.health.min_busbw_gbs, m.health.expected_by) == (180.0, "alpha")
    assert m.overridden == (f"{site}:2: [health] min_busbw_gbs = 50 is not used: the health gate's "
                            "threshold is system alpha's expected busbw_gbs, 180 GB/s",)
    mx = _matrix(tmp_path, "min_busbw_gbs = 100")  # the matrix's own figure does not win over the system's
    m = loader.load(mx, site=site, system="alpha:slow")
    assert (m.health.min_busbw_gbs, m.health.expected_by) == (90.0, "alpha:slow")  # the partition's, over alpha's
    assert m.overridden == (f"{site}:2: [health] min_busbw_gbs = 50 is not used: the health gate's "
                            "threshold is system alpha:slow's expected busbw_gbs, 90 GB/s",
                            f"{mx}:16: [health] min_busbw_gbs = 100 is not used: the health gate's "
                            "threshold is system alpha:slow's expected busbw_gbs, 90 GB/s")
    m = loader.load(_matrix(tmp_path / "same", "min_busbw_gbs = 180"), site=site, system="alpha:same")
    assert m.health.min_busbw_gbs == 180 and len(m.overridden) == 1  # the same figure: only the site's 50 is said
    # no expected busbw: the [health] layers, site < system < matrix (the matrix's wins, said as every key is)
    m = loader.load(mx, site=site, system="beta")
    assert (m.health.min_busbw_gbs, m.health.expected_by) == (100.0, "")
    assert m.overridden == (f"{mx}:16: [health] min_busbw_gbs = 100 wins over system beta's 20",)
    assert loader.load(_matrix(tmp_path), site=site, system="beta").health.min_busbw_gbs == 20
    assert loader.load(_matrix(tmp_path), site=site).health.min_busbw_gbs == 50  # no system: the site's default


def test_plan_and_render_say_it_and_the_script_passes_it_to_the_gate(tmp_path, site, capsys):
    mx = _matrix(tmp_path, "min_busbw_gbs = 100")
    assert main(["plan", str(mx), "--site", str(site), "--system", "alpha"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "busbw 180 GB/s expected" in out and "min_busbw_gbs = 100 is not used" in out
    assert main(["render", str(mx), "--site", str(site), "--system", "alpha", "--out", str(tmp_path / "r")]) == 0
    assert capsys.readouterr().err.count("is not used") == 2
    m = loader.load(mx, site=site, system="alpha")
    text = render.render_run(m, loader.runs(m, tmp_path / "logs")[0])
    assert "-- --ranks 2 --min-busbw-gbs 180.0 --expected-by alpha\n" in text  # the judge's arguments
    m = loader.load(mx, site=site, system="beta")
    assert "-- --ranks 2 --min-busbw-gbs 100.0\n" in render.render_run(m, loader.runs(m, tmp_path / "logs")[0])


def test_a_run_on_a_system_expecting_more_than_the_gate_measures_is_unhealthy(tmp_path, site):
    """The real gate (two gloo ranks on this machine, the job script's probe and judge) measures its busbw; the
    system expects 1e6 GB/s: the run reads UNHEALTHY, its reason naming the measured and the expected figures."""
    logs, out = tmp_path / "logs", tmp_path / "s"
    p = cli("--logs", str(logs), "submit", str(_matrix(tmp_path)), "--site", str(site), "--system", "huge",
            "--executor", "local", "--wait", timeout=240, env={"OMP_NUM_THREADS": "1"})
    assert p.returncode == 1, p.stdout + p.stderr
    p = cli("--logs", str(logs), "collect", "g", "--no-plots", "-q", "--no-store", "--out", str(out))
    (run,) = json.loads((out / "g.json").read_text())["runs"]
    assert run["status"] == Status.UNHEALTHY, run["reason"]
    measured = run["health_busbw_gbs"]
    assert 0 < measured < 1e6
    assert (f"all-reduce bus bandwidth {measured:.3g} GB/s measured < 1e+06 GB/s expected of system huge "
            "(its busbw_gbs)") in run["reason"], run["reason"]
    assert '"event":"header"' not in Path(run["log"]).read_text()  # never trained
    print(f"\n[gate] measured busbw {measured:.3g} GB/s (gloo, 2 ranks) < 1e6 expected: {run['reason']}")
