"""TEST-BED ONLY (the GPU mode of tests/slurm/start.sh): the "training program" of tests/test_gpu_slurm.py's launcher
test. Started by a launcher as its program, each rank (process) appends one JSON line to $DLPERF_DEVICE_REPORT with
the GPU it would use: the entry of CUDA_VISIBLE_DEVICES (as Slurm, and then the launcher, left it for this process)
at its local rank (the variable its launcher sets: LOCAL_RANK, PADDLE_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
HOROVOD_LOCAL_RANK, MindSpore's DEVICE_ID, srun's SLURM_LOCALID), or the only entry when one is left. Launchers of
one process a node (tf_config, node_ips, dmlc) report every device the process sees; mp_spawn's program spawns one
process per visible device itself, as pytorch/examples' main.py does. It never touches a device.

Usage: python rank_device.py LAUNCHER [the launcher's own arguments, before or after it, are ignored]
"""

import json
import os
import socket
import sys

LOCAL_VARS = ("LOCAL_RANK", "PADDLE_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "HOROVOD_LOCAL_RANK", "DEVICE_ID",
              "SLURM_LOCALID")
PER_NODE = ("tf_config", "node_ips", "dmlc")


def visible() -> list:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [x.strip() for x in cvd.split(",") if x.strip()] if cvd is not None else []


def report(rec: dict) -> None:
    rec.update(host=socket.gethostname(), pid=os.getpid(), visible=visible())
    line = (json.dumps(rec) + "\n").encode()
    fd = os.open(os.environ["DLPERF_DEVICE_REPORT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def local_rank():
    for name in LOCAL_VARS:
        v = os.environ.get(name, "")
        if v.isdigit():
            return name, int(v)
    return None, None


def per_gpu(launcher: str, spawned=None) -> None:
    seen = visible()
    var, local = ("spawn index", spawned) if spawned is not None else local_rank()
    if not seen or local is None:
        device = None
    elif len(seen) == 1:
        device = seen[0]
    else:
        device = seen[local] if local < len(seen) else None
    report({"launcher": launcher, "local_var": var, "local": local, "device": device})


def main(argv) -> int:
    launcher = next((a for a in argv[1:] if not a.startswith("-")), "")  # deepspeed puts --local_rank=N first
    if os.environ.get("MS_ROLE") == "MS_SCHED":  # msrun's scheduler process runs the program too, on no device
        return 0
    if launcher == "mp_spawn":
        import multiprocessing as mp

        kids = [mp.get_context("fork").Process(target=per_gpu, args=(launcher, i)) for i in range(len(visible()))]
        for k in kids:
            k.start()
        for k in kids:
            k.join()
    elif launcher in PER_NODE:
        report({"launcher": launcher, "local": None, "devices": visible()})
    else:
        per_gpu(launcher)
    if launcher == "dmlc":  # once every node's worker has reported, fail: that stops each node's scheduler and
        import time  # server (they wait for workers that never join), and srun then the other workers

        deadline = time.time() + 60
        nodes = int(os.environ.get("SLURM_NNODES", "1"))
        while time.time() < deadline and len(open(os.environ["DLPERF_DEVICE_REPORT"]).readlines()) < nodes:
            time.sleep(0.2)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
