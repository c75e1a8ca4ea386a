"""``python -m dlperf_slurm.workloads.pyconfig --module config --set dataset.emore.num_classes=N -- SCRIPT ARGS...``:
run a training script whose settings live in a Python config module (``config.py`` of insightface's ArcFace and
oneflow_face), with some of them changed, without editing any file (DLPerf edited them with ``sed``).

The script's folder goes first on ``sys.path``; the module is imported, each ``--set a.b.c=VALUE`` is applied to it
(VALUE read as a Python literal — ``1800000``, ``0.1``, ``True`` — else kept as text; the parent of the last name
must exist, so a misspelt path fails loudly), and the script then runs as ``__main__`` with ``sys.argv = [SCRIPT,
ARGS...]``. The script's own ``from config import ...`` finds the module already imported and changed.

``--after FUNC``: the module's function ``FUNC`` (e.g. Partial FC's ``generate_config``, which writes a dataset
preset over ``config``) is wrapped so that the changes are applied again after each call.

What a launcher adds to the script's command line that the script cannot take there (the ``node_ips`` launcher
appends ``--node_ips=A,B --ctrl_port=P``; oneflow_face's ``insightface_train.py`` reads ``--node_ips`` with a
``str2list`` that ``eval``s each address, a SyntaxError, and rejects ``--ctrl_port``: DLPerf put the addresses into
``sample_config.py`` with sed):

- ``--list-arg FLAG=a.b``: the script's ``--FLAG=V`` (or ``--FLAG V``) is taken off its arguments and ``a.b`` is set
  to ``V`` split at commas (a list of strings);
- ``--drop-arg FLAG``: the script's ``--FLAG=V`` (or ``--FLAG V``) is taken off its arguments;
- ``--per-node FLAG``: the script's ``--FLAG=DIR`` (or ``--FLAG DIR``) becomes ``DIR/node<N>``, N = ``SLURM_NODEID``
  (0 outside Slurm): each node's process gets a folder of its own where the nodes share the run's folder (a program
  that refuses a non-empty model folder, or races another node to create it).
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
import runpy
import sys
from typing import Any, Callable


def literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def apply(module: Any, dotted: str, value: Any) -> None:
    """Set ``module.<dotted>`` (attributes or keys of easydict/dict levels) to ``value``."""
    *parents, last = dotted.split(".")
    obj = module
    for name in parents:
        obj = obj[name] if isinstance(obj, dict) and not hasattr(obj, name) else getattr(obj, name)
    if isinstance(obj, dict):
        obj[last] = value
        if hasattr(type(obj), "__setattr__") and type(obj) is not dict:
            setattr(obj, last, value)  # easydict keeps both views
    else:
        setattr(obj, last, value)


def reapplied(fn: Callable[..., Any], module: Any, sets: list[tuple[str, Any]]) -> Callable[..., Any]:
    """``fn``, followed by the changes ``sets`` to ``module`` after every call."""

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        out = fn(*a, **kw)
        for key, value in sets:
            apply(module, key, value)
        return out

    return wrapper


def take_arg(argv: list[str], flag: str) -> tuple[list[str], str | None]:
    """``argv`` without ``--flag=V`` / ``--flag V`` (every occurrence), and the last ``V`` (None if absent)."""
    out, value, i = [], None, 0
    while i < len(argv):
        a = argv[i]
        if a.startswith(f"--{flag}="):
            value = a.partition("=")[2]
        elif a == f"--{flag}" and i + 1 < len(argv):
            value = argv[i + 1]
            i += 1
        else:
            out.append(a)
        i += 1
    return out, value


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    module_name, sets, after = "config", [], []
    list_args: list[tuple[str, str]] = []
    drop_args: list[str] = []
    per_node: list[str] = []
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--module" and args:
            module_name = args.pop(0)
        elif flag == "--after" and args:
            after.append(args.pop(0))
        elif flag == "--set" and args and "=" in args[0]:
            key, _, value = args.pop(0).partition("=")
            sets.append((key, literal(value)))
        elif flag == "--list-arg" and args and "=" in args[0]:
            name, _, key = args.pop(0).partition("=")
            list_args.append((name, key))
        elif flag == "--drop-arg" and args:
            drop_args.append(args.pop(0))
        elif flag == "--per-node" and args:
            per_node.append(args.pop(0))
        else:
            print(f"pyconfig: unexpected argument {flag!r}", file=sys.stderr)
            return 2
    if not args or len(args) < 2:
        print("usage: python -m dlperf_slurm.workloads.pyconfig [--module M] [--set a.b=V ...] [--after FUNC] "
              "[--list-arg FLAG=a.b] [--drop-arg FLAG] [--per-node FLAG] -- SCRIPT [ARGS]", file=sys.stderr)
        return 2
    script, rest = args[1], args[2:]
    for name, key in list_args:
        rest, taken = take_arg(rest, name)
        if taken is not None:
            sets.append((key, [v.strip() for v in taken.split(",") if v.strip()]))
    for name in drop_args:
        rest, taken = take_arg(rest, name)
        if taken is not None:
            print(f"pyconfig: --{name}={taken} taken off the script's arguments", flush=True)
    node = os.environ.get("SLURM_NODEID", "0")
    for name in per_node:
        rest, taken = take_arg(rest, name)
        if taken is not None:
            rest.append(f"--{name}={os.path.join(taken, 'node' + node)}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    module = importlib.import_module(module_name)
    for key, value in sets:
        apply(module, key, value)
        print(f"pyconfig: {module_name}.{key} = {value!r}", flush=True)
    for name in after:
        setattr(module, name, reapplied(getattr(module, name), module, sets))
    sys.argv = [script, *rest]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
