"""Carryover: injected predecessor effects are blamed on the right predecessor, the first
trial after the reset is its own effect, none are invented by drift or run-to-run noise, and
every number agrees with an independent computation (scipy, statsmodels)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.stats import ttest_ind
from simulate_longformat import simulate

from washout.errors import WashoutError
from washout.stats.carryover import RESET, TREND_LEVEL, carryover, carryover_frame
from washout.stats.family import adjust

ALPHA = 0.05


def _blamed(result) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """The significant (test, predecessor) pairs, first-after-reset rows left out."""
    return {(p.test, p.predecessor) for p in result.significant() if p.predecessor != RESET}


def _pair(result, test: str, predecessor: str):  # type: ignore[no-untyped-def]
    return next(p for p in result.pairs if (p.test, p.predecessor) == (test, predecessor))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_injected_predecessor_ranks_first_and_is_significant(seed: int) -> None:
    df = simulate(carryover={("c", "b"): 1.10}, runs=40, seed=seed)
    result = carryover(df)
    top = result.pairs[0]
    assert (top.test, top.predecessor, top.metric) == ("c", "b", "wall")
    assert top.significant and _blamed(result) == {("c", "b")}
    assert 7.0 < top.delta_pct < 13.0 and top.ci[0] < 10.0 < top.ci[1]
    assert all(abs(p.delta_pct) < 5 for p in result.pairs[1:])


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_a_true_carryover_is_not_blamed_on_the_other_predecessors(seed: int) -> None:
    """c right after b is 8% slower, and every first trial after the reset 10% slower: "after
    b" must not make a, d and e look like c's culprits too (compared with a pool that holds
    the after-b trials, they would), nor the reset effect make any pair look guilty."""
    df = simulate(
        carryover={("c", "b"): 1.08}, first_after_reset=1.10, runs=200, cv=0.01, seed=seed
    )
    result = carryover(df)
    assert _blamed(result) == {("c", "b")}
    cb = _pair(result, "c", "b")
    assert cb.ci[0] < 8.0 < cb.ci[1]
    resets = [p for p in result.pairs if p.predecessor == RESET]
    assert len(resets) == 5 and all(p.significant and p.ci[0] < 10 < p.ci[1] for p in resets)


@pytest.mark.parametrize("seed", [2, 3])
def test_the_first_trial_after_the_reset_is_its_own_effect_not_carryover(seed: int) -> None:
    df = simulate(first_after_reset=1.10, runs=100, cv=0.01, seed=seed)
    result = carryover(df)
    assert _blamed(result) == set()
    assert {p.test for p in result.significant()} == set("abcde")
    (pooled,) = result.first_after_reset
    assert pooled.significant and pooled.tests == 5 and pooled.ci[0] < 10 < pooled.ci[1]
    assert 9 < pooled.delta_pct < 11


def test_a_cold_start_of_one_test_after_the_reset_is_found() -> None:
    df = simulate(carryover={("d", RESET): 0.85}, runs=40, seed=11)
    top = carryover(df, correction="holm").pairs[0]
    assert (top.test, top.predecessor, top.significant) == ("d", RESET, True)
    assert top.delta_pct < -10


@pytest.mark.parametrize("seed", [1, 3])
def test_drift_with_position_is_neither_carryover_nor_a_first_trial_effect(seed: int) -> None:
    df = simulate(drift_per_position=dict.fromkeys("abcde", 0.01), runs=100, cv=0.01, seed=seed)
    result = carryover(df)
    assert result.significant() == []
    assert not any(r.significant for r in result.first_after_reset)


def test_run_to_run_levels_are_taken_out() -> None:
    """5% run-level noise over 1% trial noise: a 3% carryover is found because each run's
    level is taken out; on the raw values the run noise would hide it."""
    df = simulate(carryover={("c", "b"): 1.03}, run_cv=0.05, cv=0.01, runs=50, seed=12)
    result = carryover(df)
    assert all(p.run_adjusted for p in result.pairs)
    assert _blamed(result) == {("c", "b")}
    raw = df.assign(value=np.log(df["value"]))
    after, other = _samples(raw, "c", "b", flagged=())
    assert ttest_ind(after, other).pvalue > ALPHA / result.family_size
    quiet = carryover(simulate(runs=50, cv=0.01, seed=12))
    assert not any(p.run_adjusted for p in quiet.pairs)  # no run noise: raw values are better


def _model_values(df: pd.DataFrame, adjusted: dict[str, bool]) -> pd.DataFrame:
    """The random-order trials with predecessor and y: log value, minus the run's level (mean
    over the run's other trials of their log value minus their test's mean log value at the
    same kind of position) for the tests in ``adjusted``; a plain loop, as the doc says."""
    rnd = df[df["order"] == "random"].copy()
    rnd["z"] = np.log(rnd["value"])
    rnd["first"] = rnd["position"] == 0
    typical = rnd.groupby(["test", "first"])["z"].mean()
    rnd["dev"] = [z - typical[(t, f)] for z, t, f in zip(rnd["z"], rnd["test"], rnd["first"])]
    at = {(r.run, r.position): r.test for r in rnd.itertuples()}
    rows = []
    for r in rnd.itertuples():
        others = rnd[(rnd["run"] == r.run) & (rnd.index != r.Index)]["dev"]
        level = others.mean() if adjusted[r.test] else 0.0
        pred = RESET if r.position == 0 else at[(r.run, r.position - 1)]
        rows.append((r.test, pred, r.position, r.z - level))
    return pd.DataFrame(rows, columns=["test", "predecessor", "position", "y"])


def _samples(
    values: pd.DataFrame, test: str, predecessor: str, flagged: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """After ``predecessor`` and after the other predecessors (not ``flagged``), positions >= 1,
    from a frame with test, predecessor (or position and run to find it) and y (or value)."""
    if "predecessor" not in values.columns:
        rnd = values[values["order"] == "random"]
        at = {(r.run, r.position): r.test for r in rnd.itertuples()}
        values = rnd.assign(
            predecessor=[
                RESET if r.position == 0 else at[(r.run, r.position - 1)] for r in rnd.itertuples()
            ],
            y=rnd["value"],
        )
    mine = values[(values["test"] == test) & (values["position"] >= 1)]
    after = mine[mine["predecessor"] == predecessor]["y"].to_numpy()
    other = mine[~mine["predecessor"].isin([predecessor, *flagged])]["y"].to_numpy()
    return after, other


def test_every_number_matches_an_independent_computation() -> None:
    """Delta% and the interval from the mean log values; t and p from the same comparison on
    the values' ranks within the test (scaled to (0, 1))."""
    df = simulate(
        carryover={("a", "e"): 1.06},
        drift_per_position={"b": 0.02},
        run_cv=0.01,
        runs=30,
        cv=0.01,
        seed=21,
    )
    result = carryover(df)
    adjusted = {p.test: p.run_adjusted for p in result.pairs}
    values = _model_values(df, adjusted)
    size = values.groupby("test")["y"].transform("size")
    values["score"] = values.groupby("test")["y"].rank() / (size + 1) - 0.5
    flagged = {p.test: p.predecessor for p in result.significant() if p.predecessor != RESET}
    assert flagged == {"a": "e"}
    for pair in result.pairs:
        if pair.predecessor == RESET:
            continue
        others_flagged = tuple(s for t, s in flagged.items() if t == pair.test)
        after, other = _samples(values, pair.test, pair.predecessor, others_flagged)
        scores = _samples(
            values.assign(y=values["score"]), pair.test, pair.predecessor, others_flagged
        )
        ref = ttest_ind(*scores)  # Student's t, pooled variance, on the ranks
        assert (pair.n_after, pair.n_other) == (len(after), len(other))
        assert pair.t == pytest.approx(ref.statistic, rel=1e-9)
        assert pair.p == pytest.approx(ref.pvalue, rel=1e-9)
        assert pair.delta_pct == pytest.approx(100 * math.expm1(after.mean() - other.mean()))
    trends, effects, ranked = {}, [], []
    for pair in (p for p in result.pairs if p.predecessor == RESET):
        mine = values[values["test"] == pair.test]
        later = mine[(mine["position"] >= 1) & (mine["predecessor"] != flagged.get(pair.test))]
        data = pd.concat([mine[mine["position"] == 0], later])
        fits = []
        for column in ("y", "score"):
            slope = sm.OLS(later[column], sm.add_constant(later["position"].astype(float))).fit()
            trend = slope.pvalues["position"] < TREND_LEVEL
            design = pd.DataFrame({"const": 1.0, "first": (data["position"] == 0).astype(float)})
            if trend:
                design["position"] = data["position"].astype(float)
            fits.append(sm.OLS(data[column].to_numpy(), design.to_numpy()).fit())
            trends[(pair.test, column)] = trend
        fit, rank_fit = fits
        assert pair.t == pytest.approx(rank_fit.tvalues[1], rel=1e-9)
        assert pair.p == pytest.approx(rank_fit.pvalues[1], rel=1e-9)
        assert pair.delta_pct == pytest.approx(100 * math.expm1(fit.params[1]))
        effects.append(fit.params[1])
        ranked.append((rank_fit.params[1], rank_fit.bse[1], rank_fit.df_resid))
    assert trends[("b", "y")]  # b's 2% drift per position is fitted as a trend, not the others'
    assert not all(trends.values())
    (pooled,) = result.first_after_reset
    assert pooled.delta_pct == pytest.approx(100 * math.expm1(np.mean(effects)))
    assert pooled.tests == 5
    f = np.array([x[0] for x in ranked])
    v = np.array([x[1] for x in ranked]) ** 2
    df_pooled = v.sum() ** 2 / (v**2 / [x[2] for x in ranked]).sum()
    se = math.sqrt(v.sum()) / len(f)
    assert pooled.p == pytest.approx(2 * _t_sf(abs(f.mean() / se), df_pooled))
    assert result.family_size == len(result.pairs) + 1
    significant = adjust([p.p for p in result.pairs] + [pooled.p], ALPHA, "bonferroni")[0]
    assert [p.significant for p in result.pairs] == significant[:-1]
    assert sum(p.predecessor != RESET for p in result.pairs) == 20
    deltas = [abs(p.delta_pct) for p in result.pairs]
    assert deltas == sorted(deltas, reverse=True)


