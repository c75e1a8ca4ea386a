"""Provenance (issue 21): the environment by allow-list with credential-shaped values masked, node events from
where the program runs, set-up steps that fail loudly, the files' umask, and the summary's System section.

The credentials are real variable names with values of the shapes their services issue (tests/secretlib.py); the
campaigns are real: the built-in tiny workload through the local executor, its job scripts run by bash."""

from __future__ import annotations

import json
import os
import stat
import sys
from importlib import metadata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
import secretlib  # noqa: E402
from testlib import cli, tiny_matrix_text  # noqa: E402

from dlperf_slurm import events as ev  # noqa: E402
from dlperf_slurm.errors import UserError  # noqa: E402
from dlperf_slurm.matrix import loader  # noqa: E402
from dlperf_slurm.probes import provprobe  # noqa: E402

# What explains performance, as sites set it (NCCL's and PyTorch's documented variables, a GPU UUID as
# nvidia-smi -L prints one, Lmod's LOADEDMODULES): recorded exactly as it is.
KEPT = {
    "NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "^docker0,lo",
    "CUDA_VISIBLE_DEVICES": "GPU-8f4f1a2e-6b3c-4d5e-9f10-a1b2c3d4e5f6,GPU-0c9d8e7f-1a2b-3c4d-5e6f-708192a3b4c5",
    "LD_LIBRARY_PATH": "/usr/local/cuda-12.2/lib64:/opt/nccl/2.18.3/lib:/sw/spack/opt/linux-rhel8-zen2/gcc-11.2.0/"
                       "openmpi-4.1.5-x4qmvykcfnbh7ih5zdhnbwnbz2rjz6fg/lib",
    "OMP_NUM_THREADS": "8", "KMP_AFFINITY": "granularity=fine,compact,1,0", "UCX_TLS": "rc,sm,cuda_copy",
    "FI_PROVIDER": "efa", "HOROVOD_FUSION_THRESHOLD": "67108864", "TF_XLA_FLAGS": "--tf_xla_auto_jit=2",
    "XLA_FLAGS": "--xla_gpu_enable_triton_gemm=false", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "MXNET_CUDNN_AUTOTUNE_DEFAULT": "0",
    "FLAGS_cudnn_exhaustive_search": "1", "GLOG_v": "0", "SLURM_NNODES": "2",
    "SLURM_JOB_NODELIST": "gpu-a100-[001-004]", "SLURM_JOB_PARTITION": "gpu", "SLURM_CPUS_PER_TASK": "12",
    "LOADEDMODULES": "cuda/12.2.0:cudnn/8.9.2.26-12:nccl/2.18.3-1", "HTTPS_PROXY": "http://proxy.example.org:3128",
    "PATH": "/sw/apps/python/3.11/bin:/usr/local/bin:/usr/bin:/bin",
    # as real jobs printed them: Slurm's CPU mask of a 256-CPU node (open-mpi/ompi#7806), CoreWeave's NCCL/UCX
    # settings (coreweave/nccl-tests#17), an image pinned by its digest
    "SLURM_CPU_BIND": "quiet,mask_cpu:0x" + "F" * 64, "SLURM_CPU_BIND_LIST": "0x" + "F" * 64,
    "UCX_NET_DEVICES": "ibp0:1,ibp1:1,ibp2:1,ibp3:1,ibp4:1,ibp5:1,ibp6:1,ibp7:1", "NCCL_PROTO": "^LL128",
    "DLPERF_IMAGE": "nvcr.io/nvidia/pytorch@sha256:5c3b8e5e39b42e3cbb8cea9a8b2e45d3e3c0d8f1e2a7b4c6d9e0f1a2b3c4d5e6",
}
LEFT_OUT = {"HOME": "/home/alice", "USER": "alice", "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1", "EDITOR": "vim",
            "SLURM_JOB_USER": "alice", "PS1": "$ "}


@pytest.mark.parametrize("name, value, secret, shape", secretlib.CREDENTIALS, ids=[c[0] for c in secretlib.CREDENTIALS])
def test_no_credential_survives_even_when_a_site_allows_every_name(name, value, secret, shape):
    for allow in ((), ("*",)):  # the built-in list; a site that allows every name
        recorded = provprobe.capture_env({name: value, **KEPT}, allow=allow)
        assert secret not in json.dumps(recorded), (shape, recorded.get(name))


