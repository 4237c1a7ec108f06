"""How well a sweep's conclusions are known: an interval for every share of variance and
every important point, for the value the analysis of the fully measured space would give.

The settings not measured are what is unknown. Their values are drawn from the posterior
predictive distribution of the model that predicts them (the measured ones stay as
measured), and each completed space is analysed by the conclusions' ANOVA (its terms and
coding, no elimination): the spread of a share or a point over the draws is how well the
full space's share or point is known from what was measured, *given the fitted model*.
This is model-based prediction of a finite-population quantity (Valliant, Dorfman & Royall,
Finite Population Sampling and Inference: A Prediction Approach, 2000, ch. 2) with the
posterior predictive distribution (Gelman et al., Bayesian Data Analysis, 3rd ed., §6.3);
Gelman (Annals of Statistics 2005, "Analysis of variance: why it is more important than
ever") treats each ANOVA term's finite-population variance the same way.

The fitted model is itself an estimate: another sample would have chosen other penalties,
another scale, other 3-way terms, and put a misfit shared by a whole interaction cell
elsewhere; the draws, conditional on one fit, cannot show that (they covered the full
space's share in about half the cases on spaces the method was not tuned on:
bench/RESULTS.md, "Sweeps", part F). So a share's variance is the sum of the draws'
variance and the variance of the share between refits of the model (the law of total
variance: Var(share) = E[Var(share | fit)] + Var(E[share | fit])), the second estimated by
the delete-d jackknife with d = n/2: the model refitted on half-samples of the measured
settings drawn without replacement, each half-sample's share varying about the estimate as
much as the estimate varies about its expectation (Shao & Wu, Annals of Statistics 1989,
"A general theory for jackknife variance estimation", with d = n/2 their factor
(n - d) / d is 1; Efron & Tibshirani, An Introduction to the Bootstrap, 1993, §11.7;
half-samples: McCarthy, Review of the ISI 1969). The measured settings keep their values
in every completion, so a space measured whole has intervals of no width (the finite
population's correction). A share's estimate is its posterior median, its interval that
median plus or minus z times the combined standard deviation (a normal interval, clipped to
[0, 1]). Resampling with replacement instead (Efron & Tibshirani 1993, §9.5) duplicates
settings, which the leave-one-out penalty choice reads as agreement, and shifted every
share towards the dominant term; its intervals covered less (part G).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from washout.sweep.anova import (
    AnovaFit,
    Column,
    CurveKey,
    Term,
    coefficient_curves,
    replicate_fits,
)
from washout.sweep.points import curve_point
from washout.sweep.space import Space

if TYPE_CHECKING:
    from washout.sweep.models import Predictor

DRAWS = 200
"""Posterior draws: the 2.5% and 97.5% quantiles of 200 draws are within about 2
percentiles of the distribution's (binomial standard error sqrt(0.025 x 0.975 / 200) =
1.1%)."""
LEVEL = 0.95
"""The intervals' probability."""
UNDERSMOOTH = 10.0
"""The draws come from the predicting model with its penalties divided by this factor:
undersmoothing, the usual remedy for the bias a smoother's intervals ignore (Hall, Annals
of Statistics 1992; Wasserman, All of Nonparametric Statistics, 2006, §5.7). A penalty
chosen for prediction shrinks real but weakly sampled interactions, and intervals around
the shrunk fit missed the full space's shares of the main effects they inflate (silo's
keys: 71-79% against 67% in full). The factor was chosen on the tuned spaces; how far the
intervals cover on the held-out ones, and where they fall short, is in bench/RESULTS.md,
"Sweeps", part F."""
HALVES = 100
"""Half-samples behind each interval: the standard deviation of 100 varies by about 7% of
itself (sqrt(1 / (2 x 99)) for a normal spread)."""
IMPORTANT_SHARE = 0.10
"""The paper's importance cut on a term's share of variance (docs/sweep-method.md §6)."""


@dataclass(frozen=True)
class ShareSpread:
    """Where a term's share in the fully measured space lies: the interval and its median."""

    low: float
    median: float
    high: float

    @property
    def importance(self) -> str:
        """``important`` (the whole interval at or above the 10% cut), ``not important``
        (below it) or ``may be important`` (across it)."""
        if self.low >= IMPORTANT_SHARE:
            return "important"
        return "not important" if self.high < IMPORTANT_SHARE else "may be important"


