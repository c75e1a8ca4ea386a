"""collect end to end: DLPerf-style trees in every suite's format, campaigns with a manifest (jobs still
running, then done), matrices without one, statuses and exit markers, summaries (markdown, CSV, JSON, SVG),
atomic rewriting and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from dlperf_slurm import cli, disk, stats, suites
from dlperf_slurm.collect import drive, gather
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.status import Status
from dlperf_slurm.report import tables, writers

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import logsynth as ls

SHAPES = [(1, 1), (1, 2), (2, 2)]


def make_tree(root: Path, suite: str, which: int = 0, repeats: int = 3, oom_shape=(2, 2), incomplete=(1, 2, 0),
              batch: int = 8, file_model: str = "m", scale: float = 1.0) -> dict:
    """A DLPerf-layout tree; returns cell shape -> the OK runs' expected throughputs (the flavour the suite
    publishes)."""
    from dlperf_slurm import suites

    flavour = "speed" if suites.get(suite).published == "speed" else "throughput"
    expected: dict[tuple, list[float]] = {}
    for n, g in SHAPES:
        d = root / f"{n}n{g}g"
        d.mkdir(parents=True, exist_ok=True)
        for r in range(repeats):
            oom = (n, g) == oom_shape
            cut = (n, g, r) == incomplete
            spec = ls.Spec(nodes=n, gpus=g, batch=batch, thr=scale * 100.0 * n * g * (0.9 if n * g > 1 else 1.0),
                           seed=r + 7 * n + g, warmup=5, measure=20, log_steps=5, bpi=5, noise=1,
                           steps=3 if oom else (17 if cut else None), oom=oom)
            text, exp = ls.write(suite, spec, which)
            (d / f"{file_model}_b{batch}_fp32_{r}.log").write_text(text)
            if not oom and not cut:
                expected.setdefault((n, g), []).append(exp[flavour])
    return expected


def run_cli(*argv: str) -> int:
    return cli.main(list(argv))


def read_cells(out: Path, name: str) -> dict[str, dict]:
    doc = json.loads((out / f"{name}.json").read_text())
    return {c["shape"]: c for c in doc["cells"]}


# ------------------------------------------------------------------------------------ import, every suite

SUITE_FORMATS = [(s, i) for s, ws in ls.WRITERS.items() for i in range(len(ws))]


def tree_option(suite: str) -> tuple[str, ...]:
    """logsynth's horovod logs print every 5th batch: the option that says so, for the suite that has it."""
    return ("--option", "batches_per_iter=5") if "batches_per_iter" in suites.get(suite).options else ()


@pytest.mark.parametrize("suite,which", SUITE_FORMATS, ids=[f"{s}-{ls.WRITERS[s][i].__name__}" for s, i in SUITE_FORMATS])
def test_import_dlperf_tree_in_every_format(tmp_path, suite, which, capsys):
    root = tmp_path / "logs_tree"
    expected = make_tree(root, suite, which)
    out = tmp_path / "summaries"
    rc = run_cli("collect", "--from", str(root), "--suite", suite, "--warmup-steps", "5", "--measure-steps", "20",
                 *tree_option(suite), "--out", str(out), "--no-plots", "--jobs", "1", "--quiet")
    assert rc == 0
    cells = read_cells(out, "logs_tree")
    one = cells["1n1g"]
    assert one["n"] == 3 and one["n_ok"] == 3
    assert one["median"] == pytest.approx(stats.median(expected[(1, 1)]), rel=1e-9)
    two = cells["1n2g"]  # one of its runs was killed mid-run: INCOMPLETE, kept out of the median
    assert two["n_ok"] == 2 and two["statuses"] == {"INCOMPLETE": 1, "OK": 2} and "few_ok" in two["flags"]
    assert two["median"] == pytest.approx(stats.median(expected[(1, 2)]), rel=1e-9)
    assert two["speedup"] == pytest.approx(two["median"] / one["median"], rel=1e-12)
    assert two["efficiency"] == pytest.approx(two["speedup"] / 2, rel=1e-12)
    oom = cells["2n2g"]
    assert oom["status"] == Status.OOM and oom["median"] is None and oom["speedup"] is None
    md = (out / "logs_tree.md").read_text()
    assert "| 2n2g    | 4      | OOM" in md
    assert stats.fmt(two["median"]) in md and stats.fmt(two["speedup"]) in md
    assert "`2n2g` OOM: out of memory" in md
    runs_csv = (out / "logs_tree.runs.csv").read_text().splitlines()
    assert len(runs_csv) == 1 + 3 * len(SHAPES)


RUN_COLUMNS = ("campaign,suite,framework,model,cell_id,shape,nodes,gpus_per_node,devices,batch_size,global_batch,"
               "precision,xla,launcher,variant,repeat,run,job_id,hosts,status,reason,throughput,throughput_time,"
               "throughput_speed,published,unit,latency_ms,steps_seen,window_start,window_end,window_steps,"
               "mem_peak_mib,mem_gpu0_mib,mem_allocator_mib,mem_reason,gpu_util,loss_finite,tiny,exit_code,"
               "scheduler_state,garbled_lines,log,log_bytes,parse_seconds,provenance,extra,health,health_busbw_gbs,"
               "energy_j_per_step,power_w_per_gpu,samples_per_joule,energy_basis,energy_reason")
