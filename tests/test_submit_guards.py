"""Nothing runs here by surprise (issue #31, part 4): ``submit --executor auto`` with no ``sbatch`` on PATH runs on
this machine only a campaign that suits it (no GPU asked, or marked tiny/CPU), else one line says that no Slurm was
found and how to run it here anyway; a submission above a size (runs or GPU-hours; the site file's ``[submit]``)
asks for ``--yes``, showing what it asks for. Through the CLI, as users run it; "no sbatch on PATH" is a PATH of
this machine's programs without the Slurm clients (the machine running the tests has them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import REPO, TEMPLATES, cli, matrix_text, write_matrix  # noqa: E402

SLURM_CLIENTS = {"sbatch", "srun", "squeue", "sacct", "scontrol", "scancel", "salloc", "sinfo", "sacctmgr", "sattach",
                 "sbcast", "sdiag", "sprio", "sreport", "sshare", "sstat", "strigger", "sview", "scrontab"}


@pytest.fixture
def no_slurm(tmp_path) -> dict[str, str]:
    """The environment of a login node before ``module load slurm``: every program of PATH but Slurm's."""
    bin_dir = tmp_path / "no-slurm-bin"
    bin_dir.mkdir()
    for folder in [str(Path(sys.executable).parent), *os.environ["PATH"].split(os.pathsep)]:
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = bin_dir / entry.name
            if entry.name not in SLURM_CLIENTS and not target.exists() and not target.is_symlink():
                target.symlink_to(entry.path)
    return {"PATH": str(bin_dir)}


def _which_sbatch(env: dict[str, str]) -> str | None:
    import shutil

    return shutil.which("sbatch", path=env["PATH"])


def test_auto_without_sbatch_refuses_a_gpu_campaign_in_one_line(tmp_path, no_slurm):
    assert _which_sbatch(no_slurm) is None
    for name in ("bert", "resnet50"):
        p = cli("--logs", str(tmp_path / "logs"), "submit", str(REPO / "matrices" / f"{name}.toml"), "--no-site",
                env=no_slurm, cwd=tmp_path)
        err = p.stderr.strip()
        assert p.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, p.stdout + p.stderr
        assert err.startswith("dlperf-slurm: error: no Slurm found (no sbatch on PATH: `module load slurm`?): "
                              f"campaign {name} asks for GPUs ("), err
        assert err.endswith("`--executor local` runs it on this machine anyway"), err
        p = cli("--logs", str(tmp_path / "logs"), "submit", str(REPO / "matrices" / f"{name}.toml"), "--no-site",
                "--dry-run", env=no_slurm, cwd=tmp_path)
        assert p.returncode == 2 and "no Slurm found" in p.stderr, p.stderr
    assert not (tmp_path / "logs").exists(), "a refused submit made the campaign folder"
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(REPO / "matrices" / "bert.toml"), "--no-site",
            "--executor", "local", "--dry-run", env=no_slurm, cwd=tmp_path)
    assert p.returncode == 0 and "local runner" in p.stdout, p.stdout + p.stderr  # asked for: it would run here


def test_auto_without_sbatch_runs_what_suits_this_machine(tmp_path, no_slurm):
    """The smoke matrix (tiny, no GPU request) and a campaign asking for no GPU run here under ``auto``."""
    p = cli("--logs", str(tmp_path / "logs"), "submit", str(REPO / "matrices" / "smoke.toml"), "--no-site",
            "--dry-run", env=no_slurm, cwd=tmp_path)
    assert p.returncode == 0 and "submitting 6 as 2 local runners" in p.stdout, p.stdout + p.stderr
    for name, text in (("cpu", matrix_text(name="cpu")),  # gpu_request = "none"
                       ("tiny", matrix_text(name="tiny").replace('gpu_request = "none"', "")
                        + "[options]\ntiny = true\n")):
        mx = tmp_path / f"{name}.toml"
        mx.write_text(text)
        p = cli("--logs", str(tmp_path / "logs"), "submit", str(mx), "--no-site", "--templates", str(TEMPLATES),
                "--wait", env=no_slurm, cwd=tmp_path)
        assert p.returncode == 0 and "no sbatch on PATH: running locally" in p.stderr, p.stdout + p.stderr
        assert "OK 2" in p.stdout, p.stdout


def test_a_large_submission_asks_for_yes(tmp_path):
    logs = str(tmp_path / "logs")
    big = tmp_path / "big.toml"  # 40 batch sizes x 30 repeats: 1,200 runs, above the default 1,000
    big.write_text(matrix_text(name="big", repeats=30).replace(
        "batch_size = [1]", f"batch_size = [{', '.join(str(b) for b in range(1, 41))}]"))
    p = cli("--logs", logs, "submit", str(big), "--executor", "local", "--no-site", "--templates", str(TEMPLATES),
            cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == (
        "dlperf-slurm: error: campaign big: this submit asks for 1,200 runs and 200.0 GPU-hours at most (time limit "
        "00:10:00 each), above 1,000 runs or 5,000 GPU-hours (the site file's [submit] confirm_above_runs, "
        "confirm_above_gpu_hours): `submit --yes` submits it; `plan` lists its cells"), p.stderr
    assert not (tmp_path / "logs").exists(), "a refused submit made the campaign folder"
    # the site sets the bound; what is counted is what this submit would submit
    site = tmp_path / "site.toml"
    site.write_text("[submit]\nconfirm_above_runs = 1\n")
    mx = write_matrix(tmp_path, name="f", repeats=2)
    args = ("--logs", logs, "submit", str(mx), "--executor", "local", "--site", str(site), "--templates",
            str(TEMPLATES))
    p = cli(*args, cwd=tmp_path)
    assert p.returncode == 2 and "this submit asks for 2 runs" in p.stderr and "above 1 run or" in p.stderr, p.stderr
    p = cli(*args, "--yes", "--wait", cwd=tmp_path)
    assert p.returncode == 0 and "OK 2" in p.stdout, p.stdout + p.stderr
    p = cli(*args, cwd=tmp_path)  # nothing left to submit: nothing to confirm
    assert p.returncode == 0 and "nothing to submit" in p.stdout, p.stdout + p.stderr
    site.write_text("[submit]\nconfirm_above_runs = -1\n")
    p = cli(*args, cwd=tmp_path)
    assert p.returncode == 2 and "submit.confirm_above_runs" in p.stderr and "expected a number >= 0" in p.stderr, \
        p.stderr
