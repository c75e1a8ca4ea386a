"""Helper processes of ``collect``: how many CPUs the machine leaves it (:func:`free_cpus`, the one measure both
the parse pool and the writers size themselves by) and a function run in a forked child beside the caller's own
work (:func:`beside`)."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any


def free_cpus() -> float:
    """The CPUs this process may use (its affinity) that the machine's load leaves free, the load average counting
    this process itself; at least 0."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        return max(0.0, cpus - max(0.0, os.getloadavg()[0] - 1.0))
    except OSError:
        return float(cpus)


def can_fork() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def beside(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``fn(*args)`` in a forked child (it sees the caller's memory as it is now: nothing is pickled on the
    way in) and return ``join``: it waits for the child and returns ``fn``'s result, or raises its exception (the
    child's traceback added as a note), or a RuntimeError naming the exit code of a child that died."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            out: Any = fn(*args)
        except BaseException as err:  # noqa: BLE001 - every failure goes back to the caller, which raises it
            err.add_note("in a writer process:\n" + "".join(traceback.format_exception(err)).rstrip())
            out = err
        try:
            send.send(out)
        except OSError:  # the caller is gone (killed): no one to answer, nothing to print
            return
        except Exception as err:  # noqa: BLE001 - an answer that cannot be pickled: its words still go back
            with contextlib.suppress(OSError):
                send.send(RuntimeError(f"{type(out).__name__}: {out} (not picklable: {err})"))

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    send.close()

    def join() -> Any:
        try:
            out = recv.recv()
        except EOFError:
            proc.join()
            raise RuntimeError(f"a writer process died (exit code {proc.exitcode})") from None
        finally:
            recv.close()
        proc.join()
        if isinstance(out, BaseException):
            raise out
        return out

    return join
