"""The network explanation of scaling (#25): ring all-reduce arithmetic checked by hand, bounds and regimes, and the
regimes of a real run on links of different bandwidth (tests/test_network_slurm.py on the test cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlperf_slurm.model.status import Status
from dlperf_slurm.report import network


def test_ring_allreduce_by_hand():
    # ResNet-50: 25,557,032 parameters x 4 bytes = 102,228,128 bytes; 4 ranks at a bus bandwidth of 10 GB/s:
    # 2 x 3 / 4 = 1.5; 1.5 x 102,228,128 B / 1e10 B/s = 0.0153342192 s
    assert network.ring_allreduce_seconds(102_228_128, 4, 10.0) == pytest.approx(0.0153342192, rel=1e-12)
    # 16 ranks (2n8g) at 9.8 GB/s: 2 x 15 / 16 = 1.875; 1.875 x 102,228,128 = 191,677,740 B;
    # / 9.8e9 B/s = 0.01955895306 s
    assert network.ring_allreduce_seconds(102_228_128, 16, 9.8) == pytest.approx(0.01955895306, rel=1e-9)
    assert network.ring_allreduce_seconds(1e9, 1, 1.0) == 0.0


def test_bounds_by_hand():
    no, full = network.bounds(0.050, 0.0153342192)
    assert no == pytest.approx(0.050 / 0.0653342192) and full == 1.0
    no, full = network.bounds(0.010, 0.020)
    assert (no, full) == (pytest.approx(1 / 3), pytest.approx(0.5))


def _cell(shape="2n8g", nodes=2, gpn=8, eff=0.76, batch=64, model="resnet50", precision="fp32", variant=""):
    devices = nodes * gpn
    base_rate = 400.0  # the 1n1g cell's img/s
    return SimpleNamespace(cell_id=f"{model}.{shape}", shape=shape, nodes=nodes, devices=devices, efficiency=eff,
                           median=eff * devices * base_rate, batch_size=batch, model=model, precision=precision,
                           variant=variant)


def _runs(cell_id, busbw, params=None):
    return [SimpleNamespace(cell_id=cell_id, status=Status.OK, health_busbw_gbs=b,
                            extra={"params": params} if params else {}) for b in busbw]


def test_network_bound_cell_named_with_its_ceiling():
    # compute = 64 / 400 = 160 ms; 2n8g fp32 ResNet-50 at 0.8 GB/s: 1.875 x 102,228,128 / 0.8e9 = 239.6 ms:
    # full overlap allows 160 / 239.6 = 66.8 %; measured 65 %: network-bound
    c = _cell(eff=0.65)
    e = network.explain_cell(c, _runs(c.cell_id, [0.7, 0.8, 0.9]))
    assert e.busbw_gbs == 0.8 and e.grad_bytes == 102_228_128 and e.params_from == "model"
    assert e.allreduce_ms == pytest.approx(1.875 * 102_228_128 / 0.8e9 * 1e3)
    assert e.compute_ms == pytest.approx(160.0)
    assert e.full_overlap == pytest.approx(160 / e.allreduce_ms)
    assert e.regime == "network-bound"
    assert e.text == "network-bound: 2n8g at 65%, the measured 0.8 GB/s allows at most 67%"


def test_fast_network_is_not_the_explanation():
    # the same cell at 25 GB/s: all-reduce 7.7 ms, no overlap allows 160 / 167.7 = 95 %; measured 60 %
    c = _cell(eff=0.60)
    e = network.explain_cell(c, _runs(c.cell_id, [25.0]))
    assert e.no_overlap == pytest.approx(160 / (160 + 1.875 * 102_228_128 / 25e9 * 1e3))
    assert e.regime == "not the network" and "allows 95% even without overlap" in e.text


def test_params_from_the_log_and_precision_bytes():
    c = _cell(precision="fp16", model="tiny-thing")
    e = network.explain_cell(c, _runs(c.cell_id, [10.0], params=1_000_000))
    assert (e.params, e.params_from, e.grad_bytes) == (1_000_000, "log", 2_000_000)


def test_no_explanation_on_one_node_or_without_a_busbw():
    one = _cell(shape="1n8g", nodes=1)
    assert network.explain_cell(one, _runs(one.cell_id, [10.0])) is None
    c = _cell()
    assert network.explain_cell(c, _runs(c.cell_id, [None])) is None


def test_regimes():
    assert network.regime(0.76, 0.60, 0.78) == "network-bound"
    assert network.regime(0.61, 0.60, 1.0) == "not overlapped"
    assert network.regime(0.80, 0.60, 1.0) == "partly overlapped"
    assert network.regime(0.30, 0.90, 1.0) == "not the network"
    assert network.regime(0.95, 0.50, 0.70) == "above the measured bandwidth"
    # the all-reduce outlasts the compute: network-bound from the no-overlap figure up, overlap cannot save it
    assert network.regime(0.11, 0.11, 0.13) == "network-bound"
    assert network.regime(0.40, 0.34, 0.51) == "network-bound"
    assert network.regime(0.25, 0.34, 0.51) == "not the network"


NETBED = Path(__file__).parent / "fixtures" / "network" / "netbed-100mbit.json"


def test_a_real_run_over_a_100_mbit_link_is_network_bound_and_over_the_bridge_not():
    """The cells and runs `collect` made of a real 2-node campaign on the test cluster (tests/test_network_slurm.py,
    trimmed): set-up slow's gloo all-reduce ran over links tc limited to 100 Mbit/s (the gate measured 0.0107 GB/s),
    fast's over the nodes' bridge (0.206 GB/s). The slow cell ran at 10.8 %, at its no-overlap figure (its 5.9 MB
    all-reduce about 8 times its compute): network-bound (once named "not overlapped", as if overlap could save
    it); the fast one is not."""
    doc = json.loads(NETBED.read_text())
    cells = [SimpleNamespace(**c) for c in doc["cells"]]
    runs = [SimpleNamespace(**r) for r in doc["runs"]]
    found = {e.setup: e for e in network.explain(cells, runs)}
    slow, fast = found["slow"], found["fast"]
    assert (slow.busbw_gbs, slow.params, slow.params_from) == (pytest.approx(0.0107, rel=0.01), 1_486_106, "log")
    assert slow.allreduce_ms > 5 * slow.compute_ms and slow.efficiency == pytest.approx(0.108, abs=0.001)
    assert slow.regime == "network-bound"
    assert slow.text == ("network-bound: 2n1g at 11%, the measured 0.0107 GB/s allows at most 13% (11% without "
                         "overlap: the step waits for its all-reduce)")
    assert fast.regime != "network-bound" and fast.allreduce_ms < fast.compute_ms / 5


def test_markdown_section_per_setup():
    slow, fast = _cell(eff=0.65, variant="setup=overlay"), _cell(eff=0.93, variant="setup=host")
    slow.cell_id, fast.cell_id = "a", "b"
    text = "\n".join(network.markdown([slow, fast], _runs("a", [0.8]) + _runs("b", [25.0])))
    assert "| overlay" in text and "network-bound: 2n8g at 65%" in text
    assert "| host" in text and "2n8g at 93%" in text and text.count("network-bound:") == 1


def test_the_ddl_study_s_vgg16_cells_are_explained_with_vgg16_s_gradients():
    """The shipped network study runs VGG16 beside ResNet-50: each multi-node cell, as collect's rows name its model
    (``Cell.model``, the suite's), is explained with its model's parameters: VGG16's 138,357,544 (553 MB of fp32
    gradients, the study's "VGG is about 500 MB"), ResNet-50's 25,557,032."""
    from pathlib import Path

    from dlperf_slurm.matrix import loader

    m = loader.load(Path(__file__).parents[1] / "matrices" / "ddl-network-study.toml", site=False)
    multi = [c for c in m.cells if c.nodes > 1]
    assert {c.suite for c in multi} == {"tf-cnn/resnet50", "tf-cnn/vgg16"}
    for c in multi:
        row = SimpleNamespace(cell_id=c.id, shape=c.shape, nodes=c.nodes, devices=c.devices, efficiency=0.5,
                              median=0.5 * c.devices * 100.0, batch_size=c.batch_size, model=c.model,
                              precision=c.precision, variant=f"setup={c.setup}")
        e = network.explain_cell(row, _runs(c.id, [1.25]))
        params = 138_357_544 if c.suite == "tf-cnn/vgg16" else 25_557_032
        assert (e.params, e.params_from, e.grad_bytes) == (params, "model", 4 * params), c.id
        # ring all-reduce of 2 GPUs x nodes ranks at 1.25 GB/s (10 Gb/s): 2(n-1)/n x bytes / 1.25e9
        n = c.devices
        assert e.allreduce_ms == pytest.approx(2 * (n - 1) / n * 4 * params / 1.25e9 * 1e3), c.id
        assert e.compute_ms == pytest.approx(c.batch_size / 100.0 * 1e3) and e.setup == c.setup
    vgg = next(c for c in multi if c.suite == "tf-cnn/vgg16" and c.nodes == 2)
    # 2n2g VGG16 at batch 64: 1.5 x 553,430,176 B / 1.25e9 B/s = 664.1 ms of all-reduce against 640 ms of compute
    # (64 images at the baseline's 100 img/s): the all-reduce outlasts the compute, so no overlap can hide it; no
    # overlap allows 640 / 1304.1 = 49 %, where a 50 % cell is: network-bound, its step waiting for the all-reduce
    e = network.explain_cell(SimpleNamespace(cell_id=vgg.id, shape=vgg.shape, nodes=2, devices=4, efficiency=0.5,
                                             median=200.0, batch_size=vgg.batch_size, model=vgg.model,
                                             precision="fp32", variant=""), _runs(vgg.id, [1.25]))
    assert vgg.batch_size == 64 and e.allreduce_ms == pytest.approx(664.1162112)
    assert e.no_overlap == pytest.approx(640 / (640 + 664.1162112)) and e.full_overlap == pytest.approx(
        640 / 664.1162112)
    assert e.regime == "network-bound" and e.text == ("network-bound: 2n2g at 50%, the measured 1.25 GB/s allows at "
                                                      "most 96% (49% without overlap: the step waits for its all-reduce)")


def test_collect_explains_a_multi_node_tf_cnn_vgg16_cell_with_vgg16_s_gradients(tmp_path):
    """Through collect: a tf-cnn/vgg16 tree (the real VGG16 run of tf_cnn_benchmarks on this CPU, batch 2, 1.20
    img/s) as its 1n1g baseline and, behind its job's health event (busbw 1.25 GB/s), as a 2n1g cell at the same
    rate, so 50 % efficient; the 2n1g cell is explained with VGG16's parameters because the suite names the model,
    and the same tree read as tf-cnn/resnet50 with ResNet-50's."""
    import shutil
    from pathlib import Path

    from dlperf_slurm import events
    from dlperf_slurm.collect import drive, gather

    log = Path(__file__).parent / "fixtures/real/tf_cnn_benchmarks/8fb7907/tf_cnn_vgg16_synthetic_cpu_b2_lr1e-6.log"
    for shape in ("1n1g", "2n1g"):
        (tmp_path / "t" / shape).mkdir(parents=True)
    shutil.copy(log, tmp_path / "t" / "1n1g" / "vgg16_b2_fp32_0.log")
    gate = events.format_line(events.EV_HEALTH, ranks=2, nodes=2, busbw_gbs=1.25, ok=True)
    (tmp_path / "t" / "2n1g" / "vgg16_b2_fp32_0.log").write_text(gate + "\n" + log.read_text())
    # all-reduce by hand, 2 ranks: 2 x 1/2 x bytes / 1.25 GB/s: VGG16 553,430,176 B -> 442.74 ms, ResNet-50
    # 102,228,128 B -> 81.78 ms; no overlap allows 1666.7 / (1666.7 + that): 79 % and 95 %; the 2n1g cell (the
    # baseline's own log: 50 %) is under either: not the network
    for suite, params, no_overlap in (("tf-cnn/vgg16", 138_357_544, 0.7901), ("tf-cnn/resnet50", 25_557_032, 0.9532)):
        res = drive.collect([gather.runs_from_tree(tmp_path / "t", suite, 2, 10)], jobs=1)
        assert [(r.shape, str(r.status), r.throughput_time) for r in res.runs] == [("1n1g", "OK", 1.2),
                                                                                   ("2n1g", "OK", 1.2)]
        (e,) = network.explain(res.cells, res.runs)
        assert (e.shape, e.efficiency, e.params, e.params_from, e.grad_bytes) == ("2n1g", 0.5, params, "model",
                                                                                  4 * params)
        assert e.allreduce_ms == pytest.approx(4 * params / 1.25e9 * 1e3)
        assert e.compute_ms == pytest.approx(2 / 1.2 * 1e3)  # 2 images at the baseline's 1.20 img/s
        assert e.no_overlap == pytest.approx(no_overlap, abs=1e-4) and e.regime == "not the network"
