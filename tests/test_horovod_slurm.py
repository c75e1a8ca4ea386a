"""Real 2-node Horovod launches of the ``ngc-tf1/resnet50`` suite on the Slurm test cluster, under each of its
launchers: ``horovodrun``, ``mpirun`` and ``srun --mpi=pmix``. TensorFlow 1 cannot be installed here, so the cell's
entry script is swapped for a tiny genuine Horovod program (tests/frameworks/horovod/main.py: Horovod 0.28.1 for
PyTorch, ``hvd.DistributedOptimizer``, main.py's flags and its dllogger lines); the suite's rendered launch, flags
and window are the real ones. Each campaign is submitted through the CLI, every rank must have joined one world of
two (rank 0 on n1, rank 1 on n2, a real allreduce across them) and ``collect`` must read a figure.

Needs the test cluster (tests/slurm/start.sh 2) and the horovod venv (``python tests/frameworks/venvs.py horovod``,
about four minutes: torch and a patched Horovod sdist compiled); skipped with the reason otherwise. About a minute.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import cli, framework_on_cluster, wait_campaign  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("horovod")

MATRIX = """suite = "ngc-tf1/resnet50"
name = "{name}"
[axes]
devices = ["2x1"]
batch_size = [2]
launcher = ["{launcher}"]
launcher_args = {args}
[options]
python = "{python}"
workdir = "{workdir}"
dle = "master"
[measure]
repeats = 1
warmup_steps = 2
measure_steps = 6
[slurm]
time = "00:05:00"
gpu_request = "none"
[environment]
setup = ["export PATH={bindir}:$PATH"]
[environment.env]
OMP_NUM_THREADS = "1"
OMPI_ALLOW_RUN_AS_ROOT = "1"
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = "1"
OMPI_MCA_btl = "self,tcp"
OMPI_MCA_btl_tcp_if_include = "lo"
OMPI_MCA_oob_tcp_if_include = "lo"
PYTHONPATH = "{standin}"
"""

LAUNCHES = {"horovodrun": [], "mpirun": [], "srun": ["--mpi=pmix"]}


def _pmix() -> str | None:
    """Why ``srun --mpi=pmix`` cannot run here (None: the cluster's Slurm has the pmix plugin)."""
    p = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True)
    return None if "pmix" in p.stdout + p.stderr else f"this Slurm has no pmix MPI plugin: {p.stdout + p.stderr}"


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """Every launch submitted at once (the cluster runs them side by side); each test waits for its own."""
    root = tmp_path_factory.mktemp("horovod")
    logs = root / "logs"
    # the job's import check asks the program's interpreter for the suite's framework, tensorflow: TF1 cannot be
    # installed here and the entry script is a PyTorch Horovod program, so a stand-in package answers the check
    standin = root / "standin"
    (standin / "tensorflow").mkdir(parents=True)
    (standin / "tensorflow" / "__init__.py").write_text("# a stand-in: this test's program is PyTorch Horovod\n")
    out = {"logs": logs, "root": root}
    for launcher, args in LAUNCHES.items():
        if launcher == "srun" and _pmix():
            continue
        mx = root / f"{launcher}.toml"
        mx.write_text(MATRIX.format(name=f"hvd-{launcher}", launcher=launcher, args=json.dumps([args]),
                                    python=_py, workdir=HERE / "frameworks" / "horovod", bindir=Path(_py).parent,
                                    standin=standin))
        out[launcher] = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site")
    return out


@pytest.mark.parametrize("launcher", sorted(LAUNCHES))
def test_ngc_tf1_resnet50_2x1_one_horovod_world_over_n1_and_n2(campaigns, launcher):
    if launcher == "srun" and _pmix():
        pytest.skip(_pmix())
    p = campaigns[launcher]
    assert p.returncode == 0, p.stdout + p.stderr
    logs, name = campaigns["logs"], f"hvd-{launcher}"
    wait_campaign(logs / name, 300)
    (run,) = manifest.load_manifest(logs / name)
    text = run.log.read_text()
    assert run.status == Status.OK, (run.reason, text[-4000:])
    assert run.nodes == "n[1-2]"
    # one world of two: each rank says who it is, where, and what the allreduce of rank+1 over the world gave
    joined = {(int(r), int(s), node, total) for r, s, node, total in re.findall(
        r"dlperf-test: horovod rank (\d+) of (\d+) \(local rank 0\) on (\S+): allreduce\(rank\+1\) = (\d+)", text,
        re.M)}
    assert joined == {(0, 2, "n1", "3"), (1, 2, "n2", "3")}, text[-4000:]
    # the suite's real flags reached the program, and rank 0's dllogger lines came back (horovodrun tags them)
    # (OpenMPI's --tag-output, under horovodrun, may end a record with an empty tagged chunk: "... : 58.88 [1,0]<stdout>:")
    steps = re.findall(r"^(?:\[\d+,0\]<stdout>:)?DLL \S+ \S+ - \(0, (\d+)\) total_ips : \d\S* ", text, re.M)
    assert [int(s) for s in steps] == list(range(1, 8)), text[-4000:]  # --warmup_steps=1 --num_iter=8
    if launcher == "horovodrun":
        assert "[1,0]<stdout>:DLL " in text
    res = manifest.load_manifest(logs / name)[0]
    assert res.status == Status.OK
    out = campaigns["root"] / "summaries"
    p = cli("--logs", str(logs), "collect", name, "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    (cell,) = json.loads((out / f"{name}.json").read_text())["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1 and cell["median"] > 0, cell
    assert cell["published"] == "speed" and cell["median"] == cell["median_speed"], cell
