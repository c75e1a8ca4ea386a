"""The health gate without a cluster: nccl-tests' bus bandwidth, the threshold decision and the blame, the judge's
one event line and marker verdict, the GPU checks through a fake nvidia-smi, the real gloo probe on this machine,
``[health]`` in the site file and the matrix, the gate in the job script, a failed gate under the local executor
(UNHEALTHY, never trained), and the retry's ``--exclude``. On the 2-node cluster: tests/test_health_slurm.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dlperf_slurm import events as ev
from dlperf_slurm.campaign import manifest
from dlperf_slurm.errors import MatrixError
from dlperf_slurm.matrix import loader
from dlperf_slurm.model.config import Health
from dlperf_slurm.model.status import Status
from dlperf_slurm.probes import health, healthprobe
from dlperf_slurm.schedulers.local import LocalScheduler
from dlperf_slurm.schedulers.slurm import options
from dlperf_slurm.submit import journal, render

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, cli, tiny_matrix_text  # noqa: E402

# ------------------------------------------------------------------------------------------------ the math


@pytest.mark.parametrize("ranks", [2, 3, 8, 16, 64])
def test_busbw_is_nccl_tests_algbw_times_2_n_minus_1_over_n(ranks):
    nbytes, seconds = 3 * 2**30, 0.0125
    algbw = nbytes / seconds / 1e9
    assert health.algbw_gbs(nbytes, seconds) == pytest.approx(algbw)
    assert health.busbw_gbs(nbytes, seconds, ranks) == pytest.approx(algbw * 2 * (ranks - 1) / ranks)
    assert health.busbw_factor(2) == 1.0 and health.busbw_factor(ranks) < 2.0


def _rec(host, ranks, seconds, nbytes=2**25, gpu_problems=(), error=None):
    rs = [{"rank": r, "backend": "gloo", "bytes": nbytes, "iters": 5, "seconds": seconds} for r in ranks]
    if error is not None:
        rs[0] = {"rank": ranks[0], "error": error}
    return {"host": host, "gpu_problems": list(gpu_problems), "gpu_text": "no GPU", "ranks": rs, "backend": "gloo"}


def test_the_judge_averages_the_ranks_times_and_applies_the_threshold():
    recs = {"n1": _rec("n1", [0, 1], 0.01), "n2": _rec("n2", [2, 3], 0.03)}
    mean = (2 * 0.01 + 2 * 0.03) / 4
    expected = health.busbw_gbs(2**25, mean, 4)
    v = health.judge(recs, ["n1", "n2"], 4)
    assert v[ev.OK] and v[ev.BUSBW_GBS] == pytest.approx(expected) and v[ev.SECONDS_PER_ITER] == pytest.approx(mean)
    assert v[ev.BLAMED] == [] and ev.MIN_BUSBW_GBS not in v
    assert health.judge(recs, ["n1", "n2"], 4, min_busbw_gbs=expected * 0.99)[ev.OK]
    low = health.judge(recs, ["n1", "n2"], 4, min_busbw_gbs=expected * 1.01)
    assert not low[ev.OK] and low[ev.BLAMED] == ["n1", "n2"] and "threshold" in low[ev.PROBLEMS][0]
    one = health.judge({"n1": _rec("n1", [0, 1], 0.01)}, ["n1"], 2, min_busbw_gbs=1e9)
    assert one[ev.BLAMED] == ["n1"] and "cannot single" not in one[ev.PROBLEMS][0]


def test_the_judge_blames_the_node_that_failed():
    ok = _rec("n1", [0], 0.01)
    gpu = health.judge({"n1": ok, "n2": _rec("n2", [1], 0.01, gpu_problems=["GPU 3: 2 uncorrected ECC errors"])},
                       ["n1", "n2"], 2)
    assert not gpu[ev.OK] and gpu[ev.BLAMED] == ["n2"] and gpu[ev.PROBLEMS] == ["n2: GPU 3: 2 uncorrected ECC errors"]
    gone = health.judge({"n1": ok}, ["n1", "n2"], 2)
    assert not gone[ev.OK] and gone[ev.BLAMED] == ["n2"] and ev.BUSBW_GBS not in gone
    err = health.judge({"n1": ok, "n2": _rec("n2", [1], 0.01, error="RuntimeError: connection refused")},
                       ["n1", "n2"], 2)
    assert err[ev.BLAMED] == ["n2"] and "connection refused" in err[ev.PROBLEMS][0]


# srun's words in a job whose gate ran while slurmctld was SIGKILLed (tests/slurm/faults.py kill-controller on the
# 2-node test cluster, Slurm 22.05), copied from that job's output
SRUN_NO_CONTROLLER = ["srun: error: Unable to confirm allocation for job 51: Unable to contact slurm controller "
                      "(connect failure)", "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 51"]
PING_DOWN = "Slurmctld(primary) at n1 is DOWN\n*****************************************\n"


def test_a_controller_outage_during_the_gate_blames_no_node():
    """slurmctld gone while the gate's srun starts (issue #22): no node reports, and srun says why. That is the
    scheduler's outage, no node's fault: nobody blamed (a retry runs on the same nodes), the marker says so."""
    why = health.scheduler_unreachable(SRUN_NO_CONTROLLER)
    assert "could not be reached" in why and "Unable to contact slurm controller" in why
    v = health.judge({}, ["n1", "n2"], 2, unreachable=why)
    assert not v[ev.OK] and v[ev.BLAMED] == [] and v[ev.UNREACHABLE] == why
    assert health.marker_verdict(v)[ev.UNREACHABLE] == why
    # srun silent (killed by the gate's timeout): scontrol ping decides; a controller that answers blames as before
    assert "scontrol ping: Slurmctld(primary) at n1 is DOWN" in health.scheduler_unreachable([], lambda: PING_DOWN)
    assert health.scheduler_unreachable([], lambda: "Slurmctld(primary) at n1 is UP") == ""
    assert health.judge({}, ["n1", "n2"], 2, unreachable="")[ev.BLAMED] == ["n1", "n2"]
    # a node that did report a GPU fault is still blamed
    bad = _rec("n2", [1], 0.01, gpu_problems=["GPU 0: 2 uncorrected ECC errors since boot"])
    assert health.judge({"n2": bad}, ["n1", "n2"], 2, unreachable=why)[ev.BLAMED] == ["n2"]


def test_a_rendezvous_that_cannot_be_reached_blames_no_node():
    recs = {h: _rec(h, [i], 0.01, error="DistNetworkError: The client socket has timed out after 20s while trying "
                                       "to connect to (n1, 12345).") for i, h in enumerate(["n1", "n2"])}
    for r in recs.values():
        r["ranks"][0]["rendezvous"] = "tcp://n1:12345"
    v = health.judge(recs, ["n1", "n2"], 2)
    assert not v[ev.OK] and v[ev.BLAMED] == [] and "rendezvous at tcp://n1:12345" in v[ev.UNREACHABLE]


def test_the_run_of_an_unreachable_gate_reads_so_and_its_retry_excludes_nothing(tmp_path):
    from dlperf_slurm.outcome import decision

    v = health.judge({}, ["n1", "n2"], 2, unreachable=health.scheduler_unreachable(SRUN_NO_CONTROLLER))
    marker = {"rc": 3, "signal": "", "end": 1.0, "health": health.marker_verdict(v)}
    o = decision.decide(decision.Evidence(marker=marker, asked=True, has_log=True))
    assert o.status == Status.UNHEALTHY and "no node's fault" in o.reason and "blamed:" not in o.reason


def test_one_rank_has_no_bus_and_no_threshold_applies():
    v = health.judge({"n1": {"host": "n1", "gpu_problems": [], "gpu_text": "no GPU", "ranks": []}}, ["n1"], 1,
                     min_busbw_gbs=460)
    assert v[ev.OK] and ev.BUSBW_GBS not in v and "1 rank" in v[ev.NOTES]


def test_no_torch_for_the_gate_is_said_and_blames_no_node():
    rec = {"host": "n1", "gpu_problems": [], "gpu_text": "no GPU", "ranks": [],
           "unavailable": "no all-reduce: /venv/bin/python cannot import torch (ModuleNotFoundError)"}
    v = health.judge({"n1": rec, "n2": {**rec, "host": "n2"}}, ["n1", "n2"], 2)
    assert v[ev.OK] and "cannot import torch" in v[ev.NOTES] and ev.BUSBW_GBS not in v
    strict = health.judge({"n1": rec, "n2": {**rec, "host": "n2"}}, ["n1", "n2"], 2, min_busbw_gbs=10)
    assert not strict[ev.OK] and strict[ev.BLAMED] == [] and "not measured" in strict[ev.PROBLEMS][0]


def test_only_plain_node_names_reach_exclude():
    assert health.safe_nodes(["n2", "n1", "n1", "n1;reboot", "$(x)", 3, "gpu-07.cluster"]) == \
        ["gpu-07.cluster", "n1", "n2"]


def test_the_runs_table_text():
    assert health.summary(None) == ""
    v = health.judge({"n1": _rec("n1", [0, 1], 0.01)}, ["n1"], 2, min_busbw_gbs=1e9)
    text = health.summary(v)
    assert text.startswith("failed, busbw") and "(min 1e+09)" in text and "threshold" in text
    assert health.summary(health.judge({"n1": _rec("n1", [0, 1], 0.01)}, ["n1"], 2)).startswith("ok, busbw")


def test_the_judge_prints_one_event_and_writes_the_marker_verdict(tmp_path, capsys):
    out = tmp_path / "probe.out"
    out.write_text("srun: a warning\n" + "".join(healthprobe.NODE_PREFIX + json.dumps(r) + "\n"
                                                for r in (_rec("n1", [0], 0.02), _rec("n2", [1], 0.02))))
    marker = tmp_path / "run.exit.health"
    rc = health.main(["judge", "--probe-out", str(out), "--hosts", "n1", "n2", "--ranks", "2", "--min-busbw-gbs",
                      "1e9", "--marker", str(marker), "--started", str(time.time())])
    assert rc == health.UNHEALTHY_EXIT
    printed = capsys.readouterr().out.splitlines()
    events = [ev.parse_line(x) for x in printed if ev.PREFIX in x]
    assert len(events) == 1 and events[0][ev.EVENT] == ev.EV_HEALTH and not events[0][ev.OK]
    assert set(events[0]) - {ev.EVENT} <= set(ev.HEALTH_KEYS)  # every key declared
    assert "health probe: srun: a warning" in printed  # the probe's other words, for a failed gate
    kept = json.loads(marker.read_text())
    assert kept[ev.BLAMED] == ["n1", "n2"] and kept[ev.OK] is False and kept[ev.MIN_BUSBW_GBS] == 1e9


# ------------------------------------------------------------------------------------------------ the GPUs


SMI = """#!/bin/bash
cat <<'EOF'
0, GPU-aaaa, 0, Active, Not Active, Not Active, Not Active
1, GPU-bbbb, 2, Not Active, Not Active, Not Active, Not Active
EOF
"""


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(SMI)
    (bindir / "nvidia-smi").chmod(0o755)
    (bindir / "dmesg").write_text("#!/bin/bash\necho '[ 5.0] NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off'\n")
    (bindir / "dmesg").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: nvidia-smi answers
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_gpu_checks_ecc_throttle_xid_and_visibility(fake_smi, monkeypatch):
    problems, text, n = healthprobe.gpu_checks(2)
    assert n == 2 and text == "2/2 GPUs (nvidia-smi)"
    assert "GPU 0: clocks throttled (HW slowdown)" in problems
    assert "GPU 1: 2 uncorrected ECC errors since boot" in problems
    assert any("XID" in p and "fallen off" in p for p in problems)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    problems, text, n = healthprobe.gpu_checks(2)
    assert n == 1 and problems[0] == "asked for 2 GPUs, 1 visible" and not any("GPU 0" in p for p in problems)
    problems, text, n = healthprobe.gpu_checks(2, allocated=False)  # local executor: said, not failed
    assert "asked for" not in " ".join(problems) and "no scheduler allocation" in text


def test_no_gpu_on_a_cpu_node(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert healthprobe.gpu_checks(0) == ([], "no GPU", 0)
    assert healthprobe.gpu_checks(4)[0] == ["asked for 4 GPUs, 0 visible"]


def test_the_real_gloo_probe_on_this_machine(tmp_path):
    """Two ranks forked by one probe, a real gloo all-reduce, then the judge: a measured bus bandwidth."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm.probes.health", "probe", "--nodes", "1", "--ranks-per-node", "2",
                        "--master", "127.0.0.1", "--port", "47311", "--timeout", "30", "--size-mb", "4"],
                       capture_output=True, text=True, env=env, timeout=60)
    records, other = health.read_records(p.stdout)
    (rec,) = records.values()
    assert [r.get("error") for r in rec["ranks"]] == [None, None], p.stdout + p.stderr
    v = health.judge(records, list(records), 2)
    assert v[ev.OK] and v[ev.BYTES] == 4 * 2**20 and v[ev.BUSBW_GBS] > 0 and v[ev.BACKEND] == "gloo"
    assert rec["gpu_text"] == "no GPU" and rec["seconds"] < 30


