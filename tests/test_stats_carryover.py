"""Carryover: injected predecessor effects are found, none are invented, scipy agrees."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu

from simulate_longformat import simulate
from washout.errors import WashoutError
from washout.stats.carryover import RESET, carryover, carryover_frame
from washout.stats.family import adjust

ALPHA = 0.05


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_injected_predecessor_ranks_first_and_is_significant(seed: int) -> None:
    # 40 random runs: about 8 trials of c right after b, enough for p < alpha / 25.
    df = simulate(carryover={("c", "b"): 1.10}, runs=40, seed=seed)
    result = carryover(df)
    top = result.pairs[0]
    assert (top.test, top.predecessor, top.metric) == ("c", "b", "wall")
    assert top.significant
    assert 7.0 < top.delta_pct < 13.0
    assert top.p == min(p.p for p in result.pairs)
    assert all(abs(p.delta_pct) < 5 for p in result.pairs[1:])


def test_a_cold_start_after_the_reset_is_found() -> None:
    df = simulate(carryover={("d", RESET): 0.85}, runs=40, seed=11)
    top = carryover(df, correction="holm").pairs[0]
    assert (top.test, top.predecessor, top.significant) == ("d", RESET, True)
    assert top.delta_pct < -10


def _by_hand(df: pd.DataFrame, test: str, predecessor: str) -> tuple[np.ndarray, np.ndarray]:
    """The two samples of one pair, found with a plain loop over the trials."""
    at = {(r.worker, r.run, r.position): r.test for r in df.itertuples()}
    after, other = [], []
    for r in df[(df["order"] != "fixed") & (df["test"] == test)].itertuples():
        if r.status != "ok":
            continue
        pred = RESET if r.position == 0 else at[(r.worker, r.run, r.position - 1)]
        (after if pred == predecessor else other).append(r.value)
    return np.array(after), np.array(other)


def test_every_pair_matches_scipy_and_the_delta_formula() -> None:
    df = simulate(carryover={("a", "e"): 1.05}, runs=10, orders=("fixed", "random", "reverse"),
                  seed=21)
    result = carryover(df)
    expected = {(t, s) for t in "abcde" for s in (*"abcde", RESET)
                if s != t and len(_by_hand(df, t, s)[0]) > 0}
    assert {(p.test, p.predecessor) for p in result.pairs} == expected
    ps = []
    for pair in result.pairs:
        after, other = _by_hand(df, pair.test, pair.predecessor)
        assert (pair.n_after, pair.n_other) == (len(after), len(other))
        ref = mannwhitneyu(after, other, alternative="two-sided")
        assert pair.u == pytest.approx(ref.statistic)
        assert pair.p == pytest.approx(ref.pvalue, rel=1e-12)
        mean_after, mean_other = after.mean(), other.mean()
        assert pair.delta_pct == pytest.approx((mean_after - mean_other) / mean_other * 100)
        ps.append(pair.p)
    assert [p.significant for p in result.pairs] == adjust(ps, ALPHA, "bonferroni")[0]
    assert result.alpha_per_test == pytest.approx(ALPHA / len(expected))
    deltas = [abs(p.delta_pct) for p in result.pairs]
    assert deltas == sorted(deltas, reverse=True)


def test_fixed_runs_are_not_used() -> None:
    # In fixed order every test has the same predecessor: an effect there is unidentifiable.
    fixed_only = simulate(carryover={("c", "b"): 1.3}, runs=20, orders=("fixed",), seed=3)
    assert carryover(fixed_only).pairs == []
    mixed = pd.concat([
        simulate(carryover={("b", "a"): 1.3}, runs=20, orders=("fixed",), seed=3),
        simulate(runs=20, orders=("random",), seed=4).assign(run=lambda d: d["run"] + 100),
    ])
    assert carryover(mixed).significant() == []


def test_by_worker_finds_the_effect_on_its_worker_only() -> None:
    df = pd.concat([
        simulate(workers=("w1",), runs=20, seed=31),
        simulate(workers=("w2",), carryover={("e", "a"): 1.12}, runs=20, seed=32),
    ])
    per_worker = carryover(df, by_worker=True)
    flagged = [(p.worker, p.test, p.predecessor) for p in per_worker.significant()]
    assert flagged == [("w2", "e", "a")]
    assert {p.worker for p in per_worker.pairs} == {"w1", "w2"}
    pooled = carryover(df)
    assert {p.worker for p in pooled.pairs} == {None}
    assert pooled.family_size == per_worker.family_size // 2


def test_failed_trials_are_excluded_but_still_precede() -> None:
    df = simulate(runs=10, seed=41)
    hit = df.index[(df["order"] == "random") & (df["position"] == 2)][:3]
    df.loc[hit, "status"] = "failed"
    df.loc[hit[:1], "value"] = math.nan
    result = carryover(df)
    assert result.excluded_trials == 3
    pair = next(p for p in result.pairs if (p.test, p.predecessor) == ("a", "b"))
    after, other = _by_hand(df, "a", "b")
    assert (pair.n_after, pair.n_other) == (len(after), len(other))


def test_family_wise_false_positives_stay_within_alpha() -> None:
    """No effect anywhere: across 200 simulated experiments, the share with any pair flagged
    is at most alpha (+3 Monte-Carlo standard errors); uncorrected, it would be far above."""
    n_exp = 200
    flagged = {"bonferroni": 0, "holm": 0, "none": 0}
    for seed in range(n_exp):
        # 30 random runs: ~7 trials per pair, so p < alpha / m is attainable (with ~3, the
        # exact test's smallest p is above alpha / m and the check would be vacuous).
        df = simulate(tests=("a", "b", "c", "d"), runs=30, orders=("random",), seed=1000 + seed)
        result = carryover(df)
        ps = [p.p for p in result.pairs]
        flagged["bonferroni"] += bool(result.significant())
        flagged["holm"] += any(adjust(ps, ALPHA, "holm")[0])
        flagged["none"] += any(p < ALPHA for p in ps)
    bound = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / n_exp)
    assert flagged["bonferroni"] / n_exp <= bound
    assert flagged["holm"] / n_exp <= bound
    assert flagged["holm"] > 0  # the level is reachable: the check can fail
    assert flagged["none"] / n_exp > 0.3  # 16 comparisons uncorrected: the correction matters


def test_frame_and_dicts_have_the_documented_fields() -> None:
    result = carryover(simulate(runs=5, seed=51))
    keys = {"test", "predecessor", "metric", "n_after", "n_other", "delta_pct", "p", "significant"}
    assert keys <= set(result.pairs[0].to_dict())
    frame = carryover_frame(result)
    assert len(frame) == len(result.pairs) and keys <= set(frame.columns)
    assert result.to_dict()["pairs"][0] == result.pairs[0].to_dict()


def test_metric_filter_and_missing_columns() -> None:
    df = simulate(runs=5, metrics=("wall", "rps"), seed=61)
    assert {p.metric for p in carryover(df).pairs} == {"wall", "rps"}
    assert {p.metric for p in carryover(df, metric="rps").pairs} == {"rps"}
    with pytest.raises(WashoutError) as err:
        carryover(df.drop(columns=["position"]))
    assert "position" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(WashoutError, match="correction = 'fdr'"):
        carryover(df, correction="fdr")


def test_constant_values_count_in_the_family_with_p_one() -> None:
    df = simulate(runs=6, seed=71)
    df.loc[df["test"] == "a", "value"] = 5.0
    result = carryover(df)
    flat = [p for p in result.pairs if p.test == "a"]
    assert flat and all(p.p == 1.0 and p.delta_pct == 0.0 and not p.significant for p in flat)
    assert result.family_size == len(result.pairs)


def test_published_memcached_get_hits_is_slow_right_after_the_reset() -> None:
    """Duplyakin et al. (ATC 2023, Table 3): get_hits is 5.3% faster in the fixed order,
    where it runs last. Its random-order trials say why: right after the reset it is slower
    than later in the run; no other pair is flagged."""
    from conftest import FIXTURES
    from washout.sources import load_trials

    df, _ = load_trials(FIXTURES / "ordersage-artifact" / "memcached" / "all_exp_results.csv")
    result = carryover(df)
    flagged = [(p.test.split("/")[-1], p.predecessor) for p in result.significant()]
    assert flagged == [("get_hits_test.sh", RESET)]
    top = result.significant()[0]
    assert -6 < top.delta_pct < -3 and top.n_after + top.n_other == 50


def test_a_csv_without_positions_is_a_one_line_error(tmp_path) -> None:
    from washout.sources import load_trials

    path = tmp_path / "nopos.csv"
    simulate(runs=3).drop(columns=["position"]).to_csv(path, index=False)
    df, _ = load_trials(path)
    with pytest.raises(WashoutError) as err:
        carryover(df)
    assert "position" in str(err.value) and "\n" not in str(err.value)
