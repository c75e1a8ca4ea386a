"""``search`` against a real Slurm cgroup memory limit (issue #11): on the test cluster started with
SLURM_CI_CGROUP=1 (memory enforced), a ``[slurm] mem`` limit makes the built-in PyTorch workload (tiny ResNet-50 at
128 px on CPU, one thread) really run out of memory above some batch size. The search must find the boundary that
the limit implies, and its OOM probes must read OOM (Slurm's OUT_OF_MEMORY or the cgroup's oom-kill banner), not
FAILED, for both ways the kill lands: in an srun step (launcher srun) and in the batch step (launcher torchrun).

Nothing is hard-coded: the test first measures the job cgroup's peak memory (memory.max_usage_in_bytes, what the
limit is held against) of the same program, unlimited, at two batch sizes per launcher (peak = a + b * batch), sets
the limit so that the srun boundary lies near batch TARGET, and checks the found values against the boundaries the
fit predicts. Skipped unless the running cluster enforces memory (.ci/run's second phase: ``pytest -m cgroup``)."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import cli, collect_summary, memory_enforced  # noqa: E402

from dlperf_slurm import suites  # noqa: E402
from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.matrix import search  # noqa: E402
from dlperf_slurm.model.cell import Cell, Measure  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

_why = memory_enforced()
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.cgroup,
              pytest.mark.skipif(_why is not None, reason=_why or "")]

OPTIONS = {"tiny": True, "threads": 1, "image_size": 128, "ceiling": False}  # ~10 MB per sample, a step ~1 s
TARGET = 40  # where the limit puts the srun cell's boundary (torchrun's agent costs memory: its boundary is lower)
MEASURED_AT = (8, 32)
START, LIMIT, STEP = 4, 256, 2
PROBE_STEPS = (1, 1)
# the found boundary against the fit's: the fit measures the bare program (no job script, watchdog, health gate)
# and the cgroup counts page cache that it may reclaim before it kills, so the two differ by a few samples
LOW, HIGH = 0.7, 1.25


def _cell(batch: int, launcher: str, classes: int = 0) -> Cell:
    return Cell(suite="pytorch-ddp/resnet50", model="resnet50", framework="pytorch-ddp", nodes=1, gpus_per_node=1,
                batch_size=batch, precision="fp32", xla=False, launcher=launcher, default_launcher="torchrun",
                params=(("num_classes", classes),) if classes else ())


def _command(batch: int, launcher: str, classes: int = 0, options: dict | None = None) -> str:
    """The program the campaign's job runs (the suite's own argv), launched the way its launcher template does."""
    suite = suites.get("pytorch-ddp/resnet50")
    argv = suite.program(_cell(batch, launcher, classes), Measure(repeats=1, warmup_steps=PROBE_STEPS[0],
                                                                 measure_steps=PROBE_STEPS[1], hang_timeout=0),
                         {**suite.options, **(OPTIONS if options is None else options)})
    if launcher == "srun":
        return "srun --nodes=1 --ntasks-per-node=1 --kill-on-bad-exit=1 " + shlex.join(argv)
    return "torchrun --standalone --nnodes=1 --nproc_per_node=1 " + shlex.join(argv[1:])


def _cgroup_peak(tmp: Path, command: str) -> int:
    """Peak memory (bytes) of the job's memory cgroup for one unlimited run of ``command``."""
    name = f"peak-{len(list(tmp.glob('peak-*.sh')))}"
    out, script = tmp / f"{name}.out", tmp / f"{name}.sh"
    script.write_text(f"""#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --mem=4000M --time=00:05:00 --output={out}
{command} >/dev/null || exit 1
cg=$(awk -F: '$2 == "memory" {{print $3}}' /proc/self/cgroup)
echo "peak $(cat "/sys/fs/cgroup/memory${{cg%%/step_*}}/memory.max_usage_in_bytes")"
""")
    p = subprocess.run(["sbatch", "--wait", "--parsable", str(script)], capture_output=True, text=True, timeout=600)
    text = out.read_text() if out.exists() else ""
    assert p.returncode == 0 and "peak " in text, f"{p.stdout}{p.stderr}{text}"
    return int(text.split("peak ")[-1].split()[0])


