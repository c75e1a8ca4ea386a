"""The package's shape: no status string outside the nouns, no SQL outside its owners, every module importing
alone in a fresh interpreter, every subpackage installed, every command a module, and the import layers of
setup.cfg's ``[importlinter]`` contracts kept (import-linter's check, run here and by .ci/run, with a twin that
shows it fails on a lazy or a type-only import that runs back up)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from dlperf_slurm.model.status import Status

PKG = Path(__file__).resolve().parents[1] / "dlperf_slurm"
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
        if rel == "model/status.py" or rel in SCHEDULER_VOCABULARY:
            continue
        found += [f"{rel}:{line}: {word!r}" for line, word in _status_literals(ast.parse(path.read_text()))]
    assert not found, "use dlperf_slurm.model.status.Status, not its string:\n" + "\n".join(found)


def test_the_literal_check_can_fail():
    assert _status_literals(ast.parse("x = 'FAILED'\nif s == 'OK': pass")) == [(1, "FAILED"), (2, "OK")]
    assert _status_literals(ast.parse("if 'OOM' in line: pass")) == []


#: a function longer than this is split where a name can be given to its part
MAX_FUNCTION_LINES = 60
#: the functions that stay longer, each with why (the list only shrinks: a function that got short leaves it)
LONG_FUNCTIONS = {
    "outcome/decision.py:decide": "the precedence table of the module's docstring, followed row by row in one "
                                  "place: split, the rows' order would be spread over functions",
}


def _long_functions(tree: ast.AST, rel: str) -> dict[str, int]:
    return {f"{rel}:{n.name}": n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno is not None and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES}


def test_no_function_over_the_length_limit():
    long = {}
    for path in MODULES.values():
        long.update(_long_functions(ast.parse(path.read_text()), str(path.relative_to(PKG))))
    new = {k: v for k, v in long.items() if k not in LONG_FUNCTIONS}
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines (give their parts names): {new}"
    gone = sorted(set(LONG_FUNCTIONS) - set(long))
    assert not gone, f"now {MAX_FUNCTION_LINES} lines or fewer (or renamed): take them off LONG_FUNCTIONS: {gone}"


def test_the_length_check_can_fail():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert _long_functions(ast.parse(f"def f():\n{body}\n"), "m.py") == {"m.py:f": MAX_FUNCTION_LINES + 1}
    assert _long_functions(ast.parse("def g():\n    return 1\n"), "m.py") == {}


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter over the package under ``root`` with the project's contracts (setup.cfg)."""
    import shutil

    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    return subprocess.run([exe, "--no-logo", "--no-cache", str(PKG.parent / "setup.cfg")], capture_output=True,
                          text=True, timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})


def test_the_import_layers_hold():
    """setup.cfg's contracts: the stages' layers (lazy and TYPE_CHECKING imports included), no circle in any
    package, the job side importing only the standard library, events and probes, the nouns importing nothing."""
    p = _lint_imports(PKG.parent)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout, p.stdout[-2000:]


def test_the_layer_check_can_fail(tmp_path):
    """The same check on a copy of the package with two imports that run back up: one inside a function of the
    nouns, one under ``if TYPE_CHECKING:`` in submit (its sibling collect): both contracts break, naming them."""
    import shutil

    shutil.copytree(PKG, tmp_path / "dlperf_slurm", ignore=shutil.ignore_patterns("__pycache__"))
    status = tmp_path / "dlperf_slurm" / "model" / "status.py"
    status.write_text(status.read_text() + "\n\ndef _up():\n    from dlperf_slurm import cli  # noqa\n")
    guard = tmp_path / "dlperf_slurm" / "submit" / "guard.py"
    guard.write_text(guard.read_text() + "\nif TYPE_CHECKING:\n    from dlperf_slurm.collect import drive  # noqa\n")
    p = _lint_imports(tmp_path)
    assert p.returncode == 1, p.stdout[-3000:]
    assert "dlperf_slurm.model.status -> dlperf_slurm.cli" in p.stdout, p.stdout[-3000:]
    assert "dlperf_slurm.submit.guard -> dlperf_slurm.collect.drive" in p.stdout, p.stdout[-3000:]


def test_every_command_is_a_module_named_by_cli():
    """cli names each command's module by string (``--help`` imports no stage): every subcommand has
    ``commands/<name>.py`` with ``cmd_<name>`` (a command of actions, ``site show``: ``cmd_<name>_<action>`` each),
    and every command module (but the shared ``common``) is a subcommand. (That no stage imports cli or commands/
    is the layers contract's.)"""
    import argparse
    import importlib

    from dlperf_slurm import cli

    def actions(p):
        return next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)

    sub = actions(cli.build_parser())
    names = set(sub.choices)
    for name, p in sub.choices.items():
        module = importlib.import_module(f"dlperf_slurm.commands.{name}")
        inner = actions(p)
        handlers = [f"cmd_{name}_{a}" for a in inner.choices] if inner else [f"cmd_{name}"]
        for handler in handlers:
            assert callable(getattr(module, handler, None)), handler
    modules = {m.rsplit(".", 1)[1] for m in MODULES if m.startswith("dlperf_slurm.commands.")} - {"common"}
    assert modules == names, f"command modules without a subcommand: {modules - names}"


def test_every_module_imports_alone_in_a_fresh_interpreter():
    """Each module first in its interpreter (a hidden cycle or a missing import shows as an ImportError here)."""
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


#: the modules that hold SQL, each the one owner of its database: the campaign's manifest (and its DDL), the
#: parse cache's store in it, and the results store across campaigns
SQL_OWNERS = {"campaign/manifest.py", "campaign/schema.py", "collect/parsecache.py", "store/database.py"}
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
