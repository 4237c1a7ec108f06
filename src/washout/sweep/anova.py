"""The paper's ANOVA model, fitted fast: OLS on categorical factors, Type-III tests, backward
elimination.

Hui et al. (SIGMOD 2024, "On the Feasibility and Benefits of Extensive Evaluation"), as their
published code does it (../shared/fixtures/configspaces/METHOD-NOTES.md §4-§6): the statsmodels
formula ``y ~ C(f1) + ... + C(fk) [+ C(fi):C(fj) ...]`` with patsy's treatment coding (reference
= smallest level), Type-III F tests (``anova_lm(typ=3)``, a Wald test of each term's
coefficients), and removal of the one term with the largest p > 0.05 until none is left.

Why not call statsmodels: one incremental-sampling iteration fits 10 splits, each with dozens of
elimination steps, on spaces of ~10^4 settings; rebuilding a patsy design per step is far too
slow. Here the dummy design is built once per split with numpy, and each step only re-solves a
sub-block of the Gram matrix (Cholesky). The numbers agree with statsmodels (tests/test_sweep_anova.py).

patsy's coding rule is reproduced because it changes which hypothesis each Type-III test tests:
an interaction whose main effect is absent is coded with that factor reduced and the other
factor full (``C(a)[T.x]:C(b)[y]``), which spans the missing main effect too; with both main
effects absent the second factor also gets a standalone reduced block (patsy's subterm rule,
checked against patsy 1.0 in the tests).

Rank deficiency (a level or a cell the training rows never saw) is handled as R's ``lm`` does:
columns linearly dependent on earlier ones are aliased (coefficient 0), so a level unseen in
training is predicted at its reference, and never raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import linalg
from scipy.stats import f as f_dist

Term = tuple[int, ...]
"""A model term: the indices of its factors (one for a main effect, two for an interaction)."""

ALIAS_TOLERANCE = 1e-9
"""A column whose squared residual norm, after projecting out earlier columns, is below this
fraction of its own squared norm is aliased (R's lm uses a QR tolerance of 1e-7 on norms)."""


@dataclass(frozen=True)
class Column:
    """One design column: the product of indicators ``codes[:, factor] == level``.

    ``term`` is the model term the column belongs to (its Type-III test). ``curve`` is False
    for the standalone reduced block patsy adds to an interaction whose main effects are both
    absent; the paper's coefficient parser maps those to a main effect absent from the table,
    so they are no part of any coefficient curve.
    """

    term: Term
    cells: tuple[tuple[int, int], ...]
    curve: bool = True


def candidate_terms(n_factors: int, interactions: bool) -> list[Term]:
    """Main effects in factor order, then every 2-way interaction in formula order."""
    terms: list[Term] = [(f,) for f in range(n_factors)]
    if interactions:
        terms += list(combinations(range(n_factors), 2))
    return terms


def design_columns(terms: list[Term], n_levels: list[int]) -> list[Column]:
    """Columns of patsy's treatment coding for ``terms`` (intercept always present)."""
    ordered = sorted(terms, key=len)
    spanned: set[tuple[int, ...]] = {(f,) for f in (t[0] for t in ordered if len(t) == 1)}
    columns: list[Column] = []
    for term in ordered:
        if len(term) == 1:
            (f,) = term
            columns += [Column(term, ((f, lv),)) for lv in range(1, n_levels[f])]
            continue
        a, b = term
        has_a, has_b = (a,) in spanned, (b,) in spanned
        if not has_a and not has_b:
            columns += [Column(term, ((b, lv),), curve=False) for lv in range(1, n_levels[b])]
        a_first = 0 if has_a and not has_b else 1
        b_first = 0 if not has_a else 1
        columns += [
            Column(term, ((a, la), (b, lb)))
            for lb in range(b_first, n_levels[b])
            for la in range(a_first, n_levels[a])
        ]
        spanned |= {(a,), (b,)}
    return columns


def design_matrix(codes: np.ndarray, columns: list[Column], n_levels: list[int]) -> np.ndarray:
    """The n x (1 + len(columns)) design: an intercept, then each column's indicator product."""
    offsets = np.concatenate([[0], np.cumsum(n_levels)])
    n = codes.shape[0]
    one_hot = np.zeros((n, int(offsets[-1]) + 1))
    one_hot[:, -1] = 1.0
    rows = np.arange(n)
    for f in range(len(n_levels)):
        one_hot[rows, offsets[f] + codes[:, f]] = 1.0
    first = np.array([offsets[c.cells[0][0]] + c.cells[0][1] for c in columns], dtype=int)
    second = np.array(
        [offsets[c.cells[1][0]] + c.cells[1][1] if len(c.cells) > 1 else -1 for c in columns],
        dtype=int,
    )
    x = np.empty((n, len(columns) + 1))
    x[:, 0] = 1.0
    if columns:
        x[:, 1:] = one_hot[:, first] * one_hot[:, second]
    return x


def independent_columns(gram: np.ndarray) -> np.ndarray:
    """Mask of the columns not linearly dependent on earlier ones (pivot-free Cholesky).

    The same rule as R's ``lm`` (aliased coefficients): columns are taken in order and one whose
    residual, after projecting out the kept earlier columns, is negligible is dropped.
    """
    a = gram.astype(float, copy=True)
    scale = np.diag(gram).copy()
    keep = np.zeros(len(a), dtype=bool)
    for j in range(len(a)):
        d = a[j, j]
        if d <= ALIAS_TOLERANCE * scale[j] or d <= 0.0:
            continue
        keep[j] = True
        col = a[j + 1 :, j] / np.sqrt(d)
        a[j + 1 :, j + 1 :] -= np.outer(col, col)
    return keep


@dataclass(frozen=True)
class TermTest:
    """One row of the Type-III table: sum of squares, df, F and p (statsmodels anova_lm typ=3)."""

    term: Term | None  # None: the intercept
    ss: float
    df: int
    f: float
    p: float


@dataclass
class AnovaFit:
    """A fitted treatment-coded OLS model and its Type-III table (intercept first, no residual)."""

    n_levels: list[int]
    terms: list[Term]
    columns: list[Column]
    coef: np.ndarray  # intercept first; aliased columns 0
    aliased: np.ndarray  # bool per column, intercept first
    table: list[TermTest]
    rss: float
    df_resid: int
    r2: float
    removed: list[Term]
    elimination_failed: bool = False

    def predict(self, codes: np.ndarray) -> np.ndarray:
        """Predictions for settings given as level codes (levels never seen predict as reference)."""
        return design_matrix(codes, self.columns, self.n_levels) @ self.coef

    def shares(self) -> dict[Term, float]:
        """Per-term share of variance, as the paper's code computes it (METHOD-NOTES §6).

        SS_term / (SS_intercept + sum of term SS + SS_residual), all Type-III. Not a true
        decomposition of variance (Type-III SS do not add up, and the intercept is in the
        denominator), but the paper's importance filter (share >= 0.10) is defined on it.
        """
        total = sum(t.ss for t in self.table) + self.rss
        return {t.term: t.ss / total for t in self.table if t.term is not None}


def _type3(
    gram: np.ndarray, xty: np.ndarray, yty: float, n: int, y_mean: float,
    columns: list[Column], keep: np.ndarray,
) -> tuple[np.ndarray, list[TermTest], float, int]:
    """Solve the kept columns and Wald-test each term (statsmodels' anova_lm typ=3).

    Works on the Gram matrix X'X, X'y and y'y of centred y only, so an elimination step costs
    O(p^3) whatever the number of rows. For a term T with coefficients b_T and covariance block
    V_TT = s^2 [(X'X)^-1]_TT: SS_T = b_T' [(X'X)^-1]_TT^-1 b_T, F = SS_T / (q s^2), q = |T|.
    """
    idx = np.flatnonzero(keep)
    factor = linalg.cho_factor(gram[np.ix_(idx, idx)], check_finite=False)
    beta_k = linalg.cho_solve(factor, xty[idx], check_finite=False)
    cov = linalg.cho_solve(factor, np.eye(len(idx)), check_finite=False)
    rss = max(float(yty - beta_k @ xty[idx]), 0.0)
    df_resid = n - len(idx)
    beta_k[0] += y_mean
    coef = np.zeros(len(keep))
    coef[idx] = beta_k
    scale = rss / df_resid if df_resid > 0 else np.nan
    position = np.cumsum(keep) - 1
    groups: dict[Term | None, list[int]] = {None: [0]}
    for j, col in enumerate(columns, start=1):
        members = groups.setdefault(col.term, [])
        if keep[j]:
            members.append(int(position[j]))
    terms, ss, df = [], [], []
    for term, pos in groups.items():
        terms.append(term)
        df.append(len(pos))
        if not pos:
            ss.append(0.0)
            continue
        b = beta_k[pos]
        ss.append(float(b @ np.linalg.solve(cov[np.ix_(pos, pos)], b)))
    ss_a, df_a = np.asarray(ss), np.asarray(df, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        fval = ss_a / df_a / scale
        p = f_dist.sf(fval, df_a, df_resid) if df_resid > 0 else np.full(len(ss), np.nan)
    table = [
        TermTest(t, s_, int(d), float(fv) if d else np.nan, float(pv) if d else np.nan)
        for t, s_, d, fv, pv in zip(terms, ss, df, fval, p)
    ]
    return coef, table, rss, df_resid


def fit_anova(
    codes: np.ndarray,
    y: np.ndarray,
    n_levels: list[int],
    interactions: bool = True,
    alpha: float = 0.05,
    eliminate: bool = True,
) -> AnovaFit:
    """Fit the paper's model with backward elimination (METHOD-NOTES §5).

    While any term's Type-III p exceeds ``alpha``, drop the one with the largest p and refit
    (no hierarchy enforced; terms with no estimable column go first, they change nothing). If
    every term would go, the full initial model is returned with ``elimination_failed``.
    """
    codes = np.asarray(codes, dtype=int)
    y = np.asarray(y, dtype=float)
    y_mean = float(y.mean())
    yc = y - y_mean
    initial = candidate_terms(len(n_levels), interactions)
    terms = list(initial)
    removed: list[Term] = []
    columns = design_columns(terms, n_levels)
    x = design_matrix(codes, columns, n_levels)
    gram, xty, yty, n = x.T @ x, x.T @ yc, float(yc @ yc), len(yc)
    keep = independent_columns(gram)
    while True:
        coef, table, rss, df_resid = _type3(gram, xty, yty, n, y_mean, columns, keep)
        tests = [t for t in table if t.term is not None]
        if not eliminate or not tests:
            break
        empty = [t.term for t in tests if t.df == 0]
        if empty:
            drop = empty[0]
        else:
            pvalues = np.array([t.p for t in tests])
            if df_resid <= 0 or not np.any(pvalues > alpha):
                break
            drop = tests[int(np.nanargmax(pvalues))].term
        terms.remove(drop)
        removed.append(drop)
        if not terms:
            fit = fit_anova(codes, y, n_levels, interactions, alpha, eliminate=False)
            fit.elimination_failed = True
            return fit
        new_columns = design_columns(terms, n_levels)
        old_index = {c: j for j, c in enumerate(columns, start=1)}
        if all(c in old_index for c in new_columns):
            sel = np.array([0] + [old_index[c] for c in new_columns])
            x, gram, xty, keep = x[:, sel], gram[np.ix_(sel, sel)], xty[sel], keep[sel]
            if not keep.all():  # a column aliased only through a dropped one comes back
                keep = independent_columns(gram)
        else:
            x = design_matrix(codes, new_columns, n_levels)
            gram, xty = x.T @ x, x.T @ yc
            keep = independent_columns(gram)
        columns = new_columns
    return AnovaFit(
        n_levels=list(n_levels), terms=terms, columns=columns, coef=coef, aliased=~keep,
        table=table, rss=rss, df_resid=df_resid, r2=1.0 - rss / yty if yty > 0 else np.nan,
        removed=removed,
    )
