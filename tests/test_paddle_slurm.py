"""A real 2-node launch of the ``paddle/resnet50`` suite on the Slurm test cluster: the suite's rendered launch
(python -m paddle.distributed.launch on n1 and n2, rendezvous from the allocation's node list) with its entry
script swapped for a tiny genuine Paddle data-parallel program (tests/frameworks/paddle/tiny_train.py) that prints
train.py's step lines; the job is submitted through the CLI and read back by ``collect``.

Needs the test cluster (tests/slurm/start.sh 2) and the paddle venv (``python tests/frameworks/venvs.py paddle``);
skipped with the reason otherwise. About a minute.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("paddle")

MATRIX = """suite = "paddle/resnet50"
name = "paddle-2x1"
[axes]
devices = ["2x1"]
batch_size = [2]
[options]
python = "{python}"
workdir = "{workdir}"
script = "tiny_train.py"
[measure]
repeats = 1
warmup_steps = 2
measure_steps = 6
[slurm]
time = "00:04:00"
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "1"
GLOO_SOCKET_IFNAME = "lo"
"""


def test_paddle_resnet50_2x1_spans_n1_and_n2_and_collect_reads_it(tmp_path):
    # the shell's credential (conftest's SHELL_SECRET, checked in every file of the test after it): the launcher
    # writes its environment into <log_dir>/<job>.<pod>.log and each rank's into envlog.<rank> and
    # backup_env.<rank>.json (before: all three kept it, in a folder of mode 755)
    logs, (run,) = submit_and_wait(tmp_path, MATRIX.format(python=_py, workdir=HERE / "frameworks" / "paddle"), 240)
    text = run.log.read_text()
    assert run.status == Status.OK, text[-4000:]
    assert run.nodes == "n[1-2]"
    # every rank joined one job: each node's launcher echoes its first rank, srun labels it with the node number
    joined = {int(label): (int(r), int(w), int(s)) for label, r, w, s in re.findall(
        r"^(\d+): dlperf-test: trainer (\d+) of (\d+) on \S+: all_reduce\(1\) = (\d+)$", text, re.M)}
    assert joined == {0: (0, 2, 2), 1: (1, 2, 2)}, text[-4000:]
    # every rank's own file, per node, where the launcher wrote it
    workerlogs = sorted(Path(f"{run.log}.workerlogs").glob("node*/workerlog.*"))
    assert [w.relative_to(f"{run.log}.workerlogs").as_posix() for w in workerlogs] == \
        ["node0/workerlog.0", "node1/workerlog.0"]
    assert "[Pass 0, train batch 7]" in text and "1: INFO:utils.utility:[Pass" not in text  # trainer 0 only
    folder = Path(f"{run.log}.workerlogs")
    assert folder.stat().st_mode & 0o777 == 0o700
    pods = sorted(folder.glob("node*/*.log"))
    assert len(pods) == 2 and all(p.read_text().startswith("(the environment paddle.distributed.launch wrote here "
                                                             "was removed") for p in pods), pods
    assert not list(folder.rglob("envlog.*")) and not list(folder.rglob("backup_env.*"))
    (cell,) = collect_summary(logs, "paddle-2x1")["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1 and cell["median"] > 0, cell
    assert cell["published"] == "speed" and cell["median"] == cell["median_speed"], cell
