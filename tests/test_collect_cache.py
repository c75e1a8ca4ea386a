"""collect is incremental (issue #13): the parse cache (in the manifest, or beside the summaries for --from) gives
the same summaries, byte for byte, without reading a log again; a log that changed or grew, another window or
another parser version is read again; --no-cache reads everything; summaries whose inputs did not change are not
written; old manifests are upgraded; --watch collects again as runs end."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import sys
import types
from pathlib import Path

import pytest

from dlperf_slurm import cli, suites
from dlperf_slurm.campaign import eta, folders, manifest, schema
from dlperf_slurm.collect import parsecache
from dlperf_slurm.commands import collect as collectcli
from dlperf_slurm.model.status import Status

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
sys.path.insert(0, str(Path(__file__).parent))
import logsynth as ls
from test_collect import _smoke_matrix, _write_run, make_tree, tree_option

FROM = ("--warmup-steps", "5", "--measure-steps", "20")


def collect_from(root: Path, out: Path, suite: str, *extra: str) -> int:
    return cli.main(["collect", "--from", str(root), "--suite", suite, *FROM, *tree_option(suite), "--out", str(out),
                     "--jobs", "1", "--quiet", *extra])


def summaries(out: Path) -> dict[str, bytes]:
    """Every summary file, the time it was generated taken out (the only thing that may differ)."""
    got = {}
    for p in sorted(out.iterdir()):
        if p.name.startswith("."):
            continue
        data = p.read_bytes()
        if p.suffix in (".md", ".json", ".html"):
            data = re.sub(rb"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", b"Generated <t>", data)
            data = re.sub(rb'"generated_at": [0-9.e+]+', b'"generated_at": 0', data)
        got[p.name] = data
    return got


def no_parsing(monkeypatch):
    """Make every suite parser fail: a run that is parsed becomes PARSE_ERROR."""
    def boom(self, lines, ctx):
        raise AssertionError("a log was parsed")

    for name in suites.names():
        monkeypatch.setattr(type(suites.get(name)), "parse", boom)


@pytest.mark.parametrize("suite,which", [("ngc-pytorch/resnet50", 0), ("ngc-pytorch/resnet50", 1),
                                         ("tf2/resnet50", 0), ("tf-cnn/resnet50", 0),
                                         ("horovod-synthetic/resnet50", 0), ("pytorch-ddp/bert-base", 0)])
def test_a_cache_hit_gives_byte_identical_summaries(tmp_path, capsys, monkeypatch, suite, which):
    root, out = tmp_path / "tree", tmp_path / "out"
    make_tree(root, suite, which)
    assert collect_from(root, out, suite) == 0
    cold = summaries(out)
    assert "9 read, 0 from the parse cache" in capsys.readouterr().out
    assert (out / ".tree.cache.sqlite").exists() and any(n.endswith(".svg") for n in cold)
    for name in cold:  # the summaries go; the cache stays
        (out / name).unlink()
    no_parsing(monkeypatch)
    assert collect_from(root, out, suite) == 0
    assert "0 read, 9 from the parse cache" in capsys.readouterr().out
    assert summaries(out) == cold


def test_a_second_collect_reads_no_log_and_writes_nothing(tmp_path, capsys, monkeypatch):
    root, out = tmp_path / "tree", tmp_path / "out"
    make_tree(root, "tf-cnn/resnet50")
    assert collect_from(root, out, "tf-cnn/resnet50") == 0
    capsys.readouterr()
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    no_parsing(monkeypatch)
    assert collect_from(root, out, "tf-cnn/resnet50") == 0
    printed = capsys.readouterr().out
    assert "0 read, 9 from the parse cache" in printed and "summaries unchanged (6 files" in printed
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps


def test_changed_and_grown_logs_are_read_again(tmp_path, capsys):
    root, out = tmp_path / "tree", tmp_path / "out"
    make_tree(root, "ngc-pytorch/resnet50", incomplete=(1, 2, 0))
    assert collect_from(root, out, "ngc-pytorch/resnet50", "--no-plots") == 0
    capsys.readouterr()
    # the killed run ran on: its log grew to a complete window; another log was replaced by a different run
    spec = ls.Spec(nodes=1, gpus=2, batch=8, warmup=5, measure=20, seed=99, noise=1)
    (root / "1n2g" / "m_b8_fp32_0.log").write_text(ls.dll_rn50(spec)[0])
    other = root / "1n1g" / "m_b8_fp32_1.log"
    other.write_text(ls.dll_rn50(ls.Spec(nodes=1, gpus=1, batch=8, warmup=5, measure=20, seed=5))[0])
    assert collect_from(root, out, "ngc-pytorch/resnet50", "--no-plots") == 0
    assert "2 read, 7 from the parse cache" in capsys.readouterr().out
    cached = summaries(out)
    fresh = tmp_path / "fresh"
    assert collect_from(root, fresh, "ngc-pytorch/resnet50", "--no-plots", "--no-cache") == 0
    assert "9 read, 0 from the parse cache" in capsys.readouterr().out
    doc = json.loads(cached["tree.json"])
    assert {c["shape"]: c["n_ok"] for c in doc["cells"]}["1n2g"] == 3  # the grown log is OK now
    strip = lambda d: {k: v for k, v in d.items() if k != "parse_seconds"}  # noqa: E731
    assert [strip(r) for r in doc["runs"]] == [strip(r) for r in json.loads(summaries(fresh)["tree.json"])["runs"]]


def test_another_window_or_parser_version_reads_again(tmp_path, capsys, monkeypatch):
    root, out = tmp_path / "tree", tmp_path / "out"
    make_tree(root, "tf2/resnet50")
    assert collect_from(root, out, "tf2/resnet50", "--no-plots") == 0
    capsys.readouterr()
    args = ["collect", "--from", str(root), "--suite", "tf2/resnet50", "--warmup-steps", "10", "--measure-steps",
            "10", "--out", str(out), "--jobs", "1", "--quiet", "--no-plots"]
    assert cli.main(args) == 0
    assert "9 read, 0 from the parse cache" in capsys.readouterr().out
    assert cli.main(args) == 0
    assert "0 read, 9 from the parse cache" in capsys.readouterr().out
    monkeypatch.setattr(parsecache, "parser_version", lambda: "another parser")
    assert cli.main(args) == 0
    assert "9 read, 0 from the parse cache" in capsys.readouterr().out


def test_no_cache_reads_every_log_and_writes_every_summary(tmp_path, capsys):
    root, out = tmp_path / "tree", tmp_path / "out"
    make_tree(root, "horovod-synthetic/resnet50")
    assert collect_from(root, out, "horovod-synthetic/resnet50") == 0
    capsys.readouterr()
    assert collect_from(root, out, "horovod-synthetic/resnet50", "--no-cache") == 0
    printed = capsys.readouterr().out
    assert "9 read, 0 from the parse cache" in printed and "unchanged" not in printed


def test_a_broken_cache_file_is_a_warning(tmp_path, capsys):
    root, out = tmp_path / "tree", tmp_path / "out"
    make_tree(root, "tf-cnn/resnet50")
    out.mkdir()
    (out / ".tree.cache.sqlite").write_bytes(b"this is no database" * 100)
    assert collect_from(root, out, "tf-cnn/resnet50", "--no-plots") == 0
    captured = capsys.readouterr()
    assert "9 read" in captured.out and "warning" in captured.err
    assert json.loads((out / "tree.json").read_text())["cells"]


def test_a_result_json_cannot_carry_is_not_cached():
    from dlperf_slurm.model.result import RunResult

    res = RunResult(status=Status.OK, throughput=float("nan"), extra={"window": {"start": 1}, "x": [1.0, 2]})
    assert parsecache.decode(parsecache.encode(res)).__repr__() == repr(res)
    assert parsecache.encode(RunResult(status=Status.OK, extra={"pair": (1, 2)})) is None
    assert parsecache.encode(RunResult(status=Status.OK, extra={1: "int key"})) is None


# ----------------------------------------------------------------------------------------------- campaigns


def _campaign(tmp_path: Path):
    from dlperf_slurm.matrix import loader

    m = loader.load(_smoke_matrix(tmp_path), site=False)
    cdir = tmp_path / "logs" / "smoke"
    runs = loader.runs(m, cdir)
    man = manifest.Manifest(cdir, create=True)
    man.sync(m, runs)
    return man, cdir, {(r.cell.gpus_per_node, r.repeat): r for r in runs}


def _status(man, key, status, job):
    with man.write() as db:
        db.execute("UPDATE runs SET status=?, job_id=?, executor='none' WHERE key=?", (status, job, key))


def _spec(g, r, **kw):
    return ls.Spec(nodes=1, gpus=g, batch=4, warmup=2, measure=5, seed=10 * g + r, tiny=True, mem=False, **kw)


def test_campaign_cache_lives_in_the_manifest_and_a_running_log_is_read_as_it_grows(tmp_path, capsys):
    man, cdir, by = _campaign(tmp_path)
    running = by[(2, 2)]
    for (g, r), run in by.items():
        if run is not running:
            _write_run(run, _spec(g, r))
            _status(man, run.key, "OK", f"1_{g}{r}")
    _write_run(running, _spec(2, 2, steps=3), rc=None)
    _status(man, running.key, "RUNNING", "1_22")
    out = tmp_path / "summaries"
    argv = ["--logs", str(tmp_path / "logs"), "collect", "smoke", "--out", str(out), "--no-refresh", "--jobs", "1",
            "--quiet", "--no-plots"]
    assert cli.main(argv) == 0
    assert "6 read, 0 from the parse cache" in capsys.readouterr().out
    db = sqlite3.connect(cdir / folders.MANIFEST)
    assert db.execute("SELECT COUNT(*) FROM parse_cache").fetchone()[0] == 6
    assert not db.execute("SELECT COUNT(*) FROM parse_cache WHERE log LIKE '/%'").fetchone()[0]  # relative
    runs = {r["run"]: r for r in json.loads((out / "smoke.json").read_text())["runs"]}
    assert runs[running.key]["status"] == Status.RUNNING and runs[running.key]["steps_seen"] == 3
    first = summaries(out)
    for name in first:
        (out / name).unlink()
    assert cli.main(argv) == 0
    assert "0 read, 6 from the parse cache" in capsys.readouterr().out
    assert summaries(out) == first  # byte for byte, from the manifest's cache
    _write_run(running, _spec(2, 2))  # it ended: the whole log and its exit marker
    _status(man, running.key, "OK", "1_22")
    assert cli.main(argv) == 0
    assert "1 read, 5 from the parse cache" in capsys.readouterr().out
    runs = {r["run"]: r for r in json.loads((out / "smoke.json").read_text())["runs"]}
    assert runs[running.key]["status"] == Status.OK and runs[running.key]["steps_seen"] == 7
    cold = tmp_path / "cold"
    assert cli.main(["--logs", str(tmp_path / "logs"), "collect", "smoke", "--out", str(cold), "--no-refresh",
                     "--jobs", "1", "--quiet", "--no-plots", "--no-cache"]) == 0
    assert summaries(cold)["smoke.csv"] == summaries(out)["smoke.csv"]


def test_runs_without_a_log_are_not_counted_as_cache_hits(tmp_path, capsys):
    # a matrix not submitted yet: four runs, no log, no cache; the line said "0 read, 4 from the parse cache"
    loader = Path(__file__).parent.parent / "matrices" / "accuracy-smoke.toml"
    assert cli.main(["--logs", str(tmp_path / "logs"), "collect", "--matrix", str(loader), "--no-site", "--out",
                     str(tmp_path / "out"), "--no-refresh", "--no-store", "--no-plots", "--quiet"]) == 0
    assert "parsed 4 runs (0.0 MB of logs; 0 read, 0 from the parse cache)" in capsys.readouterr().out


def test_an_old_manifest_is_upgraded_and_keeps_working(tmp_path, capsys):
    man, cdir, by = _campaign(tmp_path)
    for (g, r), run in by.items():
        _write_run(run, _spec(g, r))
        _status(man, run.key, "OK", f"1_{g}{r}")
    with man.write() as db:  # as schema 2 left it
        db.execute("DROP TABLE parse_cache")
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', '2')")
    man.close()
    out = tmp_path / "summaries"
    argv = ["--logs", str(tmp_path / "logs"), "collect", "smoke", "--out", str(out), "--no-refresh", "--jobs", "1",
            "--quiet", "--no-plots"]
    assert cli.main(argv) == 0
    m = manifest.Manifest(cdir)
    # 4: runs.log_id, 5: each run's window, 6: runs.slurm_energy_j
    assert m.meta("schema_version") == schema.SCHEMA_VERSION == 6
    assert {"log_id", "warmup_steps", "measure_steps", "slurm_energy_j"} <= {
        r[1] for r in m.db.execute("PRAGMA table_info(runs)")}
    assert m.db.execute("SELECT COUNT(*) FROM parse_cache").fetchone()[0] == 6
    m.close()
    assert "6 read" in capsys.readouterr().out


def test_watch_collects_as_runs_end_with_one_progress_line(tmp_path, monkeypatch):
    man, cdir, by = _campaign(tmp_path)
    for (g, r), run in by.items():
        _status(man, run.key, "PENDING", f"1_{g}{r}")
    order = list(by.items())

    now = [1000.0]  # the watch's clock (the time left): a minute a round
    monkeypatch.setattr(eta, "time", types.SimpleNamespace(time=lambda: now[0]))

    def a_run_ends(_seconds):  # between two rounds, two more runs end
        now[0] += 60.0
        for _ in range(2):
            if order:
                (g, r), run = order.pop(0)
                _write_run(run, _spec(g, r))
                _status(man, run.key, "OK", f"1_{g}{r}")

    monkeypatch.setattr(collectcli.time, "sleep", a_run_ends)
    args = cli.build_parser().parse_args(["--logs", str(tmp_path / "logs"), "collect", "smoke", "--out",
                                          str(tmp_path / "out"), "--no-refresh", "--jobs", "1", "--no-plots",
                                          "--watch", "5"])
    assert args.watch == 5.0
    buf = io.StringIO()
    assert collectcli.watch(args, args.watch, out=buf) == 0
    lines = buf.getvalue().splitlines()
    assert len(lines) == 4 and "0/6 runs ended" in lines[0] and "6 pending or running" in lines[0]
    assert "2/6 runs ended (OK 2)" in lines[1] and "2 logs read" in lines[1]
    assert "6/6 runs ended (OK 6), 0 pending or running" in lines[-1]
    # the time left: unknown until a run ends, then at the rate they ended (2 a minute), none once all ended
    assert [line.rsplit("; ", 1)[1] if "time left" in line else "" for line in lines] == [
        "time left: unknown", "time left: ~2 min", "time left: ~60 s", ""], lines
    doc = json.loads((tmp_path / "out" / "smoke.json").read_text())
    assert {r["status"] for r in doc["runs"]} == {Status.OK}
    assert cli.build_parser().parse_args(["collect", "--watch"]).watch == 0.0  # the default period


@pytest.mark.parametrize("every", ["-1", "nan", "inf"])
def test_a_watch_period_sleep_refuses_is_one_line_before_any_round(tmp_path, capsys, every):
    # -1 collected once, wrote the summaries, then died in time.sleep with a ValueError traceback
    root = tmp_path / "tree"
    make_tree(root, "tf-cnn/resnet50", 0, repeats=1)
    assert cli.main(["collect", "--from", str(root), "--suite", "tf-cnn/resnet50", *FROM, "--out",
                     str(tmp_path / "out"), "--jobs", "1", "--no-store", "--watch", every]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlperf-slurm: error: --watch {float(every):g}: expected SECONDS >= 0") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_watching_a_tree_prints_a_line_only_when_something_changed(tmp_path, monkeypatch):
    """A --from tree has no pending runs and is watched until Ctrl-C: into a file (no TTY) a round that read and
    wrote nothing adds no line (it used to add one every round, forever)."""
    root = tmp_path / "tree"
    make_tree(root, "tf-cnn/resnet50")
    log = root / "1n1g" / "m_b8_fp32_0.log"
    rounds = []

    def between_rounds(_seconds):
        rounds.append(1)
        if len(rounds) == 2:  # a log changes between the second and third round
            log.write_text(log.read_text() + "\n")  # grown: read again, the same figures

    monkeypatch.setattr(collectcli.time, "sleep", between_rounds)
    args = cli.build_parser().parse_args(["collect", "--from", str(root), "--suite", "tf-cnn/resnet50", *FROM,
                                          "--out", str(tmp_path / "out"), "--jobs", "1", "--no-plots", "--watch", "1"])
    buf = io.StringIO()
    assert collectcli.watch(args, args.watch, rounds=5, out=buf) == 0
    lines = buf.getvalue().splitlines()
    # 5 rounds: every log read; nothing; the changed log; nothing; nothing again (no line)
    assert [line.split("; ")[1].split(",")[0] for line in lines] == ["9 logs read", "0 logs read", "1 log read",
                                                                    "0 logs read"], lines


def test_only_the_plot_of_a_changed_suite_is_drawn_again(tmp_path, capsys):
    roots = {}
    for suite in ("tf-cnn/resnet50", "horovod-synthetic/resnet50"):
        roots[suite] = tmp_path / suite.replace("/", "_")
        make_tree(roots[suite], suite)
    out = tmp_path / "out"
    argv = ["collect", "--from", str(roots["tf-cnn/resnet50"]), "--suite", "tf-cnn/resnet50", *FROM, "--out",
            str(out), "--jobs", "1", "--quiet"]
    assert cli.main(argv) == 0
    svg = out / "tf-cnn_resnet50.tf-cnn_resnet50.svg"
    stamp = svg.stat().st_mtime_ns
    log = roots["tf-cnn/resnet50"] / "1n1g" / "m_b8_fp32_0.log"
    log.write_text(log.read_text())  # rewritten as it was: read again, same figures; only parse_seconds moves
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "1 read" in printed and svg.stat().st_mtime_ns == stamp and "1 unchanged" in printed


def test_a_summary_no_longer_made_is_removed_and_nothing_else(tmp_path, capsys):
    root, out = tmp_path / "tree", tmp_path / "out"
    make_tree(root, "tf-cnn/resnet50")
    assert collect_from(root, out, "tf-cnn/resnet50") == 0
    svg = out / "tree.tf-cnn_resnet50.svg"
    assert svg.exists()
    # what an earlier version wrote (PNG plots), as its side file recorded it; and files collect never wrote
    old_png = out / "tree.tf-cnn_resnet50.png"
    old_png.write_bytes(b"\x89PNG")
    db = sqlite3.connect(out / ".tree.cache.sqlite")
    with db:
        db.execute("INSERT INTO outputs(path, digest) VALUES (?, ?)", (str(old_png), "png:0123"))
    db.close()
    mine = [out / "tree.by-hand.png", out / "notes.md"]
    for p in mine:
        p.write_text("the user's own file")
    capsys.readouterr()
    assert collect_from(root, out, "tf-cnn/resnet50") == 0
    printed = capsys.readouterr().out
    assert not old_png.exists() and f"removed {old_png} (no longer made)" in printed
    assert svg.exists() and all(p.read_text() == "the user's own file" for p in mine)
    # --no-plots leaves the plots as they are, and still known
    assert collect_from(root, out, "tf-cnn/resnet50", "--no-plots") == 0
    assert svg.exists() and "removed" not in capsys.readouterr().out
    # every run fails now: no suite has an OK cell, so there is no plot to make; the old one goes
    for log in root.rglob("*.log"):
        log.write_text("Traceback (most recent call last):\nRuntimeError: boom\n")
    assert collect_from(root, out, "tf-cnn/resnet50") == 1  # every run failed (the summaries written all the same)
    assert not svg.exists() and f"removed {svg}" in capsys.readouterr().out
    assert (out / "tree.md").exists() and all(p.exists() for p in mine)


# ------------------------------------------------------------------------- every spelling of the same tree


def _spellings(tmp_path: Path, target: str) -> dict[str, tuple[Path, str]]:
    """Ways a user names ``tmp_path/target``: (working directory, the argument)."""
    link = tmp_path / "elsewhere" / "link"
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(tmp_path / target, target_is_directory=True)
    inside = tmp_path / target
    return {"relative": (tmp_path, target), "absolute": (tmp_path / "elsewhere", str(tmp_path / target)),
            "dot-dot": (tmp_path / "elsewhere", f"../{target}"), "symlink": (tmp_path / "elsewhere", "link"),
            "inside": (inside, "."), "relative again": (tmp_path, f"./{target}/")}


def test_the_tree_cache_hits_however_the_tree_and_out_are_spelled(tmp_path, capsys, monkeypatch):
    """The cache of ``--from tree`` (relative, as the README writes it) hits for ``--from /abs/tree``, ``../tree``,
    a symlink to it, ``.`` from inside it, with ``--out`` spelled relative to each working directory: keys are
    canonical paths (they were stored relative to the summaries folder when they could not be made relative to it,
    and looked up under another base: a relative --from never hit)."""
    make_tree(tmp_path / "tree", "tf-cnn/resnet50")
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    assert cli.main(["collect", "--from", "tree", "--suite", "tf-cnn/resnet50", *FROM, "--out", "out", "--jobs", "1",
                     "--no-plots"]) == 0
    assert "9 read, 0 from the parse cache" in capsys.readouterr().out
    cold = summaries(out)
    no_parsing(monkeypatch)
    for how, (cwd, arg) in _spellings(tmp_path, "tree").items():
        monkeypatch.chdir(cwd)
        rel_out = os.path.relpath(out, cwd)
        assert cli.main(["collect", "--from", arg, "--suite", "tf-cnn/resnet50", *FROM, "--out", rel_out, "--jobs",
                         "1", "--no-plots"]) == 0, how
        printed = capsys.readouterr().out
        assert "0 read, 9 from the parse cache" in printed, (how, printed)
        assert "summaries unchanged (5 files" in printed, (how, printed)  # the same rows: the logs' real paths
        assert sorted(p.name for p in out.iterdir()) == [".tree.cache.sqlite", "tree.csv", "tree.html", "tree.json",
                                                         "tree.md", "tree.runs.csv"]
    assert summaries(out) == cold


def test_the_campaign_cache_hits_however_the_campaign_is_named(tmp_path, capsys, monkeypatch):
    """A campaign named ``smoke`` (under --logs), ``logs/smoke``, its absolute path, a symlink to it, or ``.``
    from inside it: one cache, in its manifest."""
    man, _cdir, by = _campaign(tmp_path)
    for (g, r), run in by.items():
        _write_run(run, _spec(g, r))
        _status(man, run.key, "OK", f"1_{g}{r}")
    man.close()
    out = tmp_path / "summaries"
    monkeypatch.chdir(tmp_path)
    common = ["collect", "--out", str(out), "--no-refresh", "--jobs", "1", "--no-plots"]
    assert cli.main(["--logs", "logs", *common[:1], "smoke", *common[1:]]) == 0
    assert "6 read, 0 from the parse cache" in capsys.readouterr().out
    no_parsing(monkeypatch)
    spellings = {"by name": (tmp_path, ["--logs", "logs", "collect", "smoke"]),
                 **{how: (cwd, ["collect", arg]) for how, (cwd, arg) in _spellings(tmp_path, "logs/smoke").items()}}
    for how, (cwd, argv) in spellings.items():
        monkeypatch.chdir(cwd)
        assert cli.main([*argv, *common[1:]]) == 0, how
        printed = capsys.readouterr().out
        assert "0 read, 6 from the parse cache" in printed, (how, printed)
        assert "summaries unchanged" in printed, (how, printed)
