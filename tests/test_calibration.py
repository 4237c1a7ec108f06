"""Calibration: where an analysis' null holds, its experiment-wide false-positive rate stays at
or below alpha, also when other effects are present; where it does not, it finds the effect.

The suite: SCENARIOS (simulated experiments with known effects) x ANALYSES (each a named
function ``(frame, scenario) -> bool``, "reported a finding" on one simulated experiment of
the scenario; only the claims analyses read the scenario, for the claim's truth); a scenario
names the analyses whose null it breaks, every other analysis must keep its false-positive
rate at alpha there. The claims analyses judge one claim, CLAIM (d faster than e beyond the
ratio of their simulated means), in every scenario: "claims" is a false claim reported to
hold (in an order kind where the scenario makes it false), "order changes conclusion" is
the ordering trap reported where the claim's truth is the same in both orders. The short
seeded variants run here (every analysis at 30 runs per order; the claims analyses also at
20); the full one (>= 400 experiments per scenario at 20, 50, 100 and 200 runs per order) is
``bench/calibration.py``.

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
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import simulate_longformat
from scipy.stats import norm

from washout.stats.carryover import RESET, CarryoverResult, carryover
from washout.stats.claims import EVALUATED_ORDERS, ClaimResult, evaluate_claims
from washout.stats.drift import drift
from washout.stats.family import adjust
from washout.stats.order import analyze_order

ALPHA = 0.05
TESTS = 5
RUNS = 20
TRIAL_CV = 0.01  # 1% trial-to-trial noise in every scenario
CARRIED = ("c", "b")  # the true carryover of the carryover scenario: c right after b
# The claim the claims analyses judge: d (mean 130, position 3 in fixed order) faster than e
# (mean 140, position 4) beyond the ratio of their simulated means, 130 / 140. Neither test
# comes first in fixed runs, and in random runs either does as often, so the first-after-
# reset effect leaves the per-run ratio alone; nor is either in the c-after-b carryover.
CLAIM = f"d < {130 / 140!r} * e"
MEANS = {"a": 100.0, "b": 110.0, "c": 120.0, "d": 130.0, "e": 140.0}  # simulate's default


@dataclass(frozen=True)
class Scenario:
    """Simulated experiments with known effects; ``breaks``: the analyses whose null does
    not hold here (their rate is power); every other analysis' null holds. ``claim_true_in``:
    the order kinds where CLAIM is true. ``weak``: effects in ``breaks`` too small to be
    found nearly always at the CI variants' sizes (their power is reported, not asserted)."""

    name: str
    effects: dict
    breaks: frozenset[str]
    claim_true_in: tuple[str, ...] = ()
    weak: frozenset[str] = frozenset()

    @property
    def claim_false_in(self) -> tuple[str, ...]:
        """The order kinds where CLAIM is false (the claims analysis' null holds there)."""
        return tuple(o for o in EVALUATED_ORDERS if o not in self.claim_true_in)

    def simulate(self, runs: int, seed: int) -> pd.DataFrame:
        return simulate_longformat.simulate(runs=runs, cv=TRIAL_CV, seed=seed, **self.effects)


def _cached(frame: pd.DataFrame, what: str, compute: Callable[[pd.DataFrame], object]) -> object:
    """compute(frame), computed once per frame for the analyses that read it."""
    if _last.get("frame") is not frame:
        _last.clear()
        _last["frame"] = frame
    if what not in _last:
        _last[what] = compute(frame)
    return _last[what]


_last: dict[str, object] = {}


def _carryover(frame: pd.DataFrame) -> CarryoverResult:
    return _cached(frame, "carryover", carryover)  # type: ignore[return-value]


def _claim(frame: pd.DataFrame) -> ClaimResult:
    return _cached(
        frame,
        "claim",  # type: ignore[return-value]
        lambda f: evaluate_claims(f, [CLAIM], alpha=ALPHA)[0],
    )


