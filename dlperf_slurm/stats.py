"""Cell statistics of method.md, in plain Python (no pandas, no numpy).

A cell is one configuration run ``n`` times. Only its OK runs enter the statistics:

- median (an even count takes the mean of the two middle values, as ``np.median`` and ``statistics.median``),
  min, max, mean, sample standard deviation (n - 1), CV = stdev / mean, n_ok / n;
- the median's confidence interval, distribution-free: the order statistics ``[x(k), x(n-k+1)]`` with the
  largest ``k`` whose coverage ``P(k <= B <= n-k)``, B ~ Binomial(n, 1/2), is at least 95 % (7 runs: min..max,
  98.4 %; fewer than 6 runs cannot reach 95 %: the interval is min..max and its coverage says how far short);
- flags: fewer OK runs than 5 of 7 (as a ratio, so 3 repeats need all 3 and 5 need 4), CV above 5 %;
- speedup = median / median of the same model, precision, XLA and batch per device on 1 node x 1 GPU;
  scaling efficiency = speedup / total GPUs. A missing or unusable baseline leaves both empty (None), never
  1.0 or 0 (DLPerf's extractors did both).

Nothing is rounded here: round only when presenting (:func:`fmt`).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from dlperf_slurm.words import plural

MIN_OK_RATIO = 5 / 7
MAX_CV = 0.05
CONFIDENCE = 0.95


def _clean(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"not a number: {v!r}")
        if not math.isfinite(v):
            raise ValueError(f"not a finite number: {v!r}")
        out.append(float(v))
    return out


def median(values: Iterable[float]) -> float | None:
    """Median; with an even count, the mean of the two middle values. None for no value."""
    xs = _clean(values)
    return statistics.median(xs) if xs else None


def mean(values: Iterable[float]) -> float | None:
    xs = _clean(values)
    return statistics.fmean(xs) if xs else None


def stdev(values: Iterable[float]) -> float | None:
    """Sample standard deviation (n - 1 in the denominator); None for fewer than two values."""
    xs = _clean(values)
    return statistics.stdev(xs) if len(xs) >= 2 else None


def cv(values: Iterable[float]) -> float | None:
    """Coefficient of variation stdev / mean (a fraction: 0.05 is 5 %); None when undefined."""
    xs = _clean(values)
    s, m = stdev(xs), mean(xs)
    if s is None or m is None or m == 0:
        return None
    return s / abs(m)


@dataclass
class CellStats:
    n: int  # runs of the cell (planned or found)
    n_ok: int
    median: float | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    stdev: float | None = None
    cv: float | None = None
    ci_low: float | None = None  # the median's confidence interval (order statistics, see median_interval)
    ci_high: float | None = None
    ci_coverage: float | None = None  # its exact coverage (>= CONFIDENCE from 6 OK runs on)
    flags: list[str] = field(default_factory=list)

    @property
    def ci_rel(self) -> float | None:
        """The interval's width relative to the median, (high - low) / median."""
        if self.ci_low is None or self.ci_high is None or not self.median:
            return None
        return (self.ci_high - self.ci_low) / abs(self.median)

    @property
    def few_ok(self) -> bool:
        return "few_ok" in self.flags

    @property
    def high_cv(self) -> bool:
        return "high_cv" in self.flags