# ------------------------------------------------------------------------------------------------ matrix, script

MX = tiny_matrix_text("h", "1x2")


def _write(tmp_path: Path, text: str, name: str = "h.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_health_from_the_site_file_and_the_matrix(tmp_path):
    assert loader.load(_write(tmp_path, MX), site=False).health == Health()  # on, 30 s, no threshold
    site = _write(tmp_path, "[health]\nmin_busbw_gbs = 460\ntimeout_s = 20\n", "site.toml")
    m = loader.load(_write(tmp_path, MX + "[health]\ntimeout_s = 10\n"), site=site)
    assert (m.health.min_busbw_gbs, m.health.timeout_s, m.health.enabled) == (460.0, 10, True)
    for bad, words in (("enabled = 1", "true or false"), ("timeout_s = 0", ">= 1"), ("min_busbw = 4", "min_busbw"),
                       ("min_busbw_gbs = -1", ">= 0"), ('python = "py; reboot"', "not allowed")):
        with pytest.raises(MatrixError, match=words):
            loader.load(_write(tmp_path, MX + f"[health]\n{bad}\n"), site=False)


def test_the_gate_in_the_job_script(tmp_path):
    m = loader.load(_write(tmp_path, MX + "[health]\nmin_busbw_gbs = 1.5\n"), site=False)
    run = loader.runs(m, tmp_path / "logs")[0]
    renderer = render.Renderer(m)
    text, code = renderer.render(run, []), renderer.job_code.text
    gate, launch = text.index("\ndlperf_health 30 300 python3 "), text.index("\ndlperf_launch &\n")
    assert gate < launch and "--min-busbw-gbs 1.5" in text[gate:launch]
    assert "--ranks 2" in text and "--ranks-per-node 2 --expect-gpus 0" in text
    # one probe per node, whatever the allocation's task count (srun would inherit SLURM_NTASKS and start one per
    # GPU otherwise): the job code's step is the script's DLPERF_STEP
    assert "\nDLPERF_STEP=(srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --kill-on-bad-exit=0)\n" in text
    assert 'timeout -k 5 "$bound" "${DLPERF_STEP[@]}" "${DLPERF_HEALTH_PY[@]}" -m dlperf_slurm.probes.health' in code
    assert '"$judge" -m dlperf_slurm.probes.health judge' in code and f'"$rc" -eq {health.UNHEALTHY_EXIT} ]' in code
    off = loader.load(_write(tmp_path, MX + "[health]\nenabled = false\n"), site=False)
    assert "dlperf_health " not in render.render_run(off, loader.runs(off, tmp_path / "logs")[0])


def test_a_failed_gate_under_the_local_executor_is_unhealthy_and_never_trains(tmp_path):
    mx = _write(tmp_path, MX + "[health]\nmin_busbw_gbs = 1e9\n")
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--wait", timeout=240,
            env={"OMP_NUM_THREADS": "1"})
    (run,) = manifest.load_manifest(tmp_path / "logs" / "h")
    assert run.status == Status.UNHEALTHY, (run.reason, run.log.read_text()[-2000:], p.stdout, p.stderr)
    assert "health gate failed before training" in run.reason and '"event":"header"' not in run.log.read_text()
    assert json.loads(run.marker.read_text())["rc"] == health.UNHEALTHY_EXIT
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--retry-failed",
            "--dry-run")
    assert "submitting 1 as 1" in p.stdout, p.stdout


def test_the_retry_of_an_unhealthy_run_excludes_the_blamed_nodes(tmp_path):
    m = loader.load(_write(tmp_path, MX.replace('["1x2"]', '["1x2", "1x1"]')), site=False)
    runs = loader.runs(m, tmp_path / "logs")
    bad, failed = runs
    bad.marker.parent.mkdir(parents=True)
    bad.marker.write_text(json.dumps({"rc": 3, "health": {"ok": False, "blamed": ["n2", "n1;x"]}}))
    statuses = {bad.key: Status.UNHEALTHY, failed.key: Status.FAILED}
    excl = journal.blamed_nodes(runs, statuses)
    assert excl == {bad.key: ("n2",)}
    groups, _ = journal.plan(m, runs, LocalScheduler(tmp_path / "logs"), excl)
    by_run = {g.runs[0].key: g.resources for g in groups}
    assert by_run[bad.key].exclude == ("n2",) and options(by_run[bad.key])["exclude"] == "n2"
    assert by_run[failed.key].exclude == () and "exclude" not in options(by_run[failed.key])
