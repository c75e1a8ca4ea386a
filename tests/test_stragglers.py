"""Which nodes made which number: the straggler analysis over run rows, and Slurm host lists."""

from __future__ import annotations

import random
from dataclasses import fields

import pytest

from dlperf_slurm import hostlist
from dlperf_slurm.model.rows import RunRow
from dlperf_slurm.model.status import Status
from dlperf_slurm.report import stragglers


def row(cell: str, hosts: str, throughput: float, status: Status = Status.OK) -> RunRow:
    base = {f.name: None for f in fields(RunRow)}
    return RunRow(**{**base, "campaign": "c", "cell_id": cell, "hosts": hosts, "throughput": throughput,
                     "status": status})


def campaign(slow: dict[str, float], cells=("a", "b", "c"), repeats=6, noise=0.005, seed=0) -> list[RunRow]:
    """Runs alternating over n1..n4; a node in ``slow`` runs at that fraction of the normal speed."""
    rng = random.Random(seed)
    nodes = ["n1", "n2", "n3", "n4"]
    out = []
    for ci, cell in enumerate(cells):
        for i in range(repeats):
            node = nodes[(i + ci) % len(nodes)]
            out.append(row(cell, node, 1000 * (ci + 1) * slow.get(node, 1.0) * (1 + rng.uniform(-noise, noise))))
    return out


def by_node(reports):
    return {r.node: r for r in reports}


def test_a_consistently_slow_node_is_named():
    reps = by_node(stragglers.analyse(campaign({"n2": 0.7})))
    assert reps["n2"].straggler and len(reps["n2"].slow_cells) == 3 and reps["n2"].slow == reps["n2"].judged
    assert reps["n2"].worst_gap == pytest.approx(0.3, abs=0.02)
    assert not any(r.straggler for n, r in reps.items() if n != "n2")
    assert stragglers.analyse(campaign({"n2": 0.7}))[0].node == "n2"  # stragglers first


def test_half_the_runs_on_a_bad_node_do_not_hide_it():
    """Two nodes, one slow: it makes half of each cell's runs, so the cell's own median would sit between the two
    groups; against the other node's runs it is plainly slow."""
    runs = [row(c, n, 1000 * (0.8 if n == "n1" else 1.0) * (1 + 0.001 * i)) for c in "abc" for i in range(3)
            for n in ("n1", "n2")]
    cell_median = sorted(r.throughput for r in runs if r.cell_id == "a")[3]
    assert cell_median > 0.8 * 1000 * 1.05  # the cell's own median is no fair reference here
    reps = by_node(stragglers.analyse(runs))
    assert reps["n1"].straggler and not reps["n2"].straggler


def test_slow_in_one_cell_only_is_not_a_straggler():
    runs = campaign({})
    runs = [row(r.cell_id, r.hosts, r.throughput * (0.7 if r.cell_id == "a" and r.hosts == "n3" else 1))
            for r in runs]
    reps = by_node(stragglers.analyse(runs))
    assert reps["n3"].slow_cells == ["a"] and not reps["n3"].straggler


def test_noise_and_identical_runs_name_no_one():
    assert not any(r.straggler or r.slow for r in stragglers.analyse(campaign({}, noise=0.01)))
    same = [row(c, f"n{i % 2 + 1}", 500.0) for c in "abc" for i in range(6)]
    assert not any(r.slow for r in stragglers.analyse(same))


def test_multi_node_runs_count_for_every_node_and_failed_runs_for_none():
    runs = [row(c, "n[1-2]", 100.0) for c in "ab" for _ in range(3)] + [row("a", "n3", 50.0, Status.OOM)]
    reps = by_node(stragglers.analyse(runs))
    assert set(reps) == {"n1", "n2"} and reps["n1"].runs == 6 and reps["n1"].cells == 0  # nobody else to compare


def test_the_report_section():
    lines = stragglers.markdown(stragglers.analyse(campaign({"n2": 0.7})))
    text = "\n".join(lines)
    assert "| n2 | " in text and "Stragglers: n2" in text
    assert stragglers.markdown([]) == []


@pytest.mark.parametrize("text, hosts", [
    ("n1", ["n1"]), ("n[1-3]", ["n1", "n2", "n3"]), ("gpu-a[01-02,10],login1", ["gpu-a01", "gpu-a02", "gpu-a10", "login1"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]), ("node[7]-ib", ["node7-ib"]), ("", []), (None, [])])
def test_hostlist_expand(text, hosts):
    assert hostlist.expand(text) == hosts
