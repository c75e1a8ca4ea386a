"""The ``:::DLPERF {json}`` line format the workloads print and the collector parses.

One event per line: the prefix, then one compact JSON object with an ``"event"`` key. Non-finite floats,
which JSON cannot hold, are written as the strings ``"nan"``, ``"inf"``, ``"-inf"``; ``parse_line`` turns
such strings back into floats.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, TextIO

PREFIX = ":::DLPERF "
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
    """The line for one event, without the trailing newline."""
    return PREFIX + json.dumps(_encode({"event": event, **fields}), separators=(",", ":"), allow_nan=False)


def emit(event: str, stream: TextIO | None = None, **fields: Any) -> str:
    """Write one event line to ``stream`` (stdout by default), flushed; return the line."""
    line = format_line(event, **fields)
    out = sys.stdout if stream is None else stream
    out.write(line + "\n")
    out.flush()
    return line


def parse_event(line: str) -> dict[str, Any] | None:
    """The raw event dict of a ``:::DLPERF`` line, or None for any other line. Text before the prefix (an
    ``srun -l`` label, a fragment a record was glued to) is ignored: the last prefix on the line wins.
    Non-finite floats stay the strings "nan"/"inf"/"-inf" (the collector reads numbers leniently)."""
    at = line.rfind(PREFIX)
    if at < 0:
        return None
    try:
        obj = json.loads(line[at + len(PREFIX):])
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    return obj


def parse_line(line: str) -> dict[str, Any] | None:
    """:func:`parse_event`, with the strings "nan"/"inf"/"-inf" anywhere in the object turned back into floats."""
    obj = parse_event(line)
    return None if obj is None else _decode(obj)
