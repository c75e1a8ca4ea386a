"""One campaign, one matrix (issue #31, part 5): a matrix changed under a campaign name already used is refused in
one line naming the keys that changed, offering a new name or the campaign's next revision (``--new-revision``);
what does not change what a run measures (comments, layout, description, the time limit) and more repeats are
accepted. Through the CLI, with the fake payloads of tests/slurm/templates on the local executor."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, matrix_text  # noqa: E402


def _submit(tmp_path: Path, text: str, *args: str, file: str = "m.toml"):
    mx = tmp_path / file
    mx.write_text(text)
    return cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--executor", "local", "--no-site", "--templates",
               str(TEMPLATES), *args, cwd=tmp_path)


def _refused(p) -> str:
    err = p.stderr.strip()
    assert p.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, p.stdout + p.stderr
    return err


def test_a_changed_matrix_under_a_used_name_is_refused_naming_the_keys(tmp_path):
    base = matrix_text(name="f", repeats=2)
    assert _submit(tmp_path, base, "--wait").returncode == 0
    cdir = tmp_path / "logs" / "f"
    before = (cdir / "manifest.sqlite").read_bytes(), (cdir / "matrix.toml").read_text()
    offer = ("its runs and these would mix: submit under a new name (--campaign NAME) or as a new revision of the "
             "campaign (--new-revision: f.r2)")
    err = _refused(_submit(tmp_path, base.replace("measure_steps = 1", "measure_steps = 50"), file="copy.toml"))
    assert err == (f"dlperf-slurm: error: campaign f ({cdir}) was submitted with another matrix: "
                   f"measure.measure_steps 1 -> 50; {offer}"), err
    err = _refused(_submit(tmp_path, base.replace("batch_size = [1]", "batch_size = [1, 2]")))
    assert "another matrix: axes.batch_size [1] -> [1, 2]; " in err, err
    err = _refused(_submit(tmp_path, base.replace("pytorch-ddp/resnet50", "pytorch-ddp/bert-base")))
    assert 'another matrix: suite ["pytorch-ddp/resnet50"] -> ["pytorch-ddp/bert-base"], ' in err, err
    err = _refused(_submit(tmp_path, base + "[options]\ntiny = true\n"))
    assert "another matrix: options.tiny false -> true; " in err, err
    err = _refused(_submit(tmp_path, base.replace("[slurm]", '[slurm]\npartition = "big"')))
    assert 'another matrix: slurm.partition null -> "big"; ' in err, err
    err = _refused(_submit(tmp_path, base.replace("repeats = 2", "repeats = 1")))
    assert "measure.repeats 2 -> 1 (fewer: the runs it holds stay in its summaries)" in err, err
    p = _submit(tmp_path, base.replace("measure_steps = 1", "measure_steps = 50"), "--campaign", "f")  # the same
    assert "another matrix: measure.measure_steps 1 -> 50" in _refused(p)
    assert ((cdir / "manifest.sqlite").read_bytes(), (cdir / "matrix.toml").read_text()) == before, \
        "a refused submit changed the campaign"
    # what does not change what a run measures, and more repeats, are the same campaign
    same = ("# a comment\n" + base.replace('name = "f"', 'name = "f"\ndescription = "again"')
            .replace('time = "00:10:00"', 'time = "00:20:00"').replace("\n", "\n\n"))
    p = _submit(tmp_path, same)
    assert p.returncode == 0 and "nothing to submit" in p.stdout, p.stdout + p.stderr
    p = _submit(tmp_path, same.replace("repeats = 2", "repeats = 3"), "--wait")
    assert p.returncode == 0 and "3 runs (1 cell x 3 repeats); submitting 1" in p.stdout, p.stdout + p.stderr


def test_new_revision_starts_the_next_and_continues_the_one_that_holds_the_matrix(tmp_path):
    base = matrix_text(name="f", repeats=2)
    changed = base.replace("measure_steps = 1", "measure_steps = 3")
    assert _submit(tmp_path, base).returncode == 0
    p = _submit(tmp_path, changed, "--new-revision")
    assert p.returncode == 0 and p.stdout.startswith("campaign f.r2: 2 runs"), p.stdout + p.stderr
    p = _submit(tmp_path, changed, "--new-revision")  # the latest revision holds it: continued
    assert p.returncode == 0 and p.stdout.startswith("campaign f.r2: 2 runs") and "nothing to submit" in p.stdout, p.stdout
    err = _refused(_submit(tmp_path, changed))
    assert err.endswith("(--new-revision: f.r2, which holds this matrix)"), err
    err = _refused(_submit(tmp_path, changed.replace("measure_steps = 3", "measure_steps = 4"), "--campaign", "f.r2"))
    assert "campaign f.r2 (" in err and "measure.measure_steps 3 -> 4" in err and err.endswith("f.r3)"), err
    p = _submit(tmp_path, changed.replace("measure_steps = 3", "measure_steps = 4"), "--new-revision")
    assert p.returncode == 0 and p.stdout.startswith("campaign f.r3: "), p.stdout + p.stderr
    p = _submit(tmp_path, base, "--new-revision")  # the first matrix again: its latest revision is f.r3
    assert p.returncode == 0 and p.stdout.startswith("campaign f.r4: "), p.stdout + p.stderr
    assert sorted(d.name for d in (tmp_path / "logs").iterdir()) == ["f", "f.r2", "f.r3", "f.r4"]


def test_a_campaign_from_before_the_record_is_compared_through_its_copy(tmp_path):
    base = matrix_text(name="f", repeats=2)
    assert _submit(tmp_path, base).returncode == 0
    db = sqlite3.connect(tmp_path / "logs" / "f" / "manifest.sqlite")
    with db:
        db.execute("DELETE FROM meta WHERE key = 'identity'")  # as a manifest written before it was recorded
    db.close()
    err = _refused(_submit(tmp_path, base.replace("warmup_steps = 1", "warmup_steps = 9")))
    assert "another matrix: measure.warmup_steps 1 -> 9; " in err, err
    p = _submit(tmp_path, "# the same, said again\n" + base)
    assert p.returncode == 0 and "nothing to submit" in p.stdout, p.stdout + p.stderr


def test_each_run_keeps_its_window_and_the_method_line_says_so_per_group(tmp_path):
    """A second ``search`` with other probe steps (the probe campaign's window changes; the probes it reuses were
    timed over the first): each probe is read and described with its own window; one summary of two campaigns of
    two windows says each campaign's."""
    logs = tmp_path / "logs"
    mx = tmp_path / "s.toml"
    mx.write_text('suite = "pytorch-ddp/resnet50"\nname = "s"\n[axes]\ndevices = ["1x1"]\nbatch_size = [1]\n'
                  '"env.DLPERF_TEST_OOM_ABOVE" = ["37"]\n[measure]\nrepeats = 1\nwarmup_steps = 1\nmeasure_steps = 1\n')
    args = ["--logs", str(logs), "search", str(mx), "--executor", "local", "--no-site", "--templates", str(TEMPLATES),
            "--limit", "64", "--no-run"]
    assert cli(*args, "--start", "8", "--probe-steps", "1,1").returncode == 0
    p = cli(*args, "--start", "4", "--probe-steps", "0,2")  # one new probe (4), timed over 0 + 2 steps
    assert p.returncode == 0, p.stdout + p.stderr
    out = tmp_path / "sum"
    p = cli("--logs", str(logs), "collect", "s.search", "--no-plots", "-q", "--no-store", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    method = next(line for line in (out / "s.search.md").read_text().splitlines() if line.startswith("Method"))
    assert "window: runs of one summary timed over different windows: skip 0 steps, time the next 2 (1 run: cell " \
           "resnet50.pytorch-ddp.1x1.b4.fp32.xla0.DLPERF_TEST_OOM_ABOVE-37); skip 1 step, time the next 1 (" in method, \
        method
    p = cli("--logs", str(logs), "collect", "s.search", "--explain",
            "resnet50.pytorch-ddp.1x1.b8.fp32.xla0.DLPERF_TEST_OOM_ABOVE-37.r0")
    assert p.returncode == 0 and "window: skip 1 step, time the next 1 " in p.stdout, p.stdout + p.stderr
    # one summary of two campaigns of two windows
    for name, steps in (("a", "1"), ("b", "2")):
        text = matrix_text(name=name).replace("warmup_steps = 1", "warmup_steps = 0" if name == "b" else
                                              "warmup_steps = 1").replace("measure_steps = 1", f"measure_steps = {steps}")
        assert _submit(tmp_path, text, "--wait", file=f"{name}.toml").returncode == 0
    p = cli("--logs", str(logs), "collect", "a", "b", "--no-plots", "-q", "--no-store", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    method = next(line for line in (out / "a_b.md").read_text().splitlines() if line.startswith("Method"))
    assert ("window: runs of one summary timed over different windows: skip 0 steps, time the next 2 (2 runs: "
            "campaign b); skip 1 step, time the next 1 (2 runs: campaign a);") in method, method
    # collect --matrix of a changed matrix reads and describes each run by the window it ran with
    changed = tmp_path / "a2.toml"
    changed.write_text(matrix_text(name="a").replace("measure_steps = 1", "measure_steps = 5"))
    p = cli("--logs", str(logs), "collect", "--matrix", str(changed), "--no-site", "--no-plots", "-q", "--no-store",
            "--out", str(out), "--name", "am")
    assert p.returncode == 0 and "2/2" in (out / "am.md").read_text(), p.stdout + p.stderr
    method = next(line for line in (out / "am.md").read_text().splitlines() if line.startswith("Method"))
    assert "window: skip 1 step, time the next 1;" in method, method
