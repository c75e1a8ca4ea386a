"""GPUs as Slurm hands them out (pytest marker ``gpubed``): campaigns submitted as a GPU user submits them, with no
``gpu_request`` override, to the GPU mode of the test cluster (``SLURM_CI_GPUS=4 bash tests/slurm/start.sh 4``:
4 nodes of 4 GRES GPUs on stand-in device files, partitions gpu and debug, the account ci-gpu whose QOS ci-limited
caps submissions and GPUs; .ci/run runs this phase). Slurm's own binding is what is tested: which devices it gives a
job and a step (CUDA_VISIBLE_DEVICES); only nvidia-smi is stood in for (tests/slurm/gpubed/, put on the jobs' PATH by
the cluster's TaskProlog, never by the package), answering from the devices Slurm bound and the node's device
files. The training processes run on the CPU (torch's CPU build), so the rates are not GPU rates.

And one test for the other cluster (marker ``slurm``): a CPU-only Slurm refuses a GPU campaign in one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, cli, cluster_up, collect_summary, wait_campaign  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

GPUS = 4  # what .ci/run's GPU phase gives every node
GPUBED = REPO / "tests" / "slurm" / "gpubed"
DEVICES = Path("/run/slurm-ci/gpus")


def _gpu_cluster() -> str | None:
    """Why the GPU tests cannot run here (None: the GPU mode of the test cluster, 4 nodes of 4 GPUs, is up)."""
    why = cluster_up()
    if why:
        return why
    p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %G"], capture_output=True, text=True)
    gres = dict(line.split(None, 1) for line in p.stdout.splitlines() if line.strip())
    if len(gres) < 4 or any(v.strip() != f"gpu:{GPUS}" for v in gres.values()):
        return (f"the running test cluster is not its GPU mode (sinfo: {gres}); start it with "
                f"SLURM_CI_GPUS={GPUS} bash tests/slurm/start.sh 4 (.ci/run's gpubed phase does)")
    return None


_WHY = _gpu_cluster()
_MARKS = (pytest.mark.slurm, pytest.mark.gpubed, pytest.mark.slow, pytest.mark.skipif(_WHY is not None, reason=_WHY or ""))


def gpu(test):
    """The marks of a test on the GPU cluster."""
    for mark in _MARKS:
        test = mark(test)
    return test


def _tiny(name: str, devices, *, repeats: int = 1, slurm: str = "", health: bool = True, extra: str = "") -> str:
    """A matrix of the built-in workload at its smallest, asking Slurm for GPUs as any GPU matrix does (the default
    request: no gpu_request line)."""
    return textwrap.dedent(f"""\
        suite = "pytorch-ddp/resnet50"
        name = "{name}"
        [axes]
        devices = {json.dumps(list(devices))}
        batch_size = [2]
        [options]
        tiny = true
        threads = 1
        [measure]
        repeats = {repeats}
        warmup_steps = 1
        measure_steps = 2
        [health]
        enabled = {str(health).lower()}
        [slurm]
        time = "00:05:00"
        """) + slurm + extra


def _submit(tmp_path: Path, text: str, *args: str, wait: bool = True, timeout: float = 600):
    name = re.search(r'^name = "([^"]+)"', text, re.M).group(1)
    mx = tmp_path / f"{name}.toml"
    mx.write_text(text)
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site", *args, timeout=timeout)
    if wait and p.returncode == 0:
        wait_campaign(logs / name, timeout)
    return p, logs, logs / name


def _alloc_gpus(job_ids) -> dict[str, int]:
    """sacct's AllocTRES gres/gpu of each job (array tasks by their own id)."""
    p = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,AllocTRES"],
                       capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        jid, _, tres = line.partition("|")
        m = re.search(r"gres/gpu=(\d+)", tres)
        out[jid] = int(m.group(1)) if m else 0
    return out


# ------------------------------------------------------------------------------------------ as a GPU user


