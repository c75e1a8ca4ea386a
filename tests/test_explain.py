"""Issue 20.5: ``collect --explain`` shows where a run's figures and status come from, checked against real logs:
the step lines it quotes are the log's own (by line number), and its formula's numbers are the ones the log itself
prints (computed here from the log's text, not by the parser)."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from dlperf_slurm import cli
from dlperf_slurm.collect import explain, gather
from dlperf_slurm.errors import UserError

REAL = Path(__file__).parent / "fixtures" / "real"


def real(name: str) -> Path:
    """A real log of the corpus by its file name, wherever its program's folder keeps it."""
    found = sorted(REAL.rglob(Path(name).name))
    assert found, f"no real log {name} under {REAL}"
    return found[0]


def _tree(tmp_path: Path, src: Path, rel: str, rc: int | None = None) -> tuple[Path, Path]:
    log = tmp_path / "t" / rel
    log.parent.mkdir(parents=True)
    shutil.copy(src, log)
    if rc is not None:
        log.with_suffix(".exit").write_text(json.dumps({"rc": rc, "signal": "", "end": 1.0}))
    return tmp_path / "t", log


def _explain(root: Path, suite: str, what: str, warmup: int, measure: int) -> str:
    return explain.explain([gather.runs_from_tree(root, suite, warmup, measure)], what)


def _line(path: Path, n: int) -> str:
    return path.read_text().splitlines()[n - 1].strip()


def test_a_dllogger_run_its_window_lines_and_formula(tmp_path):
    src = real("ngc-tf1/convnets_training_benchmark_gpu1_fp32_bs128.log")
    root, log = _tree(tmp_path, src, "1n1g/rn50_b128_fp32_1.log")
    text = _explain(root, "ngc-tf1/resnet50", str(log), 210, 50)
    # the window's ends are DLLogger's steps 209 and 259 (0-based: the lines that end steps 210 and 260)
    lines = src.read_text().splitlines()
    at = {int(m.group(1)): i + 1 for i, ln in enumerate(lines) if (m := re.search(r"- \(0, (\d+)\) total_ips", ln))}
    first, last = at[209], at[259]
    assert f"first (window start): line {first} (step 210," in text and _line(src, first) in text
    assert f"last (window end): line {last} (step 260," in text and _line(src, last) in text
    stamp = lambda n: datetime.strptime(lines[n - 1].split(" - ")[0][4:], "%Y-%m-%d %H:%M:%S.%f")
    seconds = (stamp(last) - stamp(first)).total_seconds()
    assert f"128 x 50 / {seconds:.6g} s = {128 * 50 / seconds:.2f} img/s" in text
    ips = [float(lines[at[s] - 1].rsplit(":", 1)[1]) for s in range(210, 260)]  # steps 211..260: lines of 210..259
    assert f"mean of the 50 per-step figures the log prints in steps (210, 260] = {sum(ips) / 50:.2f} img/s" in text
    assert "published figure (speed flavour)" in text and "status: OK, by the decision table's row 3" in text


def test_a_suite_that_gathers_its_steps_first_maps_them_to_its_lines(tmp_path):
    # pytorch/examples' parser sums the ranks' Time per step after reading every line: its steps are still quoted
    # at the lines they came from (index i, 0-based, ends step i + 1)
    src = real("pytorch_examples_rn50_2n8g.excerpt.log")
    root, log = _tree(tmp_path, src, "1n8g/r50_b128_fp32_1.log")
    text = _explain(root, "pytorch-examples/resnet50", str(log), 2, 9)
    lines = src.read_text().splitlines()
    row = {int(m.group(1)): i + 1 for i, ln in enumerate(lines) if (m := re.match(r"Epoch: \[0\]\[\s*(\d+)/", ln))}
    assert f"first (window start): line {row[1]} (step 2," in text and f"last (window end): line {row[10]} (step 11," \
        in text
    times = [float(re.search(r"Time\s+(\S+)", lines[row[i] - 1]).group(1)) for i in range(2, 11)]
    seconds = sum(times)
    assert f"1024 x 9 / {seconds:.6g} s = {1024 * 9 / seconds:.2f} img/s" in text


