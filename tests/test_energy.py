"""Energy as a measured figure (dlperf_slurm.parsing.energy): NVML's energy counter read at the window's two ends by
the built-in workloads' sampler, the program's own energy lines (Megatron-LM ``--log-energy``, on real output), the
arithmetic from two readings, and the figures through the cells' medians and intervals.

No GPU is lent here: the NVML library itself is the one path not exercised. The sampler is driven by a scripted
stand-in of pynvml (this file's :class:`EnergyNvml`, test bed only), whose counters say what a GPU's would.
"""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import pytest

from dlperf_slurm import events as ev
from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.collect import cells
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.rows import RunRow, columns
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import energy
from dlperf_slurm.workloads import gpumem, memwatch

REAL = Path(__file__).parent / "fixtures" / "real"
sys.path.insert(0, str(Path(__file__).parent / "slurm"))


class EnergyNvml(types.SimpleNamespace):
    """A scripted pynvml (test bed only): each GPU's energy counter (mJ) takes the next value of its list at each
    read; ``unsupported`` GPUs raise as NVML does before Volta."""

    class NVMLError(Exception):
        pass

    def __init__(self, counters_mj, unsupported=()):
        super().__init__()
        self.counters, self.reads, self.unsupported = counters_mj, [0] * len(counters_mj), set(unsupported)

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.counters)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=1000 * gpumem.MIB, total=80 * 1024 * gpumem.MIB)

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=90, memory=0)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if h in self.unsupported:
            raise self.NVMLError("Not Supported")
        seq = self.counters[h]
        value = seq[min(self.reads[h], len(seq) - 1)]
        self.reads[h] += 1
        return value


def _sampler(nvml, visible="", host="n1"):
    s = gpumem.GpuMemSampler(period=3600, nvml=nvml, visible_devices=visible, host=host)
    assert s.start()
    return s


# ------------------------------------------------------------------------------------------------ the sampler
def test_the_counter_is_read_at_the_window_ends_and_its_difference_is_the_energy():
    s = _sampler(EnergyNvml([[5_000_000, 5_700_000, 9_999_999], [1_000, 601_000, 9_999_999]]))
    s.window_start()
    s.window_end()
    rep = s.stop()
    assert rep.energy_j == {0: 700.0, 1: 600.0}  # (end - start) mJ / 1000; the later reads are not the window's
    assert rep.energy_s is not None and rep.energy_s > 0 and rep.energy_reason is None
    assert rep.as_dict()["energy_j"] == {0: 700.0, 1: 600.0}


def test_a_window_never_ended_is_read_at_stop_and_one_never_started_gives_a_reason():
    s = _sampler(EnergyNvml([[0, 250_000]]))
    s.window_start()
    assert s.stop().energy_j == {0: 250.0}
    s = _sampler(EnergyNvml([[0, 250_000]]))
    rep = s.stop()
    assert rep.energy_j == {} and "no window" in rep.energy_reason


def test_a_counter_that_goes_back_or_cannot_be_read_gives_a_reason_never_a_figure():
    s = _sampler(EnergyNvml([[900_000, 100_000]]))  # a driver reload inside the window
    s.window_start()
    s.window_end()
    rep = s.stop()
    assert rep.energy_j == {} and "went back" in rep.energy_reason
    s = _sampler(EnergyNvml([[0, 1_000], [0, 1_000]], unsupported={1}))
    s.window_start()
    s.window_end()
    rep = s.stop()
    assert rep.energy_j == {0: 1.0} and "GPU 1" in rep.energy_reason and "Not Supported" in rep.energy_reason


def test_memwatch_says_its_energy_spans_the_whole_program():
    s = _sampler(EnergyNvml([[0, 3_000_000], [0, 3_200_000]]), host="n2")
    s.window_start()
    fields = memwatch.memory_fields(s.stop(), "n2")
    assert fields[ev.ENERGY_J] == {"n2:0": 3000.0, "n2:1": 3200.0}
    assert fields[ev.ENERGY_BASIS] == energy.BASIS_PROGRAM_SPAN and set(fields[ev.ENERGY_S]) == {"n2:0", "n2:1"}


# ------------------------------------------------------------------------------------------------ arithmetic
def _counters(joules, seconds, basis=energy.BASIS_WINDOW, reason=""):
    return energy.Counters(joules, seconds, basis, reason)


def test_j_per_step_w_per_gpu_and_samples_per_joule_from_two_readings():
    read = _counters({"a:0": 3000.0, "a:1": 2000.0}, {"a:0": 10.0, "a:1": 10.0})
    en = energy.figures(read, None, devices=2, steps=50, global_batch=64)
    assert en.basis == energy.BASIS_WINDOW and en.reason == ""
    assert en.j_per_step == pytest.approx(100.0)  # 5000 J over 50 steps
    assert en.w_per_gpu == pytest.approx(250.0)  # (300 + 200) / 2
    assert en.per_joule == pytest.approx(0.64)  # 64 samples per 100 J


