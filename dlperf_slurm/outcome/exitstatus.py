"""The exit status of ``status`` and ``collect``, for a CI job (``compare``'s is
:class:`dlperf_slurm.compare.rule.Gate`):

- 1 when every run of the campaign (of every campaign or tree collected together) ended and none is OK: every
  run failed (a campaign with a run still pending or running, or with no run at all, has not failed);
- 1 with ``--fail-on STATUS,...`` when any run has one of those statuses (``--fail-on OOM,TIMEOUT``; ``any``: every
  failure status, so one failed run fails the job);
- 0 otherwise; 2, as everywhere, for a usage error (an unknown status in ``--fail-on``).

The reasons go to stderr, one line each, as ``compare``'s do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from dlperf_slurm.errors import UserError
from dlperf_slurm.model.status import FAILURES, FINAL, Status, status_of
from dlperf_slurm.words import plural

ANY = "any"  # --fail-on any: every failure status


def parse_fail_on(value: str | None) -> frozenset[Status]:
    """``--fail-on``'s statuses: names separated by commas, any case; ``any`` for every failure status."""
    if not value:
        return frozenset()
    out: set[Status] = set()
    for word in (w.strip() for w in value.split(",")):
        if not word:
            continue
        if word.lower() == ANY:
            out.update(FAILURES)
            continue
        status = status_of(word.upper())
        if status is None or status == Status.OK:
            names = ", ".join(s.value for s in Status if s != Status.OK)
            raise UserError(f"--fail-on {value}: {word!r} is no run status; expected {ANY} or some of {names}, "
                            "separated by commas (e.g. --fail-on OOM,TIMEOUT)")
        out.add(status)
    return frozenset(out)


def reasons(statuses: Iterable[str], fail_on: frozenset[Status] = frozenset()) -> list[str]:
    """Why the command fails (empty: it passes), from its runs' statuses."""
    counts = Counter(str(s) for s in statuses)
    out = []
    total = sum(counts.values())
    if total and not counts.get(Status.OK) and all(status_of(s) in FINAL for s in counts):
        out.append(f"every run failed ({total}: {_counts(counts)})")
    hit = Counter({s: n for s, n in counts.items() if status_of(s) in fail_on})
    if hit:
        out.append(f"{sum(hit.values())} of {plural(total, 'run')} {_counts(hit)} (--fail-on "
                   f"{','.join(sorted(s.value for s in fail_on)) if len(fail_on) < len(FAILURES) else ANY})")
    return out


def _counts(c: Counter) -> str:
    return ", ".join(f"{s} {n}" for s, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def exit_status(command: str, statuses: Iterable[str], fail_on: frozenset[Status] = frozenset()) -> int:
    """1 when :func:`reasons` gives any (each said on stderr as ``dlperf-slurm: COMMAND fails: ...``), else 0."""
    import sys

    found = reasons(statuses, fail_on)
    for why in found:
        print(f"dlperf-slurm: {command} fails: {why}", file=sys.stderr)
    return 1 if found else 0
