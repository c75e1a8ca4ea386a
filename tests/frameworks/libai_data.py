"""A tiny GPT-2 pre-training data set for LiBai, made here (no download): what ``configs/gpt2_pretrain.py`` reads,
``vocab_file``, ``merges_file`` and an indexed mmap dataset at ``data_prefix``.

1. The corpus: the paragraphs of the vendored LiBai's LICENSE (the Apache-2.0 text, real English prose), one JSON
   document each (``{"text": ...}``), the input of LiBai's ``tools/preprocess_data.py``.
2. A byte-level BPE vocabulary in GPT-2's files' format, learned from that corpus the way GPT-2's is: LiBai's own
   ``bytes_to_unicode`` byte alphabet (256 symbols) and GPT2Tokenizer's pre-tokenizer pattern, then the most frequent
   adjacent pair merged, ``MERGES`` times; ``<|endoftext|>`` last (GPT-2's layout: ``vocab.json`` token -> id,
   ``merges.txt`` a ``#version`` line and one merge a line).
3. LiBai's own ``tools/preprocess_data.py --tokenizer-name GPT2Tokenizer --dataset-impl mmap`` turns the corpus into
   ``<out>/corpus_text_document.{bin,idx}`` (no ``--append-eod``: LiBai's GPT2Tokenizer has no ``eod`` attribute,
   the option raises).

    python libai_data.py LIBAI_DIR OUT_DIR     # with the LiBai venv's python; prints the data prefix

Run with the interpreter that runs LiBai (it imports ``libai`` and ``regex``).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

MERGES = 300


def corpus(libai_dir: Path) -> list[str]:
    """The LICENSE's paragraphs (blank-line separated), whitespace folded."""
    text = (libai_dir / "LICENSE").read_text()
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]


def learn_bpe(docs: list[str], merges: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """GPT-2-style byte-level BPE: (vocab token -> id, merges in rank order)."""
    import regex

    from libai.tokenizer.tokenization_gpt2 import bytes_to_unicode

    byte_enc = bytes_to_unicode()
    pat = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    words = collections.Counter("".join(byte_enc[b] for b in w.encode("utf-8"))
                                for d in docs for w in pat.findall(d))
    split = {w: tuple(w) for w in words}
    vocab = {byte_enc[b]: i for i, b in enumerate(sorted(byte_enc))}
    ranks: list[tuple[str, str]] = []
    for _ in range(merges):
        pairs: collections.Counter = collections.Counter()
        for w, n in words.items():
            s = split[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _n = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        ranks.append((a, b))
        vocab.setdefault(a + b, len(vocab))
        for w, s in split.items():
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            split[w] = tuple(out)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab, ranks


def make(libai_dir: Path, out: Path) -> Path:
    """Write the corpus, vocab and merges, run LiBai's preprocess_data.py; the data prefix."""
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(libai_dir))
    docs = corpus(libai_dir)
    (out / "corpus.json").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    vocab, ranks = learn_bpe(docs, MERGES)
    (out / "gpt2-vocab.json").write_text(json.dumps(vocab))
    (out / "gpt2-merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in ranks))
    subprocess.run([sys.executable, str(libai_dir / "tools" / "preprocess_data.py"), "--input",
                    str(out / "corpus.json"), "--json-keys", "text", "--tokenizer-name", "GPT2Tokenizer",
                    "--vocab-file", str(out / "gpt2-vocab.json"), "--merges-file", str(out / "gpt2-merges.txt"),
                    "--output-prefix", str(out / "corpus"), "--dataset-impl", "mmap", "--workers", "1"],
                   check=True, cwd=libai_dir,  # LiBai's tools expect an installed libai: its tree on the path
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(libai_dir),
                                                                                   os.environ.get("PYTHONPATH")]))})
    return out / "corpus_text_document"


if __name__ == "__main__":
    print(make(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()))
