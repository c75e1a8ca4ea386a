"""Counts and their nouns agree (#36 part 4): ``words.plural`` says "1 cell" and "2 cells"; the messages that put
a count before a noun are rendered here with 1 and with 2 and read word for word; and a scan of the package's
f-strings finds none that puts a count straight before a plural noun (its twin shows it finds a planted one)."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, TEMPLATES, cli  # noqa: E402

from dlperf_slurm.commands.common import note_dropped  # noqa: E402
from dlperf_slurm.errors import SubmitAborted  # noqa: E402
from dlperf_slurm.matrix import loader  # noqa: E402
from dlperf_slurm.matrix.plan import plan_text  # noqa: E402
from dlperf_slurm.model.cell import Dropped  # noqa: E402
from dlperf_slurm.store.filing import Filed  # noqa: E402
from dlperf_slurm.words import noun, plural  # noqa: E402

PACKAGE = REPO / "dlperf_slurm"
#: "1 cells", "1 runs", "1 GPUs": a 1 straight before a word in s (the words here are singular at 1 as they stand)
ONE_PLURAL = re.compile(r"(?<![\d.,/-])\b1 (?!(?:is|was|has|as|its|this|s|ms)\b)[A-Za-z][A-Za-z-]*s\b")


def test_plural_and_noun():
    assert (plural(1, "cell"), plural(2, "cell"), plural(0, "cell")) == ("1 cell", "2 cells", "0 cells")
    assert (plural(1, "matrix", "matrices"), plural(3, "matrix", "matrices")) == ("1 matrix", "3 matrices")
    assert plural(1, "run waits", "runs wait") == "1 run waits" and plural(2, "run waits", "runs wait") == "2 runs wait"
    assert plural(1200, "run", grouped=True) == "1,200 runs" and plural(1200, "run") == "1200 runs"
    assert (noun(1, "GPU"), noun(8, "GPU")) == ("GPU", "GPUs")


# ============================================================================ the messages, rendered with 1 and 2


def _smoke(tmp_path: Path, devices: str, repeats: int) -> Path:
    text = (REPO / "matrices" / "smoke.toml").read_text()
    text = text.replace('devices = ["1x1", "1x2"]', f"devices = [{devices}]").replace("repeats = 3",
                                                                                     f"repeats = {repeats}")
    p = tmp_path / f"smoke{repeats}.toml"
    p.write_text(text.replace('name = "smoke"', f'name = "smoke{repeats}"'))
    return p


@pytest.mark.parametrize("n", [1, 2])
def test_render_plan_and_dry_run_say_their_counts(tmp_path, n):
    """render's "wrote N scripts" line, plan's counts and submit --dry-run's summary, for 1 cell x 1 repeat and for
    2 cells x 2 repeats, word for word."""
    devices = '"1x1"' if n == 1 else '"1x1", "1x2"'
    m = _smoke(tmp_path, devices, n)
    s = "" if n == 1 else "s"
    p = cli("render", str(m), "--out", str(tmp_path / "out"), "--no-site", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    runs = n * n
    assert (f"wrote {runs} script{'s' * (runs > 1)} under {tmp_path / 'out'}/ ({n} cell{s} x {n} repeat{s})"
            in p.stdout), p.stdout
    text = plan_text(loader.load(m, site=False))
    assert f"\n{n} cell{s} x {n} repeat{s} = {runs} run{'s' * (runs > 1)}; window: skip 2 steps, measure 5\n" in text
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(m), "--executor", "local", "--dry-run", "--no-site",
            "--templates", str(TEMPLATES), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert (f"campaign smoke{n}: {runs} run{'s' * (runs > 1)} ({n} cell{s} x {n} repeat{s}); submitting {runs} as "
            f"{n} local runner{s}") in out, out  # one a resource set: a cell each here
    assert f"dry run: nothing is written or submitted. {n} local runner{s} would be made:" in out, out
    assert re.findall(r"\[\d\] local runner \(.*\): (.*)\n", out) == [f"{n} script{s}"] * n, out
    for said in (text, out):
        assert not ONE_PLURAL.findall(said), ONE_PLURAL.findall(said)


@pytest.mark.parametrize("n", [1, 2])
def test_messages_of_the_stages_say_their_counts(tmp_path, capsys, n):
    s = "" if n == 1 else "s"
    m = loader.load(_smoke(tmp_path, '"1x1"', 1), site=False)
    m.dropped = [Dropped(m.cells[0], f"reason {i}") for i in range(n + 1)]  # n more reasons than the first
    note_dropped(m, "m.toml")
    err = capsys.readouterr().err
    assert f"{n + 1} of {n + 2} cells dropped (reason 0; {n} more reason{s}): " in err, err
    text = plan_text(m)
    assert f"\ndropped {n + 1} cells:\n" in text
    m.dropped = m.dropped[:n]
    assert f"\ndropped {n} cell{s}:\n" in plan_text(m)
    said = str(SubmitAborted(RuntimeError("down"), n, 0))
    assert f"submission stopped: {n} run{s} {'was' if n == 1 else 'were'} submitted and are recorded" in said, said
    assert Filed(added=n, updated=0).line("x.sqlite").endswith(f": {n} cell{s} added, 0 updated")
    assert not ONE_PLURAL.findall(err + text + said)


@pytest.mark.parametrize("n", [1, 2])
def test_compare_and_history_say_their_counts(n):
    from dlperf_slurm.compare import rule
    from dlperf_slurm.store.database import StoredCell
    from dlperf_slurm.store.history import judge, text

    s = "" if n == 1 else "s"
    cells = {f"c{i}": rule.Side(values=(100.0, 101.0, 99.0), statuses=("OK",) * 3) for i in range(n)}
    slower = {c: rule.Side(values=(50.0, 51.0, 49.0), statuses=("OK",) * 3 + ("UNRECOGNISED",) * n) for c in cells}
    rows = rule.compare(cells, slower, 0.05)
    assert [rule.verdict_text(r).split(" (")[1] for r in rows] == [
        f"{n} new run{s} UNRECOGNISED: their logs not read, in no median)"] * n
    stored = [StoredCell(system="", partition="", campaign=f"k{j}", cell_id=f"c{i}", suite="s", unit="img/s",
                         median=v, ci_low=v - 1, ci_high=v + 1, n=3, n_ok=3, status="OK",
                         ok_values=(v - 1, v, v + 1), statuses=("OK",) * 3, ran_at=f"2026-01-0{j + 1}T00:00:00")
              for i in range(n) for j, v in enumerate((100.0, 50.0))]
    steps = {("-", f"c{i}"): judge([c for c in stored if c.cell_id == f"c{i}"]) for i in range(n)}
    last = text(steps, width=10_000).splitlines()
    assert any(line.startswith(f"{n} cell{s}; {n} change{s} beyond noise (*), {n} regression{s} ") for line in last)
    assert not ONE_PLURAL.findall("\n".join(last))


# ======================================================================= the static check of the package's text

#: words in s after a formatted value that are verbs (or not nouns) in this package's sentences
NOT_NOUNS = {"is", "was", "has", "its", "this", "as", "ms", "us", "s", "does", "yes", "plus", "less", "unless",
             "thus", "always", "status", "across", "whereas", "vs", "holds", "allows", "finds", "reads", "says",
             "wins", "fails", "goes", "exists", "shares", "asks", "exceeds"}
#: (module, expression) pairs whose value is a name, not a count, before a plural noun
NOT_COUNTS = {("dlperf_slurm/launchers.py", "container_type")}  # "docker containers start through srun"
_WORD = re.compile(r" ([A-Za-z][A-Za-z-]*s)\b")
#: an ad-hoc plural: 's' * (n > 1), 's' if n != 1 else '' (words.plural says it)
_AD_HOC = re.compile(r"""["']s["'] \*|["']s["'] if\b|else ["']s["']""")


def _spec(value: ast.FormattedValue) -> str:
    spec = value.format_spec
    return "".join(v.value for v in spec.values if isinstance(v, ast.Constant)) if isinstance(spec, ast.JoinedStr) \
        else ""


def count_before_plural(source: str, module: str = "") -> list[tuple[int, str]]:
    """``(line, text)`` of each f-string part that puts a count straight before a plural noun (``{n} cells``,
    ``{len(runs)} runs``, ``{n:,} bytes``), and each ad-hoc plural. Not counted: floats (``{h:.1f} GPU-hours``),
    a module's constants above 1 (``{MAX_NODES:,} nodes``), the verbs of :data:`NOT_NOUNS`."""
    hits = [(i, line.strip()) for i, line in enumerate(source.splitlines(), 1) if _AD_HOC.search(line)]
    mod = None
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        for a, b in zip(node.values, node.values[1:]):
            if not (isinstance(a, ast.FormattedValue) and isinstance(b, ast.Constant) and isinstance(b.value, str)):
                continue
            m = _WORD.match(b.value)
            expr = ast.unparse(a.value)
            if not m or m.group(1).lower() in NOT_NOUNS or re.search(r"[efg%]$", _spec(a)) \
                    or (module, expr) in NOT_COUNTS:
                continue
            if re.fullmatch(r"[A-Z][A-Z0-9_]+", expr) and module:  # a constant: fine where it is not 1
                mod = mod or importlib.import_module(module.removesuffix(".py").replace("/", "."))
                if getattr(mod, expr, 1) != 1:
                    continue
            hits.append((node.lineno, f"{{{expr}}}{b.value[:m.end()]}"))
    return sorted(hits)


