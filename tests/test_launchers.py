"""The launcher registry (dlperf_slurm/launchers.py) is the only list of launchers, and every launcher x container
kind either is dropped with a reason or renders a script that, run for real with bash, starts the training program
inside the container.

The scripts run against stand-ins first on PATH (tests/fixtures/launcher_stubs/stub.py): apptainer, srun,
scontrol, mpirun, horovodrun, torchrun, msrun, ``python -m {paddle,oneflow}.distributed.launch`` and ``python -u -m
deepspeed.launcher.runner`` record what they
were asked and then start what the real tool would. The training program (train_stub.py) records its rank and
whether it runs inside a container (the apptainer stub, and the srun stub given --container-image, say so in
INSIDE_CONTAINER).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlperf_slurm import launchers as registry
from dlperf_slurm.errors import MatrixError
from dlperf_slurm.matrix import loader
from dlperf_slurm.model import cell
from dlperf_slurm.submit import render
from dlperf_slurm.suites import Suite, registered

HERE = Path(__file__).resolve().parent
STUBS = HERE / "fixtures" / "launcher_stubs"
TRAIN = STUBS / "train_stub.py"
GOLDEN = HERE / "golden"
SIF = "/images/stub image.sif"  # a space: the image path must reach apptainer as one word
PYXIS_IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
WORD = "it's \"quoted\" $HOME"
INSIDE = {"none": None, "pyxis": f"pyxis:{PYXIS_IMAGE}", "apptainer": f"apptainer:{SIF}"}

#: The stub that stands for each launcher (None: the launcher is only a way of calling the program, plus srun
#: across nodes). A newly registered launcher fails here until it has a stub.
STUB_OF = {"srun": "srun", "mpirun": "mpirun", "horovodrun": "horovodrun", "torchrun": "torchrun",
           "paddle": "paddle.distributed.launch", "oneflow": "oneflow.distributed.launch", "tf_config": None,
           "msrun": "msrun", "mp_spawn": None, "deepspeed": "deepspeed.launcher.runner", "node_ips": None,
           "dmlc": None}
#: Stubs that fork ``python3 <script>`` per local rank: their target must be the program itself.
FORKING = {"torchrun", "paddle.distributed.launch", "oneflow.distributed.launch", "msrun",
           "deepspeed.launcher.runner"}
#: Training processes per node (one per GPU, except a TF multi-worker and an MXNet dmlc worker: one per node).
PROCS_PER_NODE = {"tf_config": 1, "mp_spawn": 1, "node_ips": 1, "dmlc": 1}
#: Launchers that tell the program its place by arguments after its own (mp_spawn: main.py's --world-size <nodes>
#: --rank <node rank> --dist-url tcp://<first host>:<port>; the program spawns its GPUs' ranks itself).
RANK_ARGS = {"mp_spawn": lambda cell, rank: ["--world-size", str(cell.nodes), "--rank", str(rank), "--dist-url",
                                             "tcp://"]}


class _StubSuite(Suite):
    """A test-only suite that accepts every registered launcher and runs train_stub.py."""

    framework = "test-stub"
    model = "train"
    launcher = "srun"
    precisions = ("fp32",)
    options = {"word": WORD}

    @property
    def launchers(self):  # read at call time: a launcher registered by a test is accepted too
        return registry.names()

    def program(self, cell, measure, options):
        return ["python3", str(TRAIN), "--batch", str(cell.batch_size), "--word", options["word"]]


@pytest.fixture(autouse=True, scope="module")
def _stub_suite():
    with registered(_StubSuite):
        yield


def _container_table(kind: str, image: str | None = None, mounts=None) -> str:
    if kind == "none":
        return ""
    image = image or (SIF if kind == "apptainer" else PYXIS_IMAGE)
    mounts = mounts or (["/data"] if kind == "apptainer" else ["/data:/data"])
    return (f"[environment.container]\ntype = {json.dumps(kind)}\nimage = {json.dumps(image)}\n"
            f"mounts = {json.dumps(mounts)}\n")


def _load(tmp_path: Path, launchers, kind: str = "none", devices: str = "1x2", **container) -> cell.Matrix:
    text = textwrap.dedent(f"""\
        suite = "test-stub/train"
        name = "stub"
        [axes]
        devices = ["{devices}"]
        batch_size = [4]
        launcher = {json.dumps(list(launchers))}
        [measure]
        repeats = 1
        warmup_steps = 1
        measure_steps = 1
        [health]
        enabled = false  # the launchers are tested here (the gate, with its own srun step, in test_health.py)
        """) + _container_table(kind, **container)
    p = tmp_path / "m.toml"
    p.write_text(text)
    return loader.load(p, site=False)


@pytest.fixture(scope="module")
def stub_bin(tmp_path_factory) -> Path:
    """A folder of wrappers, one per stubbed tool, each exec'ing stub.py with its name."""
    bindir = tmp_path_factory.mktemp("stubbin")
    stub = f'"{sys.executable}" "{STUBS / "stub.py"}"'
    for name in ("apptainer", "srun", "scontrol", "getent", "mpirun", "horovodrun", "torchrun", "msrun", "python",
                 "python3"):
        body = f'exec {stub} {name} "$@"'
        if name.startswith("python"):  # the real interpreter, but for the two launcher modules
            body = (f'case "$1 ${{2:-}} ${{3:-}}" in "-m paddle.distributed.launch "*|"-m oneflow.distributed.launch "*'
                    f'|"-u -m deepspeed.launcher.runner") {body};; esac\nexec "{sys.executable}" "$@"')
        wrapper = bindir / name
        wrapper.write_text(f"#!/bin/sh\n{body}\n")
        wrapper.chmod(0o755)
    return bindir