def test_a_failed_run_says_the_row_and_quotes_its_error(tmp_path):
    src = REAL / "failures/heat_issue_2007_mpirun_root.log"
    root, log = _tree(tmp_path, src, "1n1g/r50_b128_fp32_1.log", rc=1)
    text = _explain(root, "pytorch-examples/resnet50", str(log), 2, 9)
    assert "status: LAUNCH_FAILED, by the decision table's row 12 (a failure exit); exit marker: rc 1" in text
    assert f"the log's last error ({log}:3): mpirun has detected an attempt to run as root." in text


def test_an_unrecognised_run_by_its_key_on_the_command_line(tmp_path, capsys):
    src = real("pytorch_examples_rn50_2n8g.excerpt.log")
    root = _tree(tmp_path, src, "1n8g/r50_b128_fp32_1.log", rc=0)[0]
    key = gather.runs_from_tree(root, "ngc-pytorch/resnet50", 2, 9).runs[0].key
    assert cli.main(["collect", "--from", str(root), "--suite", "ngc-pytorch/resnet50", "--explain", key]) == 2
    assert "read them: --suite pytorch-examples/resnet50" in capsys.readouterr().err  # refused first (20.3)
    text = _explain(root, "ngc-pytorch/resnet50", key, 2, 9)
    assert "status: UNRECOGNISED, by the decision table's row 14" in text and "no step line" in text
    assert "read by pytorch-examples/resnet50" in text


def test_an_unknown_run_is_one_line_naming_the_runs(tmp_path):
    root = _tree(tmp_path, real("pytorch_examples_rn50_2n8g.excerpt.log"), "1n8g/r50_b128_fp32_1.log")[0]
    with pytest.raises(UserError) as err:
        _explain(root, "pytorch-examples/resnet50", "nope.r1", 2, 9)
    assert "\n" not in str(err.value) and "resnet50.pytorch-examples.1x8.b128.fp32.xla0.r1" in str(err.value)


def test_a_campaign_run_by_its_key(tmp_path):
    # a campaign's run (the local executor, the test payload's step events): its key as the summaries name it
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "slurm"))
    from testlib import TEMPLATES, write_matrix
    from testlib import cli as run_cli

    mx = write_matrix(tmp_path, name="ex", repeats=1, modes=("ok", "fail"))
    logs = str(tmp_path / "logs")
    p = run_cli("--logs", logs, "submit", str(mx), "--executor", "local", "--templates", str(TEMPLATES), "--wait")
    assert p.returncode == 1, p.stdout + p.stderr  # the failing run
    keys = json.loads(run_cli("--logs", logs, "collect", "ex", "--no-plots", "--out", str(tmp_path / "s"),
                              check=True) and (tmp_path / "s" / "ex.json").read_text())["runs"]
    ok = next(r for r in keys if r["status"] == "OK")
    p = run_cli("--logs", logs, "collect", "ex", "--explain", ok["run"], check=True)
    log = Path(ok["log"])
    assert f"run {ok['run']}: suite pytorch-ddp/resnet50" in p.stdout and f"log {log}" in p.stdout
    first = next(i for i, ln in enumerate(log.read_text().splitlines(), 1) if '"step":1,' in ln)
    assert f"first (window start): line {first} (step 1," in p.stdout
    assert "status: OK, by the decision table's row -" in p.stdout and "the table over the log and the exit " \
        "marker alone, now: row 14" in p.stdout
    bad = next(r for r in keys if r["status"] != "OK")
    p = run_cli("--logs", logs, "collect", "ex", "--explain", bad["run"], check=True)
    assert f"status: {bad['status']}" in p.stdout and "exit marker: rc 3" in p.stdout


def _real_logs():
    from dlperf_slurm.suites import recognise

    for p in sorted(REAL.rglob("*.log")):
        for suite in recognise.readers(p):
            yield pytest.param(p, suite, id=f"{p.relative_to(REAL)}:{suite}")


@pytest.mark.parametrize("src,suite", list(_real_logs()))
def test_every_quoted_line_is_the_logs_own_on_every_real_log(tmp_path, src, suite):
    # every real log, with every suite that reads it: explain never fails, and each line it quotes by number is
    # that line of the log
    root, log = _tree(tmp_path, src, "1n1g/x_b1_fp32_1.log")
    text = _explain(root, suite, str(log), 1, 2)
    lines = src.read_text(errors="replace").splitlines()
    quoted = re.findall(r"line (\d+) \(step [^)]*\):\n      (.*)", text)
    for n, body in quoted:
        assert lines[int(n) - 1].strip()[:300] == body, (n, body)
    assert "status: " in text and "the log's verdict" in text
