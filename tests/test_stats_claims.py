"""Claims: parsing, one-line errors, and whether a claim survives random order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import mannwhitneyu

from simulate_longformat import simulate
from washout.errors import WashoutError
from washout.stats.claims import Claim, claims_frame, evaluate_claims, parse_claim
from washout.stats.family import adjust
from washout.stats.median_ci import median_ci


@pytest.mark.parametrize("text, a, op, factor, b", [
    ("A < B", "A", "<", 1.0, "B"),
    ("A > 1.1 * B", "A", ">", 1.1, "B"),
    ("A <= 0.9*B", "A", "<=", 0.9, "B"),
    ("  A>=B  ", "A", ">=", 1.0, "B"),
    ("fio-{rw}-4k >= fio-{rw}-1m", "fio-{rw}-4k", ">=", 1.0, "fio-{rw}-1m"),
    ("redis 7.2 set > 1.05 * redis 6.0 set", "redis 7.2 set", ">", 1.05, "redis 6.0 set"),
    ("'a<b' < \"c > d\"", "a<b", "<", 1.0, "c > d"),
    ("'x' > .5 * 'y*2'", "x", ">", 0.5, "y*2"),
    ("bs=4k < 2e0 * bs=8k", "bs=4k", "<", 2.0, "bs=8k"),
])
def test_parses_the_claim_forms(text: str, a: str, op: str, factor: float, b: str) -> None:
    claim = parse_claim(text)
    assert (claim.a, claim.op, claim.factor, claim.b) == (a, op, factor, b)


@pytest.mark.parametrize("text, needle", [
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
])
def test_unparsable_claims_are_one_line_errors_naming_the_claim(text: str, needle: str) -> None:
    with pytest.raises(WashoutError) as err:
        parse_claim(text)
    message = str(err.value)
    assert needle in message and "\n" not in message
    assert message.startswith(f"claim {text.strip()!r}") or message.startswith(f"claim {text!r}")


NAME = st.text("abcXYZ019 -._{}=/", min_size=1, max_size=20).filter(lambda t: t.strip() != "")


@settings(max_examples=300, deadline=None)
@given(NAME, st.sampled_from(["<", "<=", ">", ">="]), st.one_of(st.none(), st.sampled_from(
    ["1.1", "0.9", "2", ".5", "1e-1"])), NAME, st.booleans())
def test_any_test_name_round_trips(a: str, op: str, factor: str | None, b: str,
                                   quoted: bool) -> None:
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
    return simulate(tests=("A", "B", "C"), means={"A": 110.0, "B": 100.0, "C": 50.0},
                    runs=20, cv=0.03, metrics=("rps",), random_factor={"A": 1 - drop},
                    seed=seed)


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


def test_statistics_match_scipy_and_median_ci() -> None:
    df = _ufs(0.17, seed=5)
    claims = ["A > 1.05 * B", "A >= B", "C < 0.6 * B", "B < A"]
    results = evaluate_claims(df, claims, alpha=0.05, correction="bonferroni")
    ok = df[df["status"] == "ok"]
    for order in ("fixed", "random"):
        ps = []
        for r in results:
            side = getattr(r, order)
            a = ok[(ok["order"] == order) & (ok["test"] == r.a)]["value"].to_numpy()
            b = ok[(ok["order"] == order) & (ok["test"] == r.b)]["value"].to_numpy()
            alternative = "less" if r.op in ("<", "<=") else "greater"
            ref = mannwhitneyu(a, r.factor * b, alternative=alternative)
            assert side.p == pytest.approx(ref.pvalue, rel=1e-12)
            assert (side.median_a, side.median_b) == (np.median(a), np.median(b))
            assert side.ci_a == median_ci(a, 0.95)[:2] and side.ci_b == median_ci(b, 0.95)[:2]
            assert (side.n_a, side.n_b) == (20, 20)
            ps.append(side.p)
        significant, _ = adjust(ps, 0.05, "bonferroni")  # family: the claims in this order
        for r, sig in zip(results, significant):
            side = getattr(r, order)
            medians_agree = parse_claim(r.claim).holds_for(side.median_a, side.median_b)
            assert side.holds == (sig and medians_agree)
    # The fixed order supports "A > 1.05 B"; random order, where A lost 17%, does not.
    assert results[0].fixed.holds and not results[0].random.holds
    assert results[2].fixed.holds and results[2].random.holds


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
    df = simulate(tests=("A", "B"), means={"A": 90.0, "B": 100.0}, runs=10,
                  orders=("fixed",), seed=4)
    [result] = evaluate_claims(df, ["A < B"])
    assert result.fixed.holds and result.random is None
    assert result.order_changes_conclusion is None
    d = result.to_dict()
    assert d["random"] is None and set(d["fixed"]) >= {"holds", "median_a", "median_b", "p"}
    assert set(d) >= {"claim", "metric", "fixed", "random", "order_changes_conclusion"}


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
    """A and B identical: "A < B" must not hold in more than alpha of experiments (+3
    Monte-Carlo standard errors), in either order; it must hold sometimes (the test can)."""
    n_exp, alpha = 200, 0.05
    held = {"fixed": 0, "random": 0}
    for seed in range(n_exp):
        df = simulate(tests=("A", "B"), means={"A": 100.0, "B": 100.0}, runs=10, seed=seed)
        [result] = evaluate_claims(df, ["A < B"], alpha=alpha)
        held["fixed"] += result.fixed.holds
        held["random"] += result.random.holds
    bound = alpha + 3 * (alpha * (1 - alpha) / n_exp) ** 0.5
    assert all(count / n_exp <= bound for count in held.values())
    assert sum(held.values()) > 0
