"""Calibration: where an analysis' null holds, its experiment-wide false-positive rate stays at
or below alpha, also when other effects are present; where it does not, it finds the effect.

The suite: SCENARIOS (simulated experiments with known effects, tests/simulate_longformat.py)
x ANALYSES (each a named function ``(frame, scenario) -> bool``, "reported a finding" on one
simulated experiment of the scenario) x SIZES (runs per order kind); a scenario names the
analyses whose null it breaks, every other analysis must keep its false-positive rate at
alpha there. The analyses: the order verdict; carryover (any pair, either lag), carryover
blaming a pair the scenario did not put there, the first trial after the reset (any test or
pooled), drift; the claims analyses on the scenario's CLAIM (its last two tests, one faster
than the other by exactly the ratio of their simulated means): "claims" is a false claim
reported to hold (in an order kind where the scenario makes it false), "order changes
conclusion" the ordering trap reported where the claim's truth is the same in both orders;
and "times faster CI", `washout.stats.compare`'s interval of a ratio to the fastest test
(simultaneous over the comparisons) missing the simulated ratio, for every test whose ratio
the scenario leaves symmetric (its null holds everywhere).

The short seeded variant runs here (``CI_CELLS``: every scenario at one size, the sizes
where a broken cell shows first); the full one (every scenario at every size of SIZES) is
``bench/calibration.py``. The order analysis also has a bulk check: experiments are
simulated in bulk, experiment e's test j being the comparison (test j, worker e) of one
``analyze_order(..., by_worker=True)`` call, so every p-value comes from the real vectorized
code; each experiment's family of m tests is then corrected on its own with
:func:`washout.stats.family.adjust`, the function ``analyze_order`` uses. A few experiments
are also analysed one by one to check that this reproduces ``analyze_order``'s verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest
import simulate_longformat
from scipy.stats import norm

from washout.stats.carryover import RESET, CarryoverResult, carryover
from washout.stats.claims import EVALUATED_ORDERS, ClaimResult, evaluate_claims
from washout.stats.compare import Comparison, compare_tests
from washout.stats.drift import WANDER, drift
from washout.stats.family import adjust
from washout.stats.order import analyze_order

ALPHA = 0.05
TESTS = 5
RUNS = 20
TRIAL_CV = 0.01  # 1% trial-to-trial noise unless a scenario says otherwise
SIZES = (5, 10, 20, 50, 100, 200)  # runs per order kind
FIVE = ("a", "b", "c", "d", "e")
EIGHT = ("a", "b", "c", "d", "e", "f", "g", "h")
CARRIED = ("c", "b", 1)  # c right after b: the carryover scenarios' pair


@dataclass(frozen=True)
class Scenario:
    """Simulated experiments with known effects (``effects``: simulate's keywords); ``breaks``:
    the analyses whose null does not hold here (their rate is power); every other analysis'
    null holds. ``claim_true_in``: the order kinds where the scenario's CLAIM is true.
    ``weak``: effects in ``breaks`` too small to be found nearly always at the CI variant's
    size (their power is reported, not asserted). ``pairs``: the carryover the scenario puts
    there, (test, predecessor, lag). ``asymmetric``: tests whose per-run ratio to another
    test the scenario makes skewed (a carryover they receive or cause), so the ratio has no
    simple truth to cover."""

    name: str
    effects: Mapping[str, Any]
    breaks: frozenset[str]
    claim_true_in: tuple[str, ...] = ()
    weak: frozenset[str] = frozenset()
    pairs: frozenset[tuple[str, str, int]] = frozenset()
    asymmetric: frozenset[str] = frozenset()
    tests: tuple[str, ...] = field(default=FIVE)

    @property
    def means(self) -> dict[str, float]:
        """Each test's simulated mean (random-order factors included)."""
        base = self.effects.get("means") or {t: 100.0 + 10 * i for i, t in enumerate(self.tests)}
        factor = self.effects.get("random_factor", {})
        return {t: base[t] * factor.get(t, 1.0) for t in self.tests}

    @property
    def claim(self) -> str:
        """The last two tests' claim, at exactly the ratio of their nominal means (simulate's
        100, 110, ...; the scenarios that change the means keep that ratio or make the claim
        true)."""
        i = len(self.tests) - 2
        a, b = self.tests[i:]
        return f"{a} < {(100.0 + 10 * i) / (110.0 + 10 * i)!r} * {b}"

    @property
    def claim_false_in(self) -> tuple[str, ...]:
        """The order kinds where CLAIM is false (the claims analysis' null holds there)."""
        return tuple(o for o in EVALUATED_ORDERS if o not in self.claim_true_in)

    def simulate(self, runs: int, seed: int) -> pd.DataFrame:
        return simulate_longformat.simulate(
            runs=runs, seed=seed, **{"cv": TRIAL_CV, "tests": self.tests, **self.effects}
        )


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


def _claim(frame: pd.DataFrame, scenario: Scenario) -> ClaimResult:
    return _cached(
        frame,
        "claim",  # type: ignore[return-value]
        lambda f: evaluate_claims(f, [scenario.claim], alpha=ALPHA)[0],
    )


def order_verdict(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """The order analysis says order matters (some test differs between fixed and random)."""
    return analyze_order(frame, alpha=ALPHA).verdict == "order-matters"


def predecessor_pair(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """Some test is significantly shifted right after (or two positions after) another."""
    return any(p.predecessor != RESET for p in _carryover(frame).significant())


def wrong_predecessor_pair(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """A pair the scenario did not put there is blamed."""
    return any(
        p.predecessor != RESET and (p.test, p.predecessor, p.lag) not in scenario.pairs
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
    """Some test drifts (a trend) with position, time since the reset or run."""
    result = _cached(frame, "drift", lambda f: drift(f, alpha=ALPHA))
    return any(r.against != WANDER for r in result.significant())  # type: ignore[attr-defined]


def wander_found(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """Some test's level wandered across runs, not monotonically (a finding of its own: the
    machine did change, which is not a trend)."""
    result = _cached(frame, "drift", lambda f: drift(f, alpha=ALPHA))
    return any(r.against == WANDER for r in result.significant())  # type: ignore[attr-defined]


def claim_holds(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """CLAIM reported to hold in an order kind where the scenario makes it false (a false
    claim held); where it is true in both order kinds, reported to hold in both (power)."""
    result = _claim(frame, scenario)
    if scenario.claim_false_in:
        return any(getattr(result, o).holds for o in scenario.claim_false_in)
    return all(getattr(result, o).holds for o in EVALUATED_ORDERS)


def order_changes_conclusion(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """The order was reported to change CLAIM's conclusion."""
    return bool(_claim(frame, scenario).order_changes_conclusion)


def ratio_missed(frame: pd.DataFrame, scenario: Scenario) -> bool:
    """Some "F ran r times faster than T" interval (random order, paired by run,
    simultaneous over the comparisons) misses the simulated ratio T / F, among the tests
    whose ratio the scenario leaves symmetric. The ends count as inside, to rounding: with
    whole-number values an end is often the simulated ratio itself."""
    comparison: Comparison = _cached(frame, "compare", compare_tests)  # type: ignore[assignment]
    means = scenario.means
    return any(
        not math.isclose(truth := means[r.test] / means[r.fastest], r.ratio_ci[0], rel_tol=1e-9)
        and not math.isclose(truth, r.ratio_ci[1], rel_tol=1e-9)
        and not r.ratio_ci[0] <= truth <= r.ratio_ci[1]
        for r in comparison.rankings
        if r.ratio_ci is not None and not {r.test, r.fastest} & scenario.asymmetric
    )


Analysis = Callable[[pd.DataFrame, Scenario], bool]
ANALYSES: dict[str, Analysis] = {
    "order verdict": order_verdict,
    "carryover": predecessor_pair,
    "carryover, wrong pair": wrong_predecessor_pair,
    "first after reset": first_after_reset,
    "drift": drift_found,
    "wander": wander_found,
    "claims": claim_holds,
    "order changes conclusion": order_changes_conclusion,
    "times faster CI": ratio_missed,
}
CLAIMS_ANALYSES = ("claims", "order changes conclusion")
MEANS = {"a": 100.0, "b": 110.0, "c": 120.0, "d": 130.0, "e": 140.0}  # simulate's default
SMALL_MEANS = {"a": 20.0, "b": 22.0, "c": 24.0, "d": 26.0, "e": 28.0}
BOTH = frozenset({"order verdict", "carryover"})

# "claims" breaks only where CLAIM is true in both order kinds (no order where a false claim
# could hold); "order changes conclusion" only where CLAIM's truth differs between the
# orders (its per-run ratio differs, and its truth with it). The claim is d vs e with five
# tests: neither comes first in fixed runs, nor is either in the c-after-b carryover.
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
        {"drift_per_position": dict.fromkeys(FIVE, 0.01)},
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
        {"carryover": {CARRIED[:2]: 1.08}, "first_after_reset": 1.10},
        frozenset({"order verdict", "carryover", "first after reset"}),
        pairs=frozenset({CARRIED}),
        asymmetric=frozenset({"c"}),
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
    # Issue 27: a run level estimated beside the pair handed c's shift to its neighbours.
    Scenario(
        "8% c-after-b carryover under 5% run-level noise",
        {"carryover": {CARRIED[:2]: 1.08}, "run_cv": 0.05},
        BOTH,
        pairs=frozenset({CARRIED}),
        asymmetric=frozenset({"c"}),
        weak=frozenset({"carryover"}),
    ),
    # Lag 2 raises the later positions, which drift cannot tell from a trend (power, weak);
    # in fixed order b runs two before d, so d is slower there and the claim false.
    Scenario(
        "b slows the test two positions later by 8% (lag 2)",
        {"carryover2": {(t, "b"): 1.08 for t in FIVE if t != "b"}},
        BOTH | {"drift"},
        pairs=frozenset((t, "b", 2) for t in FIVE if t != "b"),
        asymmetric=frozenset({"b"}),
        weak=frozenset({"carryover", "drift"}),
    ),
    # The wander is found in about a third to a half of experiments (bench/RESULTS.md, drift
    # calibration): weak; what must hold is that it is not taken for a trend.
    Scenario(
        "a machine state that wanders (AR(1), 3%, phi 0.98)",
        {"machine_ar1": (0.98, 0.03)},
        frozenset({"wander"}),
        weak=frozenset({"wander"}),
    ),
    Scenario("heavy tails: lognormal noise, sigma 0.3", {"lognormal": 0.3}, frozenset()),
    Scenario(
        "whole-number values with ties (means 20-28, 3% noise)",
        {"means": SMALL_MEANS, "cv": 0.03, "integer": True},
        frozenset(),
    ),
    Scenario(
        "10% failed trials, 20% of runs cut short",
        {"failed": 0.10, "short_runs": 0.20},
        frozenset(),
    ),
    Scenario("2 tests, no effect", {}, frozenset(), tests=("a", "b")),
    # a runs first in fixed order: 10% slower there, so the claim a < b/1.1 is false there.
    Scenario(
        "2 tests, first trial 10% slower, 5% run-level noise",
        {"first_after_reset": 1.10, "run_cv": 0.05},
        frozenset({"order verdict", "first after reset"}),
        tests=("a", "b"),
        weak=frozenset({"order verdict"}),  # 10 runs: a 5% shift under 5% run noise
    ),
    Scenario("8 tests, no effect", {}, frozenset(), tests=EIGHT),
    Scenario(
        "8 tests, 8% c-after-b carryover under 5% run-level noise",
        {"carryover": {CARRIED[:2]: 1.08}, "run_cv": 0.05},
        BOTH,
        pairs=frozenset({CARRIED}),
        asymmetric=frozenset({"c"}),
        tests=EIGHT,
        weak=frozenset({"carryover"}),
    ),
)
SCENARIO = {s.name: s for s in SCENARIOS}


def finding_rates(
    scenario: Scenario,
    runs: int,
    experiments: int,
    seed: int,
    analyses: tuple[str, ...] = tuple(ANALYSES),
) -> dict[str, float]:
    """Per analysis (every one, or ``analyses``), the share of ``experiments`` simulated
    experiments (seeds seed, seed + 1, ...) in which it reported a finding. On one BLAS
    thread: the least squares are small, and threads only wait for each other."""
    from threadpoolctl import threadpool_limits

    found = dict.fromkeys(analyses, 0)
    with threadpool_limits(1):
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


def check_calibrated(
    scenario: Scenario, rates: dict[str, float], experiments: int, sigmas: float = 2.0
) -> None:
    """False positives at most alpha + ``sigmas`` MC se where a null holds; where it does
    not, the effect found nearly always (power >= 0.8) unless the scenario calls it weak."""
    bound = false_positive_bound(experiments, sigmas)
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
    [result] = evaluate_claims(frame, [drifting.claim], alpha=ALPHA)
    assert claim_holds(frame, drifting) == result.random.holds
    assert order_changes_conclusion(frame, drifting) == result.order_changes_conclusion
    [both] = [s for s in SCENARIOS if s.claim_true_in == EVALUATED_ORDERS]
    frame = both.simulate(20, seed=3)
    [result] = evaluate_claims(frame, [both.claim], alpha=ALPHA)
    assert claim_holds(frame, both) == (result.fixed.holds and result.random.holds)
    assert SCENARIO["2 tests, no effect"].claim == f"a < {100 / 110!r} * b"


def test_the_times_faster_interval_is_judged_against_the_simulated_ratio() -> None:
    """A miss is an interval that excludes mean(T) / mean(F); tests the scenario makes
    asymmetric are left out."""
    scenario = SCENARIO["e (last in fixed order) 5% faster in random orders only"]
    frame = scenario.simulate(20, seed=5)
    comparison = compare_tests(frame)
    truth = {r.test: scenario.means[r.test] / 100.0 for r in comparison.rankings}
    assert truth["e"] == pytest.approx(1.33)
    covered = all(r.ratio_ci[0] <= truth[r.test] <= r.ratio_ci[1] for r in comparison.rankings)
    assert ratio_missed(frame, scenario) == (not covered)
    wrong = Scenario("wrong truth", {}, frozenset(), asymmetric=frozenset())
    assert ratio_missed(scenario.simulate(20, seed=5), wrong)  # e's 5% is outside every CI


CI_CELLS: tuple[tuple[str, int], ...] = (
    ("no effect", 10),
    ("first trial after the reset 10% slower", 20),
    ("1% drift per position", 20),
    ("e (last in fixed order) 5% faster in random orders only", 20),
    ("5% run-level noise", 20),
    ("8% c-after-b carryover and first after reset 10% slower", 50),
    ("claim: d truly 2% faster than e under 5% shared run noise", 20),
    (
        "claim whose ratio truly differs between orders: d 2% faster in random order "
        "only, 5% shared run noise",
        20,
    ),
    ("8% c-after-b carryover under 5% run-level noise", 200),
    ("b slows the test two positions later by 8% (lag 2)", 200),
    ("a machine state that wanders (AR(1), 3%, phi 0.98)", 20),
    ("heavy tails: lognormal noise, sigma 0.3", 20),
    ("whole-number values with ties (means 20-28, 3% noise)", 20),
    ("10% failed trials, 20% of runs cut short", 20),
    ("2 tests, no effect", 10),
    ("2 tests, first trial 10% slower, 5% run-level noise", 10),
    ("8 tests, no effect", 20),
    ("8 tests, 8% c-after-b carryover under 5% run-level noise", 50),
)
"""The short variant: each scenario at the size where its cell broke most (the leak of a real
pair and lag 2 grow with the runs: 35% and 67% of experiments at 200 before issue 27; the
quick form's 10 runs for the small ones), CI_EXPERIMENTS each, against alpha + CI_SIGMAS
Monte-Carlo standard errors: an analysis exactly at alpha (a claim on its boundary) exceeds
3 by chance in about one of 18 cells (8 of 50 experiments: 1.2% each), so a seed change
would fail it; a broken cell (the issue's 16-67%) is still far above 4. The full table
(bench/calibration.py) holds every cell to 2. Some 2.5 min of one core.

Measured on these seeds (2026-11-27, 50 experiments a cell, bound 0.173): the pair leaked
beside a real c-after-b under run-level noise ("carryover, wrong pair") 0.04 at 200 runs
(five tests) and 0.00 at 50 (eight tests), the first trial after the reset 0.00 in both;
under lag 2 at 200 runs a wrong pair (lag 1, or lag 2 of another predecessor) 0.04 and the
first trial after the reset 0.00; every other carryover and first-after-reset rate 0.00-0.04,
but 0.08 for the first trial after the reset with two tests at 10 runs. Above alpha + 2 se
(0.112) but under the bound: claims 0.12 (no effect, 10 runs), 0.16 (heavy tails), the
times-faster interval 0.10 (eight tests, a real pair, 50 runs) and drift
0.12-0.16 before drift's exact p and wander finding; after them (re-measured 2026-11-27 on the
same seeds) a trend 0.00-0.08 where none is, 0.04 under the wandering machine, whose wander
is found in 0.30 (weak at 20 runs) and is reported in 0.00-0.04 elsewhere. The full
table (bench/RESULTS.md) found one cell above its bound that this variant cannot see: lag 2
at 50 runs, a lag-2 pair of another predecessor blamed in 0.097 of experiments."""
CI_EXPERIMENTS, CI_SIGMAS = 50, 4.0


@pytest.mark.parametrize(("name", "runs"), CI_CELLS, ids=[f"{n} @{r}" for n, r in CI_CELLS])
def test_every_analysis_keeps_alpha_where_its_null_holds_and_finds_what_is_there(
    name: str, runs: int
) -> None:
    scenario = SCENARIO[name]
    seed = 7000 + 1000 * SCENARIOS.index(scenario) + runs
    rates = finding_rates(scenario, runs, CI_EXPERIMENTS, seed)
    check_calibrated(scenario, rates, CI_EXPERIMENTS, CI_SIGMAS)


def test_every_scenario_has_a_ci_cell() -> None:
    assert sorted(n for n, _ in CI_CELLS) == sorted(SCENARIO)


CLAIMS_RUNS, CLAIMS_EXPERIMENTS = 20, 200


@pytest.mark.parametrize("scenario", SCENARIOS[:8], ids=[s.name for s in SCENARIOS[:8]])
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