def test_a_two_valued_metric_gets_fishers_exact_test() -> None:
    """Counts of 0 or 1 (rare 1s): the rank test's normal approximation would find
    carryover in noise; the exact test is the randomization distribution itself."""
    from scipy.stats import fisher_exact

    rng = np.random.default_rng(3)
    df = simulate(runs=200, seed=23)
    df["value"] = np.where(rng.random(len(df)) < 0.02, 2.0, 1.0)
    result = carryover(df)
    assert result.significant() == []
    pair = max((p for p in result.pairs if p.predecessor != RESET), key=lambda p: -p.p)
    after, other = _samples(df.assign(position=df["position"]), pair.test, pair.predecessor, ())
    table = [[(after == 2).sum(), (after == 1).sum()], [(other == 2).sum(), (other == 1).sum()]]
    one_sided = min(fisher_exact(table, "greater").pvalue, fisher_exact(table, "less").pvalue)
    assert pair.p == pytest.approx(min(1.0, 2 * one_sided))


def _t_sf(t: float, df: float) -> float:
    from scipy.stats import t as student

    return float(student.sf(t, df))


def test_the_interval_is_bonferroni_simultaneous() -> None:
    from scipy.stats import t as student

    df = simulate(runs=20, cv=0.01, seed=22)
    result = carryover(df)
    pair = next(p for p in result.pairs if p.predecessor != RESET and not p.run_adjusted)
    after, other = _samples(df.assign(value=np.log(df["value"])), pair.test, pair.predecessor, ())
    n1, n2 = len(after), len(other)
    pooled = ((n1 - 1) * after.var(ddof=1) + (n2 - 1) * other.var(ddof=1)) / (n1 + n2 - 2)
    se = math.sqrt(pooled * (1 / n1 + 1 / n2))
    q = student.ppf(1 - ALPHA / (2 * result.family_size), n1 + n2 - 2)
    d = after.mean() - other.mean()
    assert pair.ci[0] == pytest.approx(100 * math.expm1(d - q * se))
    assert pair.ci[1] == pytest.approx(100 * math.expm1(d + q * se))


