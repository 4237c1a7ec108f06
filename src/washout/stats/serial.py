"""One test's metric in run order: a monotone trend that survives a wandering level, and the
wander itself.

A machine's state can wander over an experiment without a trend (other jobs, thermal
state, background daemons): successive runs are then alike, and over a window of a few of
its correlation times such a level looks like a trend to a rank correlation, which assumes
independent runs (a stationary AR(1) machine state gave "drift with the run index" in half
of the simulated experiments; issue 27). So the two questions are asked apart, both on the
ranks of the values (Conover & Iman 1981, "Rank transformations as a bridge between
parametric and nonparametric statistics", Am. Statist. 35(3)), so a few outliers cannot
make either:

- **Trend** (:func:`trend_p`): the least-squares slope of the ranks on the run index,
  studentised by Kiefer, Vogelsang & Bunzel (2000, "Simple robust testing of regression
  hypotheses", Econometrica 68(3), 695-714): t* = b sqrt(n) Q / sqrt(C), Q = sum(t_c^2) / n
  for the centred run index t_c, C = n^-2 sum_t S_t^2 with the partial sums
  S_t = sum_{j <= t} t_c,j u_j of the residuals u. Its normalisation needs no estimate of
  the autocorrelation, which keeps it from being fooled by a persistent level as a
  studentised slope with an estimated correlation is. Its null distribution comes from a
  sieve bootstrap (Buhlmann 1997, "Sieve bootstrap for time series", Bernoulli 3(2)) of an
  AR(1) fitted under the null, to the ranks without a trend (a restricted bootstrap:
  Davidson & MacKinnon 1999, "The size distortion of bootstrap tests", Econometric Theory
  15(3)): phi their lag-1 autocorrelation (within [0, ``PHI_MAX``]), the innovations
  resampled from its residuals, each bootstrap series ranked again as the data were; p is
  sequential Monte Carlo (:mod:`washout.stats.resampling`). Fitted without the trend, phi
  takes in all the persistence the data show, so a wander cannot pass for a trend; a true
  trend raises phi too, which costs some power. (What else was tried, and how it fared,
  is in bench/RESULTS.md, "Calibration of the drift analysis": Hamed & Rao's (1998)
  corrected Mann-Kendall test and a studentised slope with estimated autocorrelation let
  the wandering machine through; a phi fitted after removing the trend, even
  median-unbiased as Andrews 1993 makes it, too.)
- **Wander** (:func:`wander_p`): after the best monotone fit through the ranks (any steady
  trend, of any shape, taken out), are successive runs more alike than chance? The von
  Neumann ratio of the residuals, sum (u_t - u_{t-1})^2 / sum u_t^2 (von Neumann 1941, Ann.
  Math. Statist. 12(4); on ranks: Bartels 1982, "The rank version of von Neumann's ratio
  test for randomness", JASA 77(377)), small when neighbours are alike; its p is by
  permutation of the runs, exact when the runs are exchangeable (every level independent
  and alike), whatever the distribution. Around a monotone trend with independent noise
  the residuals are not more alike than chance (a monotone fit leaves its residuals
  slightly anti-correlated), so a trend alone, straight or curved, is not a wander; a
  straight line would leave a curved trend's bend as a slow residual. :func:`slow_sd` says
  how much: the standard deviation of the slowly varying part of the (log) level around
  its monotone fit, var(u) - (mean squared successive difference) / 2 (von Neumann's
  decomposition: the successive differences hold twice the fast variance and almost none
  of the slow).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from washout.stats.resampling import permutation_p, sequential_p

if TYPE_CHECKING:
    import numpy as np

PHI_MAX = 0.999
"""The most persistent AR(1) the trend test's null considers (0.999: nearly a random walk)."""


def ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis, from 1: a run of ties in the sorted values, at
    0-based positions s..e, shares the rank (s + e) / 2 + 1; a slice with a NaN is all NaN
    (``scipy.stats.rankdata``'s default ``nan_policy="propagate"``, against which it is
    tested). Here rather than ``rankdata`` because importing ``scipy.stats`` takes ~0.65 s,
    the largest part of a quick form's summary (bench/RESULTS.md, "Start-up")."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.shape[-1:] == (0,):
        return v.copy()
    order = np.argsort(v, axis=-1, kind="stable")
    ordered = np.take_along_axis(v, order, axis=-1)
    at = np.broadcast_to(np.arange(v.shape[-1]), v.shape)
    new = np.ones(v.shape, dtype=bool)  # the first of its run of ties
    new[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    last = np.roll(new, -1, axis=-1)  # the last of its run
    last[..., -1] = True
    start = np.maximum.accumulate(np.where(new, at, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, at, v.shape[-1]), -1), axis=-1), -1)
    out = np.empty(v.shape)
    np.put_along_axis(out, order, (start + end) / 2.0 + 1.0, axis=-1)
    return np.where(np.isnan(v).any(axis=-1, keepdims=True), np.nan, out)


