"""termtext's direct writer of tabulate's ``github`` tables (the plan's table of 10^5 cells) against tabulate itself."""

from __future__ import annotations

import random

from tabulate import tabulate

from dlperf_slurm.termtext import github_table

WORDS = ["", "-", "1", "12.5", " x", "x ", "fp32", "a b", "  ", "resnet50.pytorch-ddp.1x1.b8.fp32.xla0"]


def test_the_direct_github_table_is_tabulates_text():
    rng = random.Random(7)
    for _ in range(3000):
        headers = [rng.choice(["a", "cell", "batch/dev", "x" * rng.randint(1, 9), "", " h "])
                   for _ in range(rng.randint(1, 7))]
        rows = [[rng.choice(WORDS + ["x" * rng.randint(0, 14)]) for _ in headers] for _ in range(rng.randint(0, 7))]
        assert github_table(headers, rows) == tabulate(rows, headers=headers, tablefmt="github",
                                                       disable_numparse=True), (headers, rows)


def test_what_only_tabulate_measures_is_left_to_it():
    assert github_table(["a\nb"], [["x"]]) is None  # a header of two lines
    assert github_table(["a"], [["größe"]]) is None  # not ASCII: its width is wcwidth's
    assert github_table(["a", "b"], [["x"]]) is None  # a short row