def test_fixed_runs_are_not_used() -> None:
    # In fixed order every test has the same predecessor: an effect there is unidentifiable.
    fixed_only = simulate(carryover={("c", "b"): 1.3}, runs=20, orders=("fixed",), seed=3)
    assert carryover(fixed_only).pairs == []
    mixed = pd.concat(
        [
            simulate(carryover={("b", "a"): 1.3}, runs=20, orders=("fixed",), seed=3),
            simulate(runs=20, orders=("random",), seed=4).assign(run=lambda d: d["run"] + 100),
        ]
    )
    assert carryover(mixed).significant() == []


def test_by_worker_finds_the_effect_on_its_worker_only() -> None:
    df = pd.concat(
        [
            simulate(workers=("w1",), runs=40, seed=31),
            simulate(workers=("w2",), carryover={("e", "a"): 1.12}, runs=40, seed=32),
        ]
    )
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
    assert _blamed(result) == set()
    rnd = df[df["order"] == "random"]
    at = {(r.run, r.position): r.test for r in rnd.itertuples()}  # failed trials included
    mine = rnd[(rnd["test"] == "a") & (rnd["status"] == "ok") & (rnd["position"] >= 1)]
    preds = [at[(r.run, r.position - 1)] for r in mine.itertuples()]
    pair = _pair(result, "a", "b")
    assert (pair.n_after, pair.n_other) == (preds.count("b"), len(preds) - preds.count("b"))
    assert any(
        p == "b"
        for p, r in zip(preds, mine.itertuples())
        if df.loc[(df["run"] == r.run) & (df["position"] == r.position - 1), "status"].iloc[0]
        == "failed"
    )


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
    keys = {
        "test",
        "predecessor",
        "metric",
        "n_after",
        "n_other",
        "delta_pct",
        "ci",
        "p",
        "significant",
        "run_adjusted",
    }
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
    assert result.family_size == len(result.pairs) + len(result.first_after_reset)


