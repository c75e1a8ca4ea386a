"""The ``:::DLPERF {json}`` events: the line format, every event name and every key, in one place.

Like mlperf-logging's ``mllog/constants.py``: the writers (the built-in workloads in ``dlperf_slurm.workloads``, the
sbatch script's provenance snippet ``templates/provenance.sh.j2``) and the readers (the suites' parsers, the
collector) take the names from here rather than spelling them, so a misspelt key is a NameError, not a silently
missing field. ``tests/test_events.py`` checks that everything a real run prints is declared here.

One event per line: :data:`PREFIX`, then one JSON object whose :data:`EVENT` key names the event. Non-finite floats,
which JSON cannot hold, are written as the strings ``"nan"``, ``"inf"``, ``"-inf"``; :func:`parse_line` turns such
strings back into floats.

This module imports nothing from the rest of the package and no torch: the workloads import it on every node.
Values of the dict-valued keys (``versions``, ``tf32``, ``model_config``, the memory event's per-rank and per-GPU
maps, the job event's ``env``) are free-form and have no constants.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, TextIO

PREFIX = ":::DLPERF "  # what starts every event line (after an optional launcher label)
EVENT = "event"  # the key that names the event, in every event

# ------------------------------------------------------------------------------------------ event names

EV_JOB = "job"  # provenance: printed by the sbatch script before the launch (templates/provenance.sh.j2)
EV_HEADER = "header"  # the workload's configuration, once, before the first step
EV_STEP = "step"  # once per training step, numbered from 1
EV_ERROR = "error"  # a failure, or the first non-finite loss (then training goes on)
EV_MEMORY = "memory"  # GPU memory and utilization, gathered from every rank, after the last step
EV_SUMMARY = "summary"  # the workload's own figures over the measured window, last
EV_HEALTH = "health"  # the health gate's verdict, once, before the launch (dlperf_slurm.probes.health judge)
EV_EVAL = "eval"  # an evaluation on the held-out set (accuracy mode), after each epoch
EV_NODE = "node"  # provenance of one node, from where the program runs (dlperf_slurm/probes/provprobe.py), one a node

EVENTS = (EV_JOB, EV_HEADER, EV_STEP, EV_ERROR, EV_MEMORY, EV_SUMMARY, EV_HEALTH, EV_EVAL, EV_NODE)

# ------------------------------------------------------------------------------------------ keys
# A key used by several events is declared once; the per-event tuples below say which event carries which.

TIME = "time"  # unix wall clock (s)
TINY = "tiny"  # a smoke run on a tiny model: never a result
STEP = "step"  # step number (1-based; 0 = before the first step)
HOSTNAME = "hostname"
VERSIONS = "versions"  # {package: version}

# header
SUITE = "suite"
MODEL = "model"
RANK = "rank"
WORLD_SIZE = "world_size"
LOCAL_WORLD_SIZE = "local_world_size"
NODES = "nodes"
DEVICE = "device"  # DEVICE_CUDA or DEVICE_CPU
DEVICE_NAME = "device_name"
PRECISION = "precision"
AMP_DTYPE = "amp_dtype"
COMPILE = "compile"
COMPILE_BACKEND = "compile_backend"
CHANNELS_LAST = "channels_last"
BATCH_SIZE = "batch_size"  # per rank
GLOBAL_BATCH = "global_batch"  # also in the summary
WARMUP_STEPS = "warmup_steps"  # also in the summary
MEASURE_STEPS = "measure_steps"  # also in the summary
DATA_LOCATION = "data_location"
BACKEND = "backend"  # process-group backend: nccl | gloo
LAUNCHER = "launcher"
PARAMS = "params"
FLOPS_PER_SAMPLE = "flops_per_sample"
FLOPS_BASIS = "flops_basis"
PEAK_TFLOPS_PER_GPU = "peak_tflops_per_gpu"
CEILING_TFLOPS_PER_GPU = "ceiling_tflops_per_gpu"  # the measured matmul ceiling (dlperf_slurm.probes.ceiling)
CEILING_BASIS = "ceiling_basis"  # how: dtype, best shape, cached or measured by this run
PEAK_BASIS = "peak_basis"
TF32 = "tf32"
THREADS = "threads"
WORKERS = "workers"
MODEL_CONFIG = "model_config"
NOTES = "notes"
MASTER_ADDR = "master_addr"
MASTER_PORT = "master_port"
SLURM_JOB_ID = "slurm_job_id"
NAN_AT_STEP = "nan_at_step"  # --nan-at-step: the loss is made NaN on purpose from this step on (null: off)

# step
SAMPLES = "samples"  # samples in the step, all ranks
LOSS = "loss"  # rank 0's loss; also in the nonfinite_loss error
STEP_TIME = "step_time"  # seconds since the previous step's end
THROUGHPUT = "throughput"  # samples/s; in the summary, the time flavour over the window

# eval (accuracy mode; fractions in [0, 1]; the torchvision-style line beside it prints percents)
EPOCH = "epoch"  # 1-based
TOP1 = "top1"
TOP5 = "top5"
EXAMPLES = "examples"  # held-out samples evaluated
TARGET = "target"  # {"metric": "top1", "value": 0.75} or null (header)
EPOCHS = "epochs"  # planned epochs (header); epochs run (summary)
DATASET = "dataset"  # header: "synthetic" or "digits"
STEPS_PER_EPOCH = "steps_per_epoch"
SEED = "seed"  # header: the seed the run trained from (--seed + its repeat)

# error
KIND = "kind"  # one of ERROR_KINDS
MESSAGE = "message"

# memory
MAX_ALLOCATED_MIB = "max_allocated_mib"  # {rank: MiB}, the PyTorch allocator's peak
MAX_RESERVED_MIB = "max_reserved_mib"  # {rank: MiB}
NVML_PEAK_USED_MIB = "nvml_peak_used_mib"  # {"host:gpu_index": MiB}
NVML_GPU0_MIB = "nvml_gpu0_mib"  # the first sampled GPU on rank 0's host
GPU_UTIL_MEAN = "gpu_util_mean"  # % over the measured window
REASON = "reason"  # why figures are missing
ENERGY_J = "energy_j"  # {"host:gpu_index": J} between two readings of each GPU's NVML energy counter
ENERGY_S = "energy_s"  # {"host:gpu_index": s}: the wall time between those readings
ENERGY_BASIS = "energy_basis"  # what the readings span: "nvml window" (the measured window), "nvml program"
ENERGY_REASON = "energy_reason"  # why a GPU's energy is missing

# summary
STEPS = "steps"
LATENCY_MS = "latency_ms"
THROUGHPUT_MEAN = "throughput_mean"  # the speed flavour: mean of the per-step throughputs in the window
MEASURED_SECONDS = "measured_seconds"
NONFINITE_LOSS = "nonfinite_loss"  # bool
NONFINITE_STEPS = "nonfinite_steps"  # how many steps had a non-finite loss
TFLOPS = "tflops"
PEAK_TFLOPS = "peak_tflops"  # all GPUs
MFU = "mfu"

# job (provenance; written by templates/provenance.sh.j2, which gets these names when the script is rendered)
RUN = "run"  # the run key, DLPERF_RUN
JOB_ID = "job_id"
ARRAY_JOB_ID = "array_job_id"
ARRAY_TASK_ID = "array_task_id"
NODELIST = "nodelist"
GPUS = "gpus"  # nvidia-smi lines
GPU_REASON = "gpu_reason"
CUDA = "cuda"  # nvcc's version line
NCCL = "nccl"
CONTAINER_IMAGE = "container_image"
COMMAND = "command"
GIT = "git"  # older logs: `git rev-parse HEAD` where the job ran (now TOOL, and the node event's PROGRAM)
ENV = "env"  # the environment by allow-list, credentials masked (readers leave it out of results)
PARTITION = "partition"  # SLURM_JOB_PARTITION
QOS = "qos"  # SLURM_JOB_QOS
MODULES = "modules"  # LOADEDMODULES, as a list
TOOL = "tool"  # dlperf_slurm's version (+ its checkout's commit) that rendered the script
PER_NODE = "per_node"  # a run's node events, gathered by the reader under its job record

# node (provenance of one node; also HOSTNAME, TIME, GPUS, GPU_REASON, CUDA, NCCL, VERSIONS, ERROR)
CUDNN = "cudnn"
SLURM_GPUS = "slurm_gpus"  # the GPUs Slurm gave the job on this node (SLURM_GPUS_ON_NODE; "0": none; None: no Slurm)
VISIBLE_DEVICES = "visible_devices"  # CUDA_VISIBLE_DEVICES as Slurm (or the user) set it for the node's step
PYTHON = "python"  # the interpreter's version
EXECUTABLE = "executable"  # the interpreter the probe ran with (the program's)
CONTAINER = "container"  # {runtime, image, digest} where the node step ran in a container
PROGRAM = "program"  # {path, git, describe}: the program's own code version, where it runs
ERROR = "error"  # the provenance script could not run: only this key (and EVENT) is set

# health (dlperf_slurm.probes.health; also NODES, BACKEND, GPUS, NOTES, ERROR, TIME)
RANKS = "ranks"  # every rank of the job took part in the all-reduce
BYTES = "bytes"  # the all-reduce's buffer
ITERS = "iters"  # timed all-reduces
SECONDS_PER_ITER = "seconds_per_iter"  # the ranks' mean time of one all-reduce (nccl-tests' default)
ALGBW_GBS = "algbw_gbs"  # bytes / time, GB/s (1e9)
BUSBW_GBS = "busbw_gbs"  # algbw x 2(n-1)/n
MIN_BUSBW_GBS = "min_busbw_gbs"  # the threshold (absent: none)
OK = "ok"  # the gate passed
PROBLEMS = "problems"  # what failed, one text each, naming the node
BLAMED = "blamed"  # the nodes a retry excludes
UNREACHABLE = "unreachable"  # the gate could not reach the scheduler or the rendezvous: no node's fault (why)
SECONDS = "seconds"  # the gate's own duration

# ------------------------------------------------------------------------------------------ values

# error kinds
KIND_NONFINITE_LOSS = "nonfinite_loss"  # the run goes on and exits 0; the run is NONFINITE
KIND_OOM = "oom"
KIND_COMPILE_FAILED = "compile_failed"
KIND_EXCEPTION = "exception"
KIND_LAUNCH = "launch"  # the launch environment could not be read
KIND_SETUP = "setup"  # the job script's set-up failed (module load, source, container entry): LAUNCH_FAILED
ERROR_KINDS = (KIND_NONFINITE_LOSS, KIND_OOM, KIND_COMPILE_FAILED, KIND_EXCEPTION, KIND_LAUNCH, KIND_SETUP)

# header device
DEVICE_CUDA = "cuda"
DEVICE_CPU = "cpu"

# the memory event's reason on a CPU run
CPU_MEMORY_REASON = "no CUDA device (CPU run): GPU memory not measured"
CPU_ENERGY_REASON = "no CUDA device (CPU run): GPU energy not measured"

# ------------------------------------------------------------------------------------------ keys per event

HEADER_KEYS = (SUITE, MODEL, TINY, RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODES, DEVICE, DEVICE_NAME, PRECISION,
               AMP_DTYPE, COMPILE, COMPILE_BACKEND, CHANNELS_LAST, BATCH_SIZE, GLOBAL_BATCH, WARMUP_STEPS,
               MEASURE_STEPS, DATA_LOCATION, BACKEND, LAUNCHER, VERSIONS, HOSTNAME, PARAMS, FLOPS_PER_SAMPLE,
               FLOPS_BASIS, PEAK_TFLOPS_PER_GPU, PEAK_BASIS, CEILING_TFLOPS_PER_GPU, CEILING_BASIS, TF32, THREADS,
               WORKERS, MODEL_CONFIG, NOTES, MASTER_ADDR, MASTER_PORT, SLURM_JOB_ID, NAN_AT_STEP, TIME, EPOCHS,
               DATASET, STEPS_PER_EPOCH, TARGET, SEED)
STEP_KEYS = (STEP, TIME, SAMPLES, LOSS, STEP_TIME, THROUGHPUT, TINY, EPOCH)
ERROR_KEYS = (KIND, STEP, LOSS, MESSAGE, TINY)
MEMORY_KEYS = (MAX_ALLOCATED_MIB, MAX_RESERVED_MIB, NVML_PEAK_USED_MIB, NVML_GPU0_MIB, GPU_UTIL_MEAN, REASON, ENERGY_J,
               ENERGY_S, ENERGY_BASIS, ENERGY_REASON)
SUMMARY_KEYS = (STEPS, WARMUP_STEPS, MEASURE_STEPS, THROUGHPUT, LATENCY_MS, THROUGHPUT_MEAN, MEASURED_SECONDS,
                NONFINITE_LOSS, NONFINITE_STEPS, TFLOPS, PEAK_TFLOPS, MFU, GLOBAL_BATCH, TINY, EPOCHS)
EVAL_KEYS = (EPOCH, STEP, TIME, TOP1, TOP5, EXAMPLES, TINY)
JOB_KEYS = (RUN, TIME, JOB_ID, ARRAY_JOB_ID, ARRAY_TASK_ID, NODELIST, HOSTNAME, GPUS, GPU_REASON, CUDA, NCCL,
            CONTAINER_IMAGE, VERSIONS, COMMAND, GIT, ENV, ERROR, PARTITION, QOS, MODULES, TOOL)
#: What older job events held that node events (one a node, from where the program runs) hold now.
JOB_KEYS_BEFORE_NODES = (GPUS, GPU_REASON, CUDA, NCCL, VERSIONS, GIT)
NODE_KEYS = (HOSTNAME, TIME, GPUS, SLURM_GPUS, VISIBLE_DEVICES, GPU_REASON, CUDA, CUDNN, NCCL, PYTHON, EXECUTABLE,
             VERSIONS, CONTAINER, PROGRAM, ERROR)

HEALTH_KEYS = (RANKS, NODES, BACKEND, GPUS, BYTES, ITERS, SECONDS_PER_ITER, ALGBW_GBS, BUSBW_GBS, MIN_BUSBW_GBS,
               NOTES, OK, PROBLEMS, BLAMED, UNREACHABLE, SECONDS, ERROR, TIME)

KEYS: dict[str, tuple[str, ...]] = {EV_JOB: JOB_KEYS, EV_HEADER: HEADER_KEYS, EV_STEP: STEP_KEYS,
                                    EV_ERROR: ERROR_KEYS, EV_MEMORY: MEMORY_KEYS, EV_SUMMARY: SUMMARY_KEYS,
                                    EV_HEALTH: HEALTH_KEYS, EV_EVAL: EVAL_KEYS, EV_NODE: NODE_KEYS}
"""Every key each event may carry besides :data:`EVENT`."""

# ------------------------------------------------------------------------------------------ the line format

_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, str):
        return _NONFINITE.get(value, value)
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def format_line(event: str, **fields: Any) -> str:
    """The line for one event, without the trailing newline: compact JSON, the event name first."""
    return PREFIX + json.dumps(_encode({EVENT: event, **fields}), separators=(",", ":"), allow_nan=False)


def emit(event: str, stream: TextIO | None = None, **fields: Any) -> str:
    """Write one event line to ``stream`` (stdout by default), flushed; return the line."""
    line = format_line(event, **fields)
    out = sys.stdout if stream is None else stream
    out.write(line + "\n")
    out.flush()
    return line


def job_error_line(message: str) -> str:
    """The job event the sbatch script prints when its provenance script cannot run. Spaced JSON (``json.dumps``'
    default separators), like the line the provenance script itself prints."""
    return PREFIX + json.dumps({EVENT: EV_JOB, ERROR: message})


def node_error_line(message: str) -> str:
    """The node event a node prints when the provenance probe cannot run there."""
    return PREFIX + json.dumps({EVENT: EV_NODE, ERROR: message})


def setup_error_line(step: str) -> str:
    """The error event the job script prints when a set-up step fails (``step``: its line): the run ends there."""
    return PREFIX + json.dumps({EVENT: EV_ERROR, KIND: KIND_SETUP, MESSAGE: f"set-up failed: {step}"})


def parse_event(line: str) -> dict[str, Any] | None:
    """The raw event dict of a ``:::DLPERF`` line, or None for any other line. Text before the prefix (an
    ``srun -l`` label, a fragment a record was glued to) is ignored: the last prefix on the line wins, unless
    only the first one starts a record (the job event's command may quote the prefix).
    Non-finite floats stay the strings "nan"/"inf"/"-inf" (the collector reads numbers leniently)."""
    at = line.rfind(PREFIX)
    if at < 0:
        return None
    obj = _load(line[at + len(PREFIX):])
    if obj is None and line.find(PREFIX) < at:  # the last prefix is inside a string (a job line's command)
        obj = _load(line[line.find(PREFIX) + len(PREFIX):])
    return obj


def _load(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get(EVENT), str) else None


def parse_line(line: str) -> dict[str, Any] | None:
    """:func:`parse_event`, with the strings "nan"/"inf"/"-inf" anywhere in the object turned back into floats."""
    obj = parse_event(line)
    return None if obj is None else _decode(obj)
