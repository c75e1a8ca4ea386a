"""Entry point of the built-in ``pytorch-ddp`` suite: synthetic-data training throughput, DLPerf style.

    python -m dlperf_slurm.workloads.train --model resnet50|bert-base --batch-size N --precision fp32|amp|fp16|bf16
        --compile 0|1 --warmup-steps 20 --measure-steps 100 [--tiny] [--data-location device|host]
        [--channels-last 0|1] [--seed S] [--threads N] [--nan-at-step K]

Rank 0 prints ``:::DLPERF {json}`` lines (see ``dlperf_slurm.events``): header, one step line per step, memory,
summary.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

from dlperf_slurm import events as ev

from . import distenv, trainargs
from .loop import summarize, timed_loop


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = trainargs.parser(description=__doc__.split("\n")[0])
    args = p.parse_args(argv)
    trainargs.check(p, args)
    return args


def _heartbeat_writer(path: str | None):
    """Rank 0 tells the job script's hang watchdog its median step time (seconds), atomically; None without a
    watchdog."""
    if not path:
        return None

    def beat(median_s: float) -> None:
        try:
            with open(f"{path}.tmp", "w") as f:
                f.write(f"{median_s:.6f}\n")
            os.replace(f"{path}.tmp", path)
        except OSError:
            pass  # a full disk must not stop training; the watchdog then keeps its fixed bound

    return beat


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _versions(torch: Any, cuda: bool) -> dict[str, Any]:
    """torch's own CUDA stack (None in a CPU build), used or not (``cuda_used``): System, apart from nvcc's."""
    built = getattr(torch.version, "cuda", None)
    nccl = cudnn = None
    if built:
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001 (NCCL not built in)
            nccl = None
        try:
            cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        except Exception:  # noqa: BLE001 (its library not loadable here)
            cudnn = None
    return {"torch": torch.__version__, "cuda": built, "nccl": nccl, "cudnn": cudnn, "cuda_used": bool(cuda),
            "python": platform.python_version()}


def _classify(exc: BaseException, compiling: bool) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "out of memory" in text.lower() or type(exc).__name__ == "OutOfMemoryError":
        return ev.KIND_OOM
    if compiling and type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
        return ev.KIND_COMPILE_FAILED
    return ev.KIND_EXCEPTION


def _memory_event(cuda: bool, gathered: list[dict[str, Any]], rank0_host: str) -> dict[str, Any]:
    """Merge every rank's allocator peaks and every node's NVML report into the memory event's fields."""
    if not cuda:
        return {ev.MAX_ALLOCATED_MIB: None, ev.MAX_RESERVED_MIB: None, ev.NVML_PEAK_USED_MIB: None,
                ev.NVML_GPU0_MIB: None, ev.GPU_UTIL_MEAN: None, ev.REASON: ev.CPU_MEMORY_REASON,
                ev.ENERGY_J: None, ev.ENERGY_S: None, ev.ENERGY_BASIS: None, ev.ENERGY_REASON: ev.CPU_ENERGY_REASON}
    energy_j: dict[str, float] = {}
    energy_s: dict[str, float] = {}
    energy_reasons: list[str] = []
    alloc = {str(g["rank"]): g["max_allocated_mib"] for g in gathered}
    reserved = {str(g["rank"]): g["max_reserved_mib"] for g in gathered}
    peaks: dict[str, float] = {}
    utils: list[float] = []
    reasons: list[str] = []
    gpu0: tuple[int, float] | None = None
    for g in gathered:
        rep = g.get("nvml")
        if rep is None:
            continue
        if rep["reason"]:
            reasons.append(f"{rep['host']}: {rep['reason']}")
        for index, mib in rep["peak_used_mib"].items():
            key = f"{rep['host']}:{index}"
            peaks[key] = max(peaks.get(key, 0.0), round(mib, 1))
            if rep["host"] == rank0_host and (gpu0 is None or int(index) < gpu0[0]):
                gpu0 = (int(index), round(mib, 1))
        if rep["util_mean"] is not None:
            utils.append(rep["util_mean"])
        for index, joules in (rep.get("energy_j") or {}).items():  # each rank reads its own GPU's counter
            energy_j[f"{rep['host']}:{index}"] = round(joules, 3)
            energy_s[f"{rep['host']}:{index}"] = round(rep["energy_s"], 6)
        if rep.get("energy_reason"):
            energy_reasons.append(f"{rep['host']}: {rep['energy_reason']}")
    return {ev.MAX_ALLOCATED_MIB: alloc, ev.MAX_RESERVED_MIB: reserved, ev.NVML_PEAK_USED_MIB: peaks or None,
            ev.NVML_GPU0_MIB: gpu0[1] if gpu0 else None,
            ev.GPU_UTIL_MEAN: sum(utils) / len(utils) if utils else None,
            ev.REASON: "; ".join(reasons) if reasons else None,
            ev.ENERGY_J: energy_j or None, ev.ENERGY_S: energy_s or None, ev.ENERGY_BASIS: "nvml window",
            ev.ENERGY_REASON: "; ".join(dict.fromkeys(energy_reasons)) or None}