CELL_COLUMNS = ("campaign,suite,framework,model,cell_id,shape,nodes,gpus_per_node,devices,batch_size,global_batch,"
                "precision,xla,launcher,variant,status,display,n,n_ok,median,min,max,mean,stdev,cv,median_time,"
                "median_speed,published,unit,speedup,efficiency,baseline,latency_ms,mem_peak_mib,mem_gpu0_mib,"
                "mem_allocator_mib,mem_reason,gpu_util,tflops_per_gpu,mfu,flags,tiny,statuses,reason,ci_low,ci_high,"
                "ci_coverage,ceiling_tflops,mfu_ceiling,searched,samples_per_joule,samples_per_joule_ci_low,"
                "samples_per_joule_ci_high,power_w_per_gpu,energy_j_per_step,energy_basis,energy_reason,layout")


def test_typed_rows_are_the_published_columns(tmp_path):
    """The CSV columns are the rows' fields, in the order users' scripts read them; the JSON holds the same keys."""
    from dlperf_slurm.model.rows import CellRow, RunRow, columns

    assert ",".join(columns(RunRow)) == RUN_COLUMNS and ",".join(columns(CellRow)) == CELL_COLUMNS
    root = tmp_path / "t"
    make_tree(root, "tf-cnn/resnet50")
    res = drive.collect([gather.runs_from_tree(root, "tf-cnn/resnet50", 5, 20)], jobs=1)
    assert all(isinstance(r, RunRow) for r in res.runs) and all(isinstance(c, CellRow) for c in res.cells)
    writers.write_all(res, tmp_path / "out", plots=False)
    assert (tmp_path / "out" / "t.runs.csv").read_text().splitlines()[0] == RUN_COLUMNS
    assert (tmp_path / "out" / "t.csv").read_text().splitlines()[0] == CELL_COLUMNS
    doc = json.loads((tmp_path / "out" / "t.json").read_text())
    assert [list(r) for r in doc["runs"]] == [RUN_COLUMNS.split(",")] * len(res.runs)
    assert [list(c) for c in doc["cells"]] == [CELL_COLUMNS.split(",")] * len(res.cells)


def test_collect_calls_every_registered_writer_with_typed_rows(tmp_path, capsys):
    """An output format is one function: registered, ``collect`` calls it with the typed rows (the plots are the
    only writer ``--no-plots`` leaves out)."""
    from dlperf_slurm.model.rows import CellRow, RunRow

    root = tmp_path / "t"
    make_tree(root, "tf-cnn/resnet50", repeats=1)
    seen = []

    @writers.writer("toy")
    def toy(result, out, stem):
        seen.append(result)
        path = out / f"{stem}.toy"
        path.write_text(f"{len(result.runs)} runs, {len(result.cells)} cells\n")
        return [path]

    try:
        assert writers.WRITERS["toy"] is toy and list(writers.WRITERS)[:5] == ["md", "csv", "json", "html", "svg"]
        out = tmp_path / "out"
        assert run_cli("collect", "--from", str(root), "--suite", "tf-cnn/resnet50", "--warmup-steps", "5",
                       "--measure-steps", "20", "--out", str(out), "--no-plots", "--jobs", "1", "--quiet") == 0
    finally:
        del writers.WRITERS["toy"]
    (result,) = seen
    assert len(result.runs) == 3 and all(isinstance(r, RunRow) for r in result.runs)
    assert len(result.cells) == 3 and all(isinstance(c, CellRow) for c in result.cells)
    assert (out / "t.toy").read_text() == "3 runs, 3 cells\n" and str(out / "t.toy") in capsys.readouterr().out
    # the summaries, and (hidden) the parse cache and writer state of `collect --from` (issue #13)
    assert sorted(p.name for p in out.iterdir()) == [".t.cache.sqlite", "t.csv", "t.html", "t.json", "t.md",
                                                     "t.runs.csv", "t.toy"]
    assert "toy" not in writers.WRITERS


def test_import_keeps_precision_xla_and_subtrees_apart(tmp_path):
    root = tmp_path / "dlperf"
    for sub, batch in (("bz64", 64), ("bz128", 128)):
        for n, g in SHAPES[:2]:
            d = root / sub / f"{n}n{g}g"
            d.mkdir(parents=True)
            for prec, xla in (("fp32", ""), ("amp", ""), ("amp", "_xla")):
                spec = ls.Spec(nodes=n, gpus=g, batch=batch, warmup=5, measure=20, thr=50.0 * n * g)
                (d / f"r50_b{batch}_{prec}{xla}_0.log").write_text(ls.dll_rn50(spec)[0])
    res = drive.collect([gather.runs_from_tree(root, "ngc-pytorch/resnet50", 5, 20)], jobs=1)
    keys = {(c.precision, c.xla, c.batch_size, c.shape) for c in res.cells}
    assert len(res.cells) == 2 * 3 * 2 and ("amp", True, 128, "1n2g") in keys
    for c in res.cells:  # every 1n2g cell has its own 1n1g baseline: same precision, xla, batch
        if c.shape == "1n2g":
            base = next(b for b in res.cells if b.cell_id == c.baseline)
            assert (base.precision, base.xla, base.batch_size, base.shape) == \
                   (c.precision, c.xla, c.batch_size, "1n1g")


