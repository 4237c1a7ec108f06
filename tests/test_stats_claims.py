"""Claims: parsing, one-line errors, and whether a claim survives random order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import kruskal, wilcoxon
from simulate_longformat import simulate

from washout.errors import WashoutError
from washout.stats.claims import (
    Claim,
    claims_frame,
    evaluate_claims,
    hodges_lehmann,
    parse_claim,
    signed_rank_p,
)
from washout.stats.family import adjust


@pytest.mark.parametrize(
    "text, a, op, factor, b",
    [
        ("A < B", "A", "<", 1.0, "B"),
        ("A > 1.1 * B", "A", ">", 1.1, "B"),
        ("A <= 0.9*B", "A", "<=", 0.9, "B"),
        ("  A>=B  ", "A", ">=", 1.0, "B"),
        ("fio-{rw}-4k >= fio-{rw}-1m", "fio-{rw}-4k", ">=", 1.0, "fio-{rw}-1m"),
        ("redis 7.2 set > 1.05 * redis 6.0 set", "redis 7.2 set", ">", 1.05, "redis 6.0 set"),
        ("'a<b' < \"c > d\"", "a<b", "<", 1.0, "c > d"),
        ("'x' > .5 * 'y*2'", "x", ">", 0.5, "y*2"),
        ("bs=4k < 2e0 * bs=8k", "bs=4k", "<", 2.0, "bs=8k"),
    ],
)
def test_parses_the_claim_forms(text: str, a: str, op: str, factor: float, b: str) -> None:
    claim = parse_claim(text)
    assert (claim.a, claim.op, claim.factor, claim.b) == (a, op, factor, b)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("A = B", "no comparison operator"),
        ("A == B", "no comparison operator"),
        ("A =< B", "operator '=<'"),
        ("A << B", "operator '<<'"),
        ("A < B < C", "more than one comparison"),
        ("< B", "test A is missing"),
        ("A <", "test B is missing"),
        ("'A < B", "unbalanced quotes"),
        ("A < 0 * B", "factor 0 must be a positive number"),
        ("A < -2 * B", "cannot read test B"),
        ("", "empty"),
    ],
)
def test_unparsable_claims_are_one_line_errors_naming_the_claim(text: str, needle: str) -> None:
    with pytest.raises(WashoutError) as err:
        parse_claim(text)
    message = str(err.value)
    assert needle in message and "\n" not in message
    assert message.startswith(f"claim {text.strip()!r}") or message.startswith(f"claim {text!r}")


NAME = st.text("abcXYZ019 -._{}=/", min_size=1, max_size=20).filter(lambda t: t.strip() != "")


@settings(max_examples=300, deadline=None)
@given(
    NAME,
    st.sampled_from(["<", "<=", ">", ">="]),
    st.one_of(st.none(), st.sampled_from(["1.1", "0.9", "2", ".5", "1e-1"])),
    NAME,
    st.booleans(),
)
def test_any_test_name_round_trips(
    a: str, op: str, factor: str | None, b: str, quoted: bool
) -> None:
    """Names from the allowed alphabet (spaces, dashes, dots, braces, '=', '/') parse back,
    bare or quoted."""
    show = (lambda n: f"'{n}'") if quoted else (lambda n: n)
    text = f"{show(a)} {op} {factor + ' * ' if factor else ''}{show(b)}"
    expect_a, expect_b = (a, b) if quoted else (a.strip(), b.strip())
    # "x= < y" reads as operator "=<", "x < =y" as "<=": such names need quotes
    assume(quoted or not (expect_a.endswith("=") or expect_b.startswith("=")))
    claim = parse_claim(text)
    assert (claim.a, claim.op, claim.b) == (expect_a, op, expect_b)
    assert claim.factor == (float(factor) if factor else 1.0)


def test_comparison_semantics_with_factor_and_ties() -> None:
    assert Claim("", "a", "<", 1.0, "b").holds_for(1.0, 2.0)
    assert not Claim("", "a", "<", 1.0, "b").holds_for(2.0, 2.0)
    assert Claim("", "a", "<=", 1.0, "b").holds_for(2.0, 2.0)
    assert Claim("", "a", ">", 1.1, "b").holds_for(111.0, 100.0)
    assert not Claim("", "a", ">", 1.1, "b").holds_for(109.0, 100.0)
    assert Claim("", "a", ">=", 0.5, "b").holds_for(50.0, 100.0)


def _ufs(drop: float, seed: int = 3) -> pd.DataFrame:
    """A beats B by 10% in throughput in the fixed order; random order costs A ``drop``."""
    return simulate(
        tests=("A", "B", "C"),
        means={"A": 110.0, "B": 100.0, "C": 50.0},
        runs=20,
        cv=0.03,
        metrics=("rps",),
        random_factor={"A": 1 - drop},
        seed=seed,
    )


def test_ufs_style_claim_flips_when_random_order_costs_a_17_percent() -> None:
    [result] = evaluate_claims(_ufs(0.17), ["A > B"])
    assert result.metric == "rps"
    assert result.fixed.holds and not result.random.holds
    assert result.order_changes_conclusion is True
    assert result.fixed.median_a > result.fixed.median_b
    assert result.random.median_a < result.random.median_b
    assert result.random.median_a == pytest.approx(0.83 * result.fixed.median_a, rel=0.03)


def test_ufs_style_claim_still_holds_when_random_order_costs_a_little() -> None:
    [result] = evaluate_claims(_ufs(0.05), ["A > B"])
    assert result.fixed.holds and result.random.holds
    assert result.order_changes_conclusion is False


def _paired(df: pd.DataFrame, a: str, b: str, order: str) -> np.ndarray:
    """log(A / B) run by run, computed here independently of the code under test."""
    ok = df[(df["status"] == "ok") & (df["order"] == order)]
    va = ok[ok["test"] == a].set_index("run")["value"]
    vb = ok[ok["test"] == b].set_index("run")["value"]
    runs = sorted(set(va.index) & set(vb.index))
    return np.log(va[runs].to_numpy()) - np.log(vb[runs].to_numpy())


def test_statistics_match_scipy_and_the_walsh_averages() -> None:
    """p from scipy's Wilcoxon signed-rank test of the per-run log ratios; the ratio from the
    median of the Walsh averages; holds from the family of claims x orders."""
    df = _ufs(0.17, seed=5)
    claims = ["A > 1.05 * B", "A >= B", "C < 0.6 * B", "B < A"]
    results = evaluate_claims(df, claims, alpha=0.05, correction="bonferroni")
    ps, sides = [], []
    for r in results:
        for order in ("fixed", "random"):
            side = getattr(r, order)
            d = _paired(df, r.a, r.b, order)
            alternative = "less" if r.op in ("<", "<=") else "greater"
            ref = wilcoxon(d - np.log(r.factor), alternative=alternative, method="exact")
            assert side.p == pytest.approx(ref.pvalue, rel=1e-12)
            walsh = [(x + y) / 2 for i, x in enumerate(d) for y in d[i:]]
            assert side.ratio == pytest.approx(np.exp(np.median(walsh)), rel=1e-12)
            assert side.ratio_ci[0] < side.ratio < side.ratio_ci[1]
            assert side.ratio_ci_confidence >= 1 - 2 * 0.05 / 8
            assert (side.n_runs, side.n_a, side.n_b) == (20, 20, 20)
            ps.append(side.p)
            sides.append((r, side))
    significant, _ = adjust(ps, 0.05, "bonferroni")  # one family: claims x orders
    for (r, side), sig in zip(sides, significant):
        assert side.holds == (sig and parse_claim(r.claim).holds_for(side.ratio, 1.0))
    # The fixed order supports "A > 1.05 B"; random order, where A lost 17%, does not.
    assert results[0].fixed.holds and not results[0].random.holds
    assert results[2].fixed.holds and results[2].random.holds
    for r in results:
        assert (r.ratio, r.ratio_ci) == (r.random.ratio, r.random.ratio_ci)
        ref = kruskal(_paired(df, r.a, r.b, "fixed"), _paired(df, r.a, r.b, "random"))
        assert r.interaction_p == pytest.approx(ref.pvalue, rel=1e-10)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 80), st.integers(0, 2), st.floats(-1.0, 1.0), st.integers(0, 10**6))
def test_signed_rank_p_matches_scipy(n: int, decimals: int, shift: float, seed: int) -> None:
    """Exact below 51 distinct non-zero differences, normal with the tie correction
    otherwise (zeros dropped), as scipy.stats.wilcoxon."""
    d = np.round(np.random.default_rng(seed).normal(shift, 1.0, n), decimals + 1)
    nonzero = np.abs(d[d != 0])
    exact = 0 < nonzero.size <= 50 and np.unique(nonzero).size == nonzero.size
    for alternative in ("less", "greater"):
        got = signed_rank_p(d, alternative)
        if nonzero.size == 0:
            assert got == 1.0
            continue
        ref = wilcoxon(d, alternative=alternative, method="exact" if exact else "asymptotic")
        assert got == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("n, confidence", [(6, 0.95), (12, 0.95), (30, 0.99), (50, 0.9)])
def test_walsh_interval_is_the_inverted_signed_rank_test(n: int, confidence: float) -> None:
    """Tukey's interval [W_(k), W_(M+1-k)]: just outside either end, scipy's exact one-sided
    signed-rank test rejects at (1 - confidence) / 2; just inside, it does not."""
    x = np.random.default_rng(n).lognormal(0.0, 0.3, n)
    _, (lo, hi), achieved = hodges_lehmann(x, confidence)
    tail = (1 - confidence) / 2
    eps = 1e-9
    assert wilcoxon(x - (lo - eps), alternative="greater", method="exact").pvalue <= tail
    assert wilcoxon(x - (lo + eps), alternative="greater", method="exact").pvalue > tail
    assert wilcoxon(x - (hi + eps), alternative="less", method="exact").pvalue <= tail
    assert wilcoxon(x - (hi - eps), alternative="less", method="exact").pvalue > tail
    p_edge = wilcoxon(x - (lo - eps), alternative="greater", method="exact").pvalue
    assert achieved == pytest.approx(1 - 2 * p_edge, rel=1e-12)
    assert hodges_lehmann(x[:5], 0.95)[1] is None  # 2 / 32 > 0.05: no interval from 5 runs


def test_large_samples_use_the_normal_interval_with_its_coverage() -> None:
    """Above 50 runs the interval's rank comes from the normal approximation; its coverage
    of a symmetric centre is still the stated confidence (checked by simulation)."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(400):
        _, (lo, hi), achieved = hodges_lehmann(rng.standard_t(5, 80), 0.9)
        covered += lo <= 0 <= hi
    assert achieved == pytest.approx(0.9, abs=0.01)
    assert abs(covered / 400 - 0.9) < 3 * (0.9 * 0.1 / 400) ** 0.5


