"""The ngc-tf1 suites: the parser on real logs of the real programs (tests/fixtures/real/ngc-tf1/SOURCE.md), the
launch spec, golden scripts, and collect's medians and speedups against DLPerf's published per-repeat figures."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from dlperf_slurm import cli, suites
from dlperf_slurm import parsing as lp
from dlperf_slurm.matrix import loader
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.status import Status
from dlperf_slurm.submit import render

HERE = Path(__file__).resolve().parent
FIX = HERE / "fixtures" / "real" / "DeepLearningExamples" / "tf1-20.06"
HOROVOD = HERE / "fixtures" / "real" / "horovod" / "0.28.1"
GOLDEN = HERE / "golden"
RN50, BERT = suites.get("ngc-tf1/resnet50"), suites.get("ngc-tf1/bert-base")
_STAMP = re.compile(r"DLL (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) - ")


def _parse(suite, text: str, nodes=1, gpus=1, bs=128, warmup=20, measure=100):
    return suite.parse(lp.iter_text_lines(text), ParseContext(nodes=nodes, gpus_per_node=gpus, batch_size=bs,
                                                              warmup_steps=warmup, measure_steps=measure))


def _t(line: str) -> float:
    return datetime.fromisoformat(_STAMP.search(line).group(1)).timestamp()


# ------------------------------------------------------------------------------------------ real logs

@pytest.mark.parametrize("name,gpus,bs", [("convnets_training_benchmark_gpu8_amp_bs256.log", 8, 256),
                                          ("convnets_training_benchmark_gpu1_fp32_bs128.log", 1, 128)])
def test_convnets_training_benchmark_real_log(name, gpus, bs):
    """main.py --warmup_steps 200 --num_iter 500: total_ips at (0, 200) .. (0, 499), i.e. steps 201..500."""
    text = (FIX / name).read_text()
    steps = [l for l in text.splitlines() if " total_ips : " in l]
    assert len(steps) == 300 and "(0, 200) total_ips" in steps[0] and "(0, 499) total_ips" in steps[-1]
    ips = [float(l.split(" total_ips : ")[1]) for l in steps]
    for lines in (lp.iter_text_lines(text), lp.read_lines(FIX / name)):  # line loop and block path
        res = RN50.parse(lines, ParseContext(nodes=1, gpus_per_node=gpus, batch_size=bs, warmup_steps=200,
                                             measure_steps=300))
        assert res.status == Status.OK and res.reason == "", res.reason
        # speed flavour: the mean of the printed ips over the window = what the program printed as train_throughput
        reported = float(re.search(r"\(\) train_throughput : (\S+)", text).group(1))
        assert res.throughput_speed == pytest.approx(sum(ips) / 300, rel=1e-12)
        assert res.throughput_speed == pytest.approx(reported, rel=1e-9) and res.extra["reported_throughput"] == reported
        # time flavour: the stamps of steps 201 and 500, the window's start put back by step 201's own batch time
        seconds = _t(steps[-1]) - _t(steps[0]) + gpus * bs / ips[0]
        assert res.throughput == pytest.approx(300 * gpus * bs / seconds, rel=1e-7)
        assert res.window["start"] == 200 and res.window["end"] == 500
        assert res.extra["parameters"]["mode"] == "training_benchmark" and res.extra["metrics"] == ["total_ips"]
    assert "batch_mismatch" in _parse(RN50, text, gpus=gpus, bs=bs * 2, warmup=200, measure=300).extra


def test_bert_real_log_behind_mpirun_tag_and_timestamp_output():
    """32 ranks under mpirun --tag-output --timestamp-output: ``Thu Dec 17 15:05:20 2020[1,0]<stdout>:DLL ...``;
    Iteration 2..46, one line per step."""
    text = (FIX / "bert_lamb_fp32_bs32_gpu32_mpirun_tagged.log").read_text()
    lines = text.splitlines()
    assert all(re.match(r"\w{3} \w{3} \d\d \d\d:\d\d:\d\d 2020\[1,0\]<stdout>:DLL ", l) for l in lines)
    res = _parse(BERT, text, nodes=4, gpus=8, bs=32, warmup=2, measure=44)
    assert res.status == Status.OK and res.steps_seen == 46, res.reason
    tp = [float(re.search(r"throughput_train : (\S+) seq/s", l).group(1)) for l in lines]
    assert res.throughput_speed == pytest.approx(sum(tp[1:]) / 44)  # Iteration 3..46: each covers one step
    assert res.throughput == pytest.approx(44 * 4 * 8 * 32 / (_t(lines[-1]) - _t(lines[0])))
    # the same real lines as another rank's (the tag of rank 3): not read
    other = text.replace("[1,0]<stdout>:", "[1,3]<stdout>:")
    assert _parse(BERT, other, nodes=4, gpus=8, bs=32, warmup=2, measure=44).status == Status.LAUNCH_FAILED


def test_bert_real_log_amp_repeated_iterations_skipping_lines_and_summary():
    """AMP on 1 GPU: ``Iteration: 1`` logged five times while the loss scaler falls from 2^32 (global_step does not
    move), ``Skipping time record`` lines between, no trailing space after the last value, the run summary."""
    text = (FIX / "bert_lamb_fp16_bs96_gpu1.log").read_text()
    dll = [l for l in text.splitlines() if " - Iteration: " in l]
    assert sum(" - Iteration: 1 " in l for l in dll) == 5 and not dll[0].endswith(" ")
    for lines in (lp.iter_text_lines(text), lp.read_lines(FIX / "bert_lamb_fp16_bs96_gpu1.log")):
        res = BERT.parse(lines, ParseContext(nodes=1, gpus_per_node=1, batch_size=96, warmup_steps=10,
                                             measure_steps=41))
        assert res.status == Status.OK and res.steps_seen == 51 and res.loss_finite, res.reason
        assert res.extra["reported_throughput"] == 470.244  # "DLL ... -  throughput_train : 470.244 seq/s"
        by_step = {int(re.search(r"Iteration: (\d+) ", l).group(1)): l for l in reversed(dll)}  # first line of each
        tp = [float(re.search(r"throughput_train : (\S+) seq/s", by_step[s]).group(1)) for s in range(11, 52)]
        assert res.throughput_speed == pytest.approx(sum(tp) / 41)
        assert res.throughput == pytest.approx(41 * 96 / (_t(by_step[51]) - _t(by_step[10])))


def test_horovodrun_tag_output_empty_chunk_after_a_record():
    """A real horovodrun launch (SOURCE.md): OpenMPI's --tag-output, and its empty tagged chunk glued after some
    records (``... total_ips : 157.62430710836355 [1,0]<stdout>:``); rank 1's line is not a step."""
    text = (HOROVOD / "horovodrun_tag_output_2x1_tiny.log").read_text()
    assert re.search(r"total_ips : [\d.]+ \[1,0\]<stdout>:$", text, re.M)
    ips = {int(s): float(v) for s, v in re.findall(r"\(0, (\d+)\) total_ips : ([\d.]+)", text)}
    for lines in (lp.iter_text_lines(text), lp.read_lines(HOROVOD / "horovodrun_tag_output_2x1_tiny.log")):
        res = RN50.parse(lines, ParseContext(nodes=2, gpus_per_node=1, batch_size=2, warmup_steps=2,
                                             measure_steps=6))  # main.py --warmup_steps=1 --num_iter=8
        assert res.status == Status.OK and res.steps_seen == 8 and res.extra["ranks_seen"] == 2, res.reason
        assert res.throughput_speed == pytest.approx(sum(ips[i] for i in range(2, 8)) / 6)
        assert res.extra["reported_throughput"] == 141.3887676516331 and res.extra["parameters"]["batch_size"] == "2"


