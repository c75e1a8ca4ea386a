"""Against the real Slurm test cluster (tests/slurm/start.sh: slurmctld, slurmdbd, nodes n1 and n2).

Skipped, with the reason, when no cluster answers ``scontrol ping``; ``.ci/run`` starts one so they run in CI.
Every campaign is submitted up front (module fixture) so the cluster runs them side by side; each test then
waits for its own. Budget: about three minutes in all.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, TEMPLATES, cli, cluster_up, tiny_matrix_text, wait_campaign, wait_until, write_matrix  # noqa: E402

from dlperf_slurm.campaign import (
    manifest,  # noqa: E402
    tracking,  # noqa: E402
)
from dlperf_slurm.model.status import Status  # noqa: E402
from dlperf_slurm.outcome import evidence  # noqa: E402

_why = cluster_up()
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

MULTINODE_ENV = """[environment.env]
OMPI_ALLOW_RUN_AS_ROOT = "1"
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = "1"
OMPI_MCA_btl = "self,tcp"
OMPI_MCA_btl_tcp_if_include = "lo"
OMPI_MCA_oob_tcp_if_include = "lo"
GLOO_SOCKET_IFNAME = "lo"
"""


def _smoke_text() -> str:
    """matrices/smoke.toml for the test cluster, whose nodes have no GPU: a CPU cluster's site (or system) asks for
    none (``gpu_request = "none"``); the example matrix carries no site key, and the tests run with --no-site."""
    text = (REPO / "matrices" / "smoke.toml").read_text()
    assert '[slurm]\ntime = "00:10:00"\n' in text
    return text.replace('[slurm]\ntime = "00:10:00"\n', '[slurm]\ntime = "00:10:00"\ngpu_request = "none"\n')


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Submit every campaign at once; tests wait for their own."""
    root = tmp_path_factory.mktemp("slurm")
    logs = root / "logs"
    out = {"root": root, "logs": logs}
    smoke = root / "smoke.toml"
    smoke.write_text(_smoke_text())
    p = cli("--logs", str(logs), "submit", str(smoke), "--campaign", "smoke",
            "--executor", "slurm", "--no-site")
    out["smoke"] = p
    for launcher in ("mpirun", "torchrun"):
        mx = root / f"mn-{launcher}.toml"
        mx.write_text(tiny_matrix_text(f"mn-{launcher}", "2x1", axes=f'launcher = ["{launcher}"]\n',
                                        slurm='time = "00:05:00"\n', extra=MULTINODE_ENV))
        out[f"mn-{launcher}"] = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site")
    for variant in ("sacct", "nosacct"):
        mx = write_matrix(root, name=f"life-{variant}", modes=("ok", "fail", "sleep"), repeats=2,
                          time_limit="00:01:00", slurm_extra='extra_directives = ["--comment=dlperf-rendered"]')
        out[f"life-{variant}"] = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site",
                                     "--templates", str(TEMPLATES))
    setupfail = root / "setupfail.toml"
    setupfail.write_text(_smoke_text().replace('name = "smoke"', 'name = "setupfail"')
                         .replace('devices = ["1x1", "1x2"]', 'devices = ["1x1"]').replace("repeats = 3", "repeats = 1")
                         + '[environment]\nsetup = ["source /nonexistent/dlperf-env.sh"]\n')
    out["setupfail"] = cli("--logs", str(logs), "submit", str(setupfail), "--executor", "slurm", "--no-site")
    # the built-in workload with its loss made NaN from step 3 on: exits 0, its log says NONFINITE
    nan = root / "nan.toml"
    nan.write_text(_smoke_text().replace('name = "smoke"', 'name = "nan"')
                   .replace('devices = ["1x1", "1x2"]', 'devices = ["1x1"]').replace("repeats = 3", "repeats = 2")
                   .replace("threads = 1", "threads = 1\nnan_at_step = 3"))
    out["nan"] = cli("--logs", str(logs), "submit", str(nan), "--executor", "slurm", "--no-site")
    # the built-in workload, 2 ranks, stuck at step 4: the job's watchdog must end it long before its limit
    hang = root / "hang.toml"
    hang.write_text(_smoke_text().replace('name = "smoke"', 'name = "hang"')
                    .replace('devices = ["1x1", "1x2"]', 'devices = ["1x2"]')
                    .replace("repeats = 3", "repeats = 1\nhang_timeout = 600\nhang_min = 5")
                    .replace("threads = 1", "threads = 1\nhang_at_step = 4"))
    out["hang"] = cli("--logs", str(logs), "submit", str(hang), "--executor", "slurm", "--no-site")
    # scancel one sleeping run of each lifecycle campaign as soon as it runs (the other one will time out)
    for variant in ("sacct", "nosacct"):
        if out[f"life-{variant}"].returncode == 0:
            victim = next(r for r in manifest.load_manifest(logs / f"life-{variant}") if r.key.endswith("sleep.r0"))
            wait_until(lambda: victim.log.exists(), 120, what="the sleep run to start")
            out[f"scontrol-{variant}"] = subprocess.run(["scontrol", "show", "job", victim.job_id],
                                                        capture_output=True, text=True).stdout
            subprocess.run(["scancel", victim.job_id], check=True)
            out[f"victim-{variant}"] = victim.job_id
    return out