def test_shared_run_noise_is_paired_away() -> None:
    """A truly 2% faster than B, under 5% run-to-run noise shared by a run's trials and 1%
    trial noise: comparing all A trials with all B trials drowns the 2% in the run noise;
    comparing them run by run finds it, in both orders, with the ratio's CI around 0.98."""
    df = simulate(
        tests=("A", "B", "C"),
        means={"A": 98.0, "B": 100.0, "C": 100.0},
        runs=20,
        cv=0.01,
        run_cv=0.05,
        seed=11,
    )
    [result] = evaluate_claims(df, ["A < B"])
    for side in (result.fixed, result.random):
        assert side.holds and side.ratio_ci[0] < 0.98 < side.ratio_ci[1] < 1.0
    assert result.order_changes_conclusion is False


# A seed of the experiment below where the claim holds in fixed order only.
FLIP_SEED = 10


def test_conclusion_changes_only_when_the_ratio_differs_between_orders() -> None:
    """A truly 1% faster than B in both orders, with the power to show it about half the
    time: here it is significant in fixed order and not in random order, yet the per-run
    ratios do not differ between the orders, so the order did not change the conclusion."""
    df = simulate(
        tests=("A", "B"),
        means={"A": 99.0, "B": 100.0},
        runs=10,
        cv=0.015,
        run_cv=0.05,
        seed=FLIP_SEED,
    )
    [result] = evaluate_claims(df, ["A < B"])
    assert result.fixed.holds and not result.random.holds
    assert result.interaction_p > 0.05
    assert result.order_changes_conclusion is False


