"""The genuine TF2 DLPerf programs on the real Slurm test cluster, through the project's CLI: TF Model Garden's
``official.legacy.image_classification.classifier_trainer`` (ResNet-50, synthetic data) and
``official.legacy.bert.run_pretraining`` (BERT, a tiny generated data set), each on 1x1 and on 2x1 (two workers,
MultiWorkerMirroredStrategy, TF_CONFIG built by the tf_config launcher from the allocation), then ``collect``.

2-worker BERT needs one input file per worker at least: with one file worker 1 gets no data shard and both die at
the first step (``Collective instance 274 expected type 0 and data_type 1 but got type 0 and data_type 9``, the
failure /work/shared/upstream-on-cpu.md reports); the generated data set has two shards, and 2x1 BERT runs.

Needs the cluster (tests/slurm/start.sh) and the TF venv (``python tests/frameworks/venvs.py tf2``); skipped,
with the reason, without either. Every campaign is submitted up front so the cluster runs them side by side.
Tiny shapes: ResNet-50 at batch 2 for 8 steps, a 2-layer BERT at batch 4 for 12 steps (each run 15-60 s here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, cli, framework_on_cluster, wait_campaign  # noqa: E402

from dlperf_slurm.campaign import (
    manifest,
    records,  # noqa: E402
)
from dlperf_slurm.model.status import Status  # noqa: E402

PY, pytestmark = framework_on_cluster("tf2")

RN50 = """suite = "tf2/resnet50"
name = "{name}"
[axes]
devices = {devices}
batch_size = [2]
[options]
python = "{python}"
builder = "synthetic"
data_dir = "/nonexistent"  # the trainer requires the flag; the synthetic builder never reads it
num_gpus = 0
[measure]
repeats = 1
warmup_steps = 2
measure_steps = 6
[slurm]
time = "00:06:00"
gpu_request = "none"
"""

BERT = """suite = "tf2/bert-base"
name = "{name}"
[axes]
devices = {devices}
batch_size = [4]
[options]
python = "{python}"
input_files = "{data}/*.tfrecord"
bert_config_file = "{data}/bert_config.json"
num_gpus = 0
all_reduce_alg = ""  # TF's choice on CPU workers (DLPerf: nccl)
[measure]
repeats = 1
warmup_steps = 4
measure_steps = 8
[slurm]
time = "00:06:00"
gpu_request = "none"
"""

TIMEHISTORY = re.compile(r"^I\d{4} [\d:.]+ +(\d+) keras_utils\.py:\d+\] TimeHistory: [\d.]+ seconds, "
                         r"[\d.]+ examples/second between steps (\d+) and (\d+)$", re.M)
TRAINSTEP = re.compile(r"^I\d{4} [\d:.]+ +(\d+) model_training_utils\.py:\d+\] Train Step: (\d+)/(\d+)  / loss = ",
                       re.M)
MWMS = re.compile(r"MultiWorkerMirroredStrategy with cluster_spec = \{'worker': \['(n1):(\d+)', '(n2):(\d+)'\]\}, "
                  r"task_type = 'worker', task_id = (\d), num_workers = 2")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("tf2")
    logs = root / "logs"
    data = root / "bert-data"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([str(PY), "-m", "dlperf_slurm.workloads.tf2_bert_data", str(data), "--shards", "2"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out = {"root": root, "logs": logs}
    for name, text, devices in (("tf2-rn50", RN50, '["1x1", "2x1"]'), ("tf2-bert", BERT, '["1x1", "2x1"]'),
                                ("tf2-bert-again", BERT, '["1x1"]')):
        mx = root / f"{name}.toml"
        mx.write_text(text.format(name=name, devices=devices, python=PY, data=data))
        out[name] = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site")
        out[f"{name}.toml"] = mx
    return out


def _wait(cdir: Path, timeout: float = 420) -> dict[str, str]:
    return wait_campaign(cdir, timeout)


def _ended_ok(site, name: str) -> dict[str, records.RunRecord]:
    p = site[name]
    assert p.returncode == 0, p.stdout + p.stderr
    st = _wait(site["logs"] / name)
    runs = {r.cell.shape: r for r in manifest.load_manifest(site["logs"] / name)}
    logs = {shape: r.log.read_text(errors="replace") for shape, r in runs.items()}
    assert set(st.values()) == {Status.OK}, (st, {s: t[-3000:] for s, t in logs.items()})
    return runs


def _collect(site, name: str) -> dict[str, dict]:
    out = site["root"] / "summaries"
    p = cli("--logs", str(site["logs"]), "collect", name, "--out", str(out), "--no-plots", "--quiet")
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((out / f"{name}.json").read_text())
    return {r["shape"]: r for r in doc["runs"]}


def _work_dir(run: records.RunRecord) -> Path:
    """The run's own folder (``Run.work_dir``: beside its log, ``<run>.work``)."""
    return run.log.with_name(run.log.name[:-len(".log")] + ".work")


