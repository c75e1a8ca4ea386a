"""A new scheduler is one module: a toy backend, defined and registered here only, carries a small campaign
through plan -> submit -> status -> collect with no change to the package.

The toy runs each group's scripts one after another inside ``submit`` (its "queue" is a JSON file of exit codes)
and writes its own preamble, so the test also shows that what the scheduler writes is what the script carries."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Iterable

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm import cli as cli_mod  # noqa: E402
from dlperf_slurm import schedulers  # noqa: E402
from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.result import JobInfo  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402
from dlperf_slurm.schedulers.base import Group, Resources, Scheduler  # noqa: E402


class ToyScheduler(Scheduler):
    name = "toy"
    group_word = ("toy batch", "toy batches")
    call_word = ("toy call", "toy calls")
    submit_command = "toy-run"

    @property
    def _queue(self) -> Path:
        return self.campaign_dir / ".toy" / "queue.json"

    def _load(self) -> dict[str, int]:
        return json.loads(self._queue.read_text()) if self._queue.exists() else {}

    def preamble(self, res: Resources) -> list[str]:
        return [f"# TOY nodes={res.nodes} tasks-per-node={res.tasks_per_node} time={res.time}"]

    def output_path(self, token: str, index: int, size: int) -> str:
        return str(self.campaign_dir / ".toy" / f"{token}_{index}.out")

    def describe(self, group: Group) -> str:
        return f"toy: {group.size} scripts in a row"

    def submit(self, group: Group) -> list[str]:
        self.count(self.submit_command)
        queue, ids = self._load(), []
        for i, run in enumerate(group.runs):
            out = Path(group.outputs[i])
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "w") as f:
                rc = subprocess.run(["bash", str(run.script)], stdout=f, stderr=subprocess.STDOUT).returncode
            jid = f"toy-{group.token}-{i}"
            queue[jid] = rc
            ids.append(jid)
        self._queue.write_text(json.dumps(queue))
        return ids

    def cancel(self, job_ids: Iterable[str]) -> None:
        """Every toy job has ended by the time submit returns: nothing to cancel."""

    def query(self, job_ids: Iterable[str], since: float | None = None) -> dict[str, JobInfo]:
        queue = self._load()
        return {j: JobInfo(job_id=j, status=Status.OK if queue[j] == 0 else Status.FAILED,
                           state="DONE" if queue[j] == 0 else "ERROR", exit_code=queue[j], source="toy")
                for j in job_ids if j in queue}


@pytest.fixture
def toy():
    schedulers.register(ToyScheduler)
    yield ToyScheduler
    schedulers.unregister("toy")


def test_a_toy_backend_runs_a_campaign_end_to_end(tmp_path, toy, capsys):
    mx = write_matrix(tmp_path, name="toy", modes=("ok", "fail"), repeats=2)
    logs = tmp_path / "logs"
    rc = cli_mod.main(["--logs", str(logs), "submit", str(mx), "--executor", "toy", "--templates", str(TEMPLATES)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "submitted 4 runs with 1 toy call" in out and "as toy-" in out  # its words, its job ids

    info = manifest.load_campaign(logs / "toy")
    assert {r.executor for r in info.runs} == {"toy"}
    for r in info.runs:  # the preamble is the toy's, written from the neutral resources
        assert r.script.read_text().splitlines()[1] == "# TOY nodes=1 tasks-per-node=1 time=00:10:00"
        assert "#SBATCH" not in r.script.read_text()

    rc = cli_mod.main(["--logs", str(logs), "status", "toy"])
    out = capsys.readouterr().out
    got = {r.key.split("MODE-")[1]: r for r in manifest.load_manifest(logs / "toy")}
    assert {k: r.status for k, r in got.items()} == {"ok.r0": Status.OK, "ok.r1": Status.OK,
                                                     "fail.r0": Status.FAILED, "fail.r1": Status.FAILED}, out
    assert got["fail.r0"].exit_code == 3 and got["fail.r0"].reason.startswith("exit code 3")

    # collect (another process: it needs no scheduler, only the manifest and the logs)
    p = cli("--logs", str(logs), "collect", "toy", "--no-plots", "--out", str(tmp_path / "summaries"))
    assert p.returncode == 0, p.stdout + p.stderr
    cells = list(csv.DictReader(open(next((tmp_path / "summaries").glob("*.csv")))))
    by_mode = {c["cell_id"].split("MODE-")[1]: c for c in cells}
    assert by_mode["ok"]["status"] == Status.OK and float(by_mode["ok"]["median"]) > 0
    assert by_mode["fail"]["status"] == Status.FAILED and not by_mode["fail"]["median"]

    # and submit again: nothing missing, the toy is not called
    rc = cli_mod.main(["--logs", str(logs), "submit", str(mx), "--executor", "toy", "--templates", str(TEMPLATES)])
    out = capsys.readouterr().out
    assert rc == 0 and "nothing to submit" in out


def test_an_unregistered_backend_is_a_clear_error(tmp_path, capsys):
    mx = write_matrix(tmp_path, name="nt")
    rc = cli_mod.main(["--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "toy"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown executor 'toy'" in err
