"""The numpy half of the block reader (:mod:`.blocks`): the :class:`Sieve` that finds, in any block, a superset of
the lines holding a needle or a byte that is not ASCII, the rank labels and short lines of every line, and the block
scan built on them. It reads the blocks :mod:`.hsblocks` does not (a byte that is not ASCII, a ``\\r``, or no
``hyperscan`` package); numpy is imported only then, so a collect of ASCII logs never pays for its import.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from dlperf_slurm.parsing.reading import RANK_BYTES, split_rank

# Typical noise (NCCL INFO, TensorFlow and absl logging, Python warnings, progress bars): a needle is looked up by
# the three bytes of it that are rarest here, so that noise seldom hits it.
_SAMPLE = (b"node1:1234:1250 [3] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7 comm 0x55d5c8 rank 3 "
           b"nranks 8 cudaDev 3 busId 1a000 - Init COMPLETE NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0> "
           b"Setting affinity for GPU 3 to ffff,ffffffff Connected all rings via P2P/IPC/read Trees [0] 1/-1/-1->0->-1 "
           b"NCCL INFO Using network IB cudaDriverVersion 12020 NCCL version 2.18.3+cuda12.2 NET/Plugin : No plugin "
           b"found (libnccl-net.so), using internal implementation threadThresholds 8/8/64 | 128/8/64 | 512 | 512 "
           b"2024-01-01 00:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1510] Created device "
           b"/job:localhost/replica:0/task:0/device:GPU:2 with 14758 MB memory -> physical GPU (device: 0, name: "
           b"NVIDIA A100-SXM4-40GB, pci bus id: 0000:07:00.0, compute capability: 8.0) successful NUMA node read "
           b"I0826 15:12:50.113950 140405777909504 keras_utils.py:133] W0826 cuda_dnn.cc:424] Loaded cuDNN version "
           b"/usr/lib/python3/dist-packages/torch/cuda/__init__.py:52: UserWarning: CUDA initialization took long "
           b"libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0 "
           b" 45%|####5     | 450/1000 [00:12<00:15, 36.12it/s] Epoch 1/90 loading data from /data/imagenet/train "
           b"warnings.warn( FutureWarning: The default value of the parameter will change in a future version "
           b"Your CPU supports instructions that this TensorFlow binary was not compiled to use: AVX2 FMA; the "
           b"memory of the host is sufficient; Allocation of 411041792 exceeds 10% of free system memory. "
           b"About the output: without a total number of items, the step size of each iteration is set when the data "
           b"loader starts; the process writes its state to the checkpoint directory at the end of every epoch. "
           b"I0826 15:12:50.113950 140405777909504 cross_device_ops.py:1130] Collective batch_all_reduce: 161 "
           b"all-reduces, num_devices = 8, group_size = 8, communication_hint = NCCL, num_packs = 1 "
           b"mirrored_strategy.py:341] Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/device:"
           b"GPU:0',) I tensorflow/stream_executor/platform/default/dso_loader.cc:48] Successfully opened dynamic "
           b"library libcudart.so.10.1 WARNING:tensorflow:AutoGraph could not transform <function Model."
           b"make_train_function.<locals>.train_function at 0x7f5c> and will run it as-is. mirrored_strategy.py:500] "
           b"I tensorflow/core/grappler/optimizers/meta_optimizer.cc:928] Optimization results for grappler item: "
           b"graph_to_optimize W tensorflow/core/grappler/optimizers/loop_optimizer.cc:906] Skipping loop optimization "
           b"I tensorflow/core/common_runtime/bfc_allocator.cc:1046] InUse at 7f0b00 of size 1280 next 3")
_COUNTS: dict[bytes, int] = {}
for _n in (2, 3):
    for _i in range(len(_SAMPLE) - _n + 1):
        _COUNTS[_SAMPLE[_i:_i + _n]] = _COUNTS.get(_SAMPLE[_i:_i + _n], 0) + 1


def _variants(part: bytes, nocase: bool) -> list[bytes]:
    out = [b""]
    for c in part:
        ch = bytes([c])
        out = [o + x for o in out for x in ({ch.lower(), ch.upper()} if nocase else {ch})]
    return sorted(out)


def _key(needle: bytes, nocase: bool) -> bytes:
    """The 3 bytes of ``needle`` (2 for a 2-byte needle) that, then whose first pair, the sample holds least often
    (counting every case variant when ``nocase``)."""
    n = 3 if len(needle) >= 3 else 2
    parts = [needle[i:i + n] for i in range(len(needle) - n + 1)]
    return min(parts, key=lambda p: (sum(_COUNTS.get(v, 0) for v in _variants(p, nocase)),
                                     sum(_COUNTS.get(v, 0) for v in _variants(p[:2], nocase)), p))


class Sieve:
    """Finds, in a block, the positions of a superset of the needles' occurrences and of every byte that is not
    ASCII, at numpy speed, whatever the number of needles. A needle is known by three of its bytes (its *key*,
    chosen rare in typical noise): every byte pair of the block is looked up in one table of 65,536 entries (two
    strided views) that holds each key's first pair, and the few hits are checked against the key's second pair.
    ``needles`` are case-sensitive, ``nocase`` matched in any ASCII case; a needle with a byte that is not ASCII
    needs no entry (its lines hold such a byte)."""

    def __init__(self, needles: Iterable[str], nocase: Iterable[str] = ()):
        self.needles, self.nocase = tuple(needles), tuple(nocase)
        codes = np.arange(65536)
        lo = codes & 0xFF
        free = lo >= 0x80  # a pair starting with a byte that is not ASCII: its line is always read; two-byte keys
        first = free.copy()  # what the block is scanned for: a key's first pair, or a free one
        second = np.zeros(65536, dtype=bool)  # a key's second pair
        self.single = bytearray()  # one-byte needles: also looked for as the block's last byte
        for text, nc in [(n, False) for n in self.needles] + [(n, True) for n in self.nocase]:
            b = text.encode("utf-8")
            if not b or b"\n" in b or b"\r" in b:
                raise ValueError(f"needle {text!r}: a needle is a non-empty part of one line")
            if not b.isascii():
                continue
            if len(b) == 1:
                for c in _variants(b, nc):
                    free[lo == c[0]] = first[lo == c[0]] = True
                    self.single += c
                continue
            for key in _variants(_key(b, nc), nc):
                first[key[0] | (key[1] << 8)] = True
                if len(key) == 2:
                    free[key[0] | (key[1] << 8)] = True
                else:
                    second[key[1] | (key[2] << 8)] = True
        self.free, self.second = free, second
        self.first = first

    def hits(self, buf: bytes, end: int) -> np.ndarray:
        """Positions in ``buf[:end]`` where a needle may start, or a byte is not ASCII (in no particular order)."""
        if end < 2:
            return np.arange(end) if end and (buf[0] >= 0x80 or buf[0] in self.single) else np.empty(0, np.int64)
        first = self.first
        h = np.concatenate((np.flatnonzero(first.take(np.frombuffer(buf, "<u2", count=end // 2))) * 2,
                            np.flatnonzero(first.take(np.frombuffer(buf, "<u2", count=(end - 1) // 2, offset=1)))
                            * 2 + 1))
        if len(h):  # a key's second pair: bytes 1 and 2 (the third one is inside the block)
            a = np.frombuffer(buf, np.uint8, count=end)
            b1 = a.take(h + 1).astype(np.uint16)
            h = h[self.free.take(a.take(h) | (b1 << 8))
                  | self.second.take(b1 | (a.take(h + 2, mode="clip").astype(np.uint16) << 8))]
        last = buf[end - 1]
        if last >= 0x80 or last in self.single:
            h = np.append(h, end - 1)
        return h


_SIEVES: dict[tuple, Sieve] = {}


def sieve(needles: tuple[str, ...], nocase: tuple[str, ...]) -> Sieve:
    """A cached :class:`Sieve` (a suite's Scanner is made once per log)."""
    key = (needles, nocase)
    s = _SIEVES.get(key)
    if s is None:
        s = _SIEVES[key] = Sieve(needles, nocase)
    return s


_SHORT: dict[tuple, tuple[np.ndarray, int]] = {}


def _short_table(short: tuple) -> tuple[np.ndarray, int]:
    """``short`` (first characters, length) as a table of first bytes and the length."""
    t = _SHORT.get(short)
    if t is None:
        table = np.zeros(256, dtype=bool)
        table[list(short[0].encode("ascii"))] = True
        t = _SHORT[short] = (table, short[1])
    return t


_LABEL_FIRST = np.zeros(256, dtype=bool)  # first bytes of a line that split_rank looks at
_LABEL_FIRST[list(b" [0123456789")] = True
_LABEL_FIRST[0x80:] = True
_SPAN = 16  # bytes after the first that hold an ASCII label's ": " (" " + 7 spaces + 6 digits + ": ")


def _label_starts(a: np.ndarray, starts: np.ndarray, end: int) -> np.ndarray:
    """The line starts (of ``starts``) that may carry a rank label: a first byte split_rank looks at and, for an
    ASCII label, ``": "`` where the label form puts it; ``[`` and bytes that are not ASCII always."""
    first = a[starts]
    starts = starts[_LABEL_FIRST[first]]
    if not len(starts):
        return starts
    first = a[starts]
    win = a[np.minimum(starts[:, None] + np.arange(1, _SPAN + 1), end - 1)]
    colon = (win[:, :-1] == 58) & (win[:, 1:] == 32)  # ": " at offsets 1.._SPAN-1
    digit = (first >= 48) & (first <= 57)
    keep = np.where(digit, colon[:, :6].any(axis=1), colon.any(axis=1))
    keep |= (first == 91) | (first >= 0x80) | (win >= 0x80).any(axis=1)
    return starts[keep]


# ------------------------------------------------------------------------------------------------ reader


def block_lines(self: Any, buf: bytes, end: int, eof: bool) -> Iterator[str]:
    """The lines of ``buf[:end]`` that ``self`` (a :class:`~dlperf_slurm.parsing.blocks.BlockLines`) yields, found
    by its needles' :class:`Sieve`; its ``lines`` and ``ranks`` get what every line contributes."""
    a = np.frombuffer(buf, np.uint8, count=end)
    if buf.find(b"\r", 0, end) < 0:
        terms = np.flatnonzero(a == 10)
        self.lines += len(terms)
    else:
        terms = np.flatnonzero((a == 10) | (a == 13))
        cr = a[terms] == 13
        crlf = cr[:-1] & (terms[1:] == terms[:-1] + 1) & ~cr[1:]
        self.lines += len(terms) - int(crlf.sum())
    partial = buf[end - 1] not in (10, 13)  # only at the end of the file: a last line without an end
    if partial:
        self.lines += 1
    nseg = len(terms) + partial
    # the lines that can matter: a hit's line is the number of line ends before it
    cand = np.unique(np.searchsorted(terms, sieve(self.needles.needles, self.needles.nocase).hits(buf, end)))
    # rank labels, in line order
    starts = np.concatenate(([0], terms + 1 if partial else terms[:-1] + 1))
    labelled = _label_starts(a, starts, end)
    if len(labelled):
        at, label = _ranks_of(self, buf, end, labelled, terms)
    if self.short is not None:
        cand = np.union1d(cand, _short_lines(self, a, starts, terms, end, partial, at if len(labelled) else None,
                                             label if len(labelled) else None))
    ends = terms.tolist()
    if partial:
        ends.append(end)
    pending = self.pending
    k = 0
    for c in cand.tolist():
        while pending and k < c:  # a held fragment: the Scanner sees every line until it is resolved
            yield buf[ends[k - 1] + 1 if k else 0:ends[k]].decode("utf-8", "replace")
            k += 1
        if c < k:
            continue
        yield buf[ends[c - 1] + 1 if c else 0:ends[c]].decode("utf-8", "replace")
        k = c + 1
    while pending and k < nseg:
        yield buf[ends[k - 1] + 1 if k else 0:ends[k]].decode("utf-8", "replace")
        k += 1


def _short_lines(self: Any, a: np.ndarray, starts: np.ndarray, terms: np.ndarray, end: int, partial: bool,
                 at: np.ndarray | None, label: np.ndarray | None) -> np.ndarray:
    """The lines (numbers in the block) that may hold a short text starting with one of ``short``'s characters:
    a line shorter than the length whose first byte is one of them, and a labelled line whose text after its
    label (and the one space split_rank may also take) is shorter (its first character is not looked at)."""
    assert self.short is not None  # called only when the suite has a short-line rule
    table, length = _short_table(self.short)
    ends = np.append(terms, end) if partial else terms
    lens = ends - starts
    firsts = a.take(np.minimum(starts, end - 1))
    found = np.flatnonzero((lens < length) & table[firsts] & (lens > 0))
    if at is not None and len(at):
        found = np.union1d(found, at[lens[at] - label - 1 < length])
    return found


def _ranks_of(self: Any, buf: bytes, end: int, starts: np.ndarray, terms: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Add the rank labels of the lines at ``starts``; returns (the numbers of the lines that carry a label
    read at byte level, the labels' lengths)."""
    lines = np.searchsorted(terms, starts)
    ends = np.append(terms, end)[lines]  # each line's end: the next line end
    match = RANK_BYTES.match
    at, label = [], []
    for k, s, e in zip(lines.tolist(), starts.tolist(), ends.tolist()):
        m = match(buf, s, e)
        if m is not None:
            self._rank(int(m.group(m.lastindex or 1)))
            at.append(k)
            label.append(m.end() - s)
        elif not buf[s:e].isascii():
            c = buf[s:e].decode("utf-8", "replace")
            if c[:1] == " " or c[:1] == "[" or c[:1].isdigit():
                self._rank(split_rank(c)[0])
    return np.array(at, dtype=np.int64), np.array(label, dtype=np.int64)
