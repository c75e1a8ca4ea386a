"""Cell selection: ``-k EXPR`` and ``--exclude-cells EXPR``, with one meaning in every command that takes them.

An expression is words joined by ``and``, ``or``, ``not`` and parentheses, as pytest's ``-k`` (the keywords in any
case). A term is one of:

- a **word**: a whole part of the cell's id (the id ``bert-base.pytorch-ddp.2x8.b96.amp.xla0`` has the parts
  ``bert-base``, ``pytorch-ddp``, ``2x8``, ``b96``, ``amp``, ``xla0``), the value of a part that names an axis
  (``Ring`` of ``NCCL_ALGO-Ring``, ``srun`` of ``launcher-srun``), its suite (``pytorch-ddp/bert-base``) or its
  DLPerf shape (``2n8g``); case is ignored. A word holding ``*``, ``?`` or ``[`` is a glob, matched against the whole id
  and against each part (``resnet*``, ``*1x8*``).
- a **comparison** ``AXIS OP VALUE``, OP one of ``= == != < <= > >=``: ``nodes>=2``, ``batch_size=96``,
  ``precision=amp``, ``xla=1``, ``model=resnet*`` (a glob after ``=``), ``devices<=8``, ``NCCL_ALGO=Ring`` (a suite
  axis or an ``env.`` axis, with or without ``env.``). Numbers compare as numbers; other values as words.

Everything is read from the cell's id and suite, the same wherever the cell comes from (a matrix, a manifest, a
collect summary, the results store), so ``-k`` selects the same cells in ``plan`` as in ``history``. A selection
that keeps no cell is an error naming the terms that match none.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar

from dlperf_slurm.errors import UserError
from dlperf_slurm.words import noun, plural

T = TypeVar("T")

_ID = re.compile(r"(?P<model>.+?)\.(?P<framework>[^.]+)\.(?P<nodes>\d+)x(?P<gpus>\d+)\.b(?P<batch>\d+)"
                 r"\.(?P<precision>[^.]+)\.xla(?P<xla>[01])(?:\.(?P<rest>.+))?")
_TOKEN = re.compile(r"\s*(?:(?P<paren>[()])|(?P<cmp>[A-Za-z_][\w.\-]*\s*(?:==|!=|<=|>=|=|<|>)\s*[^\s()]+)"
                    r"|(?P<word>[^\s()]+))")
_CMP = re.compile(r"(?P<axis>[A-Za-z_][\w.\-]*)\s*(?P<op>==|!=|<=|>=|=|<|>)\s*(?P<value>.+)")
_GLOB = re.compile(r"[*?\[]")
_HALF = re.compile(r"^(?:==|!=|<=|>=|=|<|>)|(?:==|!=|<=|>=|=|<|>)$")  # "precision=", "=amp"
#: the deepest parentheses an expression may nest
MAX_DEPTH = 50
#: the axes every cell has, with the names a user may also type for them
AXES = {"model": "model", "framework": "framework", "suite": "suite", "nodes": "nodes", "gpus_per_node": "gpus",
        "gpus": "gpus", "devices": "devices", "batch_size": "batch", "batch": "batch", "precision": "precision",
        "xla": "xla", "shape": "shape", "launcher": "launcher", "setup": "setup"}
_FLAGS = ("-k", "--exclude-cells")


@dataclass(frozen=True)
class View:
    """What a selection reads of a cell: the parts of its id, its suite and its axis values."""

    id: str
    parts: tuple[str, ...]  # lower-case
    labels: frozenset[str]  # the parts, the suite and the shape, lower-case
    values: dict[str, str] = field(hash=False, compare=False)  # axis -> value (lower-case)

    @classmethod
    def of(cls, cell_id: str, suite: str = "", launcher: str = "") -> "View":
        parts = tuple(p.lower() for p in cell_id.split("."))
        values: dict[str, str] = {"suite": suite.lower()} if suite else {}
        m = _ID.fullmatch(cell_id)
        if m:
            n, g = int(m["nodes"]), int(m["gpus"])
            values.update(model=m["model"].lower(), framework=m["framework"].lower(), nodes=str(n), gpus=str(g),
                          devices=str(n * g), batch=m["batch"], precision=m["precision"].lower(), xla=m["xla"],
                          shape=f"{n}n{g}g")
            variants = {}
            for part in (m["rest"] or "").split("."):  # variants: launcher-X, setup-X, NAME-VALUE
                key, dash, value = part.partition("-")
                if dash and key:
                    variants[key.lower()] = value.lower()
            values.update({k: v for k, v in variants.items() if k not in values})
        else:
            variants = {}
        if launcher:
            values.setdefault("launcher", launcher.lower())
        labels = frozenset(parts) | {v for k, v in values.items() if k in ("suite", "shape")} | set(variants.values())
        return cls(cell_id, parts, labels, values)

    @classmethod
    def of_cell(cls, cell: Any) -> "View":
        """A :class:`~dlperf_slurm.model.cell.Cell`'s view."""
        return cls.of(cell.id, cell.suite, cell.launcher)

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> "View":
        """A run or cell row's (a collect summary's, a stored cell's, as dicts): ``cell_id``, ``suite``,
        ``launcher``."""
        return cls.of(str(row.get("cell_id") or row.get("id") or ""), str(row.get("suite") or ""),
                      str(row.get("launcher") or ""))