@gpu
@pytest.mark.parametrize("form", ["gpus-per-node", "gres"])
def test_dlperf_shapes_run_to_ok_with_the_gpus_slurm_gave(form, tmp_path):
    """DLPerf's shapes up to 4 nodes (1n1g, 1n2g, 1n4g, 2n4g, 4n4g), each asking for its GPUs in the site's form;
    every run OK, its script's request as written, sacct's AllocTRES the GPUs of the shape, the health gate passed
    on every node with the GPUs asked for, and the System section the GPUs Slurm gave a node."""
    shapes = ["1x1", "1x2", "1x4", "2x4", "4x4"] if form == "gpus-per-node" else ["1x2", "2x4"]
    slurm = "" if form == "gpus-per-node" else 'gpu_request = "gres"\n'
    p, logs, cdir = _submit(tmp_path, _tiny(f"shapes-{form}", shapes, slurm=slurm))
    assert p.returncode == 0, p.stdout + p.stderr
    runs = manifest.load_manifest(cdir)
    assert {r.status for r in runs} == {Status.OK}, [(r.key, r.status, r.reason) for r in runs]
    alloc = _alloc_gpus([r.job_id for r in runs])
    for r in runs:
        nodes, gpus = map(int, re.search(r"\.(\d+)x(\d+)\.", r.key).groups())
        header = Path(r.script).read_text()
        want = f"#SBATCH --gpus-per-node={gpus}" if form == "gpus-per-node" else f"#SBATCH --gres=gpu:{gpus}"
        assert want in header, header[:600]
        assert alloc[r.job_id] == nodes * gpus, (r.key, alloc)
        health = next(json.loads(line.split(" ", 1)[1]) for line in Path(r.log).read_text().splitlines()
                      if line.startswith(':::DLPERF {"event":"health"'))
        assert health["ok"] and set(health["gpus"].values()) == {f"{gpus}/{gpus} GPU{'s' * (gpus != 1)} (nvidia-smi)"}, health
    summary = collect_summary(logs, cdir.name)
    shown = {g["slurm_gpus"] for g in summary["system"]["node_groups"]}
    assert shown == {f"{int(s.split('x')[1])} a node" for s in shapes}, summary["system"]["node_groups"]


@gpu
def test_the_smoke_matrix_as_the_readme_has_it(tmp_path):
    """The README's smoke matrix, unchanged, submitted to a GPU cluster: every run OK."""
    text = (REPO / "matrices" / "smoke.toml").read_text()
    p, logs, cdir = _submit(tmp_path, text)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "--gpus-per-node=1" in p.stdout and "--gpus-per-node=2" in p.stdout, p.stdout
    assert {r.status for r in manifest.load_manifest(cdir)} == {Status.OK}


# ------------------------------------------------------------------------------------------ the launchers

#: launcher -> (framework venv, processes a node; None: one per GPU)
LAUNCHERS = {"srun": (None, None), "torchrun": (None, None), "mpirun": (None, None), "mp_spawn": (None, None),
             "tf_config": (None, 1), "node_ips": (None, 1), "horovodrun": ("horovod", None),
             "paddle": ("paddle", None), "oneflow": ("oneflow", None), "deepspeed": ("deepspeed", None),
             "msrun": ("mindspore", None), "dmlc": ("mxnet", 1)}


def _python_for(venv: str | None) -> str | None:
    if venv is None:
        return sys.executable
    sys.path.insert(0, str(REPO / "tests" / "frameworks"))
    import venvs

    python, _why = venvs.python_for(venv)
    return str(python) if python else None


def _bound(job_id: str) -> dict[str, set[str]]:
    """The GPU indices Slurm bound to a job on each of its nodes (``scontrol -d show job``: GRES=gpu:2(IDX:2-3))."""
    from dlperf_slurm.hostlist import expand

    p = subprocess.run(["scontrol", "-d", "show", "job", job_id], capture_output=True, text=True)
    out: dict[str, set[str]] = {}
    for m in re.finditer(r"Nodes=(\S+) .*?GRES=\S*?\(IDX:([\d,-]+)\)", p.stdout):
        idx = set()
        for part in m.group(2).split(","):
            a, _, b = part.partition("-")
            idx |= {str(i) for i in range(int(a), int(b or a) + 1)}
        for node in expand(m.group(1)):
            out[node] = idx
    return out


