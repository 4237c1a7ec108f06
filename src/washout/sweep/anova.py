"""The paper's ANOVA model, fitted fast: OLS on categorical factors, Type-III tests, backward
elimination.

Hui et al. (SIGMOD 2024, "On the Feasibility and Benefits of Extensive Evaluation"), as their
published code does it (docs/sweep-method.md §4-§6): the statsmodels
formula ``y ~ C(f1) + ... + C(fk) [+ C(fi):C(fj) ...]`` with patsy's treatment coding (reference
= smallest level), Type-III F tests (``anova_lm(typ=3)``, a Wald test of each term's
coefficients), and removal of the one term with the largest p > 0.05 until none is left.

Why not call statsmodels: one incremental-sampling iteration fits 10 splits, each with dozens of
elimination steps, on spaces of ~10^4 settings; rebuilding a patsy design per step is far too
slow. Here the dummy design is built once per split with numpy, and each step only re-solves a
sub-block of the Gram matrix (Cholesky). The numbers agree with statsmodels
(tests/test_sweep_anova.py).

patsy's coding rule is reproduced because it changes which hypothesis each Type-III test tests:
an interaction whose main effect is absent is coded with that factor reduced and the other
factor full (``C(a)[T.x]:C(b)[y]``), which spans the missing main effect too; with both main
effects absent the second factor also gets a standalone reduced block (patsy's subterm rule,
checked against patsy 1.0 in the tests).

Rank deficiency (a level or a cell the training rows never saw) is handled as R's ``lm`` does:
columns linearly dependent on earlier ones are aliased (coefficient 0), so a level unseen in
training is predicted at its reference, and never raises.

Coding ``sum`` (ours, for conclusions): patsy's ``C(f, Sum)`` deviation contrasts (level l's
column is 1 at l, -1 at the last level, 0 elsewhere; Montgomery, Design and Analysis of
Experiments, 9th ed., §5.3), with backward elimination that respects marginality (a main
effect is not dropped while an interaction holding it stays; Nelder, JRSS A 1977). Type-III
tests then test the hypotheses on unweighted marginal means, which do not depend on how the
levels are labelled or ordered (Searle, Linear Models for Unbalanced Data, 1987, §4.6), unlike
treatment coding, where a main effect's test is its effect at the reference level of every
factor it interacts with. Shares of variance (:meth:`AnovaFit.shares`) then decompose the
explained variance.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import linalg, special

Term = tuple[int, ...]
"""A model term: the indices of its factors (one for a main effect, two for an interaction)."""
CurveKey = tuple[Term, int, tuple[int, int] | None]
"""A coefficient curve: (term, varied factor, (fixed factor, fixed level code) or None for a
main effect)."""

ALIAS_TOLERANCE = 1e-9
"""A column whose squared residual norm, after projecting out earlier columns, is below this
fraction of its own squared norm is aliased (R's lm uses a QR tolerance of 1e-7 on norms)."""
EXACT_FIT = 1e-9
"""A residual or term sum of squares below this fraction of the total (centred) sum of
squares is rounding error: a metric the model reproduces exactly (deterministic, additive)
has no residual variance to test terms against (see :func:`_f_test`)."""


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


CODINGS = ("treatment", "sum")


def candidate_terms(n_factors: int, interactions: bool) -> list[Term]:
    """Main effects in factor order, then every 2-way interaction in formula order."""
    terms: list[Term] = [(f,) for f in range(n_factors)]
    if interactions:
        terms += list(combinations(range(n_factors), 2))
    return terms


def _codings(terms: list[Term]) -> dict[Term, tuple[bool, bool]]:
    """How patsy codes each term: for a:b, whether a's and b's main effects are already spanned
    (by the main effect itself or an earlier interaction); main effects are always reduced."""
    ordered = sorted(terms, key=len)
    spanned = {t[0] for t in ordered if len(t) == 1}
    codings: dict[Term, tuple[bool, bool]] = {}
    for term in ordered:
        if len(term) == 1:
            codings[term] = (True, True)
            continue
        a, b = term
        codings[term] = (a in spanned, b in spanned)
        spanned |= {a, b}
    return codings


def design_columns(
    terms: list[Term], n_levels: list[int], coding: str = "treatment"
) -> list[Column]:
    """Columns of patsy's treatment coding for ``terms`` (intercept always present); with
    ``sum`` coding (terms closed under marginality) one column per level but the last, and
    interactions as products of their factors' columns, in patsy's order."""
    if coding == "sum":
        return [
            Column(term, tuple(zip(term, lv)))
            for term in sorted(terms, key=len)
            for lv in (
                [(la,) for la in range(n_levels[term[0]] - 1)]
                if len(term) == 1
                else [
                    (la, lb)
                    for lb in range(n_levels[term[1]] - 1)
                    for la in range(n_levels[term[0]] - 1)
                ]
            )
        ]
    columns: list[Column] = []
    for term, (has_a, has_b) in _codings(terms).items():
        if len(term) == 1:
            (f,) = term
            columns += [Column(term, ((f, lv),)) for lv in range(1, n_levels[f])]
            continue
        a, b = term
        if not has_a and not has_b:
            columns += [Column(term, ((b, lv),), curve=False) for lv in range(1, n_levels[b])]
        a_first = 0 if has_a and not has_b else 1
        b_first = 0 if not has_a else 1
        columns += [
            Column(term, ((a, la), (b, lb)))
            for lb in range(b_first, n_levels[b])
            for la in range(a_first, n_levels[a])
        ]
    return columns


def design_matrix(
    codes: np.ndarray, columns: list[Column], n_levels: list[int], coding: str = "treatment"
) -> np.ndarray:
    """The n x (1 + len(columns)) design: an intercept, then each column's product of its
    factors' indicators (treatment) or deviation contrasts (sum: minus one at the last level)."""
    offsets = np.concatenate([[0], np.cumsum(n_levels)])
    n = codes.shape[0]
    one_hot = np.zeros((n, int(offsets[-1]) + 1))
    one_hot[:, -1] = 1.0
    rows = np.arange(n)
    for f in range(len(n_levels)):
        one_hot[rows, offsets[f] + codes[:, f]] = 1.0
        if coding == "sum":
            last = one_hot[:, offsets[f] + n_levels[f] - 1].copy()
            one_hot[:, offsets[f] : offsets[f] + n_levels[f]] -= last[:, None]
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
    """Mask of the columns not linearly dependent on earlier ones (unpivoted Cholesky).

    The same rule as R's ``lm`` (aliased coefficients): columns are taken in order, and one
    whose squared residual after projecting out the kept earlier columns (its Cholesky pivot
    r_jj^2) is negligible is dropped. LAPACK factors the kept set; on the first negligible or
    failed pivot that column is dropped and the factorization redone, so a full-rank design
    costs one call.
    """
    scale = np.diag(gram)
    keep = scale > 0
    while True:
        idx = np.flatnonzero(keep)
        sub = gram[np.ix_(idx, idx)]
        factor, info = linalg.lapack.dpotrf(sub, lower=0, clean=1)
        if info > 0:
            keep[idx[info - 1]] = False
            continue
        bad = np.flatnonzero(np.diag(factor) ** 2 <= ALIAS_TOLERANCE * scale[idx])
        if len(bad) == 0:
            return keep
        keep[idx[bad[0]]] = False


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
    exact: bool = False
    """The model reproduces y exactly (RSS is rounding error): the F tests are limits."""
    coding: str = "treatment"
    xtx_inv: np.ndarray | None = None
    """(X'X)^-1 of the estimable columns (intercept first), for the posterior."""

    def predict(self, codes: np.ndarray) -> np.ndarray:
        """Predictions for settings given as level codes (levels never seen predict as
        reference)."""
        return design_matrix(codes, self.columns, self.n_levels, self.coding) @ self.coef

    def draws(
        self, codes: np.ndarray, n: int, rng: np.random.Generator, undersmooth: float = 1.0
    ) -> np.ndarray:
        """Posterior predictive draws (``models.Posterior``) of the final model under the
        reference prior p(beta, sigma^2) ~ 1/sigma^2: sigma^2 from the scaled inverse
        chi-square with df_resid degrees of freedom, beta | sigma^2 ~ N(beta_hat,
        sigma^2 (X'X)^-1), a new measurement x'beta + N(0, sigma^2) (Gelman et al., Bayesian
        Data Analysis, 3rd ed., §14.2). Conditional on the terms elimination kept; least
        squares has no penalty, so ``undersmooth`` changes nothing."""
        if self.xtx_inv is None or self.df_resid <= 0:
            raise ValueError("no residual degrees of freedom: no posterior")
        kept = np.flatnonzero(~self.aliased)
        sigma = np.sqrt(noise_variances(self.rss, self.df_resid, n, rng))
        root = np.linalg.cholesky(self.xtx_inv)
        beta = self.coef[kept][:, None] + root @ rng.standard_normal((len(kept), n)) * sigma
        x = design_matrix(codes, self.columns, self.n_levels, self.coding)[:, kept]
        return (x @ beta + rng.standard_normal((len(codes), n)) * sigma).T

    def shares(self) -> dict[Term, float]:
        """Per-term share of variance.

        Treatment coding, the paper's (docs/sweep-method.md §6): SS_term / (SS_intercept + sum
        of term SS + SS_residual), all Type-III; not a decomposition of variance (Type-III SS
        do not add up, and the intercept is in the denominator), but the paper's importance
        filter (share >= 0.10) is defined on it.

        Sum coding (ours): R^2 x SS_term / sum of the terms' Type-III SS, so the shares add up
        to the explained variance R^2. On a complete balanced grid the sum-coded Type-III SS
        are orthogonal and add up to the model SS (Searle 1987, §4.6), so this is each term's
        SS / total SS exactly (the classical eta-squared); on unbalanced data it splits R^2 in
        proportion to the label-invariant Type-III SS.
        """
        terms = [(t.term, t.ss) for t in self.table if t.term is not None]
        if self.coding == "sum":
            explained = sum(ss for _, ss in terms)
            r2 = self.r2 if np.isfinite(self.r2) else 0.0
            return {term: r2 * ss / explained if explained > 0 else 0.0 for term, ss in terms}
        total = sum(t.ss for t in self.table) + self.rss
        return {term: ss / total for term, ss in terms}


def noise_variances(rss: float, df: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of the noise variance from its posterior under the reference prior
    p(sigma^2) ~ 1/sigma^2: the scaled inverse chi-square with ``df`` degrees of freedom
    and scale RSS / df (Gelman et al., Bayesian Data Analysis, 3rd ed., §14.2, eq. 14.7)."""
    return rss / rng.chisquare(df, n) if rss > 0 else np.zeros(n)


def coefficient_curves(fit: AnovaFit, term: Term) -> dict[CurveKey, tuple[list[int], list[float]]]:
    """Coefficient curves of one term: level codes of the varied factor and coefficients."""
    if fit.coding == "sum":
        return _sum_curves(fit, term)
    found: dict[CurveKey, tuple[list[int], list[float]]] = {}
    for j, col in enumerate(fit.columns, start=1):
        if col.term != term or not col.curve or fit.aliased[j]:
            continue
        if len(col.cells) == 1:
            ((f, lv),) = col.cells
            key: CurveKey = (term, f, None)
            found.setdefault(key, ([], []))
            found[key][0].append(lv)
            found[key][1].append(float(fit.coef[j]))
            continue
        for varied, fixed in ((col.cells[1], col.cells[0]), (col.cells[0], col.cells[1])):
            key = (term, varied[0], fixed)
            found.setdefault(key, ([], []))
            found[key][0].append(varied[1])
            found[key][1].append(float(fit.coef[j]))
    return found


def _sum_curves(fit: AnovaFit, term: Term) -> dict[CurveKey, tuple[list[int], list[float]]]:
    """Sum-coded effects at every level: the last level's is minus the sum of the others'
    (Montgomery 2017, §5.3); an interaction's (a-1)(b-1) coefficients complete to the a x b
    table whose rows and columns sum to zero. Aliased coefficients count as 0 (R's lm)."""
    coef = np.where(fit.aliased, 0.0, fit.coef)
    js = [j for j, c in enumerate(fit.columns, start=1) if c.term == term]
    sizes = [fit.n_levels[f] for f in term]
    inner = np.zeros([n - 1 for n in sizes])
    for j in js:
        inner[tuple(lv for _, lv in fit.columns[j - 1].cells)] = coef[j]
    full = np.zeros(sizes)
    full[tuple(slice(0, n - 1) for n in sizes)] = inner
    for axis in range(len(sizes)):  # complete each axis so it sums to zero
        moved = np.moveaxis(full, axis, 0)  # a view: writing it writes ``full``
        moved[-1] = -moved[:-1].sum(axis=0)
    if len(term) == 1:
        return {(term, term[0], None): (list(range(sizes[0])), [float(v) for v in full])}
    a, b = term
    found: dict[CurveKey, tuple[list[int], list[float]]] = {}
    for i in range(sizes[0]):
        found[(term, b, (a, i))] = (list(range(sizes[1])), [float(v) for v in full[i, :]])
    for k in range(sizes[1]):
        found[(term, a, (b, k))] = (list(range(sizes[0])), [float(v) for v in full[:, k]])
    return found


def replicate_fits(
    codes: np.ndarray, ys: np.ndarray, n_levels: list[int], terms: list[Term], coding: str
) -> tuple[np.ndarray, np.ndarray, list[Column], np.ndarray]:
    """The ANOVA with the given ``terms`` (no elimination) fitted to every row of ``ys``
    (values at the settings ``codes``, one row per replicate) at once: one least-squares
    projection serves every row, so a few hundred posterior draws cost about one fit.

    Returns each row's shares (:meth:`AnovaFit.shares`; len(ys) x len(terms)), its
    coefficients (intercept first, aliased columns 0), the columns and the aliased mask.
    Type-III SS as in :func:`_type3`: SS_T = b_T' [(X'X)^-1]_TT^-1 b_T, with the uncentred
    intercept."""
    columns = design_columns(terms, n_levels, coding)
    x = design_matrix(codes, columns, n_levels, coding)
    keep = independent_columns(x.T @ x)
    kept = np.flatnonzero(keep)
    x = x[:, kept]
    cov = np.linalg.inv(x.T @ x)
    beta = (ys @ x) @ cov
    slot = (np.array([-1] + [terms.index(c.term) for c in columns]) + 1)[kept]
    ss = np.zeros((len(ys), len(terms) + 1))
    for k in np.unique(slot):
        idx = np.flatnonzero(slot == k)
        block = np.linalg.inv(cov[np.ix_(idx, idx)])
        ss[:, k] = np.einsum("bi,ij,bj->b", beta[:, idx], block, beta[:, idx])
    rss = np.sum((ys - beta @ x.T) ** 2, axis=1)
    coef = np.zeros((len(ys), len(columns) + 1))
    coef[:, kept] = beta
    if coding == "sum":
        total = np.sum((ys - ys.mean(axis=1, keepdims=True)) ** 2, axis=1)
        r2 = 1.0 - rss / np.where(total > 0, total, np.inf)
        explained = ss[:, 1:].sum(axis=1, keepdims=True)
        shares = r2[:, None] * ss[:, 1:] / np.where(explained > 0, explained, np.inf)
    else:
        shares = ss[:, 1:] / (ss.sum(axis=1) + rss)[:, None]
    return shares, coef, columns, ~keep


@dataclass
class _Solution:
    """OLS on the kept columns ``idx``: (X_k'X_k)^-1, coefficients for centred y, RSS."""

    idx: np.ndarray
    cov: np.ndarray
    beta: np.ndarray
    rss: float

    @classmethod
    def solve(cls, gram: np.ndarray, xty: np.ndarray, yty: float, keep: np.ndarray) -> _Solution:
        idx = np.flatnonzero(keep)
        factor, info = linalg.lapack.dpotrf(gram[np.ix_(idx, idx)], lower=0, clean=1)
        if info != 0:
            raise np.linalg.LinAlgError("design not of full rank after aliasing")
        inv, _ = linalg.lapack.dpotri(factor, lower=0)
        cov = np.triu(inv) + np.triu(inv, 1).T
        beta = cov @ xty[idx]
        return cls(idx, cov, beta, max(float(yty - beta @ xty[idx]), 0.0))

    def without(self, drop: np.ndarray) -> _Solution:
        """The solution with the columns at positions ``drop`` removed, by the Schur complement:
        V' = V_rr - V_rt V_tt^-1 V_tr, b' = b_r - V_rt V_tt^-1 b_t, RSS' = RSS + b_t' V_tt^-1 b_t
        (the term's extra sum of squares). O(p^2 q) instead of a new O(p^3) factorization."""
        rest = np.setdiff1d(np.arange(len(self.idx)), drop)
        v_tt = self.cov[np.ix_(drop, drop)]
        v_rt = self.cov[np.ix_(rest, drop)]
        solved = np.linalg.solve(v_tt, np.column_stack([v_rt.T, self.beta[drop]]))
        cov = self.cov[np.ix_(rest, rest)] - v_rt @ solved[:, :-1]
        beta = self.beta[rest] - v_rt @ solved[:, -1]
        return _Solution(
            self.idx[rest], cov, beta, self.rss + float(self.beta[drop] @ solved[:, -1])
        )


def _type3(
    sol: _Solution,
    y_mean: float,
    col_term: np.ndarray,
    n_terms: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Wald-test each term (statsmodels' anova_lm typ=3) from an OLS solution.

    For a term T with coefficients b_T and covariance block V_TT = s^2 [(X'X)^-1]_TT:
    SS_T = b_T' [(X'X)^-1]_TT^-1 b_T, F = SS_T / (q s^2), q = |T| (estimable columns).
    ``col_term`` gives each kept column's term id (-1: the intercept). Returns per term id + 1
    (slot 0: the intercept, tested with the uncentred intercept) the Type-III SS and df.
    """
    beta = sol.beta.copy()
    beta[0] += y_mean
    slot = col_term + 1
    df = np.bincount(slot, minlength=n_terms + 1)
    order = np.argsort(slot, kind="stable")
    starts = np.cumsum(df) - df
    ss = np.zeros(n_terms + 1)
    for q in np.unique(df[df > 0]):  # one batched solve per block size
        members = np.flatnonzero(df == q)
        pos = order[starts[members][:, None] + np.arange(q)]
        b = beta[pos]
        blocks = sol.cov[pos[:, :, None], pos[:, None, :]]
        ss[members] = np.einsum("ij,ij->i", b, np.linalg.solve(blocks, b[:, :, None])[:, :, 0])
    return ss, df


def _f_test(
    ss: np.ndarray, df: np.ndarray, rss: float, df_resid: int, floor: float
) -> tuple[np.ndarray, np.ndarray]:
    """F = (SS / q) / (RSS / df_resid) and its upper-tail p (scipy.special.fdtrc); NaN if q = 0.

    Sums of squares at or below ``floor`` (rounding error) are zero. With no residual
    variance left (an exact fit) F is the limit of the test as the noise goes to zero: a term
    that explains anything has F = inf and p = 0, one that explains nothing F = 0 and p = 1;
    dividing rounding error by rounding error instead made every term "significant".
    """
    if df_resid <= 0:
        nan = np.full(len(ss), np.nan)
        return nan, nan
    if rss <= floor:
        explains = ss > floor
        return (
            np.where(df > 0, np.where(explains, np.inf, 0.0), np.nan),
            np.where(df > 0, np.where(explains, 0.0, 1.0), np.nan),
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        fval = np.where(df > 0, ss / df / (rss / df_resid), np.nan)
        p = np.where(df > 0, special.fdtrc(np.maximum(df, 1), df_resid, fval), np.nan)
    return fval, p


def _recode(
    codes: np.ndarray,
    yc: np.ndarray,
    n_levels: list[int],
    terms: list[Term],
    columns: list[Column],
    x: np.ndarray,
    gram: np.ndarray,
    xty: np.ndarray,
) -> tuple[list[Column], np.ndarray, np.ndarray, np.ndarray]:
    """The design after patsy recodes some terms: columns that stay are reused with their
    Gram entries; only the new ones are built, costing O(n p q) instead of O(n p^2)."""
    new_columns = design_columns(terms, n_levels)
    old_index = {c: j for j, c in enumerate(columns, start=1)}
    source = np.array([0] + [old_index.get(c, -1) for c in new_columns])
    fresh = np.flatnonzero(source < 0)
    reused = np.flatnonzero(source >= 0)
    new_x = np.empty((x.shape[0], len(source)))
    new_x[:, reused] = x[:, source[reused]]
    new_x[:, fresh] = design_matrix(codes, [new_columns[j - 1] for j in fresh], n_levels)[:, 1:]
    new_gram = np.empty((len(source), len(source)))
    new_gram[np.ix_(reused, reused)] = gram[np.ix_(source[reused], source[reused])]
    cross = new_x.T @ new_x[:, fresh]
    new_gram[:, fresh] = cross
    new_gram[fresh, :] = cross.T
    new_xty = np.empty(len(source))
    new_xty[reused] = xty[source[reused]]
    new_xty[fresh] = new_x[:, fresh].T @ yc
    return new_columns, new_x, new_gram, new_xty


def fit_anova(
    codes: np.ndarray,
    y: np.ndarray,
    n_levels: list[int],
    interactions: bool = True,
    alpha: float = 0.05,
    eliminate: bool = True,
    coding: str = "treatment",
) -> AnovaFit:
    """Fit the paper's model with backward elimination (docs/sweep-method.md §5).

    While any term's Type-III p exceeds ``alpha``, drop the one with the largest p (the first
    in the table on ties) and refit (terms with no estimable column go first, they change
    nothing). Treatment coding (the paper's) enforces no hierarchy; sum coding only drops a
    term that no remaining interaction contains (marginality). If every term would go, the
    full initial model is returned with ``elimination_failed``.
    """
    codes = np.asarray(codes, dtype=int)
    y = np.asarray(y, dtype=float)
    y_mean = float(y.mean())
    yc = y - y_mean
    initial = candidate_terms(len(n_levels), interactions)
    term_id = {t: i for i, t in enumerate(initial)}
    active = np.ones(len(initial), dtype=bool)
    removed: list[Term] = []
    columns = design_columns(initial, n_levels, coding)
    codings = _codings(initial)
    x = design_matrix(codes, columns, n_levels, coding)
    gram, xty, yty, n = x.T @ x, x.T @ yc, float(yc @ yc), len(yc)
    floor = EXACT_FIT * yty
    keep = independent_columns(gram)
    col_term = np.array([-1] + [term_id[c.term] for c in columns])
    sol = _Solution.solve(gram, xty, yty, keep)
    while True:
        ss, df = _type3(sol, y_mean, col_term[sol.idx], len(initial))
        df_resid = n - len(sol.idx)
        if not eliminate:
            break
        live = np.flatnonzero(active)
        if coding == "sum":  # marginality: only terms no remaining interaction contains
            live = np.array(
                [
                    i
                    for i in live
                    if not any(set(initial[i]) < set(initial[j]) for j in np.flatnonzero(active))
                ],
                dtype=int,
            )
        empty = live[df[live + 1] == 0]
        if len(empty):
            drop = int(empty[0])
        else:
            _, p = _f_test(ss[live + 1], df[live + 1], sol.rss, df_resid, floor)
            if df_resid <= 0 or not np.any(p > alpha):
                break
            drop = int(live[np.nanargmax(p)])
        active[drop] = False
        removed.append(initial[drop])
        if not active.any():
            fit = fit_anova(codes, y, n_levels, interactions, alpha, False, coding)
            fit.elimination_failed = True
            return fit
        terms = [initial[i] for i in np.flatnonzero(active)]
        new_codings = _codings(terms)
        if all(new_codings[t] == codings[t] for t in terms):  # the others' columns stay
            stay = col_term != drop
            downdate = bool(keep.all())
            if downdate:
                sol = sol.without(np.flatnonzero(col_term[sol.idx] == drop))
                sol.idx = np.arange(int(stay.sum()))
            x, gram, xty, keep = x[:, stay], gram[np.ix_(stay, stay)], xty[stay], keep[stay]
            columns = [c for c, s_ in zip(columns, stay[1:]) if s_]
            col_term = col_term[stay]
            if not downdate:
                keep = independent_columns(gram)  # a column aliased only through a dropped one
                sol = _Solution.solve(gram, xty, yty, keep)
        else:
            columns, x, gram, xty = _recode(codes, yc, n_levels, terms, columns, x, gram, xty)
            keep = independent_columns(gram)
            col_term = np.array([-1] + [term_id[c.term] for c in columns])
            sol = _Solution.solve(gram, xty, yty, keep)
        codings = new_codings
    fval, p = _f_test(ss, df, sol.rss, df_resid, floor)
    final = [initial[i] for i in np.flatnonzero(active)]
    kept: list[Term | None] = [None, *final]
    slots = [0] + [i + 1 for i in np.flatnonzero(active)]
    table = [
        TermTest(t, float(ss[k]), int(df[k]), float(fval[k]), float(p[k]))
        for t, k in zip(kept, slots)
    ]
    coef = np.zeros(len(keep))
    coef[sol.idx] = sol.beta
    coef[0] += y_mean
    return AnovaFit(
        n_levels=list(n_levels),
        terms=final,
        columns=columns,
        coef=coef,
        aliased=~keep,
        table=table,
        rss=sol.rss,
        df_resid=df_resid,
        r2=1.0 - sol.rss / yty if yty > 0 else np.nan,
        removed=removed,
        exact=df_resid > 0 and sol.rss <= floor,
        coding=coding,
        xtx_inv=sol.cov,
    )
