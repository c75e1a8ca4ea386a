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
    """Error context for one TOML file: finds the line of a key for messages. ``site``: the file whose values
    were merged under this file's (a matrix's site file; a user's site file's system-wide one, and so on down); a
    key only it holds is reported in it."""

    def __init__(self, path: Path, text: str, site: "Source | None" = None):
        self.path, self.text, self.site = path, text, site
        self._lines: dict[str, int] | None = None
        #: tables of this file laid over its top-level ones, most specific first (a site file's named system and
        #: partition: ``systems.alpha.partitions.small``, ``systems.alpha``): a key is looked for there first
        self.layers: tuple[str, ...] = ()

    def _index(self) -> dict[str, int]:
        if self._lines is None:
            self._lines = key_lines(self.text)
        return self._lines

    def holds(self, key: str) -> bool:
        """Whether this file gives ``key`` itself (dotted, as :meth:`line_of` names it)."""
        return key in self._index()

    def line_of(self, key: str) -> int | None:
        """The line of ``key`` as the validators name it (``axes.batch_size``, ``include[1].precision``,
        ``options.<suite>.tiny``, ``axes.env.NAME``, ``environment.container.type``); for a key the file does
        not hold (a missing one), the line of the nearest table or key that encloses it."""
        index = self._index()
        while key:
            if key in index:
                return index[key]
            key = key[:key.rindex("[")] if key.endswith("]") else (key.rsplit(".", 1)[0] if "." in key else "")
        return None

    def _where(self, key: str) -> str | None:
        """The key as this file holds it: under its most specific layer that has it, else at the top; None."""
        index = self._index()
        return next((f"{p}.{key}" for p in self.layers if f"{p}.{key}" in index), key if key in index else None)

    def holder(self, key: str) -> "tuple[Source, str] | None":
        """The file that holds ``key`` and the key as it holds it: this one, else the file under it (a matrix's
        site file; a user's site file's system-wide one), and so on down; None when none does."""
        src: Source | None = self
        while src is not None:
            held = src._where(key)
            if held:
                return src, held
            src = src.site
        return None

    def error(self, key: str | None, message: str) -> MatrixError:
        if key and self.site is not None and key not in self._index():
            found = self.site.holder(key)
            if found:
                return found[0].error(found[1], message)
        return MatrixError(str(self.path), key, message, self.line_of(key) if key else None)


def key_lines(text: str) -> dict[str, int]:
    """The line of every table and key of a (valid) TOML text, named as the validators name them: dotted,
    an array of tables' entry as ``name[i]``, a quoted key as it is (``"env.X"`` in ``[axes]``: ``axes.env.X``),
    the keys of inline tables and dotted keys included (``tomllib`` keeps no positions)."""
    sc = _Scanner(text)
    try:
        sc.document()
    except (IndexError, ValueError):  # not expected of a text tomllib read; the lines found so far stand
        pass
    return sc.out


class _Scanner:
    _BARE = re.compile(r"[A-Za-z0-9_-]+")

    def __init__(self, text: str):
        self.s, self.i = text, 0
        self.out: dict[str, int] = {}
        self.entries: dict[str, int] = {}  # array of tables -> its entries so far

    def line(self) -> int:
        return self.s.count("\n", 0, self.i) + 1

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def blank(self) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif c == "#":
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            else:
                return

    def expect(self, word: str) -> None:
        if not self.s.startswith(word, self.i):
            raise ValueError(f"expected {word!r} at {self.i}")
        self.i += len(word)

    def document(self) -> None:
        table = ""
        while True:
            self.blank()
            if self.i >= len(self.s):
                return
            line = self.line()
            if self.s.startswith("[[", self.i):
                self.i += 2
                table = self.header(self.key(), array=True)
                self.ws()
                self.expect("]]")
            elif self.s[self.i] == "[":
                self.i += 1
                table = self.header(self.key(), array=False)
                self.ws()
                self.expect("]")
            else:
                self.pair(table)
                continue
            self.out.setdefault(table, line)

    def header(self, parts: list[str], array: bool) -> str:
        path, line = "", self.line()
        for j, part in enumerate(parts):
            path = f"{path}.{part}" if path else part
            self.out.setdefault(path, line)  # a table it implies, or the array of tables itself
            if j == len(parts) - 1 and array:
                n = self.entries.get(path, 0)
                self.entries[path] = n + 1
                path += f"[{n}]"
            elif path in self.entries:  # a table under the latest entry of an array of tables
                path += f"[{self.entries[path] - 1}]"
        return path

    def pair(self, table: str) -> None:
        line, path = self.line(), table
        for part in self.key():
            path = f"{path}.{part}" if path else part
            self.out.setdefault(path, line)
        self.ws()
        self.expect("=")
        self.value(path)

    def key(self) -> list[str]:
        parts = []
        while True:
            self.ws()
            c = self.s[self.i]
            if c in "\"'":
                start = self.i
                self.string()
                parts.append(tomllib.loads("k = " + self.s[start:self.i])["k"])
            else:
                m = self._BARE.match(self.s, self.i)
                if not m:
                    raise ValueError(f"no key at {self.i}")
                parts.append(m.group())
                self.i = m.end()
            self.ws()
            if self.i < len(self.s) and self.s[self.i] == ".":
                self.i += 1
                continue
            return parts

    def string(self) -> None:
        s = self.s
        for quote in ('"""', "'''"):
            if s.startswith(quote, self.i):
                self.i += 3
                while not s.startswith(quote, self.i):
                    if self.i >= len(s):
                        raise ValueError("unterminated string")
                    self.i += 2 if quote == '"""' and s[self.i] == "\\" else 1
                self.i += 3
                while self.i < len(s) and s[self.i] == quote[0]:  # a closing quote may follow up to two quotes
                    self.i += 1
                return
        quote = s[self.i]
        self.i += 1
        while s[self.i] != quote:
            self.i += 2 if quote == '"' and s[self.i] == "\\" else 1
        self.i += 1

    def value(self, path: str) -> None:
        self.ws()
        c = self.s[self.i]
        if c in "\"'":
            self.string()
        elif c == "[":
            self.i += 1
            n = 0
            while True:
                self.blank()
                if self.s[self.i] == "]":
                    self.i += 1
                    return
                self.value(f"{path}[{n}]")
                n += 1
                self.blank()
                if self.s[self.i] == ",":
                    self.i += 1
        elif c == "{":
            self.i += 1
            while True:
                self.ws()
                if self.s[self.i] == "}":
                    self.i += 1
                    return
                self.pair(path)
                self.ws()
                if self.s[self.i] == ",":
                    self.i += 1
        else:
            while self.i < len(self.s) and self.s[self.i] not in ",]}\r\n#":
                self.i += 1


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(ctx: Source, table: Mapping[str, Any], allowed: Iterable[str], prefix: str) -> None:
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            full = f"{prefix}.{key}" if prefix else key
            raise ctx.error(full, f"unknown key{did_you_mean(key, allowed)}; expected one of: {', '.join(allowed)}")


def read_toml(path: Path, what: str = "matrix file") -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read: {err}") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"line (\d+)", str(err))
        raise MatrixError(str(path), None, f"not valid TOML: {err}", int(m.group(1)) if m else None) from None
