"""The health gate for real on the 2-node Slurm test cluster: the built-in workload on 2 x 1 ranks runs after a
gate whose all-reduce spans n1 and n2 (gloo, a measured bus bandwidth), and a threshold no run can meet makes a run
UNHEALTHY in ``status`` and ``collect``; ``submit --retry-failed`` resubmits it with ``--exclude`` naming the node
its gate blamed (checked with ``scontrol show job``: ExcNodeList)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import cli, cluster_up, tiny_matrix_text, wait_campaign, wait_until  # noqa: E402

from dlperf_slurm import events  # noqa: E402
from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

_why = cluster_up()
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

ENV = '[environment.env]\nGLOO_SOCKET_IFNAME = "lo"\n'


def _health_event(log: Path) -> dict:
    found = [events.parse_line(line) for line in log.read_text().splitlines() if events.PREFIX in line]
    gates = [e for e in found if e and e.get(events.EVENT) == events.EV_HEALTH]
    assert len(gates) == 1, log.read_text()[-3000:]  # ONE line per run
    return gates[0]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Both campaigns submitted at once; each test waits for its own."""
    root = tmp_path_factory.mktemp("health")
    logs = root / "logs"
    out = {"logs": logs}
    for name, devices, health in (("hok", "2x1", ""),
                                  ("hbad", "1x2", "[health]\nmin_busbw_gbs = 1e9  # no run can meet it")):
        mx = root / f"{name}.toml"
        mx.write_text(tiny_matrix_text(name, devices, slurm='time = "00:05:00"\n', extra=f"{ENV}{health}\n"))
        out[name] = (mx, cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site"))
    # a named system expecting more all-reduce bandwidth than gloo over the cluster's loopback can give
    (root / "site.toml").write_text("[systems.fast]\nbusbw_gbs = 1e6\n")
    mx = root / "hsys.toml"
    mx.write_text(tiny_matrix_text("hsys", "2x1", slurm='time = "00:05:00"\n', extra=f"{ENV}\n"))
    out["hsys"] = (mx, cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--site",
                           str(root / "site.toml"), "--system", "fast"))
    return out


def test_the_gate_spans_both_nodes_and_the_run_is_ok(site):
    mx, p = site["hok"]
    assert p.returncode == 0, p.stdout + p.stderr
    st = wait_campaign(site["logs"] / "hok", 400)
    (run,) = manifest.load_manifest(site["logs"] / "hok")
    assert list(st.values()) == [Status.OK], run.log.read_text()[-3000:]
    gate = _health_event(run.log)
    assert gate[events.OK] is True and gate[events.RANKS] == 2 and gate[events.BACKEND] == "gloo"
    assert gate[events.NODES] == ["n1", "n2"] and set(gate[events.GPUS]) == {"n1", "n2"}
    assert set(gate[events.GPUS].values()) == {"no GPU"}
    assert gate[events.BUSBW_GBS] > 0 and gate[events.BUSBW_GBS] == pytest.approx(gate[events.ALGBW_GBS])  # n=2
    log = run.log.read_text()
    assert log.index('"event":"health"') < log.index('"event":"header"')  # before the launch
    assert json.loads(run.marker.read_text())["health"]["ok"] is True
    cli("--logs", str(site["logs"]), "collect", "hok", "--no-plots", cwd=site["logs"].parent, check=True)
    (row,) = csv.DictReader((site["logs"].parent / "summaries" / "hok.runs.csv").open())
    assert row["status"] == Status.OK and row["health"].startswith("ok, busbw")
    assert float(row["health_busbw_gbs"]) == pytest.approx(gate[events.BUSBW_GBS])