def _wait(cdir: Path, timeout: float = 300) -> dict[str, str]:
    return wait_campaign(cdir, timeout)


def test_smoke_matrix_with_the_builtin_workload_all_ok(site):
    p = site["smoke"]
    assert p.returncode == 0, p.stderr
    assert "submitted 6 runs with 1 sbatch call;" in p.stdout  # 2 cells x 3 repeats, one array
    p = cli("--logs", str(site["logs"]), "status", "smoke")
    st = _wait(site["logs"] / "smoke")
    assert list(st.values()) == [Status.OK] * 6, cli("--logs", str(site["logs"]), "status", "smoke").stdout
    for r in manifest.load_manifest(site["logs"] / "smoke"):
        text = r.log.read_text()
        assert '"event":"summary"' in text and json.loads(r.marker.read_text())["rc"] == 0
        assert r.job_id.startswith(r.array_job_id + "_")


@pytest.mark.parametrize("launcher, name", [("mpirun", "mpi"), ("torchrun", "torchrun")])
def test_two_node_cell_spans_n1_and_n2(site, launcher, name):
    p = site[f"mn-{launcher}"]
    assert p.returncode == 0, p.stderr
    cdir = site["logs"] / f"mn-{launcher}"
    st = _wait(cdir)
    (run,) = manifest.load_manifest(cdir)
    assert list(st.values()) == [Status.OK], run.log.read_text()[-3000:]
    assert run.nodes == "n[1-2]"  # what squeue reported for the allocation
    header = next(json.loads(line.split(" ", 1)[1]) for line in run.log.read_text().splitlines()
                  if line.startswith(':::DLPERF {"event":"header"'))
    assert header["world_size"] == 2 and header["nodes"] == 2 and header["launcher"] == name
    # provenance from every node, not only the batch host: one node event from n1 and one from n2 (srun, one task
    # a node), each with the interpreter and torch the program ran with there
    nodes = [json.loads(line.split(" ", 1)[1]) for line in run.log.read_text().splitlines()
             if line.startswith(':::DLPERF {"event": "node"')]
    assert sorted(n["hostname"] for n in nodes) == ["n1", "n2"], nodes
    assert all(n["versions"]["torch"] == header["versions"]["torch"] for n in nodes), (nodes, header["versions"])
    job = next(json.loads(line.split(" ", 1)[1]) for line in run.log.read_text().splitlines()
               if line.startswith(':::DLPERF {"event": "job"'))
    assert job["partition"] and job["qos"] and job["nodelist"] == "n[1-2]"


def test_a_failed_source_line_ends_the_job_as_launch_failed(site):
    """A set-up line that fails on the node (a file that is not there) ends the job there: LAUNCH_FAILED, with
    that line as the reason, in status and in collect."""
    cdir = site["logs"] / "setupfail"
    assert site["setupfail"].returncode == 0, site["setupfail"].stderr
    st = _wait(cdir)
    assert list(st.values()) == [Status.LAUNCH_FAILED], st
    (run,) = manifest.load_manifest(cdir)
    assert "set-up failed: source /nonexistent/dlperf-env.sh" in run.reason, run.reason
    assert '"event":"header"' not in run.log.read_text()  # the workload never started