# ============================================================================================ the expression


@dataclass(frozen=True)
class _Term:
    text: str
    test: Callable[[View], bool]


class _Parser:
    """Recursive descent over the tokens: or > and > not > term | ( expr )."""

    def __init__(self, flag: str, text: str, axes: set[str]):
        self.flag, self.text, self.axes = flag, text, axes
        self.tokens = self._tokens(text)
        self.i = self.depth = 0
        self.terms: list[_Term] = []

    def _fail(self, why: str) -> UserError:
        return UserError(f"{self.flag} {_cut(self.text)!r}: {why} (an expression of words, AXIS=VALUE comparisons, "
                         "and, or, not and parentheses, e.g. -k '1x8 and amp')")

    def _tokens(self, text: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise self._fail(f"cannot read it from {text[pos:]!r}")
            kind = m.lastgroup or "word"
            word = m[kind]
            out.append(("op", word.lower()) if kind == "word" and word.lower() in ("and", "or", "not")
                       else (kind, word))
            pos = m.end()
        return out

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def parse(self) -> Callable[[View], bool]:
        if not self.tokens:
            raise self._fail("it is empty")
        expr = self._or()
        if self._peek() is not None:
            raise self._fail(f"unexpected {self._peek()[1]!r}")  # type: ignore[index]
        return expr

    def _or(self) -> Callable[[View], bool]:
        parts = [self._and()]
        while self._peek() == ("op", "or"):
            self.i += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else (lambda v: any(p(v) for p in parts))

    def _and(self) -> Callable[[View], bool]:
        parts = [self._not()]
        while self._peek() == ("op", "and"):
            self.i += 1
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else (lambda v: all(p(v) for p in parts))

    def _not(self) -> Callable[[View], bool]:
        flips = 0
        while self._peek() == ("op", "not"):  # a loop, not a recursion: "not not ... amp" of any length
            self.i += 1
            flips += 1
        inner = self._atom()
        return (lambda v: not inner(v)) if flips % 2 else inner

    def _atom(self) -> Callable[[View], bool]:
        tok = self._peek()
        if tok is None:
            raise self._fail("it ends where a word was expected")
        self.i += 1
        kind, text = tok
        if tok == ("paren", "("):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self._fail(f"parentheses nested deeper than {MAX_DEPTH}")
            inner = self._or()
            self.depth -= 1
            if self._peek() != ("paren", ")"):
                raise self._fail("a '(' is not closed")
            self.i += 1
            return inner
        if kind in ("paren", "op"):
            raise self._fail(f"{text!r} where a word was expected")
        if kind == "word" and _HALF.search(text):
            raise self._fail(f"{_cut(text)!r} is half a comparison: write AXIS OP VALUE, e.g. precision=amp, nodes>=2")
        term = _Term(text, self._comparison(text) if kind == "cmp" else _word(text.strip("'\"")))
        self.terms.append(term)
        return term.test

    def _comparison(self, text: str) -> Callable[[View], bool]:
        m = _CMP.fullmatch(text)
        assert m is not None  # the token's pattern is this one's
        name, op, value = m["axis"].lower(), m["op"], m["value"].lower()
        axis = AXES.get(name, name.removeprefix("env."))
        if name not in AXES and axis not in self.axes:
            from dlperf_slurm.matrix.toml_source import did_you_mean

            known = sorted(set(AXES) | self.axes)
            raise self._fail(f"no axis {m['axis']!r}{did_you_mean(name, known)}; axes: {', '.join(known)}")
        if axis == "xla" and value in ("true", "false", "yes", "no", "on", "off"):
            value = str(int(value in ("true", "yes", "on")))
        value = value.strip("'\"")
        if op not in ("=", "==", "!=") and _number(value) is None:
            raise self._fail(f"{m['axis']}{op}{value}: {value!r} is not a number (numbers only, with {op})")
        return _compare(axis, op, value)


def _word(text: str) -> Callable[[View], bool]:
    """A word's test: a label of the cell; with dots, parts of its id in a row (a whole id pasted from a table:
    ``bert-base.pytorch-ddp.1x1.b32.fp32.xla0``; ``pytorch-ddp.1x1``); with ``*?[``, a glob."""
    word = text.lower()
    if _GLOB.search(word):
        return lambda v: fnmatch.fnmatchcase(v.id.lower(), word) or any(fnmatch.fnmatchcase(p, word)
                                                                        for p in v.labels)
    if "." in word and word not in ("", "."):
        return lambda v: word in v.labels or f".{word}." in f".{'.'.join(v.parts)}."
    return lambda v: word in v.labels


def _cut(text: str, n: int = 120) -> str:
    """Text a message echoes, cut to ``n`` characters."""
    return text if len(text) <= n else text[:n - 1] + "…"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _compare(axis: str, op: str, value: str) -> Callable[[View], bool]:
    want = _number(value)

    def test(v: View) -> bool:
        have = v.values.get(axis)
        if have is None:
            return False
        if op in ("=", "=="):
            return fnmatch.fnmatchcase(have, value) if _GLOB.search(value) else _equal(have, value, want)
        if op == "!=":
            return not _equal(have, value, want)
        got = _number(have)
        if got is None or want is None:
            return False
        return {"<": got < want, "<=": got <= want, ">": got > want, ">=": got >= want}[op]

    return test


def _equal(have: str, value: str, want: float | None) -> bool:
    got = _number(have)
    return got == want if got is not None and want is not None else have == value


# ============================================================================================= the selection


@dataclass(frozen=True)
class Selection:
    """``-k`` and ``--exclude-cells`` as given (either may be None)."""

    keep: str | None = None
    drop: str | None = None

    def __bool__(self) -> bool:
        return self.keep is not None or self.drop is not None

    def slug(self) -> str:
        """The selection as a file name's part, readable and distinct: ``k-1x8-and-amp-3f2a9c``, ``x-b128-…``
        (``--exclude-cells``); the hash of the expressions keeps ``devices<2`` and ``devices>=2`` apart."""
        import hashlib

        parts = [f"{flag}-{text}" for flag, text in zip(("k", "x"), (self.keep, self.drop)) if text is not None]
        words = re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(parts)).strip("-")[:60].strip("-")
        return f"{words}-{hashlib.sha1(self.describe().encode()).hexdigest()[:6]}"

    def describe(self) -> str:
        return ", ".join(f"{flag} {_cut(text)!r}" for flag, text in zip(_FLAGS, (self.keep, self.drop))
                         if text is not None)

    def choose(self, items: Sequence[T], view: Callable[[T], View], where: str = "", say: bool = True
               ) -> list[T]:
        """The items whose cell is selected, in order; one line on stderr says how many of how many (``say``);
        a selection that keeps none is an error naming its terms that match no cell (``where``: the cells'
        whole, e.g. "of campaign smoke")."""
        if not self:
            return list(items)
        views = [view(x) for x in items]
        axes = {k for v in views for k in v.values}
        tests: list[tuple[str, str, Callable[[View], bool], list[_Term]]] = []
        for flag, text in zip(_FLAGS, (self.keep, self.drop)):
            if text is not None:
                p = _Parser(flag, text, axes)
                tests.append((flag, text, p.parse(), p.terms))
        keep = [x for x, v in zip(items, views)
                if all(test(v) != (flag == "--exclude-cells") for flag, _t, test, _ in tests)]
        ids = list(dict.fromkeys(v.id for v in views))
        unmatched = [t.text for _f, _t, _test, terms in tests for t in terms if not any(t.test(v) for v in views)]
        if not keep:
            kept = len(tests) == 2 and any(tests[0][2](v) for v in views)  # -k kept some, --exclude-cells all
            raise UserError(f"{self.describe()}: selects none of the {plural(len(ids), 'cell')}"
                            + (f" {where}" if where else "")
                            + (" (--exclude-cells leaves out every cell -k keeps)" if kept and not unmatched
                               else _why(unmatched, views)))
        if say:
            import sys

            n = len({view(x).id for x in keep})
            said = f"; {_cut(', '.join(repr(u) for u in unmatched))} {noun(len(unmatched), 'matches', 'match')} " \
                "no cell" if unmatched else ""
            print(f"dlperf-slurm: {n} of {plural(len(ids), 'cell')}{' ' + where if where else ''} selected "
                  f"({self.describe()}{said})", file=sys.stderr)
        return keep


