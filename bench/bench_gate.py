"""How often ``compare``'s verdicts call a change where there is none, and how often they catch a real one: the
rule before issue #32 (the percentile bootstrap of the median ratio, 2000 resamples, re-implemented here as it
was in dlperf_slurm/compare/rule.py) and the rule now (:func:`dlperf_slurm.compare.rule.compare_cell`: Welch's t on log
throughput, "cannot tell" where the repeats cannot), side by side. Prints tables; asserts nothing.

    python bench/bench_gate.py [--trials 2000] [--seed 0] [--threshold 0.05] [--quick] [--summaries S.json ...]

1. Real repeats, split: every cell of DLPerf's published per-repeat lists (tests/fixtures/real/references/dlperf/,
   the READMEs tests/test_dlperf_published.py reads: 14 benchmarks, 5 to 10 repeats of 5-6 shapes), each split
   every way into two disjoint "campaigns" of 2 against 2, 2 against 3, 3 against 3 and 5 against 5 repeats
   (where it has that many). Nothing differs between the two sides: every "faster"/"slower" is a false call.
   The issue's figure, 42 of 150 for one benchmark (TensorFlow_resnet50v1.5: 6 shapes x (15 splits of 2 v 2 +
   10 of 2 v 3)), is the first line of the old rule.
2. The same splits with the new side's times stretched by 10 % (throughput / 1.1): every "slower" is caught, and
   "REGRESSED" (slower by more than the threshold) the gate's failure; plus each cell's 5 repeats against
   themselves stretched (5 a side; the two sides then share their spread exactly).
3. Simulation: n repeats a side (2, 3, 5, 7), CV 0.1 % to 20 %, three noise shapes (log-normal; normal; and
   stragglers: normal, and 1 run in 10 slower by 4 sigma; each at the CV given), identical conditions (false calls) and the new side 10 %
   slower (power). The old rule's bootstrap is vectorised with numpy here (same resampling, same percentiles;
   its random stream differs from the old code's ``random.Random(0)``, its rates do not).
4. With ``--summaries``: your own campaigns of one configuration (collect's JSON summaries, nothing changed
   between them): each campaign's repeats split as in 1, and every pair of campaigns compared, with all their
   repeats and with their first 2: within a campaign the runs share nodes and hours, across campaigns they do not.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a source checkout
sys.path.insert(0, str(ROOT / "tests"))

from dlperf_slurm.compare import rule as cmp  # noqa: E402

RESAMPLES, CONFIDENCE = 2000, 0.95
CALLS = ("faster", "slower")


# ============================================================================================== the two rules


def old_interval(base, new, resamples=RESAMPLES, confidence=CONFIDENCE, seed=0):
    """The old ``compare.ratio_interval``, as it was: the percentile bootstrap of median(new) / median(base)."""
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(new, k=len(new))) / statistics.median(rng.choices(base, k=len(base)))
                    for _ in range(resamples))
    tail = (1 - confidence) / 2
    return ratios[int(tail * (resamples - 1))], ratios[int(round((1 - tail) * (resamples - 1)))]


def old_interval_np(base, new, rng, resamples=RESAMPLES, confidence=CONFIDENCE):
    """The same interval, vectorised (for the simulation's tens of thousands of comparisons)."""
    b, n = np.asarray(base), np.asarray(new)
    mb = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    mn = np.median(n[rng.integers(0, len(n), (resamples, len(n)))], axis=1)
    ratios = np.sort(mn / mb)
    tail = (1 - confidence) / 2
    return ratios[int(tail * (resamples - 1))], ratios[int(round((1 - tail) * (resamples - 1)))]


def old_rule(base, new, threshold, rng=None):
    """(verdict, regressed) of the old compare_cell for two sides of 2 OK runs or more."""
    low, high = old_interval(base, new) if rng is None else old_interval_np(base, new, rng)
    ratio = statistics.median(new) / statistics.median(base)
    if low > 1:
        return "faster", False
    if high < 1:
        return "slower", ratio < 1 - threshold
    return "no change", False


def new_rule(base, new, threshold, rng=None):
    r = cmp.compare_cell("c", cmp.Side(tuple(base), ("OK",) * len(base)), cmp.Side(tuple(new), ("OK",) * len(new)),
                         threshold)
    return r.verdict, r.regressed


RULES = (("before", old_rule), ("after", new_rule))


# ============================================================================================== real repeats


def real_cells():
    """(benchmark, shape, repeat values) of every DLPerf README that prints its per-repeat lists."""
    from test_dlperf_published import READMES, blocks

    for path in READMES:
        for repeats, _ in blocks(path.read_text()):
            for shape, values in repeats.items():
                yield path.stem.removesuffix("_README"), shape, [float(v) for v in values.values()]


def splits(k, nb, nn):
    """Every split of ``k`` repeats into disjoint index sets of ``nb`` and ``nn`` (each pair once when nb == nn)."""
    for b in itertools.combinations(range(k), nb):
        rest = [i for i in range(k) if i not in b]
        for n in itertools.combinations(rest, nn):
            if nb == nn and n < b:
                continue
            yield b, n


SIZES = ((2, 2), (2, 3), (3, 3), (5, 5))


def real_rates(cells, rule, threshold, stretch=1.0, sizes=SIZES):
    """{(benchmark, (nb, nn)): [comparisons, calls, slower, regressed, cannot tell]}."""
    out: dict = {}
    for bench, _, v in cells:
        for nb, nn in sizes:
            if nb + nn > len(v):
                continue
            c = out.setdefault((bench, (nb, nn)), [0, 0, 0, 0, 0])
            rng = np.random.default_rng(0)
            for b, n in splits(len(v), nb, nn):
                verdict, regressed = rule([v[i] for i in b], [v[i] / stretch for i in n], threshold, rng)
                c[0] += 1
                c[1] += verdict in CALLS
                c[2] += verdict == "slower"
                c[3] += regressed
                c[4] += verdict == cmp.CANNOT_TELL
    return out


def _pct(k, n):
    return f"{100 * k / n:5.1f} %" if n else "    -  "


def print_real(cells, threshold):
    print("## 1. Real repeats split into two campaigns of one configuration (false calls: faster or slower)\n")
    rates = {name: real_rates(cells, rule, threshold) for name, rule in RULES}
    benches = sorted({b for b, _ in rates["after"]})
    print(f"{'benchmark':52s} {'split':6s} {'n':>6s}  {'before':>16s}  {'after':>16s}  {'after: cannot tell':>18s}")
    total = {name: [0, 0] for name, _ in RULES}
    by_size = {name: {s: [0, 0] for s in SIZES} for name, _ in RULES}
    for b in benches:
        for s in SIZES:
            if (b, s) not in rates["after"]:
                continue
            o, a = rates["before"][(b, s)], rates["after"][(b, s)]
            print(f"{b[:52]:52s} {s[0]}v{s[1]:<4d} {a[0]:6d}  {o[1]:5d} {_pct(o[1], o[0])}  {a[1]:5d} {_pct(a[1], a[0])}"
                  f"  {_pct(a[4], a[0]):>18s}")
            for name, c in (("before", o), ("after", a)):
                total[name][0] += c[0]
                total[name][1] += c[1]
                by_size[name][s][0] += c[0]
                by_size[name][s][1] += c[1]
    for s in SIZES:
        o, a = by_size["before"][s], by_size["after"][s]
        print(f"{'all benchmarks':52s} {s[0]}v{s[1]:<4d} {a[0]:6d}  {o[1]:5d} {_pct(o[1], o[0])}  {a[1]:5d} "
              f"{_pct(a[1], a[0])}")
    o, a = total["before"], total["after"]
    print(f"{'all benchmarks, all splits':52s} {'':6s} {a[0]:6d}  {o[1]:5d} {_pct(o[1], o[0])}  {a[1]:5d} "
          f"{_pct(a[1], a[0])}")
    # the figure: one benchmark, 2 v 2 and 2 v 3, by the old code's own bootstrap (random.Random(0))
    tf = [c for c in cells if c[0] == "TensorFlow_resnet50v1.5"]
    for name, rule in (("before (the old code's random stream)", lambda b, n, t, rng: old_rule(b, n, t)),
                       ("after", new_rule)):
        c = real_rates(tf, rule, threshold, sizes=((2, 2), (2, 3)))
        print(f"the issue's 150 (TensorFlow_resnet50v1.5, 2v2 + 2v3), {name}: {sum(x[1] for x in c.values())} of "
              f"{sum(x[0] for x in c.values())} called a change")
    print()


def print_real_power(cells, threshold):
    print("## 2. The same splits, the new side's times stretched by 10 % (caught: slower; REGRESSED: the gate fails)"
          "\n")
    rates = {name: real_rates(cells, rule, threshold, stretch=1.1) for name, rule in RULES}
    print(f"{'split':8s} {'n':>6s}  {'before: slower':>15s} {'REGRESSED':>10s}  {'after: slower':>14s} "
          f"{'REGRESSED':>10s} {'cannot tell':>12s}")
    for s in SIZES:
        o = [sum(c[k] for (b, sz), c in rates["before"].items() if sz == s) for k in range(5)]
        a = [sum(c[k] for (b, sz), c in rates["after"].items() if sz == s) for k in range(5)]
        print(f"{s[0]}v{s[1]:<6d} {a[0]:6d}  {_pct(o[2], o[0]):>15s} {_pct(o[3], o[0]):>10s}  {_pct(a[2], a[0]):>14s} "
              f"{_pct(a[3], a[0]):>10s} {_pct(a[4], a[0]):>12s}")
    for name, rule in RULES:  # each cell's first 5 repeats against themselves, stretched; by CV
        rows = [(statistics.stdev(v[:5]) / statistics.fmean(v[:5]), rule(v[:5], [x / 1.1 for x in v[:5]], threshold))
                for _, _, v in cells if len(v) >= 5]
        low = [r for cv, r in rows if cv <= 0.02]
        print(f"5 v the same 5 stretched, {name}: slower in {sum(r[0] == 'slower' for r in low)} of {len(low)} cells "
              f"with CV <= 2 % ({sum(r[1] for r in low)} REGRESSED); all CVs: {sum(r[0] == 'slower' for _, r in rows)}"
              f" of {len(rows)}")
    print()


# ============================================================================================== simulation


def draw(rng, n, cv, shape, scale=1.0):
    if shape == "lognormal":
        x = rng.lognormal(0.0, cv, n)
    elif shape == "normal":
        x = 1 + cv * rng.standard_normal(n)
    else:  # stragglers: 1 run in 10 loses 4 sigma; sigma such that the CV is ``cv`` (var = sigma² (1 + 16 x 0.09))
        s = cv / math.sqrt(1 + 16 * 0.1 * 0.9)
        x = 1 + s * rng.standard_normal(n) - 4 * s * (rng.random(n) < 0.1)
    return list(np.maximum(x, 1e-3) * 1000.0 * scale)


def simulate(trials, seed, threshold, ns=(2, 3, 5, 7), cvs=(0.001, 0.01, 0.02, 0.05, 0.20),
             shapes=("lognormal", "normal", "stragglers")):
    """{(shape, n, cv): {rule: (false calls, power: slower, power: REGRESSED, cannot tell under no change)}}."""
    out = {}
    for shape, n, cv in itertools.product(shapes, ns, cvs):
        row = {}
        for name, rule in RULES:
            rng = np.random.default_rng([seed, ns.index(n), cvs.index(cv), shapes.index(shape)])
            boot = np.random.default_rng(seed)
            false = slower = regressed = cannot = 0
            for _ in range(trials):
                v = rule(draw(rng, n, cv, shape), draw(rng, n, cv, shape), threshold, boot)
                false += v[0] in CALLS
                cannot += v[0] == cmp.CANNOT_TELL
                w = rule(draw(rng, n, cv, shape), draw(rng, n, cv, shape, 1 / 1.1), threshold, boot)
                slower += w[0] == "slower"
                regressed += w[1]
            row[name] = (false / trials, slower / trials, regressed / trials, cannot / trials)
        out[(shape, n, cv)] = row
    return out


def print_simulation(sim, trials):
    print(f"## 3. Simulation ({trials} trials a line; power: the new side 10 % slower, throughput / 1.1)\n")
    print(f"{'noise':11s} {'n':>2s} {'CV':>6s}  {'false calls':^17s}  {'power: slower':^17s}  "
          f"{'power: REGRESSED':^17s}  {'cannot tell':>11s}")
    print(f"{'':11s} {'':2s} {'':6s}  {'before':>8s} {'after':>8s}  {'before':>8s} {'after':>8s}  {'before':>8s} "
          f"{'after':>8s}  {'(after, =)':>11s}")
    for (shape, n, cv), row in sim.items():
        o, a = row["before"], row["after"]
        print(f"{shape:11s} {n:2d} {100 * cv:5.1f}%  {100 * o[0]:7.1f}% {100 * a[0]:7.1f}%  {100 * o[1]:7.1f}% "
              f"{100 * a[1]:7.1f}%  {100 * o[2]:7.1f}% {100 * a[2]:7.1f}%  {100 * a[3]:10.1f}%")
    print()


def own_cells(paths):
    """{cell id: [(campaign, OK throughputs)]} of collect summaries."""
    import json

    out: dict = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        values: dict = {}
        for r in doc["runs"]:
            if r["status"] == "OK" and isinstance(r.get("throughput"), (int, float)):
                values.setdefault(r["cell_id"], []).append(float(r["throughput"]))
        for cid, v in values.items():
            out.setdefault(cid, []).append((doc.get("name") or Path(path).stem, v))
    return out


def print_own(paths, threshold):
    print("## 4. Your own campaigns (false calls: nothing changed between them)\n")
    cells = own_cells(paths)
    for cid, camps in cells.items():
        print(f"{cid}: " + "; ".join(f"{name} {len(v)} runs, median {statistics.median(v):.2f}, CV "
                                     f"{100 * statistics.stdev(v) / statistics.fmean(v):.2f} %" if len(v) > 1 else
                                     f"{name} {len(v)} run" for name, v in camps))
        split = [(cid, name, v) for name, v in camps]
        for name, rule in RULES:
            c = real_rates(split, rule, threshold, sizes=((2, 2), (2, 3), (3, 3)))
            n, k = sum(x[0] for x in c.values()), sum(x[1] for x in c.values())
            print(f"  within each campaign, {name}: {k} of {n} splits (2v2, 2v3, 3v3) called a change ({_pct(k, n)})")
        pairs = [(a, b) for i, a in enumerate(camps) for b in camps[i + 1:] if len(a[1]) >= 2 and len(b[1]) >= 2]
        for name, rule in RULES:
            rng = np.random.default_rng(0)
            whole = [rule(a[1], b[1], threshold, rng)[0] for a, b in pairs]
            two = [rule(a[1][:2], b[1][:2], threshold, rng)[0] for a, b in pairs]
            print(f"  campaign against campaign, {name}: all runs {sum(v in CALLS for v in whole)} of {len(pairs)} "
                  f"pairs called a change ({', '.join(whole)}); first 2 runs a side {sum(v in CALLS for v in two)} "
                  f"of {len(pairs)}")
        means = [statistics.fmean(math.log(x) for x in v) for _, v in camps if v]
        if len(means) >= 2:
            within = statistics.fmean(statistics.stdev([math.log(x) for x in v]) for _, v in camps if len(v) > 1)
            print(f"  campaign-to-campaign SD of mean log throughput {100 * statistics.stdev(means):.2f} % over "
                  f"{len(means)} campaigns; the runs' own SD {100 * within:.2f} % (a campaign mean's, /sqrt(n): "
                  f"{100 * within / math.sqrt(statistics.fmean(len(v) for _, v in camps)):.2f} %)")
    print()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--quick", action="store_true", help="200 trials, real splits of 2v2 and 2v3 only")
    ap.add_argument("--summaries", nargs="+", metavar="JSON", help="your own campaigns of one configuration "
                    "(collect's summaries/<name>.json): section 4")
    ap.add_argument("--only-summaries", action="store_true", help="section 4 alone")
    args = ap.parse_args(argv)
    global SIZES
    if args.quick:
        args.trials, SIZES = 200, ((2, 2), (2, 3))
    t0 = time.perf_counter()
    if args.summaries:
        print_own(args.summaries, args.threshold)
        if args.only_summaries:
            return 0
    cells = list(real_cells())
    print(f"# compare's rule before and after issue #32 (threshold {args.threshold:.0%}; {len(cells)} real cells)\n")
    print_real(cells, args.threshold)
    print_real_power(cells, args.threshold)
    print_simulation(simulate(args.trials, args.seed, args.threshold), args.trials)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