def test_what_explains_performance_is_recorded_as_it_is():
    recorded = provprobe.capture_env({**KEPT, **LEFT_OUT})
    assert recorded == KEPT


@pytest.mark.parametrize("value, masked", [
    ("http://bob:hunter2@proxy:3128", "http://<redacted>@proxy:3128"),
    ("https://__token__@pypi.example.org/simple", "https://<redacted>@pypi.example.org/simple"),
    ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer <redacted>"),
    ("--key AKIAIOSFODNN7EXAMPLE", "--key <redacted>"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig_nature-x", "<redacted>"),
    # tokens known by their prefix, as their services issue them ('-' inside, lower-case or letters-only bodies)
    ("glpat-3N2kq_LpR9sYtZ-AbCdE", "<redacted>"),
    ("github_pat_11abcdefg0abcdefghijkl_abcdefghijklmnopqrstuvwxyz0123456789", "<redacted>"),
    ("xoxb-123456789012-1234567890123-kqzvhwbdmtlrpxnsgfjcyeau", "<redacted>"),
    ("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", "<redacted>"),
    # an option named like a credential (transformers' --hub_token; a W&B key is 40 hex digits after '=')
    ("run_clm.py --push_to_hub --hub_token abc123 --fp16", "run_clm.py --push_to_hub --hub_token <redacted> --fp16"),
    ("train.py --wandb-api-key=3f1c9a7e5b2d4c6a8e0f1b3d5c7a9e2f4b6d8c0a", "train.py --wandb-api-key=<redacted>"),
    # what is no credential stays as it is: tuning options, a CPU mask, an image digest
    ("train.py --max_tokens 4096 --tokenizer_name gpt2 --pad_token '<pad>' --sort-key loss --use_auth_token --fp16",
     "train.py --max_tokens 4096 --tokenizer_name gpt2 --pad_token '<pad>' --sort-key loss --use_auth_token --fp16"),
    ("quiet,mask_cpu:0x" + "F" * 64, "quiet,mask_cpu:0x" + "F" * 64),
    ("nvcr.io/nvidia/pytorch@sha256:" + "5c3b8e5e" * 8, "nvcr.io/nvidia/pytorch@sha256:" + "5c3b8e5e" * 8),
])
def test_mask_value_shapes(value, masked):
    assert provprobe.mask(value) == masked


def test_site_extends_and_narrows_the_list(tmp_path):
    assert provprobe.allowed("MY_SITE_FABRIC", allow=("MY_SITE_*",)) and not provprobe.allowed("MY_SITE_FABRIC")
    assert provprobe.allowed("NCCL_DEBUG") and not provprobe.allowed("NCCL_DEBUG", deny=("NCCL_DEBUG",))
    site = tmp_path / "site.toml"
    site.write_text('[provenance]\nenv_allow = ["MY_SITE_*"]\nenv_deny = ["NCCL_DEBUG"]\numask = "027"\n')
    m = loader.load(Path(__file__).parent.parent / "matrices" / "smoke.toml", site=site)
    assert (m.provenance.env_allow, m.provenance.env_deny, m.provenance.umask) == (("MY_SITE_*",), ("NCCL_DEBUG",),
                                                                                   "0027")
    for bad, words in (('env_allow = ["NCCL;rm"]', "is not a name pattern"), ("umask = 27", "octal umask"),
                       ('umask = "999"', "octal umask")):
        site.write_text(f"[provenance]\n{bad}\n")
        with pytest.raises(UserError, match=words) as err:
            loader.load(Path(__file__).parent.parent / "matrices" / "smoke.toml", site=site)
        assert "site.toml" in str(err.value) and "\n" not in str(err.value)


def _matrix(tmp_path: Path, name: str, extra: str = "") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(tiny_matrix_text(name, axes='precision = ["fp32"]\nxla = [false]\n',
                                  extra="[health]\nenabled = false\n" + extra))
    return p


def _events(log: Path, kind: str) -> list[dict]:
    return [e for line in log.read_text().splitlines() if (e := ev.parse_event(line)) and e[ev.EVENT] == kind]


def test_a_real_campaign_writes_no_credential_anywhere(tmp_path):
    """plan, render, submit (local executor, --wait), status, collect with every credential of the table set:
    not one secret in any file under logs/, summaries/, the rendered scripts, nor in any command's output."""
    mx = _matrix(tmp_path, "secrets")
    site = tmp_path / "site.toml"
    site.write_text('[provenance]\nenv_allow = ["BENCH_*"]\nenv_deny = ["NCCL_DEBUG"]\n')
    env = {**secretlib.environment(), "BENCH_LABEL": "blue", "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "lo",
           "DLPERF_SLURM_SITE": str(site)}
    out = {}
    for args in (["plan", str(mx)], ["render", str(mx), "--out", str(tmp_path / "rendered")],
                 ["submit", str(mx), "--executor", "local", "--wait"], ["status"], ["collect", "secrets"]):
        p = cli("--logs", str(tmp_path / "logs"), *args, env=env, cwd=tmp_path, timeout=600)
        assert p.returncode == 0, (args, p.stdout, p.stderr)
        out[f"{args[0]} stdout"], out[f"{args[0]} stderr"] = p.stdout, p.stderr
    texts = {**out, **secretlib.read_tree(tmp_path / "logs", tmp_path / "summaries", tmp_path / "rendered")}
    assert len([k for k in texts if "/" in k]) >= 10  # logs, markers, scripts, manifest, summaries
    leaks = {name: where for name, where in secretlib.found(texts).items() if where}
    assert not leaks
    [log] = (tmp_path / "logs" / "secrets").glob("1n1g/*.log")
    [job] = _events(log, ev.EV_JOB)
    assert job[ev.ENV]["BENCH_LABEL"] == "blue" and "NCCL_DEBUG" not in job[ev.ENV]  # the site's lists
    assert job[ev.ENV]["NCCL_SOCKET_IFNAME"] == "lo"
    assert job[ev.ENV]["HTTPS_PROXY"] == "http://<redacted>@proxy.example.org:3128"  # the proxy, not its userinfo
    [node] = _events(log, ev.EV_NODE)
    assert node[ev.PYTHON] == sys.version.split()[0] and node[ev.VERSIONS]["torch"] == metadata.version("torch")
    summary = json.loads((tmp_path / "summaries" / "secrets.json").read_text())
    [group] = summary["system"]["node_groups"]
    assert group["framework"] == {"torch": metadata.version("torch")} and group["python"] == node[ev.PYTHON]
    assert group["nodes"] == [node[ev.HOSTNAME]] and group["runs"] == 1
    md = (tmp_path / "summaries" / "secrets.md").read_text()
    assert md.index("## System") < md.index("Method (docs/method.md)")
    assert f"torch {metadata.version('torch')}" in md


@pytest.mark.parametrize("environment, line", [
    ('setup = ["source /nonexistent/dlperf-env.sh"]', "source /nonexistent/dlperf-env.sh"),
    ('modules = ["cuda/12.2.0"]', "module load cuda/12.2.0"),
    ('[environment.container]\ntype = "apptainer"\nimage = "docker://nvcr.io/nvidia/pytorch:24.01-py3"',
     "apptainer exec docker://nvcr.io/nvidia/pytorch:24.01-py3"),
], ids=["source", "module", "container"])
def test_a_failed_setup_step_ends_the_run_as_launch_failed_with_its_line(tmp_path, environment, line):
    """Nothing here has this file, a `module` command, or apptainer: each step fails for real, and the run
    stops there instead of training without it."""
    mx = _matrix(tmp_path, "setup", "[environment]\n" + environment)
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--wait", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    p = cli("--logs", str(logs), "collect", "setup", "--no-plots", cwd=tmp_path)
    assert p.returncode == 1 and "every run failed (1: LAUNCH_FAILED 1)" in p.stderr, p.stdout + p.stderr
    [run] = json.loads((tmp_path / "summaries" / "setup.json").read_text())["runs"]
    assert run["status"] == "LAUNCH_FAILED" and line in run["reason"] and "set-up failed" in run["reason"], run
    [log] = logs.glob("setup/1n1g/*.log")
    assert not _events(log, ev.EV_HEADER)  # the workload never started


def test_a_node_whose_python_cannot_import_the_framework_ends_the_run_before_training(tmp_path):
    """The program's interpreter cannot import torch (site-packages left out, as a bare interpreter without the
    framework): the node step says so before the launch, and the run is LAUNCH_FAILED with a reason naming the
    node, the interpreter and the import error, in collect's summary and in status."""
    import socket

    bare = tmp_path / "bin" / "python-bare"
    bare.parent.mkdir()
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    mx = tmp_path / "bare.toml"
    mx.write_text(tiny_matrix_text("bare", axes='precision = ["fp32"]\nxla = [false]\n',
                                   extra="[health]\nenabled = false\n").replace("[options]\n",
                                                                              f'[options]\npython = "{bare}"\n'))
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--wait", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    want = f"set-up failed: on node {socket.gethostname()}, cannot import torch with {bare} ({sys.executable}): " \
           "ModuleNotFoundError: No module named 'torch'"
    p = cli("--logs", str(logs), "status", "bare", "--wide", cwd=tmp_path)
    assert f"LAUNCH_FAILED | exit code 4; {want}" in p.stdout, p.stdout  # (--wide: the reason whole)
    p = cli("--logs", str(logs), "collect", "bare", "--no-plots", cwd=tmp_path)
    assert p.returncode == 1 and "every run failed" in p.stderr, p.stdout + p.stderr  # (the CI exit code)
    [run] = json.loads((tmp_path / "summaries" / "bare.json").read_text())["runs"]
    assert run["status"] == "LAUNCH_FAILED" and run["reason"].endswith(want), run
    [log] = logs.glob("bare/1n1g/*.log")
    assert not _events(log, ev.EV_HEADER)  # the workload never started
    [node] = _events(log, ev.EV_NODE)  # the node's provenance is still written, before the check
    assert node[ev.EXECUTABLE] == sys.executable


def test_site_umask_and_campaign_folder_bound_every_file(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text('[provenance]\numask = "077"\n')
    mx = _matrix(tmp_path, "private")
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--wait", "--site", str(site),
            cwd=tmp_path, env={"DLPERF_SLURM_SITE": str(site)})
    assert p.returncode == 0, p.stdout + p.stderr
    p = cli("--logs", str(logs), "collect", "private", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    paths = [*(logs / "private").rglob("*"), *(tmp_path / "summaries").glob("private*")]
    assert len(paths) >= 8
    opened = {str(q): oct(stat.S_IMODE(q.stat().st_mode)) for q in paths if stat.S_IMODE(q.stat().st_mode) & 0o077}
    assert not opened
    assert stat.S_IMODE((logs / "private").stat().st_mode) == 0o700


def test_a_site_umask_never_opens_files_past_the_users_own(tmp_path):
    """Your umask 077, the site's 022, the campaign folder already there and 755: the scripts and markers submit
    writes and the log the job writes are all no more open than your own umask (the job's umask line once replaced
    yours: its log was 644 beside 600 scripts)."""
    site = tmp_path / "site.toml"
    site.write_text('[provenance]\numask = "022"\n')
    mx = _matrix(tmp_path, "mine")
    logs = tmp_path / "logs"
    (logs / "mine").mkdir(parents=True)
    (logs / "mine").chmod(0o755)
    old = os.umask(0o077)
    try:
        p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--wait", "--site", str(site),
                cwd=tmp_path)
    finally:
        os.umask(old)
    assert p.returncode == 0, p.stdout + p.stderr
    [log] = (logs / "mine").glob("1n1g/*.log")
    [script] = (logs / "mine").glob("1n1g/*.sbatch")
    assert {q.name: oct(stat.S_IMODE(q.stat().st_mode) & 0o077) for q in (log, script)} == {log.name: "0o0",
                                                                                            script.name: "0o0"}


def _three_runs_seeing(tmp_path, name: str, smi_body: str) -> None:
    """A local campaign NAME of three runs (env FAKE_SMI a, odd, b), each seeing on PATH an `nvidia-smi` stand-in
    whose shell body is ``smi_body`` (it prints the query's CSV lines, told apart by $FAKE_SMI), collected into
    tmp_path/summaries."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + smi_body)
    smi.chmod(0o755)
    mx = _matrix(tmp_path, name).read_text().replace(
        'xla = [false]', 'xla = [false]\n"env.FAKE_SMI" = ["a", "odd", "b"]')
    (tmp_path / f"{name}.toml").write_text(mx)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(tmp_path / f"{name}.toml"), "--executor", "local", "--wait", env=env,
            cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    p = cli("--logs", str(logs), "collect", name, "--no-plots", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_node_with_another_driver_is_named_in_the_system_section(tmp_path):
    """Three runs on this machine, each seeing an `nvidia-smi` (a stand-in on PATH printing the query's CSV for two
    A100s, with the drivers two public hosts reported): one run's driver differs from the majority's, and the
    summary's System section names it, in the markdown and in the JSON object."""
    _three_runs_seeing(tmp_path, "mixed", 'case "$FAKE_SMI" in odd) d=580.159.04;; *) d=535.129.03;; esac\n'
                       'for i in 0 1; do echo "$i, NVIDIA A100-SXM4-80GB, $d, 81920 MiB, 1410 MHz"; done\n')
    system = json.loads((tmp_path / "summaries" / "mixed.json").read_text())["system"]
    assert system["schema"] == "dlperf_slurm.system/1"
    assert [g["gpu"] for g in system["node_groups"]] == [
        {"model": "NVIDIA A100-SXM4-80GB", "count": 2, "driver": "535.129.03"},
        {"model": "NVIDIA A100-SXM4-80GB", "count": 2, "driver": "580.159.04"}]
    assert [g["runs"] for g in system["node_groups"]] == [2, 1]
    assert [g["gpu_limits"] for g in system["node_groups"]] == [None, None]  # a probe's lines from before them
    [finding] = system["differs"]
    runs = json.loads((tmp_path / "summaries" / "mixed.json").read_text())["runs"]
    odd = [r["run"] for r in runs if "FAKE_SMI-odd" in r["run"]]
    assert finding["field"] == "driver" and finding["majority"] == "535.129.03" and finding["value"] == "580.159.04"
    assert finding["runs"] == odd and len(odd) == 1
    # the run's provenance keeps the first node's GPUs where the readers of older logs look (compare ref:)
    assert all(len(r["provenance"]["gpus"]) == 2 and "A100-SXM4-80GB" in r["provenance"]["gpus"][0] for r in runs)
    md = (tmp_path / "summaries" / "mixed.md").read_text()
    assert f"- **driver** 580.159.04 (majority: 535.129.03) on {finding['nodes'][0]}: runs {odd[0]}" in md


def test_the_node_check_names_a_missing_interpreter_and_an_import_error():
    env = {"SLURMD_NODENAME": "n3", "PATH": "/usr/bin"}
    assert provprobe.import_failure(env, {"imports": []}, "/nowhere/python") is None  # nothing asked: no check
    assert provprobe.import_failure(env, {"imports": ["json"]}, sys.executable) is None
    assert provprobe.import_failure(env, {"imports": ["json"]}, "/nowhere/python") == \
        "on node n3, the program's interpreter /nowhere/python is not found (PATH=/usr/bin)"
    assert provprobe.import_failure(env, {"imports": ["json", "dlperf_no_such_module"]}, sys.executable) == \
        (f"on node n3, cannot import dlperf_no_such_module with {sys.executable}: ModuleNotFoundError: No module "
         "named 'dlperf_no_such_module'")


def test_a_node_whose_gpus_are_power_capped_is_named_in_the_system_section(tmp_path):
    """Three runs, each seeing an `nvidia-smi` (a stand-in on PATH printing the probe's query for two H100s in the
    query's own CSV form: `700.00 W`, `1980 MHz`); one run's GPUs are capped at 500 W below their 700 W default. The
    System section shows each group's power limit and clocks, and names the capped one as differing."""
    _three_runs_seeing(tmp_path, "capped", 'case "$FAKE_SMI" in odd) w="500.00 W";; *) w="700.00 W";; esac\n'
                       'for i in 0 1; do echo "$i, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 1980 MHz, $w, '
                       '700.00 W, 1755 MHz"; done\n')
    doc = json.loads((tmp_path / "summaries" / "capped.json").read_text())
    groups = doc["system"]["node_groups"]
    assert [g["gpu_limits"] for g in groups] == [
        "power limit 700.00 W; SM clock max 1980 MHz, application 1755 MHz",
        "power limit 500.00 W (default 700.00 W); SM clock max 1980 MHz, application 1755 MHz"]
    (diff,) = [d for d in doc["system"]["differs"] if d["field"] == "gpu_limits"]
    assert diff["value"].startswith("power limit 500.00 W") and len(diff["runs"]) == 1
    md = (tmp_path / "summaries" / "capped.md").read_text()
    assert "| GPU power limit and clocks | power limit 700.00 W; SM clock max 1980 MHz, application 1755 MHz |" in md
    assert "**gpu_limits** power limit 500.00 W (default 700.00 W)" in md
