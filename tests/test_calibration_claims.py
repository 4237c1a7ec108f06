"""Calibration of the claims analyses: a false claim is reported to hold, and "the order
changes the conclusion" fires, in at most alpha of experiments where that is not so (+2
Monte-Carlo standard errors), also when other effects (first trial after the reset slower,
drift with position, another test faster in random order) are present; and a true 2%
advantage under shared run noise is found.

Each scenario is five tests a..e (fixed order a, b, c, d, e) simulated by
:func:`simulate_longformat.simulate` with 5% run-level noise shared by a run's trials over
1% trial noise, plus the scenario's effect, and one claim whose truth in each order is known
from the simulation. The full-size table (>= 400 experiments at 20, 50, 100 and 200 runs
per order) is ``bench/calibration_claims.py``; this is its short seeded variant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pytest

from simulate_longformat import simulate
from washout.stats.claims import EVALUATED_ORDERS, evaluate_claims

ALPHA = 0.05
TESTS: tuple[str, ...] = ("a", "b", "c", "d", "e")
NOISE: dict[str, float] = {"cv": 0.01, "run_cv": 0.05}


@dataclass(frozen=True)
class Scenario:
    """A simulated experiment and a claim whose truth is known: ``true_in`` the order kinds
    where it holds; ``changes`` whether its per-run ratio differs between the orders and
    its truth with it (the only case where "the order changes the conclusion" is right)."""

    name: str
    claim: str
    true_in: tuple[str, ...]
    changes: bool
    effects: dict[str, Any] = field(default_factory=dict)

    @property
    def false_in(self) -> tuple[str, ...]:
        """The order kinds where the claim is false (its null holds there)."""
        return tuple(o for o in EVALUATED_ORDERS if o not in self.true_in)

    def frame(self, runs: int, seed: int) -> pd.DataFrame:
        """One simulated experiment of this scenario."""
        return simulate(tests=TESTS, means={t: 100.0 for t in TESTS} | self.effects.get(
            "means", {}), runs=runs, seed=seed, **NOISE,
            **{k: v for k, v in self.effects.items() if k != "means"})


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("a) no effect", "a < b", (), False),
    Scenario("b) a truly 2% faster than b", "a < b", EVALUATED_ORDERS, False,
             {"means": {"a": 98.0}}),
    # a 2% faster in random runs only: "a < b" is false in fixed order, true in random.
    Scenario("c) a 2% faster in random order only", "a < b", ("random",), True,
             {"random_factor": {"a": 0.98}}),
    # b (position 1) and c (position 2) never come first in fixed runs; in random runs
    # either does as often: the per-run ratio b/c is centred on 1 in both orders.
    Scenario("d) first trial after the reset 10% slower", "b < c", (), False,
             {"first_after_reset": 1.1}),
    # Fixed runs put b one position before c: 1.01 / 1.02, b truly 1% faster there only.
    Scenario("e) 1% drift per position", "b < c", ("fixed",), True,
             {"drift_per_position": {t: 0.01 for t in TESTS}}),
    Scenario("f) e 5% faster in random orders only", "a < b", (), False,
             {"random_factor": {"e": 0.95}}),
)


@dataclass(frozen=True)
class Outcome:
    """What the claims analysis reported on one experiment."""

    false_holds: bool  # the claim holds in an order kind where it is false
    true_holds: bool  # it holds in every order kind where it is true
    changes: bool  # order_changes_conclusion


def outcome(scenario: Scenario, frame: pd.DataFrame) -> Outcome:
    """Evaluate the scenario's claim on one experiment."""
    [result] = evaluate_claims(frame, [scenario.claim], alpha=ALPHA)
    holds = {o: getattr(result, o).holds for o in EVALUATED_ORDERS}
    return Outcome(
        false_holds=any(holds[o] for o in scenario.false_in),
        true_holds=all(holds[o] for o in scenario.true_in),
        changes=bool(result.order_changes_conclusion),
    )


def claim_holds(claim: str, orders: Sequence[str]) -> Callable[[pd.DataFrame], bool]:
    """``frame -> bool``: the claim was reported to hold in one of ``orders``."""
    def reported(frame: pd.DataFrame) -> bool:
        [result] = evaluate_claims(frame, [claim], alpha=ALPHA)
        return any(getattr(result, o).holds for o in orders)
    return reported


def order_changes_conclusion(claim: str) -> Callable[[pd.DataFrame], bool]:
    """``frame -> bool``: the order was reported to change the claim's conclusion."""
    def reported(frame: pd.DataFrame) -> bool:
        [result] = evaluate_claims(frame, [claim], alpha=ALPHA)
        return bool(result.order_changes_conclusion)
    return reported


def rates(scenario: Scenario, runs: int, experiments: int, seed: int) -> dict[str, float]:
    """Fractions of ``experiments`` seeded experiments: a false claim held ("false_holds",
    when the claim is false in some order), the true claim held ("true_holds", when true in
    some order), and the order changed the conclusion ("changes")."""
    found = [outcome(scenario, scenario.frame(runs, seed=seed * 1_000_003 + e))
             for e in range(experiments)]
    out = {"changes": sum(o.changes for o in found) / experiments}
    if scenario.false_in:
        out["false_holds"] = sum(o.false_holds for o in found) / experiments
    if scenario.true_in:
        out["true_holds"] = sum(o.true_holds for o in found) / experiments
    return out


def bound(experiments: int) -> float:
    """alpha + 2 Monte-Carlo standard errors of a rate whose truth is alpha."""
    return ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / experiments)


def test_the_functions_the_calibration_table_uses_agree_with_outcome() -> None:
    s = SCENARIOS[4]
    frame = s.frame(20, seed=3)
    got = outcome(s, frame)
    assert claim_holds(s.claim, s.false_in)(frame) == got.false_holds
    assert claim_holds(s.claim, s.true_in)(frame) == got.true_holds  # one true order here
    assert order_changes_conclusion(s.claim)(frame) == got.changes


EXPERIMENTS = 200


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name[:1] for s in SCENARIOS])
def test_calibrated_at_20_runs_per_order(scenario: Scenario) -> None:
    """The nulls stay at alpha (+2 MC se); the true 2% advantage under shared run noise is
    found nearly always (an unpaired test found it in 16% of such experiments)."""
    got = rates(scenario, 20, EXPERIMENTS, seed=20 + SCENARIOS.index(scenario))
    limit = bound(EXPERIMENTS)
    if scenario.false_in:
        assert got["false_holds"] <= limit, got
    if not scenario.changes:
        assert got["changes"] <= limit, got
    if scenario.true_in == EVALUATED_ORDERS:
        assert got["true_holds"] >= 0.95, got
    if scenario.name.startswith("c"):
        assert got["true_holds"] >= 0.8 and got["changes"] >= 0.5, got
