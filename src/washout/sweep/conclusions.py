"""What a fitted ANOVA says: significant terms and their shares, ranked important points, the
ranges a fair comparison must cover, and how far a sample's conclusions are from the full data's.

Definitions follow the paper's published code (Hui et al., SIGMOD 2024; docs/sweep-method.md
§6-§9): important terms have share >= 0.10; each important term's coefficient curves (a main
effect's non-reference levels; for an interaction, one curve per fixed level of either factor)
get a knee or turning point (points.py); points rank by share x turn ratio. Under sum coding
(ours) a curve has every level: a main effect's deviations from the grand mean, and an
interaction's deviations at one fixed level of the other factor (the constrained effects,
each row and column summing to zero).

Conclusions are drawn by an ANOVA (main effects + 2-way interactions, or main effects only
with ``anova-main``), whichever model decided termination, so a sample's conclusions compare
directly with ``full`` ones; on which settings it is fitted after a loop (measured or
predicted) is :func:`washout.sweep.incremental.loop_conclusions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from washout.sweep.anova import AnovaFit, CurveKey, Term, coefficient_curves, fit_anova
from washout.sweep.points import CurvePoint, curve_point
from washout.sweep.result import Curve, ImportantPoint, TermShare
from washout.sweep.space import Space
from washout.sweep.uncertainty import (
    IMPORTANT_SHARE,
    LEVEL,
    PointSpread,
    Replicates,
    ShareSpread,
    point_spreads,
    replicates,
)


@dataclass
class Conclusions:
    """Significant terms (share by term), important terms' curves and their points."""

    parameters: list[str]
    shares: dict[Term, float]
    curves: dict[CurveKey, CurvePoint | None]
    weights: dict[Term, int]
    ranked: list[tuple[CurveKey, CurvePoint, float]] = field(default_factory=list)
    lines: dict[CurveKey, tuple[list[float], list[float]]] = field(default_factory=dict)
    """Every kept main effect's and every important interaction's curve, x and coefficients,
    for figures (under treatment coding a main effect's reference level at 0 included)."""
    exact_fit: bool = False
    """The ANOVA reproduces the metric exactly (no noise): significant means "explains any
    variance at all" (:func:`washout.sweep.anova._f_test`)."""
    fit: AnovaFit | None = None
    """The ANOVA the conclusions were drawn from."""
    spreads: dict[Term, ShareSpread] = field(default_factory=dict)
    """Each share's interval (uncertainty.py), when the space was completed by draws; the
    shares are then the draws' medians."""
    point_spreads: dict[CurveKey, PointSpread] = field(default_factory=dict)
    """Each studied curve's point over the draws."""
    level: float | None = None
    """The intervals' probability (None: no intervals)."""

    @property
    def important(self) -> set[Term]:
        return {t for t, s in self.shares.items() if s >= IMPORTANT_SHARE}

    def importance(self, term: Term) -> str | None:
        """``important``, ``may be important`` or ``not important`` by the share's interval
        (None without intervals)."""
        spread = self.spreads.get(term)
        return None if spread is None else spread.importance

    def name(self, term: Term) -> str:
        """A term named by its parameters joined with ':'."""
        return ":".join(self.parameters[f] for f in term)


def more_than_one_group(space: Space, varied: int, fixed: tuple[int, int] | None) -> bool:
    """The paper's validity check: rows (with the fixed level) grouped by every other factor."""
    codes = space.codes
    if fixed is not None:
        codes = codes[codes[:, fixed[0]] == fixed[1]]
    others = np.delete(codes, varied, axis=1)
    return others.shape[1] > 0 and len(np.unique(others, axis=0)) > 1