def test_import_keeps_subtrees_of_the_same_batch_and_precision_apart(tmp_path):
    """Two subtrees alike in all but their folder (two log roots of one model, DLPerf's layout for a second
    campaign or machine) pooled into the first subtree's cells, with duplicate run keys: medians of 6 runs from
    both, one speedup against a baseline mixing both."""
    root = tmp_path / "dlperf"
    exp = {sub: make_tree(root / sub, "tf-cnn/resnet50", oom_shape=None, incomplete=None, file_model="r50",
                          scale=scale) for sub, scale in (("fast", 1.0), ("slow", 0.5))}
    col = gather.runs_from_tree(root, "tf-cnn/resnet50", 5, 20)
    assert len({r.key for r in col.runs}) == len(col.runs) == 2 * 3 * len(SHAPES)
    res = drive.collect([col], jobs=1)
    assert len(res.cells) == 2 * len(SHAPES)
    for c in res.cells:
        sub = dict(p.split("=") for p in c.variant.split(", "))["tree"]
        assert c.n == c.n_ok == 3 and c.median == pytest.approx(stats.median(exp[sub][(c.nodes, c.gpus_per_node)]))
        assert c.speedup == pytest.approx(c.median / stats.median(exp[sub][(1, 1)]))


def test_import_errors(tmp_path):
    assert run_cli("collect", "--from", str(tmp_path), "--suite", "tf2/resnet50", "--out", str(tmp_path)) == 2
    assert run_cli("collect", "--from", str(tmp_path), "--out", str(tmp_path)) == 2  # --suite missing
    assert run_cli("collect", "--from", str(tmp_path), "--suite", "nope/x", "--out", str(tmp_path)) == 2


def test_import_refuses_a_folder_holding_the_logs_of_two_models(tmp_path, capsys):
    """resnet50_b8_fp32_0.log and resnet101_b8_fp32_0.log in one shape folder pooled into one cell (a median
    of ~75 from values near 100 and 50, only CV>5% hinting at it). The model part of DLPerf's names cannot pick
    the suite's logs (r50_, rn50_, OneFlow's ResNet-50 logs as bert_base_), so the tree is refused, naming the
    models; each model in a folder of its own, the same --from reads both apart."""
    root = tmp_path / "tree"
    exp = {"resnet50": make_tree(root, "tf-cnn/resnet50", oom_shape=None, incomplete=None, file_model="resnet50"),
           "resnet101": make_tree(root, "tf-cnn/resnet50", oom_shape=None, incomplete=None,
                                  file_model="resnet101", scale=0.5)}
    out = tmp_path / "out"
    assert run_cli("collect", "--from", str(root), "--suite", "tf-cnn/resnet50", "--warmup-steps", "5",
                   "--measure-steps", "20", "--out", str(out), "--jobs", "1", "--quiet") == 2
    err = capsys.readouterr().err
    assert "2 models: resnet101 (9 files, e.g. 1n1g/resnet101_b8_fp32_0.log), resnet50 (9 files" in err
    assert "point --from at it" in err and not out.exists()
    with pytest.raises(UserError, match="would pool into the same cells"):
        gather.runs_from_tree(root / "1n2g", "tf-cnn/resnet50", 5, 20)  # a shape folder itself, too
    for model in exp:  # one folder per model under the same --from: two groups, each its own medians
        for log in root.glob(f"*/{model}_*.log"):
            (root / model / log.parent.name).mkdir(parents=True, exist_ok=True)
            log.rename(root / model / log.parent.name / log.name)
    res = drive.collect([gather.runs_from_tree(root, "tf-cnn/resnet50", 5, 20)], jobs=1)
    assert len(res.cells) == 2 * len(SHAPES)
    for c in res.cells:
        model = dict(p.split("=") for p in c.variant.split(", "))["tree"]
        assert c.n_ok == 3 and c.median == pytest.approx(stats.median(exp[model][(c.nodes, c.gpus_per_node)]))
        assert c.speedup == pytest.approx(c.median / stats.median(exp[model][(1, 1)]))


@pytest.mark.parametrize("window", [("--measure-steps", "0"), ("--warmup-steps", "-1")])
def test_import_refuses_a_window_a_matrix_would_refuse(tmp_path, capsys, window):
    """--measure-steps 0 gave a one-step figure under "time the next 0"; a matrix says measure_steps >= 1 and
    warmup_steps >= 0, and so does --from."""
    root = tmp_path / "tree"
    make_tree(root, "ngc-pytorch/resnet50")
    out = tmp_path / "out"
    assert run_cli("collect", "--from", str(root), "--suite", "ngc-pytorch/resnet50", *window,
                   "--out", str(out), "--jobs", "1", "--quiet") == 2
    assert f"{window[0]} {window[1]}: expected an integer >=" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(UserError):
        gather.runs_from_tree(root, "ngc-pytorch/resnet50", 5, 0)


@pytest.mark.parametrize("flag", [("--warmup-steps", "5"), ("--measure-steps", "20"),
                                  ("--option", "batches_per_iter=5")])
def test_import_flags_without_from_are_refused_not_ignored(tmp_path, capsys, flag):
    """They only shape the reading of a --from tree; on a campaign (its own window) they used to be dropped."""
    assert run_cli("--logs", str(tmp_path / "logs"), "collect", "smoke", *flag, "--out", str(tmp_path)) == 2
    assert f"{flag[0]} goes with --from DIR" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- campaign + manifest


