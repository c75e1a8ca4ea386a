"""A TOML file read for validation: its data, and the line of any key for error messages (``tomllib`` keeps no
positions), so every message names the file, the key and the line."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any, Iterable, Mapping

from dlperf_slurm.errors import MatrixError, UserError


class Source:
    """Error context for one TOML file: finds the line of a key for messages."""

    def __init__(self, path: Path, text: str):
        self.path, self.lines = path, text.splitlines()

    def line_of(self, key: str) -> int | None:
        """Best-effort line of ``table.sub.key`` (tomllib keeps no positions)."""
        parts = key.replace("]", "").replace("[", ".").split(".")
        leaf = parts[-1]
        pat = re.compile(r'^\s*["\']?' + re.escape(leaf) + r'["\']?\s*=')
        tables = [p for p in parts[:-1] if not p.isdigit()]
        table_pat = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+")
        current = ""
        candidates = []
        for i, line in enumerate(self.lines, 1):
            m = table_pat.match(line)
            if m:
                current = m.group(1).strip()
                continue
            if pat.match(line):
                candidates.append((i, current))
        want = ".".join(tables)
        for i, table in candidates:
            if table == want or (want and table.endswith(want)):
                return i
        for i, line in enumerate(self.lines, 1):  # a table header itself
            m = table_pat.match(line)
            if m and m.group(1).strip() == ".".join(p for p in parts if not p.isdigit()):
                return i
        return candidates[0][0] if candidates else None

    def error(self, key: str | None, message: str) -> MatrixError:
        return MatrixError(str(self.path), key, message, self.line_of(key) if key else None)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(ctx: Source, table: Mapping[str, Any], allowed: Iterable[str], prefix: str) -> None:
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            full = f"{prefix}.{key}" if prefix else key
            raise ctx.error(full, f"unknown key{did_you_mean(key, allowed)}; expected one of: {', '.join(allowed)}")


def read_toml(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such matrix file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read: {err}") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"line (\d+)", str(err))
        raise MatrixError(str(path), None, f"not valid TOML: {err}", int(m.group(1)) if m else None) from None