def test_a_record_cut_by_buffering_is_glued_back():
    """Real lines cut inside the figure the window reads; the tail arrives on the next line."""
    rn = (FIX / "convnets_training_benchmark_gpu1_fp32_bs128.log").read_text()
    at = rn.index("(0, 350) total_ips : 4") + len("(0, 350) total_ips : 4")
    bert = (FIX / "bert_lamb_fp16_bs96_gpu1.log").read_text()
    bt = bert.index("Iteration: 30  throughput_train : 5") + len("Iteration: 30  throughput_train : 5")
    for suite, text, cut, ctx in ((RN50, rn, at, ParseContext(nodes=1, gpus_per_node=1, batch_size=128,
                                                              warmup_steps=200, measure_steps=300)),
                                  (BERT, bert, bt, ParseContext(nodes=1, gpus_per_node=1, batch_size=96,
                                                                warmup_steps=10, measure_steps=41))):
        whole = suite.parse(lp.iter_text_lines(text), ctx)
        split = suite.parse(lp.iter_text_lines(text[:cut] + "\n" + text[cut:]), ctx)
        assert split.status == Status.OK and "garbled_lines" not in split.extra
        assert (split.throughput, split.throughput_speed) == (whole.throughput, whole.throughput_speed)


def test_json_stream_of_the_same_records_reads_the_same():
    """dllogger's JSONStreamBackend form (``DLLL {...}``, what main.py writes to log.json and run_pretraining.py to
    --dllog_path) of the real records: the text lines rewritten through JSONStreamBackend.log's dict."""
    def jsonl(text: str, convnets: bool) -> str:
        out = []
        for line in text.splitlines():
            m = re.search(r"DLL (\S+ \S+) - (?:\(0, (\d+)\) total_ips : (\S+)|Iteration: (\d+)  throughput_train : "
                          r"(\S+) seq/s mlm_loss : \S+  nsp_loss : \S+  total_loss : (\S+))", line)
            if m:
                t = datetime.fromisoformat(m.group(1))
                step = [0, int(m.group(2))] if convnets else int(m.group(4))
                data = {"total_ips": float(m.group(3))} if convnets else {
                    "throughput_train": float(m.group(5)), "total_loss": float(m.group(6))}
                out.append("DLLL " + json.dumps(dict(timestamp=str(t.timestamp()), datetime=str(t),
                                                     elapsedtime="0", type="LOG", step=step, data=data)))
        return "\n".join(out) + "\n"
    rn = (FIX / "convnets_training_benchmark_gpu8_amp_bs256.log").read_text()
    bert = (FIX / "bert_lamb_fp16_bs96_gpu1.log").read_text()
    for suite, text, ctx, conv in ((RN50, rn, ParseContext(nodes=1, gpus_per_node=8, batch_size=256, warmup_steps=200,
                                                           measure_steps=300), True),
                                   (BERT, bert, ParseContext(nodes=1, gpus_per_node=1, batch_size=96, warmup_steps=10,
                                                             measure_steps=41), False)):
        a = suite.parse(lp.iter_text_lines(text), ctx)
        b = suite.parse(lp.iter_text_lines(jsonl(text, conv)), ctx)
        assert b.status == Status.OK and b.extra["formats"] == ["dllogger-json"]
        assert b.throughput == pytest.approx(a.throughput, rel=1e-9) and b.throughput_speed == a.throughput_speed