def _smoke_matrix(tmp_path: Path) -> Path:
    p = tmp_path / "smoke.toml"
    p.write_text('suite = "pytorch-ddp/resnet50"\nname = "smoke"\n[axes]\ndevices = ["1x1", "1x2"]\n'
                 'batch_size = [4]\n[options]\ntiny = true\n[measure]\nrepeats = 3\nwarmup_steps = 2\n'
                 'measure_steps = 5\n[slurm]\ntime = "00:10:00"\ngpu_request = "none"\n')
    return p


def _write_run(run, spec: ls.Spec, rc: int | None = 0) -> dict:
    text, exp = ls.dlperf(spec)
    run.log.parent.mkdir(parents=True, exist_ok=True)
    run.log.write_text(text)
    if rc is not None:
        run.marker.write_text(json.dumps({"rc": rc, "signal": "", "end": 0, "job": "1"}))
    return exp


def test_campaign_while_running_then_finished(tmp_path, capsys):
    from dlperf_slurm.campaign import manifest
    from dlperf_slurm.matrix import loader

    m = loader.load(_smoke_matrix(tmp_path), site=False)
    cdir = tmp_path / "logs" / "smoke"
    runs = loader.runs(m, cdir)
    man = manifest.Manifest(cdir, create=True)
    man.sync(m, runs)

    def set_status(key, status, job):
        with man.write() as db:
            db.execute("UPDATE runs SET status=?, job_id=?, executor='none' WHERE key=?", (status, job, key))

    by = {(r.cell.gpus_per_node, r.repeat): r for r in runs}
    spec = lambda g, r: ls.Spec(nodes=1, gpus=g, batch=4, warmup=2, measure=5, seed=10 * g + r, tiny=True, mem=False)
    exp = {}
    exp[(1, 0)] = _write_run(by[(1, 0)], spec(1, 0))
    set_status(by[(1, 0)].key, "OK", "11_0")
    _write_run(by[(1, 1)], ls.Spec(nodes=1, gpus=1, batch=4, warmup=2, measure=5, steps=4, tiny=True), rc=None)
    set_status(by[(1, 1)].key, "RUNNING", "11_1")
    set_status(by[(1, 2)].key, "PENDING", "11_2")
    for r in range(3):
        set_status(by[(2, r)].key, "PENDING", f"12_{r}")
    out = tmp_path / "summaries"
    assert run_cli("--logs", str(tmp_path / "logs"), "collect", "smoke", "--out", str(out), "--no-refresh",
                   "--no-plots", "--jobs", "1") == 0
    printed = capsys.readouterr().out
    cells = read_cells(out, "smoke")
    assert cells["1n2g"]["display"] == "pending 3/3" and cells["1n2g"]["median"] is None
    assert cells["1n1g"]["n_ok"] == 1 and cells["1n1g"]["statuses"] == {"OK": 1, "PENDING": 1, "RUNNING": 1}
    md = (out / "smoke.md").read_text()
    assert "pending 3/3" in md and "pending 3/3" in printed
    assert tables.TINY in md  # tiny runs are labelled
    assert "speedup" in md and "1n2g    | 2      | pending 3/3" in md

    # later: everything ended (one OOM, one failed exit) and collect runs again over the same files
    for r in (1, 2):
        exp[(1, r)] = _write_run(by[(1, r)], spec(1, r))
        set_status(by[(1, r)].key, "OK", f"11_{r}")
    for r in range(3):
        if r == 2:
            s = ls.Spec(nodes=1, gpus=2, batch=4, warmup=2, measure=5, steps=1, oom=True, tiny=True)
            _write_run(by[(2, r)], s, rc=1)
            set_status(by[(2, r)].key, "FAILED", f"12_{r}")
        else:
            exp[(2, r)] = _write_run(by[(2, r)], spec(2, r))
            set_status(by[(2, r)].key, "OK", f"12_{r}")
    before = {p.name for p in out.iterdir()}
    assert run_cli("--logs", str(tmp_path / "logs"), "collect", str(cdir), "--out", str(out), "--no-refresh",
                   "--jobs", "2", "--quiet") == 0
    after = {p.name for p in out.iterdir()}
    assert not [n for n in after if n.endswith(".tmp")]  # atomic rewrite leaves no temporary file
    assert before <= after and "smoke.pytorch-ddp_resnet50.svg" in after
    svg = ElementTree.parse(out / "smoke.pytorch-ddp_resnet50.svg").getroot()  # well-formed, the plot's texts
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert svg.get("viewBox") == "0 0 1320 528" and "pytorch-ddp/resnet50: throughput" in texts
    assert texts.count("GPUs") == 2 and "fp32, b4 (tiny)" in texts and "scaling efficiency (%)" in texts
    cells = read_cells(out, "smoke")
    one, two = cells["1n1g"], cells["1n2g"]
    assert one["n_ok"] == 3 and one["median"] == pytest.approx(stats.median(e["throughput"] for k, e in exp.items()
                                                                            if k[0] == 1), rel=1e-9)
    assert two["n_ok"] == 2 and two["statuses"] == {"OK": 2, "OOM": 1}
    assert two["median"] == pytest.approx((exp[(2, 0)]["throughput"] + exp[(2, 1)]["throughput"]) / 2, rel=1e-9)
    assert two["speedup"] == pytest.approx(two["median"] / one["median"])
    assert one["mem_reason"] == "no CUDA device (CPU run): GPU memory not measured"
    runs = json.loads((out / "smoke.json").read_text())["runs"]
    oom = next(r for r in runs if r["status"] == "OOM")
    assert oom["exit_code"] == 1 and "out of memory" in oom["reason"].lower()
    assert all(r["provenance"].get("job_id") == "4242" for r in runs)