def _steps_task(job_id: str) -> list[str] | None:
    """``NTasks|NodeList`` of the job's srun step 0 as sacct saw it (None: no accounting here)."""
    if not shutil.which("sacct"):
        return None
    p = subprocess.run(["sacct", "-j", job_id, "-P", "-n", "--format=JobID,NTasks,NodeList"], capture_output=True,
                       text=True)
    rows = [line.split("|") for line in p.stdout.splitlines()]
    return next((r[1:] for r in rows if r[0] == f"{job_id}.0"), None)


def _two_workers_joined(run, log: str) -> None:
    """Both workers of a 2x1 run: TF_CONFIG named two workers, on n1 and n2 (one port each), and each worker
    built its strategy with its own task index."""
    joined = MWMS.findall(log)
    assert {j[4] for j in joined} == {"0", "1"}, log[-3000:]
    assert all(j[1] != j[3] for j in joined)  # two ports: both workers may sit on one host here
    steps = _steps_task(run.job_id)
    if steps is not None:
        assert steps == ["2", "n[1-2]"], steps  # srun's step: one task on each node


def test_resnet50_genuine_classifier_trainer_on_1x1_and_2x1(site):
    runs = _ended_ok(site, "tf2-rn50")
    rows = _collect(site, "tf2-rn50")
    for shape, run in runs.items():
        log = run.log.read_text(errors="replace")
        assert "-m official.legacy.image_classification.classifier_trainer" in log  # the job event's command
        lines = TIMEHISTORY.findall(log)
        workers = {tid for tid, _, _ in lines}
        assert len(workers) == run.cell.nodes, lines
        for tid in workers:  # every worker logged the whole run, every 2 steps (gcd of the 2 + 6 window)
            assert [(int(a), int(b)) for t, a, b in lines if t == tid] == [(0, 2), (2, 4), (4, 6), (6, 8)]
        assert f"Global batch size: {2 * run.cell.nodes}" in log
        assert (_work_dir(run) / "model" / "params.yaml").is_file()  # its own model dir, in its run folder
        row = rows[shape]
        assert row["status"] == Status.OK and row["throughput"] > 0 and row["throughput_time"] > 0
        assert (row["window_start"], row["window_end"]) == (2, 8)
        assert row["extra"]["progress_lines"] == "TimeHistory"
        if run.cell.nodes == 2:
            _two_workers_joined(run, log)
            assert row["extra"]["workers_measured"] == 2
        else:
            assert "MultiWorkerMirroredStrategy" not in log and "TF_CONFIG" not in run.script.read_text()
        print(f"tf2/resnet50 {shape}: {row['throughput']:.2f} img/s (speed), {row['throughput_time']:.2f} (time)")


def test_bert_genuine_run_pretraining_on_1x1_and_2x1(site):
    runs = _ended_ok(site, "tf2-bert")
    rows = _collect(site, "tf2-bert")
    for shape, run in runs.items():
        log = run.log.read_text(errors="replace")
        assert "-m official.legacy.bert.run_pretraining" in log
        lines = TRAINSTEP.findall(log)
        workers = {tid for tid, _, _ in lines}
        assert len(workers) == run.cell.nodes, lines
        for tid in workers:
            assert [(int(k), int(n)) for t, k, n in lines if t == tid] == [(k, 12) for k in range(1, 13)]
        assert f"Number of cores used :  {run.cell.nodes}" in log
        row = rows[shape]
        assert row["status"] == Status.OK and row["throughput"] > 0 and (row["window_start"], row["window_end"]) == (4, 12)
        assert row["extra"]["progress_lines"] == "Train Step"
        if run.cell.nodes == 2:
            _two_workers_joined(run, log)
            assert row["extra"]["workers_measured"] == 2
        print(f"tf2/bert-base {shape}: {row['throughput']:.2f} seq/s")


def test_a_rerun_starts_from_scratch_not_from_the_last_checkpoint(site):
    """run_pretraining restores the latest checkpoint in its model dir and trains only the steps left: a rerun in
    the first run's model dir would train none. The job script empties the run's folder, so the forced rerun
    trains all 12 steps again."""
    [first] = _ended_ok(site, "tf2-bert-again").values()
    assert (_work_dir(first) / "model" / "ctl_step_12.ckpt-1.index").is_file()  # what a resume would read
    p = cli("--logs", str(site["logs"]), "submit", str(site["tf2-bert-again.toml"]), "--executor", "slurm",
            "--no-site", "--force")
    assert p.returncode == 0, p.stdout + p.stderr
    [again] = _ended_ok(site, "tf2-bert-again").values()
    assert again.job_id != first.job_id
    log = again.log.read_text(errors="replace")
    assert "restoring from checkpoint" not in log
    assert [int(k) for _, k, _ in TRAINSTEP.findall(log)] == list(range(1, 13))
    assert [p.name for p in (_work_dir(again) / "model").glob("ctl_step_*.index")] == ["ctl_step_12.ckpt-1.index"]
