"""The bisect's decisions: two one-sided tests against scipy, the spending of alpha over looks
and steps, and their error rates calibrated by simulation (with an order effect present)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm, wilcoxon

from washout.stats.equivalence import (
    check_change,
    decide_step,
    expected_steps,
    look_levels,
    look_runs,
    paired_estimate,
    spent,
    step_alpha,
)


@pytest.mark.parametrize("n", [9, 14, 23, 40])
def test_the_interval_inside_the_margin_is_two_one_sided_signed_rank_tests(n: int) -> None:
    """Equivalence by the 1 - 2a interval (Berger & Hsu 1996) is exactly both one-sided
    Wilcoxon tests of Schuirmann's TOST rejecting at a, with scipy's exact p-values."""
    rng = np.random.default_rng(n)
    margin, level = 0.02, 0.025
    agree = 0
    for _ in range(300):
        x = rng.normal(rng.uniform(-0.03, 0.03), 0.02, n)
        bounds = paired_estimate(x, 1 - 2 * level).log_bounds
        inside = bounds is not None and -margin < bounds[0] and bounds[1] < margin
        below = wilcoxon(x - margin, alternative="less", method="exact").pvalue <= level
        above = wilcoxon(x + margin, alternative="greater", method="exact").pvalue <= level
        assert inside == (below and above)
        agree += inside
    assert 0 < agree < 300  # both answers were exercised


def test_the_spending_function_is_lan_demets_pocock_type() -> None:
    """alpha ln(1 + (e - 1) t): 0 at t = 0, alpha at t = 1, increasing; the looks' levels
    are its increments and add up to alpha."""
    assert spent(0.05, 0.0) == 0.0
    assert spent(0.05, 1.0) == pytest.approx(0.05)
    assert spent(0.05, 0.5) == pytest.approx(0.05 * math.log(1 + (math.e - 1) * 0.5))
    levels = look_levels(0.05, 10, 60)
    assert look_runs(10, 60) == [10, 20, 30, 40, 50, 60]
    assert sum(levels) == pytest.approx(0.05)
    assert all(a > b > 0 for a, b in zip(levels, levels[1:]))  # front-loaded
    assert look_runs(10, 25) == [10, 20, 25]
    assert sum(look_levels(0.05, 10, 25)) == pytest.approx(0.05)


def test_the_steps_share_alpha_without_exceeding_it() -> None:
    """K + 2 equal shares, the last one split over every further step: over any number of
    steps the shares sum to at most alpha (and tend to it)."""
    k = expected_steps(63)
    assert k == 6
    shares = [step_alpha(0.05, j, 63) for j in range(0, 10_000)]
    assert shares[0] == shares[k] == pytest.approx(0.05 / (k + 2))
    assert shares[k + 1] == pytest.approx(0.05 / (k + 2) / 2)
    assert sum(shares) <= 0.05
    assert sum(shares) == pytest.approx(0.05, rel=1e-3)


def _step(
    rng: np.random.Generator, n: int, candidate: float, change: float, carry: float, df: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-run x = log(c / g), y = log(c / b) of n runs of three builds in random orders:
    trial noise (normal, or Student t with ``df`` degrees of freedom; sd 1%), shared run
    noise (which cancels, so it is left out), and an order effect: a trial right after a
    trial of another build is ``carry`` slower (a switch between builds costs)."""
    effects = np.array([0.0, candidate, change])  # g, c, b
    x, y = np.empty(n), np.empty(n)
    for r in range(n):
        noise = (
            rng.normal(0.0, 0.01, 3)
            if math.isinf(df)
            else (rng.standard_t(df, 3) * 0.01 / math.sqrt(df / (df - 2)))
        )
        value = effects + noise
        value[rng.permutation(3)[1:]] += carry  # every build but the run's first follows another
        x[r], y[r] = value[1] - value[0], value[1] - value[2]
    return x, y