def test_matrix_without_manifest_and_exit_markers(tmp_path):
    from dlperf_slurm.matrix import loader

    m = loader.load(_smoke_matrix(tmp_path), site=False)
    cdir = tmp_path / "camp"
    runs = loader.runs(m, cdir)
    spec = lambda g, r, **kw: ls.Spec(nodes=1, gpus=g, batch=4, warmup=2, measure=5, seed=r, **kw)
    _write_run(runs[0], spec(1, 0))  # OK
    _write_run(runs[1], spec(1, 1), rc=3)  # the window completed, then the job exited 3: FAILED
    _write_run(runs[2], spec(1, 2, steps=4), rc=None)  # no marker, short: INCOMPLETE
    runs[3].log.parent.mkdir(parents=True, exist_ok=True)
    runs[3].log.write_text("")  # empty log + marker rc 1: LAUNCH_FAILED
    runs[3].marker.write_text('{"rc": 1, "signal": ""}')
    _write_run(runs[4], spec(2, 4, steps=4), rc=143)  # killed by a signal at step 4: FAILED with the rc
    runs[4].marker.write_text('{"rc": 143, "signal": "TERM"}')
    (runs[4].base.parent / (runs[4].base.name + ".slurm-77.out")).write_text(
        "slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***\n")
    # runs[5]: never ran
    res = drive.collect([gather.runs_from_matrix(m.path, cdir, site=False)], jobs=1)
    st = {r.run: (r.status, r.reason) for r in res.runs}
    keys = [r.key for r in runs]
    assert st[keys[0]][0] == Status.OK
    assert st[keys[1]] == (Status.FAILED, "exit code 3 after the window completed")
    assert st[keys[2]][0] == Status.INCOMPLETE and "no exit marker" in st[keys[2]][1]
    assert st[keys[3]][0] == Status.LAUNCH_FAILED and st[keys[3]][1].startswith("exit code 1")
    assert st[keys[4]][0] == Status.TIMEOUT  # from the job's own --output file: slurmstepd's banner
    assert st[keys[5]][0] == Status.UNSUBMITTED
    cells = {c.shape: c for c in res.cells}
    assert cells["1n1g"].n_ok == 1 and cells["1n1g"].flags[:1] == ["few_ok"]
    assert cells["1n2g"].status == Status.PENDING and cells["1n2g"].display == "not submitted 1/3"


def test_missing_baseline_leaves_speedup_empty(tmp_path):
    root = tmp_path / "t"
    make_tree(root, "tf-cnn/resnet50", oom_shape=(1, 1), incomplete=None)
    res = drive.collect([gather.runs_from_tree(root, "tf-cnn/resnet50", 5, 20)], jobs=1)
    cells = {c.shape: c for c in res.cells}
    assert cells["1n1g"].status == Status.OOM
    assert cells["1n2g"].n_ok == 3 and cells["1n2g"].speedup is None and cells["1n2g"].efficiency is None
    _headers, rows = tables.group_table([cells["1n1g"], cells["1n2g"]])
    assert rows[1][3] == "" and rows[1][4] == ""  # never 1.0 or 0


def test_a_parser_crash_is_a_parse_error_run(tmp_path, monkeypatch):
    from dlperf_slurm import suites

    root = tmp_path / "t"
    make_tree(root, "horovod-synthetic/resnet50", oom_shape=None, incomplete=None, repeats=1)

    def boom(self, lines, ctx):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(type(suites.get("horovod-synthetic/resnet50")), "parse", boom)
    res = drive.collect([gather.runs_from_tree(root, "horovod-synthetic/resnet50", 5, 20,
                                                  {"batches_per_iter": 5})], jobs=1)
    assert {r.status for r in res.runs} == {Status.PARSE_ERROR}
    assert "ZeroDivisionError: bug" in res.runs[0].reason
    assert {c.display for c in res.cells} == {Status.PARSE_ERROR}


def test_cross_suite_table(tmp_path):
    cols = []
    for suite, thr in (("ngc-pytorch/resnet50", 100.0), ("tf2/resnet50", 90.0)):
        root = tmp_path / suite.replace("/", "_")
        for n, g in SHAPES:
            for prec, f in (("fp32", 1.0), ("amp", 2.5)):
                d = root / f"{n}n{g}g"
                d.mkdir(parents=True, exist_ok=True)
                spec = ls.Spec(nodes=n, gpus=g, batch=8, warmup=5, measure=20, log_steps=5, thr=thr * f * n * g)
                (d / f"rn50_b8_{prec}_0.log").write_text(ls.write(suite, spec)[0])
        cols.append(gather.runs_from_tree(root, suite, 5, 20))
    res = drive.collect(cols, jobs=1, name="all")
    (model, headers, rows), = tables.cross_suite(res.cells)
    assert model == "resnet50" and headers[2:] == ["FP32 throughput", "speedup", "AMP throughput", "speedup"]
    assert [r[0] for r in rows] == ["ngc-pytorch/resnet50", "tf2/resnet50"] and rows[0][1] == "2n2g"
    ngc_amp = next(c for c in res.cells if c.suite == "ngc-pytorch/resnet50" and c.shape == "2n2g"
                   and c.precision == "amp")
    assert rows[0][4] == f"{stats.fmt(ngc_amp.median)} (b8)" and rows[0][5] == stats.fmt(ngc_amp.speedup)
    text = writers.terminal(res)
    assert "resnet50 across suites" in text