def test_scientific_notation_and_a_nan_loss():
    """Real BERT lines with learning rates in scientific notation (``1.4625e-05``, ``6.3750003e-06``); the same
    lines with total_loss made nan: NONFINITE."""
    text = (FIX / "bert_lamb_fp16_bs96_gpu1.log").read_text()
    assert re.search(r"learning_rate : \d\.\d+e-0\d", text)
    nan = re.sub(r"(Iteration: 4[0-9] .*total_loss : )\S+", r"\1nan", text)
    res = _parse(BERT, nan, bs=96, warmup=10, measure=41)
    assert res.status == Status.NONFINITE and "at step 40" in res.reason and res.loss_finite is False


def test_convnets_train_mode_imgs_per_sec_as_dlperf_ran_it():
    """--mode=train at fed7ba99 (what DLPerf ran): TrainingLoggingHook logs from its 0-based step 20, step
    (epoch, global_step), ``imgs_per_sec`` then the losses; no real line of it is public (SOURCE.md): the lines are
    the hook's dict through dllogger's StdOutBackend, plus the epoch summary at step (0,)."""
    lines, t = [], 1600000000.0
    for g in range(20, 120):
        ips = 360.0 + (g % 7)
        t += 128 / ips
        stamp = datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"DLL {stamp} - (0, {g}) imgs_per_sec : {ips}  cross_entropy : 6.9  l2_loss : 0.38  "
                     f"total_loss : 7.28  learning_rate : 1.25e-05 ")
    lines.append(f"DLL {stamp} - (0,) cross_entropy : 6.9  l2_loss : 0.38  total_loss : 7.28  learning_rate : 1e-05 ")
    res = _parse(RN50, "\n".join(lines))  # DLPerf's window: 20, then 100
    assert res.status == Status.OK and res.steps_seen == 120, res.reason
    assert res.throughput_speed == pytest.approx(sum(360.0 + (g % 7) for g in range(20, 120)) / 100)
    assert res.throughput == pytest.approx(100 * 128 / sum(128 / (360.0 + (g % 7)) for g in range(20, 120)))