@dataclass(frozen=True)
class Runtime:
    """Where this rank trains, decided once by ``run``."""

    cuda: bool
    device: Any  # torch.device
    device_name: str
    backend: str  # "nccl" | "gloo"
    distributed: bool  # world_size > 1: a process group and DDP


def run(args: argparse.Namespace, env: distenv.DistEnv, log: Any) -> int:
    """Pick the device, join the process group, train, report. ``log`` is ``events.emit`` on rank 0 and a
    no-op elsewhere."""
    import torch  # noqa: PLC0415 (heavy; only the workload process needs it)
    import torch.distributed as dist  # noqa: PLC0415

    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available() if args.device == "auto" else args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch.cuda.is_available() is False")
    if cuda:
        index = env.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        torch.backends.cudnn.benchmark = True
        rt = Runtime(True, torch.device("cuda", index), torch.cuda.get_device_name(index), "nccl",
                     env.world_size > 1)
    else:
        rt = Runtime(False, torch.device("cpu"), _cpu_name(), "gloo", env.world_size > 1)
    if rt.distributed:
        env.export()
        dist.init_process_group(rt.backend, rank=env.rank, world_size=env.world_size,
                                timeout=datetime.timedelta(minutes=15))
    try:
        return _train(args, env, log, rt)
    finally:
        if rt.distributed and dist.is_initialized():
            dist.destroy_process_group()


def _ceiling(args: argparse.Namespace, env: distenv.DistEnv, rt: Runtime) -> tuple[float | None, str | None]:
    """Rank 0: the campaign's measured matmul ceiling for this device and precision (TFLOP/s, how)."""
    where = os.environ.get("DLPERF_CAMPAIGN_DIR")
    if not args.ceiling or env.rank != 0 or not where:
        return None, None
    from dlperf_slurm.probes import ceiling  # noqa: PLC0415

    try:
        c = ceiling.for_campaign(where, rt.device_name, args.precision, "cuda" if rt.cuda else "cpu")
    except Exception as err:  # noqa: BLE001 - no ceiling is no reason to lose the run
        return None, f"not measured: {type(err).__name__}: {err}"
    how = "read from" if c.get("cached") else "measured by this run into"
    return c["tflops"], (f"{c['dtype']} matmul, best of n in {c['sizes']} at n={c['shape']}, {how} "
                         f"{ceiling.FOLDER}/ of the campaign")


def _notes(args: argparse.Namespace, cuda: bool) -> list[str]:
    notes = []
    if args.precision == "amp" and not cuda:
        notes.append("CPU run: amp means autocast bfloat16 (no fp16 GradScaler on CPU)")
    if args.precision == "fp16":
        notes.append("fp16 weights (BatchNorm fp32), no fp32 master weights, dynamic loss scaling")
    if args.tiny:
        notes.append("tiny model/input for smoke runs: NOT a benchmark result")
    if args.nan_at_step:
        notes.append(f"loss made NaN on purpose from step {args.nan_at_step} (--nan-at-step): NOT a benchmark result")
    if args.hang_at_step:
        notes.append(f"every rank stops at step {args.hang_at_step} on purpose (--hang-at-step): "
                     "NOT a benchmark result")
    return notes