def test_atomic_write_replaces_whole_files(tmp_path):
    p = tmp_path / "x.md"
    disk.atomic_write(p, "old")
    disk.atomic_write(p, "new", durable=True)
    assert p.read_text() == "new" and [q.name for q in tmp_path.iterdir()] == ["x.md"]
    assert oct(p.stat().st_mode & 0o777) != "0o600"


def test_cli_start_imports_no_heavy_module():
    heavy = ('numpy', 'tabulate', 'submitit', 'torch', 'jinja2', 'sqlite3', 'dlperf_slurm.submit.journal',
             'dlperf_slurm.collect.drive', 'dlperf_slurm.report.writers', 'dlperf_slurm.parsing', 'dlperf_slurm.campaign.tracking',
             'dlperf_slurm.schedulers.slurm')
    code = ("import sys; from dlperf_slurm import cli; cli.build_parser(); "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent)
    assert out.stdout.strip() == "[]"


def test_two_campaigns_of_one_suite_never_pool_their_runs(tmp_path):
    cols, expected = [], {}
    for name, scale in (("monday", 1.0), ("tuesday", 0.5)):  # tuesday's machine is twice as slow
        root = tmp_path / name
        exp = make_tree(root, "tf-cnn/resnet50", oom_shape=None, incomplete=None, batch=8, scale=scale)
        expected[name] = {k: stats.median(v) for k, v in exp.items()}
        cols.append(gather.runs_from_tree(root, "tf-cnn/resnet50", 5, 20, name=name))
    res = drive.collect(cols, jobs=1)
    assert len(res.cells) == 2 * len(SHAPES) and all(c.n == 3 for c in res.cells)
    for c in res.cells:  # each campaign's own medians and its own 1n1g baseline
        assert c.median == pytest.approx(expected[c.campaign][(c.nodes, c.gpus_per_node)], rel=1e-9)
        assert c.speedup == pytest.approx(c.median / expected[c.campaign][(1, 1)], rel=1e-9)
    (_, _, rows), = tables.cross_suite(res.cells)
    assert [r[0] for r in rows] == ["tf-cnn/resnet50 (monday)", "tf-cnn/resnet50 (tuesday)"]
    assert "campaign monday" in writers.markdown(res)


def test_cell_tflops_and_mfu_from_the_logged_flops_per_sample():
    from dlperf_slurm.collect.cells import _compute_rate

    ok = [{}, {"flops_per_sample": 24.54e9, "peak_tflops_per_gpu": 312.0}]  # the OK runs' extra
    rate = _compute_rate(2400.0, 8, ok)  # 2400 img/s on 8 GPUs = 300 img/s per GPU
    assert rate["tflops_per_gpu"] == pytest.approx(300 * 24.54e9 / 1e12)
    assert rate["mfu"] == pytest.approx(300 * 24.54e9 / 1e12 / 312.0)
    assert _compute_rate(2400.0, 8, [{"flops_per_sample": 1e9}])["mfu"] is None  # no peak (CPU)
    assert _compute_rate(None, 8, ok) == {"tflops_per_gpu": None, "mfu": None, "ceiling_tflops": None,
                                          "mfu_ceiling": None}  # no OK run


def test_mfu_against_the_measured_ceiling_and_the_flags_instead_of_a_wrong_mfu():
    from dlperf_slurm.collect.cells import _compute_rate, _rate_flags

    ok = [{"flops_per_sample": 24.54e9, "peak_tflops_per_gpu": 989.0, "ceiling_tflops_per_gpu": 780.0},
          {"flops_per_sample": 24.54e9, "peak_tflops_per_gpu": 989.0, "ceiling_tflops_per_gpu": 790.0}]
    rate = _compute_rate(16000.0, 8, ok)  # 2000 img/s per GPU
    tflops = 2000 * 24.54e9 / 1e12
    assert rate["ceiling_tflops"] == 790.0  # the best measurement of the campaign's runs
    assert rate["mfu_ceiling"] == pytest.approx(tflops / 790.0) and rate["mfu"] == pytest.approx(tflops / 989.0)
    assert _rate_flags(rate) == []
    # a wrong peak row (published tools showed 104-152 % MFU): flagged, and the table prints no MFU figure
    wrong = _compute_rate(16000.0, 8, [{"flops_per_sample": 24.54e9, "peak_tflops_per_gpu": 40.0}])
    assert wrong["mfu"] > 1 and _rate_flags(wrong) == ["mfu_over_100"]
    cpu = _compute_rate(50.0, 1, [{"flops_per_sample": 1e9, "ceiling_tflops_per_gpu": 0.2}])
    assert _rate_flags(cpu) == ["no_peak"] and cpu["mfu_ceiling"] == pytest.approx(50e9 / 1e12 / 0.2)


