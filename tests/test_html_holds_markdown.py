"""One report, two forms (issue #32, part 5): the HTML page holds everything the markdown summary says (the
System rows, the method, runs and health gate lines, Nodes and stragglers, every other section), and a failed
run's last human-readable log lines (not the workload's machine events). Real logs of the built-in workload."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from dlperf_slurm.cli import main

SMOKE = (Path(__file__).parent / "fixtures" / "real" / "dlperf_slurm-workload" / "85a9eb7"
         / "smoke_resnet50_tiny_1n1g_b4_fp32_0.log")


def _text(page: str) -> str:
    """The page's text as a reader sees it: tags dropped, entities read, spaces folded."""
    page = re.sub(r"</?(?:b|code|span)\b[^>]*>", "", page)  # inline tags join; the others part words
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _plain(md_line: str) -> str:
    line = md_line.replace("\\|", "|").replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", line.lstrip("-> ").strip())


def test_every_line_of_the_markdown_is_on_the_html_page(tmp_path):
    tree = tmp_path / "smoke" / "1n1g"
    tree.mkdir(parents=True)
    for rep in range(3):
        shutil.copyfile(SMOKE, tree / f"resnet50_b4_fp32_{rep}.log")
    cut = tree / "resnet50_b4_fp32_2.log"  # a run killed mid-window: its last lines are the workload's events
    lines = cut.read_text().splitlines(keepends=True)
    cut.write_text("".join(lines[: next(i for i, ln in enumerate(lines) if '"step":4,' in ln) + 1]))
    out = tmp_path / "s"
    assert main(["collect", "--from", str(tree.parent), "--suite", "pytorch-ddp/resnet50", "--warmup-steps", "2",
                 "--measure-steps", "5", "--out", str(out), "--no-store", "-q"]) == 0
    md = (out / "smoke.md").read_text()
    page = (out / "smoke.html").read_text()
    text = _text(page)
    missing = []
    for line in md.splitlines():
        if not line.strip() or line.startswith(("# ", "Generated ", "|--", "| ---", "| | |")):
            continue
        if line.startswith("|"):  # a table row: each of its cells
            cells = [_plain(c) for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            missing += [c for c in cells if c and c not in text]
        elif _plain(line.removeprefix("## ")) not in text:
            missing.append(_plain(line))
    assert not missing, "\n".join(missing[:10])
    for needed in ("Method (docs/method.md)", "Runs: OK 2, INCOMPLETE 1", "CUDA toolkit (nvcc)", "Health gate: 3 runs",
                   "Across suites", " Nodes "):
        assert needed in text, needed
    failure = page[page.index('<details class="failure"'):]
    log = html.unescape(failure[failure.index("<pre>") + 5: failure.index("</pre>")])
    assert ":::DLPERF" not in log and log.strip(), log  # the human-readable lines only