def _run_script(tmp_path: Path, m: cell.Matrix, stub_bin: Path, slurm: bool):
    """Render the matrix's one run and run it with bash, under a stub Slurm allocation or on a plain shell;
    returns (exit status, the stubs' records, the run's log)."""
    [run] = loader.runs(m, tmp_path / ("slurm" if slurm else "local"))
    [script] = render.write_scripts(m, [run])
    log = tmp_path / f"stubs-{'slurm' if slurm else 'local'}.jsonl"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "MASTER_", "INSIDE_CONTAINER", "TF_CONFIG", "RANK", "STUB_"))}
    env.update(PATH=f"{stub_bin}{os.pathsep}{env['PATH']}", STUB_LOG=str(log))
    if slurm:
        hosts = [f"node{i + 1}" for i in range(run.cell.nodes)]
        env.update(SLURM_JOB_ID="4242", SLURM_JOB_NODELIST=f"node[1-{run.cell.nodes}]", STUB_HOSTS=" ".join(hosts))
    r = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return r.returncode, records, run.log.read_text() if run.log.exists() else r.stderr


def _assert_program_ran_inside(records, launcher: str, kind: str, cell, log: str) -> None:
    log = "\n".join(l for l in log.splitlines() if not l.startswith(':::DLPERF {"event": "job"'))  # not the env
    where = f"{launcher} x {kind} {cell.shape}\n{log}\n{json.dumps(records, indent=1)}"
    programs = [r for r in records if r["stub"] == "program"]
    per_node = PROCS_PER_NODE.get(launcher, cell.gpus_per_node)
    assert sorted(p["rank"] for p in programs) == list(range(cell.nodes * per_node)), where
    own = ["--batch", "4", "--word", WORD]
    if launcher in RANK_ARGS:
        for p in programs:
            want = own + RANK_ARGS[launcher](cell, p["rank"])
            assert p["argv"][:-1] == want[:-1] and p["argv"][-1].startswith(want[-1]), where
            assert re.fullmatch(r"tcp://[\w.-]+:\d+", p["argv"][-1]), where
        # one rendezvous for every node: the allocation's first host (the stub allocation's node1)
        assert len({p["argv"][-1] for p in programs}) == 1, where
        if cell.nodes > 1:
            assert programs[0]["argv"][-1].startswith("tcp://node1:"), where
    elif launcher == "node_ips":  # every node's IPv4 address in node-list order (the stub getent's 10.0.0.<k>), and
        # the job's port; a lone node started from the batch shell gets the loopback address (it never reads it)
        for p in programs:
            assert p["argv"][:-2] == own and re.fullmatch(r"--ctrl_port=\d+", p["argv"][-1]), where
            ips = p["argv"][-2].removeprefix("--node_ips=").split(",")
            assert ips in (["127.0.0.1"], [f"10.0.0.{k + 1}" for k in range(cell.nodes)]), where
            assert len(ips) == cell.nodes, where
    else:
        assert all(p["argv"] == own for p in programs), where
    assert all(p["inside"] == INSIDE[kind] for p in programs), f"the program ran outside the container: {where}"
    stub = STUB_OF[launcher]
    if stub:
        mine = [r for r in records if r["stub"] == stub]
        assert mine, f"the {stub} stub was never called: {where}"
        if stub in FORKING:  # started in the program's own place, and given the program (not apptainer) to run
            assert all(r["target"] == str(TRAIN) for r in mine), where
            assert all(r["inside"] == INSIDE[kind] for r in mine), where
        else:  # per-rank launchers run on the host and start one container (or srun task) per rank
            assert all(r["inside"] is None for r in mine), where
    calls = [r for r in records if r["stub"] == "apptainer"]
    assert bool(calls) == (kind == "apptainer"), where
    assert all(r["image"] == SIF for r in calls), where
    pyxis = [r for r in records if r["stub"] == "srun" and r["container_image"]]
    assert bool(pyxis) == (kind == "pyxis"), where
    assert all(r["container_image"] == PYXIS_IMAGE and r["container_mounts"] == "/data:/data" for r in pyxis), where