def test_a_failed_cells_reason_is_one_of_its_status():
    """3 OOM runs (each its own step in its reason) and 2 TIMEOUT runs (one reason): the cell reads OOM, and the
    reason beside it must be an OOM's, not the TIMEOUT's that happens to repeat."""
    from dataclasses import fields

    from dlperf_slurm.collect.cells import cells_of
    from dlperf_slurm.model.rows import RunRow

    def run(repeat, status, reason):
        base = {f.name: None for f in fields(RunRow)}
        return RunRow(**{**base, "campaign": "c", "suite": "s", "cell_id": "a", "shape": "2n8g", "nodes": 2,
                         "gpus_per_node": 8, "devices": 16, "batch_size": 8, "repeat": repeat, "status": status,
                         "reason": reason, "tiny": False, "extra": {}, "mem_reason": ""})

    runs = [run(i, Status.OOM, f"out of memory at step {3 + i} of 120: CUDA out of memory") for i in range(3)]
    runs += [run(3 + i, Status.TIMEOUT, "the scheduler says TIMEOUT") for i in range(2)]
    cell, = cells_of(runs, {"a": 5})
    assert cell.status == Status.OOM and cell.reason.startswith("out of memory at step")
    pending = cells_of(runs + [run(5, Status.PENDING, "")], {"a": 6})[0]  # no reason of its own status: any failure's
    assert pending.status == Status.PENDING and pending.reason


@pytest.mark.parametrize("option, said", [("no_such=1", "--option no_such: tf-cnn/resnet50 has no such option"),
                                          ("batches_per_iter=0", "--option batches_per_iter=0: must be at least 1")])
def test_import_options_are_checked_as_a_matrix_checks_them(tmp_path, capsys, option, said):
    suite = "tf-cnn/resnet50" if option.startswith("no_such") else "horovod-synthetic/resnet50"
    root = tmp_path / "tree"
    make_tree(root, suite)
    assert run_cli("collect", "--from", str(root), "--suite", suite, "--option", option, "--out", str(tmp_path / "o"),
                   "--quiet") == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def _collect_matrix(tmp_path: Path, matrix_file: Path, speed) -> dict[str, dict]:
    """Every run of ``matrix_file`` logged as MXNet's Speedometer (one line a batch, the node's samples/s) or with
    logsynth's pytorch-ddp events, ended rc 0, then ``collect --matrix``; ``speed(cell, repeat)`` -> the run's
    global samples/s. Returns the summary's cells by id."""
    from dlperf_slurm.matrix import loader

    m = loader.load(matrix_file, site=False)
    cdir = tmp_path / "logs" / m.name
    for r in loader.runs(m, cdir):
        c, value = r.cell, speed(r.cell, r.repeat)
        r.log.parent.mkdir(parents=True, exist_ok=True)
        if c.suite.startswith("pytorch-ddp/"):
            _write_run(r, ls.Spec(nodes=c.nodes, gpus=c.gpus_per_node, batch=c.batch_size, warmup=2, measure=5,
                                  thr=value, jitter=0.0, seed=r.repeat, mem=False))
            continue
        steps = m.measure.warmup_steps + m.measure.measure_steps + 5
        r.log.write_text("".join(f"INFO:root:Epoch[0] Batch [{k}-{k + 1}]\tSpeed: {value / c.nodes:.2f} samples/sec"
                                 f"\tacc=0.1\tlossvalue=11.5\n" for k in range(steps)))
        r.marker.write_text(json.dumps({"rc": 0, "signal": "", "end": 0, "job": "1"}))
    out = tmp_path / "summaries"
    assert run_cli("--logs", str(tmp_path / "logs"), "collect", "--matrix", str(matrix_file), "--no-site",
                   "--out", str(out), "--no-plots", "--jobs", "1", "--quiet") == 0
    doc = json.loads((out / f"{m.name}.json").read_text())
    return {c["cell_id"]: c for c in doc["cells"]} | {"": {"md": (out / f"{m.name}.md").read_text()}}


def test_multi_node_cells_under_another_launcher_take_the_one_1n1g_cell_of_their_variant(tmp_path):
    """mxnet-insightface runs train.py across nodes under dmlc, its 1n1g cell under tf_config: the 2n8g and 4n8g
    data-parallel cells had no speedup (the baseline was looked up with the launcher). They take the only 1n1g
    cell of the same variant (parallel=data), never the model-parallel or partial_fc one (other speeds here)."""
    per_gpu = {"data": 100.0, "model": 70.0, "partial_fc": 130.0}

    def speed(cell, repeat):
        mode = dict(cell.params).get("parallel", "model")
        return per_gpu[mode] * cell.devices * (0.9 if cell.devices > 1 else 1.0) * (1 + 0.01 * repeat)

    cells = _collect_matrix(tmp_path, Path(__file__).parents[1] / "matrices" / "mxnet-insightface.toml", speed)
    one = cells["insightface.mxnet.1x1.b64.fp32.xla0.parallel-data"]
    assert one["launcher"] != "dmlc" and one["median"] == pytest.approx(per_gpu["data"] * 1.02)
    for shape in ("2x8", "4x8"):
        c = cells[f"insightface.mxnet.{shape}.b64.fp32.xla0.launcher-dmlc.parallel-data"]
        assert c["launcher"] == "dmlc" and c["baseline"] == one["cell_id"]
        assert c["speedup"] == pytest.approx(c["median"] / one["median"])
        assert c["efficiency"] == pytest.approx(0.9)
    # the launchers that have their own 1n1g cell keep it
    pfc = cells["insightface.mxnet.2x8.b64.fp32.xla0.launcher-horovodrun.parallel-partial_fc"]
    assert pfc["baseline"] == "insightface.mxnet.1x1.b64.fp32.xla0.launcher-horovodrun.parallel-partial_fc"
    assert pfc["efficiency"] == pytest.approx(0.9)
    assert "the one 1n1g cell that differs in launcher alone" in cells[""]["md"]


