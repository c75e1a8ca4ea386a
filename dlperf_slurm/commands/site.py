"""``site show``: the site files read (the center's system-wide one, then the user's over it), every key with the
file and line it comes from, and the folders and results store the commands use, each with what decided it.

``site init``: read the Slurm cluster this machine submits to (``sinfo``, ``scontrol show config``, ``sacctmgr``
for this user) and write a commented site file: each partition's nodes, GPUs a node (GRES) and MaxTime, the
user's default account and QOS, MaxArraySize; ``gpu_request = "none"`` where no node has GPU GRES; modules and a
container left as commented examples. An existing site file is never overwritten without ``--force``."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from dlperf_slurm.errors import UserError
from dlperf_slurm.words import plural


def cmd_site_show(args: argparse.Namespace) -> int:
    print("\n".join(show_lines(args)))
    return 0


def show_lines(args: argparse.Namespace) -> list[str]:
    """What ``site show`` prints (see the module docstring)."""
    from dlperf_slurm.matrix import sitefile
    from dlperf_slurm.store import database

    site = sitefile.read_site(False if args.no_site else args.site, missing_ok=True)
    read: dict[str, Path] = {role: path for role, path in site.files}
    out = ["site files, lowest first (each over the one above it; a matrix's own keys over them all):"]
    if args.no_site:
        out.append("  none: --no-site")
    for role, where, how in (
            ("system-wide", sitefile.system_site_file(), f"${sitefile.SYSTEM_SITE_ENV}, else {sitefile.SYSTEM_SITE}"),
            ("user", read.get("user") or sitefile.user_site_file(), f"--site, else ${sitefile.SITE_ENV}, else "
             "~/.config/dlperf_slurm/site.toml")):
        named = args.site if role == "user" and args.site else os.environ.get(
            sitefile.SITE_ENV if role == "user" else sitefile.SYSTEM_SITE_ENV)
        state = "read" if role in read else "not there" + (": every other command stops on it" if named else "")
        if not args.no_site:
            out.append(f"  {role:<11}  {where}  {state}  ({how})")
    keys = _origins(site)
    out.append("keys:" if keys else "keys: none")
    for key, (value, place, under) in keys.items():
        shown = database.describe(value) if key == "store.url" and isinstance(value, str) else _toml(value)
        out.append(f"  {key} = {shown}  {place}" + (f" (over {', '.join(under)})" if under else ""))
    out += _system_lines(args, site)
    out.append("folders and results store:")
    for kind in sitefile.DEFAULT_ROOTS:
        path, why = sitefile.root(kind, None, site)
        if kind == "logs" and getattr(args, "decided", {}).get(kind) == sitefile.GIVEN:
            path, why = Path(args.logs), sitefile.GIVEN
        out.append(f"  {kind:<9}  {path.absolute()}  ({why})")
    url = database.resolve(None, site.data)
    store_why = (f"${database.ENV}" if os.environ.get(database.ENV) else
                 _where(site, "store.url") if (site.data.get("store") or {}).get("url") else "the default")
    out.append(f"  {'store':<9}  {database.describe(url)}  ({store_why})")
    return out


def _system_lines(args: argparse.Namespace, site: Any) -> list[str]:
    """The named system the commands use (``--system``, else ``default_system``) and the keys it sets over the
    site's, each with its file and line; [] when none is named."""
    from dlperf_slurm.matrix import sitefile

    _merged, system, origin = sitefile.select_system(site.data, site.src, getattr(args, "system", None))
    if system is None:
        return []
    how = "--system" if getattr(args, "system", None) else f"default_system, {_where(site, 'default_system')}"
    out = [f"system: {system.label} ({how})"]
    name, _, part = system.label.partition(":")
    tables = [(f"systems.{name}", (site.data.get("systems") or {}).get(name) or {})]
    if part:
        tables.append((f"systems.{name}.partitions.{part}", (tables[0][1].get("partitions") or {}).get(part) or {}))
    for prefix, table in tables:  # what it says of its hardware (gpus_per_node: the matrices' GPUs a node)
        for key in sitefile.SYSTEM_HARDWARE:
            if key in table:
                out.append(f"  {key} = {_toml(table[key])}  {_where(site, f'{prefix}.{key}')}")
    out.append("  its keys over the site's:" if origin else
               "  it sets no [slurm], [environment] or [health] key over the site's")
    for (table, key), (label, value) in origin.items():
        name, _, part = label.partition(":")
        held = f"systems.{name}" + (f".partitions.{part}" if part else "") + f".{table}.{key}"
        out.append(f"    {table}.{key} = {_toml(value)}  {_where(site, held)}")
    return out


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """Every value of a TOML document by its dotted key (a table's keys under it; arrays as values)."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for k, v in data.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _where(site: Any, key: str) -> str:
    found = site.src.holder(key) if site.src is not None else None
    return f"{found[0].path}:{found[0].line_of(found[1])}" if found else "?"


def _origins(site: Any) -> dict[str, tuple[Any, str, list[str]]]:
    """Each key of the site files: its value, the file and line it comes from, and the lower files it wins over."""
    files = []
    src = site.src
    while src is not None:  # top first
        files.append(src)
        src = src.site
    out: dict[str, tuple[Any, str, list[str]]] = {}
    for key, value in _flat(site.data).items():
        held = [f for f in files if f.holds(key)]
        places = [f"{f.path}:{f.line_of(key)}" for f in held]
        out[key] = (value, places[0] if places else "?", places[1:])
    return out


def cmd_site_init(args: argparse.Namespace) -> int:
    from dlperf_slurm.matrix.sitefile import user_site_file
    from dlperf_slurm.schedulers.slurm import SlurmScheduler
    from dlperf_slurm.schedulers.slurmctl import Slurm
    from dlperf_slurm.schedulers.slurmlimits import Limits, user

    if not SlurmScheduler.available():
        raise UserError("site init: no Slurm client on this machine (sbatch is not on PATH: `module load slurm`?); "
                        "run it on a login node of the cluster")
    out = Path(args.out) if args.out else user_site_file()
    if out.exists() and not args.force:
        raise UserError(f"site init: {out} exists: it is kept as it is (--force writes it anew, --out FILE "
                        "elsewhere)")
    slurm = Slurm()
    slurm.ping()
    conf = slurm.config()
    limits = Limits(slurm)
    parts = limits.partitions()
    if not parts:
        raise UserError("site init: sinfo shows no partition this user may use: nothing to write")
    account = limits.default_account()
    assocs = slurm.sacctmgr(["show", "assoc", "where", f"user={user()}", "format=account,partition,qos,defaultqos"])
    text = site_text(conf, parts, account, assocs or [], user())
    out.parent.mkdir(parents=True, exist_ok=True)
    from dlperf_slurm.disk import atomic_write

    atomic_write(out, text)
    read = args.out is None or _same_file(out, user_site_file())
    print(f"wrote {out} (cluster {conf.get('ClusterName', '?')}: {plural(len(parts), 'partition')}); "
          + ("`python -m dlperf_slurm plan MATRIX` now reads it" if read else
             f"the commands read it with --site {out} (or $DLPERF_SLURM_SITE={out})"))
    for line in _overlap_lines(out):
        print(line)
    return 0


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _overlap_lines(written: Path) -> list[str]:
    """The keys the new file sets that the center's system-wide site file sets too: the user's win over it."""
    from dlperf_slurm.matrix import sitefile

    system = sitefile.system_site_file()
    if not system.is_file() or _same_file(system, written):
        return []
    try:
        theirs, _ = sitefile.load_site(system)
        mine, _ = sitefile.load_site(written)
    except UserError as err:
        return [f"dlperf-slurm: the system-wide site file is not read: {err}"]
    both = [k for k in _flat(mine) if k in _flat(theirs)]
    if not both:
        return []
    return [f"the system-wide site file ({system}) sets {', '.join(both)} too: the values written here win over "
            "the center's (delete a line to keep the center's)"]


def _toml(value: Any) -> str:
    return json.dumps(value)  # a TOML basic string or number is JSON's for these values


def site_text(conf: dict[str, str], parts: dict, account: str | None, assocs: list[list[str]], who: str) -> str:
    """The site file's text (see the module docstring)."""

    cluster = conf.get("ClusterName") or "cluster"
    default = next((p for p in parts.values() if p.default), None)
    gpus = any(p.gpus_per_node for p in parts.values())
    enforce = conf.get("AccountingStorageEnforce", "")
    lines = _header_lines(conf, parts, assocs, who, cluster)
    lines.append("")
    if len(parts) > 1:
        lines += [f"default_system = {_toml(cluster)}  # `--system {cluster}:PARTITION` picks another partition",
                  ""]
    lines.append("[slurm]")
    if default:
        lines.append(f"partition = {_toml(default.name)}  # the cluster's default")
    else:
        first = next(iter(parts.values()))
        lines.append(f"partition = {_toml(first.name)}  # the cluster has no default partition: jobs need one")
    if account:
        lines.append(f"account = {_toml(account)}  # your default account")
    elif "associations" in enforce:
        lines.append('# account = "..."  # the cluster requires one (AccountingStorageEnforce='
                     f'{enforce}) and you have no default: ask your center')
    qos = next((r[3] or r[2] for r in assocs if len(r) > 3 and r[0] == account and (r[3] or r[2])), None)
    if qos:
        lines.append(f"# qos = {_toml(qos.split(',')[0])}  # your association's (Slurm uses it without this line)")
    if gpus:
        lines.append('gpu_request = "gpus-per-node"  # #SBATCH --gpus-per-node=G; "gres" for --gres=gpu:G')
        if default and default.gpus_per_node:
            lines.append(f"gpus_per_node = {default.gpus_per_node}  # its nodes' GPUs: what shapes such as 1xall mean")
    else:
        lines.append('gpu_request = "none"  # no node has GPU GRES: jobs ask Slurm for no GPU')
    lines.append("")
    if len(parts) > 1:
        lines += _systems_lines(parts, default, cluster)
    lines += [
        "[environment]",
        "# The Python a job runs on the compute nodes must import dlperf_slurm and the suite's framework: a venv on",
        "# a shared file system, a module, or a container. For example:",
        '# modules = ["cuda/12.4", "python/3.11"]',
        '# setup = ["source /shared/venvs/dlperf/bin/activate"]',
        "# [environment.container]",
        '# type = "apptainer"  # or "pyxis" (srun --container-image)',
        '# image = "/shared/images/pytorch-24.03.sif"',
        "",
    ]
    return "\n".join(lines)


