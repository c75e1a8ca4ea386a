"""Helper processes of ``collect``: how many CPUs the machine leaves it (:func:`free_cpus`, the one measure both
the parse pool and the writers size themselves by), a child that dies with its parent (:func:`die_with`), and
calls made while one of them runs in a forked child (:func:`run_all`, :func:`beside`)."""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class ChildDied(RuntimeError):
    """The forked child ended without an answer (killed: by the kernel's OOM killer, a signal)."""


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


def die_with(parent: int) -> None:
    """In a forked child: be killed when ``parent`` dies (Linux's PR_SET_PDEATHSIG), and end now if it already
    has. A ``collect`` killed by SIGKILL or SIGTERM left its parse workers waiting on their queue for ever, and a
    writer that outlived it could put an old summary over the next collect's."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)


def beside(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``fn(*args)`` in a forked child (it sees the caller's memory as it is now: nothing is pickled on the
    way in; it dies with the caller) and return ``join``: it waits for the child and returns ``fn``'s result, or
    raises its exception (the child's traceback added as a note; one that cannot travel as a RuntimeError with its
    words), or :class:`ChildDied`. An OSError from the fork itself (the user's process limit, memory) is raised
    here."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    parent = os.getpid()

    def child() -> None:
        die_with(parent)
        try:
            out: Any = fn(*args)
        except BaseException as err:  # noqa: BLE001 - every failure goes back to the caller, which raises it
            err.add_note("in a writer process:\n" + "".join(traceback.format_exception(err)).rstrip())
            out = err
        try:
            data = pickle.dumps(out)
            pickle.loads(data)  # an exception whose class needs other arguments pickles but does not load
        except Exception as err:  # noqa: BLE001 - an answer that cannot travel: its words still go back
            data = pickle.dumps(RuntimeError(f"{type(out).__name__}: {out} (cannot be passed back: {err})"))
        with contextlib.suppress(OSError):  # the caller is gone: no one to answer, nothing to print
            send.send_bytes(data)

    proc = ctx.Process(target=child, daemon=True)
    try:
        proc.start()
    except BaseException:
        recv.close()
        send.close()
        raise
    send.close()

    def join() -> Any:
        try:
            out = pickle.loads(recv.recv_bytes())
        except EOFError:
            proc.join()
            raise ChildDied(f"a writer process died (exit code {proc.exitcode})") from None
        finally:
            recv.close()
            proc.join()
        if isinstance(out, BaseException):
            raise out
        return out

    return join


def run_all(calls: Mapping[str, Callable[[], T]], aside: str | None = None) -> dict[str, T]:
    """Each call's result by name, the calls made in this process in order, but ``aside``'s (when given) made by
    a forked child meanwhile (:func:`beside`). Where the fork fails or the child dies, this process makes that
    call too; where a call here fails, the child is waited for and this process's failure is the one raised."""
    join = None
    if aside is not None:
        with contextlib.suppress(OSError):
            join = beside(calls[aside])
    out: dict[str, T] = {}
    try:
        for name, call in calls.items():
            if name != aside or join is None:
                out[name] = call()
    except BaseException:
        if join is not None:
            with contextlib.suppress(BaseException):
                join()
        raise
    if join is not None:
        try:
            out[aside] = join()  # type: ignore[index]
        except ChildDied:
            out[aside] = calls[aside]()  # type: ignore[index]
    return out
