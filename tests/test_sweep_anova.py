"""The fast ANOVA agrees with statsmodels (the paper's own tool) on the published spaces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from conftest import CONFIGSPACES as FIXTURES
from statsmodels.stats.anova import anova_lm

from washout.sweep.anova import candidate_terms, design_columns, fit_anova
from washout.sweep.space import load_space_csv


def _label(names: list[str], term: tuple[int, ...]) -> str:
    return ":".join(f"C({names[f]})" for f in term)


def _formula(metric: str, names: list[str], terms: list[tuple[int, ...]]) -> str:
    return f"{metric} ~ " + " + ".join(_label(names, t) for t in terms)


def _frame(space, rows=None) -> pd.DataFrame:
    rows = np.arange(len(space)) if rows is None else rows
    names = [f"p{i}" for i in range(len(space.parameters))]
    data = {n: space.codes[rows, i] for i, n in enumerate(names)}
    data["y"] = space.y[rows]
    return pd.DataFrame(data), names


def _statsmodels_elimination(frame: pd.DataFrame, names: list[str], interactions: bool):
    """The paper's loop, written with statsmodels as its code does (docs/sweep-method.md §5)."""
    terms = candidate_terms(len(names), interactions)
    removed = []
    while True:
        model = smf.ols(_formula("y", names, terms), frame).fit()
        table = anova_lm(model, typ=3).drop(index=["Intercept", "Residual"])
        if not (table["PR(>F)"] > 0.05).any():
            return model, anova_lm(model, typ=3), terms, removed
        worst = table["PR(>F)"].idxmax()
        index = [_label(names, t) for t in terms].index(worst)
        removed.append(terms.pop(index))


def test_silo_full_model_matches_statsmodels_type3() -> None:
    space = load_space_csv(FIXTURES / "silo_ycsb.csv", "tput")
    frame, names = _frame(space)
    fit = fit_anova(space.codes, space.y, space.n_levels, eliminate=False)
    model = smf.ols(_formula("y", names, candidate_terms(3, True)), frame).fit()
    table = anova_lm(model, typ=3)
    ours = {None: fit.table[0]} | {t.term: t for t in fit.table[1:]}
    for term, row in zip([None, *candidate_terms(3, True)], table.index[:-1]):
        assert ours[term].ss == pytest.approx(table.loc[row, "sum_sq"], rel=1e-7)
        assert ours[term].f == pytest.approx(table.loc[row, "F"], rel=1e-7)
        assert ours[term].p == pytest.approx(table.loc[row, "PR(>F)"], rel=1e-5, abs=1e-300)
    assert fit.rss == pytest.approx(table.loc["Residual", "sum_sq"], rel=1e-7)
    assert fit.r2 == pytest.approx(model.rsquared, rel=1e-10)
    np.testing.assert_allclose(fit.predict(space.codes), model.fittedvalues, rtol=1e-8)


@pytest.fixture(autouse=True)
def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


# Samples where main effects go while their interactions stay, and where both main effects of
# a kept interaction go (rs 10%, seed 0: 14 terms removed).
@pytest.mark.parametrize(
    "name,metric,fraction,interactions",
    [
        ("rs-6d-c3_obj1.csv", "Throughput-", 0.10, True),
        ("herd_ycsb.csv", "tput", 0.20, True),
        ("herd_ycsb.csv", "tput", 1.0, False),
    ],
)
def test_backward_elimination_matches_statsmodels(
    name: str, metric: str, fraction: float, interactions: bool
) -> None:
    """Same terms removed in the same order, same final Type-III table, including the steps
    where a main effect goes while its interactions stay (patsy then recodes them)."""
    space = load_space_csv(FIXTURES / name, metric)
    rows = np.random.default_rng(0).permutation(len(space))[: int(fraction * len(space))]
    frame, names = _frame(space, rows)
    model, table, terms, removed = _statsmodels_elimination(frame, names, interactions)
    fit = fit_anova(space.codes[rows], space.y[rows], space.n_levels, interactions)
    assert fit.removed == removed
    assert sorted(fit.terms) == sorted(terms)
    assert removed, "the case must exercise elimination"
    if interactions:
        assert any(len(t) == 1 and any(t[0] in u for u in terms if len(u) == 2) for t in removed)
    ours = {t.term: t for t in fit.table[1:]}
    for term in terms:
        row = _label(names, term)
        assert ours[term].ss == pytest.approx(table.loc[row, "sum_sq"], rel=1e-6)
        assert ours[term].df == table.loc[row, "df"]
    np.testing.assert_allclose(fit.predict(space.codes[rows]), model.fittedvalues, rtol=1e-7)


