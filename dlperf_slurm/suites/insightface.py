"""``insightface``: face recognition training throughput, DLPerf's InsightFace study (reports/insightface):
``oneflow/insightface`` (oneflow_face) and ``mxnet/insightface`` (deepinsight/insightface, MXNet).

Axes: ``network`` (``r100``: ResNet-100; ``y1``: fmobilefacenet), ``parallel`` (``data``, ``model``: the FC layer
split over the GPUs, ``partial_fc``: model parallel with a sampled FC), ``num_classes`` (the FC width: DLPerf's "Max
num_classes" table is the largest that trains) and ``sample_ratio`` (partial FC). Figure: samples/s; published
flavour: speed (DLPerf's extractors average the printed speeds).

Programs, with DLPerf's flags:
- ``oneflow/insightface``: oneflow_face ``insightface_train.py`` (deepinsight/insightface 79aacd2,
  recognition/oneflow_face; Oneflow-Inc/oneflow_face), one process per node driving its GPUs
  (``--device_num_per_node``).
- ``mxnet/insightface``: ArcFace ``train.py`` (data parallel) / ``train_parall.py`` (model parallel), one process
  per node over ``CUDA_VISIBLE_DEVICES`` (Slurm sets it), and Partial FC ``train_memory.py`` under ``horovodrun``
  (one rank per GPU).
The settings DLPerf changed with ``sed`` in the programs' ``config.py`` (num_classes, data parts, max_steps, the
nodes' addresses) are set by ``python -m dlperf_slurm.workloads.pyconfig`` before the script runs: no file is edited.

Launch across nodes:
- oneflow_face: the ``node_ips`` launcher, on one node too (its only launcher): one process per node, the nodes'
  addresses from the allocation. insightface_train.py cannot take them as the launcher gives them: its
  ``--node_ips`` type (``str2list``) ``eval``s each address (a SyntaxError) and its strict ``parse_args`` rejects
  ``--ctrl_port`` (the port is fixed in the program, ``flow.env.ctrl_port(12138)``: two such jobs must not share a
  node, hence ``exclusive``). So pyconfig takes ``--node_ips`` off the command line into ``default.node_ips`` (what
  DLPerf's run_multi_nodes.sh wrote into sample_config.py) and drops ``--ctrl_port``. ``--models_root`` gets a
  ``node<N>`` folder per node: the program asserts its models root is empty, and the nodes share the run's folder.
- ArcFace MXNet ``train.py``: the ``dmlc`` launcher (MXNet's kvstore over ps-lite: one worker per node, scheduler
  and server on the first node) with ``--kvstore dist_device_sync`` (option ``kvstore``; the program's default
  ``device`` is one node's); every worker prints its own node's Speedometer line, the first node's are read
  (x nodes, as DLPerf's extractor). ``train_parall.py`` stays on one node: with ``DMLC_NUM_WORKER`` > 1 it imports
  ``parall_module_dist``, which deepinsight/insightface never shipped (DLPerf's ArcFace README: no multi-node code
  upstream, one node tested). One node runs under ``tf_config`` (a plain process per node; the TF_CONFIG it exports
  is ignored), as DLPerf ran it with the ``device`` kvstore. Partial FC runs anywhere ``horovodrun`` does.

Validation (lfw / cfp_fp / agedb_30) runs inside training and prints between two speed lines; the speed line after
it covers the validation's time too. Such an interval is left out whole (its steps and its seconds), and the
later steps are renumbered (``extra.dropped_steps``); its printed speed is not averaged either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.parsing import evals as lp_evals
from dlperf_slurm.suites import RUN_DIR, Suite, register
from dlperf_slurm.suites.wdl import Gaps

PYCONFIG = "dlperf_slurm.workloads.pyconfig"


class _Face(Suite):
    model = "insightface"
    sample_unit = "samples/s"
    published = "speed"
    axes = {"network": ("r100", "y1"), "parallel": ("data", "model", "partial_fc"), "num_classes": (),
            "sample_ratio": ()}
    axis_defaults = {"network": "r100", "parallel": "model", "num_classes": 85744, "sample_ratio": 0.1}

    def drop_reason(self, cell):
        why = super().drop_reason(cell)
        if why:
            return why
        n = cell.param("num_classes", self.axis_defaults["num_classes"])
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            return f"{self.name}: num_classes must be an integer >= 2, got {n!r}"
        r = cell.param("sample_ratio", self.axis_defaults["sample_ratio"])
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r <= 1:
            return f"{self.name}: sample_ratio must be in (0, 1], got {r!r}"
        return None

    def config_args(self, cell, options, extra: list[str], args: tuple[str, ...] = ()) -> list[str]:
        """``python -m pyconfig --module M --set ... [args] --``: num_classes and ``extra`` set in the config,
        ``args`` pyconfig's own (what it does to the script's command line)."""
        ds = options["dataset"]
        n = int(cell.param("num_classes", self.axis_defaults["num_classes"]))
        sets = [f"dataset.{ds}.num_classes={n}"]
        sets += extra
        argv = [options["python"], "-m", PYCONFIG, "--module", options["config_module"]]
        for s in sets:
            argv += ["--set", s]
        return argv + list(args) + ["--"]

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse(lines, ctx, self.evaluations)


@register
class OneFlowFace(_Face):
    framework = "oneflow"
    imports = ("oneflow",)
    description = ("oneflow_face insightface_train.py (ArcFace r100 / y1 = fmobilefacenet; data, model parallel, "
                   "partial FC), DLPerf's flags; one process per node (node_ips)")
    launcher = "node_ips"
    launchers = ("node_ips",)
    precisions = ("fp32", "amp")
    options = {"python": "python3", "workdir": "/workspace/oneflow_face", "script": "insightface_train.py",
               "config_module": "config", "dataset": "emore", "loss": "arcface", "train_data_part_num": 32,
               "synthetic": False}
    option_minimum = {"train_data_part_num": (1, "the OFRecord part files the reader splits over its ranks")}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        par = cell.param("parallel", "model")
        g = cell.gpus_per_node
        parts = options["train_data_part_num"] if g > 1 else 1  # DLPerf's train_insightface.sh
        # the node_ips launcher's --node_ips into the config (the flag's own type cannot read addresses), its
        # --ctrl_port off the command line (strict parse_args; the port is fixed at 12138), a models root per node
        argv = self.config_args(cell, options, [f"dataset.{options['dataset']}.train_data_part_num={parts}"],
                                ("--list-arg", "node_ips=default.node_ips", "--drop-arg", "ctrl_port",
                                 "--per-node", "models_root"))
        return argv + [
            f"{options['workdir']}/{options['script']}", f"--network={cell.param('network', 'r100')}",
            f"--dataset={options['dataset']}", f"--loss={options['loss']}", f"--num_nodes={cell.nodes}",
            f"--train_batch_size={cell.global_batch}", "--train_unit=batch",
            f"--train_iter={measure.warmup_steps + measure.measure_steps}", f"--device_num_per_node={g}",
            f"--model_parallel={int(par != 'data')}", f"--partial_fc={int(par == 'partial_fc')}",
            f"--sample_ratio={cell.param('sample_ratio', 0.1)}", f"--log_dir={RUN_DIR}/log",
            f"--models_root={RUN_DIR}/models", f"--use_fp16={cell.precision == 'amp'}",
            f"--use_synthetic_data={bool(options['synthetic'])}", "--iter_num_in_snapshot=5000",
            "--validation_interval=5000"]


@register
class MXNetFace(_Face):
    evaluations = ("insightface_lfw",)  # "[lfw][32500]Accuracy-Flip: 0.50750+-0.00704" (its verification)
    framework = "mxnet"
    imports = ("mxnet",)
    description = ("deepinsight/insightface MXNet: ArcFace train.py (data parallel) / train_parall.py (model "
                   "parallel), Partial FC train_memory.py (horovodrun); train.py across nodes under dmlc")
    launcher = "tf_config"
    launchers = ("tf_config", "dmlc", "horovodrun")
    precisions = ("fp32",)
    # ArcFace MXNet's config.py has emore's classes as 85742 (oneflow_face's sample_config.py: 85744)
    axis_defaults = {**_Face.axis_defaults, "num_classes": 85742}
    options = {"python": "python3", "workdir": "/workspace/insightface/recognition/arcface_mxnet",
               "partial_fc_workdir": "/workspace/insightface/recognition/partial_fc/mxnet",
               "script": "train.py", "parall_script": "train_parall.py", "config_module": "config",
               "dataset": "emore", "loss": "arcface", "frequent": 20, "kvstore": "dist_device_sync",
               "iters_per_epoch": 0}
    option_minimum = {"frequent": (1, "the batches between two of MXNet's Speedometer lines: count % frequent"),
                      "iters_per_epoch": (0, "0: unset; an accuracy run needs it")}
    # accuracy runs: ArcFace train.py / train_parall.py fit 999999 epochs and stop after config.max_steps batches,
    # verifying (lfw, cfp_fp, agedb_30: "[lfw][N]Accuracy-Flip: ...") every --verbose batches: iters_per_epoch, the
    # batches of one pass over the data set, makes max_steps = epochs x it and a verification every it; no stop at
    # a target (time to target / NOT_CONVERGED from the LFW lines)
    accuracy = True

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        if not options["iters_per_epoch"]:
            return "options.iters_per_epoch", ("set it to the batches of one pass over the data set (train.py "
                                               "counts batches: max_steps = epochs x it, a verification every it)")
        if cell.param("parallel", "model") == "partial_fc":
            return "axes.parallel", "Partial FC's train_memory.py has no accuracy runs here: data or model"
        return None

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "kvstore" and not str(value).startswith("dist_"):
            return "the dmlc launcher's workers meet in a dist kvstore (dist_device_sync, dist_sync, ...)"
        return None

    def drop_reason(self, cell):
        par = cell.param("parallel", "model")
        pfc = par == "partial_fc"
        if pfc and cell.launcher != "horovodrun":
            return f"{self.name}: partial_fc runs train_memory.py under horovodrun (launcher = \"horovodrun\")"
        if not pfc and cell.launcher == "horovodrun":
            return f"{self.name}: ArcFace train.py / train_parall.py start one process per node, not per GPU"
        if par == "model" and (cell.nodes > 1 or cell.launcher == "dmlc"):
            return (f"{self.name}: train_parall.py (model parallel) runs on one node, under tf_config: with "
                    "DMLC_NUM_WORKER > 1 it imports parall_module_dist, which deepinsight/insightface never shipped")
        if not pfc and cell.nodes > 1 and cell.launcher != "dmlc":
            return (f"{self.name}: train.py across nodes joins through MXNet's kvstore: launcher = \"dmlc\" "
                    "(one worker per node, --kvstore dist_device_sync)")
        return super().drop_reason(cell)

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        par = cell.param("parallel", "model")
        net, steps = cell.param("network", "r100"), measure.warmup_steps + measure.measure_steps
        if par == "partial_fc":  # DLPerf's PartailFC/run_test.sh: train_memory.py, sample_ratio in default.py
            # generate_config writes its dataset preset over config: the changes are applied after it
            n = int(cell.param("num_classes", self.axis_defaults["num_classes"]))
            return [options["python"], "-m", PYCONFIG, "--module", "default", "--after", "generate_config",
                    "--set", f"config.num_classes={n}",
                    "--set", f"config.sample_ratio={cell.param('sample_ratio', 0.1)}",
                    "--set", f"config.batch_size={cell.batch_size}", "--set", f"config.max_update={steps}", "--",
                    f"{options['partial_fc_workdir']}/train_memory.py", f"--dataset={options['dataset']}",
                    f"--network={net}", f"--loss={options['loss']}", f"--models-root={RUN_DIR}/models"]
        script = options["parall_script"] if par == "model" else options["script"]
        verbose = []  # a throughput run keeps the program's verification interval (2000; DLPerf's runs: fewer steps)
        if measure.accuracy:
            steps, verbose = measure.epochs * options["iters_per_epoch"], ["--verbose", str(options["iters_per_epoch"])]
        dmlc = cell.launcher == "dmlc"  # train.py, a worker per node: a models root each (shared run folder)
        argv = self.config_args(cell, options, [f"config.max_steps={steps}"],
                                ("--per-node", "models-root") if dmlc else ())
        argv += [f"{options['workdir']}/{script}", "--network", net, "--loss", options["loss"],
                 "--dataset", options["dataset"], "--per-batch-size", str(cell.batch_size),
                 "--frequent", str(options["frequent"]), "--models-root", f"{RUN_DIR}/models", *verbose]
        return argv + (["--kvstore", str(options["kvstore"])] if dmlc else [])

    def environment(self, cell, options):
        if cell.param("parallel", "model") != "partial_fc":
            return {}
        # DLPerf's PartailFC scripts
        return {"HOROVOD_GPU_ALLREDUCE": "NCCL", "HOROVOD_GPU_ALLGATHER": "NCCL", "HOROVOD_CACHE_CAPACITY": "1024",
                "MXNET_CPU_WORKER_NTHREADS": "3", "OMP_NUM_THREADS": "2", "MXNET_USE_OPERATOR_TUNING": "1",
                "MXNET_CUDNN_AUTOTUNE_DEFAULT": "1"}


# ----------------------------------------------------------------------------------------------- parsing
# Speed records (each the end of an interval of logged steps), as the programs print them:
#   oneflow_face insightface_train.py  train: iter 19, loss 16.53, throughput: 1935.417   (step index from 0; global)
#   oneflow_face train.py / arcface_torch   Training: 2021-05-12 00:00:42,110-Speed 884.42 samples/sec   Loss 47.2532 ...  # noqa: E501
#                                          Epoch: 0   Global Step: 100   (global samples/s)
#   ArcFace MXNet (Speedometer)        INFO:root:Epoch[0] Batch [32400-32420]\tSpeed: 224.07 samples/sec\tacc=...
#                                      (or Batch [4900]; samples/s of this process, i.e. of its node: x nodes)
#   Partial FC MXNet                   rank-id:0:2021-01-08 19:22:59,208-Iter:460 Rank:207.42 it/sec Total:1659.38
#                                      it/sec [0][loss]:0.01   ("it/sec" are samples/s; Total is global)
# Validation between two records: "testing verification..", "[lfw][32500]XNorm: ...", "[cfp_fp][..]Accuracy-Flip:
# ...", "[32500]Accuracy-Highest: ...", oneflow_face's "Validation on [lfw]:" / "validation: time: ...".
# Clock: each interval's seconds = its samples / its printed global speed, summed over the clean intervals.

_OF_LEGACY = re.compile(r"train: iter (\d+), loss:? (" + lp.NUM + r"), throughput: (" + lp.NUM + r")")
_OF_NEW = re.compile(r"Speed (" + lp.NUM + r") samples/sec\s+Loss (" + lp.NUM + r").*?Global Step: (\d+)")
_MX = re.compile(r"Epoch\[(\d+)\] Batch \[(?:(\d+)-)?(\d+)\]\s+Speed: (" + lp.NUM + r") samples/sec"
                 r"(?:.*?lossvalue=(" + lp.NUM + r"))?")
_PFC = re.compile(r"Iter:(\d+) Rank:(" + lp.NUM + r") it/sec Total:(" + lp.NUM + r") it/sec"
                  r"(?: \[\d+\]\[loss\]:(" + lp.NUM + r"))?")
_VALIDATION = ("testing verification", "XNorm", "Accuracy-Flip", "Accuracy-Highest", "Validation on [",
               "validation: time")


def _wanted(text: str) -> bool:
    return ("throughput" in text or "samples/sec" in text or "it/sec" in text
            or any(v in text for v in _VALIDATION))


@dataclass(slots=True)
class _State:
    """What a parse learns beside its window, and its line handler (:meth:`handler`)."""

    window: lp.Window
    evals: lp_evals.Reader
    gaps: Gaps
    gb: float  # the global batch
    nodes: int
    prev: int = 0  # the highest step recorded
    clock: float = 0.0  # seconds of the recorded intervals, summed
    forms: set[str] = field(default_factory=set)  # the line formats read
    validations: int = 0  # validation blocks read between two records
    tainted: bool = False  # a validation since the last record: the next interval's speed is not the training's
    epoch: int | None = None  # ArcFace MXNet's last Epoch[n]
    offset: int = 0  # ... and the steps of its epochs before it (its Batch counter restarts each epoch)

    def record(self, step: int, speed: float | None, loss: float | None, form: str, span: int | None = None) -> None:
        self.forms.add(form)
        width = span if span is not None else step - self.prev
        self.prev = max(self.prev, step)
        if speed is None or not speed > 0 or width <= 0:
            self.window.add(step, None, loss=loss)
            return
        self.clock += width * self.gb / speed
        tainted = self.tainted
        self.tainted = False
        s, t = self.gaps.point(step, self.clock)
        self.window.add(s, t, loss=loss, speed=None if tainted else speed, span_from=s - width, span_seconds=None)

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if any(v in text for v in _VALIDATION):
            self.evals.read(text)  # LFW's accuracy: the run's (the other sets' and the interval's time are not)
            if not self.tainted:
                self.validations += 1
            self.tainted = True
            self.gaps.drop()
            return lp.CONSUMED
        if not final and text.endswith(tuple("0123456789")) and "Global Step" not in text:
            if _OF_LEGACY.search(text) or _PFC.search(text) or _MX.search(text):
                return lp.FRAGMENT
        if (m := _OF_LEGACY.search(text)) is not None:
            self.record(int(m.group(1)) + 1, lp.to_float(m.group(3)), lp.to_float(m.group(2)), "oneflow_face")
        elif (m := _OF_NEW.search(text)) is not None:
            self.record(int(m.group(3)), lp.to_float(m.group(1)), lp.to_float(m.group(2)), "oneflow_face-2021")
        elif (m := _PFC.search(text)) is not None:
            self.record(int(m.group(1)), lp.to_float(m.group(3)), lp.to_float(m.group(4)) if m.group(4) else None,
                        "partial_fc")
        elif (m := _MX.search(text)) is not None:
            epoch, end = int(m.group(1)), int(m.group(3))
            if self.epoch is not None and epoch > self.epoch:
                self.offset = self.prev
            self.epoch = epoch
            v = lp.to_float(m.group(4))
            span = end - int(m.group(2)) if m.group(2) is not None else None
            self.record(self.offset + end, v * self.nodes if v is not None else None,
                        lp.to_float(m.group(5)) if m.group(5) else None, "arcface-mxnet", span)
        else:
            return lp.NOT_MINE
        return lp.CONSUMED


def _parse(lines: Iterable[str], ctx: ParseContext, evaluations: tuple[str, ...] = ()) -> RunResult:
    gb = float(ctx.global_batch)
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), lp_evals.Reader(evaluations), Gaps(), gb, ctx.nodes)
    facts = lp.Scanner(st.handler, starts=_wanted, wanted=_wanted, block_needles=(
        "throughput", "samples/sec", "it/sec", *_VALIDATION)).run(lines)
    extra: dict[str, Any] = {**st.evals.extra(), "formats": sorted(st.forms),
                             "clock": "each interval's samples / its printed global samples/s, summed"}
    if st.validations:
        extra["validations"] = st.validations
    if st.gaps.steps:
        extra["dropped_steps"], extra["dropped_seconds"] = st.gaps.steps, st.gaps.seconds
    return lp.finish(st.window, facts, ctx, global_batch=gb, extra=extra,
                     no_memory_reason="the InsightFace programs' logs report no GPU memory")