def _train(args: argparse.Namespace, env: distenv.DistEnv, log: Any, rt: Runtime) -> int:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    from . import gpumem  # noqa: PLC0415
    from .workload import WorkloadConfig, build, make_step  # noqa: PLC0415

    cuda, device = rt.cuda, rt.device
    seed = args.seed + args.repeat  # each repeat its own initialisation and data order (repeat 0: --seed itself)
    torch.manual_seed(seed)
    channels_last = args.model == "resnet50" and (
        bool(args.channels_last) if args.channels_last is not None else cuda)
    workers = args.workers if args.workers is not None else (
        min(4, max(1, (os.cpu_count() or 1) // env.local_world_size)) if cuda else 0)
    total = args.warmup_steps + args.measure_steps
    cfg = WorkloadConfig(model=args.model, tiny=args.tiny, batch_size=args.batch_size, precision=args.precision,
                         device=device, channels_last=channels_last, data_location=args.data_location,
                         workers=workers, seed=seed + env.rank, total_steps=total, image_size=args.image_size,
                         num_classes=args.num_classes, seq_len=args.seq_len, lr=args.lr, world_size=env.world_size,
                         dataset=args.dataset, rank=env.rank)
    work = build(cfg)
    warmup, measure = args.warmup_steps, args.measure_steps
    if args.epochs:  # accuracy run: the processing rate is timed over the first epoch, after the warm-up
        per_epoch = work.steps_per_epoch or 1
        warmup = min(warmup, per_epoch - 1)
        measure = per_epoch - warmup
    global_batch = args.batch_size * env.world_size
    peak = _header(args, env, log, rt, work, seed=seed, channels_last=channels_last, workers=workers,
                   window=(warmup, measure), global_batch=global_batch)

    model = work.model
    if rt.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    if args.compile:
        model = torch.compile(model, backend=args.compile_backend)
    step = make_step(work, model, args.precision, device, nan_at_step=args.nan_at_step)

    sampler = None
    if cuda:  # each rank samples the GPU it uses; the memory event merges them per host:index
        sampler = gpumem.GpuMemSampler(visible_devices=gpumem.nvml_id_for(device.index))
        sampler.start()
        torch.cuda.reset_peak_memory_stats(device)
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    if rt.distributed:
        dist.barrier()
    result, evals = _steps(args, env, log, rt, work, model, step, sampler, sync, total, global_batch)
    _report(args, env, log, rt, sampler, result, evals, (warmup, measure), global_batch, work.flops_per_sample, peak)
    return 0


def _header(args: argparse.Namespace, env: distenv.DistEnv, log: Any, rt: Runtime, work: Any, *, seed: int,
            channels_last: bool, workers: int, window: tuple[int, int], global_batch: int) -> float | None:
    """Rank 0's header event: the run's settings, versions, model and the device's peak and measured ceiling;
    returns the peak (TFLOP/s per GPU, None off CUDA or for a device not in the table)."""
    import torch  # noqa: PLC0415

    from . import flops  # noqa: PLC0415
    from .workload import amp_dtype  # noqa: PLC0415

    cuda = rt.cuda
    adt = amp_dtype(args.precision, rt.device)
    tf32 = {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "cudnn": bool(torch.backends.cudnn.allow_tf32)}
    basis = flops.peak_basis(args.precision, tf32["cudnn" if args.model == "resnet50" else "matmul"])
    peak = flops.peak_tflops(rt.device_name, basis) if cuda else None
    ceiling_tflops, ceiling_basis = _ceiling(args, env, rt)
    log(ev.EV_HEADER, **{
        ev.SUITE: f"pytorch-ddp/{args.model}", ev.MODEL: args.model, ev.TINY: args.tiny, ev.RANK: env.rank,
        ev.WORLD_SIZE: env.world_size, ev.LOCAL_WORLD_SIZE: env.local_world_size, ev.NODES: env.nodes,
        ev.DEVICE: ev.DEVICE_CUDA if cuda else ev.DEVICE_CPU, ev.DEVICE_NAME: rt.device_name,
        ev.PRECISION: args.precision, ev.AMP_DTYPE: str(adt).replace("torch.", "") if adt is not None else None,
        ev.COMPILE: bool(args.compile), ev.COMPILE_BACKEND: args.compile_backend if args.compile else None,
        ev.CHANNELS_LAST: channels_last, ev.BATCH_SIZE: args.batch_size, ev.GLOBAL_BATCH: global_batch,
        ev.WARMUP_STEPS: window[0], ev.MEASURE_STEPS: window[1], ev.EPOCHS: args.epochs or None,
        ev.DATASET: args.dataset, ev.STEPS_PER_EPOCH: work.steps_per_epoch, ev.SEED: seed,
        ev.TARGET: ({"metric": args.target_pair[0], "value": args.target_pair[1]} if args.target_pair else None),
        ev.DATA_LOCATION: args.data_location, ev.BACKEND: rt.backend, ev.LAUNCHER: env.launcher,
        ev.VERSIONS: _versions(torch, cuda), ev.HOSTNAME: socket.gethostname(), ev.PARAMS: work.params,
        ev.FLOPS_PER_SAMPLE: work.flops_per_sample,
        ev.FLOPS_BASIS: "3 x forward; conv/linear/attention matmuls, multiply-add = 2",
        ev.PEAK_TFLOPS_PER_GPU: peak, ev.PEAK_BASIS: basis if cuda else None, ev.TF32: tf32 if cuda else None,
        ev.CEILING_TFLOPS_PER_GPU: ceiling_tflops, ev.CEILING_BASIS: ceiling_basis,
        ev.THREADS: torch.get_num_threads(), ev.WORKERS: workers if args.data_location == "host" else None,
        ev.MODEL_CONFIG: work.details, ev.NOTES: _notes(args, cuda), ev.MASTER_ADDR: env.master_addr,
        ev.MASTER_PORT: env.master_port, ev.SLURM_JOB_ID: os.environ.get("SLURM_JOB_ID"),
        ev.NAN_AT_STEP: args.nan_at_step or None, ev.TIME: time.time()})
    return peak


def _steps(args: argparse.Namespace, env: distenv.DistEnv, log: Any, rt: Runtime, work: Any, model: Any,
           step: Any, sampler: Any, sync: Any, total: int, global_batch: int) -> tuple[Any, list]:
    """The training steps (the window's, or the epochs of an accuracy run): the loop's result and evaluations.
    A step that raises is rank 0's error event (the sampler stopped), then raised again."""
    current = {"step": 0}

    def counted_step() -> Any:
        current["step"] += 1
        if args.hang_at_step and current["step"] == args.hang_at_step:
            while True:  # stuck, as in a collective that never completes (--hang-at-step)
                time.sleep(3600)
        return step()

    evals: list = []
    try:
        if args.epochs:
            from .epochs import train_epochs  # noqa: PLC0415

            result, evals = train_epochs(args, env, log, rt, work, model, counted_step, global_batch, sync,
                                         _heartbeat_writer(os.environ.get("DLPERF_HEARTBEAT")))
        else:
            result = timed_loop(counted_step, total, args.warmup_steps, global_batch, rank0=env.is_rank0, log=log,
                                sync=sync, loss_value=lambda t: float(t.item()),
                                on_window_start=sampler.window_start if sampler else (lambda: None),
                                on_window_end=sampler.window_end if sampler else (lambda: None), tiny=args.tiny,
                                heartbeat=_heartbeat_writer(os.environ.get("DLPERF_HEARTBEAT")))
    except BaseException as exc:
        log(ev.EV_ERROR, **{ev.KIND: _classify(exc, bool(args.compile)), ev.STEP: current["step"],
                            ev.MESSAGE: f"{type(exc).__name__}: {exc}"[:4000], ev.TINY: args.tiny})
        exc.dlperf_logged = True  # type: ignore[attr-defined]
        if sampler:
            sampler.stop()
        raise
    return result, evals


def _report(args: argparse.Namespace, env: distenv.DistEnv, log: Any, rt: Runtime, sampler: Any, result: Any,
            evals: list, window: tuple[int, int], global_batch: int, flops_per_sample: Any,
            peak: float | None) -> None:
    """Every rank's memory to rank 0, which logs the memory and summary events."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    cuda, device = rt.cuda, rt.device
    report = sampler.stop() if sampler else None
    # what each rank hands to rank 0 (not an event: _memory_event turns them into one)
    mine = {"rank": env.rank,
            "max_allocated_mib": round(torch.cuda.max_memory_allocated(device) / 2**20, 1) if cuda else None,
            "max_reserved_mib": round(torch.cuda.max_memory_reserved(device) / 2**20, 1) if cuda else None,
            "nvml": report.as_dict() if report else None}
    gathered: list[Any] = [mine]
    if rt.distributed:
        gathered = [None] * env.world_size
        dist.all_gather_object(gathered, mine)
    if env.is_rank0:
        log(ev.EV_MEMORY, **_memory_event(cuda, gathered, socket.gethostname()))
        fields = summarize(result, window[0], window[1], global_batch, flops_per_sample,
                           peak * env.world_size if peak else None)
        if args.epochs:
            fields[ev.EPOCHS] = max((e.epoch for e in evals), default=0)
        log(ev.EV_SUMMARY, **fields, **{ev.GLOBAL_BATCH: global_batch, ev.TINY: args.tiny})


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        env = distenv.detect()
    except Exception as exc:  # noqa: BLE001 (report, then fail)
        ev.emit(ev.EV_ERROR, **{ev.KIND: ev.KIND_LAUNCH, ev.MESSAGE: f"{type(exc).__name__}: {exc}",
                                ev.TINY: args.tiny})
        return 2
    log = ev.emit if env.is_rank0 else (lambda *a, **k: None)
    try:
        return run(args, env, log)
    except Exception as exc:
        if not getattr(exc, "dlperf_logged", False):
            log(ev.EV_ERROR, **{ev.KIND: _classify(exc, bool(args.compile)), ev.STEP: 0,
                                ev.MESSAGE: f"{type(exc).__name__}: {exc}"[:4000], ev.TINY: args.tiny})
        raise


if __name__ == "__main__":
    sys.exit(main())
