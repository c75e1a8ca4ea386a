"""The matrix's ``[measure]`` table: the window, the repeats, the hang bound and the mode (``"accuracy"``: epochs
and an optional target, for the suites whose program can train to an accuracy), validated with the file, key and
line of a bad value (a helper of :mod:`dlperf_slurm.matrix.loader`)."""

from __future__ import annotations

from typing import Any

from dlperf_slurm import suites
from dlperf_slurm.matrix import axes
from dlperf_slurm.matrix.toml_source import Source, check_keys, did_you_mean
from dlperf_slurm.model.cell import METRICS, MODES, Measure, Target
from dlperf_slurm.words import noun, plural

MEASURE_KEYS = {"repeats": Measure.repeats, "warmup_steps": Measure.warmup_steps,
                "measure_steps": Measure.measure_steps, "hang_timeout": Measure.hang_timeout,
                "hang_factor": Measure.hang_factor, "hang_min": Measure.hang_min}
ACCURACY_KEYS = ("mode", "epochs", "target")  # [measure] of an accuracy run (Measure.mode)
_MEASURE_MIN = {"warmup_steps": 0, "hang_timeout": 0}  # the others are at least 1
_MEASURE_MAX = {"repeats": axes.MAX_REPEATS}


def int_value(ctx: Source, key: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer in [minimum, maximum], or the one-line error naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.error(key, f"expected an integer, got {value!r}")
    if value < minimum:
        raise ctx.error(key, f"expected an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ctx.error(key, f"at most {maximum:,}, got {value:,}")
    return value


def measure(ctx: Source, table: Any, suite_list: list["suites.Suite"] | None = None) -> Measure:
    if not isinstance(table, dict):
        raise ctx.error("measure", "expected a table")
    check_keys(ctx, table, (*MEASURE_KEYS, *ACCURACY_KEYS), "measure")
    vals: dict[str, Any] = {k: int_value(ctx, f"measure.{k}", table.get(k, d), _MEASURE_MIN.get(k, 1),
                                         _MEASURE_MAX.get(k)) for k, d in MEASURE_KEYS.items()}
    mode = table.get("mode", "throughput")
    if mode not in MODES:
        raise ctx.error("measure.mode", f"expected one of {', '.join(MODES)}, got {mode!r}"
                                        f"{did_you_mean(str(mode), MODES)}")
    if mode != "accuracy":
        for k in ("epochs", "target"):
            if k in table:
                raise ctx.error(f"measure.{k}", 'only an accuracy run has it: set mode = "accuracy", or leave it out')
        return Measure(**vals)
    if "epochs" not in table:
        raise ctx.error("measure", 'mode = "accuracy" needs epochs = N (the most epochs a run trains)')
    epochs = int_value(ctx, "measure.epochs", table["epochs"], 1, 10_000)
    no = [s.name for s in (suite_list or ()) if not s.accuracy]
    if no:
        raise ctx.error("measure.mode", f"{', '.join(no)} cannot run accuracy runs yet (suites that can: "
                                        f"{', '.join(n for n in suites.names() if suites.get(n).accuracy)})")
    return Measure(**vals, mode=mode, epochs=epochs, target=_target(ctx, table.get("target")))


def _target(ctx: Source, t: Any) -> Target | None:
    """``target = { metric = "top1", value = 0.75 }``: a fraction in (0, 1]."""
    if t is None:
        return None
    if not isinstance(t, dict):
        raise ctx.error("measure.target", 'expected { metric = "top1", value = 0.75 }')
    check_keys(ctx, t, ("metric", "value"), "measure.target")
    metric, value = t.get("metric"), t.get("value")
    if metric not in METRICS:
        raise ctx.error("measure.target.metric", f"expected one of {', '.join(METRICS)}, got {metric!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ctx.error("measure.target.value", f"expected a fraction in (0, 1] such as 0.75 (75 %), got {value!r}")
    return Target(str(metric), float(value))


def record(m: Measure) -> dict[str, Any]:
    """What a manifest keeps of a campaign's ``[measure]``: the window and repeats, and an accuracy campaign's
    planned epochs and target (which its collect reads the evaluations against: :func:`target_of`)."""
    out: dict[str, Any] = {"repeats": m.repeats, "warmup_steps": m.warmup_steps, "measure_steps": m.measure_steps}
    if m.accuracy:
        out.update(mode=m.mode, epochs=m.epochs,
                   target={"metric": m.target.metric, "value": m.target.value} if m.target else None)
    return out


def target_of(kept: Any) -> tuple[Target | None, int]:
    """An accuracy campaign's target and planned epochs from what :func:`record` kept ((None, 0): none, or a
    manifest of a throughput campaign or of before this was kept)."""
    t = kept.get("target") if isinstance(kept, dict) else None
    epochs = kept.get("epochs") if isinstance(kept, dict) else None
    epochs = epochs if isinstance(epochs, int) and not isinstance(epochs, bool) else 0
    if (isinstance(t, dict) and t.get("metric") in METRICS and isinstance(t.get("value"), (int, float))
            and not isinstance(t.get("value"), bool)):
        return Target(str(t["metric"]), float(t["value"])), epochs
    return None, epochs


def windows_text(runs: Any) -> str:
    """The method line's window(s) of a summary's runs (``(campaign, cell id, warm-up, measured)`` each): one
    window, said once; runs of several windows, each window with the runs it timed (their campaign, when every run
    of a campaign has it; else their cells, named up to three), so no run is said to be timed otherwise."""
    by: dict[tuple[int, int], list[tuple[str, str]]] = {}
    campaigns: dict[str, int] = {}
    for campaign, cell, warm, meas in runs:
        by.setdefault((warm, meas), []).append((campaign, cell))
        campaigns[campaign] = campaigns.get(campaign, 0) + 1
    if len(by) <= 1:
        return "; ".join(f"skip {plural(w, 'step')}, time the next {m}" for w, m in by) or "none"
    parts = []
    for (w, m), members in sorted(by.items()):
        here: dict[str, int] = {}
        for c, _cell in members:
            here[c] = here.get(c, 0) + 1
        whole = sorted(c for c, n in here.items() if n == campaigns[c])
        cells = sorted({cell for c, cell in members if c not in whole})
        who = [f"campaign {c}" for c in whole] + (
            [f"{noun(len(cells), 'cell')} {', '.join(cells)}"] if 0 < len(cells) <= 3 else
            [plural(len(cells), 'cell')] if cells else [])
        parts.append(f"skip {plural(w, 'step')}, time the next {m} ({plural(len(members), 'run')}: "
                     f"{'; '.join(who)})")
    return "runs of one summary timed over different windows: " + "; ".join(parts)
