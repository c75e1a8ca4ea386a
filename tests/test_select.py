"""Cell selection (``-k EXPR``, ``--exclude-cells EXPR``): the grammar over a real matrix's cells, checked against
the cells' own fields; its errors; and one meaning in plan, render, submit, status, cancel, collect, compare and
history, run as a user runs them (the local executor's real scripts with the test payload; a fake Slurm for
cancel)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import fakeslurm  # noqa: E402
from testlib import REPO, TEMPLATES, cli, write_matrix  # noqa: E402

from dlperf_slurm.errors import UserError  # noqa: E402
from dlperf_slurm.matrix import loader  # noqa: E402
from dlperf_slurm.matrix.select import Selection, View  # noqa: E402


@pytest.fixture(scope="module")
def bert_cells():
    import os

    os.environ.setdefault("DLPERF_SLURM_GPUS_PER_NODE", "8")
    return loader.load(REPO / "matrices" / "bert.toml", site=False).cells


def pick(cells, keep=None, drop=None):
    return [c.id for c in Selection(keep, drop).choose(cells, View.of_cell, say=False)]


# the expression, and the same selection written over the cells' own fields
CASES = [
    ("1x8 and amp", lambda c: (c.nodes, c.gpus_per_node) == (1, 8) and c.precision == "amp"),
    ("nodes>=2 and not b96", lambda c: c.nodes >= 2 and c.batch_size != 96),
    ("precision=amp and (b32 or b64)", lambda c: c.precision == "amp" and c.batch_size in (32, 64)),
    ("2n8g", lambda c: c.shape == "2n8g"),
    ("*b3*", lambda c: str(c.batch_size).startswith("3")),
    ("devices<=8 or NOT fp32", lambda c: c.devices <= 8 or c.precision != "fp32"),
    ("batch_size=96 AND gpus_per_node!=8", lambda c: c.batch_size == 96 and c.gpus_per_node != 8),
    ("model=bert* and b32", lambda c: c.model.startswith("bert") and c.batch_size == 32),
    ("pytorch-ddp/bert-base and 1x1", lambda c: c.suite == "pytorch-ddp/bert-base" and c.devices == 1),
    ("xla=false and batch > 32", lambda c: not c.xla and c.batch_size > 32),
]


@pytest.mark.parametrize("expr,same", CASES, ids=[c[0] for c in CASES])
def test_an_expression_selects_the_cells_its_words_name(bert_cells, expr, same):
    want = [c.id for c in bert_cells if same(c)]
    assert want and len(want) < len(bert_cells)  # each case selects some of the cells, not all
    assert pick(bert_cells, expr) == want


def test_exclude_cells_takes_away_what_k_kept(bert_cells):
    got = pick(bert_cells, "amp", "1x8 or b128")
    assert got == [c.id for c in bert_cells if c.precision == "amp" and c.shape != "1n8g" and c.batch_size != 128]
    assert pick(bert_cells, drop="amp") == [c.id for c in bert_cells if c.precision != "amp"]


def test_a_word_is_a_whole_part_of_the_id_not_any_substring(bert_cells):
    """``1x8`` never selects a ``11x8`` cell, nor ``b9`` a ``b96`` one: a word is a whole part; a glob reaches in."""
    ids = ["resnet50.tf2.11x8.b96.amp.xla0", "resnet50.tf2.1x8.b96.amp.xla0", "resnet50.tf2.1x8.b9.amp.xla0"]
    views = [View.of(i, "tf2-keras/resnet50") for i in ids]
    sel = Selection("1x8 and b96")
    assert [v.id for v in sel.choose(views, lambda v: v, say=False)] == [ids[1]]
    assert [v.id for v in Selection("*1x8*").choose(views, lambda v: v, say=False)] == ids


@pytest.mark.parametrize("expr,said", [
    ("resnet", "-k 'resnet': selects none of the 24 cells: no cell matches 'resnet'"),
    ("1x8 and 2x8", "each term matches some cell, but no cell matches them all"),
    ("bogus=3", "no axis 'bogus'"),
    ("(amp", "a '(' is not closed"),
    ("and amp", "'and' where a word was expected"),
    ("amp or", "it ends where a word was expected"),
    ("", "it is empty"),
    ("amp )", "unexpected ')'"),
    ("bert", "did you mean 'bert-base'"),
])
def test_a_selection_of_nothing_or_a_bad_expression_is_one_line_naming_it(bert_cells, expr, said):
    with pytest.raises(UserError) as err:
        Selection(expr or " ").choose(bert_cells, View.of_cell, say=False)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_whole_id_or_parts_of_it_in_a_row_select_as_pasted_from_a_table(bert_cells):
    one = bert_cells[0].id
    assert pick(bert_cells, one) == [one] and pick(bert_cells, one.upper()) == [one]
    assert pick(bert_cells, "pytorch-ddp.1x1") == [c.id for c in bert_cells if c.shape == "1n1g"]
    assert pick(bert_cells, "1x1.b32") == [c.id for c in bert_cells if c.shape == "1n1g" and c.batch_size == 32]
    with pytest.raises(UserError, match="no cell matches 'x1.b32'"):  # parts are whole, in a row too
        pick(bert_cells, "x1.b32")


def test_the_same_selection_is_one_file_name_and_another_is_another():
    names = {Selection(k).slug() for k in ("devices<2", "devices>=2", "devices!=2", "devices=2")}
    assert len(names) == 4 and all(n.startswith("k-devices-2-") for n in names)
    assert Selection("amp").slug() == Selection("amp").slug() != Selection(None, "amp").slug()
    assert len(Selection("x" * 5000).slug()) < 80


def test_odd_input_is_one_short_line_never_a_traceback(bert_cells):
    def error(keep=None, drop=None):
        with pytest.raises(UserError) as err:
            Selection(keep, drop).choose(bert_cells, View.of_cell, say=False)
        text = str(err.value)
        assert "\n" not in text and len(text) < 1200, text
        return text

    assert "nested deeper than 50" in error("(" * 300 + "amp" + ")" * 300)
    assert pick(bert_cells, "not " * 5001 + "amp") == pick(bert_cells, "not amp")  # odd: one not
    assert "it is empty" in error("")
    assert "'precision=' is half a comparison" in error("precision=")
    assert "'=amp' is half a comparison" in error("=amp")
    assert "'x' is not a number" in error("nodes>=x")
    assert "--exclude-cells leaves out every cell -k keeps" in error("amp", "*")
    assert "…" in error("w" * 100_000)
    assert pick(bert_cells, '"amp"') == pick(bert_cells, "amp") == pick(bert_cells, "precision='amp'")
    assert pick(bert_cells, "xla=no") == pick(bert_cells, "xla=false") == [c.id for c in bert_cells if not c.xla]


def test_repeated_options_combine_the_same_way_in_every_command():
    import argparse

    from dlperf_slurm.matrix.select import from_args

    sel = from_args(argparse.Namespace(keep=["1x1", "amp"], exclude_cells=["b32", "b64"]))
    assert sel == Selection("(1x1) and (amp)", "(b32) or (b64)")
    assert from_args(argparse.Namespace(keep=[""], exclude_cells=None)) == Selection("")


def test_the_view_reads_a_cells_axes_from_its_id_alone():
    """A stored cell has its id and suite only: the axes come from the id, as a matrix's cells' do."""
    v = View.of("bert-base.pytorch-ddp.2x8.b96.amp.xla1.launcher-srun.NCCL_ALGO-Ring", "pytorch-ddp/bert-base")
    assert v.values == {"suite": "pytorch-ddp/bert-base", "model": "bert-base", "framework": "pytorch-ddp",
                        "nodes": "2", "gpus": "8", "devices": "16", "batch": "96", "precision": "amp", "xla": "1",
                        "shape": "2n8g", "launcher": "srun", "nccl_algo": "ring"}
    assert Selection("env.NCCL_ALGO=ring and launcher=srun and xla=true").choose([v], lambda x: x, say=False)


# ---------------------------------------------------------------------------- one meaning in every command


def _ids_in(text: str, ids) -> set[str]:
    return {i for i in ids if i in text}


def test_k_means_the_same_in_every_command(tmp_path, monkeypatch):
    """The same ``-k`` and ``--exclude-cells`` on a campaign of 6 cells x 2 repeats (the local executor, the test
    payload's real scripts): each command sees exactly the 2 cells they select, and says "2 of 6 cells"."""
    monkeypatch.chdir(tmp_path)
    mx = write_matrix(tmp_path, name="sel", devices=("1x1", "1x2"), modes=("ok", "fail", "oom"), repeats=2)
    every = [c.id for c in loader.load(mx, site=False).cells]
    sel = ["-k", "1x1 or DLPERF_TEST_MODE=fail", "--exclude-cells", "1x2 and fail or oom"]
    want = {i for i in every if ".1x1." in i and not i.endswith("oom")}
    assert len(every) == 6 and len(want) == 2
    logs = tmp_path / "logs"
    common = ["--logs", str(logs)]

    p = cli(*common, "plan", str(mx), *sel, check=True)
    assert "2 of 6 cells of" in p.stderr and _ids_in(p.stdout, every) == want
    p = cli(*common, "render", str(mx), *sel, "--out", str(tmp_path / "r"), "--templates", str(TEMPLATES), check=True)
    assert "wrote 4 scripts" in p.stdout and len(list((tmp_path / "r").rglob("*.sbatch"))) == 4
    p = cli(*common, "submit", str(mx), *sel, "--executor", "local", "--templates", str(TEMPLATES), "--wait")
    assert "2 of 6 cells of" in p.stderr and "campaign sel: 4 runs (2 cells x 2 repeats)" in p.stdout, p.stderr
    from dlperf_slurm.campaign import manifest

    assert {r.cell_id for r in manifest.Manifest(logs / "sel").runs()} == want  # only what was asked is recorded

    p = cli(*common, "status", "sel", *sel)
    assert "2 of 6 cells of campaign sel selected" in p.stderr and _ids_in(p.stdout, every) == want
    assert p.returncode == 0  # one selected cell's runs are OK
    # the exit code a CI job reads is the selection's: every run of the cells given failed
    assert cli(*common, "status", "sel", "-k", "fail").returncode == 1
    assert cli(*common, "collect", "sel", "-k", "fail", "--no-store", "--no-plots", "-q",
               "--out", str(tmp_path / "fails")).returncode == 1
    p = cli(*common, "status", "sel", "-k", "oom")  # cells of the matrix no submit has asked for yet
    assert "2 of 6 cells" in p.stderr and "0 runs" in p.stdout
    assert "2 cells of the matrix not submitted yet" in p.stdout and "`submit` without -k adds them" in p.stdout
    p = cli(*common, "status", "sel")
    assert "4 cells of the matrix not submitted yet" in p.stdout

    out = tmp_path / "summaries"
    p = cli(*common, "collect", "sel", *sel, "--out", str(out), "--no-plots")
    assert "2 of 6 cells of sel selected" in p.stderr, p.stderr
    slug = Selection(sel[1], sel[3]).slug()
    assert slug.startswith("k-1x1-or-DLPERF_TEST_MODE-fail-x-1x2-and-fail-or-oom-")
    doc = json.loads((out / f"sel.{slug}.json").read_text())
    assert doc["sources"][0]["notes"][-1] == f"only the cells selected by {Selection(sel[1], sel[3]).describe()}: " \
        "2 of 6 cells"
    assert {r["cell_id"] for r in doc["runs"]} == want
    p = cli(*common, "collect", "sel", "--out", str(out), "--no-plots")  # the whole campaign: its own summary
    whole = out / "sel.json"
    assert {r["cell_id"] for r in json.loads(whole.read_text())["runs"]} == want

    p = cli(*common, "compare", str(whole), str(whole), "-k", "fail", "--out", str(out))
    assert "1 of 2 cells of the two sides selected" in p.stderr
    doc = json.loads((out / f"compare.sel.sel.{Selection('fail').slug()}.json").read_text())
    assert doc["selection"] == "-k 'fail'"
    compared = doc["cells"]
    assert {c["cell_id"] for c in compared} == {i for i in want if i.endswith("fail")}
    p = cli("history", "-k", "ok", "--wide")
    assert p.returncode == 0, p.stderr
    assert "1 of 2 cells stored" in p.stderr and _ids_in(p.stdout, every) == {i for i in want if i.endswith("ok")}

    # the rest of the matrix, later, into the same campaign (its matrix is the same: no new revision is asked)
    p = cli(*common, "submit", str(mx), "--executor", "local", "--templates", str(TEMPLATES), "--wait")
    assert "campaign sel: 12 runs (6 cells x 2 repeats)" in p.stdout, p.stdout + p.stderr
    assert {r.cell_id for r in manifest.Manifest(logs / "sel").runs()} == set(every)


def test_cancel_k_cancels_only_the_selected_cells_jobs(tmp_path, fake):
    mx = write_matrix(tmp_path, name="c", devices=("1x1", "1x2"), launchers=("srun",), repeats=2)
    logs = tmp_path / "logs"
    cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--templates", str(TEMPLATES), check=True)
    p = cli("cancel", "c", "-k", "1x2", "--logs", str(logs))  # a global option after the command
    assert p.returncode == 0, p.stderr
    assert "1 of 2 cells of campaign c selected" in p.stderr and "cancel requested for 2 runs" in p.stdout
    scancel = [c for c in fakeslurm.load(fake)["log"] if c[0] == "scancel"]
    from dlperf_slurm.campaign import manifest

    jobs = {r.job_id for r in manifest.Manifest(logs / "c").runs() if ".1x2." in r.cell_id}
    assert len(scancel) == 1 and set(scancel[0][1:]) & jobs == jobs and not set(scancel[0][1:]) - jobs - {"-Q"}