@pytest.mark.parametrize("variant", ["sacct", "nosacct"])
def test_lifecycle_cancelled_failed_timeout_and_resubmission(site, variant, monkeypatch):
    """ok -> OK, exit 3 -> FAILED, scancel -> CANCELLED, past the 1-minute limit -> TIMEOUT; then only the
    holes are resubmitted. ``nosacct``: the same with sacct treated as missing (squeue + exit markers)."""
    env = {"DLPERF_SLURM_NO_SACCT": "1"} if variant == "nosacct" else {}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    p = site[f"life-{variant}"]
    assert p.returncode == 0, p.stderr
    logs, cdir = site["logs"], site["logs"] / f"life-{variant}"
    runs = {r.key.split("MODE-")[1]: r for r in manifest.load_manifest(cdir)}
    assert set(runs) == {"ok.r0", "ok.r1", "fail.r0", "fail.r1", "sleep.r0", "sleep.r1"}
    assert runs["sleep.r0"].job_id == site[f"victim-{variant}"]  # scancel'd by the fixture while it ran
    st = {k.split("MODE-")[1]: v for k, v in _wait(cdir, 240).items()}
    status_out = cli("--logs", str(logs), "status", cdir.name, env=env).stdout
    assert st == {"ok.r0": Status.OK, "ok.r1": Status.OK, "fail.r0": Status.FAILED, "fail.r1": Status.FAILED,
                  "sleep.r0": Status.CANCELLED, "sleep.r1": Status.TIMEOUT}, status_out
    by = {r.key.split("MODE-")[1]: r for r in manifest.load_manifest(cdir)}
    assert by["fail.r0"].reason.startswith("exit code 3; the log stops at step 0") and by["fail.r0"].exit_code == 3
    assert json.loads(by["sleep.r1"].marker.read_text())["signal"] == "TERM"
    if variant == "nosacct":
        assert "sacct unavailable" in status_out
    # the batch step's output (Slurm's kill banners) lands in the run's own file under <campaign>/.slurm/, and
    # once the scheduler has forgotten the job, the decision reads the kill from there (with the exit marker)
    m = manifest.Manifest(cdir)
    try:
        ctx, rows = tracking._Context(m), {r.key.split("MODE-")[1]: r for r in m.runs()}
        for key, status, words in (("sleep.r1", Status.TIMEOUT, "DUE TO TIME LIMIT"),
                                   ("sleep.r0", Status.CANCELLED, "CANCELLED AT")):
            assert by[key].slurm_out.parent == cdir / ".slurm" and words in by[key].slurm_out.read_text()
            forgotten, _ = tracking.decide_row(ctx, rows[key], None, True)  # asked: no record left
            assert forgotten.status == status and words in forgotten.reason, forgotten
    finally:
        m.close()

    # what ran is what was rendered: the directives Slurm applied are the script's #SBATCH lines
    shown = dict(w.split("=", 1) for w in site[f"scontrol-{variant}"].split() if "=" in w)
    directives = dict(line[len("#SBATCH --"):].split("=", 1) for line in by["sleep.r0"].script.read_text().splitlines()
                      if line.startswith("#SBATCH --") and "=" in line)
    assert shown["JobName"] == directives["job-name"] and shown["JobName"].startswith(f"dlperf.{cdir.name}.")
    assert shown["TimeLimit"] == directives["time"] == "00:01:00"
    assert shown["NumNodes"] == directives["nodes"] == "1" and shown["NumTasks"] == directives["ntasks-per-node"]
    assert shown["Comment"] == directives["comment"] == "dlperf-rendered"  # a site directive
    assert shown["StdOut"] == str(by["sleep.r0"].slurm_out)  # the array's %a pattern, resolved for this task
    assert shown["Requeue"] == "0"  # --no-requeue: a node failure is NODE_FAIL, not a silent re-run

    # resubmission fills only the holes: nothing without --retry-failed, the 4 failures with it
    mx = site["root"] / f"life-{variant}.toml"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site", "--templates",
            str(TEMPLATES), env=env)
    assert "nothing to submit" in p.stdout, p.stdout + p.stderr
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site", "--templates",
            str(TEMPLATES), "--retry-failed", env=env)
    assert "submitting 4 as 1" in p.stdout and "with 1 sbatch call;" in p.stdout, p.stdout + p.stderr
    after = {r.key.split("MODE-")[1]: r for r in manifest.load_manifest(cdir)}
    for k in ("ok.r0", "ok.r1"):
        assert after[k].job_id == by[k].job_id and after[k].attempt == 1
    for k in ("fail.r0", "fail.r1", "sleep.r0", "sleep.r1"):
        assert after[k].attempt == 2 and after[k].job_id != by[k].job_id
        assert Path(after[k].previous[0]["moved"]["log"]).is_file()
    # and cancel what is queued or running
    wait_until(lambda: after["sleep.r0"].log.exists(), 120, what="the resubmitted sleep run to start")
    p = cli("--logs", str(logs), "cancel", cdir.name, env=env)
    assert "cancel requested for" in p.stdout, p.stdout + p.stderr
    st = {k.split("MODE-")[1]: v for k, v in _wait(cdir, 120).items()}
    assert st["sleep.r0"] == st["sleep.r1"] == Status.CANCELLED
    assert st["fail.r0"] in (Status.FAILED, Status.CANCELLED)  # it may or may not have ended before the cancel
    final = {r.key.split("MODE-")[1]: r for r in manifest.load_manifest(cdir)}
    assert "dlperf-slurm cancel" in final["sleep.r1"].reason


