"""The matrix's configuration tables: ``[slurm]``, ``[environment]`` (with its container), ``[setups.NAME]`` and
``[health]`` as frozen dataclasses, and Slurm's time syntax. Imports no other dlperf_slurm module."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setup:
    """A named bundle of launcher arguments and environment variables (a network or transport set-up, e.g.
    ``--mca btl_tcp_if_include eth0``, ``NCCL_IB_DISABLE=1``): the value of a cell's ``setup`` axis."""

    launcher_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    description: str = ""


@dataclass(frozen=True)
class Health:
    """The health gate each job runs before training (``[health]`` of the site file or the matrix)."""

    enabled: bool = True
    timeout_s: int = 30  # the gate's bound
    #: how long the gate waits for a Slurm controller that does not answer (a restart, a fail-over) before it
    #: probes again: a short outage costs no run
    controller_wait_s: int = 300
    min_busbw_gbs: float = 0.0  # all-reduce bus bandwidth below this fails the gate (0: no threshold)
    #: the system (label) whose expected bus bandwidth (busbw_gbs) ``min_busbw_gbs`` is; "" when [health] set it
    expected_by: str = ""
    size_mb: float = 0.0  # the all-reduce's buffer (0: 1024 MiB with NCCL, 32 MiB with gloo)
    python: str = "python3"  # the interpreter that runs python -m dlperf_slurm.probes.health on the nodes


@dataclass(frozen=True)
class Provenance:
    """What a job records of its environment and how open the files a campaign writes are (``[provenance]`` of
    the site file or the matrix). ``env_allow``/``env_deny``: fnmatch patterns of environment variable names added
    to / taken from the built-in allow-list (:data:`dlperf_slurm.probes.provprobe.ALLOW`; deny wins). ``umask``: an
    octal umask every file of the campaign is created with on top of the user's (None: the user's alone); files are
    never more open than the campaign folder either way."""

    env_allow: tuple[str, ...] = ()
    env_deny: tuple[str, ...] = ()
    umask: str | None = None


@dataclass(frozen=True)
class System:
    """A named system of the site file (``[systems.NAME]``, a partition of it ``[systems.NAME.partitions.P]``):
    what describes its hardware; its ``[slurm]``, ``[environment]`` and ``[health]`` layer over the site's."""

    name: str
    partition: str = ""
    description: str = ""
    gpu_model: str = ""
    gpus_per_node: int | None = None
    interconnect: str = ""
    busbw_gbs: float | None = None  # the all-reduce bus bandwidth the system is expected to reach (nccl-tests)

    @property
    def label(self) -> str:
        return f"{self.name}:{self.partition}" if self.partition else self.name

    def describe(self) -> str:
        """One line: the label and the hardware."""
        gpus = " x ".join(x for x in (self.gpu_model, f"{self.gpus_per_node}/node" if self.gpus_per_node else "")
                          if x)
        bits = [b for b in (self.description, gpus, self.interconnect,
                            f"busbw {self.busbw_gbs:g} GB/s expected" if self.busbw_gbs else "") if b]
        return f"system {self.label}" + (f" ({'; '.join(bits)})" if bits else "")


@dataclass(frozen=True)
class Container:
    type: str = "none"
    image: str = ""
    mounts: tuple[str, ...] = ()  # pyxis --container-mounts / apptainer --bind
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmConfig:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str = "00:30:00"
    exclusive: bool = False
    constraint: str | None = None
    gpu_request: str = "gpus-per-node"
    cpus_per_task: int | None = None
    mem: str | None = None
    extra_directives: tuple[str, ...] = ()
    array_throttle: int | None = None
    gpus_per_node: int | None = None  # the GPUs a node of the site has (relative shapes: 1xall), never a directive

    @property
    def minutes(self) -> float:
        return time_to_minutes(self.time)


@dataclass(frozen=True)
class Environment:
    modules: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    setup: tuple[str, ...] = ()  # trusted shell lines, written as-is
    container: Container = Container()


def time_to_minutes(value: str) -> float:
    """Slurm time syntax (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``) to minutes."""
    s = str(value).strip()
    days = 0
    if "-" in s:
        d, s = s.split("-", 1)
        days = int(d)
        parts = [int(p) for p in s.split(":")] + [0, 0]
        h, m, sec = parts[0], parts[1], parts[2]
        return days * 1440 + h * 60 + m + sec / 60
    parts = [int(p) for p in s.split(":")]
    if len(parts) == 1:
        return float(parts[0])
    if len(parts) == 2:
        return parts[0] + parts[1] / 60
    if len(parts) == 3:
        return parts[0] * 60 + parts[1] + parts[2] / 60
    raise ValueError(value)
