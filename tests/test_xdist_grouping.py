"""The tests on the real cluster run one after another in one pytest-xdist worker (tests/conftest.py marks them
xdist_group "cluster", setup.cfg runs ``--dist loadgroup``): checked with the pytest and pytest-xdist installed, on a
throwaway test tree whose conftest is the project's own hook, so an upgrade that breaks the grouping (pytest 9.2.0
with xdist 3.8.0 groups nothing) fails here instead of letting the cluster tests collide on one controller."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import conftest


def test_the_cluster_tests_run_in_one_worker(tmp_path):
    hook = textwrap.dedent(inspect.getsource(conftest.pytest_collection_modifyitems))
    (tmp_path / "conftest.py").write_text(f"import pytest\n_ON_THE_CLUSTER = {conftest._ON_THE_CLUSTER!r}\n\n{hook}")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slurm: x\n    gpubed: x\n")
    (tmp_path / "test_a.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.slurm
        @pytest.mark.parametrize("i", range(8))
        def test_on_the_cluster(i):
            pass

        @pytest.mark.gpubed
        def test_on_the_gpu_bed():
            pass

        @pytest.mark.parametrize("i", range(8))
        def test_elsewhere(i):
            pass
        """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                        "-p", "no:cacheprovider", str(tmp_path)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    ran = [line.split()[0] for line in p.stdout.splitlines() if line.startswith("[gw") and " PASSED " in line
           and "test_on_the_" in line]
    grouped = [line for line in p.stdout.splitlines() if line.startswith("[gw") and line.endswith("@cluster ")
               or line.startswith("[gw") and line.rstrip().endswith("@cluster")]
    assert len(ran) == 9 and len(set(ran)) == 1 and len(grouped) == 9, p.stdout
