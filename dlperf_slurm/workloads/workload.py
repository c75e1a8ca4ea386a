"""Model, synthetic data and one training step for each built-in workload (torch is imported here)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from . import bert as bert_mod
from . import digits as digits_mod
from . import flops
from .resnet import resnet50
from dlperf_slurm.words import plural

MODELS = ("resnet50", "bert-base")
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
_IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
_IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

Batch = Any


@dataclass
class WorkloadConfig:
    model: str
    tiny: bool
    batch_size: int
    precision: str
    device: torch.device
    channels_last: bool
    data_location: str  # "device" | "host"
    workers: int
    seed: int
    total_steps: int
    image_size: int | None = None  # ResNet; default 224 (tiny 32)
    num_classes: int | None = None  # ResNet's classifier width; default 1000 (tiny 10)
    seq_len: int | None = None  # BERT; default 128 (tiny 32)
    lr: float | None = None
    world_size: int = 1
    dataset: str = "synthetic"  # "digits": scikit-learn's digits (accuracy runs; ResNet-50 only)
    rank: int = 0


@dataclass(kw_only=True)
class Workload:
    """A model ready to train (not yet DDP-wrapped), its optimizer and a way to get batches and compute the loss."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    next_batch: Callable[[], Batch]
    loss_of: Callable[[nn.Module, Batch], torch.Tensor]
    flops_per_sample: int
    params: int
    details: dict[str, Any] = field(default_factory=dict)  # model config for the header
    grad_clip: float | None = None
    dense_dtype: torch.dtype | None = None  # explicit fp16/bf16: the model's dtype
    # a real dataset (accuracy runs): top-1, top-5 and samples on its held-out set, and steps per epoch per rank
    evaluate: Callable[[nn.Module], tuple[float, float, int]] | None = None
    steps_per_epoch: int | None = None


def amp_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """autocast dtype: amp = fp16 on GPU, bf16 on CPU (CPU autocast has no fp16 GradScaler path)."""
    if precision != "amp":
        return None
    return torch.float16 if device.type == "cuda" else torch.bfloat16


def _explicit_dtype(precision: str) -> torch.dtype | None:
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)


def _to_dtype_keep_bn(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Explicit half precision: everything in ``dtype`` except BatchNorm, kept fp32 (cuDNN's mixed BN)."""
    model.to(dtype)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.float()
    return model


def _loader(dataset: torch.utils.data.Dataset, cfg: WorkloadConfig) -> Iterator[Batch]:
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=cfg.batch_size, shuffle=False, drop_last=True, num_workers=cfg.workers,
        pin_memory=cfg.device.type == "cuda", persistent_workers=cfg.workers > 0,
    )
    while True:
        yield from loader


class _ImagePool(torch.utils.data.Dataset):
    """Host-side synthetic ImageNet: uint8 CHW images from a small pool, as a JPEG decoder would deliver."""

    def __init__(self, length: int, size: int, classes: int, seed: int, pool: int = 32) -> None:
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (pool, 3, size, size), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, classes, (pool,), generator=g)
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = i % len(self.images)
        return self.images[j], self.labels[j]


