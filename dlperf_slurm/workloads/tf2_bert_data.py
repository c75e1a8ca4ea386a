"""A tiny BERT pre-training data set for the ``tf2/bert-base`` suite (TF Model Garden
``official.legacy.bert.run_pretraining``), which has no synthetic-data mode: random token ids in the TFRecord
features that program reads (``input_pipeline.create_pretrain_dataset``), and a small ``bert_config.json``.

Run it with the Python of the TensorFlow environment (it imports tensorflow)::

    python -m dlperf_slurm.workloads.tf2_bert_data OUT_DIR [--shards 2] [--examples 64] [--layers 2] [--hidden 128]

then point the suite at it: ``[options] input_files = "OUT_DIR/*.tfrecord"``,
``bert_config_file = "OUT_DIR/bert_config.json"``. One shard per worker at least: with MultiWorkerMirrored each
worker reads its own shard of the files. For smoke tests and CPU runs, not a benchmark of BERT-base.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

SEQ_LENGTH = 128  # DLPerf's TF2 BERT: --max_seq_length=128 --max_predictions_per_seq=20
MAX_PREDICTIONS = 20
VOCAB = 30522


def bert_config(layers: int, hidden: int, heads: int) -> dict:
    return {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "hidden_size": hidden, "initializer_range": 0.02, "intermediate_size": 4 * hidden,
            "max_position_embeddings": 512, "num_attention_heads": heads, "num_hidden_layers": layers,
            "type_vocab_size": 2, "vocab_size": VOCAB}


def write(out: Path, shards: int = 2, examples: int = 64, layers: int = 2, hidden: int = 128, heads: int = 2,
          seed: int = 0) -> list[Path]:
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        path = out / f"pretrain-{s:02d}-of-{shards:02d}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as w:
            for _ in range(examples):
                length = rng.randint(SEQ_LENGTH // 2, SEQ_LENGTH)
                ids = [rng.randrange(1000, VOCAB) for _ in range(length)] + [0] * (SEQ_LENGTH - length)
                positions = sorted(rng.sample(range(1, length), MAX_PREDICTIONS))
                feats = {
                    "input_ids": ints(ids),
                    "input_mask": ints([1] * length + [0] * (SEQ_LENGTH - length)),
                    "segment_ids": ints([0] * (length // 2) + [1] * (length - length // 2)
                                        + [0] * (SEQ_LENGTH - length)),
                    "masked_lm_positions": ints(positions),
                    "masked_lm_ids": ints([ids[p] for p in positions]),
                    "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * MAX_PREDICTIONS)),
                    "next_sentence_labels": ints([rng.randint(0, 1)]),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
        paths.append(path)
    cfg = out / "bert_config.json"
    cfg.write_text(json.dumps(bert_config(layers, hidden, heads), indent=2) + "\n")
    return [*paths, cfg]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--examples", type=int, default=64, help="examples per shard")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    for path in write(a.out, a.shards, a.examples, a.layers, a.hidden, a.heads, a.seed):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