def _search(tmp_path: Path, name: str, axes: str, options: dict, repeats: int, mem_mib: int, axis: str,
            start: int, limit: int, step: int) -> tuple[Path, list[dict]]:
    """``search --axis <axis>`` of a matrix of the built-in workload under ``mem_mib`` through the CLI, on the
    cluster, waiting for it; the logs folder and search.json's cells."""
    mx = tmp_path / f"{name}.toml"
    mx.write_text(f"""suite = "pytorch-ddp/resnet50"
name = "{name}"
[axes]
{axes}
[options]
{chr(10).join(f'{k} = {json.dumps(v)}' for k, v in options.items())}
[measure]
repeats = {repeats}
warmup_steps = {PROBE_STEPS[0]}
measure_steps = {PROBE_STEPS[1]}
[slurm]
time = "00:05:00"
gpu_request = "none"
mem = "{mem_mib}M"
""")
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "search", str(mx), "--axis", axis, "--executor", "slurm", "--no-site",
            "--start", str(start), "--limit", str(limit), "--step", str(step),
            "--probe-steps", ",".join(map(str, PROBE_STEPS)), "--wait", timeout=900)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    return logs, json.loads((logs / f"{name}.search" / "search.json").read_text())["cells"]


def _check_probes(c: dict, start: int, limit: int, step: int, predicted: float) -> list[tuple[int, str]]:
    """One cell's search: a boundary below the limit, OOM probes read OOM (never FAILED), OK exactly up to the found
    value, the probe just above it OOM, within the bound, the found value where the fit puts it."""
    probes = [(q["value"], q["status"]) for q in c["probes"]]
    assert c["max"] is not None and c["result"] == f"max {c['max']}", c
    assert all(s in (Status.OK, Status.OOM) for _v, s in probes), probes
    assert all((s == Status.OK) == (v <= c["max"]) for v, s in probes), probes
    assert c["first_oom"] - c["max"] <= step, c
    assert len(probes) <= search.bound(start, limit, step), probes
    assert LOW * predicted - step <= c["max"] <= HIGH * predicted + step, \
        f"found {c['max']}, the fit implies {predicted:.1f}"
    return probes


def test_search_finds_the_batch_the_cgroup_limit_implies_and_its_probes_read_oom(tmp_path):
    fit = {}
    for launcher in ("srun", "torchrun"):
        lo, hi = (_cgroup_peak(tmp_path, _command(b, launcher)) for b in MEASURED_AT)
        b = (hi - lo) / (MEASURED_AT[1] - MEASURED_AT[0])
        assert b > 1e6, f"{launcher}: the peak does not grow with the batch ({lo} -> {hi} bytes): no boundary to find"
        fit[launcher] = (lo - b * MEASURED_AT[0], b)
    a, b = fit["srun"]
    mem_mib = math.ceil((a + TARGET * b) / 2**20)
    predicted = {launcher: (mem_mib * 2**20 - a) / b for launcher, (a, b) in fit.items()}
    print(f"fit (a MiB, b MiB/sample): { {k: (round(a / 2**20), round(b / 2**20, 2)) for k, (a, b) in fit.items()} }"
          f"; mem {mem_mib}M; predicted boundaries {predicted}")
    assert predicted["torchrun"] > 2 * START, f"the torchrun agent alone leaves no room: {predicted}"

    logs, cells = _search(tmp_path, "cg", f'devices = ["1x1"]\nbatch_size = [{START}]\nlauncher = ["srun", "torchrun"]',
                          OPTIONS, 2, mem_mib, "batch_size", START, LIMIT, STEP)
    found = {}
    for c in cells:
        launcher = "srun" if "launcher-srun" in c["cell"] else "torchrun"
        _check_probes(c, START, LIMIT, STEP, predicted[launcher])
        found[launcher] = c
    assert found["torchrun"]["max"] < found["srun"]["max"]  # the same limit, plus the torchrun agent

    # collect's runs table says the same of every probe: OOM where the search read OOM
    runs = collect_summary(logs, "cg.search")["runs"]
    for launcher, c in found.items():
        table = {r["batch_size"]: r["status"] for r in runs if (r["launcher"] == "srun") == (launcher == "srun")}
        assert table == {q["value"]: q["status"] for q in c["probes"]}, (launcher, table)
        assert Status.OOM in table.values()

    # the found values ran with the normal repeats; at the very boundary a repeat may run out of memory (the
    # cgroup's page-cache charge varies from job to job), but it reads OOM, never FAILED
    main = manifest.load_manifest(logs / "cg")
    assert sorted(r.cell.batch_size for r in main) == sorted([c["max"] for c in found.values()] * 2)
    assert all(r.status in (Status.OK, Status.OOM) for r in main), [(r.key, r.status, r.reason) for r in main]
    cells = collect_summary(logs, "cg")["cells"]
    assert sorted(c["searched"] for c in cells) == sorted(
        f"max {c['max']} (batch_size, {len(c['probes'])} probes)" for c in found.values())