def _why(unmatched: list[str], views: Sequence[View]) -> str:
    """Which terms match no cell, with the labels close to each (a word that is part of a label: its glob)."""
    if not unmatched:
        return " (each term matches some cell, but no cell matches them all)"
    labels = sorted({p for v in views for p in v.labels})
    said = []
    for text in unmatched:
        near = [p for p in labels if text.lower() in p][:3]
        hint = f" (did you mean {' or '.join(repr(p) for p in near)}, or {text.lower()!r} within a word: " \
               f"'*{text.lower()}*'?)" if near and not _GLOB.search(text) else ""
        said.append(f"no cell matches {_cut(text)!r}{hint}")
    return ": " + _cut("; ".join(said), 600)


def from_args(args: Any) -> Selection:
    """The selection a command line gives (``-k``, ``--exclude-cells``; none when the command has neither). Each
    may be given more than once: the ``-k`` s all hold (and), any ``--exclude-cells`` leaves a cell out (or)."""
    def joined(values: Any, word: str) -> str | None:
        if values is None or isinstance(values, str):
            return values
        return values[0] if len(values) == 1 else f" {word} ".join(f"({v})" for v in values)

    return Selection(joined(getattr(args, "keep", None), "and"), joined(getattr(args, "exclude_cells", None), "or"))
