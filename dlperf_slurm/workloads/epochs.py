"""An accuracy run of the built-in workload (``--epochs N --dataset digits``): epochs of a real dataset, rank 0
evaluating after each and telling every rank whether the target is reached (``train.py`` calls it). The
learning rate warms up over the first epoch and decays (cosine) to 0 at the last planned one."""

from __future__ import annotations

import math
from typing import Any, Callable

from .loop import accuracy_loop


def lr_factor(warmup: int, total: int) -> Callable[[int], float]:
    """The learning rate's factor after ``k`` steps: linear warm-up over ``warmup`` steps (the first epoch: Goyal
    et al.'s recipe for a large global batch), then a cosine decay to 0 at ``total``."""

    def factor(k: int) -> float:
        if k < warmup:
            return (k + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (k - warmup) / max(1, total - warmup))))

    return factor


def train_epochs(args: Any, env: Any, log: Any, rt: Any, work: Any, model: Any, step: Any, global_batch: int,
                 sync: Any, heartbeat: Any) -> tuple[Any, list]:
    """Epochs of the real dataset, rank 0 evaluating after each (the unwrapped model: every rank holds the same
    weights) and broadcasting whether the target is reached."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    bare = getattr(model, "module", model)  # DDP's (a compiled model keeps _orig_mod's weights in sync)
    bare = getattr(bare, "_orig_mod", bare)

    def agree(stop: bool) -> bool:
        if not rt.distributed:
            return stop
        flag = torch.tensor([1.0 if stop else 0.0], device=rt.device)
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    def printer(line: str) -> None:
        print(line, flush=True)

    schedule = torch.optim.lr_scheduler.LambdaLR(work.optimizer, lr_factor(work.steps_per_epoch,
                                                                          work.steps_per_epoch * args.epochs))

    def scheduled_step() -> Any:
        loss = step()
        schedule.step()
        return loss

    return accuracy_loop(scheduled_step, work.steps_per_epoch, args.epochs, global_batch, rank0=env.is_rank0, log=log,
                         evaluate=lambda: work.evaluate(bare), target=args.target_pair, agree=agree, sync=sync,
                         loss_value=lambda t: float(t.item()), tiny=args.tiny, printer=printer,
                         heartbeat=heartbeat)
