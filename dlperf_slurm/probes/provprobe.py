"""The provenance probe every job script runs: ``job`` on the batch host, ``node`` on every node of the run, from
where the program runs (inside its container, with its interpreter). Each prints one ``:::DLPERF`` line.

This file is the probe's whole source: the campaign's job code carries it (``templates/provenance.sh.j2`` puts it into the
code as text and runs it with ``python3 -c``), so it imports only the standard library and nothing of
dlperf_slurm (the nodes, and the container, need not have the package). Its event and key names are the ones
declared in :mod:`dlperf_slurm.events` (``tests/test_provenance.py`` checks that every key it prints is).

The environment is recorded by ALLOW-list (:data:`ALLOW`, what explains performance: NCCL, CUDA, the Slurm job's
geometry, threads, transports, the frameworks' tuning flags, library paths, loaded modules, proxies), narrowed by
:data:`DENY` and by the site's ``[provenance] env_deny``, widened by its ``env_allow``. A name that reads like a
credential is recorded as ``<redacted>`` even when allowed; a value is masked wherever it holds something shaped
like a credential (URL userinfo, a JWT, a ``Bearer``/``Basic`` header, an AWS key id, a PEM block, a token known by
its prefix: GitHub, GitLab, Slack, Hugging Face, npm; the value of an option named like one, a long random token):
:func:`mask`.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
from fnmatch import fnmatchcase

PREFIX = ":::DLPERF "
REDACTED = "<redacted>"

#: Names recorded (fnmatch patterns, case-sensitive): what explains a run's performance.
ALLOW = (
    "NCCL_*", "CUDA_*", "CUDNN_*", "NVIDIA_*", "CUBLAS_*", "OMP_*", "MKL_*", "KMP_*", "UCX_*", "FI_*", "HOROVOD_*",
    "TF_*", "XLA_*", "PYTORCH_*", "TORCH_*", "MXNET_*", "FLAGS_*", "GLOG_*", "OMPI_MCA_*", "PMIX_MCA_*", "I_MPI_*",
    "MASTER_ADDR", "MASTER_PORT", "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "PYTHONPATH", "LOADEDMODULES",
    "MODULEPATH", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "all_proxy",
    "ALL_PROXY", "DLPERF_RUN", "DLPERF_IMAGE",
    # the Slurm job's geometry and placement
    "SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_JOB_PARTITION", "SLURM_JOB_QOS", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
    "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE", "SLURM_GPUS*", "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_MEM_PER_*", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
    "SLURM_CLUSTER_NAME", "SLURM_DISTRIBUTION", "SLURM_CPU_BIND*", "SLURM_HINT", "SLURM_JOB_RESERVATION",
    "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_TOPOLOGY_ADDR*",
)
#: Names never recorded, though an allow pattern matches them.
DENY = ("DLPERF_COMMAND", "DLPERF_PROVENANCE*",
        "TF_VAR_*", "TF_TOKEN_*", "TF_CLI_*", "TF_WORKSPACE", "TF_REGISTRY_*")  # Terraform's, not TensorFlow's
#: A name that reads like a credential: its value is never recorded, whatever allows it.
SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASS|PWD|CRED|AUTH|JWT|COOKIE|SESSION|SIGNATURE|PRIVATE|CERT|WEBHOOK",
                         re.I)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@")
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*-----.*?(-----END [A-Z0-9 ]*-----|$)", re.S)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+|=|:)[^\s,;]+")
_AWS_ID = re.compile(r"\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b")
# tokens known by their prefix, whose bodies the run rule below can miss ('-' inside a GitLab or Slack token,
# Hugging Face's letters-only body): GitHub, GitLab, Slack, Hugging Face, npm
_PREFIXED = re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w.-]{20,}|xox[abeoprs]-[\w-]{10,}"
                       r"|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{30,})")
# an option of a command named like a credential: its value (``--hub_token X``, ``--wandb-api-key=X``)
# (the name ends with the credential word, and a bare ``token`` counts only after a word saying whose: ``--max_tokens``,
# ``--tokenizer_name``, ``--pad_token``, ``--sort-key`` keep their values)
_SECRET_OPTION = re.compile(r"(?i)(--?(?:token|(?:[\w-]*[-_])?(?:(?:hub|auth|access|api|hf|bot|private|session|secret"
                            r"|github|gitlab|wandb)[-_]?token|secret|passw(?:or)?d|(?:api|access|secret)[-_]?key)))"
                            r"(=|\s+)(?!-)[^\s,;]+")
# a run of token characters ('-' and '.' end a run: GPU UUIDs, versions, host names and paths stay readable; '='
# only as base64's padding, so `name=value` is two runs)
_RUN = re.compile(r"[A-Za-z0-9_+/]{20,}=*")


def _token_like(run: str, before: str = "") -> bool:
    """A long run of token characters that is no path, no hex number (``0x...``: Slurm's CPU masks) and no content
    digest (``sha256:...``): mixed-case letters and digits, or 32+ hex digits."""
    if run.startswith("/") or re.fullmatch(r"0x[0-9a-fA-F]+", run) or before.endswith(("sha256:", "sha512:")):
        return False
    if re.fullmatch(r"[0-9a-fA-F]{32,}", run):
        return True
    return bool(re.search(r"[0-9]", run) and re.search(r"[a-z]", run) and re.search(r"[A-Z]", run))


def mask(value: str) -> str:
    """``value`` with every part shaped like a credential replaced by ``<redacted>`` (URL userinfo dropped)."""
    v = _PEM.sub(REDACTED, value)
    v = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", v)
    v = _JWT.sub(REDACTED, v)
    v = _AUTH_HEADER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, v)
    v = _AWS_ID.sub(REDACTED, v)
    v = _PREFIXED.sub(REDACTED, v)
    v = _SECRET_OPTION.sub(lambda m: m.group(1) + m.group(2) + REDACTED, v)
    return _RUN.sub(lambda m: REDACTED if _token_like(m.group(0), v[max(0, m.start() - 7):m.start()])
                    else m.group(0), v)


def allowed(name: str, allow=(), deny=()) -> bool:
    """Whether ``name`` is recorded: an allow pattern (built-in or the site's) matches and no deny pattern does."""
    if any(fnmatchcase(name, p) for p in (*DENY, *deny)):
        return False
    return any(fnmatchcase(name, p) for p in (*ALLOW, *allow))


def capture_env(environ, allow=(), deny=()) -> dict:
    """The recorded environment: allowed names only; a credential-like name's value redacted, every value masked."""
    return {k: (REDACTED if SECRET_NAME.search(k) else mask(v)) for k, v in sorted(environ.items())
            if allowed(k, allow, deny)}


def _run(*cmd, cwd=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=cwd)
    except Exception:
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def _version(dist):
    try:
        from importlib import metadata
        return metadata.version(dist)
    except Exception:
        return None


#: Distributions that are a framework (the System section's split: :mod:`dlperf_slurm.report.system`); the rest, libraries.
FRAMEWORKS = ("torch", "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "paddlepaddle", "paddlepaddle-gpu",
              "mindspore", "mindspore-gpu", "oneflow", "mxnet", "mxnet-cu112", "jax")
LIBRARIES = ("jaxlib", "torchvision", "horovod", "deepspeed", "apex", "transformers", "megatron-core", "torchtitan",
             "torchao", "nvidia-dali-cuda110", "nvidia-dali-cuda120", "mpi4py", "numpy", "dlperf_slurm")


def _first_version(dists):
    for d in dists:
        v = _version(d)
        if v:
            return v
    return None


def _cudnn(environ):
    if environ.get("CUDNN_VERSION"):
        return environ["CUDNN_VERSION"]
    v = _first_version(("nvidia-cudnn-cu12", "nvidia-cudnn-cu11"))
    if v:
        return v
    for header in ("/usr/include/cudnn_version.h", "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h",
                   "/usr/local/cuda/include/cudnn_version.h"):
        try:
            text = open(header).read()
        except OSError:
            continue
        parts = [re.search(rf"#define CUDNN_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
        if all(parts):
            return ".".join(p.group(1) for p in parts)
    return None


def _cuda(environ):
    if environ.get("CUDA_VERSION"):
        return environ["CUDA_VERSION"]
    m = re.search(r"release [\d.]+, V(\d+\.\d+\.\d+)", _run("nvcc", "--version") or "")
    if m:
        return m.group(1)
    return _first_version(("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"))


def _container(environ, image, kind):
    """The container the probe runs in, as the job entered it (``kind``: pyxis or apptainer), with the image's digest
    where its reference (``...@sha256:...``) or apptainer's labels give one."""
    if not image or kind in (None, "none"):
        return None
    runtime = kind
    digest = None
    if "@sha256:" in (image or ""):
        digest = image.split("@", 1)[1]
    try:
        with open("/.singularity.d/labels.json") as f:
            labels = json.load(f)
        digest = digest or next((str(v) for k, v in labels.items() if "digest" in k.lower()), None)
    except (OSError, ValueError, AttributeError):
        pass
    return {"runtime": runtime, "image": image, "digest": digest}


def _program(path):
    """The program's own code version: ``git describe`` and commit of the folder it runs from, where it is a
    checkout (inside the container: the image's copy)."""
    if not path:
        return None
    where = path if os.path.isdir(path) else os.path.dirname(path) or "."
    if not os.path.isdir(where):
        return {"path": path, "git": None, "reason": "no such folder where the program runs"}
    commit = _run("git", "rev-parse", "HEAD", cwd=where)
    return {"path": path, "git": commit, "describe": _run("git", "describe", "--always", "--dirty", "--tags",
                                                               cwd=where) if commit else None}


def node_record(environ, conf) -> dict:
    # the power limit in force (a site may cap it below the default) and the application clock: what an energy or
    # a throughput figure depends on besides the model (report.system shows them per node group)
    gpus = _run("nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,clocks.max.sm,power.limit,"
                "power.default_limit,clocks.applications.graphics", "--format=csv,noheader")
    versions = {"python": sys.version.split()[0]}
    for d in (*FRAMEWORKS, *LIBRARIES):
        v = _version(d)
        if v:
            versions[d] = v
    return {
        "event": "node", "time": time.time(),
        "hostname": environ.get("SLURMD_NODENAME") or socket.gethostname(),  # the Slurm node (several may share a host)
        "gpus": gpus.splitlines() if gpus else None,
        "slurm_gpus": environ.get("SLURM_GPUS_ON_NODE") or ("0" if environ.get("SLURM_JOB_ID") else None), "visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_reason": None if gpus else "nvidia-smi not found or no GPU",
        "cuda": _cuda(environ), "cudnn": _cudnn(environ),
        "nccl": environ.get("NCCL_VERSION") or _first_version(("nvidia-nccl-cu12", "nvidia-nccl-cu11")),
        "python": sys.version.split()[0], "executable": sys.executable, "versions": versions,
        "container": _container(environ, conf.get("image"), conf.get("container")), "program": _program(conf.get("program_path")),
    }


def job_record(environ, conf) -> dict:
    modules = environ.get("LOADEDMODULES")
    return {
        "event": "job", "run": environ.get("DLPERF_RUN"), "time": time.time(),
        "job_id": environ.get("SLURM_JOB_ID"), "array_job_id": environ.get("SLURM_ARRAY_JOB_ID"),
        "array_task_id": environ.get("SLURM_ARRAY_TASK_ID"), "nodelist": environ.get("SLURM_JOB_NODELIST"),
        "hostname": socket.gethostname(), "partition": environ.get("SLURM_JOB_PARTITION"),
        "qos": environ.get("SLURM_JOB_QOS"), "modules": [m for m in modules.split(":") if m] if modules else [],
        "container_image": conf.get("image") or None, "tool": conf.get("tool"),
        "command": mask(environ.get("DLPERF_COMMAND") or "") or None,
        "env": capture_env(environ, conf.get("allow", ()), conf.get("deny", ())),
    }


#: the node step's exit status when the program's interpreter cannot import what the program needs there: the job
#: script ends the run before its launch (LAUNCH_FAILED, this probe's error line the reason)
CANNOT_IMPORT = 86


def import_failure(environ, conf, wanted):
    """Why the program cannot start on this node, or None: its interpreter (``wanted``, as the program's argv names
    it; the probe runs with python3 where it is not found) is missing, or cannot import one of ``conf["imports"]``
    (dlperf_slurm, the suite's framework). One line naming the node, the interpreter and the import error."""
    names = conf.get("imports") or []
    if not names:
        return None
    node = environ.get("SLURMD_NODENAME") or socket.gethostname()
    import shutil

    if wanted and not shutil.which(wanted):
        return f"on node {node}, the program's interpreter {wanted} is not found (PATH={environ.get('PATH', '')})"
    who = sys.executable if not wanted or wanted == sys.executable else f"{wanted} ({sys.executable})"
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except BaseException as err:  # ImportError, or whatever the module raised as it was imported
            text = " ".join(f"{type(err).__name__}: {err}".split())
            return f"on node {node}, cannot import {name} with {who}: {text[:400]}"
    return None


def _write(record):
    # one write(2) for the whole line: the node steps of a job may share one output file, and a line written in
    # pieces (print's text, then its newline; or a buffer's worth at a time) can be cut by another node's line
    data = (PREFIX + json.dumps(record) + "\n").encode()
    sys.stdout.flush()
    while data:
        data = data[os.write(sys.stdout.fileno(), data):]


def main(argv) -> int:
    what, conf = argv[1], json.loads(argv[2]) if len(argv) > 2 else {}
    try:
        record = job_record(os.environ, conf) if what == "job" else node_record(os.environ, conf)
    except Exception as err:  # a probe that fails says so in one line; the run goes on
        record = {"event": what, "hostname": socket.gethostname(), "error": f"provenance probe failed: {err!r}"}
    _write(record)
    why = import_failure(os.environ, conf, argv[3] if len(argv) > 3 else "") if what == "node" else None
    if why:  # the run cannot start here: its set-up fails with this line (events.setup_error_line's form)
        _write({"event": "error", "kind": "setup", "message": f"set-up failed: {why}"})
        return CANNOT_IMPORT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
