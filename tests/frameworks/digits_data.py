"""A tiny real dataset in the input formats of the suites' own programs, for their real accuracy runs on the CPU:
scikit-learn's handwritten digits (1,797 8x8 images of 10 classes, shipped inside scikit-learn) split as the
built-in workload splits them (:mod:`dlperf_slurm.workloads.digits`: 20 % held out, stratified, ``random_state``
0), each image scaled from 0..16 to 0..255 and resized to 32x32 (nearest), grey in all 3 channels.

- :func:`cifar10`: tf_cnn_benchmarks' ``--data_name=cifar10`` input (datasets.Cifar10Dataset.read_data_files): the
  python pickles ``data_batch_1`` .. ``data_batch_5`` and ``test_batch``, each ``{b"data": uint8 (N, 3072) (the R,
  G then B planes), b"labels": [...]}``, as the CIFAR-10 python archive ships them.
- :func:`image_folder`: pytorch/examples imagenet/main.py's input (torchvision ImageFolder): ``train/<class>/*.png``
  and ``val/<class>/*.png``.

    python tests/frameworks/digits_data.py cifar10|imagefolder DIR [--train N --val N]
"""

from __future__ import annotations

import argparse
import pickle
import struct
import zlib
from pathlib import Path
from typing import Any


def split(n_train: int | None = None, n_val: int | None = None) -> tuple[Any, Any, Any, Any]:
    """(train images uint8 (N, 32, 32), train labels, val images, val labels): the first ``n_*`` of each part."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(d.images, d.target, test_size=0.2, random_state=0, stratify=d.target)
    scale = np.arange(32) // 4  # 8 -> 32, nearest

    def img(a: Any) -> Any:
        return (a[:, scale][:, :, scale] * (255 / 16)).round().astype(np.uint8)

    return img(x_tr[:n_train]), y_tr[:n_train], img(x_te[:n_val]), y_te[:n_val]


def cifar10(out: Path, n_train: int | None = None, n_val: int | None = None) -> Path:
    import numpy as np

    x_tr, y_tr, x_te, y_te = split(n_train, n_val)
    out.mkdir(parents=True, exist_ok=True)

    def planes(x: Any) -> Any:  # (N, 32, 32) grey -> (N, 3072): R plane, G plane, B plane
        flat = x.reshape(len(x), -1)
        return np.concatenate([flat, flat, flat], axis=1)

    parts = np.array_split(np.arange(len(x_tr)), 5)
    for i, idx in enumerate(parts, 1):
        with open(out / f"data_batch_{i}", "wb") as f:
            pickle.dump({b"data": planes(x_tr[idx]), b"labels": [int(v) for v in y_tr[idx]]}, f)
    with open(out / "test_batch", "wb") as f:
        pickle.dump({b"data": planes(x_te), b"labels": [int(v) for v in y_te]}, f)
    return out


def png(x: Any) -> bytes:
    """A grey uint8 (H, W) image as an 8-bit RGB PNG (zlib and struct: no imaging library needed here)."""
    h, w = x.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + bytes(v for p in row for v in (p, p, p)) for row in x.tolist())
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def image_folder(out: Path, n_train: int | None = None, n_val: int | None = None) -> Path:
    x_tr, y_tr, x_te, y_te = split(n_train, n_val)
    for part, xs, ys in (("train", x_tr, y_tr), ("val", x_te, y_te)):
        for i, (x, y) in enumerate(zip(xs, ys)):
            d = out / part / str(int(y))
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{i:04d}.png").write_bytes(png(x))
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("form", choices=("cifar10", "imagefolder"))
    p.add_argument("dir", type=Path)
    p.add_argument("--train", type=int)
    p.add_argument("--val", type=int)
    a = p.parse_args()
    print((cifar10 if a.form == "cifar10" else image_folder)(a.dir, a.train, a.val))
