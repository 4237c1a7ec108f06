"""The exact median CI (Le Boudec Thm 2.1) against a brute-force binomial computation."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from washout.errors import WashoutError
from washout.stats.median_ci import central_probability, median_ci, median_ci_rank


def brute_force_rank(n: int, confidence: float) -> tuple[int, Fraction] | None:
    """Largest j >= 1 with P(j <= B <= n - j) >= confidence, B ~ Bin(n, 1/2), in exact
    rational arithmetic by summing the binomial probabilities term by term."""
    best = None
    for j in range(1, n + 1):
        if j > n - j:
            break
        coverage = Fraction(sum(comb(n, b) for b in range(j, n - j + 1)), 2**n)
        if coverage >= Fraction(confidence):
            best = (j, coverage)
    return best


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99, 1 - 0.05 / 3, 0.999])
def test_rank_matches_brute_force_for_every_n_up_to_120(confidence: float) -> None:
    for n in range(0, 121):
        expected = brute_force_rank(n, confidence)
        got = median_ci_rank(n, confidence)
        if expected is None:
            assert got is None, n
        else:
            assert got is not None, n
            assert got[0] == expected[0], n
            assert got[1] == pytest.approx(float(expected[1]), rel=1e-12, abs=1e-15)


def test_no_interval_below_six_at_95_percent() -> None:
    assert [median_ci_rank(n) for n in range(6)] == [None] * 6
    assert median_ci_rank(6) == (1, pytest.approx(1 - 2 / 64))


def test_interval_on_random_data_with_ties_is_the_right_order_statistics() -> None:
    rng = np.random.default_rng(1)
    for n in range(1, 60):
        x = rng.integers(0, 5, size=n).astype(float)  # heavy ties
        got = median_ci(x)
        expected = brute_force_rank(n, 0.95)
        if expected is None:
            assert got is None
            continue
        j, coverage = expected
        s = sorted(x.tolist())
        assert got == (s[j - 1], s[n - j], pytest.approx(float(coverage)))
        assert got[0] <= np.median(x) <= got[1]


def test_constant_sample_gives_a_degenerate_interval() -> None:
    assert median_ci([3.0] * 10)[:2] == (3.0, 3.0)


def test_coverage_on_continuous_data_is_at_least_the_achieved_confidence() -> None:
    rng = np.random.default_rng(2)
    n, reps = 20, 4000
    j, achieved = median_ci_rank(n, 0.95)
    x = np.sort(rng.exponential(size=(reps, n)), axis=1)
    true_median = np.log(2.0)
    covered = (x[:, j - 1] <= true_median) & (true_median <= x[:, n - j])
    se = np.sqrt(achieved * (1 - achieved) / reps)
    assert abs(covered.mean() - achieved) < 4 * se


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1])
def test_confidence_outside_zero_one_is_a_one_line_error(bad: float) -> None:
    with pytest.raises(WashoutError, match="ci-confidence"):
        median_ci([1.0, 2.0], bad)


@pytest.mark.parametrize("n", [*range(4090, 4103), 8191, 8192, 20_001, 100_000])
def test_central_probability_matches_exact_arithmetic_across_the_switch(n: int) -> None:
    exact = Fraction(comb(n, n // 2), 2**n)
    assert central_probability(n) == pytest.approx(float(exact), rel=4e-16)


@pytest.mark.parametrize("n", [610, 5_000, 100_000, 10**7])
def test_large_samples_agree_with_scipy_binomial(n: int) -> None:
    """Large n, where summing from the centre is what keeps it fast, against scipy's cdf."""
    from scipy.stats import binom

    j, achieved = median_ci_rank(n, 0.95)
    assert achieved == pytest.approx(1 - 2 * binom.cdf(j - 1, n, 0.5), rel=1e-12)
    assert 1 - 2 * binom.cdf(j, n, 0.5) < 0.95 <= achieved  # j + 1 would fall short