def test_fewer_gpus_read_than_the_run_had_is_no_figure():
    en = energy.figures(_counters({"a:0": 3000.0}, {"a:0": 10.0}), None, devices=2, steps=50, global_batch=64)
    assert en.j_per_step is None and en.per_joule is None and "1 of the run's 2 GPUs" in en.reason


def test_a_whole_program_reading_gives_the_mean_power_only():
    en = energy.figures(_counters({"a:0": 6000.0}, {"a:0": 20.0}, energy.BASIS_PROGRAM_SPAN), None, devices=1,
                        steps=50, global_batch=8)
    assert en.w_per_gpu == pytest.approx(300.0) and en.j_per_step is None and en.per_joule is None
    assert "whole program" in en.reason


def test_the_programs_own_lines_are_the_figure_and_are_compared_with_nvml():
    own = (150.0, 300.0)  # J/iter/GPU, W/GPU
    prog = energy.figures(_counters({"a:0": 6000.0, "a:1": 6000.0}, {"a:0": 25.0, "a:1": 25.0},
                                    energy.BASIS_PROGRAM_SPAN), own, devices=2, steps=10, global_batch=60)
    assert prog.basis == energy.BASIS_PROGRAM and prog.j_per_step == pytest.approx(300.0)
    assert prog.per_joule == pytest.approx(0.2) and prog.program_over_nvml == pytest.approx(300.0 / 240.0)
    window = energy.figures(_counters({"a:0": 1500.0, "a:1": 1500.0}, {"a:0": 5.0, "a:1": 5.0}), own, devices=2,
                            steps=10, global_batch=60)
    assert window.basis == energy.BASIS_WINDOW and window.j_per_step == pytest.approx(300.0)
    assert window.program_over_nvml == pytest.approx(1.0)


def test_no_reading_says_so():
    assert energy.figures(None, None, devices=1, steps=5, global_batch=1).reason == "the log reports no energy"


# ------------------------------------------------------------------------------------------------ real logs
def test_megatron_log_energy_lines_of_a_real_gpu_run():
    """Megatron-LM's --log-energy fields, as a GPU run printed them (NVIDIA/cloudai's tests; SOURCE.toml): the
    window's J/iter/GPU and W/GPU are the means of its interval lines, and J per step is that times the GPUs."""
    log = REAL / "Megatron-LM" / "2026-02" / "megatron_2026_log_energy.excerpt.log"
    ctx = ParseContext(nodes=1, gpus_per_node=8, batch_size=4, warmup_steps=292, measure_steps=2,
                       precision="bf16")
    res = suites.get("megatron/gpt").parse(lp.iter_text_lines(log.read_text()), ctx)
    assert res.status == Status.OK, res.reason
    assert res.energy_basis == energy.BASIS_PROGRAM
    assert res.power_w_per_gpu == pytest.approx((652.8 + 652.5) / 2)
    assert res.energy_j_per_step / 8 == pytest.approx((1982.6 + 1980.1) / 2)
    assert res.samples_per_joule == pytest.approx(32 / ((1982.6 + 1980.1) / 2 * 8))
    # the log's own figures agree with each other: J/iter over s/iter is its W, to the print's rounding
    assert res.energy_j_per_step / 8 / (res.latency_ms / 1000) == pytest.approx(res.power_w_per_gpu, rel=2e-3)


def test_a_megatron_log_without_energy_lines_has_no_figure():
    log = REAL / "Megatron-LM" / "2024" / "megatron_2024_tflops.excerpt.log"
    ctx = ParseContext(nodes=2, gpus_per_node=8, batch_size=1, warmup_steps=10, measure_steps=2, precision="fp16")
    res = suites.get("megatron/gpt").parse(lp.iter_text_lines(log.read_text()), ctx)
    assert res.status == Status.OK and res.energy_j_per_step is None and res.samples_per_joule is None


def _real_cpu_run() -> str:
    """A real run of the built-in workload (tiny ResNet-50 on the CPU, 2 + 3 steps): its stdout."""
    pytest.importorskip("torch")
    import subprocess

    out = subprocess.run([sys.executable, "-m", "dlperf_slurm.workloads.train", "--model", "resnet50", "--tiny",
                          "--batch-size", "2", "--warmup-steps", "2", "--measure-steps", "3"],
                         capture_output=True, text=True, timeout=300, check=True)
    return out.stdout