# ------------------------------------------------------------------------------------------ the one list


def test_matrix_accepts_exactly_the_registry_names(tmp_path, monkeypatch):
    assert not hasattr(loader, "LAUNCHERS") and not hasattr(render, "LAUNCHERS")
    for name in registry.names():
        m = _load(tmp_path, [name])
        assert [c.launcher for c in m.cells] == [name]
    with pytest.raises(MatrixError) as err:
        _load(tmp_path, ["mpiexec"])
    listed = re.search(r"expected one of (.*), got 'mpiexec'", str(err.value)).group(1).split(", ")
    assert listed == list(registry.names())
    # a launcher registered later is accepted at once: matrix validation reads the registry, not a copy
    fake = registry.Launcher("fakerun", "per_gpu", srun_across_nodes=False, local=True,
                             containers={"none": registry.Entry.HOST,
                                         "pyxis": registry.Drop("fakerun cannot enter pyxis"),
                                         "apptainer": registry.Entry.WRAP_PROGRAM})
    monkeypatch.setitem(registry._REGISTRY, "fakerun", fake)
    assert [c.launcher for c in _load(tmp_path, ["fakerun"]).cells] == ["fakerun"]
    m = _load(tmp_path, ["fakerun", "srun"], kind="pyxis")
    assert [(d.cell.launcher, d.reason) for d in m.dropped] == [("fakerun", "fakerun cannot enter pyxis")]


def test_every_launcher_has_a_template_and_a_golden_file():
    templates = render.builtin_template_dir()
    golden = {p.read_text().split("# launch (")[1].split(")")[0] for p in GOLDEN.glob("*.sbatch")}
    for name in registry.names():
        assert (templates / registry.get(name).template).is_file(), name
        assert name in golden, f"no golden script of launcher {name} in {GOLDEN}"


