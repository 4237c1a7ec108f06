"""Knee and turning points of a coefficient curve, and the turn ratio that ranks them.

As the paper's published code does it (Hui et al., SIGMOD 2024; docs/sweep-method.md §7),
threshold 0.8. Note: not "Spearman = +-1" and a change ">= 1", as one might read it; the code
uses |rho| >= 0.98 for a monotone curve and a Spearman difference > 0.8 for a turning point,
and this module follows the code, since its results are what we compare with.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

MONOTONE_RHO = 0.98
TURNING_DIFFERENCE = 0.8


@dataclass(frozen=True)
class CurvePoint:
    """A knee or turning point on one curve; ``rho_low``/``rho_high`` are NaN for a knee."""

    kind: str  # "knee" | "turning"
    value: float
    rho: float
    rho_low: float
    rho_high: float
    turn_ratio: float

    @property
    def delta_spearman(self) -> float:
        """|rho_low - rho_high|; the paper stores -888 for a knee, so a knee ranks as huge."""
        return np.inf if self.kind == "knee" else abs(self.rho_low - self.rho_high)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.spearmanr(x, y).statistic)


def turn_ratio(x: np.ndarray, y: np.ndarray, at: float) -> float:
    """|(m2 - m1) / m1| for least-squares slopes m1 on x <= at and m2 on x >= at (scipy
    linregress)."""
    low, high = x <= at, x >= at
    if low.sum() < 2 or high.sum() < 2:
        return np.nan
    m1 = stats.linregress(x[low], y[low]).slope
    m2 = stats.linregress(x[high], y[high]).slope
    if m1 == 0:
        return np.nan
    return float(abs((m2 - m1) / m1))


def knee(x: np.ndarray, y: np.ndarray, rho: float) -> float | None:
    """Kneedle (kneed.KneeLocator, online) on a monotone curve; convex-decreasing if rho < 0."""
    from kneed import KneeLocator

    curve, direction = ("convex", "decreasing") if rho < 0 else ("concave", "increasing")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = KneeLocator(x, y, curve=curve, direction=direction, online=True).knee
    return None if found is None else float(found)


def turning(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float] | None:
    """The interior split d maximizing |rho(x <= d) - rho(x >= d)| (first on ties), if > 0.8."""
    best: tuple[float, float, float] | None = None
    best_diff = -np.inf
    for d in x[1:-1]:
        lo, hi = x <= d, x >= d
        r_lo, r_hi = _spearman(x[lo], y[lo]), _spearman(x[hi], y[hi])
        diff = abs(r_lo - r_hi)
        if np.isfinite(diff) and diff > best_diff:
            best_diff, best = diff, (float(d), r_lo, r_hi)
    if best is None or best_diff <= TURNING_DIFFERENCE:
        return None
    return best


def curve_point(x: np.ndarray, y: np.ndarray) -> CurvePoint | None:
    """The important point of a curve (x ascending), or None (fewer than 3 levels, none found)."""
    order = np.argsort(x, kind="stable")
    x, y = np.asarray(x, dtype=float)[order], np.asarray(y, dtype=float)[order]
    if len(np.unique(x)) < 3:
        return None
    rho = _spearman(x, y)
    if not np.isfinite(rho):
        return None
    if abs(rho) >= MONOTONE_RHO:
        at = knee(x, y, rho)
        if at is None:
            return None
        return CurvePoint("knee", at, rho, np.nan, np.nan, turn_ratio(x, y, at))
    found = turning(x, y)
    if found is None:
        return None
    at, r_lo, r_hi = found
    return CurvePoint("turning", at, rho, r_lo, r_hi, turn_ratio(x, y, at))