def test_a_built_in_run_on_the_cpu_says_why_it_has_no_energy():
    out = _real_cpu_run()
    ctx = ParseContext(nodes=1, gpus_per_node=1, batch_size=2, warmup_steps=2, measure_steps=3)
    res = suites.get("pytorch-ddp/resnet50").parse(lp.iter_text_lines(out), ctx)
    assert res.status == Status.OK and res.samples_per_joule is None
    assert res.energy_reason == ev.CPU_ENERGY_REASON


def test_a_built_in_runs_gpu_energy_goes_from_the_sampler_to_the_run_and_its_cell():
    """The real workload's log with its memory event made by the workload's own merge (train._memory_event) from
    two ranks' sampler reports, each sampler driven by the scripted pynvml (test bed): the run's figures, then the
    cell's median and interval over repeats."""
    from dlperf_slurm.workloads import train

    out = _real_cpu_run()
    reports = []
    for rank, (start, end) in enumerate([(10_000, 910_000), (20_000, 1_120_000)]):
        s = _sampler(EnergyNvml([[start, end], [start, end]]), visible=str(rank), host="n1")  # its own GPU
        s.window_start()
        s.window_end()
        rep = s.stop()
        rep.energy_s = 3.0  # what the two readings' clock said (the stand-in's calls take no time)
        rep.peak_used_mib = {rank: 1000.0}
        reports.append({"rank": rank, "max_allocated_mib": 1.0, "max_reserved_mib": 2.0, "nvml": rep.as_dict()})
    memory = ev.format_line(ev.EV_MEMORY, **train._memory_event(True, reports, "n1"))
    lines = [memory if ev.PREFIX + '{"event":"memory"' in line else line for line in out.splitlines()]
    ctx = ParseContext(nodes=1, gpus_per_node=2, batch_size=2, warmup_steps=2, measure_steps=3)
    res = suites.get("pytorch-ddp/resnet50").parse(lp.iter_text_lines("\n".join(lines)), ctx)
    assert res.status == Status.OK and res.energy_basis == energy.BASIS_WINDOW, res.energy_reason
    assert res.energy_j_per_step == pytest.approx((900.0 + 1100.0) / 3)  # 2000 J over the 3 measured steps
    assert res.power_w_per_gpu == pytest.approx((300.0 + 1100.0 / 3) / 2)
    # samples per joule: the log's own global batch (2: the real run was one process) per J of a step
    assert res.samples_per_joule == pytest.approx(2 / (2000.0 / 3))

    base = {name: None for name in columns(RunRow)}
    base.update(campaign="c", suite="pytorch-ddp/resnet50", framework="pytorch-ddp", model="resnet50", cell_id="a",
                shape="1n2g", nodes=1, gpus_per_node=2, devices=2, batch_size=2, global_batch=4, precision="fp32",
                xla=False, launcher="torchrun", variant="", run="r", hosts="n1", reason="", published="time",
                unit="samples/s", steps_seen=5, mem_reason="", tiny=False, garbled_lines=0, log="x", parse_seconds=0.0,
                provenance={}, extra={}, health="", energy_reason="", energy_basis=energy.BASIS_WINDOW)
    per_joule = [0.0060, 0.0058, 0.0061, 0.0059, 0.0062, 0.0060]
    runs = [RunRow(**{**base, "repeat": i, "status": Status.OK, "throughput": 10.0 + i, "samples_per_joule": v,
                      "power_w_per_gpu": 300.0 + i, "energy_j_per_step": 4 / v}) for i, v in enumerate(per_joule)]
    runs.append(RunRow(**{**base, "repeat": 9, "status": Status.OOM, "throughput": None, "samples_per_joule": 1.0}))
    (cell,) = cells.cells_of(runs)
    assert cell.samples_per_joule == pytest.approx(0.00600)  # the OK runs' median: the OOM run's figure is none
    assert cell.samples_per_joule_ci_low <= cell.samples_per_joule <= cell.samples_per_joule_ci_high
    assert cell.power_w_per_gpu == pytest.approx(302.5) and cell.energy_basis == energy.BASIS_WINDOW
    assert math.isfinite(cell.energy_j_per_step)


# ------------------------------------------------------------------------------------------ compare and history
MEGATRON_ENERGY = REAL / "Megatron-LM" / "2026-02" / "megatron_2026_log_energy.excerpt.log"