def test_a_launcher_must_say_how_it_enters_every_container_kind():
    with pytest.raises(ValueError, match="each of"):
        registry.Launcher("x", "per_gpu", False, True, containers={"none": registry.Entry.HOST})
    with pytest.raises(ValueError, match="apptainer container is entered by"):
        registry.Launcher("x", "per_gpu", False, True, containers={
            "none": registry.Entry.HOST, "pyxis": registry.Entry.SRUN, "apptainer": registry.Entry.SRUN})
    with pytest.raises(RuntimeError, match="twice"):
        registry.register(registry.get("srun"))


def test_tasks_per_node_come_from_the_registry(tmp_path):
    for name in registry.names():
        m = _load(tmp_path, [name], devices="2x4")
        [run] = loader.runs(m, tmp_path)
        want = 4 if registry.get(name).tasks == "per_gpu" else 1
        assert render.run_resources(m, run).tasks_per_node == want, name


# --------------------------------------------------------------- every launcher x container kind, for real


@pytest.mark.parametrize("devices", ["1x2", "2x2"])
@pytest.mark.parametrize("kind", registry.CONTAINER_KINDS)
@pytest.mark.parametrize("launcher", registry.names())
def test_launcher_in_container_runs_the_program_inside_or_is_dropped(launcher, kind, devices, tmp_path, stub_bin):
    reason = registry.container_reason(launcher, kind)
    if reason:  # with one more launcher that can run, so that the matrix keeps a cell (as `plan` shows it)
        m = _load(tmp_path, [launcher, "srun"], kind=kind, devices=devices)
        assert [(d.cell.launcher, d.reason) for d in m.dropped] == [(launcher, reason)]
        assert kind in reason and [c.launcher for c in m.cells] == ["srun"]
        return
    m = _load(tmp_path, [launcher], kind=kind, devices=devices)
    assert not m.dropped
    [cell] = m.cells

    rc, records, log = _run_script(tmp_path, m, stub_bin, slurm=True)
    assert rc == 0, log
    _assert_program_ran_inside(records, launcher, kind, cell, log)

    # the local executor's verdict, checked both ways on a plain shell (no allocation; the srun stub refuses)
    local_reason = registry.local_skip_reason(cell, kind)
    if cell.nodes > 1:
        assert local_reason and f"needs {cell.nodes} nodes" in local_reason
        return
    rc, records, log = _run_script(tmp_path, m, stub_bin, slurm=False)
    if local_reason is None:
        assert rc == 0, log
        _assert_program_ran_inside(records, launcher, kind, cell, log)
    else:
        assert rc != 0 and "not inside a Slurm allocation" in log, (local_reason, log)


@pytest.mark.parametrize("launcher", ["torchrun", "paddle", "mpirun"])
def test_hostile_container_values_stay_inert(launcher, tmp_path, stub_bin):
    """The apptainer words (image, binds) reach apptainer as literal words, whether they wrap the launcher or the
    program: they pass through the one quoting filter."""
    pwned = tmp_path / "pwned"
    image = f"/img/$(touch {pwned})'; touch {pwned}; '.sif"
    mount = f"/data`touch {pwned}`"
    m = _load(tmp_path, [launcher], kind="apptainer", devices="1x1", image=image, mounts=[mount])
    rc, records, log = _run_script(tmp_path, m, stub_bin, slurm=True)
    assert rc == 0, log
    assert not pwned.exists(), "a hostile container value was executed"
    calls = [r for r in records if r["stub"] == "apptainer"]
    # the health gate's probe and the provenance node step enter the image too (apptainer exec ... python3 -m
    # dlperf_slurm.probes.health; apptainer exec ... /bin/sh -c <probe>): same words
    [call] = [r for r in calls if "dlperf_slurm.probes.health" not in r["argv"] and r["target"] != "/bin/sh"]
    assert call["image"] == image and call["argv"][:4] == ["exec", "--nv", "--bind", mount]
    assert all(r["image"] == image and mount in r["argv"] for r in calls)