def conclude(
    fit: AnovaFit, data: Space, reps: Replicates | None = None, points: bool = True
) -> Conclusions:
    """Significant terms, points and ranking of a fit on the analysed settings ``data``.

    With ``reps`` (the same ANOVA on completions of the space: uncertainty.py) each share is
    the draws' median with its interval, and each important term's curves get how often and
    where the draws put their points (unless not ``points``)."""
    shares = fit.shares()
    shares = {t: s for t, s in shares.items() if t in fit.terms}
    spreads = {} if reps is None else reps.spreads()
    if spreads:
        shares = {t: spreads[t].median for t in shares}
    curves: dict[CurveKey, CurvePoint | None] = {}
    lines: dict[CurveKey, tuple[list[float], list[float]]] = {}
    weights: dict[Term, int] = {}
    for term, share in shares.items():
        important = share >= IMPORTANT_SHARE
        if not important and len(term) > 1:
            continue
        for key, (codes, coefs) in coefficient_curves(fit, term).items():
            if fit.coding == "treatment" and len(term) == 1:  # the reference level, at 0
                codes, coefs = [0, *codes], [0.0, *coefs]
            x = data.numeric_levels(key[1])[np.asarray(codes)]
            lines[key] = ([float(v) for v in x], coefs)
        if not important:
            continue
        weights[term] = (
            sum(1 for c in fit.columns if c.term == term and c.curve) if len(term) > 1 else 1
        )
        for key, (codes, coefs) in coefficient_curves(fit, term).items():
            if not all(isinstance(v, (int, float)) for v in data.levels[key[1]]):
                continue  # no knee or turn along unordered (text) levels
            x = data.numeric_levels(key[1])[np.asarray(codes)]
            if not more_than_one_group(data, key[1], key[2]):
                curves[key] = None
                continue
            curves[key] = curve_point(x, np.asarray(coefs))
    result = Conclusions(
        data.parameters,
        shares,
        curves,
        weights,
        lines=lines,
        exact_fit=fit.exact,
        fit=fit,
        spreads={t: spreads[t] for t in shares} if spreads else {},
        level=None if reps is None else reps.level,
    )
    if reps is not None and points:
        studied = [k for k in curves if more_than_one_group(data, k[1], k[2])]
        result.point_spreads = point_spreads(studied, fit, reps, data)
    result.ranked = _rank(result)
    return result


def _rank(c: Conclusions) -> list[tuple[CurveKey, CurvePoint, float]]:
    """Points by share x turn ratio, then share, then |delta Spearman| (all descending)."""
    rows = [(k, p, c.shares[k[0]]) for k, p in c.curves.items() if p is not None]
    any_ratio = any(np.isfinite(p.turn_ratio) for _, p, _ in rows)

    def key(row: tuple[CurveKey, CurvePoint, float]) -> tuple[float, float, float]:
        _, p, share = row
        combined = share * p.turn_ratio if any_ratio else share
        return (
            -combined if np.isfinite(combined) else np.inf,
            -share,
            -p.delta_spearman,
        )

    return sorted(rows, key=key)


def points_json(c: Conclusions, data: Space) -> tuple[ImportantPoint, ...]:
    """The ranked important points (term, parameter, fixed, type, value, ratio, share), with
    their intervals when the conclusions have them."""
    out = []
    for key, p, share in c.ranked:
        term, varied, fixed = key
        spread = c.point_spreads.get(key)
        low = high = None
        if spread is not None and spread.low is not None and spread.high is not None:
            low, high = _shown(data, varied, spread.low), _shown(data, varied, spread.high)
        out.append(
            ImportantPoint(
                term=c.name(term),
                parameter=data.parameters[varied],
                fixed=_fixed(data, fixed),
                type=p.kind,
                value=_shown(data, varied, p.value),
                turn_ratio=None if not np.isfinite(p.turn_ratio) else p.turn_ratio,
                share=share,
                low=low,
                high=high,
                found=None if spread is None else spread.found,
            )
        )
    return tuple(out)


def curves_json(c: Conclusions, data: Space) -> tuple[Curve, ...]:
    """Every kept main effect's and important interaction's coefficient curve, for figures."""
    return tuple(
        Curve(
            term=c.name(term),
            parameter=data.parameters[varied],
            fixed=_fixed(data, fixed),
            x=tuple(x),
            y=tuple(y),
        )
        for (term, varied, fixed), (x, y) in c.lines.items()
    )


def _fixed(data: Space, fixed: tuple[int, int] | None) -> dict[str, object] | None:
    return None if fixed is None else {data.parameters[fixed[0]]: data.level(*fixed)}


def terms_json(c: Conclusions) -> tuple[TermShare, ...]:
    """Significant terms, largest share first, with their intervals and importance when the
    conclusions have them."""
    ranked = sorted(c.shares.items(), key=lambda kv: -kv[1])
    return tuple(
        TermShare(c.name(t), s)
        if (spread := c.spreads.get(t)) is None
        else TermShare(c.name(t), s, spread.low, spread.high, spread.importance)
        for t, s in ranked
    )