def test_a_launcher_axis_compares_each_launcher_against_its_own_1n1g_cell(tmp_path):
    """A matrix with a launcher axis: each launcher's 1n1g cell is its own baseline (srun is 20 % faster here at
    every shape, so both read efficiency 0.9); a launcher with no 1n1g cell of its own when two others have one
    cannot tell which: no speedup."""
    p = tmp_path / "launchers.toml"
    p.write_text('suite = "pytorch-ddp/resnet50"\nname = "launchers"\n[axes]\ndevices = ["1x1", "2x1"]\n'
                 'batch_size = [4]\nlauncher = ["torchrun", "srun"]\n[[include]]\ndevices = "2x1"\n'
                 'launcher = "mpirun"\n[options]\ntiny = true\n[measure]\nrepeats = 3\nwarmup_steps = 2\n'
                 'measure_steps = 5\n[slurm]\ntime = "00:10:00"\ngpu_request = "none"\n')
    factor = {"torchrun": 1.0, "srun": 1.2, "mpirun": 1.1}
    cells = _collect_matrix(tmp_path, p, lambda c, r: 100.0 * factor[c.launcher] * c.devices
                            * (0.9 if c.devices > 1 else 1.0) * (1 + 0.01 * r))
    by = {(c["launcher"], c["shape"]): c for cid, c in cells.items() if cid}
    assert len(by) == 5
    for launcher in ("torchrun", "srun"):
        one, two = by[(launcher, "1n1g")], by[(launcher, "2n1g")]
        assert two["baseline"] == one["cell_id"]
        assert two["speedup"] == pytest.approx(two["median"] / one["median"]) and two["efficiency"] == \
            pytest.approx(0.9, rel=1e-3)
    lone = by[("mpirun", "2n1g")]
    assert lone["n_ok"] == 3 and lone["speedup"] is None and lone["baseline"] is None


def test_the_pool_follows_the_work_and_the_free_cpus(tmp_path, monkeypatch):
    """No pool for a few small logs; a given --jobs is kept; by default, one process per WORKER_SECONDS of
    estimated work, up to the CPUs the load leaves free."""
    from dlperf_slurm.collect import runparse
    from dlperf_slurm.model.cell import Cell

    cell = Cell(suite="tf2/resnet50", model="resnet50", framework="tf2", nodes=1, gpus_per_node=1, batch_size=8,
                precision="fp32", xla=False, launcher="", params=())
    small = []
    for i in range(40):
        p = tmp_path / f"m_b8_fp32_{i}.log"
        p.write_bytes(b"x" * 1000)
        small.append(runparse.RunSpec(key=f"r{i}", cell=cell, repeat=i, log=str(p)))
    monkeypatch.setattr(runparse.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(runparse.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert runparse.workers(small, None) == 1  # 40 small logs: ~8 ms of work
    assert runparse.workers(small, 4) == 4 and runparse.workers(small[:3], 4) == 3
    many = small * 300  # 12,000 runs: ~2.4 s of work
    assert runparse.workers(many, None) == 8
    monkeypatch.setattr(runparse.os, "getloadavg", lambda: (7.0, 7.0, 7.0))  # six CPUs busy elsewhere
    assert runparse.workers(many, None) == 2
    monkeypatch.setattr(runparse.os, "getloadavg", lambda: (30.0, 30.0, 30.0))
    assert runparse.workers(many, None) == 1
    big = tmp_path / "big_b8_fp32_0.log"
    with open(big, "wb") as f:
        f.truncate(400_000_000)  # one log: one process, however big
    assert runparse.workers([runparse.RunSpec(key="b", cell=cell, repeat=0, log=str(big))], None) == 1


@pytest.mark.parametrize("suite", [(), ("--suite", "tf2/resnet50")], ids=["auto", "named"])
def test_from_a_file_or_a_missing_path_is_not_a_folder(tmp_path, capsys, suite):
    # with --suite auto (the default) the suite's sampling ran first and said "no ... .log file found" instead
    a_file = tmp_path / "f.log"
    a_file.write_text("hello\n")
    for where in (a_file, tmp_path / "nothere"):
        assert run_cli("collect", "--from", str(where), *suite, "--out", str(tmp_path / "out"), "--no-store") == 2
        assert capsys.readouterr().err == f"dlperf-slurm: error: --from {where}: not a folder\n"
    assert not (tmp_path / "out").exists()
