"""The measured matmul ceiling (dlperf_slurm.probes.ceiling): measured once per device model and precision per campaign,
read by every later run, and MFU against it in the cells — on this CPU, for real."""

from __future__ import annotations

import json
import multiprocessing
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import cli  # noqa: E402

from dlperf_slurm.probes import ceiling  # noqa: E402


def test_a_real_cpu_measurement_is_a_positive_rate_from_the_best_shape():
    got = ceiling.measure("fp32", "cpu", sizes=(128, 256), reps=3)
    assert got["tflops"] > 0 and got["shape"] in (128, 256) and got["dtype"] == "float32"


def _count_calls(counter_file: Path):
    def fake(precision, device):
        with open(counter_file, "a") as f:
            f.write("x")
        return {"tflops": 1.5, "shape": 64, "dtype": "float32", "sizes": [64], "reps": 1, "measured_at": 0.0}
    return fake


def _worker(cdir: str, counter: str, q) -> None:
    q.put(ceiling.for_campaign(cdir, "Some GPU 80GB", "amp", "cpu", measure_fn=_count_calls(Path(counter))))


def test_measured_once_per_campaign_even_when_runs_start_together(tmp_path):
    counter = tmp_path / "calls"
    q = multiprocessing.get_context("fork").Queue()
    procs = [multiprocessing.get_context("fork").Process(target=_worker, args=(str(tmp_path), str(counter), q))
             for _ in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(30)
    assert counter.read_text() == "x"  # one measurement, three reads
    assert sorted(g["cached"] for g in got) == [False, True, True, True]
    assert {g["tflops"] for g in got} == {1.5}
    kept = json.loads((tmp_path / ".ceiling" / "Some-GPU-80GB.amp.json").read_text())
    assert kept["device_name"] == "Some GPU 80GB" and kept["precision"] == "amp"
    # another precision is another measurement
    assert ceiling.for_campaign(tmp_path, "Some GPU 80GB", "fp32", "cpu", measure_fn=_count_calls(counter))["cached"] is False


@pytest.mark.slow
def test_built_in_workload_reports_mfu_against_the_ceiling_its_campaign_measured(tmp_path):
    mx = tmp_path / "c.toml"
    mx.write_text('suite = "pytorch-ddp/bert-base"\nname = "c"\n[axes]\ndevices = ["1x1"]\nbatch_size = [2]\n'
                  '[options]\ntiny = true\nthreads = 1\n[measure]\nrepeats = 2\nwarmup_steps = 1\nmeasure_steps = 3\n')
    logs, out = tmp_path / "logs", tmp_path / "s"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--wait")
    assert p.returncode == 0, p.stdout + p.stderr
    (kept,) = (logs / "c" / ".ceiling").glob("*.fp32.json")
    measured = json.loads(kept.read_text())["tflops"]
    logs_text = [f.read_text() for f in sorted((logs / "c").rglob("*_[01].log"))]
    assert sum("measured by this run" in t for t in logs_text) == 1 and sum("read from" in t for t in logs_text) == 1
    p = cli("--logs", str(logs), "collect", "c", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    (cell,) = json.loads((out / "c.json").read_text())["cells"]
    assert cell["ceiling_tflops"] == pytest.approx(measured)
    assert cell["mfu_ceiling"] == pytest.approx(cell["tflops_per_gpu"] / measured)
    assert cell["mfu"] is None and "no_peak" in cell["flags"]  # a CPU has no datasheet peak here
    assert f"of {measured:.3g}" in (out / "c.md").read_text()


def test_the_fp8_ceiling_is_measured_apart_with_scaled_mm_and_block_formats_are_refused(tmp_path):
    """FP8 is measured on float8_e4m3fn operands through torch._scaled_mm (as FP8 training runs its matmuls), on
    this CPU for real, and kept apart from the 16-bit ceiling; MXFP8 and NVFP4 are not measured, with the reason."""
    got = ceiling.measure("fp8", "cpu", sizes=(128, 256), reps=3)
    assert got["tflops"] > 0 and got["dtype"] == "float8_e4m3fn"
    assert ceiling.measure("bf16", "cpu", sizes=(128,), reps=2)["dtype"] == "bfloat16"
    for precision in ("mxfp8", "nvfp4"):
        with pytest.raises(ValueError, match=f"no {precision} matmul ceiling is measured"):
            ceiling.measure(precision, "cpu")
    kept = ceiling.for_campaign(tmp_path, "CPU", "fp8", "cpu",
                                measure_fn=lambda p, d: ceiling.measure(p, d, sizes=(128,), reps=2))
    assert kept["dtype"] == "float8_e4m3fn" and (tmp_path / ".ceiling" / "CPU.fp8.json").is_file()
    assert not (tmp_path / ".ceiling" / "CPU.bf16.json").exists()
