"""A probe the Slurm cgroup kills for memory reads OOM, never FAILED, on the REAL text of such kills
(tests/fixtures/real/slurm-cgroup/, captured on the cgroup test cluster: see its README): the kill of an srun step
(the banner reaches the run's log; the job ends FAILED) and of the batch step (sacct OUT_OF_MEMORY and the banner
in the job's Slurm output file, written only after the job script has ended)."""

from __future__ import annotations

import json
from pathlib import Path

from dlperf_slurm.model.cell import Cell
from dlperf_slurm.model.result import JobInfo
from dlperf_slurm.model.status import Status
from dlperf_slurm.outcome import decision, evidence
from dlperf_slurm.schedulers import slurmctl

REAL = Path(__file__).parent / "fixtures" / "real" / "slurm-cgroup"


def _cell(batch: int, launcher: str) -> Cell:
    return Cell(suite="pytorch-ddp/resnet50", model="resnet50", framework="pytorch-ddp", nodes=1, gpus_per_node=1,
                batch_size=batch, precision="fp32", xla=False, launcher=launcher, default_launcher="torchrun")


def _sacct(job: str) -> JobInfo:
    """The job's own line of the captured sacct output, mapped as the Slurm backend maps it."""
    for line in (REAL / "sacct-1844.txt").read_text().splitlines()[1:]:
        jid, state, code, _rss = line.split("|")
        if jid == job:
            return JobInfo(job_id=jid, status=slurmctl._STATE_MAP[state], state=state)
    raise AssertionError(f"{job} not in sacct-1844.txt")


def _evidence(name: str, cell: Cell, job: JobInfo | None, asked: bool = True) -> decision.Evidence:
    return decision.Evidence(job=job, asked=asked, marker=evidence.read_marker(REAL / f"{name}.exit"),
                            log=evidence.read_log(cell, REAL / f"{name}.log", warmup_steps=1, measure_steps=2),
                            has_log=True, banner=evidence.read_banner([REAL / f"{name}.slurm.out"]))


def test_an_srun_step_killed_by_the_cgroup_reads_oom_though_the_job_ended_failed():
    cell = _cell(40, "srun")
    job = _sacct("1844_0")
    assert job.state == "FAILED"  # only the step (1844_0.1) is OUT_OF_MEMORY in sacct
    ev = _evidence("srun-step-oom", cell, job)
    assert ev.log.status == Status.OOM and "oom-kill" in ev.log.reason  # slurmstepd's banner, via srun's stderr
    o = decision.decide(ev)
    assert o.status == Status.OOM and "StepId=1845.1" in o.reason, o


def test_a_batch_step_killed_by_the_cgroup_reads_oom_from_sacct_or_from_the_banner():
    cell = _cell(26, "torchrun")
    ev = _evidence("batch-step-oom", cell, _sacct("1844_3"))
    assert ev.log.status != Status.OOM  # the log has torchrun's SIGKILL only: no OOM word
    assert ev.banner == (Status.OOM, next(line for line in (REAL / "batch-step-oom.slurm.out").read_text()
                                          .splitlines() if "oom-kill" in line))
    assert ev.job.status == Status.OOM and decision.decide(ev).status == Status.OOM
    # no accounting (the scheduler keeps no record): the banner alone
    no_acct = _evidence("batch-step-oom", cell, None)
    assert decision.decide(no_acct).status == Status.OOM
    # accounting says OUT_OF_MEMORY, the banner is not there: sacct alone
    no_banner = _evidence("batch-step-oom", cell, _sacct("1844_3"))
    no_banner.banner = None
    assert decision.decide(no_banner).status == Status.OOM


def test_a_failed_exit_marker_while_the_job_still_runs_waits_for_the_cgroups_verdict():
    """The job script writes its marker (exit 1: torchrun saw its worker SIGKILLed) before the batch step ends;
    slurmstepd states the OOM (OUT_OF_MEMORY, the banner) only after. A poll in between must not make the run
    FAILED: FAILED is final, never asked again."""
    cell = _cell(26, "torchrun")
    ev = _evidence("batch-step-oom", cell, JobInfo(job_id="1844_3", status=Status.RUNNING, state="RUNNING"))
    ev.banner = None  # not written yet
    assert json.loads((REAL / "batch-step-oom.exit").read_text())["rc"] == 1
    o = decision.decide(ev)
    assert o.status == Status.RUNNING and "waiting for the scheduler" in o.reason, o
    ev.job = _sacct("1844_3")  # the next poll
    assert decision.decide(ev).status == Status.OOM
