"""A tiny synthetic Criteo-shaped OFRecord data set for OneFlow-Inc/models' ``wide_and_deep/train.py``:
``python wdl_ofrecord.py OUT_DIR --records N --vocab V --parts P`` writes ``OUT_DIR/{train,val}/part-00000 ..``
(train.py's ``--data_dir OUT_DIR --data_part_num P --data_part_name_suffix_length 5``).

Each record is OneFlow's own ``oneflow.OFRecord`` protobuf (``oneflow.core.record.record_pb2``, shipped in the
oneflow wheel), with the four features train.py's OFRecordDataLoader decodes (models/data.py): ``labels`` (1 int32,
0 or 1), ``dense_fields`` (13 float), ``wide_sparse_fields`` (2 int32) and ``deep_sparse_fields`` (26 int32), the ids
in [1, V) (0 is the embeddings' padding index); a part file is OneFlow's OFRecord framing: per record its length
(int64, little-endian) then its bytes. The reader needs at least as many parts as processes.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

import numpy as np
from oneflow.core.record import record_pb2

DENSE, WIDE, DEEP = 13, 2, 26


def write(out: Path, records: int, vocab: int, parts: int, seed: int = 0) -> list[Path]:
    rng = np.random.default_rng(seed)
    written = []
    for mode in ("train", "val"):
        (out / mode).mkdir(parents=True, exist_ok=True)
        for part in range(parts):
            path = out / mode / f"part-{part:05d}"
            with open(path, "wb") as f:
                for _ in range(records):
                    r = record_pb2.OFRecord()
                    r.feature["labels"].int32_list.value.append(int(rng.integers(0, 2)))
                    r.feature["dense_fields"].float_list.value.extend(rng.random(DENSE).tolist())
                    r.feature["wide_sparse_fields"].int32_list.value.extend(rng.integers(1, vocab, WIDE).tolist())
                    r.feature["deep_sparse_fields"].int32_list.value.extend(rng.integers(1, vocab, DEEP).tolist())
                    data = r.SerializeToString()
                    f.write(struct.pack("<q", len(data)))
                    f.write(data)
            written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--records", type=int, default=2048, help="records per part file")
    ap.add_argument("--vocab", type=int, default=3200, help="sparse ids are drawn from [1, vocab)")
    ap.add_argument("--parts", type=int, default=1)
    a = ap.parse_args()
    for p in write(a.out, a.records, a.vocab, a.parts):
        print(p)


if __name__ == "__main__":
    main()
