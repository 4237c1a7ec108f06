"""Shapiro-Wilk (AS R94) in numpy against scipy.stats.shapiro, sample by sample."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats as st

from washout.stats.kruskal import chi2_sf_1
from washout.stats.shapiro import normal_quantile_as111, normal_upper_tail_as66, shapiro_sorted


def scipy_shapiro(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scipy's W and p, one call per row (as OrderSage calls it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # range zero; n > 5000
        results = [st.shapiro(row) for row in block]
    return np.array([r.statistic for r in results]), np.array([r.pvalue for r in results])


def samples(rng: np.random.Generator, k: int, n: int, kind: str) -> np.ndarray:
    """k sorted samples of size n: normal, skewed over decades, tied, offset, or constant-ish."""
    if kind == "normal":
        x = rng.normal(size=(k, n))
    elif kind == "lognormal":
        x = rng.lognormal(0, 2, size=(k, n)) * 1e4
    elif kind == "ties":
        x = np.round(rng.normal(size=(k, n)) * 2)
    elif kind == "offset":
        x = rng.exponential(size=(k, n)) + 1e6
    else:  # one outlier in an otherwise constant sample
        x = np.full((k, n), 5.0)
        x[:, 0] = 5.0 + rng.uniform(1e-9, 1, k)
    return np.sort(x, axis=1)


KINDS = ("normal", "lognormal", "ties", "offset", "outlier")


@pytest.mark.parametrize("n", [*range(3, 26), 50, 99, 100, 610, 1001, 5001])
def test_w_and_p_agree_with_scipy(n: int) -> None:
    rng = np.random.default_rng(n)
    for kind in KINDS:
        block = samples(rng, 12, n, kind)
        w, p = shapiro_sorted(block)
        sw, sp = scipy_shapiro(block)
        np.testing.assert_allclose(w, sw, rtol=1e-12, atol=1e-15, err_msg=f"{kind} W")
        # p near 0 from W at its lower bound (n = 3: W = 3/4) differs by rounding only.
        np.testing.assert_allclose(p, sp, rtol=1e-9, atol=1e-14, err_msg=f"{kind} p")


def test_edge_cases_match_scipy() -> None:
    """Constant and near-constant data (range below 1e-19: W = p = 1) and the n = 3 clamp at
    W = 3/4."""
    block = np.array([[3.0, 3.0, 3.0], [0.0, 1e-20, 2e-20], [0.0, 0.0, 1.0], [1.0, 2.0, 2.0]])
    np.testing.assert_allclose(
        np.column_stack(shapiro_sorted(block)),
        np.column_stack(scipy_shapiro(block)),
        rtol=1e-12,
        atol=1e-15,
    )


def test_auxiliary_normal_approximations_are_accurate() -> None:
    """AS 111 and AS 66 are approximations; they must stay near the exact functions."""
    from scipy.special import ndtr, ndtri

    p = np.linspace(0.01, 0.99, 20_001)
    np.testing.assert_allclose(normal_quantile_as111(p), ndtri(p), rtol=0, atol=4e-9)
    p = np.linspace(1.25e-4, 1 - 1.25e-4, 20_001)
    np.testing.assert_allclose(normal_quantile_as111(p), ndtri(p), rtol=0, atol=6e-7)
    z = np.linspace(-8, 40, 20_001)
    np.testing.assert_allclose(normal_upper_tail_as66(z), ndtr(-z), rtol=0, atol=5e-12)


def test_chi2_one_degree_of_freedom_tail_matches_scipy() -> None:
    x = np.concatenate([np.linspace(0, 50, 1001), [1e-300, 700.0, 1400.0, np.inf, -1e-15]])
    expected = st.chi2.sf(np.maximum(x, 0), 1)
    np.testing.assert_allclose(chi2_sf_1(x), expected, rtol=1e-13, atol=1e-300)
    assert np.isnan(chi2_sf_1(np.array([np.nan]))).all()