def test_runs_missing_either_test_are_not_paired() -> None:
    df = simulate(tests=("A", "B"), means={"A": 90.0, "B": 100.0}, runs=10, seed=6)
    df.loc[(df["test"] == "A") & (df["run"].isin([0, 2])), "status"] = "failed"
    df.loc[(df["test"] == "B") & (df["run"] == 4), "status"] = "failed"
    [result] = evaluate_claims(df, ["A < B"])
    assert (result.fixed.n_runs, result.fixed.n_a, result.fixed.n_b) == (7, 8, 9)
    assert result.random.n_runs == 10


def test_a_value_that_is_not_positive_is_a_one_line_error() -> None:
    df = simulate(tests=("A", "B"), runs=4, seed=6)
    df.loc[(df["test"] == "B") & (df["run"] == 3), "value"] = 0.0
    with pytest.raises(WashoutError) as err:
        evaluate_claims(df, ["A < B"])
    message = str(err.value)
    assert message.startswith("claim 'A < B': test 'B' has wall = 0.0 in run 3")
    assert "positive" in message and "\n" not in message


def test_metrics_default_to_the_shared_ones() -> None:
    df = simulate(tests=("A", "B"), metrics=("wall", "p99"), runs=6, seed=2)
    df = df[~((df["test"] == "B") & (df["metric"] == "p99"))]
    assert [r.metric for r in evaluate_claims(df, ["A < B"])] == ["wall"]
    with pytest.raises(WashoutError, match=r"claim 'A < B': test 'B' has no metric 'p99'"):
        evaluate_claims(df, ["A < B"], metric="p99")
    only_p99 = df[df["metric"] == "p99"]
    both = pd.concat([only_p99, df[(df["test"] == "B") & (df["metric"] == "wall")]])
    with pytest.raises(WashoutError, match="share no metric"):
        evaluate_claims(both, ["A < B"])


