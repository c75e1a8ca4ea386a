"""``dlperf_slurm.events``: every ``:::DLPERF`` event name and key that a writer prints is declared there.

The main check runs the real writers (a tiny CPU workload, its failure paths, the sbatch provenance snippet) and
compares what they print with the constants. Static checks then make sure the writers and the pytorch-ddp parser
name events and keys through the constants only.
"""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf_slurm import events as ev
from dlperf_slurm.submit import render

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "dlperf_slurm"
WORKLOAD_SOURCES = sorted((PKG / "workloads").glob("*.py"))
PARSER_SOURCE = PKG / "suites" / "pytorch_ddp.py"

_CONSTANTS = {name: value for name, value in vars(ev).items() if name.isupper() and isinstance(value, str)}
_DECLARED_WORDS = set(ev.EVENTS) | {k for keys in ev.KEYS.values() for k in keys} | {ev.EVENT} | set(ev.ERROR_KINDS)


# --------------------------------------------------------------------------------------- the module itself
def test_every_event_has_its_keys_and_names_are_unique():
    assert set(ev.KEYS) == set(ev.EVENTS) and len(set(ev.EVENTS)) == len(ev.EVENTS)
    for event, keys in ev.KEYS.items():
        assert len(set(keys)) == len(keys), event
        assert ev.EVENT not in keys, event
    values = {"PREFIX", "DEVICE_CUDA", "DEVICE_CPU", "CPU_MEMORY_REASON", "CPU_ENERGY_REASON", "PER_NODE"}  # constants that are no key
    key_values = {v for k, v in _CONSTANTS.items() if not k.startswith(("EV_", "KIND_")) and k not in values}
    assert key_values == {k for keys in ev.KEYS.values() for k in keys} | {ev.EVENT}, "a key in no event's tuple"


