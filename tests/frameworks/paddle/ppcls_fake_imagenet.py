"""A tiny image-folder data set in PaddleClas's ImageNet list format (``img/N.jpg LABEL`` lines), of random pixels:
what PaddleClas's own ``tools/train.py`` trains on when a real log of its ``[Train][Epoch e/E][Iter: i/N]`` lines is
recorded on the CPU (tests/fixtures/real/PaddleClas/d178931f/SOURCE.toml says how).
``python ppcls_fake_imagenet.py DIR [IMAGES]``."""

import sys
from pathlib import Path

import numpy as np
from PIL import Image

root = Path(sys.argv[1])
count = int(sys.argv[2]) if len(sys.argv) > 2 else 24
(root / "img").mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
with open(root / "train_list.txt", "w") as f:
    for i in range(count):
        Image.fromarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(root / "img" / f"{i}.jpg")
        f.write(f"img/{i}.jpg {i % 10}\n")
