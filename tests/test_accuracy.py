"""Accuracy runs (#25): the [measure] mode, the workload's loop, the evaluations read from a real log of the
built-in workload, the NOT_CONVERGED verdict, compare's gate and the accuracy table."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlperf_slurm import suites
from dlperf_slurm.compare import rule
from dlperf_slurm.errors import MatrixError
from dlperf_slurm.matrix import loader as matrix
from dlperf_slurm.model import cell
from dlperf_slurm.model.cell import Measure, Target
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.outcome import decision
from dlperf_slurm.parsing import accuracy
from dlperf_slurm.parsing import evals as evallines
from dlperf_slurm.report import accuracy as accuracy_table
from dlperf_slurm.submit import render
from dlperf_slurm.workloads.loop import accuracy_loop

FIXTURES = Path(__file__).parent / "fixtures" / "accuracy"

BASE = """suite = "pytorch-ddp/resnet50"
[axes]
devices = ["1x1"]
batch_size = [32]
precision = ["fp32"]
[options]
tiny = true
[measure]
"""


def load(tmp_path: Path, measure: str, head: str = BASE) -> cell.Matrix:
    p = tmp_path / "m.toml"
    p.write_text(head + measure)
    return matrix.load(p, site=False)


def test_accuracy_mode_reaches_the_program(tmp_path):
    m = load(tmp_path, 'mode = "accuracy"\nepochs = 8\ntarget = { metric = "top1", value = 0.75 }\n')
    assert m.measure == Measure(mode="accuracy", epochs=8, target=Target("top1", 0.75))
    argv = m.suites[0].program(m.cells[0], m.measure, m.options_for(m.cells[0]))
    assert argv[argv.index("--epochs") + 1] == "8"
    assert argv[argv.index("--dataset") + 1] == "digits"
    assert argv[argv.index("--target") + 1] == "top1:0.75"
    assert argv[argv.index("--repeat") + 1] == suites.REPEAT  # each run's own: the renderer's
    plain = load(tmp_path, "repeats = 2\n")
    assert "--epochs" not in plain.suites[0].program(plain.cells[0], plain.measure, plain.options_for(plain.cells[0]))


def test_each_repeat_of_an_accuracy_cell_gets_its_own_seed(tmp_path):
    """The job script of repeat R passes --repeat R (the workload trains from --seed + R): the spread over a
    cell's repeats is a spread over seeds."""
    m = load(tmp_path, 'mode = "accuracy"\nepochs = 2\nrepeats = 3\n')
    r = render.Renderer(m)
    runs = [run for run in matrix.runs(m, tmp_path / "c") if run.cell == m.cells[0]]
    scripts = [r.render(run, []) for run in runs]
    assert [run.repeat for run in runs] == [0, 1, 2]
    for run, text in zip(runs, scripts):
        assert f"--repeat {run.repeat} " in text or f"--repeat {run.repeat}\n" in text or \
            f"--repeat {run.repeat}'" in text, text
        assert suites.REPEAT not in text


@pytest.mark.parametrize("measure, key, line, words", [
    ('mode = "acuracy"\n', "measure.mode", 9, "did you mean 'accuracy'"),
    ('mode = "accuracy"\n', "measure", 8, "needs epochs"),
    ('mode = "accuracy"\nepochs = 0\n', "measure.epochs", 10, ">= 1"),
    ('epochs = 3\n', "measure.epochs", 9, 'mode = "accuracy"'),
    ('mode = "accuracy"\nepochs = 3\ntarget = { metric = "top3", value = 0.5 }\n', "measure.target.metric", 11,
     "top1, top5"),
    ('mode = "accuracy"\nepochs = 3\ntarget = { metric = "top1", value = 75 }\n', "measure.target.value", 11,
     "fraction"),
    ('mode = "accuracy"\nepochs = 3\ntarget = { metric = "top1", valu = 0.7 }\n', "measure.target.valu", 11, ""),
])
def test_bad_accuracy_measure_is_one_line_naming_file_key_line(tmp_path, measure, key, line, words):
    with pytest.raises(MatrixError) as err:
        load(tmp_path, measure)
    e = err.value
    assert (e.key, e.line) == (key, line), str(e)
    assert words in e.message and "\n" not in str(e) and str(e).startswith(str(tmp_path / "m.toml"))


def test_a_suite_without_accuracy_runs_is_refused(tmp_path):
    head = BASE.replace("pytorch-ddp/resnet50", "horovod-synthetic/resnet50").replace("[options]\ntiny = true\n", "")
    with pytest.raises(MatrixError) as err:
        load(tmp_path, 'mode = "accuracy"\nepochs = 3\n', head)
    assert err.value.key == "measure.mode" and "horovod-synthetic/resnet50 cannot run accuracy runs" in err.value.message