def kvb_t(series: np.ndarray, clock: np.ndarray) -> np.ndarray:
    """Kiefer, Vogelsang & Bunzel's t* of each row's least-squares slope on ``clock`` (module
    doc); +-inf for a row exactly on its line, NaN for a constant row."""
    import numpy as np

    n = series.shape[-1]
    tc = clock - clock.mean()
    yc = series - series.mean(axis=-1, keepdims=True)
    sxx = float(tc @ tc)
    slope = (yc @ tc) / sxx
    partial = np.cumsum(tc * (yc - np.multiply.outer(slope, tc)), axis=-1)
    c = np.sum(partial * partial, axis=-1) / n**2
    with np.errstate(divide="ignore", invalid="ignore"):
        return slope * math.sqrt(n) * (sxx / n) / np.sqrt(c)


def lag1(series: np.ndarray) -> np.ndarray:
    """The lag-1 autocorrelation of each row, sum c_t c_{t-1} / sum c_t^2 (c centred)."""
    import numpy as np

    c = series - series.mean(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sum(c[..., 1:] * c[..., :-1], axis=-1) / np.sum(c * c, axis=-1)


def ar1(phi: float, shocks: np.ndarray) -> np.ndarray:
    """Stationary AR(1) series x_t = phi x_{t-1} + e_t from the rows of ``shocks`` (k, n + 1):
    the first column starts each series from its stationary spread, e / sqrt(1 - phi^2).
    The recursion step by step over the series' columns, all rows at once: the filter
    ``scipy.signal.lfilter([1], [1, -phi], ...)`` computes (tested equal to it), without
    importing ``scipy.signal`` (~0.75 s, the largest part of a quick form's summary)."""
    import numpy as np

    steps = np.array(shocks.T, order="C")  # a time step's values side by side, a copy
    level = phi * steps[0] / math.sqrt(1.0 - phi * phi)
    for t in range(1, len(steps)):
        steps[t] += level
        level = phi * steps[t]
    return np.ascontiguousarray(steps[1:].T)


def trend_p(
    values: np.ndarray, clock: np.ndarray, rng: np.random.Generator, max_draws: int
) -> float:
    """Two-sided p-value of a monotone trend of ``values`` (in run order) with ``clock`` (their
    run indices) against a stationary, possibly wandering level (module doc); 1 when the
    values do not vary."""
    import numpy as np

    r = ranks(np.asarray(values, dtype=float))
    t = np.asarray(clock, dtype=float)
    if np.ptp(r) == 0:
        return 1.0
    observed = abs(float(kvb_t(r[None, :], t)[0]))
    phi = min(max(float(lag1(r[None, :])[0]), 0.0), PHI_MAX)
    c = r - r.mean()
    innovations = c[1:] - phi * c[:-1]
    innovations -= innovations.mean()

    def draw(k: int) -> np.ndarray:
        series = ar1(phi, rng.choice(innovations, size=(k, len(r) + 1)))
        return np.nan_to_num(np.abs(kvb_t(ranks(series), t)), nan=0.0)

    return sequential_p(draw, observed, max_draws)


def monotone_residuals(series: np.ndarray) -> np.ndarray:
    """Each row minus its least-squares monotone fit (isotonic regression by
    pool-adjacent-violators: Barlow, Bartholomew, Bremner & Brunk 1972, "Statistical
    inference under order restrictions"; ``scipy.optimize.isotonic_regression``), increasing
    or decreasing as the row's least-squares slope on its index: what is left when any
    steady trend, of any shape, is taken out."""
    import numpy as np
    from scipy.optimize import isotonic_regression

    rows = np.atleast_2d(np.asarray(series, dtype=float))
    index = np.arange(rows.shape[-1]) - (rows.shape[-1] - 1) / 2
    rising = rows @ index >= 0
    fits = [isotonic_regression(row, increasing=bool(up)).x for row, up in zip(rows, rising)]
    return rows - np.array(fits)


def von_neumann(residuals: np.ndarray) -> np.ndarray:
    """The von Neumann ratio of each row, sum (u_t - u_{t-1})^2 / sum u_t^2; 2 (no serial
    correlation) for a row of zeros."""
    import numpy as np

    squares = np.sum(residuals * residuals, axis=-1)
    steps = np.sum(np.diff(residuals, axis=-1) ** 2, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(squares > 0, steps / squares, 2.0)


def wander_p(values: np.ndarray, rng: np.random.Generator, max_draws: int) -> float:
    """One-sided permutation p-value that successive runs are more alike than exchangeable
    runs would be, around the best monotone fit of the ranks (module doc); ``values`` in
    run order."""
    import numpy as np

    r = ranks(np.asarray(values, dtype=float))
    return permutation_p(lambda rows: -von_neumann(monotone_residuals(rows)), r, rng, max_draws)


def slow_sd(values: np.ndarray) -> float:
    """How much the level wanders: the standard deviation of the slowly varying part of the
    log values (of values / |mean| when some are not positive; in run order) around their
    best monotone fit, as var - msd / 2 (module doc), as a fraction (0.02: about 2%); 0 when
    the successive differences account for all the spread."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    scaled = np.log(v) if np.all(v > 0) else v / (abs(float(np.mean(v))) or 1.0)
    u = monotone_residuals(scaled)[0]
    slow = float(np.mean(u * u)) - float(np.mean(np.diff(u) ** 2)) / 2
    return math.sqrt(slow) if slow > 0 else 0.0