def median_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """(low, high, coverage): the distribution-free interval of the median from the order statistics, the
    narrowest whose coverage reaches ``confidence`` (min..max when none does); None for fewer than 2 values."""
    xs = sorted(_clean(values))
    n = len(xs)
    if n < 2:
        return None
    # exact integers (a float 0.5 ** n underflows and comb(n, k) overflows beyond ~1,030 values): below counts
    # the outcomes of Binomial(n, 1/2) under k, so P(B <= k - 1) = below / 2 ** n (a big-int division, exact
    # to the float's last bit)
    total = 1 << n
    below, term = 1, 1  # term = comb(n, k - 1)
    best = (xs[0], xs[-1], 1.0 - 2 / total)
    for k in range(1, n // 2 + 1):
        coverage = 1.0 - 2 * below / total  # P(k <= B <= n - k): the true median lies in [x(k), x(n-k+1)]
        if coverage < confidence - 1e-12:
            break
        best = (xs[k - 1], xs[n - k], coverage)
        term = term * (n - k + 1) // k
        below += term
    return best


def few_ok(n_ok: int, n: int) -> bool:
    """Fewer OK runs than 5 of 7 (as a ratio of the runs the cell has)."""
    return n > 0 and n_ok / n < MIN_OK_RATIO - 1e-12


def min_ok(n: int) -> int:
    """The fewest OK runs of ``n`` planned that are not :func:`few_ok` (3 of 3, 4 of 5, 5 of 7, 8 of 10)."""
    return next(k for k in range(n + 1) if not few_ok(k, n)) if n > 0 else 0


def few_ok_rule(planned: Iterable[int]) -> str:
    """What ``few OK`` means for cells of these planned repeats: ``fewer than 3 of 3 runs OK``, per count."""
    counts = sorted({int(n) for n in planned if n and n > 0})
    return ", ".join(f"fewer than {min_ok(n)} of {n}" for n in counts) + " runs OK" if counts else "no run planned"


def summarize(ok_values: Sequence[float], n: int) -> CellStats:
    """Statistics of a cell from its OK runs' values; ``n`` is the number of runs of the cell (OK or not)."""
    xs = _clean(ok_values)
    n = max(int(n), len(xs))
    st = CellStats(n=n, n_ok=len(xs))
    if xs:
        st.median, st.min, st.max, st.mean = median(xs), min(xs), max(xs), mean(xs)
        st.stdev = stdev(xs)  # computed once (exact arithmetic is the slow part); cv(xs) from it, the same value
        st.cv = None if st.stdev is None or st.mean is None or st.mean == 0 else st.stdev / abs(st.mean)
        ci = median_interval(xs)
        if ci is not None:
            st.ci_low, st.ci_high, st.ci_coverage = ci
    if few_ok(st.n_ok, n):
        st.flags.append("few_ok")
    if st.cv is not None and st.cv > MAX_CV:
        st.flags.append("high_cv")
    return st


def speedup(value: float | None, baseline: float | None) -> float | None:
    """value / baseline; None when either is missing, not finite or the baseline is not positive."""
    if value is None or baseline is None:
        return None
    if not (math.isfinite(value) and math.isfinite(baseline)) or baseline <= 0:
        return None
    return value / baseline


def efficiency(speed_up: float | None, devices: int) -> float | None:
    """Scaling efficiency = speedup / total GPUs; None without a speedup."""
    if speed_up is None or devices <= 0:
        return None
    return speed_up / devices


def fmt(value: float | None, digits: int = 2, *, percent: bool = False) -> str:
    """Presentation rounding (the only rounding): 2 decimals, '' for None."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if percent:
        return f"{100.0 * value:.{max(0, digits - 1)}f}%"
    return f"{value:.{digits}f}"


# ============================================================================ Student's t, for compare's test


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (> 0, not necessarily whole) degrees of freedom."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` (> 0) degrees of freedom, to ~1e-10: Newton's method on
    :func:`t_cdf` from the Cornish-Fisher expansion about the normal quantile (the CDF is concave above 0, so from
    the first step on it climbs to the root from below and never overshoots)."""
    if not 0 < q < 1:
        raise ValueError(f"t_ppf: q={q} not in (0, 1)")
    if q < 0.5:
        return -t_ppf(1 - q, df)
    if q == 0.5:
        return 0.0
    if df == 1:
        return math.tan(math.pi * (q - 0.5))
    if df == 2:
        return (2 * q - 1) / math.sqrt(2 * q * (1 - q))
    z = statistics.NormalDist().inv_cdf(q)
    t = z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(100):
        f = t_cdf(t, df) - q
        pdf = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = f / pdf
        t_next = max(t - step, t / 2)  # from above the tangent can reach below 0: halve instead
        if abs(t_next - t) <= 1e-12 * t:
            return t_next
        t = t_next
    return t


@dataclass(frozen=True)
class RatioTest:
    """new/base of two samples' geometric means, tested on the logs (:func:`ratio_test`)."""

    ratio: float  # exp(mean log new - mean log base)
    low: float  # its confidence interval
    high: float
    se: float  # the standard error of the log ratio
    df: float  # the degrees of freedom of its t
    detectable: float  # the smallest slowdown (a fraction: 0.031 = 3.1 %) caught with ``power``
    between: bool  # the campaign-to-campaign variation set the interval (wider than the runs' own spread)


POWER = 0.80  # of the smallest detectable change


def ratio_test(base: Sequence[float], new: Sequence[float], confidence: float = CONFIDENCE, power: float = POWER,
               between: tuple[float, int] | None = None) -> RatioTest:
    """Welch's t test of log(new) against log(base): new/base as the ratio of geometric means, its two-sided
    ``confidence`` interval, and the smallest slowdown the test would have caught in ``power`` of trials (the
    t quantiles of the same degrees of freedom: ``(t_conf + t_power) * se``). Both sides need 2 values or more and
    positive ones.

    The degrees of freedom are the smaller side's n - 1, the conservative bound of Welch-Satterthwaite's estimate
    (which is never below it): that estimate takes the two sample variances at face value, and with 2 to 5 repeats
    a side they are themselves noisy, and too small where a campaign's repeats cluster (two node groups, a clock
    state that changes): on DLPerf's real repeats split into two sides it called up to 6.7 % of a benchmark's
    identical comparisons a change, the bound at most 3.3 % (docs/method.md).

    ``between``: ``(sd, k)``, the standard deviation of a campaign's mean log throughput over ``k`` earlier
    campaigns in which nothing changed; the difference of two campaigns then has a standard error of ``sd * √2``
    with ``k - 1`` degrees of freedom, and the interval is the wider of the two (``between`` says which)."""
    lb, ln = [math.log(v) for v in _clean(base)], [math.log(v) for v in _clean(new)]
    nb, nn = len(lb), len(ln)
    if nb < 2 or nn < 2:
        raise ValueError(f"ratio_test: {nb} and {plural(nn, 'value')}; 2 a side at least")
    mb, mn = math.fsum(lb) / nb, math.fsum(ln) / nn
    d = mn - mb
    wb = math.fsum((x - mb) ** 2 for x in lb) / (nb - 1) / nb  # variance / n, in floats (logs: no cancellation)
    wn = math.fsum((x - mn) ** 2 for x in ln) / (nn - 1) / nn
    se = math.sqrt(wb + wn)
    df = float(min(nb, nn) - 1)  # the lower bound of Welch-Satterthwaite's (see the docstring)
    z = (1 + confidence) / 2
    tz = t_ppf(z, df)
    half = tz * se
    wide = False
    if between is not None and between[1] >= 3:
        se_b, df_b = between[0] * math.sqrt(2), float(between[1] - 1)
        tz_b = t_ppf(z, df_b)
        if tz_b * se_b > half:
            se, df, tz, half, wide = se_b, df_b, tz_b, tz_b * se_b, True
    catch = (tz + t_ppf(power, df)) * se
    return RatioTest(ratio=math.exp(d), low=math.exp(d - half), high=math.exp(d + half), se=se, df=df,
                     detectable=-math.expm1(-catch), between=wide)


@functools.lru_cache(maxsize=1 << 16)
def _mean_log(values: tuple[float, ...]) -> float:
    """The mean log of a campaign's values, once per campaign (``history`` asks for each campaign's at every later
    step of its series)."""
    return math.fsum(math.log(v) for v in _clean(values)) / len(values)


def log_mean_sd(samples: Iterable[Sequence[float]]) -> tuple[float, int] | None:
    """``(sd, k)``: the standard deviation of the samples' mean logs (each a campaign's OK values, all positive),
    over the ``k`` samples with a value; None below 3 (too few to say how much a campaign moves)."""
    means = [_mean_log(tuple(s)) for s in samples if s]
    if len(means) < 3:
        return None
    m = math.fsum(means) / len(means)
    return math.sqrt(math.fsum((x - m) ** 2 for x in means) / (len(means) - 1)), len(means)