def test_a_nan_run_is_nonfinite_for_status_collect_and_retry_failed(site):
    """The loss turns NaN at step 3 and the program exits 0: the scheduler says COMPLETED, the log says
    NONFINITE. status, collect and submit --retry-failed agree it failed (one decision, kept in the manifest)."""
    assert site["nan"].returncode == 0, site["nan"].stderr
    logs, cdir = site["logs"], site["logs"] / "nan"
    st = _wait(cdir)
    assert list(st.values()) == [Status.NONFINITE] * 2, cli("--logs", str(logs), "status", "nan").stdout
    runs = manifest.load_manifest(cdir)
    assert all(json.loads(r.marker.read_text())["rc"] == 0 and "loss is nan at step 3" in r.reason for r in runs)
    assert all(r.sched_state == "COMPLETED" for r in runs)  # the scheduler's own word, kept beside the verdict
    p = cli("--logs", str(logs), "status", "nan")
    assert "NONFINITE 2" in p.stdout and "| OK" not in p.stdout
    p = cli("--logs", str(logs), "collect", "nan", "--no-plots", "--out", str(site["root"] / "nan-summaries"))
    assert p.returncode == 1 and "collect fails: every run failed (2: NONFINITE 2)" in p.stderr, p.stderr
    rows = list(csv.DictReader(open(site["root"] / "nan-summaries" / "nan.runs.csv")))
    assert [r["status"] for r in rows] == [Status.NONFINITE] * 2 and all(r["throughput"] for r in rows)
    cells = list(csv.DictReader(open(site["root"] / "nan-summaries" / "nan.csv")))
    assert [c["status"] for c in cells] == [Status.NONFINITE] and not cells[0]["median"]
    mx = site["root"] / "nan.toml"
    args = ("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site", "--dry-run")
    assert "nothing to submit" in cli(*args).stdout
    p = cli(*args, "--retry-failed")
    assert "submitting 2 as 1" in p.stdout, p.stdout + p.stderr


def test_a_hung_run_ends_early_as_hang(site):
    """Both ranks of the built-in workload stop at step 4 (--hang-at-step). Its 10-minute time limit and fixed
    hang bound (600 s) would hold the node that long; the heartbeat's median step time brings the bound to
    hang_min = 5 s, so the job script stops the run seconds later, and status says HANG with the time saved."""
    assert site["hang"].returncode == 0, site["hang"].stderr
    cdir = site["logs"] / "hang"
    st = _wait(cdir, 240)
    (run,) = manifest.load_manifest(cdir)
    assert list(st.values()) == [Status.HANG], (run.reason, run.log.read_text()[-3000:])
    marker = json.loads(run.marker.read_text())
    assert marker["hang"]["bound_s"] == 5 and marker["rc"] != 0
    ran = marker["end"] - evidence.log_start(run.log)
    assert ran < 120, ran  # against a 600 s limit
    assert "at step 3" in run.reason and "s before its time limit" in run.reason
    assert run.sched_state == "FAILED"  # what Slurm saw: the script's non-zero exit, not a kill by Slurm
    assert "the job script stops the run (HANG)" in run.log.read_text()