@pytest.mark.parametrize("kind", ["none", "pyxis", "apptainer"])
def test_provenance_node_step_runs_on_every_node_inside_the_container(kind, tmp_path, stub_bin):
    """The provenance node step goes the program's way: one srun task per node of a 2-node cell (each task's node
    name from slurmd's SLURMD_NODENAME), through the same container entry (pyxis: srun --container-image; apptainer:
    apptainer exec IMAGE), and prints one node event per node, naming the container the job entered."""
    from dlperf_slurm import events as ev

    m = _load(tmp_path, ["torchrun"], kind=kind, devices="2x1")
    rc, records, log = _run_script(tmp_path, m, stub_bin, slurm=True)
    assert rc == 0, log
    nodes = [e for line in log.splitlines() if (e := ev.parse_event(line)) and e[ev.EVENT] == ev.EV_NODE]
    assert sorted(n[ev.HOSTNAME] for n in nodes) == ["node1", "node2"], log
    want = None if kind == "none" else {"runtime": kind, "image": SIF if kind == "apptainer" else PYXIS_IMAGE,
                                        "digest": None}
    assert all(n[ev.CONTAINER] == want for n in nodes), nodes
    assert all(n[ev.PROGRAM] == {"path": str(TRAIN), "git": n[ev.PROGRAM]["git"],
                                 "describe": n[ev.PROGRAM]["describe"]} for n in nodes)
    probe = [r for r in records if r["stub"] == "srun" and "--kill-on-bad-exit=0" in r["argv"]]  # not the launch's
    assert len(probe) == 1 and probe[0]["container_image"] == (PYXIS_IMAGE if kind == "pyxis" else None), records
    entered = [r for r in records if r["stub"] == "apptainer" and r["target"] == "/bin/sh"]
    assert len(entered) == (2 if kind == "apptainer" else 0), records


def test_a_node_that_cannot_import_the_framework_ends_the_run_before_the_launch(tmp_path, stub_bin, monkeypatch):
    """The suite's framework does not import where the program runs: the provenance node step (one srun task per
    node) says so on every node, naming the node, the interpreter and the import error, and the run ends before
    its launch: LAUNCH_FAILED with the first node's line as its reason."""
    from dlperf_slurm import events as ev
    from dlperf_slurm.model.status import Status
    from dlperf_slurm.outcome.evidence import read_log

    monkeypatch.setattr(_StubSuite, "imports", ("dlperf_no_such_framework",))
    m = _load(tmp_path, ["torchrun"], devices="2x1")
    rc, records, log = _run_script(tmp_path, m, stub_bin, slurm=True)
    assert rc == 4, log
    assert not [r for r in records if r["stub"] == "torchrun"], records  # never launched
    errors = [e[ev.MESSAGE] for line in log.splitlines() if (e := ev.parse_event(line)) and e[ev.EVENT] == ev.EV_ERROR]
    want = "cannot import dlperf_no_such_framework with python3 ({}): ModuleNotFoundError: No module named " \
           "'dlperf_no_such_framework'"
    for node in ("node1", "node2"):
        assert any(e.startswith(f"set-up failed: on node {node}, ") and e.endswith(want.format(e.split("(")[1]
                                                                                            .split(")")[0]))
                   for e in errors), errors
    [run] = loader.runs(m, tmp_path / "slurm")
    import dataclasses

    # the stub suite has no parser: the log read as the built-in workload's parser reads it (set-up errors alike)
    result = read_log(dataclasses.replace(run.cell, suite="pytorch-ddp/resnet50"), run.log, warmup_steps=1,
                      measure_steps=1)
    assert result.status is Status.LAUNCH_FAILED and "set-up failed: on node node" in result.reason, result
    assert "cannot import dlperf_no_such_framework with python3 (" in result.reason, result.reason