# ------------------------------------------------------------------------------------------ launch spec

def _cell(suite: str, nodes=2, gpus=8, bs=128, precision="fp32", xla=False, launcher="mpirun", args=(), **params):
    return Cell(suite=suite, model=suite.split("/")[1], framework="ngc-tf1", nodes=nodes, gpus_per_node=gpus,
                batch_size=bs, precision=precision, xla=xla, launcher=launcher, launcher_args=tuple(args),
                params=tuple(sorted(params.items())))


MEASURE = Measure(repeats=1, warmup_steps=20, measure_steps=100)


def test_convnets_flags_for_both_checkouts():
    amp = _cell("ngc-tf1/resnet50", precision="amp", xla=True, data="dali", mode="train")
    old = RN50.program(amp, MEASURE, RN50.options)
    new = RN50.program(amp, MEASURE, dict(RN50.options, dle="master"))
    for argv in (old, new):
        assert argv[:2] == ["python3", "/workspace/rn50v15_tf/main.py"]
        assert {"--mode=train", "--iter_unit=batch", "--num_iter=120", "--warmup_steps=19", "--display_every=1",
                "--batch_size=128", "--use_xla", "--lr_init=0.256", "--data_dir=/data/tfrecords",
                "--data_idx_dir=/data/dali_idx", "--results_dir={run_dir}/results"} <= set(argv)
    assert {"--precision=fp32", "--use_tf_amp", "--use_static_loss_scaling", "--loss_scale=128", "--use_dali",
            "--use_cosine_lr"} <= set(old)
    assert {"--amp", "--static_loss_scale=128", "--dali", "--cosine_lr"} <= set(new) and "--precision=fp32" not in new
    synth = RN50.program(_cell("ngc-tf1/resnet50", nodes=1, gpus=1), MEASURE, RN50.options)
    assert not any(a.startswith(("--data_dir", "--use_xla", "--use_tf_amp", "--gpu_memory")) for a in synth)
    assert "--mode=training_benchmark" in synth and "--lr_init=0.001" in synth


def test_bert_flags_for_both_checkouts():
    fp32 = _cell("ngc-tf1/bert-base", nodes=1, gpus=1, bs=48)
    amp = _cell("ngc-tf1/bert-base", bs=64, precision="amp", xla=True)
    assert "--horovod" not in BERT.program(fp32, MEASURE, BERT.options)  # DLPerf: one GPU, no Horovod
    old = BERT.program(amp, MEASURE, BERT.options)
    assert {"--horovod", "--use_fp16", "--use_xla", "--num_train_steps=120", "--display_loss_steps=1",
            "--train_batch_size=64", "--optimizer_type=adam", "--dllog_path={run_dir}/bert_dllog.json"} <= set(old)
    master = dict(BERT.options, dle="master")  # --amp and --use_xla default to True there: always said
    assert {"--noamp", "--nouse_xla"} <= set(BERT.program(fp32, MEASURE, master))
    assert {"--amp", "--use_xla"} <= set(BERT.program(amp, MEASURE, master))
    assert BERT.option_error("dle", "20.03") and BERT.option_error("dle", "master") is None


def test_cells_horovod_cannot_run_are_dropped():
    assert "--mpi=pmix" in RN50.drop_reason(_cell("ngc-tf1/resnet50", launcher="srun"))
    assert RN50.drop_reason(_cell("ngc-tf1/resnet50", launcher="srun", args=["--mpi=pmix"])) is None
    assert "needs data_dir" in RN50.drop_reason(_cell("ngc-tf1/resnet50", mode="train", data="synthetic"))
    assert BERT.drop_reason(_cell("ngc-tf1/bert-base", launcher="torchrun")) is not None