def _bert_sample(g: torch.Generator, n: int, seq: int, preds: int, vocab: int) -> dict[str, torch.Tensor]:
    """``n`` synthetic pre-training sequences, made on ``g``'s device: full length (no padding), ``preds`` distinct
    masked positions each (never position 0, the [CLS] token)."""
    dev = g.device
    token_type = torch.zeros(n, seq, dtype=torch.long, device=dev)
    token_type[:, seq // 2:] = 1
    return {
        "input_ids": torch.randint(0, vocab, (n, seq), generator=g, device=dev),
        "token_type_ids": token_type,
        "masked_positions": torch.rand(n, seq - 1, generator=g, device=dev).argsort(dim=1)[:, :preds] + 1,
        "mlm_labels": torch.randint(0, vocab, (n, preds), generator=g, device=dev),
        "nsp_labels": torch.randint(0, 2, (n,), generator=g, device=dev),
    }


def max_predictions(seq: int) -> int:
    """Masked positions per sequence: BERT's 20 at 128 and 80 at 512, else ceil(15 %)."""
    return {128: 20, 512: 80}.get(seq, max(1, -(-15 * seq // 100)))


class _BertSamples(torch.utils.data.Dataset):
    def __init__(self, length: int, seq: int, preds: int, vocab: int, seed: int) -> None:
        self.length, self.seq, self.preds, self.vocab, self.seed = length, seq, preds, vocab, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        return {k: v[0] for k, v in _bert_sample(g, 1, self.seq, self.preds, self.vocab).items()}


def build_resnet50(cfg: WorkloadConfig) -> Workload:
    classes, width = (10, 16) if cfg.tiny else (1000, 64)
    classes = cfg.num_classes or classes
    if cfg.dataset == "digits":
        classes = digits_mod.CLASSES
    size = cfg.image_size or (32 if cfg.tiny else 224)
    dev, fmt = cfg.device, (torch.channels_last if cfg.channels_last else torch.contiguous_format)
    dtype = _explicit_dtype(cfg.precision)
    model = resnet50(classes, width)
    params = sum(p.numel() for p in model.parameters())
    fwd = flops.forward_flops(model, (torch.zeros(1, 3, size, size),))
    if dtype is not None:
        _to_dtype_keep_bn(model, dtype)
    model.to(device=dev, memory_format=fmt)
    in_dtype = dtype or torch.float32
    lr = cfg.lr if cfg.lr is not None else 0.256 * cfg.batch_size * cfg.world_size / 256  # NVIDIA's RN50 recipe
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.875, weight_decay=3.0517578125e-05)

    evaluate, per_epoch = None, None
    if cfg.dataset == "digits":  # a real dataset: real batches, a held-out set to evaluate on
        data = digits_mod.load(size)
        per_epoch = digits_mod.steps_per_epoch(len(data.train_y), cfg.batch_size, cfg.world_size)
        if per_epoch < 1:
            raise ValueError(f"digits: {len(data.train_y)} training images cannot give "
                             f"{plural(cfg.world_size, 'rank')} a batch of {cfg.batch_size} each; lower the batch size")
        it_d = digits_mod.batches(data, cfg.batch_size, cfg.rank, cfg.world_size, cfg.seed - cfg.rank)

        def next_batch() -> Batch:
            img, lab = next(it_d)
            return img.to(dev).to(in_dtype).contiguous(memory_format=fmt), lab.to(dev)

        def evaluate(m: nn.Module) -> tuple[float, float, int]:
            return digits_mod.evaluate(m, data, dev)
    elif cfg.data_location == "device":  # one fixed batch made on the device, like tf_cnn --fake-location gpu
        g = torch.Generator(device=dev).manual_seed(cfg.seed)
        images = torch.randn(cfg.batch_size, 3, size, size, device=dev, generator=g).to(in_dtype)
        images = images.contiguous(memory_format=fmt)
        labels = torch.randint(0, classes, (cfg.batch_size,), device=dev, generator=g)

        def next_batch() -> Batch:
            return images, labels
    else:
        it = _loader(_ImagePool(cfg.batch_size * cfg.total_steps, size, classes, cfg.seed), cfg)
        mean = torch.tensor(_IMAGENET_MEAN, device=dev).view(1, 3, 1, 1)
        std = torch.tensor(_IMAGENET_STD, device=dev).view(1, 3, 1, 1)

        def next_batch() -> Batch:
            img, lab = next(it)
            img = img.to(dev, non_blocking=True).float().sub_(mean).div_(std)
            return img.to(in_dtype).contiguous(memory_format=fmt), lab.to(dev, non_blocking=True)

    def loss_of(m: nn.Module, batch: Batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(m(x).float(), y, label_smoothing=0.1)

    return Workload(model=model, optimizer=optimizer, next_batch=next_batch, loss_of=loss_of,
                    flops_per_sample=flops.TRAIN_FACTOR * fwd, params=params,
                    details={"image_size": size, "num_classes": classes, "base_width": width, "layers": [3, 4, 6, 3],
                     "optimizer": "SGD(momentum=0.875)", "label_smoothing": 0.1, "dataset": cfg.dataset},
                    dense_dtype=dtype, evaluate=evaluate, steps_per_epoch=per_epoch)


def build_bert_base(cfg: WorkloadConfig) -> Workload:
    bcfg = bert_mod.BERT_TINY if cfg.tiny else bert_mod.BERT_BASE
    seq = cfg.seq_len or (32 if cfg.tiny else 128)
    if seq > bcfg.max_position_embeddings:
        raise ValueError(f"--seq-len {seq} exceeds max positions {bcfg.max_position_embeddings}")
    preds = max_predictions(seq)
    dev, dtype = cfg.device, _explicit_dtype(cfg.precision)
    model = bert_mod.BertForPreTraining(bcfg)
    params = sum(p.numel() for p in model.parameters())
    ids = torch.zeros(1, seq, dtype=torch.long)
    fwd = flops.forward_flops(model, (ids, ids, torch.zeros(1, preds, dtype=torch.long)))
    if dtype is not None:
        model.to(dtype)
    model.to(dev)
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr if cfg.lr is not None else 1e-4, eps=1e-6, fused=dev.type == "cuda" or None,
    )

    if cfg.data_location == "device":
        g = torch.Generator(device=dev).manual_seed(cfg.seed)
        fixed = _bert_sample(g, cfg.batch_size, seq, preds, bcfg.vocab_size)

        def next_batch() -> Batch:
            return fixed
    else:
        it = _loader(_BertSamples(cfg.batch_size * cfg.total_steps, seq, preds, bcfg.vocab_size, cfg.seed), cfg)

        def next_batch() -> Batch:
            return {k: v.to(dev, non_blocking=True) for k, v in next(it).items()}

    def loss_of(m: nn.Module, b: Batch) -> torch.Tensor:
        mlm, nsp = m(b["input_ids"], b["token_type_ids"], b["masked_positions"])
        return bert_mod.pretraining_loss(mlm, nsp, b["mlm_labels"], b["nsp_labels"])

    details = {**bcfg.as_dict(), "seq_len": seq, "max_predictions_per_seq": preds,
               "optimizer": "AdamW(wd=0.01)", "grad_clip": 1.0}
    return Workload(model=model, optimizer=optimizer, next_batch=next_batch, loss_of=loss_of,
                    flops_per_sample=flops.TRAIN_FACTOR * fwd, params=params, details=details,
                    grad_clip=1.0, dense_dtype=dtype)


def build(cfg: WorkloadConfig) -> Workload:
    if cfg.model == "resnet50":
        return build_resnet50(cfg)
    if cfg.model == "bert-base":
        return build_bert_base(cfg)
    raise ValueError(f"unknown model {cfg.model!r}; choose from {MODELS}")


class Fp16LossScaler:
    """Dynamic loss scaling for explicit fp16 weights (torch's GradScaler refuses fp16 gradients): on an
    overflow the step is skipped and the scale halved; after ``growth_interval`` good steps it doubles."""

    def __init__(self, init_scale: float = 2.0**7, growth_interval: int = 1000) -> None:
        self.scale, self.growth_interval, self.good_steps, self.skipped = init_scale, growth_interval, 0, 0

    def unscale_and_check(self, params: list[torch.Tensor]) -> bool:
        """Divide the gradients by the scale in place; True when all are finite (the step may be taken)."""
        grads = [p.grad for p in params if p.grad is not None]
        found_inf = torch.zeros(1, device=grads[0].device)
        inv = torch.full((1,), 1.0 / self.scale, device=grads[0].device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv)
        if found_inf.item():
            self.scale, self.good_steps, self.skipped = self.scale / 2, 0, self.skipped + 1
            return False
        self.good_steps += 1
        if self.good_steps % self.growth_interval == 0:
            self.scale *= 2
        return True


def make_step(work: Workload, model: nn.Module, precision: str, device: torch.device,
              nan_at_step: int = 0) -> Callable[[], torch.Tensor]:
    """One training step on ``model`` (possibly DDP/compiled): batch, forward, loss, backward, optimizer step.

    amp on GPU = autocast fp16 + GradScaler; amp on CPU = autocast bf16; fp16 = fp16 weights (BatchNorm fp32)
    with dynamic loss scaling; bf16 = bf16 weights, no scaling. Gradient clipping (BERT) is on unscaled gradients.

    ``nan_at_step`` K > 0: from the K-th call on, the loss is multiplied by NaN before the backward pass, so the
    loss, the gradients and (without loss scaling, which skips such steps) the weights really are NaN: a
    deliberately non-finite run, to test the NONFINITE path end to end.
    """
    opt, clip = work.optimizer, work.grad_clip
    adt = amp_dtype(precision, device)
    scaler = torch.amp.GradScaler("cuda") if adt is torch.float16 else None
    fp16_scaler = Fp16LossScaler() if precision == "fp16" else None
    params = [p for g in opt.param_groups for p in g["params"]]
    calls = 0

    def autocast() -> contextlib.AbstractContextManager:
        return torch.autocast(device.type, dtype=adt) if adt is not None else contextlib.nullcontext()

    def step() -> torch.Tensor:
        nonlocal calls
        calls += 1
        batch = work.next_batch()
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = work.loss_of(model, batch)
        if nan_at_step and calls >= nan_at_step:
            loss = loss * float("nan")
        if scaler is not None:
            scaler.scale(loss).backward()
            if clip:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(params, clip)
            scaler.step(opt)
            scaler.update()
            return loss.detach()
        if fp16_scaler is not None:
            (loss.float() * fp16_scaler.scale).backward()
            if not fp16_scaler.unscale_and_check(params):
                return loss.detach()  # overflow: step skipped, as GradScaler does
        else:
            loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        return loss.detach()

    return step
