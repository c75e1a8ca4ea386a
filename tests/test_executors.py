"""executors.py: grouping into arrays, submitit parameters, sbatch call counts (fake Slurm), the local runner."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import fakeslurm  # noqa: E402
from testlib import TEMPLATES, wait_until, write_matrix  # noqa: E402

from dlperf_slurm.errors import SchedulerError  # noqa: E402
from dlperf_slurm.matrix import loader as matrix_mod  # noqa: E402
from dlperf_slurm.schedulers.base import array_spec  # noqa: E402
from dlperf_slurm.schedulers.local import LocalScheduler as LocalExecutor  # noqa: E402
from dlperf_slurm.schedulers.slurm import SlurmScheduler as SlurmExecutor  # noqa: E402
from dlperf_slurm.schedulers.slurm import submitit_parameters
from dlperf_slurm.schedulers.slurmctl import Slurm  # noqa: E402
from dlperf_slurm.submit import render  # noqa: E402
from dlperf_slurm.submit.journal import plan  # noqa: E402


def _matrix(tmp_path, **kw):
    return matrix_mod.load(write_matrix(tmp_path, **kw), site=False)


BIG = """suite = "pytorch-ddp/resnet50"
name = "big"
[axes]
devices = ["1x1", "1x2", "2x1", "2x2"]
batch_size = [16, 32, 64]
precision = ["fp32", "amp", "bf16", "fp16"]
xla = [false, true]
[slurm]
time = "00:10:00"
gpu_request = "none"
array_throttle = 4
partition = "debug"
"""


def test_plan_groups_by_resources_and_orders_repeat_major(tmp_path):
    m = _matrix(tmp_path, devices=("1x1", "1x2", "2x1", "2x2"), repeats=3)
    runs = matrix_mod.runs(m, tmp_path / "c")
    groups, skipped = plan(m, runs, SlurmExecutor(tmp_path / "c", max_array_size=1001))
    assert not skipped
    # torchrun: 1 task per node, so 1x1 and 1x2 share resources, and so do 2x1 and 2x2
    keys = sorted((g.resources.nodes, g.resources.tasks_per_node, g.size) for g in groups)
    assert keys == [(1, 1, 6), (2, 1, 6)]
    g = groups[0]
    assert [r.repeat for r in g.runs] == [0, 0, 1, 1, 2, 2]  # repeat-major: every cell gets r0 first
    assert len({r.cell.id for r in g.runs}) == 2
    m = _matrix(tmp_path, devices=("1x1", "1x2", "2x1"), launchers=("srun",), repeats=2)
    groups, _ = plan(m, matrix_mod.runs(m, tmp_path / "c"), SlurmExecutor(tmp_path / "c", max_array_size=1001))
    # srun: 1 task per GPU -> three resource sets
    assert sorted((g.resources.nodes, g.resources.tasks_per_node) for g in groups) == [(1, 1), (1, 2), (2, 1)]
    assert len({g.token for g in groups}) == len(groups) and all(g.token in g.name for g in groups)


def test_plan_chunks_to_max_array_size(tmp_path, fake):  # fake: the plan asks sinfo for the partitions
    (tmp_path / "big.toml").write_text(BIG)
    m = matrix_mod.load(tmp_path / "big.toml", site=False)
    runs = matrix_mod.runs(m, tmp_path / "c")
    assert len(runs) == 672
    groups, _ = plan(m, runs, SlurmExecutor(tmp_path / "c", max_array_size=100))
    assert all(g.size <= 100 for g in groups)
    assert sum(g.size for g in groups) == 672
    assert len(groups) == 8  # 336 one-node runs -> 4 chunks, 336 two-node runs -> 4 chunks
    assert groups[0].resources.array == "0-99%4" and "#SBATCH --array=0-99%4" in SlurmExecutor(tmp_path).preamble(groups[0].resources)


def test_array_spec_leaves_off_a_throttle_as_large_as_the_array():
    assert array_spec(42, 8) == "0-41%8" and array_spec(42, 41) == "0-41%41"
    assert array_spec(42, 42) == "0-41" and array_spec(42, 100) == "0-41" and array_spec(42, None) == "0-41"
    assert array_spec(1, 8) == "" and array_spec(1, None) == ""


def test_no_throttle_equal_to_the_array_reaches_sbatch(tmp_path, fake):
    """A throttle of 336 or more on arrays of 336 tasks throttles nothing: neither our preamble nor the file
    submitit writes says ``%336``; one of 4 is kept as it is."""
    for throttle, spec in ((336, "0-335"), (1000, "0-335"), (4, "0-335%4")):
        (tmp_path / "big.toml").write_text(BIG.replace("array_throttle = 4", f"array_throttle = {throttle}"))
        m = matrix_mod.load(tmp_path / "big.toml", site=False)
        cdir = tmp_path / f"c{throttle}"
        runs = matrix_mod.runs(m, cdir)
        ex = SlurmExecutor(cdir, slurm=Slurm())
        groups, _ = plan(m, runs, ex)
        assert [g.resources.array for g in groups] == [spec, spec]
        assert f"#SBATCH --array={spec}" in ex.preamble(groups[0].resources)
        p = submitit_parameters(groups[0].resources, groups[0].size, groups[0].throttle)
        assert p["additional_parameters"]["array"] == spec
        render.write_scripts(m, runs)
        ex.submit(groups[0])
        text = Path(fakeslurm.load(fake)["submitted"][-1]["script"]).read_text()
        assert [line for line in text.splitlines() if "--array" in line] == [f"#SBATCH --array={spec}"], text


def test_submitit_parameters_come_from_render_directives(tmp_path):
    m = _matrix(tmp_path, slurm_extra='partition = "gpu"\naccount = "proj1"\nqos = "high"\nmem = "8G"\n'
                                      'cpus_per_task = 4\nexclusive = true\nconstraint = "a100"\n'
                                      'extra_directives = ["--reservation=bench", "--requeue"]\n'
                                      'array_throttle = 2', time_limit="01:30:30", devices=("2x1",))
    runs = matrix_mod.runs(m, tmp_path / "c")
    p = submitit_parameters(render.run_resources(m, runs[0], job_name="dlperf.t.tok", output="/o/tok_%a.out"),
                            len(runs), 2)
    assert p["use_srun"] is False and p["wckey"] is None
    assert (p["nodes"], p["ntasks_per_node"], p["partition"], p["account"], p["qos"], p["mem"]) == \
        (2, 1, "gpu", "proj1", "high", "8G")
    assert p["cpus_per_task"] == 4 and p["exclusive"] is True and p["constraint"] == "a100"
    assert p["array_parallelism"] == 2
    assert p["time"] == 91 and p["additional_parameters"]["time"] == "01:30:30"
    assert p["additional_parameters"]["reservation"] == "bench" and p["additional_parameters"]["requeue"] is True
    # submitit's own --output and --signal=USR2@90 are replaced (same keys), and the group is submitted held
    extra = p["additional_parameters"]
    assert extra["output"] == "/o/tok_%a.out" and extra["signal"] == "B:CONT@1" and extra["hold"] is True


def test_one_sbatch_per_array_not_per_run(tmp_path, fake):
    (tmp_path / "big.toml").write_text(BIG)
    m = matrix_mod.load(tmp_path / "big.toml", site=False)
    cdir = tmp_path / "c"
    runs = matrix_mod.runs(m, cdir)
    ex = SlurmExecutor(cdir, slurm=Slurm())
    groups, _ = plan(m, runs, ex)
    render.write_scripts(m, runs)
    ids = [ex.submit(g) for g in groups]
    st = fakeslurm.load(fake)
    assert st["calls"]["sbatch"] == len(groups) == 2 == ex.calls["sbatch"]  # not 672
    assert sum(len(x) for x in ids) == 672 and len({j for x in ids for j in x}) == 672
    # the sbatch file submitit wrote carries exactly our preamble's options: an array with our throttle, our
    # output file, the inert signal, no srun wrapper
    text = Path(st["submitted"][0]["script"]).read_text()
    for line in ex.preamble(groups[0].resources):
        assert line.replace("=", "='", 1) + "'" in text or line in text, line
    assert "#SBATCH --array=0-335%4" in text
    assert "#SBATCH --partition=debug" in text and "#SBATCH --time=00:10:00" in text
    assert "USR2" not in text and "--wckey" not in text and "srun" not in text
    assert "submitit.core._submit" in text
    assert ids[0][5] == f"{st['submitted'][0]['id']}_5"
    assert "#SBATCH --hold" in text  # submitted held: the journal releases it once the ids are recorded


def test_refused_sbatch_stops_and_reports(tmp_path, fake):
    fakeslurm.update(fake, lambda s: s.update(sbatch_fail_after=1))
    m = _matrix(tmp_path, devices=("1x1", "2x1"), repeats=2)
    cdir = tmp_path / "c"
    runs = matrix_mod.runs(m, cdir)
    render.write_scripts(m, runs)
    ex = SlurmExecutor(cdir, slurm=Slurm())
    groups, _ = plan(m, runs, ex)
    ex.submit(groups[0])
    with pytest.raises(SchedulerError) as err:
        ex.submit(groups[1])
    assert "submission limit" in str(err.value)


def test_local_executor_skips_what_needs_srun(tmp_path):
    m = _matrix(tmp_path, devices=("1x1", "2x1"), repeats=1)
    groups, skipped = plan(m, matrix_mod.runs(m, tmp_path / "c"), LocalExecutor(tmp_path / "c"))
    assert [(r.cell.nodes, why) for r, why in skipped] == [
        (2, "needs 2 nodes (srun across nodes): the local executor runs on this machine only")]
    assert sum(g.size for g in groups) == 1
    m = _matrix(tmp_path, devices=("1x1",), launchers=("srun",), repeats=2)
    groups, skipped = plan(m, matrix_mod.runs(m, tmp_path / "c"), LocalExecutor(tmp_path / "c"))
    assert not groups and len(skipped) == 2 and all("srun launcher" in why for _, why in skipped)


def _local_group(tmp_path, jobs=2, **kw):
    m = _matrix(tmp_path, **kw)
    cdir = tmp_path / "c"
    runs = matrix_mod.runs(m, cdir)
    render.write_scripts(m, runs, str(TEMPLATES))
    ex = LocalExecutor(cdir, jobs)
    groups, _ = plan(m, runs, ex)
    return ex, groups


def _wait_local(ex, ids, timeout=60):
    def done():
        info = ex.query(ids)
        return info if all(i.state not in ("PENDING", "RUNNING") for i in info.values()) and len(info) == len(ids) else None
    return wait_until(done, timeout, what="local runs")


def test_local_runner_runs_n_at_a_time_and_records_exits(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_TEST_SLEEP", "1")
    ex, groups = _local_group(tmp_path, jobs=2, modes=("ok", "fail"), repeats=2)
    t0 = time.time()
    ids = ex.submit(groups[0])
    assert time.time() - t0 < 5  # submit returns while the runs go on
    info = _wait_local(ex, ids)
    q = wait_until(lambda: (d := json.loads(ex.queue_file(groups[0].token).read_text()))["runner"].get("ended") and d,
                   10, what="the runner to end")
    by_mode = {t["run"]: t for t in q["tasks"]}
    for jid, run in zip(ids, groups[0].runs):
        t = by_mode[run.key]
        if "fail" in run.key:
            assert info[jid].state == "FAILED" and t["rc"] == 3 and info[jid].reason == "exit code 3"
        else:
            assert info[jid].state == "COMPLETED" and t["rc"] == 0
        marker = json.loads(run.marker.read_text())
        assert marker["rc"] == t["rc"]
        assert "fake payload" in run.log.read_text()
    spans = sorted((t["start"], t["end"]) for t in q["tasks"])
    overlaps = max(sum(1 for s, e in spans if s <= x < e) for x, _ in spans)
    assert overlaps == 2  # two at a time, never more
    assert q["runner"]["ended"] >= max(e for _, e in spans)


def test_local_runner_time_limit_and_cancel(tmp_path):
    ex, groups = _local_group(tmp_path, jobs=3, modes=("sleep",), repeats=3, time_limit="00:00:03")
    ids = ex.submit(groups[0])
    wait_until(lambda: ex.query(ids)[ids[0]].state == "RUNNING", 20, what="first run to start")
    ex.cancel([ids[0]])
    info = _wait_local(ex, ids, 40)
    assert info[ids[0]].state == "CANCELLED"
    assert info[ids[1]].state == "TIMEOUT" and "time limit" in info[ids[1]].reason
    marker = json.loads(groups[0].runs[1].marker.read_text())
    assert marker["rc"] == 143 and marker["signal"] == "TERM"


def test_auto_executor_is_local_without_sbatch_and_slurm_with_it(tmp_path, monkeypatch):
    from dlperf_slurm import schedulers
    from dlperf_slurm.schedulers import slurmctl as scheduler

    monkeypatch.setattr(scheduler.shutil, "which", lambda name: None)
    assert schedulers.choose("auto", tmp_path, jobs=3).name == "local"
    monkeypatch.setattr(scheduler.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert schedulers.choose("auto", tmp_path).name == "slurm"
    assert schedulers.choose("local", tmp_path, jobs=2).jobs == 2
    # no Slurm client: a clear message, not a traceback from submitit
    monkeypatch.setattr(scheduler.shutil, "which", lambda name: None)
    with pytest.raises(Exception, match="sbatch is not on PATH"):
        SlurmExecutor(tmp_path).preflight()
