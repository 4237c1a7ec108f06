"""Sum-to-zero (deviation) coding for the conclusions (ours): Type-III tests as statsmodels
computes them with ``C(f, Sum)``, also on designs with missing cells, and importance that
does not depend on how levels are labelled; the paper's treatment coding kept for
``--method paper``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from conftest import CONFIGSPACES as FIXTURES
from statsmodels.stats.anova import anova_lm

from washout.sweep.anova import design_matrix, fit_anova
from washout.sweep.conclusions import conclusions_of
from washout.sweep.space import Space, full_grid, load_space_csv

SUM_FORMULA = (
    "y ~ C(a, Sum) + C(b, Sum) + C(c, Sum) + C(a, Sum):C(b, Sum) + C(a, Sum):C(c, Sum)"
    " + C(b, Sum):C(c, Sum)"
)
TERMS = [None, (0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]


def _three_factors(missing: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """A 3 x 4 x 2 grid, two replicates, with the (a, b) cells in ``missing`` left out;
    y has a main effect of a, an a x c and a b x c interaction, and noise."""
    grid = full_grid(["a", "b", "c"], [[0, 1, 2], [0, 1, 2, 3], [0, 1]]).codes
    codes = np.repeat(grid, 2, axis=0)
    keep = np.ones(len(codes), dtype=bool)
    for a, b in missing:
        keep &= ~((codes[:, 0] == a) & (codes[:, 1] == b))
    codes = codes[keep]
    rng = np.random.default_rng(1)
    y = (
        codes[:, 0]
        + 0.6 * (codes[:, 0] == 2) * codes[:, 2]
        + 2.0 * (codes[:, 1] == 2) * codes[:, 2]
        + rng.normal(0, 0.5, len(codes))
    )
    return codes, y


def test_sum_coded_type3_matches_statsmodels() -> None:
    codes, y = _three_factors([])
    fit = fit_anova(codes, y, [3, 4, 2], eliminate=False, coding="sum")
    frame = pd.DataFrame(codes, columns=list("abc")).assign(y=y)
    model = smf.ols(SUM_FORMULA, frame).fit()
    table = anova_lm(model, typ=3)
    for ours, (_, row) in zip(fit.table, table.iloc[:-1].iterrows()):
        assert ours.ss == pytest.approx(row["sum_sq"], rel=1e-9)
        assert ours.df == row["df"]
        assert ours.p == pytest.approx(row["PR(>F)"], rel=1e-6)
    np.testing.assert_allclose(fit.predict(codes), model.fittedvalues, atol=1e-9)


@pytest.mark.parametrize("missing", [[(1, 3)], [(1, 3), (2, 0)], [(0, 0), (1, 1), (2, 2)]])
def test_missing_cells_match_statsmodels(missing: list[tuple[int, int]]) -> None:
    """With cells missing the a:b columns are linearly dependent. Fitted values, RSS and
    residual df are those of statsmodels' full formula; each term's Type-III test is
    statsmodels' Wald F test of that term's columns in the model without the aliased
    columns (R's lm: aliased coefficients are not estimated), and terms without an aliased
    column and not marginal to one (statsmodels' minimum-norm solution moves those) agree
    with statsmodels' own anova_lm(typ=3)."""
    codes, y = _three_factors(missing)
    fit = fit_anova(codes, y, [3, 4, 2], eliminate=False, coding="sum")
    assert fit.aliased.any()
    frame = pd.DataFrame(codes, columns=list("abc")).assign(y=y)
    with pytest.warns(Warning):  # statsmodels says the design is rank-deficient
        model = smf.ols(SUM_FORMULA, frame).fit()
    np.testing.assert_allclose(fit.predict(codes), model.fittedvalues, atol=1e-9)
    assert fit.rss == pytest.approx(model.ssr, rel=1e-9)
    assert fit.df_resid == model.df_resid
    x = design_matrix(codes, fit.columns, [3, 4, 2], "sum")
    keep = ~fit.aliased
    reduced = sm.OLS(y, x[:, keep]).fit()
    term_of = [t for t, k in zip([None, *[c.term for c in fit.columns]], keep) if k]
    table = anova_lm(model, typ=3)
    aliased = {c.term for c, a in zip(fit.columns, fit.aliased[1:]) if a}
    assert aliased == {(0, 1)}
    for row, name in zip(fit.table, table.index[:-1]):
        cols = np.flatnonzero([t == row.term for t in term_of])
        wald = reduced.f_test(np.eye(keep.sum())[cols])
        assert row.df == len(cols)
        assert row.f == pytest.approx(float(np.squeeze(wald.fvalue)), rel=1e-7)
        assert row.p == pytest.approx(float(np.squeeze(wald.pvalue)), rel=1e-6, abs=1e-300)
        if row.term is not None and not any(set(row.term) <= set(t) for t in aliased):
            assert row.ss == pytest.approx(table.loc[name, "sum_sq"], rel=1e-7)


def _relabelled(space: Space, seed: int) -> Space:
    """The same space with every parameter's levels renamed in a random order (text
    labels, so the order of levels, the reference level and the last level all change)."""
    rng = np.random.default_rng(seed)
    levels, codes = [], space.codes.copy()
    for f, lv in enumerate(space.levels):
        perm = rng.permutation(len(lv))
        levels.append([f"L{int(k)}" for k in np.argsort(perm)])
        codes[:, f] = perm[space.codes[:, f]]
    order = [np.argsort(lv) for lv in levels]  # text levels are sorted, as a CSV's would be
    for f, o in enumerate(order):
        rank = np.empty_like(o)
        rank[o] = np.arange(len(o))
        codes[:, f] = rank[codes[:, f]]
        levels[f] = [levels[f][i] for i in o]
    return Space(space.parameters, levels, codes, space.y, space.metric, space.source)


@pytest.mark.parametrize(
    "file,metric", [("silo_ycsb.csv", "tput"), ("rs-6d-c3_obj1.csv", "Throughput-")]
)
def test_relabelling_levels_keeps_important_terms_and_shares(file: str, metric: str) -> None:
    space = load_space_csv(FIXTURES / file, metric)
    rows = np.random.default_rng(0).choice(len(space), size=len(space) * 2 // 3, replace=False)
    for name, subset in (("full grid", np.arange(len(space))), ("unbalanced sample", rows)):
        base = conclusions_of(space, subset, space.y[subset], "anova", "sum")
        for seed in (1, 2):
            other = _relabelled(space, seed)
            again = conclusions_of(other, subset, other.y[subset], "anova", "sum")
            assert again.important == base.important, name
            assert set(again.shares) == set(base.shares), name
            for term, share in base.shares.items():
                assert again.shares[term] == pytest.approx(share, rel=1e-6, abs=1e-12), name


def test_treatment_coding_depends_on_labels_where_sum_coding_does_not() -> None:
    """A 3 x 2 example where A matters only when B = 1: under treatment coding A's Type-III
    test is its effect at B's reference level, so relabelling B's levels flips it."""
    grid = full_grid(["a", "b"], [[0, 1, 2], [0, 1]]).codes
    codes = np.repeat(grid, 5, axis=0)
    rng = np.random.default_rng(4)
    y = 3.0 * codes[:, 0] * (codes[:, 1] == 1) + rng.normal(0, 0.3, len(codes))
    flipped = codes.copy()
    flipped[:, 1] = 1 - flipped[:, 1]

    def p_main_a(c: np.ndarray, coding: str) -> float:
        fit = fit_anova(c, y, [3, 2], eliminate=False, coding=coding)
        return next(t.p for t in fit.table if t.term == (0,))

    assert p_main_a(codes, "treatment") > 0.05 > 1e-10 > p_main_a(flipped, "treatment")
    assert p_main_a(codes, "sum") == pytest.approx(p_main_a(flipped, "sum"), rel=1e-9)


def test_sum_coded_shares_decompose_the_explained_variance() -> None:
    space = load_space_csv(FIXTURES / "silo_ycsb.csv", "tput")
    fit = fit_anova(space.codes, space.y, space.n_levels, eliminate=False, coding="sum")
    shares = fit.shares()
    assert sum(shares.values()) == pytest.approx(fit.r2, rel=1e-9)
    # on the complete grid each share is the term's sum of squares over the total
    total = float(np.sum((space.y - space.y.mean()) ** 2))
    for row in fit.table[1:]:
        assert shares[row.term] == pytest.approx(row.ss / total, rel=1e-9)
    paper = fit_anova(space.codes, space.y, space.n_levels, eliminate=False).shares()
    assert sum(paper.values()) != pytest.approx(fit.r2, rel=1e-3)  # the paper's are not


def test_sum_coded_elimination_keeps_marginality() -> None:
    codes, y = _three_factors([])
    fit = fit_anova(codes, y, [3, 4, 2], coding="sum")
    for term in fit.terms:
        for f in term:
            assert (f,) in fit.terms  # no interaction without its main effects
    assert (1, 2) in fit.terms and (0,) in fit.terms
