"""Knee and turning points, ranking, fair ranges and the sample-vs-full comparison."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CONFIGSPACES as FIXTURES
from kneed import KneeLocator

from washout.sweep.anova import fit_anova
from washout.sweep.conclusions import Conclusions, compare, conclude, fair_ranges, points_json
from washout.sweep.points import CurvePoint, curve_point, turn_ratio
from washout.sweep.space import load_space_csv


def test_monotone_concave_curve_gets_kneedles_knee() -> None:
    x = np.array([2.0, 4, 8, 16, 32, 64])
    y = np.array([10.0, 30, 42, 46, 47, 47.5])
    point = curve_point(x, y)
    expected = KneeLocator(x, y, curve="concave", direction="increasing", online=True).knee
    assert point is not None and point.kind == "knee"
    assert point.value == expected == 8.0


def test_decreasing_curve_uses_convex_decreasing() -> None:
    x = np.array([1.0, 2, 3, 4, 5, 6, 7])
    y = np.array([100.0, 40, 20, 12, 9, 8, 7.5])
    point = curve_point(x, y)
    expected = KneeLocator(x, y, curve="convex", direction="decreasing", online=True).knee
    assert point is not None and point.kind == "knee" and point.value == expected
    assert point.rho == pytest.approx(-1.0)


def test_peak_is_a_turning_point_with_its_turn_ratio() -> None:
    x = np.arange(1.0, 8.0)
    y = np.array([1.0, 2, 3, 4, 3, 2, 1])
    point = curve_point(x, y)
    assert point == CurvePoint("turning", 4.0, point.rho, 1.0, -1.0, 2.0)
    # slopes 1 before and -1 after: |(-1 - 1) / 1| = 2
    assert turn_ratio(x, y, 4.0) == pytest.approx(2.0)


def test_no_point_below_three_levels_or_without_a_clear_turn() -> None:
    assert curve_point(np.array([1.0, 2.0]), np.array([1.0, 5.0])) is None
    # rho = 0.8 overall (not monotone); best split difference is 0.5 (< 0.8): no point
    x = np.arange(1.0, 7.0)
    y = np.array([1.0, 3, 2, 4, 3.5, 5])
    assert curve_point(x, y) is None


def test_silo_full_conclusions_are_consistent() -> None:
    space = load_space_csv(FIXTURES / "silo_ycsb.csv", "tput")
    space.y = space.y / space.numeric_levels(0)[space.codes[:, 0]]  # the paper: per thread
    fit = fit_anova(space.codes, space.y, space.n_levels)
    c = conclude(fit, space)
    assert compare(c, c) == {"terms_changed": 0.0, "points_mismatch": 0.0, "points_moved": 0.0}
    assert set(c.shares) == set(fit.terms)
    assert c.important == {t for t, s in c.shares.items() if s >= 0.10}
    points = points_json(c, space)
    assert points, "silo's keys curve has a knee"
    ranks = [p.share * (p.turn_ratio or 0) for p in points]
    assert ranks == sorted(ranks, reverse=True)
    ranges = fair_ranges(space, c)
    for p in points:
        segments = ranges[p.parameter]
        assert [s for s in segments if s[1] == p.value] and [s for s in segments if s[0] == p.value]
    keys = space.parameters.index("keys")
    lo, hi = min(space.levels[keys]), max(space.levels[keys])
    assert ranges["keys"][0][0] == lo and ranges["keys"][-1][1] == hi


def _conclusions(points: dict, shares: dict) -> Conclusions:
    weights = {t: 1 if len(t) == 1 else 4 for t in shares}
    return Conclusions(["a", "b", "c"], shares, points, weights)


def test_comparison_counts_as_the_paper_does() -> None:
    knee = CurvePoint("knee", 3.0, 1.0, np.nan, np.nan, 1.0)
    turn = CurvePoint("turning", 3.0, 0.1, 1.0, -1.0, 1.0)
    full = _conclusions(
        {((0,), 0, None): knee, ((1,), 1, None): turn, ((0, 1), 1, (0, 1)): knee},
        {(0,): 0.5, (1,): 0.2, (0, 1): 0.15},
    )
    # term (1,) is gone, (0,) has a turning point instead of a knee, (2,) is new with a point,
    # the interaction's curve lost its point.
    sample = _conclusions(
        {((0,), 0, None): turn, ((2,), 2, None): knee, ((0, 1), 1, (0, 1)): None},
        {(0,): 0.5, (2,): 0.3, (0, 1): 0.12},
    )
    result = compare(sample, full)
    assert result["terms_changed"] == pytest.approx(2 / 3)
    # kind differs: 1; new term with point: 1; dropped term with point: 1; lost point: 1/4
    assert result["points_mismatch"] == pytest.approx((1 + 1 + 1 + 0.25) / 3)
    assert result["points_moved"] == pytest.approx(1.0)


def test_joint_ranges_cover_both_systems_points() -> None:
    """System A saturates at x = 3, system B at x = 6: a fair comparison must cover both
    sides of both knees."""
    from washout.sweep.conclusions import joint_ranges
    from washout.sweep.explore import explore
    from washout.sweep.incremental import LoopOptions
    from washout.sweep.space import full_grid

    results, spaces = [], []
    for cap in (3.0, 6.0):
        space = full_grid(["x", "z"], [[1.0, 2, 3, 4, 5, 6, 7, 8], [0.0, 1.0, 2.0]])
        x = space.numeric_levels(0)[space.codes[:, 0]]
        z = space.codes[:, 1]
        space.y = (
            100 * np.minimum(x, cap)
            + 4 * x
            + 5 * z
            + np.random.default_rng(0).normal(0, 1, len(space))
        )
        results.append(explore(space, LoopOptions(), full=True))
        spaces.append(space)
    knees = [{p.value for p in r.important_points if p.parameter == "x"} for r in results]
    assert knees == [{3}, {6}]
    assert results[0].ranges["x"] == [[1, 3], [3, 8]]
    assert joint_ranges([r.important_points for r in results], spaces) == {
        "x": [[1, 3], [3, 6], [6, 8]]
    }