def order_verdict(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """The order analysis says order matters (some test differs between fixed and random)."""
    return analyze_order(frame, alpha=ALPHA).verdict == "order-matters"


def predecessor_pair(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """Some test is significantly shifted right after some other test."""
    return any(p.predecessor != RESET for p in _carryover(frame).significant())


def wrong_predecessor_pair(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """A pair other than the simulated one (c after b) is blamed."""
    return any(
        p.predecessor != RESET and (p.test, p.predecessor) != CARRIED
        for p in _carryover(frame).significant()
    )


def first_after_reset(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """The first trial after the reset differs from the trend of later ones, for some test or
    pooled over the tests."""
    result = _carryover(frame)
    return any(p.predecessor == RESET for p in result.significant()) or any(
        r.significant for r in result.first_after_reset
    )


def drift_found(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """Some test drifts with position, time since the reset or run."""
    return bool(drift(frame, alpha=ALPHA).significant())


def claim_holds(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """CLAIM reported to hold in an order kind where the scenario makes it false (a false
    claim held); where it is true in both order kinds, reported to hold in both (power)."""
    result = _claim(frame)
    if scenario.claim_false_in:
        return any(getattr(result, o).holds for o in scenario.claim_false_in)
    return all(getattr(result, o).holds for o in EVALUATED_ORDERS)


def order_changes_conclusion(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """The order was reported to change CLAIM's conclusion."""
    return bool(_claim(frame).order_changes_conclusion)


Analysis = Callable[[pd.DataFrame, Scenario], bool]
ANALYSES: dict[str, Analysis] = {
    "order verdict": order_verdict,
    "carryover": predecessor_pair,
    "carryover, wrong pair": wrong_predecessor_pair,
    "first after reset": first_after_reset,
    "drift": drift_found,
    "claims": claim_holds,
    "order changes conclusion": order_changes_conclusion,
}
CLAIMS_ANALYSES = ("claims", "order changes conclusion")

# "claims" breaks only where CLAIM is true in both order kinds (no order where a false claim
# could hold); "order changes conclusion" only where CLAIM's truth differs between the
# orders (its per-run ratio differs, and its truth with it).
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("no effect", {}, frozenset()),
    Scenario(
        "first trial after the reset 10% slower",
        {"first_after_reset": 1.10},
        frozenset({"order verdict", "first after reset"}),
    ),
    # Fixed runs put d one position before e: 1.03 / 1.04, d truly 1% faster there only.
    Scenario(
        "1% drift per position",
        {"drift_per_position": dict.fromkeys("abcde", 0.01)},
        frozenset({"order verdict", "drift", "order changes conclusion"}),
        claim_true_in=("fixed",),
        weak=frozenset({"order changes conclusion"}),
    ),
    # The ratio d / e differs between the orders, but the claim is false in both.
    Scenario(
        "e (last in fixed order) 5% faster in random orders only",
        {"random_factor": {"e": 0.95}},
        frozenset({"order verdict"}),
    ),
    Scenario("5% run-level noise", {"run_cv": 0.05}, frozenset()),
    Scenario(
        "8% c-after-b carryover and first after reset 10% slower",
        {"carryover": {CARRIED: 1.08}, "first_after_reset": 1.10},
        frozenset({"order verdict", "carryover", "first after reset"}),
    ),
    Scenario(
        "claim: d truly 2% faster than e under 5% shared run noise",
        {"means": dict(MEANS, d=130 * 0.98), "run_cv": 0.05},
        frozenset({"claims"}),
        claim_true_in=EVALUATED_ORDERS,
    ),
    # d's ratio to e truly differs between the orders: the claim is false in fixed order,
    # true in random; the order analysis sees a 2% shift of d under 5% run noise (weakly).
    Scenario(
        "claim whose ratio truly differs between orders: d 2% faster in random order "
        "only, 5% shared run noise",
        {"random_factor": {"d": 0.98}, "run_cv": 0.05},
        frozenset({"order verdict", "order changes conclusion"}),
        claim_true_in=("random",),
        weak=frozenset({"order verdict"}),
    ),
)


def finding_rates(
    scenario: Scenario,
    runs: int,
    experiments: int,
    seed: int,
    analyses: tuple[str, ...] = tuple(ANALYSES),
) -> dict[str, float]:
    """Per analysis (every one, or ``analyses``), the share of ``experiments`` simulated
    experiments (seeds seed, seed + 1, ...) in which it reported a finding."""
    found = dict.fromkeys(analyses, 0)
    for e in range(experiments):
        frame = scenario.simulate(runs, seed + e)
        for name in analyses:
            found[name] += ANALYSES[name](frame, scenario)
    return {name: count / experiments for name, count in found.items()}


def false_positive_bound(experiments: int, sigmas: float = 2.0) -> float:
    """alpha + ``sigmas`` Monte-Carlo standard errors of a rate alpha over ``experiments``."""
    return ALPHA + sigmas * math.sqrt(ALPHA * (1 - ALPHA) / experiments)


def rate_cells(
    rates: dict[str, float], breaks: Collection[str], bound: float
) -> tuple[list[str], bool]:
    """A calibration table's cells for one scenario ("power 0.950" where the finding is true,
    "FP 0.040 ok" or "FP 0.090 ABOVE" against ``bound`` where its null holds), and whether
    every false-positive rate is within the bound (bench/calibration.py and
    bench/drift_calibration.py print them)."""
    cells, within = [], True
    for name, rate in rates.items():
        if name in breaks:
            cells.append(f"power {rate:.3f}")
        else:
            within &= rate <= bound
            cells.append(f"FP {rate:.3f} {'ok' if rate <= bound else 'ABOVE'}")
    return cells, within


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
    return pd.DataFrame(
        {
            "run": 2 * r + o,
            "order": np.where(o == 0, "fixed", "random"),
            "position": t,
            "test": np.char.add("t", t.astype(str)),
            "metric": "wall",
            "value": values.ravel() + 100,
            "status": "ok",
            "worker": np.char.add("e", e.astype(str)),
        }
    )


def experiment_outcomes(frame: pd.DataFrame, correction: str) -> tuple[np.ndarray, np.ndarray]:
    """Per experiment: (any test significant, test t0 significant) under its own family."""
    analysis = analyze_order(frame, alpha=ALPHA, correction=correction, by_worker=True)
    pvalues: dict[str, dict[str, float]] = {}
    for t in analysis.tests:
        pvalues.setdefault(t.worker, {})[t.test] = t.kw_p
    any_hit, first_hit = [], []
    for by_test in pvalues.values():
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
    return float(
        norm.cdf(math.sqrt(12 * n * n / (2 * n + 1)) * abs(p - 0.5) - norm.ppf(1 - level / 2))
    )


def mc_bound(rate: float, count: int, sigmas: float = 3.0) -> float:
    return sigmas * math.sqrt(rate * (1 - rate) / count)


@pytest.mark.parametrize("correction", ["bonferroni", "holm"])
def test_no_order_effect_keeps_the_experiment_wide_false_positive_rate_at_alpha(
    correction: str,
) -> None:
    experiments = 1000
    any_hit, _ = experiment_outcomes(simulate(experiments, 0.0, seed=11), correction)
    rate = any_hit.mean()
    assert rate <= ALPHA + mc_bound(ALPHA, experiments)
    assert rate > 0.01  # the test can reject at all


def test_injected_shift_is_detected_at_the_expected_rate() -> None:
    experiments, shift = 1000, 1.0
    any_hit, first_hit = experiment_outcomes(
        simulate(experiments, shift, seed=12, skewed=False), "bonferroni"
    )
    expected = noether_power(RUNS, shift, ALPHA / TESTS)
    # Noether's normal approximation is itself good to a few percent at n = 20.
    assert abs(first_hit.mean() - expected) <= mc_bound(expected, experiments) + 0.04
    assert any_hit.mean() >= first_hit.mean()


def test_bulk_outcome_matches_analyze_order_one_experiment_at_a_time() -> None:
    frame = simulate(40, 0.8, seed=13)
    any_hit, _ = experiment_outcomes(frame, "holm")
    one_by_one = [
        analyze_order(group, correction="holm").verdict == "order-matters"
        for _, group in frame.groupby("worker", sort=False)
    ]
    order = sorted(frame["worker"].unique(), key=lambda w: int(w[1:]))
    assert list(any_hit) == [one_by_one[list(frame["worker"].unique()).index(w)] for w in order]


def check_calibrated(scenario: Scenario, rates: dict[str, float], experiments: int) -> None:
    """False positives at most alpha + 2 MC se where a null holds; where it does not, the
    effect found nearly always (power >= 0.8) unless the scenario calls it weak."""
    bound = false_positive_bound(experiments)
    too_high = {a: r for a, r in rates.items() if a not in scenario.breaks and r > bound}
    assert not too_high, f"{scenario.name}: false positives above {bound:.3f}: {too_high}"
    missed = {
        a: r
        for a, r in rates.items()
        if a in scenario.breaks and a not in scenario.weak and r < 0.8
    }
    assert not missed, f"{scenario.name}: power below 0.8: {missed}"


def test_the_claims_analyses_agree_with_evaluate_claims() -> None:
    [drifting] = [s for s in SCENARIOS if s.claim_true_in == ("fixed",)]
    frame = drifting.simulate(20, seed=3)
    [result] = evaluate_claims(frame, [CLAIM], alpha=ALPHA)
    assert claim_holds(frame, drifting) == result.random.holds
    assert order_changes_conclusion(frame, drifting) == result.order_changes_conclusion
    [both] = [s for s in SCENARIOS if s.claim_true_in == EVALUATED_ORDERS]
    frame = both.simulate(20, seed=3)
    [result] = evaluate_claims(frame, [CLAIM], alpha=ALPHA)
    assert claim_holds(frame, both) == (result.fixed.holds and result.random.holds)


SHORT_RUNS, SHORT_EXPERIMENTS = 30, 100


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_analysis_keeps_alpha_where_its_null_holds_and_finds_what_is_there(
    scenario: Scenario,
) -> None:
    rates = finding_rates(scenario, SHORT_RUNS, SHORT_EXPERIMENTS, seed=7000)
    check_calibrated(scenario, rates, SHORT_EXPERIMENTS)


CLAIMS_RUNS, CLAIMS_EXPERIMENTS = 20, 200


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_claims_analyses_calibrated_at_20_runs_per_order(scenario: Scenario) -> None:
    """The claims analyses at the smallest size, with more experiments: a false claim held
    and the order changing the conclusion at alpha (+2 MC se) where not so; a true 2%
    advantage under 5% shared run noise found nearly always (pairing by run is what finds
    it: an unpaired test found it in 16% of such experiments)."""
    rates = finding_rates(
        scenario,
        CLAIMS_RUNS,
        CLAIMS_EXPERIMENTS,
        seed=20_000 + 1000 * SCENARIOS.index(scenario),
        analyses=CLAIMS_ANALYSES,
    )
    check_calibrated(scenario, rates, CLAIMS_EXPERIMENTS)
