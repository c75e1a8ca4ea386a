"""Shared pytest options. ``--update-golden`` rewrites the golden files instead of comparing with them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import fakeslurm  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current templates instead of comparing")


GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(autouse=True)
def _results_store_of_the_test(tmp_path_factory, monkeypatch):
    """Every collect of a test (in process or in a child process) adds its cells to a results store of that test's
    own, never to the user's data folder (``$XDG_DATA_HOME/dlperf_slurm/results.sqlite``), to a store a
    ``DLPERF_SLURM_STORE`` of the calling shell names, or to another test's (whose campaigns would show as history
    in this one's reports)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.delenv("DLPERF_SLURM_STORE", raising=False)


@pytest.fixture(autouse=True)
def _folders_of_the_test(monkeypatch):
    """A test's commands find campaigns, summaries and site files where the test puts them, not where the calling
    shell's variables point (a test of those variables sets them itself)."""
    for name in ("DLPERF_SLURM_LOGS", "DLPERF_SLURM_SUMMARIES", "DLPERF_SLURM_SYSTEM_SITE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _nodes_of_eight_gpus(monkeypatch):
    """The repo's DLPerf matrices write their shapes relative to a node's GPUs (``1xall``, ``4xall``): in a test
    they resolve as DLPerf's nodes had them, 8 a node, whatever cluster (or none) this machine has. A test of the
    resolution itself deletes the variable."""
    monkeypatch.setenv("DLPERF_SLURM_GPUS_PER_NODE", "8")


#: a credential in the environment of every test on the real Slurm cluster, as a user's shell holds one (submit's
#: sbatch passes it on to the job, its launcher and its ranks): AWS's documented example secret key
SHELL_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
_ON_THE_CLUSTER = ("slurm", "cgroup", "netbed", "gpubed")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """With pytest-xdist's ``--dist loadgroup`` (setup.cfg's addopts): every test on the real cluster in one group, so
    one worker runs them one after another as a run without workers would (they share one controller, and some stop
    its daemons); the other workers take the rest beside it."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if any(item.get_closest_marker(m) for m in _ON_THE_CLUSTER):
            item.add_marker(pytest.mark.xdist_group("cluster"))



@pytest.fixture(autouse=True)
def _no_credential_of_the_shell_reaches_a_file(request, monkeypatch):
    """A test on the real cluster runs with :data:`SHELL_SECRET` in its environment; no file under its ``tmp_path``
    (the runs' logs, scripts and markers, the launchers' and ranks' own files, the summaries) may hold it after."""
    if not any(request.node.get_closest_marker(m) for m in _ON_THE_CLUSTER):
        yield
        return
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SHELL_SECRET)
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None  # torn down after
    yield
    if root is not None:
        leaked = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                  and SHELL_SECRET.encode() in p.read_bytes()]
        assert leaked == [], f"the shell's credential reached {len(leaked)} files: {leaked[:5]}"


@pytest.fixture
def golden(request, monkeypatch):
    """``golden(name, text)``: compare a rendered script with ``tests/golden/<name>.sbatch`` (with
    ``--update-golden``: write it there first). The tool version a script records is pinned to the package's
    (without the checkout's commit), so a golden does not change with every commit."""
    from dlperf_slurm import __version__
    from dlperf_slurm.submit import render

    monkeypatch.setattr(render, "tool_version", lambda: __version__)

    def check(name: str, text: str) -> None:
        # the job code's hash stands as one placeholder: a golden shows the run's script, not which probe it names
        sha = render.job_code().sha256
        text = text.replace(sha, "<job code sha256>").replace(sha[:16], "<job code>")
        path = GOLDEN / f"{name}.sbatch"
        if request.config.getoption("--update-golden"):
            path.write_text(text)
        assert path.is_file(), f"no golden file {path}: run pytest --update-golden"
        assert text == path.read_text(), f"{name}: rendered script differs from {path} (pytest --update-golden)"

    return check


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake Slurm (tests/slurm/fakeslurm.py) first on PATH; returns its state file."""
    state = tmp_path / "slurm.json"
    for k, v in fakeslurm.install(tmp_path / "bin", state).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("DLPERF_SLURM_NO_SACCT", raising=False)
    return state


@pytest.fixture(autouse=True, scope="module")
def _test_cluster_daemons_alive(request):
    """Before a module of cluster tests (marker ``slurm``): a slurmd of the test cluster whose process is gone is
    started again (and its node resumed), with a warning in pytest's summary. Slurm 22.05's slurmd has aborted here
    on a corrupted heap under a burst of job launches (``malloc(): unaligned tcache chunk detected`` in
    ``nodelist_find``): one upstream crash then fails the tests that saw it, not every module after them."""
    items = [i for i in request.session.items if i.module is request.module]
    if not any(i.get_closest_marker("slurm") for i in items):
        return
    import faults

    if faults.controller_pid() is None:  # no test cluster of ours runs (its tests skip and say why)
        return
    for node in faults.nodes():
        if faults.slurmd_pid(node) is None:
            import warnings

            warnings.warn(f"the test cluster's slurmd of {node} was not running before {request.module.__name__}: "
                          "started again", stacklevel=1)
            faults.start_node(node)
