"""Family-wise correction: Bonferroni and Holm against statsmodels' multipletests."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from washout.errors import WashoutError
from washout.stats.family import adjust

pvalue_lists = st.lists(st.floats(min_value=1e-9, max_value=1.0), min_size=1, max_size=40)


@pytest.mark.parametrize("method", ["bonferroni", "holm"])
def test_agrees_with_statsmodels_on_random_families(method: str, monkeypatch) -> None:
    # statsmodels' Holm branch calls gc.collect() on every call (0.2 s each inside pytest);
    # it has no bearing on the result.
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(8)
    for _ in range(300):
        m = int(rng.integers(1, 30))
        # A mix of small and uniform p-values, so both accepts and rejects occur.
        p = np.where(rng.random(m) < 0.3, rng.random(m) * 0.01, rng.random(m))
        for alpha in (0.01, 0.05, 0.1):
            ours, _ = adjust(p.tolist(), alpha, method)
            theirs = multipletests(p, alpha=alpha, method=method)[0]
            assert ours == theirs.tolist()


@settings(max_examples=200, deadline=None)
@given(pvalue_lists, st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_rejects_everything_bonferroni_does(ps: list[float], alpha: float) -> None:
    bonferroni, _ = adjust(ps, alpha, "bonferroni")
    holm, _ = adjust(ps, alpha, "holm")
    assert all(h for b, h in zip(bonferroni, holm) if b)


def test_bonferroni_threshold_is_strict_and_reported() -> None:
    significant, per_test = adjust([0.01, 0.0099, 0.5, 0.04], 0.04, "bonferroni")
    assert per_test == pytest.approx(0.01)
    assert significant == [False, True, False, False]  # p = alpha/m is not significant


def test_holm_step_down_stops_at_the_first_failure() -> None:
    # sorted: 0.005 < .05/4 yes; 0.01 < .05/3 yes; 0.03 < .05/2 no -> stop; 0.04 not tested.
    significant, per_test = adjust([0.01, 0.04, 0.03, 0.005], 0.05, "holm")
    assert significant == [True, False, False, True]
    assert per_test is None
    reference = multipletests([0.01, 0.04, 0.03, 0.005], alpha=0.05, method="holm")[0]
    assert reference.tolist() == significant


def test_nan_pvalues_are_not_in_the_family() -> None:
    significant, per_test = adjust([0.02, math.nan, 0.5], 0.05, "bonferroni")
    assert per_test == pytest.approx(0.025)
    assert significant == [True, False, False]
    assert adjust([], 0.05, "holm") == ([], None)
    assert adjust([math.nan], 0.05, "bonferroni") == ([False], None)


def test_method_names_are_case_insensitive() -> None:
    assert adjust([0.001], 0.05, "Holm") == ([True], None)


@pytest.mark.parametrize(
    "alpha, method, needle",
    [
        (0.05, "sidak", "correction = 'sidak'"),
        (1.5, "holm", "alpha = 1.5"),
        (0, "bonferroni", "alpha = 0"),
    ],
)
def test_bad_arguments_are_one_line_errors(alpha: float, method: str, needle: str) -> None:
    with pytest.raises(WashoutError) as err:
        adjust([0.1], alpha, method)
    assert needle in str(err.value) and "\n" not in str(err.value)