CLASSES_OPTIONS = {"tiny": True, "threads": 1, "ceiling": False}  # 32 px: the classifier's width dominates
CLASSES_AT = (8192, 32768)  # measured there; ~8 KB per class (weights, gradients, momentum, logits)
CLASSES_TARGET = 49152
CLASSES_START, CLASSES_LIMIT, CLASSES_STEP = 4096, 262144, 1024


def test_search_finds_the_widest_classifier_the_cgroup_limit_implies(tmp_path):
    """InsightFace's "max num_classes" (found by hand in DLPerf) on the built-in workload: --axis num_classes."""
    lo, hi = (_cgroup_peak(tmp_path, _command(8, "srun", n, CLASSES_OPTIONS)) for n in CLASSES_AT)
    b = (hi - lo) / (CLASSES_AT[1] - CLASSES_AT[0])
    assert b > 1e3, f"the peak does not grow with num_classes ({lo} -> {hi} bytes): no boundary to find"
    a = lo - b * CLASSES_AT[0]
    mem_mib = math.ceil((a + CLASSES_TARGET * b) / 2**20)
    predicted = (mem_mib * 2**20 - a) / b
    print(f"fit: a {a / 2**20:.0f} MiB, b {b / 1024:.2f} KiB/class; mem {mem_mib}M; predicted boundary {predicted:.0f}")

    logs, [c] = _search(tmp_path, "cgc", f'devices = ["1x1"]\nbatch_size = [8]\nlauncher = ["srun"]\n'
                        f'num_classes = [{CLASSES_START}]', CLASSES_OPTIONS, 1, mem_mib, "num_classes",
                        CLASSES_START, CLASSES_LIMIT, CLASSES_STEP)
    assert c["cell"].endswith(".num_classes-max"), c
    probes = _check_probes(c, CLASSES_START, CLASSES_LIMIT, CLASSES_STEP, predicted)
    runs = collect_summary(logs, "cgc.search")["runs"]
    assert sorted(r["status"] for r in runs) == sorted(s for _v, s in probes)
    assert Status.OOM in {r["status"] for r in runs}
    main = manifest.load_manifest(logs / "cgc")
    assert [r.cell.param("num_classes") for r in main] == [c["max"]]
    assert all(r.status in (Status.OK, Status.OOM) for r in main), [(r.key, r.status, r.reason) for r in main]
    [cell] = collect_summary(logs, "cgc")["cells"]
    assert cell["searched"] == f"max {c['max']} (num_classes, {len(probes)} probes)"