GOLDEN_CASES = {
    "ngc_tf1_resnet50_2x8_amp_xla_mpirun": """
        suite = "ngc-tf1/resnet50"
        name = "golden"
        [axes]
        devices = ["2x8"]
        batch_size = [224]
        precision = ["amp"]
        xla = [true]
        data = ["dali"]
        mode = ["train"]
        [measure]
        repeats = 1
        [environment]
        env = { NCCL_DEBUG = "WARN" }
        """,
    "ngc_tf1_resnet50_1x8_srun_pmix_pyxis": """
        suite = "ngc-tf1/resnet50"
        name = "golden"
        [axes]
        devices = ["1x8"]
        batch_size = [256]
        precision = ["amp"]
        launcher = ["srun"]
        launcher_args = ["--mpi=pmix"]
        [options]
        dle = "master"
        workdir = "/workspace/nvidia-examples/resnet50v1.5"
        [measure]
        repeats = 1
        [environment.container]
        type = "pyxis"
        image = "nvcr.io/nvidia/tensorflow:20.03-tf1-py3"
        mounts = ["/data:/data"]
        """,
    "ngc_tf1_bert_4x8_horovodrun_apptainer": """
        suite = "ngc-tf1/bert-base"
        name = "golden"
        [axes]
        devices = ["4x8"]
        batch_size = [96]
        precision = ["amp"]
        xla = [true]
        launcher = ["horovodrun"]
        [measure]
        repeats = 1
        [environment.container]
        type = "apptainer"
        image = "/images/nvidia_bert_tf-20.03.sif"
        mounts = ["/data"]
        """,
}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(case, tmp_path, golden):
    p = tmp_path / "m.toml"
    p.write_text(textwrap.dedent(GOLDEN_CASES[case]))
    m = loader.load(p, site=False)
    (run,) = loader.runs(m, Path("logs") / m.name)
    text = render.render_run(m, run)
    golden(f"{case}", text)
    check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# --------------------------------------------------------------------- DLPerf's published tables, rebuilt

def _rn50_log(gb: int, target: float) -> str:
    """120 iterations of main.py --mode=train as DLPerf ran it (fed7ba99's TrainingLoggingHook: 100 lines, from
    0-based step 20), whose printed imgs_per_sec average to ``target`` (DLPerf's extract_tensorflow_logs.py)."""
    out, t = [], 1598000000.0
    for g in range(20, 120):
        ips = target + (0.5 if g % 2 else -0.5)
        t += gb / ips
        stamp = datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")
        out.append(f"DLL {stamp} - (0, {g}) imgs_per_sec : {ips}  cross_entropy : 6.91  l2_loss : 0.39  "
                   f"total_loss : 7.3  learning_rate : 0.001 ")
    return "\n".join(out) + "\n"


def _bert_log(gb: int, target: float) -> str:
    """120 steps of run_pretraining.py (fed7ba99: display_loss_steps 10, Iteration 1, 10, 20, ..., 120) whose
    stamps at Iteration 20 and 120 give ``target`` (DLPerf's extract_tensorflow_logs_time.py)."""
    out, t, prev = ["Skipping time record for  0  due to checkpoint-saving/warmup overhead"], 1598400000.0, 0
    for n in [1] + list(range(10, 121, 10)):
        dt = gb / target if n > 20 else 3 * gb / target
        t += (n - prev) * dt
        stamp = datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")
        out.append(f"DLL {stamp} - Iteration: {n}  throughput_train : {gb / dt:.3f} seq/s mlm_loss : 7.9000  "
                   f"nsp_loss : 0.6900  total_loss : 8.5900  avg_loss_step : 8.5900  learning_rate : 1e-06")
        prev = n
    return "\n".join(out) + "\n"