def test_a_threshold_no_run_meets_is_unhealthy_and_the_retry_excludes_the_blamed_node(site):
    mx, p = site["hbad"]
    assert p.returncode == 0, p.stdout + p.stderr
    cdir = site["logs"] / "hbad"
    st = wait_campaign(cdir, 400)
    (run,) = manifest.load_manifest(cdir)
    assert list(st.values()) == [Status.UNHEALTHY], run.log.read_text()[-3000:]
    gate = _health_event(run.log)
    assert gate[events.OK] is False and gate[events.RANKS] == 2 and gate[events.BUSBW_GBS] > 0
    blamed = gate[events.BLAMED]
    assert len(blamed) == 1 and blamed[0] in ("n1", "n2") and run.nodes == blamed[0]
    assert '"event":"header"' not in run.log.read_text()  # training never started
    assert "threshold" in run.reason and blamed[0] in run.reason
    p = cli("--logs", str(site["logs"]), "status", "hbad")  # its one run failed: status and collect exit 1
    assert p.returncode == 1 and "status fails: every run failed (1: UNHEALTHY 1)" in p.stderr, p.stderr
    assert Status.UNHEALTHY in p.stdout, p.stdout
    p = cli("--logs", str(site["logs"]), "collect", "hbad", "--no-plots", cwd=site["logs"].parent)
    assert p.returncode == 1 and "collect fails: every run failed (1: UNHEALTHY 1)" in p.stderr, p.stderr
    summary = (site["logs"].parent / "summaries" / "hbad.md").read_text()
    assert f"| {Status.UNHEALTHY} " in summary and "0/1" in summary, summary  # the cell reads it, no number
    (row,) = csv.DictReader((site["logs"].parent / "summaries" / "hbad.runs.csv").open())
    assert row["status"] == Status.UNHEALTHY and row["health"].startswith("failed") and not row["throughput"]

    p = cli("--logs", str(site["logs"]), "submit", str(mx), "--executor", "slurm", "--no-site", "--retry-failed")
    assert p.returncode == 0 and "submitted 1 run" in p.stdout, p.stdout + p.stderr
    (retry,) = manifest.load_manifest(cdir)
    assert retry.job_id and retry.job_id != run.job_id
    assert f"#SBATCH --exclude={blamed[0]}" in retry.script.read_text()
    shown = subprocess.run(["scontrol", "show", "job", retry.job_id], capture_output=True, text=True).stdout
    assert f"ExcNodeList={blamed[0]}" in shown, shown
    wait_campaign(cdir, 400)
    (again,) = manifest.load_manifest(cdir)
    other = ({"n1", "n2"} - set(blamed)).pop()
    wait_until(lambda: again.log.exists(), 30, what="the retry's log")
    assert again.nodes == other and _health_event(again.log)[events.NODES] == [other]


def test_a_system_expecting_more_busbw_than_measured_makes_the_run_unhealthy(site):
    """The system's busbw_gbs is the gate's threshold: the gate over n1 and n2 measures its busbw, below the 1e6
    GB/s system fast expects; the run reads UNHEALTHY, its reason naming the measured and the expected figures."""
    mx, p = site["hsys"]
    assert p.returncode == 0, p.stdout + p.stderr
    cdir = site["logs"] / "hsys"
    st = wait_campaign(cdir, 400)
    (run,) = manifest.load_manifest(cdir)
    assert list(st.values()) == [Status.UNHEALTHY], run.log.read_text()[-3000:]
    gate = _health_event(run.log)
    assert gate[events.NODES] == ["n1", "n2"] and gate[events.MIN_BUSBW_GBS] == 1e6
    measured = gate[events.BUSBW_GBS]
    assert 0 < measured < 1e6 and sorted(gate[events.BLAMED]) == ["n1", "n2"]  # one all-reduce: both nodes
    want = f"all-reduce bus bandwidth {measured:.3g} GB/s measured < 1e+06 GB/s expected of system fast (its busbw_gbs)"
    assert want in run.reason, run.reason
    p = cli("--logs", str(site["logs"]), "collect", "hsys", "--no-plots", "--no-store", cwd=site["logs"].parent)
    assert p.returncode == 1 and "collect fails: every run failed (1: UNHEALTHY 1)" in p.stderr, p.stderr
    (row,) = csv.DictReader((site["logs"].parent / "summaries" / "hsys.runs.csv").open())
    assert row["status"] == Status.UNHEALTHY and want in row["reason"]
    print(f"\n[gate on n1+n2] {run.reason}")