@gpu
@pytest.mark.parametrize("layout", ["whole", "shared"])
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_every_launcher_puts_each_rank_on_its_own_device(launcher, layout, tmp_path):
    """A 2-node job of each launcher, on whole nodes (2 x 4 GPUs) and on nodes it shares (2 x 2, beside a job that
    holds the other two GPUs of each node, so Slurm binds devices 2 and 3): every rank reports, from inside itself,
    the device it would use (tests/slurm/gpubed/rank_device.py: CUDA_VISIBLE_DEVICES as Slurm and the launcher left
    it, at its local rank). Two ranks of a node on one device, a rank that sees none, or a device Slurm did not
    bind to the job on that node (``scontrol -d show job``), fail."""
    from dlperf_slurm import launchers as registry
    from dlperf_slurm.matrix import loader
    from dlperf_slurm.submit import render
    from dlperf_slurm.suites import Suite, registered

    venv, per_node = LAUNCHERS[launcher]
    python = _python_for(venv)
    if python is None:
        pytest.skip(f"the {venv} framework venv is not built (python tests/frameworks/venvs.py {venv})")
    gpus = GPUS if layout == "whole" else GPUS // 2
    report = tmp_path / "devices.jsonl"
    reporter = str(GPUBED / "rank_device.py")

    class DeviceSuite(Suite):
        framework, model, launcher = "gpubed", "devices", "srun"
        precisions = ("fp32",)
        launchers = tuple(registry.names())

        def program(self, cell, measure, options):
            return [python, reporter, cell.launcher]

    bindir = Path(python).parent
    env = {"DLPERF_DEVICE_REPORT": str(report), "OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo",
           "OMPI_MCA_oob_tcp_if_include": "lo"}
    if venv == "oneflow":
        from testlib import nvidia_libs

        env["LD_LIBRARY_PATH"] = nvidia_libs(python)
    text = textwrap.dedent(f"""\
        suite = "gpubed/devices"
        name = "dev-{launcher}"
        [axes]
        devices = ["2x{gpus}"]
        batch_size = [1]
        launcher = ["{launcher}"]
        [measure]
        repeats = 1
        warmup_steps = 1
        measure_steps = 1
        [health]
        enabled = false
        [slurm]
        time = "00:05:00"
        extra_directives = ["--nodelist=n3,n4"]
        [environment]
        setup = ["export PATH={bindir}:$PATH"]
        [environment.env]
        """) + "".join(f'{k} = "{v}"\n' for k, v in env.items())
    (tmp_path / "m.toml").write_text(text)
    with registered(DeviceSuite):
        m = loader.load(tmp_path / "m.toml", site=False)
        [run] = loader.runs(m, tmp_path / "c")
        [script] = render.write_scripts(m, [run])
    assert f"#SBATCH --gpus-per-node={gpus}" in script.read_text()
    blocker = None
    if layout == "shared":  # the other half of each node's GPUs, held first: Slurm binds devices 2, 3 to the job
        b = subprocess.run(["sbatch", "--parsable", "-N2", "--nodelist=n3,n4", f"--gpus-per-node={GPUS - gpus}",
                            "-o", "/dev/null", "--wrap", "sleep 300"], capture_output=True, text=True, check=True)
        blocker = b.stdout.strip().split(";")[0]
        from testlib import wait_until

        wait_until(lambda: "RUNNING" in subprocess.run(["squeue", "-h", "-j", blocker, "-o", "%T"],
                                                       capture_output=True, text=True).stdout, 60, what="blocker")
    try:
        p = subprocess.Popen(["sbatch", "--wait", "--parsable", str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        job = p.stdout.readline().strip().split(";")[0]  # printed at submission, before the wait
        from testlib import wait_until

        wait_until(lambda: p.poll() is not None or "RUNNING" in subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout, 120, 0.05, "the job")
        bound = _bound(job)
        out, err = p.communicate(timeout=600)
    finally:
        if blocker:
            subprocess.run(["scancel", blocker])
    log = run.log.read_text() if run.log.exists() else ""
    where = f"{launcher} ({layout}): sbatch exit {p.returncode} {err}\nbound {bound}\n{log[-3000:]}"
    rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    by_host: dict[str, list[dict]] = {}
    for r in rows:
        by_host.setdefault(r["host"], []).append(r)
    assert sorted(by_host) == ["n3", "n4"], f"{by_host}\n{where}"
    if layout == "shared":
        assert all(v == {"2", "3"} for v in bound.values()) and len(bound) == 2, where
    for host, ranks in by_host.items():
        mine = bound.get(host, set())
        assert all(r["visible"] for r in ranks), f"a rank on {host} sees no GPU: {ranks}\n{where}"
        if per_node:
            assert len(ranks) == per_node and set(ranks[0]["devices"]) == mine, f"{host}: {ranks}\n{where}"
        else:
            devices = [r["device"] for r in ranks]
            assert len(ranks) == gpus and None not in devices, f"{host}: {ranks}\n{where}"
            assert len(set(devices)) == gpus, f"two ranks of {host} share a device: {ranks}\n{where}"
            assert set(devices) == mine, f"ranks of {host} on devices Slurm did not bind to the job: {ranks}\n{where}"
    # dmlc's workers fail on purpose once all have reported (it stops each node's scheduler and server)
    assert p.returncode != 0 if launcher == "dmlc" else p.returncode == 0, where


# ------------------------------------------------------------------------------------------ the health gate


@gpu
def test_a_node_with_fewer_devices_than_asked_is_unhealthy_and_the_retry_excludes_it(tmp_path):
    """Two device files of n1 taken away (the node's gres.conf names four; two are gone, as GPUs fallen off the
    bus): a 1x4 run there reads UNHEALTHY naming n1 and the devices it saw; `submit --retry-failed` excludes n1 and
    the retry runs OK on another node. The device files are put back whatever happens."""
    gone = [DEVICES / "n1" / f"nvidia{i}" for i in (2, 3)]
    for f in gone:
        f.unlink()
    try:
        p, logs, cdir = _submit(tmp_path, _tiny("miswired", ["1x4"], repeats=2))
        assert p.returncode == 0, p.stdout + p.stderr
        runs = manifest.load_manifest(cdir)
        bad = [r for r in runs if r.status == Status.UNHEALTHY]
        assert bad, [(r.key, r.status, r.reason) for r in runs]
        for r in bad:
            assert "n1: asked for 4 GPUs, 2 visible" in r.reason, r.reason
        p = cli("--logs", str(logs), "submit", str(tmp_path / "miswired.toml"), "--executor", "slurm", "--no-site",
                "--retry-failed")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "--exclude=n1" in p.stdout, p.stdout
        final = wait_campaign(cdir, 300)
        assert set(final.values()) == {Status.OK}, final
    finally:
        for f in gone:
            if not f.exists():
                subprocess.run(["mknod", "-m", "666", str(f), "c", "1", "3"], check=True)


@gpu
def test_a_controller_outage_while_runs_stand_at_their_gate_costs_no_run(tmp_path):
    """slurmctld stopped (SIGTERM by its pid file: a maintenance restart, its job state saved) as the run reaches
    its health gate, started again 60 s later: the gate's probe waits for the controller and probes again; the run
    is OK, not UNHEALTHY. (A SIGKILL right after the submission loses jobs the controller had not saved yet: that
    fault is tests/test_slurm_faults.py's.)"""
    import signal
    import time

    import faults

    p, logs, cdir = _submit(tmp_path, _tiny("outage", ["2x2"]), wait=False)
    assert p.returncode == 0, p.stdout + p.stderr
    [run] = manifest.load_manifest(cdir)
    log = Path(run.log)
    faults.wait_for(lambda: log.exists() and '"event": "node"' in log.read_text(), 120,
                    "the run to reach its health gate", interval=0.05)
    pid = faults.controller_pid()
    os.kill(pid, signal.SIGTERM)
    faults.wait_for(lambda: faults.controller_pid() is None, 30, "slurmctld to stop")
    time.sleep(60)
    faults.start_controller()
    final = wait_campaign(cdir, 600)
    text = log.read_text()
    assert set(final.values()) == {Status.OK}, (final, text[-2000:])
    assert "the health gate waited" in text, "the outage did not meet the gate (timing): " + text[-2000:]


# ------------------------------------------------------------------------------------------ a center's limits


@gpu
def test_a_campaign_above_the_qos_limits_is_submitted_within_them_never_twice(tmp_path):
    """QOS ci-limited: 12 submitted jobs a user, 8 GPUs a user. A 3x4 cell (12 GPUs) is said to pend forever and
    skipped, at the dry run and at submit; 14 runs of 1x1 go in as 12 now and 2 later (the rest named, unsubmitted);
    a second `submit --wait` submits the 2 as room frees; every run OK once, each with its own job."""
    text = _tiny("qos", ["1x1", "3x4"], repeats=14, health=False, slurm='account = "ci-gpu"\n')
    (tmp_path / "qos.toml").write_text(text)
    logs = tmp_path / "logs"
    dry = cli("--logs", str(logs), "submit", str(tmp_path / "qos.toml"), "--executor", "slurm", "--no-site",
              "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert ("skipped resnet50.pytorch-ddp.3x4.b2.fp32.xla0 (14 runs): asks for 12 GPUs; QOS ci-limited allows a "
            "user 8 at once (MaxTRESPerUser): it would pend forever") in dry.stdout, dry.stdout
    assert "2 runs wait, unsubmitted: QOS ci-limited allows a user 12 submitted jobs at once" in dry.stdout, dry.stdout
    p, logs, cdir = _submit(tmp_path, text, wait=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "submitting 12 as" in p.stdout and "2 runs wait" in p.stdout, p.stdout
    runs = manifest.load_manifest(cdir)
    waiting = [r for r in runs if r.status == Status.UNSUBMITTED and "1x1" in r.key]
    assert len(waiting) == 2 and all("MaxSubmitJobsPerUser" in r.reason for r in waiting), waiting
    p = cli("--logs", str(logs), "submit", str(tmp_path / "qos.toml"), "--executor", "slurm", "--no-site", "--wait",
            timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    runs = manifest.load_manifest(cdir)
    ok = [r for r in runs if "1x1" in r.key]
    assert {r.status for r in ok} == {Status.OK} and len({r.job_id for r in ok}) == 14, [(r.key, r.status) for r in ok]
    assert {r.status for r in runs if "3x4" in r.key} == {Status.UNSUBMITTED}


@gpu
def test_a_partitions_limits_are_said_before_anything_is_submitted(tmp_path):
    """Partition debug (1 node, MaxTime 15 min): a 2-node cell and a 1-hour time are named, per cell, at `plan` and
    at `submit --dry-run`; nothing is submitted."""
    text = _tiny("part", ["1x1", "2x1"], slurm='partition = "debug"\n').replace('time = "00:05:00"',
                                                                                'time = "01:00:00"')
    (tmp_path / "part.toml").write_text(text)
    logs = tmp_path / "logs"
    for args in (["plan", "--wide"], ["submit", "--executor", "slurm", "--dry-run"]):  # --wide: a line a cell
        p = cli("--logs", str(logs), *args[:1], str(tmp_path / "part.toml"), *args[1:], "--no-site")
        assert p.returncode == 0, p.stdout + p.stderr
        assert ("resnet50.pytorch-ddp.1x1.b2.fp32.xla0: asks for time 01:00:00; partition debug's MaxTime is "
                "00:15:00") in p.stdout, (args, p.stdout)
        assert "resnet50.pytorch-ddp.2x1.b2.fp32.xla0: asks for 2 nodes; partition debug has 1" in p.stdout, p.stdout
    assert not (logs / "part" / "manifest.sqlite").exists()


# ------------------------------------------------------------------------------------------ a CPU-only Slurm


def _cpu_only() -> str | None:
    why = cluster_up()
    if why:
        return why
    p = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True)
    return None if "gpu" not in p.stdout else "the running test cluster has GPU GRES (its GPU mode)"


@pytest.mark.slurm
@pytest.mark.skipif(_cpu_only() is not None, reason=_cpu_only() or "")
def test_a_cpu_only_slurm_refuses_a_gpu_campaign_in_one_line_naming_the_remedy(tmp_path):
    """The smoke matrix as a user submits it, to the cluster without GRES: one line, exit 2, nothing submitted."""
    shutil.copy(REPO / "matrices" / "smoke.toml", tmp_path / "smoke.toml")
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(tmp_path / "smoke.toml"), "--executor", "slurm", "--no-site")
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and 'gpu_request = "none"' in lines[0] and "no GPU GRES" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not list(logs.rglob("*.sbatch"))
    assert os.environ.get("SLURM_JOB_ID") is None  # nothing of ours ran as a job here


# ------------------------------------------------------------------------------------------ site init


def _site_init(tmp_path: Path, *args: str):
    out = tmp_path / "site.toml"
    return cli("site", "init", "--out", str(out), *args), out


@gpu
def test_site_init_on_the_gpu_cluster_writes_what_the_cluster_said(tmp_path):
    """`site init` reads sinfo, scontrol and sacctmgr: both partitions with their nodes, GPUs a node and MaxTime
    (commented), the default partition and account, the GPU request form, a system per partition; the file loads
    (`plan --site`, `--system ci:debug`); a second init keeps it unless --force."""
    import tomllib

    p, out = _site_init(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    text = out.read_text()
    assert "#   gpu (default)      4 nodes, 4 GPUs a node, MaxTime none" in text, text
    assert "#   debug               1 node, 4 GPUs a node, MaxTime 00:15:00" in text, text
    assert "account ci-gpu QOS ci-limited" in text, text
    site = tomllib.loads(text)
    assert site["slurm"] == {"partition": "gpu", "account": "root", "gpu_request": "gpus-per-node",
                             "gpus_per_node": 4}, site
    assert site["systems"]["ci"]["gpus_per_node"] == 4
    assert site["systems"]["ci"]["partitions"]["debug"]["slurm"] == {"partition": "debug"}
    mx = REPO / "matrices" / "smoke.toml"
    dry = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--site", str(out), "--system", "ci:debug",
              "--executor", "slurm", "--dry-run")
    assert dry.returncode == 0 and "--partition=debug" in dry.stdout and "--account=root" in dry.stdout, dry.stdout
    again, _ = _site_init(tmp_path)
    assert again.returncode == 2 and "exists: it is kept as it is (--force" in again.stderr, again.stderr
    assert out.read_text() == text
    forced, _ = _site_init(tmp_path, "--force")
    assert forced.returncode == 0, forced.stderr


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.skipif(_cpu_only() is not None, reason=_cpu_only() or "")
def test_site_init_on_a_cpu_only_cluster_says_gpu_request_none_and_the_smoke_campaign_runs(tmp_path):
    """On the cluster without GRES, `site init` writes gpu_request = "none"; with that file the README's smoke
    matrix, refused without it, runs to OK."""
    import tomllib

    p, out = _site_init(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    site = tomllib.loads(out.read_text())
    assert site["slurm"]["gpu_request"] == "none" and site["slurm"]["partition"] == "debug", site
    assert "no GPU GRES" in out.read_text()
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(REPO / "matrices" / "smoke.toml"), "--site", str(out),
            "--executor", "slurm")
    assert p.returncode == 0, p.stdout + p.stderr
    final = wait_campaign(logs / "smoke", 600)
    assert set(final.values()) == {Status.OK}, final
