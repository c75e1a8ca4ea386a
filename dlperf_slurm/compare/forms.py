"""The forms of a comparison (:mod:`dlperf_slurm.compare.rule` makes it): the markdown report, the table that fits a
terminal, and the JUnit XML a CI system reads, each saying how it was judged (:func:`method_line`)."""

from __future__ import annotations

from typing import Sequence

from dlperf_slurm.compare.rule import (
    CANNOT_TELL,
    CONFIDENCE,
    ONLY_IN_BASE,
    ONLY_IN_NEW,
    POWER,
    TEST,
    CellComparison,
    Gate,
    noise_text,
    pct_text,
    some_ids,
    verdict_text,
)
from dlperf_slurm.words import plural


def _f(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def _catch(r: CellComparison) -> str:
    return f"≥ {pct_text(r.detectable)}" if r.detectable is not None else "—"


def method_line(threshold: float, metric: str = "throughput") -> str:
    """How the table was judged, in one line (the markdown's and the terminal's)."""
    c = int(CONFIDENCE * 100)
    what = "throughput" if metric == "throughput" else "energy efficiency (samples or tokens per joule)"
    test = TEST if metric == "throughput" else TEST.replace("throughput", "samples per joule")
    return (f"new/base of the geometric mean {what}, {c} % interval by {test} over the repeats (noise: the runs' "
            "CV, or the cell's campaign-to-campaign variation where the store holds it and it is wider); faster/"
            f"slower: the interval excludes 1; no change: it lies within 1 ± {threshold:.0%}; cannot tell: neither "
            f"(does not fail the gate); would catch: the smallest slowdown found in {int(POWER * 100)} % of trials; "
            f"regressed: slower by more than {threshold:.0%}, or no OK run any more.")


def markdown(base_name: str, new_name: str, rows: Sequence[CellComparison], threshold: float,
             metric: str = "throughput") -> str:
    title = f"# {new_name} against {base_name}" + ("" if metric == "throughput" else f": {metric}")
    lines = [title, "", method_line(threshold, metric), "",
             "| cell | base median | new median | new/base | interval | noise | would catch | runs (base/new) "
             "| verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        interval = f"{_f(r.low, 3)}–{_f(r.high, 3)}" if r.low is not None else "—"
        verdict = f"**{verdict_text(r)}, regressed**" if r.regressed else verdict_text(r)
        lines.append(f"| {r.cell_id} | {_f(r.base_median)} | {_f(r.new_median)} | {_f(r.ratio, 3)} | {interval} | "
                     f"{noise_text(r)} | {_catch(r)} | {r.base_n}/{r.new_n} | {verdict} |")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict.split(" (")[0]] = counts.get(r.verdict.split(" (")[0], 0) + 1
    gate = Gate.of(rows)
    lines += ["", "; ".join(f"{k}: {v}" for k, v in counts.items())
              + f". Regressed: {len(gate.regressed)} of {plural(len(rows), 'cell')}."]
    unmeasured = [r.cell_id for r in rows if r.unmeasured]
    unit = next((r.unit for r in rows if r.unmeasured), "")
    noisy = [c for c in gate.cannot_tell if c not in set(unmeasured)]
    if noisy:
        lines += ["", (f"**Cannot tell: {plural(len(noisy), 'cell')}** "
                       f"({some_ids(noisy)}): their repeats are too few or too noisy to tell a change of "
                       f"{threshold:.0%} from none; they do not fail the gate (more repeats, or quieter nodes, "
                       "tell).")]
    if unmeasured:
        lines += ["", (f"**Nothing to judge: {plural(len(unmeasured), 'cell')}** ({some_ids(unmeasured)}): a side's "
                       f"OK runs give no {unit} figure (not measured there: no GPU energy counter read, or "
                       "no energy line printed); they do not fail the gate.")]
    if gate.failed:
        lines += ["", "**Fails:** " + "; ".join(gate.reasons()) + "."]
    unread = [r for r in rows if r.unrecognised]
    if unread:
        which = "; ".join(f"{r.cell_id}: {r.unrecognised}" for r in unread[:5]) + ("; ..." if len(unread) > 5 else "")
        lines += ["", (f"**UNRECOGNISED runs in {plural(len(unread), 'cell')}** ({which}): their programs finished, "
                       "but their suite reads no step of their logs, so no figure of theirs is compared; `collect`'s "
                       "reasons "
                       "name the suites that read them.")]
    return "\n".join(lines) + "\n"


def terminal(base_name: str, new_name: str, rows: Sequence[CellComparison], threshold: float,
             wide: bool = False, metric: str = "throughput") -> str:
    """The comparison for the terminal: the markdown's table fitting 100 columns unless ``wide`` (the .md file
    keeps it whole)."""
    import textwrap

    from dlperf_slurm.termtext import TERMINAL_WIDTH, fit_table, left_out_line

    md = markdown(base_name, new_name, rows, threshold, metric).splitlines()
    table = [[_f(r.base_median), _f(r.new_median), _f(r.ratio, 3),
              f"{_f(r.low, 3)}–{_f(r.high, 3)}" if r.low is not None else "—", noise_text(r), _catch(r),
              f"{r.base_n}/{r.new_n}",
              f"{verdict_text(r)}, REGRESSED" if r.regressed else verdict_text(r)] for r in rows]
    heads = ["cell", "base median", "new median", "new/base", "interval", "noise", "would catch", "runs (base/new)",
             "verdict"]
    text, dropped = fit_table(heads, [[r.cell_id, *t] for r, t in zip(rows, table, strict=True)], wide=wide,
                              drop=("runs", "base median", "new median", "noise", "interval"))
    def wrap(line: str) -> list[str]:
        line = line.replace("**", "")
        return [line] if wide else textwrap.wrap(line, TERMINAL_WIDTH, break_long_words=False,
                                                 break_on_hyphens=False) or [""]

    out = [md[0], "", *wrap(md[2]), "", text]
    if dropped:
        out.append(left_out_line(dropped, "the .md/.json"))
    for line in md[md.index("") + 1:][md[md.index("") + 1:].index("") + 1:]:  # after the method line
        if not line.startswith("|"):
            out += wrap(line)
    return "\n".join(out).rstrip() + "\n"


def _interval_text(r: CellComparison) -> str:
    if r.low is None:
        return "no interval"
    return (f"{int(CONFIDENCE * 100)} % interval {_f(r.low, 3)}-{_f(r.high, 3)}, noise {noise_text(r)}, "
            f"would catch {_catch(r)}")


def testcase_outcome(r: CellComparison, threshold: float) -> tuple[str, str]:
    """A cell as a JUnit testcase: ``(kind, message)``, kind one of ``passed``, ``failure`` (a regression: slower
    beyond the threshold, with its ratio and interval), ``error`` (the cell no longer runs: no OK run any more, or
    absent from NEW) and ``skipped`` (nothing to judge: new, cannot tell, no OK run on either side)."""
    if r.verdict == ONLY_IN_BASE:
        return "error", f"no longer running: in BASE (median {_f(r.base_median)} {r.unit}), absent from NEW"
    if r.regressed and r.verdict.startswith("now "):
        return "error", (f"no longer running: {r.verdict}, no OK run in NEW (BASE: {r.base_n} OK runs, median "
                         f"{_f(r.base_median)} {r.unit})")
    if r.regressed:
        return "failure", (f"{r.verdict}: new/base {_f(r.ratio, 3)} ({_interval_text(r)}), below "
                           f"{1 - threshold:.3f} (threshold {threshold:.0%}); median {_f(r.base_median)} -> "
                           f"{_f(r.new_median)} {r.unit}")
    if r.verdict == CANNOT_TELL:
        return "skipped", verdict_text(r) + (f"; new/base {_f(r.ratio, 3)}" if r.ratio is not None else "") + (
            f" ({_interval_text(r)})" if r.low is not None else "")
    if r.verdict == ONLY_IN_NEW or r.verdict.startswith("no OK run"):
        return "skipped", r.verdict + (f": new/base {_f(r.ratio, 3)}" if r.ratio is not None else "")
    ratio = f": new/base {_f(r.ratio, 3)} ({_interval_text(r)})" if r.ratio is not None else ""
    return "passed", r.verdict + ratio


def junit(base_name: str, new_name: str, rows: Sequence[CellComparison], threshold: float,
          metric: str = "throughput") -> str:
    """The comparison as JUnit XML: one ``testsuite`` (NEW against BASE), one ``testcase`` per cell (classname the
    cell's suite part, name the cell id); a comparison that shares no cell gets one erroring testcase so the
    report is not an empty success."""
    import xml.etree.ElementTree as ET

    cases = []
    for r in rows:
        kind, message = testcase_outcome(r, threshold)
        case = ET.Element("testcase", name=r.cell_id, classname=f"{new_name} vs {base_name}", time="0")
        if kind != "passed":
            child = ET.SubElement(case, kind, message=message)
            if kind != "skipped":
                child.set("type", "regression" if kind == "failure" else "not running")
                child.text = message
        else:
            ET.SubElement(case, "system-out").text = message
        cases.append((kind, case))
    gate = Gate.of(rows)
    if not gate.shared:
        case = ET.Element("testcase", name="shared cells", classname=f"{new_name} vs {base_name}", time="0")
        reason = gate.reasons()[0]
        ET.SubElement(case, "error", message=reason, type="no shared cell").text = reason
        cases.append(("error", case))
    count = {k: sum(kind == k for kind, _ in cases) for k in ("failure", "error", "skipped")}
    name = f"dlperf-slurm compare {new_name} vs {base_name}" + ("" if metric == "throughput" else f" ({metric})")
    suite = ET.Element("testsuite", name=name, tests=str(len(cases)),
                       failures=str(count["failure"]), errors=str(count["error"]), skipped=str(count["skipped"]),
                       time="0")
    props = ET.SubElement(suite, "properties")
    for k, v in (("base", base_name), ("new", new_name), ("metric", metric), ("threshold", f"{threshold:g}"),
                 ("confidence", f"{CONFIDENCE:g}"), ("test", TEST), ("power", f"{POWER:g}")):
        ET.SubElement(props, "property", name=k, value=v)
    suite.extend(case for _, case in cases)
    root = ET.Element("testsuites", tests=suite.get("tests", "0"), failures=suite.get("failures", "0"),
                      errors=suite.get("errors", "0"), time="0")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
