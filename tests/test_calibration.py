"""Calibration: where an analysis' null holds, its experiment-wide false-positive rate stays at
or below alpha, also when other effects are present; where it does not, it finds the effect.

The suite: SCENARIOS (simulated experiments with known effects) x ANALYSES (each a named
function ``frame -> bool``, "reported a finding"); a scenario names the analyses whose null
it breaks, every other analysis must keep its false-positive rate at alpha there. The short
seeded variant runs here; the full one (>= 400 experiments per scenario at 20, 50, 100 and
200 runs per order) is ``bench/calibration.py``.

The order analysis also has a bulk check: experiments are simulated in bulk, experiment e's
test j being the comparison (test j, worker e) of one ``analyze_order(..., by_worker=True)``
call, so every p-value comes from the real vectorized code; each experiment's family of m
tests is then corrected on its own with :func:`washout.stats.family.adjust`, the function
``analyze_order`` uses. A few experiments
are also analysed one by one to check that this reproduces ``analyze_order``'s verdict.
The full-size version is ``bench/calibration.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import simulate_longformat
from washout.stats.carryover import RESET, CarryoverResult, carryover
from washout.stats.drift import drift
from washout.stats.family import adjust
from washout.stats.order import analyze_order

ALPHA = 0.05
TESTS = 5
RUNS = 20
TRIAL_CV = 0.01  # 1% trial-to-trial noise in every scenario
CARRIED = ("c", "b")  # the true carryover of the carryover scenario: c right after b


@dataclass(frozen=True)
class Scenario:
    """Simulated experiments with known effects; ``breaks``: the analyses whose null does
    not hold here (their rate is power); every other analysis' null holds."""

    name: str
    effects: dict
    breaks: frozenset[str]

    def simulate(self, runs: int, seed: int) -> pd.DataFrame:
        return simulate_longformat.simulate(runs=runs, cv=TRIAL_CV, seed=seed, **self.effects)


def _carryover(frame: pd.DataFrame) -> CarryoverResult:
    """carryover(frame), computed once per frame for the analyses that read it."""
    if _last[0] is not frame:
        _last[:] = [frame, carryover(frame)]
    return _last[1]


_last: list = [None, None]


def order_verdict(frame: pd.DataFrame) -> bool:
    """The order analysis says order matters (some test differs between fixed and random)."""
    return analyze_order(frame, alpha=ALPHA).verdict == "order-matters"


def predecessor_pair(frame: pd.DataFrame) -> bool:
    """Some test is significantly shifted right after some other test."""
    return any(p.predecessor != RESET for p in _carryover(frame).significant())


def wrong_predecessor_pair(frame: pd.DataFrame) -> bool:
    """A pair other than the simulated one (c after b) is blamed."""
    return any(p.predecessor != RESET and (p.test, p.predecessor) != CARRIED
               for p in _carryover(frame).significant())


def first_after_reset(frame: pd.DataFrame) -> bool:
    """The first trial after the reset differs from the trend of later ones, for some test or
    pooled over the tests."""
    result = _carryover(frame)
    return (any(p.predecessor == RESET for p in result.significant())
            or any(r.significant for r in result.first_after_reset))


def drift_found(frame: pd.DataFrame) -> bool:
    """Some test drifts with position, time since the reset or run."""
    return bool(drift(frame, alpha=ALPHA).significant())


ANALYSES: dict[str, Callable[[pd.DataFrame], bool]] = {
    "order verdict": order_verdict,
    "carryover": predecessor_pair,
    "carryover, wrong pair": wrong_predecessor_pair,
    "first after reset": first_after_reset,
    "drift": drift_found,
}

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("no effect", {}, frozenset()),
    Scenario("first trial after the reset 10% slower", {"first_after_reset": 1.10},
             frozenset({"order verdict", "first after reset"})),
    Scenario("1% drift per position", {"drift_per_position": dict.fromkeys("abcde", 0.01)},
             frozenset({"order verdict", "drift"})),
    Scenario("e (last in fixed order) 5% faster in random orders only",
             {"random_factor": {"e": 0.95}},
             frozenset({"order verdict"})),
    Scenario("5% run-level noise", {"run_cv": 0.05}, frozenset()),
    Scenario("8% c-after-b carryover and first after reset 10% slower",
             {"carryover": {CARRIED: 1.08}, "first_after_reset": 1.10},
             frozenset({"order verdict", "carryover", "first after reset"})),
)


def finding_rates(scenario: Scenario, runs: int, experiments: int,
                  seed: int) -> dict[str, float]:
    """Per analysis, the share of ``experiments`` simulated experiments (seeds seed, seed + 1,
    ...) in which it reported a finding."""
    found = dict.fromkeys(ANALYSES, 0)
    for e in range(experiments):
        frame = scenario.simulate(runs, seed + e)
        for name, analysis in ANALYSES.items():
            found[name] += analysis(frame)
    return {name: count / experiments for name, count in found.items()}


def false_positive_bound(experiments: int, sigmas: float = 2.0) -> float:
    """alpha + ``sigmas`` Monte-Carlo standard errors of a rate alpha over ``experiments``."""
    return ALPHA + sigmas * math.sqrt(ALPHA * (1 - ALPHA) / experiments)


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


SHORT_RUNS, SHORT_EXPERIMENTS = 30, 100


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_analysis_keeps_alpha_where_its_null_holds_and_finds_what_is_there(
        scenario: Scenario) -> None:
    rates = finding_rates(scenario, SHORT_RUNS, SHORT_EXPERIMENTS, seed=7000)
    bound = false_positive_bound(SHORT_EXPERIMENTS)
    too_high = {a: r for a, r in rates.items() if a not in scenario.breaks and r > bound}
    assert not too_high, f"{scenario.name}: false positives above {bound:.3f}: {too_high}"
    # the simulated effects are large enough to be found nearly always at 30 runs per order
    missed = {a: rates[a] for a in scenario.breaks if rates[a] < 0.8}
    assert not missed, f"{scenario.name}: power below 0.8: {missed}"