def _fake_loop(accs, target, epochs=5):
    """accuracy_loop over a fake step whose evaluations give ``accs`` in turn."""
    events, printed = [], []
    it = iter(accs)
    res, evals = accuracy_loop(lambda: 0.5, 3, epochs, 8, rank0=True, log=lambda e, **f: events.append((e, f)),
                               evaluate=lambda: (next(it), 1.0, 100), target=target, printer=printed.append)
    return res, evals, events, printed


def test_loop_stops_at_the_first_evaluation_that_reaches_the_target():
    res, evals, events, printed = _fake_loop([0.5, 0.8, 0.9, 0.95], ("top1", 0.75))
    assert [e.epoch for e in evals] == [1, 2] and res.steps == 6
    assert printed == [" * Acc@1 50.000 Acc@5 100.000", " * Acc@1 80.000 Acc@5 100.000"]
    steps = [f["step"] for e, f in events if e == "step"]
    assert steps == [1, 2, 3, 4, 5, 6]
    # the printed line is what evallines.torchvision_line reads back
    assert evallines.torchvision_line(printed[1]).top1 == pytest.approx(0.8)


def test_loop_without_reaching_it_runs_every_epoch():
    res, evals, _, _ = _fake_loop([0.1, 0.2, 0.3], ("top1", 0.99), epochs=3)
    assert len(evals) == 3 and res.steps == 9


def test_torchvision_lines():
    # pytorch/examples imagenet/main.py's validate() and torchvision's references print this (percents)
    e = evallines.torchvision_line(" * Acc@1 76.130 Acc@5 92.862")
    assert (e.top1, e.top5) == (pytest.approx(0.7613), pytest.approx(0.92862))
    assert evallines.torchvision_line("Test: [1460/2500]  Acc@1 45.000 (76.451)   Acc@5 55.000 (93.474)") is None
    assert evallines.torchvision_line(" * Acc@1 176.0 Acc@5 92.8") is None


def _parse(name: str) -> RunResult:
    suite = suites.get("pytorch-ddp/resnet50")
    with open(FIXTURES / name, encoding="utf-8") as f:
        return suite.parse(f, ParseContext(nodes=1, gpus_per_node=1, batch_size=32, warmup_steps=3, measure_steps=100))


def test_a_real_log_of_the_workload_that_reached_its_target():
    """A log the built-in workload wrote here (accuracy-smoke, 1n1g: tiny ResNet-50 on digits, target top-1 75 %)."""
    res = _parse("reached.log")
    x = res.extra
    assert res.status == Status.OK and res.throughput > 0
    assert x["reached"] is True and x["target"] == {"metric": "top1", "value": 0.75}
    assert x["top1"] >= 0.75 and x["epochs"] == len(x["evals"]) < x["epochs_planned"]
    first_ok = next(e for e in x["evals"] if e["top1"] >= 0.75)
    assert 0 < x["time_to_target_s"] and first_ok["time"] > 0
    # every " * Acc@1" line the log prints is an evaluation the parser kept, in order
    printed = [evallines.torchvision_line(line) for line in (FIXTURES / "reached.log").read_text().splitlines()]
    assert [round(p.top1, 5) for p in printed if p] == [round(e["top1"], 5) for e in x["evals"]]
    assert accuracy.verdict(res) is None


def test_a_run_that_ends_short_of_its_target_is_not_converged():
    res = _parse("not-converged.log")
    assert res.status == Status.OK and res.extra["reached"] is False
    ev = decision.Evidence(marker={"exit_code": 0}, log=res, has_log=True)
    decided = decision.decide(ev)
    assert decided.status == Status.NOT_CONVERGED
    assert "short of the target 99.90%" in decided.reason and f"of {res.extra['epochs_planned']} epochs" in decided.reason


def test_compare_gates_a_cell_that_converged_before_and_not_now():
    base = rule.sides_from_runs([{"cell_id": "c", "status": "OK", "throughput": 10.0, "unit": "img/s"}] * 3)
    new = rule.sides_from_runs([{"cell_id": "c", "status": "NOT_CONVERGED", "throughput": 10.0,
                                    "unit": "img/s"}] * 3)
    (row,) = rule.compare(base, new)
    assert row.regressed and row.verdict == "now NOT_CONVERGED"


def _run(cell_id, status, top1, ttt, run):
    return SimpleNamespace(cell_id=cell_id, status=status, run=run,
                           extra={"evals": [{"top1": top1}], "top1": top1, "top5": 0.99, "epochs": 2,
                                  "epochs_planned": 8, "target": {"metric": "top1", "value": 0.75},
                                  "reached": status == Status.OK, "time_to_target_s": ttt})


