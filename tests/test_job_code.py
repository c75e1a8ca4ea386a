"""The campaign's job code (templates/job.sh.j2): written once into the campaign folder, content-addressed and
read-only; each run's script names it by its whole sha256 and runs nothing of it when the copy differs.

The scripts are written by the CLI (``dlperf_slurm render``, ``submit --executor local``) with the fake payloads of
tests/slurm/templates and run with bash on this machine; the changed copy is a real edit of the file on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf_slurm import events as ev
from dlperf_slurm.campaign import manifest
from dlperf_slurm.model.status import Status
from dlperf_slurm.submit import render

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NAMED = re.compile(r'^DLPERF_JOB_CODE=\$DLPERF_CAMPAIGN_DIR/(\.job/[0-9a-f]{16}\.sh)$.*?"([0-9a-f]{64})  -"',
                   re.M | re.S)


def _named(script: Path) -> tuple[str, str]:
    found = NAMED.search(script.read_text())
    assert found, script.read_text()[:2000]
    return found.group(1), found.group(2)


def _run(script: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "DLPERF_"))}
    env["DLPERF_TEST_STARTS"] = str(tmp_path / "starts")
    return subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_one_read_only_file_per_campaign_that_every_script_names_by_its_hash(tmp_path):
    out = tmp_path / "out"
    p = cli("render", str(ROOT / "matrices" / "smoke.toml"), "--no-site", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    [code] = list((out / ".job").iterdir())
    scripts = sorted(out.rglob("*.sbatch"))
    assert len(scripts) == 6
    digest = hashlib.sha256(code.read_bytes()).hexdigest()
    assert code.name == f"{digest[:16]}.sh" and code.stat().st_mode & 0o222 == 0  # named for its bytes, read-only
    assert {_named(s) for s in scripts} == {(f".job/{code.name}", digest)}
    # the scripts hold what is their own; the code they share is there once
    assert all(s.stat().st_size < 3 * 1024 for s in scripts), [s.stat().st_size for s in scripts]
    for word in ("dlperf_mark()", "DLPERF_PROVENANCE_EOF", "dlperf_health()", "dlperf_watch()"):
        assert word in code.read_text() and all(word not in s.read_text() for s in scripts), word
    # rendered again: the same file, left as it was
    before = code.stat().st_mtime_ns
    assert cli("render", str(ROOT / "matrices" / "smoke.toml"), "--no-site", "--out", str(tmp_path / "out2"),
               cwd=tmp_path).returncode == 0
    assert code.stat().st_mtime_ns == before and [c.name for c in (tmp_path / "out2" / ".job").iterdir()] == [code.name]


def test_a_changed_copy_ends_the_run_before_its_start_and_says_so(tmp_path):
    mx = write_matrix(tmp_path, name="jc", modes=("ok",), repeats=2)
    out = tmp_path / "out"
    p = cli("render", str(mx), "--no-site", "--out", str(out), "--templates", str(TEMPLATES), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    first, second = sorted(out.rglob("*.sbatch"))
    r = _run(first, tmp_path)  # the file as rendered: the run starts and ends well
    assert r.returncode == 0, r.stderr + first.with_suffix(".log").read_text()
    assert json.loads(first.with_suffix(".exit").read_text())["rc"] == 0
    assert len((tmp_path / "starts").read_text().splitlines()) == 1
    name, _ = _named(second)
    code = out / name
    code.chmod(0o644)
    code.write_text(code.read_text().replace("dlperf_start() {", "dlperf_start() {\n  echo edited by hand", 1))
    r = _run(second, tmp_path)
    assert r.returncode == 4
    assert len((tmp_path / "starts").read_text().splitlines()) == 1, "the payload started with a changed job code"
    marker = json.loads(second.with_suffix(".exit").read_text())
    assert marker["rc"] == 4 and marker["started"] is True
    log = second.with_suffix(".log").read_text()
    [event] = [ev.parse_event(line) for line in log.splitlines() if line.startswith(ev.PREFIX)]
    assert event is not None and event[ev.EVENT] == ev.EV_ERROR and event[ev.KIND] == ev.KIND_SETUP
    assert name in event[ev.MESSAGE] and "missing or changed" in event[ev.MESSAGE]
    assert "edited by hand" not in log
    # a ghost start of the ended run leaves it as it is
    before = second.with_suffix(".exit").read_bytes()
    assert _run(second, tmp_path).returncode == 4 and second.with_suffix(".exit").read_bytes() == before


def test_status_says_why_and_a_retry_writes_the_file_again(tmp_path):
    """Under the local executor: the job code of a submitted campaign changed by hand after its first run; the
    retry of a failed run renders and writes it again, and runs."""
    mx = write_matrix(tmp_path, name="jr", modes=("ok",), repeats=1)
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--no-site", "--executor", "local", "--wait",
            "--templates", str(TEMPLATES), timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    cdir = logs / "jr"
    [code] = list((cdir / ".job").iterdir())
    (run,) = manifest.load_manifest(cdir)
    assert run.status == Status.OK, run.reason
    # the run again, as a ghost-free fresh start (its evidence moved away), with the file changed
    run.marker.unlink()
    run.log.unlink()
    code.chmod(0o644)
    code.write_text(code.read_text() + "# changed\n")
    assert _run(run.script, tmp_path).returncode == 4
    p = cli("--logs", str(logs), "status", str(cdir), "--no-site", "--wide")
    assert "LAUNCH_FAILED" in p.stdout and "job code" in p.stdout and "--retry-failed" in p.stdout, p.stdout
    p = cli("--logs", str(logs), "submit", str(mx), "--no-site", "--executor", "local", "--wait", "--retry-failed",
            "--templates", str(TEMPLATES), timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = manifest.load_manifest(cdir)
    assert run.status == Status.OK, run.reason
    assert hashlib.sha256(code.read_bytes()).hexdigest().startswith(code.stem)  # written again as named


def test_the_job_code_holds_no_value_of_a_run():
    """One file serves every run of a campaign: it renders from the templates alone (no run, cell or matrix)."""
    text = render.environment().get_template(render.JOB_CODE_TEMPLATE).render()
    assert text == render.environment().get_template(render.JOB_CODE_TEMPLATE).render()
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


@pytest.mark.parametrize("path", sorted((ROOT / "matrices").glob("*.toml")), ids=lambda p: p.name)
def test_a_cells_prototype_renders_every_run_as_a_whole_render_does(path, tmp_path):
    """The built-in templates render once per cell, the repeat put in after (the directives too, for ``render``); a
    folder whose name needs quoting included. The same templates as a user's own folder render every run whole: the two must be equal."""
    from dlperf_slurm.matrix import loader

    m = loader.load(path, site=False)
    runs = loader.runs(m, tmp_path / "a b's campaign")
    once, whole = render.Renderer(m), render.Renderer(m, str(render.builtin_template_dir()))
    for run in runs:
        preamble = render.standalone_preamble(m, run)
        assert once.render(run, preamble) == whole.render(run, preamble), run.key
        assert once.standalone(run) == whole.standalone(run) == whole.render(run, preamble), run.key
