"""A campaign found from anywhere: the system-wide site file under the user's, ``[paths]`` and the environment for
the folders, the global options before or after the command, and ``site show`` saying what was read and where
each key comes from. Run as a user runs the commands: from another folder than the campaigns'."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, write_matrix  # noqa: E402


def _center(tmp_path: Path, paths: str = "") -> tuple[Path, Path, dict]:
    """A center's system-wide site file and a user's, and the environment that points at them."""
    system = tmp_path / "etc" / "site.toml"
    system.parent.mkdir()
    system.write_text('[slurm]\npartition = "gpu"\ntime = "00:20:00"\naccount = "center"\n\n'
                      f'[submit]\nconfirm_above_runs = 500\n{paths}')
    user = tmp_path / "home" / "site.toml"
    user.parent.mkdir()
    user.write_text('[slurm]\naccount = "mine"\n')
    return system, user, {"DLPERF_SLURM_SYSTEM_SITE": str(system), "DLPERF_SLURM_SITE": str(user)}


def test_the_users_site_file_lies_over_the_system_wide_one_key_by_key(tmp_path):
    system, user, env = _center(tmp_path)
    mx = write_matrix(tmp_path, name="lay")
    p = cli("render", str(mx), "--out", str(tmp_path / "r"), "--templates", str(TEMPLATES), env=env, check=True)
    script = next((tmp_path / "r").rglob("*.sbatch")).read_text()
    assert "#SBATCH --partition=gpu" in script  # the center's
    assert "#SBATCH --account=mine" in script and "center" not in script  # the user's wins
    # the matrix's own [slurm] time wins over both
    assert "#SBATCH --time=00:10:00" in script

    p = cli("site", "show", env=env, check=True)
    assert f"system-wide  {system}  read" in p.stdout and f"user         {user}  read" in p.stdout
    assert f'slurm.account = "mine"  {user}:2 (over {system}:4)' in p.stdout
    assert f'slurm.partition = "gpu"  {system}:2' in p.stdout
    assert "submit.confirm_above_runs = 500" in p.stdout


def test_an_error_in_the_system_wide_file_names_that_file_and_line(tmp_path):
    system, user, env = _center(tmp_path)
    system.write_text(system.read_text().replace('time = "00:20:00"', 'time = "soon"'))
    mx = tmp_path / "m.toml"
    mx.write_text(write_matrix(tmp_path, name="m").read_text().replace('time = "00:10:00"\n', ""))
    p = cli("plan", str(mx), env=env)
    assert p.returncode == 2 and p.stderr.startswith(f"dlperf-slurm: error: {system}:3: slurm.time"), p.stderr
    assert "Traceback" not in p.stderr


def test_a_campaign_is_found_from_any_folder_through_paths_or_the_environment(tmp_path):
    """The site file's [paths] logs (with $VAR expanded) names the campaigns' root for every command: submit in
    one folder, status and collect from another; $DLPERF_SLURM_LOGS over it; --logs over both, also after the
    command."""
    root = tmp_path / "scratch"
    system, user, env = _center(tmp_path, '\n[paths]\nlogs = "$SCRATCH/logs"\nsummaries = "sums"\n')
    env["SCRATCH"] = str(root)
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    mx = write_matrix(tmp_path, name="any", repeats=1)
    cli("submit", str(mx), "--executor", "local", "--templates", str(TEMPLATES), "--wait", env=env, cwd=here,
        check=True)
    assert (root / "logs" / "any" / "manifest.sqlite").is_file() and not (here / "logs").exists()
    p = cli("status", "any", env=env, cwd=there)
    assert p.returncode == 0 and "campaign any (" in p.stdout, p.stderr
    p = cli("collect", "any", "--no-plots", "--no-store", env=env, cwd=there, check=True)
    assert (system.parent / "sums" / "any.json").is_file()  # relative: from the site file's folder
    p = cli("site", "show", env=env, cwd=there, check=True)
    assert f"logs       {root / 'logs'}  ({system}:10 [paths] logs)" in p.stdout, p.stdout

    moved = tmp_path / "moved"
    (root / "logs").rename(moved)
    p = cli("status", "any", env={**env, "DLPERF_SLURM_LOGS": str(moved)}, cwd=there)
    assert p.returncode == 0 and f"({moved / 'any'})" in p.stdout, p.stderr
    p = cli("--logs", str(tmp_path / "nowhere"), "status", "any", "--logs", str(moved), env=env, cwd=there)
    assert p.returncode == 0, p.stderr  # the one after the command stands
    p = cli("status", "any", env=env, cwd=there)
    assert p.returncode == 2 and "no campaign" in p.stderr  # the site's root no longer holds it: said, no traceback


def test_paths_errors_are_one_line_naming_file_and_key(tmp_path):
    system, user, env = _center(tmp_path, '\n[paths]\nlogs = "$NO_SUCH_VARIABLE_HERE/logs"\n')
    p = cli("status", env=env, cwd=tmp_path)
    assert p.returncode == 2 and f"{system}:10: paths.logs: $NO_SUCH_VARIABLE_HERE is not set" in p.stderr, p.stderr
    system.write_text(system.read_text().replace("[paths]\nlogs", "[paths]\nlog"))
    p = cli("status", env=env, cwd=tmp_path)
    assert p.returncode == 2 and "paths.log: unknown key (did you mean 'logs'?)" in p.stderr, p.stderr
    p = cli("status", "--no-site", env=env, cwd=tmp_path)  # --no-site reads neither file
    assert "paths.log" not in p.stderr


def test_site_show_without_any_site_file_says_so(tmp_path):
    env = {"DLPERF_SLURM_SYSTEM_SITE": "", "DLPERF_SLURM_SITE": "", "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    p = cli("site", "show", env=env, cwd=tmp_path, check=True)
    assert "keys: none" in p.stdout and "not there" in p.stdout
    assert f"logs       {tmp_path / 'logs'}  (default: in the working folder)" in p.stdout


def test_site_show_says_a_named_site_file_is_missing_and_site_commands_still_run(tmp_path):
    """``$DLPERF_SLURM_SITE`` naming a file not written yet (before ``site init`` writes it): ``site show`` says
    the other commands stop on it, and runs; ``status`` stops on it in one line."""
    system, user, env = _center(tmp_path)
    user.unlink()
    p = cli("site", "show", env=env, cwd=tmp_path, check=True)
    assert f"{user}  not there: every other command stops on it" in p.stdout
    assert f'slurm.account = "center"  {system}:4' in p.stdout
    p = cli("status", env=env, cwd=tmp_path)
    assert p.returncode == 2 and f"{user}: no such site file" in p.stderr


def test_site_show_says_the_system_in_use_and_the_keys_it_sets(tmp_path):
    system, user, env = _center(tmp_path)
    system.write_text(system.read_text() + '\n[systems.ci]\ngpus_per_node = 8\n[systems.other.slurm]\n'
                      'partition = "gpuq"\n')
    line = system.read_text().splitlines().index('partition = "gpuq"') + 1
    user.write_text('default_system = "ci"\n[slurm]\naccount = "mine"\n')
    p = cli("site", "show", env=env, cwd=tmp_path, check=True)
    lines = p.stdout.splitlines()
    i = lines.index(f"system: ci (default_system, {user}:1)")
    gpus = system.read_text().splitlines().index("gpus_per_node = 8") + 1
    assert lines[i + 1:i + 3] == [f"  gpus_per_node = 8  {system}:{gpus}",  # its hardware: the matrices' GPUs a node
                                  "  it sets no [slurm], [environment] or [health] key over the site's"], p.stdout
    p = cli("site", "show", "--system", "other", env=env, cwd=tmp_path, check=True)
    lines = p.stdout.splitlines()
    i = lines.index("system: other (--system)")
    assert lines[i + 1:i + 3] == ["  its keys over the site's:", f'    slurm.partition = "gpuq"  {system}:{line}']


def test_a_default_system_the_site_files_lack_is_named_at_its_line(tmp_path):
    site = tmp_path / "s.toml"
    site.write_text('default_system = "zzz"\n')
    mx = write_matrix(tmp_path, name="d")
    p = cli("--site", str(site), "plan", str(mx), cwd=tmp_path)
    assert p.returncode == 2 and f"{site}:1: default_system: 'zzz': no [systems.zzz]" in p.stderr, p.stderr
