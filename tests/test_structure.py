"""The package's shape: no status string outside the module of nouns, small modules, an acyclic import graph
that imports cleanly in dependency order in a fresh interpreter."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from dlperf_slurm.model import Status

PKG = Path(__file__).resolve().parents[1] / "dlperf_slurm"
MAX_LINES = 400
#: a scheduler backend's own state words (squeue/sacct's, the local runner's queue file) are its vocabulary,
#: mapped to Status in one table per backend; they are not our statuses
SCHEDULER_VOCABULARY = {"schedulers/slurmctl.py", "schedulers/local.py", "schedulers/local_runner.py"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


#: ``python -m`` entry points run on import; they are imported by nothing
ENTRY_POINTS = {"dlperf_slurm.__main__", "dlperf_slurm.workloads.__main__"}


MODULES = _modules()


def _status_literals(tree: ast.AST) -> list[tuple[int, str]]:
    words = {s.value for s in Status}
    needles = set()
    for node in ast.walk(tree):  # 'OOM' in line: a needle searched in log text, not a status
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and \
                all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            needles.add(id(node.left))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in words and id(n) not in needles]


def test_no_status_string_literal_outside_the_module_of_nouns():
    found = []
    for name, path in MODULES.items():
        rel = str(path.relative_to(PKG))
        if rel == "model.py" or rel in SCHEDULER_VOCABULARY:
            continue
        found += [f"{rel}:{line}: {word!r}" for line, word in _status_literals(ast.parse(path.read_text()))]
    assert not found, "use dlperf_slurm.model.Status, not its string:\n" + "\n".join(found)


def test_the_literal_check_can_fail():
    assert _status_literals(ast.parse("x = 'FAILED'\nif s == 'OK': pass")) == [(1, "FAILED"), (2, "OK")]
    assert _status_literals(ast.parse("if 'OOM' in line: pass")) == []


def test_no_module_over_the_size_limit():
    big = {name: n for name, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by job): {big}"


def _imports(name: str, path: Path, lazy: bool = False) -> set[str]:
    """The package modules ``name`` imports at module level, or with ``lazy`` anywhere (inside functions too:
    lazy on purpose, for start-up speed, but an arrow all the same). ``if TYPE_CHECKING:`` blocks do not run.
    (Imports by string are the registries' of their own submodules and cli's command table, checked below.)"""
    out = set()
    tree = ast.parse(path.read_text())
    base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    if lazy:
        skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in
                   ast.unparse(node.test) for n in ast.walk(node)}
        stmts = [n for n in ast.walk(tree) if id(n) not in skipped]
    else:
        stmts = []
        for node in tree.body:
            if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks do not run
                continue
            stmts += node.body if isinstance(node, ast.Try) else [node]
    for st in stmts:
        if isinstance(st, ast.Import):
            targets = [a.name for a in st.names]
        elif isinstance(st, ast.ImportFrom):
            mod = st.module or ""
            if st.level:
                up = base.split(".")[: len(base.split(".")) - (st.level - 1)]
                mod = ".".join(up + ([mod] if mod else []))
            targets = [mod] + [f"{mod}.{a.name}" for a in st.names]
        else:
            continue
        for t in targets:
            if t in MODULES and t != name:
                out.add(t)
    # importing a submodule imports its packages first
    return out | {p for t in out for p in _parents(t) if p != name and p in MODULES} - {name}


def _parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}
#: every arrow, function-level imports included
FULL_GRAPH = {name: _imports(name, path, lazy=True) for name, path in MODULES.items()}
#: the face: the parser (cli), the command handlers (commands/) and the ``python -m`` entry points
FACE = {"dlperf_slurm.cli", "dlperf_slurm.__main__"} | {m for m in MODULES if m.startswith("dlperf_slurm.commands")}


def _acyclic(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    # a package's __init__ may import its submodules (a registry filling itself): that edge is not a cycle
    return {n: {d for d in deps if not d.startswith(n + ".")} for n, deps in graph.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    try:
        list(TopologicalSorter(_acyclic(graph)).static_order())
    except CycleError as err:
        return err.args[1]
    return []


def test_the_import_graph_has_no_cycle():
    assert not (c := _cycle(GRAPH)), f"import cycle: {' -> '.join(c)}"


def test_lazy_imports_make_no_cycle_either():
    """Counting imports inside functions, the graph is still a DAG: every module has a floor (the longest chain of
    imports below it) and every arrow, lazy or not, points to a lower floor; none runs back up."""
    cycle = _cycle(FULL_GRAPH)
    lazy = [f"{a} -> {b}" for a, b in zip(cycle, cycle[1:]) if b not in GRAPH[a]]
    assert not cycle, f"import cycle: {' -> '.join(cycle)} (lazy: {', '.join(lazy) or 'none'})"
    graph = _acyclic(FULL_GRAPH)
    floor: dict[str, int] = {}
    for m in TopologicalSorter(graph).static_order():
        floor[m] = 1 + max((floor[d] for d in graph[m]), default=-1)
    up = [f"{a} ({floor[a]}) -> {b} ({floor[b]})" for a, deps in graph.items() for b in deps if floor[b] >= floor[a]]
    assert not up, f"imports back up the floors: {up}"


def test_the_cycle_check_follows_lazy_imports(tmp_path):
    # the check can fail: a function-level import that closes a loop is found, and named as lazy
    b = tmp_path / "b.py"
    b.write_text("def f():\n    from dlperf_slurm import cli\n")
    graph = {"dlperf_slurm.cli": {"dlperf_slurm.search"},
             "dlperf_slurm.search": _imports("dlperf_slurm.x", b, lazy=True) - {"dlperf_slurm"}}
    assert _imports("dlperf_slurm.x", b) == set() and graph["dlperf_slurm.search"] == {"dlperf_slurm.cli"}
    assert _cycle(graph)


def test_no_stage_module_imports_the_command_line():
    """Only the face imports cli or commands/ (lazy imports included): the stages never reach up into the command
    line. And cli names each command's module by string: every subcommand has ``commands/<name>.py`` with
    ``cmd_<name>``, and every command module (but the shared ``common``) is a subcommand."""
    import argparse
    import importlib

    from dlperf_slurm import cli

    up = sorted(f"{m} -> {d}" for m, deps in FULL_GRAPH.items() if m not in FACE for d in deps if d in FACE)
    assert not up, f"stage modules import the command line: {up}"
    inside = sorted(f"{m} -> {d}" for m, deps in FULL_GRAPH.items() if m not in FACE - {"dlperf_slurm.cli"}
                    for d in deps if d.startswith("dlperf_slurm.commands"))
    assert not inside, f"only cli (by name) and the command modules import dlperf_slurm.commands: {inside}"
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    names = set(sub.choices)
    for name in names:
        assert callable(getattr(importlib.import_module(f"dlperf_slurm.commands.{name}"), f"cmd_{name}", None)), name
    modules = {m.rsplit(".", 1)[1] for m in MODULES if m.startswith("dlperf_slurm.commands.")} - {"common"}
    assert modules == names, f"command modules without a subcommand: {modules - names}"


def test_every_module_imports_in_a_fresh_interpreter_in_dependency_order():
    graph = _acyclic(GRAPH)
    order = [m for m in TopologicalSorter(graph).static_order() if m not in ENTRY_POINTS]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint(len(sys.argv) - 1)"
    p = subprocess.run([sys.executable, "-c", code, *order], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == str(len(MODULES) - len(ENTRY_POINTS & set(MODULES)))
    # and each module alone, first in its interpreter (a hidden cycle shows as an ImportError here)
    code = ("import importlib, sys\nbad = []\nfor m in sys.argv[1:]:\n    for k in [k for k in sys.modules if "
            "k.startswith('dlperf_slurm')]:\n        del sys.modules[k]\n    try:\n        importlib.import_module(m)\n"
            "    except Exception as e:\n        bad.append(f'{m}: {type(e).__name__}: {e}')\nprint('\\n'.join(bad))")
    p = subprocess.run([sys.executable, "-c", code, *(m for m in MODULES if m not in ENTRY_POINTS)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and not p.stdout.strip(), p.stdout + p.stderr[-3000:]


def test_every_subpackage_is_installed():
    """``pip install .`` ships only the packages setup.cfg lists: a new subpackage left out installs a package
    that cannot import it (a job then dies at its first line)."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(PKG.parent / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    packages = {".".join(p.parent.relative_to(PKG.parent).parts) for p in PKG.rglob("__init__.py")}
    assert packages <= listed, f"not in setup.cfg [options] packages: {sorted(packages - listed)}"


