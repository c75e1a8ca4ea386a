"""The HTML report (summaries/<name>.html): one self-contained file, rendered by a real browser (Debian's headless
Chromium), whose numbers are read back from the rendered page and compared with the JSON summary."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import synthcampaigns as sc  # noqa: E402

from dlperf_slurm.cli import main  # noqa: E402

A100 = "0, NVIDIA A100-SXM4-80GB, {driver}, 81920 MiB, 1410 MHz"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser(url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--disable-component-update", "--no-first-run",
                           f"--user-data-dir={tmp / 'chromium-profile'}", *extra, url],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def campaigns(tmp_path, monkeypatch):
    """monday, tuesday (20 % slower, a new driver), wednesday (its 4-GPU cell out of memory), collected with the
    CLI into one store: wednesday's report has a history for every cell and five failed runs."""
    monkeypatch.setenv("DLPERF_SLURM_STORE", str(tmp_path / "results.sqlite"))
    for name, scale, driver, oom in (("monday", 1.0, "535.104.05", ()), ("tuesday", 0.8, "550.54.15", ()),
                                     ("wednesday", 0.82, "550.54.15", (4,))):
        job = {"versions": {"python": "3.10.12", "tensorflow": "2.15.0"}, "gpus": [A100.format(driver=driver)]}
        tree = sc.tree(tmp_path / "trees", name, scale, gpus=(1, 2, 4), oom=oom, job=job)
        assert main(["collect", "--from", str(tree), "--suite", sc.SUITE, "-q", "--system", "alpha",
                     "--out", str(tmp_path / "summaries")]) == 0
    return tmp_path / "summaries"


class Page(HTMLParser):
    """What the test reads from a page: the medians (data-cell, data-value, text), the failures, the trend
    plots' points, the System table, and every reference to another resource."""

    def __init__(self) -> None:
        super().__init__()
        self.medians: dict[str, tuple[str | None, str]] = {}
        self.failures: list[tuple[str, str]] = []
        self.trend_points: dict[str, int] = {}
        self.system: dict[str, str] = {}
        self.external: list[str] = []
        self._open: list[tuple[str, dict]] = []
        self._text: list[str] = []
        self._section = ""
        self._row: list[str] = []
        self._figure = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href"):
            if a.get(k) and not a[k].startswith("#"):
                self.external.append(a[k])
        if tag in ("link", "script", "img", "iframe"):
            self.external.append(tag)
        if tag == "h2":
            self._section = a.get("id", "")
        if tag == "figure" and "data-cell" in a:
            self._figure = a["data-cell"]
        if tag == "circle" and self._section == "history" and self._figure:
            self.trend_points[self._figure] = self.trend_points.get(self._figure, 0) + 1
        if tag in ("span", "pre", "td") or (tag == "details"):
            self._open.append((tag, a))
            self._text = []

    def handle_data(self, data):
        self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "figure":
            self._figure = ""
        if not self._open or self._open[-1][0] != tag:
            return
        _, a = self._open.pop()
        text = "".join(self._text).strip()
        if tag == "span" and "median" in a.get("class", ""):
            self.medians[a["data-cell"]] = (a.get("data-value"), text)
        elif tag == "pre" and self._open and self._open[-1][0] == "details":
            self.failures.append((self._open[-1][1]["data-cell"], text))
        elif tag == "td" and self._section == "system":
            self._row.append(text)
            if len(self._row) == 2:
                self.system[self._row[0]] = self._row[1]
                self._row = []


def _check(page: Page, summary: dict) -> None:
    cells = {c["cell_id"]: c for c in summary["cells"]}
    assert set(page.medians) == set(cells)
    for cid, (value, text) in page.medians.items():
        c = cells[cid]
        if c["n_ok"]:
            assert float(value) == c["median"] and text == f"{c['median']:.2f}"
        else:
            assert value is None and text == c["status"] == "OOM"
    failed = [r for r in summary["runs"] if r["status"] != "OK"]
    assert len(page.failures) == len(failed) == 5
    for (cid, log), run in zip(page.failures, failed, strict=True):
        assert cid == run["cell_id"]
        last = Path(run["log"]).read_text().strip().splitlines()[-1]
        assert log.splitlines()[-1] == last.strip() and "ResourceExhaustedError" in log
    # each cell's history: monday, tuesday, then wednesday (the OOM cell has no median this time: two points)
    assert page.trend_points == {cid: 3 if c["n_ok"] else 2 for cid, c in cells.items()}
    # the markdown's System rows (the GPU row: count x model, as nvidia-smi listed them)
    assert page.system["driver"] == "550.54.15" and page.system["GPU"].endswith("× NVIDIA A100-SXM4-80GB")
    assert page.external == []


def test_the_report_is_one_self_contained_file(campaigns):
    html = (campaigns / "wednesday.html").read_text()
    page = Page()
    page.feed(html)
    _check(page, json.loads((campaigns / "wednesday.json").read_text()))
    assert html.count("<svg") == 1 + 3  # the suite's plot inline, a trend per cell
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)  # nothing fetched (the SVG namespace aside)


@pytest.mark.skipif(chromium() is None, reason="no chromium: apt-get install chromium (.ci/run does)")
def test_a_real_browser_renders_the_numbers_of_the_json_summary(campaigns, tmp_path):
    url = (campaigns / "wednesday.html").resolve().as_uri()
    p = browser(url, tmp_path, "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    page = Page()
    page.feed(p.stdout)  # the DOM as Chromium built it
    _check(page, json.loads((campaigns / "wednesday.json").read_text()))
    screenshot(url, tmp_path, "report-with-failures.png")


def screenshot(url: str, tmp: Path, name: str) -> Path:
    """The page as Chromium draws it, a PNG (kept in ``$DLPERF_SLURM_SCREENSHOTS`` too, where that names a folder:
    docs/img's screenshots are taken so)."""
    shot = tmp / name
    p = browser(url, tmp, f"--screenshot={shot}", "--window-size=1400,2400")
    assert p.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p.stderr[-2000:]
    assert shot.stat().st_size > 50_000  # a blank page is a few kB
    if os.environ.get("DLPERF_SLURM_SCREENSHOTS"):
        shutil.copyfile(shot, Path(os.environ["DLPERF_SLURM_SCREENSHOTS"]) / name)
    return shot


@pytest.mark.skipif(chromium() is None, reason="no chromium: apt-get install chromium (.ci/run does)")
def test_a_real_browser_shows_a_one_shape_campaign_a_sentence_instead_of_a_plot(tmp_path):
    """Issue #32 part 5: a campaign whose cells ran on one GPU count (a real run of the built-in workload) gets no
    plot (one point a line, an efficiency of 100 % by definition) but a sentence why, as Chromium renders it."""
    from test_plot_says_something import ONE_GPU, _collect

    out = _collect(tmp_path, {"1n1g": ONE_GPU})
    url = (out / "t.html").resolve().as_uri()
    p = browser(url, tmp_path, "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", p.stdout))
    assert "<svg" not in p.stdout and "no plot: every cell with a figure ran on 1 GPU (1n1g)" in text
    summary = json.loads((out / "t.json").read_text())
    (cell,) = summary["cells"]
    page = Page()
    page.feed(p.stdout)
    assert page.medians == {cell["cell_id"]: (str(cell["median"]), f"{cell['median']:.2f}")}
    screenshot(url, tmp_path, "report-one-shape.png")