def test_unknown_tests_name_the_claim_and_the_test() -> None:
    df = simulate(tests=("cmd_get", "cmd_set"), runs=3)
    with pytest.raises(WashoutError) as err:
        evaluate_claims(df, ["cmd_get < cmd_del"])
    message = str(err.value)
    assert "claim 'cmd_get < cmd_del'" in message and "unknown test 'cmd_del'" in message
    assert "'cmd_get', 'cmd_set'" in message and "\n" not in message


def test_one_order_only_cannot_say_whether_order_changes_it() -> None:
    df = simulate(
        tests=("A", "B"), means={"A": 90.0, "B": 100.0}, runs=10, orders=("fixed",), seed=4
    )
    [result] = evaluate_claims(df, ["A < B"])
    assert result.fixed.holds and result.random is None
    assert result.order_changes_conclusion is None
    d = result.to_dict()
    assert d["random"] is None and set(d["fixed"]) >= {"holds", "ratio", "ratio_ci", "p"}
    assert set(d) >= {
        "claim",
        "metric",
        "fixed",
        "random",
        "order_changes_conclusion",
        "ratio",
        "ratio_ci",
        "interaction_p",
    }
    assert d["ratio"] is None and d["interaction_p"] is None  # no random-order estimate
    assert d["fixed"]["ratio_ci"][0] < d["fixed"]["ratio"] < d["fixed"]["ratio_ci"][1] < 1


def test_failed_trials_are_not_evaluated() -> None:
    df = simulate(tests=("A", "B"), means={"A": 90.0, "B": 100.0}, runs=10, seed=6)
    bad = df.index[df["test"] == "A"][:4]
    df.loc[bad, "status"] = "timeout"
    df.loc[bad, "value"] = 1e9  # a wild value in a failed trial must not count
    [result] = evaluate_claims(df, ["A < B"])
    assert result.fixed.n_a + result.random.n_a == 16
    assert result.fixed.holds and result.random.holds
    frame = claims_frame([result])
    assert list(frame["order"]) == ["fixed", "random"] and frame["holds"].all()


def test_a_false_claim_holds_at_most_at_rate_alpha() -> None:
    """A and B identical: "A < B" must not hold, in either order, in more than alpha of
    experiments (+3 Monte-Carlo standard errors); it must hold sometimes (the test can).
    tests/test_calibration.py checks this under the confounds too."""
    n_exp, alpha = 200, 0.05
    held = 0
    for seed in range(n_exp):
        df = simulate(tests=("A", "B"), means={"A": 100.0, "B": 100.0}, runs=10, seed=seed)
        [result] = evaluate_claims(df, ["A < B"], alpha=alpha)
        held += result.fixed.holds or result.random.holds
    assert 0 < held / n_exp <= alpha + 3 * (alpha * (1 - alpha) / n_exp) ** 0.5


def test_a_test_against_a_multiple_of_itself() -> None:
    [result] = evaluate_claims(simulate(tests=("A", "B"), runs=8, seed=1), ["A < 1.1 * A"])
    assert result.fixed.ratio == 1.0 and result.fixed.holds and result.random.holds
    assert result.order_changes_conclusion is False