# DLPerf NVIDIADeepLearningExamples/TensorFlow/Classification/ConvNets/resnet50v1.5/README.md (fp32, bs 128) and
# .../TensorFlow/LanguageModeling/BERT/README.md (fp32, bs 48, its extractor's example output): the per-repeat
# figures its extractor printed, then the medians and speedups it published.
RN50_RUNS = {"1n1g": [362.05, 362.43, 362.28, 362.78, 362.45, 362.45],
             "1n4g": [1391.53, 1393.31, 1392.25, 1390.17, 1391.03, 1389.73],
             "1n8g": [2737.81, 2696.33, 2718.0, 2715.18, 2725.96, 2727.71],
             "2n8g": [5097.79, 5018.54, 5063.02, 5107.27, 5125.81, 5101.06],
             "4n8g": [9403.78, 9477.39, 9574.57, 9551.9, 9631.24, 9342.6]}
RN50_PUBLISHED = {"1n1g": (362.44, 1.0), "1n4g": (1391.28, 3.84), "1n8g": (2721.98, 7.51), "2n8g": (5099.42, 14.07),
                  "4n8g": (9514.64, 26.25)}
BERT_RUNS = {"1n1g": [113.4, 112.72, 112.62, 112.48, 112.5, 112.34], "1n2g": [217.34, 217.4, 217.58, 217.86, 217.92, 217.45],
             "1n4g": [436.61, 437.16, 436.38, 436.23, 436.78, 437.6], "1n8g": [869.25, 865.89, 869.02, 867.21, 868.23, 866.16],
             "2n8g": [1367.84, 1381.6, 1379.36, 1397.28, 1373.08, 1373.53],
             "4n8g": [2157.02, 2493.48, 2208.05, 2463.7, 2600.51, 2501.03]}
BERT_PUBLISHED = {"1n1g": (112.56, 1.0), "1n2g": (217.51, 1.93), "1n4g": (436.69, 3.88), "1n8g": (867.72, 7.71),
                  "2n8g": (1376.44, 12.23), "4n8g": (2478.59, 22.02)}


@pytest.mark.parametrize("suite,model,bs,runs,published,flavour", [
    ("ngc-tf1/resnet50", "r50", 128, RN50_RUNS, RN50_PUBLISHED, "speed"),
    ("ngc-tf1/bert-base", "bert", 48, BERT_RUNS, BERT_PUBLISHED, "time")])
def test_collect_gives_dlperfs_published_medians_and_speedups(tmp_path, suite, model, bs, runs, published, flavour):
    root = tmp_path / f"bz{bs}"
    for shape, values in runs.items():
        n, g = (int(x) for x in re.match(r"(\d+)n(\d+)g", shape).groups())
        (root / shape).mkdir(parents=True)
        for i, v in enumerate(values, 1):
            text = _rn50_log(n * g * bs, v) if model == "r50" else _bert_log(n * g * bs, v)
            (root / shape / f"{model}_b{bs}_fp32_{i}.log").write_text(text)
    out = tmp_path / "out"
    assert cli.main(["collect", "--from", str(root), "--suite", suite, "--out", str(out), "--no-plots", "--quiet",
                     "--jobs", "1"]) == 0
    cells = {c["shape"]: c for c in json.loads((out / f"bz{bs}.json").read_text())["cells"]}
    for shape, (median, speedup) in published.items():
        c = cells[shape]
        assert c["n_ok"] == 6 and c["published"] == flavour, c
        assert c["median"] == pytest.approx(median, abs=0.01), (shape, c["median"])
        assert c["speedup"] == pytest.approx(speedup, abs=0.01), (shape, c["speedup"])


def test_suites_command_lists_both_with_their_example_matrices(capsys):
    assert cli.main(["suites", "--json"]) == 0
    rows = {r["suite"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["ngc-tf1/resnet50"]["published"] == "speed" and rows["ngc-tf1/bert-base"]["published"] == "time"
    assert "matrices/ngc-tf1-resnet50.toml" in rows["ngc-tf1/resnet50"]["examples"]  # (and the cross-framework one)
    assert "matrices/ngc-tf1-bert.toml" in rows["ngc-tf1/bert-base"]["examples"]
    assert all(rows[s]["launchers"] == ["mpirun", "horovodrun", "srun"] for s in ("ngc-tf1/resnet50", "ngc-tf1/bert-base"))