def _rates(
    candidate: float, change: float, df: float, sims: int, derived: bool
) -> dict[str, float]:
    """How often a sequential step (10 runs a look, up to 40, alpha 0.1, the margin half
    the change) ends with each decision, an order effect as large as the trial noise."""
    rng = np.random.default_rng(7)
    levels, looks = look_levels(0.1, 10, 40), look_runs(10, 40)
    counts = {"like-good": 0, "like-bad": 0, "unknown": 0, "not monotone": 0}
    for _ in range(sims):
        x, y = _step(rng, 40, candidate, change, 0.01, df)
        for n, level in zip(looks, levels):
            d = decide_step(x[:n], y[:n], 1.0, level, None if derived else change / 2)
            if d.final:
                break
        counts[d.decision] += 1
        counts["not monotone"] += d.apart
    return {k: v / sims for k, v in counts.items()}


@pytest.mark.parametrize("derived", [False, True], ids=["threshold", "derived"])
@pytest.mark.parametrize("df", [math.inf, 3.0], ids=["normal", "t3"])
def test_a_wrong_decision_stays_within_alpha_at_the_margin(df: float, derived: bool) -> None:
    """The hardest null of both claims: the candidate at the midpoint, exactly the margin
    from either end (a margin set, or derived per run). Under normal and heavy-tailed (t3)
    trial noise and an order effect as large as the trial noise, each claim is made at
    most alpha = 0.1 of the time over every look (+ 2 Monte-Carlo se); a candidate equal to
    one end is never called like the other, "not monotone" at most alpha of the time, and
    is decided."""
    change, sims = 0.02, 600
    at_midpoint = _rates(change / 2, change, df, sims, derived)
    se = math.sqrt(0.1 * 0.9 / sims)
    assert at_midpoint["like-good"] <= 0.1 + 2 * se
    assert at_midpoint["like-bad"] <= 0.1 + 2 * se
    good = _rates(0.0, change, df, 200, derived)
    bad = _rates(change, change, df, 200, derived)
    assert good["like-bad"] == bad["like-good"] == 0.0
    assert good["like-good"] > 0.8 and bad["like-bad"] > 0.8
    assert max(good["not monotone"], bad["not monotone"]) <= 0.1 + 2 * math.sqrt(0.09 / 200)


@pytest.mark.parametrize("margin", [0.05, None], ids=["threshold", "derived"])
def test_a_candidate_beyond_an_end_is_final_and_not_monotone(margin: float | None) -> None:
    """Twice as slow as bad is from good: beyond bad by a whole change."""
    rng = np.random.default_rng(3)
    x, y = _step(rng, 20, 0.2, 0.1, 0.0, math.inf)
    d = decide_step(x, y, 1.0, 0.01, margin)
    assert (d.decision, d.final, d.apart) == ("unknown", True, True)
    assert "beyond bad" in d.reason
    x, y = _step(rng, 20, -0.1, 0.1, 0.0, math.inf)
    assert "beyond good" in decide_step(x, y, 1.0, 0.01, margin).reason


def test_too_few_runs_give_no_interval_and_no_decision() -> None:
    x = np.array([0.0, 0.001, -0.001])
    d = decide_step(x, x - 0.1, 1.0, 0.001, 0.05)
    assert (d.decision, d.final) == ("unknown", False)
    assert "too few runs" in d.reason


def test_the_check_finds_a_change_and_keeps_alpha_without_one() -> None:
    """Good against bad: 'differ' when the change is there; under no change it is claimed
    at most at the level (two-sided 2 x level), normal noise."""
    rng = np.random.default_rng(11)
    level, sims = 0.05, 2000
    false = sum(
        check_change(rng.normal(0, 0.014, 12), level, None).verdict == "differ" for _ in range(sims)
    )
    assert false / sims <= 2 * level + 2 * math.sqrt(2 * level * (1 - 2 * level) / sims)
    assert check_change(rng.normal(0.03, 0.014, 12), level, None).verdict == "differ"
    same = check_change(rng.normal(0.0, 0.002, 30), level, 0.02)
    assert same.verdict == "same"


def test_the_normal_quantile_behind_the_step_level_is_what_the_docs_say() -> None:
    """At 64 commits and alpha 0.05 the first look of a step is at about 0.00157 one-sided
    (docs/bisect.md), i.e. z close to 2.95."""
    level = look_levels(step_alpha(0.05, 1, 63), 10, 60)[0]
    assert level == pytest.approx(0.00157, rel=0.02)
    assert norm.isf(level) == pytest.approx(2.95, abs=0.02)