def test_table_keeps_not_converged_runs_out_of_the_medians_and_names_them():
    cell = SimpleNamespace(cell_id="c", suite="s", devices=2, shape="1n2g", batch_size=32, global_batch=64,
                           median=100.0, unit="img/s")
    runs = [_run("c", Status.OK, 0.80, 10.0, "c.r0"), _run("c", Status.OK, 0.90, 14.0, "c.r1"),
            _run("c", Status.NOT_CONVERGED, 0.10, None, "c.r2")]
    (row,) = accuracy_table.table([cell], runs)
    assert row["top1"] == pytest.approx(0.85) and (row["top1_min"], row["top1_max"]) == (0.80, 0.90)
    assert row["time_to_target_s"] == 12.0 and row["not_converged"] == {"c.r2": 0.10} and (row["n_ok"], row["n"]) == (2, 3)
    text = "\n".join(accuracy_table.markdown([cell], runs))
    assert "85.00% (80.00%–90.00%)" in text and "`c` NOT_CONVERGED: c.r2 (final 10.00%)" in text


def test_shipped_accuracy_matrices_load_and_plan_says_accuracy_runs():
    from dlperf_slurm.matrix.plan import plan_text

    root = Path(__file__).parent.parent / "matrices"
    smoke = matrix.load(root / "accuracy-smoke.toml", site=False)
    assert smoke.measure.target == Target("top1", 0.75) and [c.shape for c in smoke.cells] == ["1n1g", "1n2g"]
    ddl = matrix.load(root / "ddl-accuracy.toml", site=False)
    assert ddl.measure.accuracy and {c.devices for c in ddl.cells} == {1, 2, 4}
    assert ("= 4 runs; accuracy runs\nup to 8 epochs; rate over the first epoch after 3 steps\ntarget top1 75.00%: a "
            "program stops there if it can, else collect reads when it was reached") in plan_text(smoke)


def test_a_target_metric_no_evaluation_gives_is_not_converged_not_a_crash(tmp_path):
    """The real not-converged log with its target on top5 and its eval events without top5 (another writer, or
    lines lost): NOT_CONVERGED saying so, not a TypeError out of collect (a None was formatted as a percentage)."""
    text = (FIXTURES / "not-converged.log").read_text().replace('"metric":"top1"', '"metric":"top5"')
    assert '"metric":"top5"' in text
    stripped = re.sub(r',"top5":[-+.\deE]+', "", text)
    suite = suites.get("pytorch-ddp/resnet50")
    ctx = ParseContext(nodes=1, gpus_per_node=1, batch_size=32, warmup_steps=3, measure_steps=100)
    res = suite.parse(io.StringIO(stripped), ctx)
    assert res.status == Status.OK and res.extra["evals"] and res.extra["reached"] is False
    decided = decision.decide(decision.Evidence(marker={"exit_code": 0}, log=res, has_log=True))
    assert decided.status == Status.NOT_CONVERGED
    assert "without an evaluation of top5; target top5 99.90%" in decided.reason
    # only the last evaluation lacks top5: the last one that gives it is the final figure
    last_only = re.sub(r'("event":"eval","epoch":2[^\n]*?),"top5":[-+.\deE]+', r"\1", text)
    res = suite.parse(io.StringIO(last_only), ctx)
    first = res.extra["evals"][0]["top5"]
    decided = decision.decide(decision.Evidence(marker={"exit_code": 0}, log=res, has_log=True))
    assert decided.status == Status.NOT_CONVERGED and f"at top5 {first:.2%}, short of the target" in decided.reason


def test_the_cells_csv_carries_final_top1_top5_and_time_to_target(tmp_path):
    """The real workload logs (one reached its target, one did not) collected: the cells CSV people load into
    pandas has the accuracy table's figures (they were in the markdown and JSON only)."""
    import csv
    import json
    import shutil

    from dlperf_slurm import cli

    d = tmp_path / "tree" / "1n1g"
    d.mkdir(parents=True)
    for rep, name in enumerate(("reached.log", "not-converged.log")):
        shutil.copyfile(FIXTURES / name, d / f"resnet50_b32_fp32_{rep}.log")
    out = tmp_path / "out"
    cli.main(["collect", "--from", str(tmp_path / "tree"), "--suite", "pytorch-ddp/resnet50", "--warmup-steps", "3",
              "--measure-steps", "100", "--out", str(out), "--no-plots", "--no-store", "--quiet"])
    (row,) = list(csv.DictReader(open(out / "tree.csv", encoding="utf-8")))
    (acc,) = json.loads((out / "tree.json").read_text())["accuracy"]
    assert float(row["top1"]) == pytest.approx(acc["top1"]) and float(row["top5"]) == pytest.approx(acc["top5"])
    assert float(row["top1"]) >= 0.75 and float(row["time_to_target_s"]) == pytest.approx(acc["time_to_target_s"])
    assert (row["target_metric"], float(row["target_value"]), row["n_not_converged"]) == ("top1", 0.75, "1"), row
    assert list(row)[: len(report_columns())] == list(report_columns())  # the cell's own columns keep their place


def report_columns() -> tuple[str, ...]:
    from dlperf_slurm.model.rows import CellRow, columns

    return columns(CellRow)