#: the modules that hold SQL, each the one owner of its database: the campaign's manifest, the parse cache's
#: store in it, and the results store across campaigns (store.py)
SQL_OWNERS = {"manifest.py", "schema.py", "parsecache.py", "store.py"}  # schema.py: the manifest's DDL
_SQL = re.compile(r"\b(?:SELECT\s.+\sFROM|INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                  r"CREATE\s+(?:TABLE|INDEX)|ALTER\s+TABLE|PRAGMA)\b", re.S)


def _sql_literals(tree: ast.AST) -> list[tuple[int, str]]:
    return [(n.lineno, n.value[:60]) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and _SQL.search(n.value)]


def test_no_sql_outside_the_manifest():
    """Only the manifest (and the parse cache's store) speak SQL; the stages use the manifest's API."""
    found = []
    for path in MODULES.values():
        rel = str(path.relative_to(PKG))
        if rel not in SQL_OWNERS:
            found += [f"{rel}:{line}: {text!r}" for line, text in _sql_literals(ast.parse(path.read_text()))]
    assert not found, "SQL outside manifest.py (add a method to Manifest):\n" + "\n".join(found)


def test_the_sql_check_can_fail():
    tree = ast.parse('db.execute(f"UPDATE runs SET status=? WHERE key IN ({marks})")\n'
                     'm.db.execute("SELECT held FROM submissions WHERE token=?")\nx = "select a value from the list"')
    assert sorted(line for line, _ in _sql_literals(tree)) == [1, 2]
