"""Slurm host lists: ``n[1-3,7],gpu-a[01-02]-ib`` -> the host names (what ``scontrol show hostnames`` does,
without a Slurm client: ``collect`` also runs where there is none)."""

from __future__ import annotations

import re

_BRACKET = re.compile(r"^([^\[]*)\[([^\]]+)\](.*)$")


def _tokens(hostlist: str) -> list[str]:
    """Split at the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in hostlist:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [t for t in (*out, cur) if t.strip()]


def expand(hostlist: str | None) -> list[str]:
    """The hosts of a Slurm host list, in order; a plain name is itself. Zero padding is kept (``a[01-02]``)."""
    out: list[str] = []
    for token in _tokens((hostlist or "").strip()):
        m = _BRACKET.match(token.strip())
        if not m:
            out.append(token.strip())
            continue
        prefix, ranges, rest = m.groups()
        suffixes = expand(rest) if "[" in rest else [rest]
        for item in ranges.split(","):
            lo, _, hi = item.partition("-")
            width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
            for i in range(int(lo), int(hi or lo) + 1):
                out += [f"{prefix}{i:0{width}d}{suffix}" for suffix in suffixes]
    return out