def fair_ranges(data: Space, *conclusions: Conclusions) -> dict[str, list[list[object]]]:
    """Per parameter, the segments between its important points (of every system compared).

    A comparison is fair only if it measures both sides of every important point of either
    system (Hui et al. §5): so it must cover each segment [level_min, p1], [p1, p2], ...,
    [pk, level_max]. Parameters with no important point are left out.
    """
    ranges: dict[str, list[list[object]]] = {}
    for f, name in enumerate(data.parameters):
        cuts = {p.value for c in conclusions for (_, varied, _), p, _ in c.ranked if varied == f}
        if cuts:
            x = data.numeric_levels(f)
            ranges[name] = [
                [_shown(data, f, lo), _shown(data, f, hi)]
                for lo, hi in segments(float(x.min()), float(x.max()), cuts)
            ]
    return ranges


def segments(low: float, high: float, cuts: set[float]) -> list[tuple[float, float]]:
    """[low, c1], [c1, c2], ..., [ck, high] for the distinct cut points (one segment if none
    lies strictly inside)."""
    edges = sorted({low, high, *cuts})
    return list(zip(edges, edges[1:])) or [(low, high)]


def joint_ranges(
    results: list[tuple[ImportantPoint, ...]], spaces: list[Space]
) -> dict[str, list[list[object]]]:
    """Fair ranges for comparing systems from their important points: every system's points
    cut every shared numeric parameter's range (union of the levels)."""
    ranges: dict[str, list[list[object]]] = {}
    for name in spaces[0].parameters:
        cuts = {
            float(p.value)  # type: ignore[arg-type]
            for points in results
            for p in points
            if p.parameter == name
        }
        if not cuts:
            continue
        values = [float(v) for s in spaces for v in s.levels[s.parameters.index(name)]]
        ranges[name] = [
            [_plain(lo), _plain(hi)] for lo, hi in segments(min(values), max(values), cuts)
        ]
    return ranges


def _plain(x: float) -> object:
    return int(x) if float(x).is_integer() else x


def _shown(data: Space, f: int, x: float) -> object:
    if all(isinstance(v, (int, float)) for v in data.levels[f]):
        return _plain(x)
    return data.levels[f][int(round(x))]


def compare(sample: Conclusions, full: Conclusions) -> dict[str, float]:
    """How far a sample's conclusions are from the full data's (the paper's Figure 1 measures).

    ``terms_changed``: important terms in only one of the two / important terms in full.
    ``points_mismatch``: the paper's count (docs/sweep-method.md §9): 1/weight for every curve
    with a point in one but not the other or a knee in one and a turning point in the other, over
    the number of important terms in full; it ignores where points lie. ``points_moved``
    (ours, stricter): the share of full's points not found in the sample at the same level
    with the same type.
    """
    imp_s, imp_f = sample.important, full.important
    denom = max(len(imp_f), 1)
    changed = len(imp_s ^ imp_f) / denom if (imp_s or imp_f) else 0.0
    mismatch = 0.0
    for table, other in ((sample, full), (full, sample)):
        for key, point in table.curves.items():
            term = key[0]
            weight = table.weights[term]
            if term not in other.important:
                mismatch += (point is not None) / weight
            elif table is sample:  # shared terms: count each differing curve once
                twin = other.curves.get(key)
                if (point is None) != (twin is None):
                    mismatch += 1 / weight
                elif point is not None and twin is not None and point.kind != twin.kind:
                    mismatch += 1 / weight
    for key, point in full.curves.items():  # shared-term curves the sample has not at all
        if key[0] in sample.important and key not in sample.curves and point is not None:
            mismatch += 1 / full.weights[key[0]]
    full_points = [(k, p) for k, p in full.curves.items() if p is not None]
    moved = sum(
        1
        for k, p in full_points
        if (q := sample.curves.get(k)) is None or q.kind != p.kind or q.value != p.value
    )
    return {
        "terms_changed": changed,
        "points_mismatch": mismatch / denom if (imp_s or imp_f) else 0.0,
        "points_moved": moved / len(full_points) if full_points else 0.0,
    }


def conclusions_of(
    space: Space,
    rows: np.ndarray,
    y: np.ndarray,
    model: str,
    coding: str = "treatment",
    completions: np.ndarray | None = None,
    level: float = LEVEL,
    points: bool = True,
    halves: np.ndarray | None = None,
) -> Conclusions:
    """The ANOVA's conclusions on some rows (main effects only if ``model`` is anova-main),
    with intervals at probability ``level`` when ``completions`` of the whole space are
    given (uncertainty.completed_draws), widened by the half-samples' ``halves``
    (uncertainty.half_sample_completions)."""
    data = space.subset(rows)
    data.y = y
    fit = fit_anova(
        data.codes, y, space.n_levels, interactions=model != "anova-main", coding=coding
    )
    reps = None if completions is None else replicates(fit, space, completions, level, halves)
    return conclude(fit, data, reps, points)
