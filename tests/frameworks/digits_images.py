"""scikit-learn's handwritten digits (a small real data set that the package ships: 1,797 8x8 images of 10 classes,
read from its ``digits.csv.gz`` with numpy) as RGB PNG images, in the layouts the real programs read an ImageNet
from, for their accuracy runs on the CPU (tests/test_*_accuracy.py):

    python digits_images.py DIGITS_CSV_GZ DIR --layout list|folder|rec|ofrecord [--size 32] [--train N] [--val M]

``list``: PaddleClas/PaddleCV's ``train_list.txt`` / ``val_list.txt`` ("train/7/12.png 7" lines) under DIR;
``folder``: gluon-cv's ImageNet folder (``DIR/train/<class>/*.png``, ``DIR/val/<class>/*.png``); ``rec``: MXNet
RecordIO, ``DIR/train.rec`` + ``train.idx`` and ``val.rec`` + ``val.idx`` (what im2rec writes: each record an
IRHeader with the label and the encoded image; needs mxnet, run it with the MXNet venv's python); ``ofrecord``:
OneFlow's OFRecord, ``DIR/train/part-00000`` and ``DIR/validation/part-00000`` (OneFlow-Inc/models' resnet50 reader:
the ``encoded`` image as a JPEG, written with Pillow, and the int32 ``class/label``, each record OneFlow's own protobuf after its int64 length,
as tests/frameworks/oneflow/wdl_ofrecord.py writes them; run it with the oneflow venv's python). The images are
the digits scaled up (each pixel a square) to ``size``; a fixed shuffle (seed 0) splits them, the first ``train``
for training and the next ``val`` held out. Needs numpy only for the PNGs (written with zlib).
"""

from __future__ import annotations

import argparse
import gzip
import struct
import zlib
from pathlib import Path

import numpy as np


def png(pixels: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of an (H, W, 3) uint8 array."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\0" + pixels[r].tobytes() for r in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def jpeg(pixels: np.ndarray) -> bytes:
    """A JPEG of an (H, W, 3) uint8 array (OneFlow's OFRecord image decoders read JPEG only): needs Pillow."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=95)
    return out.getvalue()


def images(csv_gz: Path, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The digits as (N, size, size, 3) uint8 images and their labels, in a fixed shuffled order."""
    with gzip.open(csv_gz, "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    x, y = table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    scale = -(-size // 8)
    big = np.kron(x, np.ones((scale, scale)))[:, :size, :size] * (255.0 / 16.0)
    return np.repeat(big[..., None], 3, axis=-1).clip(0, 255).astype(np.uint8), y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("digits", type=Path, help="scikit-learn's datasets/data/digits.csv.gz")
    p.add_argument("out", type=Path)
    p.add_argument("--layout", choices=("list", "folder", "rec", "ofrecord"), required=True)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--train", type=int, default=1437)
    p.add_argument("--val", type=int, default=360)
    a = p.parse_args()
    x, y = images(a.digits, a.size)
    for part, lo, hi in (("train", 0, a.train), ("val", a.train, a.train + a.val)):
        if a.layout == "rec":
            import mxnet as mx

            a.out.mkdir(parents=True, exist_ok=True)
            rec = mx.recordio.MXIndexedRecordIO(str(a.out / f"{part}.idx"), str(a.out / f"{part}.rec"), "w")
            for k, i in enumerate(range(lo, min(hi, len(y)))):
                rec.write_idx(k, mx.recordio.pack(mx.recordio.IRHeader(0, float(y[i]), k, 0), png(x[i])))
            rec.close()
            print(f"{part}: {min(hi, len(y)) - lo} images")
            continue
        if a.layout == "ofrecord":
            from oneflow.core.record import record_pb2

            (a.out / ("validation" if part == "val" else part)).mkdir(parents=True, exist_ok=True)
            with open(a.out / ("validation" if part == "val" else part) / "part-00000", "wb") as f:
                for i in range(lo, min(hi, len(y))):
                    r = record_pb2.OFRecord()
                    r.feature["encoded"].bytes_list.value.append(jpeg(x[i]))
                    r.feature["class/label"].int32_list.value.append(int(y[i]))
                    data = r.SerializeToString()
                    f.write(struct.pack("<q", len(data)) + data)
            print(f"{part}: {min(hi, len(y)) - lo} images")
            continue
        lines = []
        for i in range(lo, min(hi, len(y))):
            rel = f"{part}/{y[i]}/{i}.png"
            (a.out / part / str(y[i])).mkdir(parents=True, exist_ok=True)
            (a.out / rel).write_bytes(png(x[i]))
            lines.append(f"{rel} {y[i]}\n")
        if a.layout == "list":
            (a.out / f"{part}_list.txt").write_text("".join(lines))
        print(f"{part}: {len(lines)} images")


if __name__ == "__main__":
    main()