def test_events_imports_nothing_of_the_package_and_no_torch():
    code = ("import sys, dlperf_slurm.events; "
            "print(sorted(m for m in sys.modules if m.startswith('dlperf_slurm') or m == 'torch'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "['dlperf_slurm', 'dlperf_slurm.events']"


def test_the_old_dlperf_log_path_is_a_re_export():
    from dlperf_slurm.workloads import dlperf_log

    assert dlperf_log.parse_event is ev.parse_event and dlperf_log.PREFIX is ev.PREFIX


# ------------------------------------------------------------------------------- what the writers really print
def _check_declared(events: list[dict]) -> None:
    for e in events:
        name = e[ev.EVENT]
        assert name in ev.EVENTS, f"undeclared event {name!r}"
        undeclared = set(e) - {ev.EVENT} - set(ev.KEYS[name])
        assert not undeclared, f"{name} event: keys not in events.KEYS[{name!r}]: {sorted(undeclared)}"
        if name == ev.EV_ERROR:
            assert e[ev.KIND] in ev.ERROR_KINDS, e


def _train(argv, monkeypatch, capsys, detect=None) -> tuple[object, list[dict]]:
    """The workload CLI in this process, as a single-process launch; its exit code (or exception) and events."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from dlperf_slurm.workloads import distenv, train

    for key in list(os.environ):
        if key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") or key.startswith(("SLURM_", "OMPI_")):
            monkeypatch.delenv(key)
    if detect is not None:
        monkeypatch.setattr(distenv, "detect", detect)
    capsys.readouterr()
    try:
        code: object = train.main(argv)
    except Exception as exc:  # noqa: BLE001
        code = exc
    lines = capsys.readouterr().out.splitlines()
    events = [ev.parse_line(line) for line in lines if line.startswith(ev.PREFIX)]
    assert all(e is not None for e in events)
    return code, events


TINY = ["--tiny", "--batch-size", "2", "--warmup-steps", "1", "--measure-steps", "2", "--threads", "1"]


def test_a_real_run_prints_only_declared_events_and_keys_and_every_declared_key(monkeypatch, capsys):
    code, events = _train(["--model", "resnet50", *TINY], monkeypatch, capsys)
    assert code == 0
    _check_declared(events)
    names = [e[ev.EVENT] for e in events]
    assert names == [ev.EV_HEADER] + [ev.EV_STEP] * 3 + [ev.EV_MEMORY, ev.EV_SUMMARY]
    for e in events:  # these events always carry every key (null where it does not apply): no stale constant
        assert set(e) - {ev.EVENT} == set(ev.KEYS[e[ev.EVENT]]), e[ev.EVENT]


def test_an_accuracy_run_prints_declared_eval_events_with_every_key(monkeypatch, capsys):
    """Two epochs of digits at batch 256 (5 steps each), no target: two eval events, the step events numbered
    across epochs."""
    code, events = _train(["--model", "resnet50", "--tiny", "--batch-size", "256", "--warmup-steps", "1",
                           "--threads", "1", "--epochs", "2", "--dataset", "digits", "--ceiling", "0"],
                          monkeypatch, capsys)
    assert code == 0
    _check_declared(events)
    evals = [e for e in events if e[ev.EVENT] == ev.EV_EVAL]
    steps = [e for e in events if e[ev.EVENT] == ev.EV_STEP]
    assert [e[ev.EPOCH] for e in evals] == [1, 2] and [e[ev.STEP] for e in steps] == list(range(1, 11))
    for e in evals + steps + [events[0], events[-1]]:
        assert set(e) - {ev.EVENT} == set(ev.KEYS[e[ev.EVENT]]), e[ev.EVENT]
    assert events[0][ev.MEASURE_STEPS] == 4 and events[-1][ev.EPOCHS] == 2  # the window: epoch 1 after warm-up


def test_failure_paths_print_declared_error_events(monkeypatch, capsys):
    errors = []
    code, events = _train(["--model", "resnet50", *TINY, "--nan-at-step", "2"], monkeypatch, capsys)
    assert code == 0
    _check_declared(events)
    errors += [e for e in events if e[ev.EVENT] == ev.EV_ERROR]
    assert [e[ev.KIND] for e in errors] == [ev.KIND_NONFINITE_LOSS]

    code, events = _train(["--model", "bert-base", *TINY, "--compile", "1", "--compile-backend", "nosuch"],
                          monkeypatch, capsys)
    assert isinstance(code, Exception)
    _check_declared(events)
    assert events[-1][ev.KIND] == ev.KIND_COMPILE_FAILED
    errors.append(events[-1])
    assert set().union(*errors) - {ev.EVENT} == set(ev.ERROR_KEYS)  # every declared error key is written

    def broken_env():
        raise RuntimeError("no MASTER_ADDR")

    code, events = _train(["--model", "resnet50", *TINY], monkeypatch, capsys, detect=broken_env)
    assert code == 2
    _check_declared(events)
    assert [(e[ev.EVENT], e[ev.KIND]) for e in events] == [(ev.EV_ERROR, ev.KIND_LAUNCH)]


# ------------------------------------------------------------------------------------- the provenance snippet
def _provenance(tmp_path: Path, path: str) -> tuple[dict, list[dict]]:
    """Run the job code's provenance step (templates/provenance.sh.j2, one node, no container) with ``PATH=path``,
    as a run's script calls it; return its one job event and its node events."""
    script = tmp_path / "provenance.sh"
    code = render.environment().get_template(render.JOB_CODE_TEMPLATE).render()
    script.write_text(code + "\nDLPERF_IMAGE=''\nDLPERF_STEP=(srun --nodes=1)\ndlperf_provenance python3 '{}' ''\n")
    env = {"PATH": path, "DLPERF_RUN": "c.r0", "DLPERF_COMMAND": "torchrun x", "SLURM_JOB_ID": "77",
           "HOME": str(tmp_path)}
    p = subprocess.run(["/bin/bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if line.startswith(ev.PREFIX)]
    assert len(lines) == 2, p.stdout
    # campaign.py finds this line by the spaced text '"event": "job"' (json.dumps' default separators)
    assert f'"{ev.EVENT}": "{ev.EV_JOB}"' in lines[0]
    job, node = ev.parse_event(lines[0]), ev.parse_event(lines[1])
    assert job is not None and job[ev.EVENT] == ev.EV_JOB
    assert node is not None and node[ev.EVENT] == ev.EV_NODE
    return job, [node]


def test_provenance_snippet_writes_the_job_and_node_keys_of_events(tmp_path):
    python_dir = str(Path(sys.executable).parent)
    job, nodes = _provenance(tmp_path, f"{python_dir}:/usr/bin:/bin")
    assert set(job) - {ev.EVENT} == set(ev.JOB_KEYS) - {ev.ERROR} - set(ev.JOB_KEYS_BEFORE_NODES)
    assert job[ev.RUN] == "c.r0" and job[ev.JOB_ID] == "77" and job[ev.COMMAND] == "torchrun x"
    assert set(nodes[0]) - {ev.EVENT} == set(ev.NODE_KEYS) - {ev.ERROR}
    assert nodes[0][ev.PYTHON] == sys.version.split()[0]


def test_provenance_snippet_fallbacks_are_events_with_an_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    job, (node,) = _provenance(tmp_path, str(empty))  # no python3 at all
    assert set(job) == {ev.EVENT, ev.ERROR} and "python3 not found" in job[ev.ERROR]
    assert set(node) == {ev.EVENT, ev.ERROR} and "provenance probe failed" in node[ev.ERROR]
    broken = tmp_path / "broken"
    broken.mkdir()
    fake = broken / "python3"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    job, (node,) = _provenance(tmp_path, str(broken))  # a python3 that fails
    assert set(job) == {ev.EVENT, ev.ERROR} and "provenance script failed" in job[ev.ERROR]
    assert set(node) == {ev.EVENT, ev.ERROR}


# ------------------------------------------------------------------------------------------ static checks
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@pytest.mark.parametrize("path", [*WORKLOAD_SOURCES, PARSER_SOURCE, REPO / "bench" / "bench_workload.py"],
                         ids=lambda p: p.name)
def test_every_events_constant_used_exists(path):
    used = {n.attr for n in ast.walk(_tree(path))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "ev"}
    missing = sorted(a for a in used if not hasattr(ev, a))
    assert not missing, f"{path.name}: ev.{missing} not in dlperf_slurm/events.py"


def _is_ev_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ev"


@pytest.mark.parametrize("path", WORKLOAD_SOURCES, ids=lambda p: p.name)
def test_workloads_name_events_and_keys_through_the_constants(path):
    """Every ``log(...)``/``emit(...)`` call: the event is an ``ev.`` constant, no field is a keyword argument
    (``step=k`` spells the key), and a ``**{...}`` dict's keys are ``ev.`` constants."""
    bad = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name not in ("log", "emit"):
            continue
        if node.args and not _is_ev_constant(node.args[0]):
            bad.append(f"line {node.lineno}: event {ast.unparse(node.args[0])}")
        for kw in node.keywords:
            if kw.arg is not None and kw.arg != "stream":
                bad.append(f"line {node.lineno}: keyword {kw.arg}=")
            if kw.arg is None and isinstance(kw.value, ast.Dict):
                bad += [f"line {node.lineno}: key {ast.unparse(k)}" for k in kw.value.keys
                        if k is not None and not _is_ev_constant(k)]
    assert not bad, f"{path.name}: {bad}"


def test_the_pytorch_ddp_parser_spells_no_event_name_or_key():
    cls = next(n for n in _tree(PARSER_SOURCE).body if isinstance(n, ast.ClassDef) and n.name == "_PytorchDDP")
    parse = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "parse")
    words = sorted({n.value for n in ast.walk(parse) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
                   & _DECLARED_WORDS)
    assert not words, f"pytorch_ddp.parse spells {words}: use dlperf_slurm.events"
    imports = [n for n in ast.walk(_tree(PARSER_SOURCE)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not any("workloads" in ast.unparse(n) for n in imports), "the parser imports dlperf_slurm.workloads"


def test_line_helpers():
    assert json.loads(ev.job_error_line("x")[len(ev.PREFIX):]) == {ev.EVENT: ev.EV_JOB, ev.ERROR: "x"}
    assert ev.format_line(ev.EV_STEP, **{ev.STEP: 1}).startswith(ev.PREFIX + '{"' + ev.EVENT + '":"step"')


def test_a_prefix_quoted_inside_a_record_does_not_hide_it():
    """The job event records the launch command; a command that prints ``:::DLPERF`` lines puts the prefix
    inside the record's JSON strings (seen with the test payload: the run's start time was lost)."""
    line = ':::DLPERF {"event": "job", "time": 12.5, "command": "echo \\":::DLPERF {\\\\\\"event\\\\\\":1}\\""}'
    assert ev.parse_event(line) == {"event": "job", "time": 12.5,
                                        "command": 'echo ":::DLPERF {\\"event\\":1}"'}
    glued = ':::DLPERF {"event":"st' + ':::DLPERF {"event": "step", "step": 3}'
    assert ev.parse_event(glued) == {"event": "step", "step": 3}  # a glued fragment: the last one wins
