"""DLPerf's published per-repeat values, as its extractors printed them in the suites' READMEs (stored whole under
tests/fixtures/real/references/dlperf/), through our aggregation: every median and speedup DLPerf printed beside
them comes out of ``stats`` as published (to the 0.01 DLPerf rounded to). One test per README that prints them:
NGC PyTorch, TF1 and MXNet, Paddle, MindSpore, TF 2.x, PyTorch examples and MXNet gluon (ResNet-50 and BERT where
published); OneFlow's reports give no per-repeat lists here (tests/test_oneflow.py reads its per-repeat logs)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dlperf_slurm import stats

HERE = Path(__file__).resolve().parent / "fixtures" / "real" / "references" / "dlperf"
_LOG = re.compile(r"^\S*?/(\d+n\d+g)/\S+\.log (\{[^}]*\})\s*$")


def blocks(text: str):
    """(per-shape repeat values, DLPerf's result dict) for every extractor printout in a README."""
    current: dict[str, dict] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _LOG.match(lines[i])
        if m:
            current[m.group(1)] = ast.literal_eval(m.group(2))  # cumulative: the last line of a shape has them all
        elif lines[i].startswith("{'") and current:
            j, chunk = i, []
            while j < len(lines):
                chunk.append(lines[j])
                if lines[j].rstrip().endswith("}}}"):
                    break
                j += 1
            yield current, ast.literal_eval("\n".join(chunk))
            current, i = {}, j
        i += 1


READMES = sorted(p for p in HERE.glob("*.md") if _LOG.search(p.read_text()) or any(
    _LOG.match(line) for line in p.read_text().splitlines()))


@pytest.mark.parametrize("path", READMES, ids=[p.stem for p in READMES])
def test_published_medians_and_speedups_from_the_published_repeats(path):
    found = list(blocks(path.read_text()))
    assert found, f"{path.name}: no extractor printout read"
    checked = 0
    for repeats, result in found:
        (model, shapes), = result.items()
        base = None
        for shape in sorted(shapes, key=lambda s: tuple(int(x) for x in re.findall(r"\d+", s))):
            pub = shapes[shape]
            values = list(repeats[shape].values())
            median = stats.median(values)
            assert round(median, 2) == pytest.approx(pub["median_speed"], abs=0.011), (path.name, model, shape)
            if "average_speed" in pub:
                assert round(stats.mean(values), 2) == pytest.approx(pub["average_speed"], abs=0.011)
            if shape == "1n1g":
                base = median
            if base is not None and "speedup" in pub:
                assert round(stats.speedup(median, base), 2) == pytest.approx(pub["speedup"], abs=0.011), \
                    (path.name, model, shape)
            checked += 1
    assert checked >= 5