def _megatron_repeat(joules_scale: float, repeat: int, energy_lines: bool = True) -> str:
    """The real --log-energy log (MEGATRON_ENERGY) as one more repeat of its run: each interval's time and J/iter
    scaled a little per repeat (and J by ``joules_scale``), its W recomputed from the two as the program does;
    without ``energy_lines`` the two energy fields are cut out (a run without --log-energy)."""
    import re

    ms_f = 1 + 0.004 * ((repeat * 7) % 5 - 2)
    j_f = joules_scale * (1 + 0.003 * ((repeat * 3) % 5 - 2))
    out = []
    for line in MEGATRON_ENERGY.read_text().splitlines():
        m = re.search(r"\(ms\): ([\d.]+) .*energy per GPU \(J/iter/GPU\): ([\d.]+) \| power per GPU \(W/GPU\): ([\d.]+)",
                      line)
        if m is None:
            out.append(line)
            continue
        ms, joules = float(m.group(1)) * ms_f, float(m.group(2)) * j_f
        line = line.replace(f"(ms): {m.group(1)}", f"(ms): {ms:.1f}")
        line = line.replace(f"(J/iter/GPU): {m.group(2)}", f"(J/iter/GPU): {joules:.1f}")
        line = line.replace(f"(W/GPU): {m.group(3)}", f"(W/GPU): {joules / (ms / 1000):.1f}")
        if not energy_lines:
            line = re.sub(r" energy per GPU \(J/iter/GPU\): [\d.]+ \| power per GPU \(W/GPU\): [\d.]+ \|", "", line)
        out.append(line)
    return "\n".join(out) + "\n"


def _energy_campaign(root: Path, name: str, joules_scale: float, energy_lines: bool = True):
    """A campaign of 5 repeats of the real Megatron run (1n8g), read as `collect --from` reads a DLPerf tree."""
    from dlperf_slurm.collect import drive, gather

    d = root / name / "1n8g"
    d.mkdir(parents=True)
    for r in range(5):
        (d / f"megatron_gpt_b4_bf16_{r}.log").write_text(_megatron_repeat(joules_scale, r, energy_lines))
    col = gather.runs_from_tree(d.parent, "megatron/gpt", 292, 2, name=name)
    return drive.collect([col], jobs=1, name=name)


def test_compare_and_history_judge_samples_per_joule_by_the_same_rule(tmp_path):
    """Two campaigns of one speed, the second spending 20 % more energy a step: compare calls throughput no change
    and --metric energy slower, regressed (exit 1); history --metric energy shows the same from the store; a side
    whose OK runs have no energy figure cannot tell (no failure of its runs)."""
    from testlib import cli

    from dlperf_slurm.report import writers
    from dlperf_slurm.store import filing

    out, url = tmp_path / "summaries", str(tmp_path / "results.sqlite")
    results = {name: _energy_campaign(tmp_path / "trees", name, scale, lines)
               for name, scale, lines in (("monday", 1.0, True), ("tuesday", 1.2, True), ("plain", 1.0, False))}
    for res in results.values():
        assert {r.status for r in res.runs} == {Status.OK}
        writers.write_all(res, out, plots=False)
    (cell,) = results["monday"].cells
    assert cell.energy_basis == energy.BASIS_PROGRAM and cell.samples_per_joule_ci_low is not None
    table = (out / "monday.md").read_text()
    assert "energy (samples/J, 95% CI; W/GPU; basis)" in table and "W; program" in table
    mon, tue, plain = (str(out / f"{n}.json") for n in ("monday", "tuesday", "plain"))
    p = cli("compare", mon, tue, "--out", str(out))
    assert p.returncode == 0 and "no change" in p.stdout, p.stdout + p.stderr
    p = cli("compare", mon, tue, "--metric", "energy", "--out", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads((out / "compare.monday.tuesday.energy.json").read_text())
    (row,) = doc["cells"]
    assert doc["metric"] == "energy" and row["verdict"] == "slower" and row["regressed"]
    assert row["ratio"] == pytest.approx(1 / 1.2, rel=0.01) and row["unit"] == "samples/J"
    p = cli("compare", mon, plain, "--metric", "energy", "--out", str(out))
    assert p.returncode == 0 and "cannot tell" in p.stdout and "Nothing to judge: 1 cell" in p.stdout, p.stdout
    assert "give no samples/J figure" in (out / "compare.monday.plain.energy.md").read_text()
    p = cli("compare", "ref:dlperf-v100", mon, "--metric", "energy")
    assert p.returncode == 2 and "reference set holds published throughputs only" in p.stderr
    for name in ("monday", "tuesday"):
        filing.record_collect(results[name], url, "alpha:gpu")
    p = cli("history", "--store", url, "--metric", "energy")
    assert p.returncode == 0 and "slower, REGRESSED" in p.stdout and "samples/J" in p.stdout, p.stdout + p.stderr
    p = cli("history", "--store", url)
    assert p.returncode == 0 and "REGRESSED" not in p.stdout, p.stdout