def _header_lines(conf: dict[str, str], parts: dict, assocs: list[list[str]], who: str, cluster: str) -> list[str]:
    """The site file's comment header: what the cluster said (its partitions, array size, your associations)."""
    from dlperf_slurm.schedulers.slurmlimits import hms

    width = max(len(n) for n in parts) + len(" (default)")
    lines = [f"# dlperf_slurm site file, written by `dlperf-slurm site init` on {time.strftime('%Y-%m-%d')} from "
             f"Slurm cluster {cluster!r} for user {who}.",
             "# What the cluster said (sinfo, scontrol show config, sacctmgr): edit it freely; `site init --force`",
             "# writes it anew. A matrix's own [slurm] keys win over these.", "#", "# partitions:"]
    for p in parts.values():
        name = p.name + (" (default)" if p.default else "")
        node = plural(p.nodes, 'node')
        gres = f"{plural(p.gpus_per_node, 'GPU')} a node" if p.gpus_per_node else "no GPU GRES"
        lines.append(f"#   {name:<{width}}  {node:>9}, {gres}, MaxTime "
                     f"{hms(p.max_minutes) if p.max_minutes is not None else 'none'}"
                     + (f", MaxNodes {p.max_nodes}" if p.max_nodes is not None else ""))
    lines.append(f"# MaxArraySize {conf.get('MaxArraySize', '1001')}: submit splits larger job arrays to fit.")
    if assocs:
        seen = "; ".join(f"account {r[0]}" + (f" partition {r[1]}" if len(r) > 1 and r[1] else "")
                         + (f" QOS {r[2]}" if len(r) > 2 and r[2] else "") for r in assocs if r and r[0])
        lines.append(f"# your associations: {seen}")
    return lines


def _systems_lines(parts: dict, default: Any, cluster: str) -> list[str]:
    """A cluster of several partitions as a ``[systems]`` table: ``--system CLUSTER:PARTITION`` picks one."""
    lines: list[str] = []
    lines.append(f"[systems.{cluster}]")
    if default and default.gpus_per_node:
        lines.append(f"gpus_per_node = {default.gpus_per_node}")
    for p in parts.values():
        if p is default:
            continue
        lines += ["", f"[systems.{cluster}.partitions.{p.name}]"]
        if p.gpus_per_node:
            lines.append(f"gpus_per_node = {p.gpus_per_node}")
        lines += [f"slurm = {{ partition = {_toml(p.name)} }}"]
    lines.append("")
    return lines
