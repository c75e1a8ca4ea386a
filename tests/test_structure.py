"""The package's shape: no status string outside the module of nouns, small modules, an acyclic import graph
that imports cleanly in dependency order in a fresh interpreter."""

from __future__ import annotations

import ast
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


def _imports(name: str, path: Path) -> set[str]:
    """The package modules ``name`` imports at module level (function-level imports are lazy on purpose)."""
    out = set()
    tree = ast.parse(path.read_text())
    base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in tree.body:
        stmts = [node]
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks do not run
            continue
        if isinstance(node, ast.Try):
            stmts = node.body
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


def test_the_import_graph_has_no_cycle():
    # a package's __init__ may import its submodules (a registry filling itself): that edge is not a cycle
    graph = {n: {d for d in deps if not d.startswith(n + ".")} for n, deps in GRAPH.items()}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as err:
        raise AssertionError(f"import cycle: {' -> '.join(err.args[1])}") from None


def test_every_module_imports_in_a_fresh_interpreter_in_dependency_order():
    graph = {n: {d for d in deps if not d.startswith(n + ".")} for n, deps in GRAPH.items()}
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
