"""Calibration: with no order effect the experiment-wide false-positive rate stays at or
below alpha; with an injected shift the order analysis detects it as often as theory says.

Experiments are simulated in bulk: experiment e's test j is the comparison (test j, worker
e) of one ``analyze_order(..., by_worker=True)`` call, so every p-value comes from the real
vectorized code; each experiment's family of m tests is then corrected on its own with
:func:`washout.stats.family.adjust`, the function ``analyze_order`` uses. A few experiments
are also analysed one by one to check that this reproduces ``analyze_order``'s verdict.
The full-size version is ``bench/calibration.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from washout.stats.family import adjust
from washout.stats.order import analyze_order

ALPHA = 0.05
TESTS = 5
RUNS = 20


def simulate(experiments: int, shift_sd: float, seed: int, skewed: bool = True) -> pd.DataFrame:
    """Long-format trials of many experiments (worker = experiment), RUNS per order.

    Values are lognormal (skewed, like latencies) rounded to 3 significant digits (ties), or
    normal when not ``skewed``; test t0's random-order trials are shifted by ``shift_sd``
    standard deviations.
    """
    rng = np.random.default_rng(seed)
    shape = (experiments, TESTS, 2, RUNS)
    if skewed:
        values = np.exp(rng.normal(0.0, 0.25, shape))
        values = np.round(values, 2)
    else:
        values = rng.normal(0.0, 1.0, shape)
    values[:, 0, 1, :] += shift_sd * (0.25 if skewed else 1.0)
    e, t, o, r = np.indices(shape).reshape(4, -1)
    return pd.DataFrame({
        "run": 2 * r + o, "order": np.where(o == 0, "fixed", "random"), "position": t,
        "test": np.char.add("t", t.astype(str)), "metric": "wall", "value": values.ravel() + 100,
        "status": "ok", "worker": np.char.add("e", e.astype(str)),
    })


def experiment_outcomes(frame: pd.DataFrame, correction: str) -> tuple[np.ndarray, np.ndarray]:
    """Per experiment: (any test significant, test t0 significant) under its own family."""
    analysis = analyze_order(frame, alpha=ALPHA, correction=correction, by_worker=True)
    pvalues: dict[str, dict[str, float]] = {}
    for t in analysis.tests:
        pvalues.setdefault(t.worker, {})[t.test] = t.kw_p
    any_hit, first_hit = [], []
    for worker, by_test in pvalues.items():
        names = sorted(by_test)
        significant, _ = adjust([by_test[n] for n in names], ALPHA, correction)
        any_hit.append(any(significant))
        first_hit.append(significant[names.index("t0")])
    return np.array(any_hit), np.array(first_hit)


def noether_power(n: int, shift_sd: float, level: float) -> float:
    """Power of the two-sample rank test for a normal shift (Noether 1987, "Sample size
    determination for some common nonparametric tests", JASA 82(398), eq. 4):
    Phi(sqrt(12 n1 n2 / (N + 1)) |P(Y > X) - 1/2| - z_{1 - level/2}), P(Y > X) = Phi(d/sqrt 2)."""
    p = norm.cdf(shift_sd / math.sqrt(2))
    return float(norm.cdf(math.sqrt(12 * n * n / (2 * n + 1)) * abs(p - 0.5)
                          - norm.ppf(1 - level / 2)))


def mc_bound(rate: float, count: int, sigmas: float = 3.0) -> float:
    return sigmas * math.sqrt(rate * (1 - rate) / count)


@pytest.mark.parametrize("correction", ["bonferroni", "holm"])
def test_no_order_effect_keeps_the_experiment_wide_false_positive_rate_at_alpha(
        correction: str) -> None:
    experiments = 1000
    any_hit, _ = experiment_outcomes(simulate(experiments, 0.0, seed=11), correction)
    rate = any_hit.mean()
    assert rate <= ALPHA + mc_bound(ALPHA, experiments)
    assert rate > 0.01  # the test can reject at all


def test_injected_shift_is_detected_at_the_expected_rate() -> None:
    experiments, shift = 1000, 1.0
    any_hit, first_hit = experiment_outcomes(simulate(experiments, shift, seed=12, skewed=False),
                                             "bonferroni")
    expected = noether_power(RUNS, shift, ALPHA / TESTS)
    # Noether's normal approximation is itself good to a few percent at n = 20.
    assert abs(first_hit.mean() - expected) <= mc_bound(expected, experiments) + 0.04
    assert any_hit.mean() >= first_hit.mean()


def test_bulk_outcome_matches_analyze_order_one_experiment_at_a_time() -> None:
    frame = simulate(40, 0.8, seed=13)
    any_hit, _ = experiment_outcomes(frame, "holm")
    one_by_one = [analyze_order(group, correction="holm").verdict == "order-matters"
                  for _, group in frame.groupby("worker", sort=False)]
    order = sorted(frame["worker"].unique(), key=lambda w: int(w[1:]))
    assert list(any_hit) == [one_by_one[list(frame["worker"].unique()).index(w)] for w in order]