def test_which_nodes_made_which_number_and_the_straggler(site):
    """Every run records the nodes it ran on (runs table); the summary names n1, where every step took 1.5x as
    long, as a straggler, and not n2. Three cells x 6 repeats, each run on a whole node, two at a time: once the
    queue is otherwise empty, the two running tasks are always on n1 and n2."""
    logs, cdir, out = site["logs"], site["logs"] / "nodes", site["root"] / "nodes-summaries"
    wait_until(lambda: not subprocess.run(["squeue", "-h", "-t", "PD,R,CG"], capture_output=True,
                                          text=True).stdout.strip(), 300, what="the other tests' jobs to end")
    nodes = write_matrix(site["root"], name="nodes", repeats=6, slurm_extra="exclusive = true\narray_throttle = 2",
                         extra='[environment]\nenv = { DLPERF_TEST_SLOW_NODE = "n1", DLPERF_TEST_SLEEP = "1" }\n')
    nodes.write_text(nodes.read_text().replace("batch_size = [1]", "batch_size = [1, 2, 4]"))
    p = cli("--logs", str(logs), "submit", str(nodes), "--executor", "slurm", "--no-site", "--templates",
            str(TEMPLATES))
    assert p.returncode == 0, p.stderr
    st = _wait(cdir, 240)
    assert list(st.values()) == [Status.OK] * 18
    p = cli("--logs", str(logs), "collect", "nodes", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stderr
    runs = list(csv.DictReader(open(out / "nodes.runs.csv")))
    assert {r["hosts"] for r in runs} == {"n1", "n2"}, [r["hosts"] for r in runs]
    text = (out / "nodes.md").read_text()
    assert "Stragglers: n1 " in text, text[-2500:]
    nodes = {n["node"]: n for n in json.loads((out / "nodes.json").read_text())["nodes"]}
    assert nodes["n1"]["straggler"] and not nodes["n2"]["straggler"]
    assert nodes["n1"]["worst_gap"] == pytest.approx(1 / 3, abs=0.01)  # 1.5x the time: a third fewer samples/s


def test_interrupted_submit_on_the_cluster_completes_exactly(tmp_path):
    """sbatch wrapper: SIGKILL the submit right after its 2nd real sbatch, before the ids are recorded."""
    real = shutil.which("sbatch")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    count = tmp_path / "sbatch.count"
    (bindir / "sbatch").write_text(f"""#!/bin/bash
n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}
{real} "$@"; rc=$?
if [ "$n" = "${{KILL_AT:-0}}" ]; then kill -9 $PPID; fi
exit $rc
""")
    (bindir / "sbatch").chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    mx = write_matrix(tmp_path, name="intr", devices=("1x1", "1x2", "2x1"), launchers=("srun",), repeats=2)
    logs = tmp_path / "logs"
    args = ["--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site", "--templates", str(TEMPLATES)]
    p = cli(*args, env={**env, "KILL_AT": "2"})
    assert p.returncode == -9
    assert sorted(r.status for r in manifest.load_manifest(logs / "intr")).count("SUBMITTING") == 2
    p = cli(*args, env=env)
    assert p.returncode == 0 and "reconciled interrupted submission" in p.stdout, p.stdout + p.stderr
    assert count.read_text().strip() == "3"  # three arrays, three real sbatch calls, none twice
    st = _wait(logs / "intr", 180)
    runs = manifest.load_manifest(logs / "intr")
    assert list(st.values()) == [Status.OK] * 6
    assert len({r.job_id for r in runs}) == 6 and len({r.array_job_id for r in runs}) == 3
    assert all("fake payload" in r.log.read_text() for r in runs)


def test_refused_sbatch_and_unreachable_controller(tmp_path):
    mx = write_matrix(tmp_path, name="bad", slurm_extra='partition = "nosuchpartition"')
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "slurm", "--no-site")
    assert p.returncode == 2 and "the partition does not exist" in p.stderr and "Invalid partition" in p.stderr, \
        p.stderr
    assert [r.status for r in manifest.load_manifest(tmp_path / "logs" / "bad")] == [Status.UNSUBMITTED] * 2
    conf = tmp_path / "slurm.conf"
    conf.write_text(Path("/etc/slurm/slurm.conf").read_text().replace("SlurmctldPort=6817", "SlurmctldPort=6999"))
    t0 = time.time()
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(write_matrix(tmp_path, name="down")), "--executor",
            "slurm", "--no-site", env={"SLURM_CONF": str(conf)}, timeout=180)
    assert p.returncode == 2 and "unreachable" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert time.time() - t0 < 120