def test_published_memcached_get_hits_is_slow_right_after_the_reset() -> None:
    """Duplyakin et al. (ATC 2023, Table 3): get_hits is 5.3% faster in the fixed order,
    where it runs last. Its random-order trials say why: right after the reset it is slower
    than later in the run; no other pair is flagged."""
    from conftest import FIXTURES

    from washout.data.sources import load_trials

    df, _ = load_trials(FIXTURES / "ordersage-artifact" / "memcached" / "all_exp_results.csv")
    result = carryover(df)
    flagged = [(p.test.split("/")[-1], p.predecessor) for p in result.significant()]
    assert flagged == [("get_hits_test.sh", RESET)]
    top = result.significant()[0]
    assert -6 < top.delta_pct < -3 and top.n_after + top.n_other == 50


def test_a_csv_without_positions_is_a_one_line_error(tmp_path) -> None:
    from washout.data.sources import load_trials

    path = tmp_path / "nopos.csv"
    simulate(runs=3).drop(columns=["position"]).to_csv(path, index=False)
    df, _ = load_trials(path)
    with pytest.raises(WashoutError) as err:
        carryover(df)
    assert "position" in str(err.value) and "\n" not in str(err.value)


def test_a_handful_of_trials_that_fit_a_line_exactly_is_no_finding() -> None:
    """4 random runs per worker: c's three later trials fall exactly on a line in rank,
    which gave an infinite t and p = 0 (a finding from four trials)."""
    result = carryover(simulate(runs=4, workers=("w1", "w2")), by_worker=True)
    assert result.significant() == []
    assert all(math.isnan(p.p) or p.p > 0 for p in result.pairs)
    assert all(math.isnan(p.t) or math.isfinite(p.t) for p in result.pairs)