def test_no_count_before_a_plural_noun_in_the_package():
    found = [f"{p.relative_to(REPO)}:{line}: {what}"
             for p in sorted(PACKAGE.rglob("*.py"))
             for line, what in count_before_plural(p.read_text(), str(p.relative_to(REPO)))]
    assert not found, "say these with dlperf_slurm.words.plural:\n" + "\n".join(found)


def test_the_scan_finds_a_planted_count_before_a_plural():
    clean = PACKAGE.joinpath("commands", "render.py").read_text()
    assert count_before_plural(clean) == []
    planted = clean + (
        '\n\ndef bad(paths, n, h, name):\n'
        '    print(f"wrote {len(paths)} scripts")\n'
        '    print(f"({n:,} runs of {name} GPUs, {h:.1f} GPU-hours; {name} holds {n} cells)")\n'
        "    return f\"{n} cell{'s' * (n > 1)}\"\n")
    base = len(clean.splitlines())
    assert sorted((line - base, what) for line, what in count_before_plural(planted)) == sorted([
        (4, "{len(paths)} scripts"), (5, "{n} runs"), (5, "{name} GPUs"), (5, "{n} cells"),
        (6, "return f\"{n} cell{'s' * (n > 1)}\"")])
    assert ONE_PLURAL.findall("wrote 1 scripts; 1 cell; 1 GPUs; 1.5 ms; 1/1 GPU; 1 ms") == ["1 scripts", "1 GPUs"]