@dataclass(frozen=True)
class PointSpread:
    """How often a curve has a point over the draws (``found``), and the interval of the
    level where it lies when it has one."""

    found: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Replicates:
    """The conclusions' ANOVA fitted to every completion of the space: each draw's shares
    (draws x terms, in ``terms``' order) and coefficients."""

    terms: list[Term]
    shares: np.ndarray
    coefs: np.ndarray
    columns: list[Column]
    aliased: np.ndarray
    level: float
    halves: np.ndarray | None = None
    """The shares of the refits on half-samples (half-samples x terms), if any."""

    def draw_fit(self, template: AnovaFit, i: int) -> AnovaFit:
        """Draw ``i``'s ANOVA, as far as its coefficient curves need one."""
        return AnovaFit(
            template.n_levels,
            self.terms,
            self.columns,
            self.coefs[i],
            self.aliased,
            [],
            0.0,
            0,
            np.nan,
            [],
            coding=template.coding,
        )

    def spreads(self) -> dict[Term, ShareSpread]:
        """Each term's share: the draws' median, and the normal interval at ``level`` with
        the draws' variance plus the half-samples' (see the module docstring)."""
        mid = np.median(self.shares, axis=0)
        variance = self.shares.var(axis=0, ddof=1)
        if self.halves is not None:
            variance = variance + self.halves.var(axis=0, ddof=1)
        half_width = special.ndtri(0.5 + self.level / 2) * np.sqrt(variance)
        low, high = np.clip(mid - half_width, 0.0, 1.0), np.clip(mid + half_width, 0.0, 1.0)
        return {
            t: ShareSpread(float(low[i]), float(mid[i]), float(high[i]))
            for i, t in enumerate(self.terms)
        }


def completed_draws(
    space: Space,
    measured: np.ndarray,
    y: np.ndarray,
    model: object,
    n: int,
    seed: int,
) -> np.ndarray | None:
    """``n`` completions of the space (n x len(space)): the measured settings with their
    values, every other setting drawn from ``model``'s posterior predictive distribution;
    None when the model has none (``mlp``) or cannot give one (no residual degrees of
    freedom)."""
    from washout.sweep.models import Posterior

    if not isinstance(model, Posterior):
        return None
    rng = np.random.default_rng([seed, 27])
    rest = np.setdiff1d(np.arange(len(space)), measured)
    out = np.empty((n, len(space)))
    out[:, measured] = y
    if len(rest):
        try:
            out[:, rest] = model.draws(space.codes[rest], n, rng, UNDERSMOOTH)
        except (ValueError, np.linalg.LinAlgError):
            return None
    if not np.isfinite(out).all():
        return None
    return out


def half_sample_completions(
    space: Space,
    measured: np.ndarray,
    y: np.ndarray,
    refit: Callable[[np.ndarray, np.ndarray], Predictor],
    n: int,
    seed: int,
) -> np.ndarray | None:
    """``n`` completions of the space (at most n x len(space)), each from the model refitted
    (``refit(codes, values)``) on a half of the measured settings drawn without
    replacement: its predictions at every setting not measured, the measured settings with
    their values. None where nothing is left unmeasured (every completion is the measured
    space), with fewer than 4 measured settings, or fewer than 2 refits that succeeded."""
    rest = np.setdiff1d(np.arange(len(space)), measured)
    if len(measured) < 4 or not len(rest):
        return None
    rng = np.random.default_rng([seed, 2])
    out = np.empty((n, len(space)))
    out[:, measured] = y
    done = 0
    for _ in range(n):
        half = rng.choice(len(measured), len(measured) // 2, replace=False)
        try:
            predicted = refit(space.codes[measured[half]], y[half]).predict(space.codes[rest])
        except (ValueError, np.linalg.LinAlgError):
            continue
        if np.isfinite(predicted).all():
            out[done, rest] = predicted
            done += 1
    return out[:done] if done > 1 else None


def replicates(
    fit: AnovaFit,
    space: Space,
    completions: np.ndarray,
    level: float = LEVEL,
    halves: np.ndarray | None = None,
) -> Replicates:
    """The ANOVA ``fit`` (its terms and coding) on every completion of ``space``: the
    posterior draws ``completions`` and the half-samples' ``halves``."""
    shares, coefs, columns, aliased = replicate_fits(
        space.codes, completions, space.n_levels, fit.terms, fit.coding
    )
    half_shares = None
    if halves is not None:
        half_shares = replicate_fits(space.codes, halves, space.n_levels, fit.terms, fit.coding)[0]
    return Replicates(list(fit.terms), shares, coefs, columns, aliased, level, half_shares)


def point_spreads(
    keys: list[CurveKey], template: AnovaFit, reps: Replicates, space: Space
) -> dict[CurveKey, PointSpread]:
    """Per curve (``keys``), how often the draws' curve has a knee or turning point and the
    interval of its level (points.py finds them as for the estimate)."""
    found: dict[CurveKey, list[float]] = {k: [] for k in keys}
    terms = sorted({k[0] for k in keys})
    for i in range(len(reps.coefs)):
        draw = reps.draw_fit(template, i)
        for term in terms:
            for key, (codes, values) in coefficient_curves(draw, term).items():
                if key in found:
                    x = space.numeric_levels(key[1])[np.asarray(codes)]
                    point = curve_point(x, np.asarray(values))
                    if point is not None:
                        found[key].append(point.value)
    tail = (1.0 - reps.level) / 2
    out = {}
    for key, values in found.items():
        arr = np.asarray(values)
        out[key] = PointSpread(
            found=len(arr) / len(reps.coefs),
            low=float(np.quantile(arr, tail, method="lower")) if len(arr) else None,
            high=float(np.quantile(arr, 1.0 - tail, method="higher")) if len(arr) else None,
        )
    return out