def test_patsy_coding_of_interactions_without_main_effects() -> None:
    """Column names and count as patsy makes them when main effects are missing."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"a": rng.integers(0, 3, 80), "b": rng.integers(0, 4, 80), "c": rng.integers(0, 2, 80)}
    )
    frame["y"] = rng.normal(size=80)
    cases = {
        "y ~ C(a) + C(a):C(b)": [(0,), (0, 1)],
        "y ~ C(b) + C(a):C(b)": [(1,), (0, 1)],
        "y ~ C(a):C(b) + C(b):C(c)": [(0, 1), (1, 2)],
        "y ~ C(c) + C(a):C(b) + C(a):C(c)": [(2,), (0, 1), (0, 2)],
    }
    letters = "abc"
    for formula, terms in cases.items():
        expected = list(smf.ols(formula, frame).fit().params.index[1:])
        columns = design_columns(terms, [3, 4, 2])
        names = []
        for col in columns:
            reduced = {f: lv > 0 and _reduced(col, f, terms) for f, lv in col.cells}
            names.append(
                ":".join(
                    f"C({letters[f]})[{'T.' if reduced[f] else ''}{lv}]"
                    for f, lv in sorted(col.cells)
                )
            )
        assert sorted(names) == sorted(expected), formula


def _reduced(col, f: int, terms) -> bool:
    """Whether factor f is treatment-coded (reduced) in this column: its level 0 never appears."""
    cols = [
        c
        for c in design_columns(terms, [3, 4, 2])
        if c.term == col.term and len(c.cells) == len(col.cells)
    ]
    return all(dict(c.cells)[f] != 0 for c in cols)


def test_unseen_levels_predict_without_error() -> None:
    """A level (and cells) missing from the fitting rows are aliased, not a crash."""
    space = load_space_csv(FIXTURES / "silo_ycsb.csv", "tput")
    keep = space.codes[:, 1] != 3  # drop every row with the 4th 'keys' level
    fit = fit_anova(space.codes[keep], space.y[keep], space.n_levels)
    pred = fit.predict(space.codes[~keep])
    assert np.isfinite(pred).all()
    frame, names = _frame(space, np.flatnonzero(keep))
    model = smf.ols(_formula("y", names, fit.terms), frame).fit()
    np.testing.assert_allclose(fit.predict(space.codes[keep]), model.fittedvalues, rtol=1e-7)


def test_lrzip_full_space_with_aliased_columns_matches_statsmodels() -> None:
    """Lrzip's binary options are partly exclusive, so some interaction columns are aliased
    and whole terms go with no estimable column; the fit still equals statsmodels'."""
    space = load_space_csv(FIXTURES / "Lrzip.csv", "<$performance")
    assert fit_anova(space.codes, space.y, space.n_levels, eliminate=False).aliased.any()
    fit = fit_anova(space.codes, space.y, space.n_levels)
    assert len(fit.removed) > 40
    frame, names = _frame(space)
    model = smf.ols(_formula("y", names, fit.terms), frame).fit()
    np.testing.assert_allclose(fit.predict(space.codes), model.fittedvalues, rtol=1e-6)
    assert fit.r2 == pytest.approx(model.rsquared, rel=1e-9)


def test_an_exactly_additive_metric_keeps_its_main_effects_and_says_it_fits_exactly() -> None:
    """With no residual variance, rounding error over rounding error made every interaction
    "significant" with share 0; the limit of the F test keeps what explains anything."""
    codes = np.array(np.meshgrid(range(4), range(3), range(2), indexing="ij")).reshape(3, -1).T
    y = 3.0 * codes[:, 0] + np.array([0.0, 5.0, 7.5])[codes[:, 1]] + 2.0 * codes[:, 2]
    fit = fit_anova(codes, y, [4, 3, 2])
    assert fit.terms == [(0,), (1,), (2,)] and fit.exact
    assert sorted(fit.removed) == [(0, 1), (0, 2), (1, 2)]
    assert all(t.p == 0.0 for t in fit.table if t.term is not None)
    noisy = fit_anova(codes, y + np.random.default_rng(1).normal(0, 1, len(y)), [4, 3, 2])
    assert not noisy.exact
