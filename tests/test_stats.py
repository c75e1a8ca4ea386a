"""Cell statistics (method.md): hand-computed figures and DLPerf's published medians and speedups
(suites-reference.md §3)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlperf_slurm import stats


def test_median_odd_and_even_counts():
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([10, 40, 20, 30]) == 25.0  # even count: mean of the two middle values
    assert stats.median([5.0]) == 5.0
    assert stats.median([]) is None


def test_hand_computed_cell():
    values = [100.0, 102.0, 98.0, 101.0, 99.0, 103.0, 97.0]
    s = stats.summarize(values, 7)
    assert (s.n, s.n_ok, s.median, s.min, s.max, s.mean) == (7, 7, 100.0, 97.0, 103.0, 100.0)
    # sum of squared deviations: 0 + 4 + 4 + 1 + 1 + 9 + 9 = 28, over n - 1 = 6
    assert s.stdev == pytest.approx(math.sqrt(28 / 6), rel=1e-12)
    assert s.cv == pytest.approx(math.sqrt(28 / 6) / 100.0, rel=1e-12)
    assert s.flags == []


def test_even_count_cell_of_six_repeats():
    # six repeats, as NGC TF and Paddle published: the median is the mean of the 3rd and 4th values
    s = stats.summarize([362.1, 362.9, 362.4, 362.48, 361.7, 363.0], 6)
    assert s.median == pytest.approx((362.4 + 362.48) / 2)
    assert stats.fmt(s.median) == "362.44"


def test_flags_few_ok_is_a_ratio_of_five_of_seven():
    assert stats.summarize([1.0] * 5, 7).flags == []
    assert stats.summarize([1.0] * 4, 7).flags == ["few_ok"]
    assert stats.summarize([1.0] * 2, 3).few_ok  # 2/3 < 5/7
    assert not stats.summarize([1.0] * 3, 3).few_ok
    assert not stats.summarize([1.0] * 4, 5).few_ok  # 4/5 >= 5/7
    assert stats.summarize([1.0] * 3, 5).few_ok
    empty = stats.summarize([], 7)
    assert empty.median is None and empty.n_ok == 0 and empty.flags == ["few_ok"]


def test_flag_cv_above_five_percent():
    s = stats.summarize([90.0, 110.0, 90.0, 110.0, 90.0, 110.0, 100.0], 7)
    assert s.cv > 0.05 and s.high_cv
    assert not stats.summarize([100.0, 104.0, 96.0, 100.0, 100.0], 5).high_cv


def test_single_ok_run_has_no_spread():
    s = stats.summarize([42.0], 7)
    assert s.median == 42.0 and s.stdev is None and s.cv is None and s.few_ok


def test_non_finite_values_are_refused():
    with pytest.raises(ValueError):
        stats.summarize([1.0, float("nan")], 2)
    with pytest.raises(TypeError):
        stats.median([1.0, None])  # type: ignore[list-item]


# DLPerf NGC PyTorch RN50 AMP bs256 (suites-reference.md §3.1): medians and published speedups per shape
NGC_PT_AMP = {(1, 1): 802.9, (1, 4): 3137.44, (1, 8): 6154.66, (2, 8): 11991.94, (4, 8): 22551.16}
NGC_PT_AMP_SPEEDUP = {(1, 1): 1.0, (1, 4): 3.91, (1, 8): 7.67, (2, 8): 14.94, (4, 8): 28.09}


def test_speedups_match_dlperf_published_ngc_pytorch_amp():
    base = NGC_PT_AMP[(1, 1)]
    for shape, med in NGC_PT_AMP.items():
        sp = stats.speedup(med, base)
        assert abs(sp - NGC_PT_AMP_SPEEDUP[shape]) <= 0.01 / 2 + 1e-9  # published at 2 decimals
        assert stats.fmt(sp) == f"{NGC_PT_AMP_SPEEDUP[shape]:.2f}"
    eff = stats.efficiency(stats.speedup(NGC_PT_AMP[(4, 8)], base), 32)
    assert stats.fmt(eff, percent=True, digits=2) == "87.8%"


@pytest.mark.parametrize("medians", [
    # NGC PyTorch RN50 FP32 bs128, NGC TF1 RN50 FP32 bs128, NGC PyTorch BERT fp16 bs96 (§3.1-3.3, 3.2)
    [367.29, 1449.48, 2887.65, 5716.79, 10917.09],
    [362.44, 1391.28, 2721.98, 5099.42, 9514.64],
    [462.35, 1727.93, 3287.12, 5426.07, 10349.12],
    # NGC MXNet RN50 FP32 (1n1g, 1n2g, 1n4g, 1n8g, 2n8g, 4n8g) and Paddle RN50 FP32 (§3.5, 3.6)
    [392.24, 764.6, 1518.04, 3006.98, 5758.49, 11331.93],
    [352.72, 644.66, 1358.64, 2625.38, 4895.27, 9348.17],
])
def test_unrounded_speedup_agrees_with_dlperfs_rounded_rule_within_a_hundredth(medians):
    # DLPerf divided medians already rounded to 2 decimals; we divide the unrounded ones: the two agree at +-0.01
    for m in medians:
        ours = stats.speedup(m, medians[0])
        theirs = round(round(m, 2) / round(medians[0], 2), 2)
        assert abs(ours - theirs) <= 0.01


def test_missing_baseline_leaves_speedup_empty_never_one_or_zero():
    assert stats.speedup(1000.0, None) is None
    assert stats.speedup(1000.0, 0.0) is None
    assert stats.speedup(None, 100.0) is None
    assert stats.speedup(1000.0, float("nan")) is None
    assert stats.efficiency(None, 8) is None
    assert stats.speedup(800.0, 100.0) == 8.0
    assert stats.efficiency(8.0, 8) == 1.0


def test_fmt_rounds_only_for_presentation():
    assert stats.fmt(1234.5678) == "1234.57"
    assert stats.fmt(None) == ""
    assert stats.fmt(0.0123, percent=True) == "1.2%"


@given(st.lists(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False), min_size=1, max_size=15))
def test_against_the_statistics_module(xs):
    s = stats.summarize(xs, len(xs))
    assert s.median == pytest.approx(statistics.median(xs), rel=1e-12)
    assert s.mean == pytest.approx(statistics.fmean(xs), rel=1e-9)
    assert s.min == min(xs) and s.max == max(xs)
    if len(xs) > 1:
        assert s.stdev == pytest.approx(statistics.stdev(xs), rel=1e-6, abs=1e-9)


# ------------------------------------------------------------------------------- the median's interval


@pytest.mark.parametrize("n", range(2, 31))
def test_median_interval_is_the_narrowest_order_statistic_pair_reaching_95_percent(n):
    """Exact: the coverage of [x(k), x(n-k+1)] is P(k <= B <= n-k), B ~ Binomial(n, 1/2), counted here with
    fractions; the interval chosen is the one with the largest k whose coverage is still >= 95 %."""
    from fractions import Fraction
    from math import comb

    def coverage(k):
        return Fraction(sum(comb(n, j) for j in range(k, n - k + 1)), 2 ** n)

    xs = [float(10 * i) for i in range(1, n + 1)]
    low, high, cov = stats.median_interval(reversed(xs))
    ks = [k for k in range(1, n // 2 + 1) if coverage(k) >= Fraction(95, 100)]
    k = max(ks) if ks else 1
    assert (low, high) == (xs[k - 1], xs[n - k]) and cov == pytest.approx(float(coverage(k)), abs=1e-12)
    assert (cov >= 0.95) == (n >= 6)


def test_median_interval_covers_the_true_median_as_often_as_it_says():
    """Monte Carlo over a skewed distribution with a known median: the stated coverage holds."""
    import random

    rng = random.Random(7)
    true_median = math.log(2)  # of Exp(1)
    for n in (5, 7, 9, 12):
        hits, trials = 0, 4000
        for _ in range(trials):
            low, high, cov = stats.median_interval(rng.expovariate(1.0) for _ in range(n))
            hits += low <= true_median <= high
        assert abs(hits / trials - cov) < 0.015, (n, hits / trials, cov)


def test_median_interval_needs_two_values_and_refuses_what_is_no_number():
    assert stats.median_interval([]) is None and stats.median_interval([3.0]) is None
    with pytest.raises(ValueError):
        stats.median_interval([1.0, float("nan"), 2.0])
    st = stats.summarize([100.0, 101.0, 99.0, 102.0, 98.0, 100.5, 99.5], 7)
    assert (st.ci_low, st.ci_high) == (98.0, 102.0) and st.ci_rel == pytest.approx(4.0 / 100.0)


@pytest.mark.parametrize("n", [1032, 1033, 5000, 100_000])
def test_median_interval_takes_any_number_of_runs(n):
    """Beyond 1,032 values ``math.comb(n, k) * 0.5 ** n`` overflowed a float (issue #22): the interval must come
    from exact integer arithmetic. Checked against the normal approximation of Binomial(n, 1/2), whose order
    statistics a large n puts within a few ranks of the exact ones (and the coverage just above 95 %)."""
    xs = [float(i) for i in range(n)]
    low, high, cov = stats.median_interval(xs)
    half = 1.959963984540054 * (n ** 0.5) / 2  # z(0.975) x sd of Binomial(n, 1/2)
    assert abs((n / 2 - half) - low) <= 3 and abs((n / 2 + half) - high) <= 3
    assert 0.95 <= cov < 0.955 and low + high == n - 1  # symmetric: x(k) and x(n-k+1)


def test_t_quantiles_match_the_printed_table_and_scipy():
    """compare's t (stats.t_ppf, plain Python): the 97.5 % and 80 % points of a printed t table, to 4 decimals, and
    scipy's at fractional degrees of freedom (Welch's) where scipy is installed."""
    table = {1: (12.7062, 1.3764), 2: (4.3027, 1.0607), 5: (2.5706, 0.9195), 10: (2.2281, 0.8791),
             30: (2.0423, 0.8538)}
    for df, (t975, t80) in table.items():
        assert stats.t_ppf(0.975, df) == pytest.approx(t975, abs=1e-4)
        assert stats.t_ppf(0.8, df) == pytest.approx(t80, abs=1e-4)
        assert stats.t_cdf(t975, df) == pytest.approx(0.975, abs=1e-5)
    assert stats.t_ppf(0.025, 3) == -stats.t_ppf(0.975, 3) and stats.t_ppf(0.975, 1e6) == pytest.approx(1.95996, 1e-5)
    scipy_stats = pytest.importorskip("scipy.stats")
    for df in (0.7, 1.3, 2.6, 7.9, 123.4):
        for q in (0.6, 0.8, 0.975, 0.9995):
            assert stats.t_ppf(q, df) == pytest.approx(scipy_stats.t.ppf(q, df), rel=1e-8)
