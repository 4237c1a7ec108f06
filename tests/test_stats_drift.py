"""Drift: Spearman correlations with position, time since reset and run over random-order
trials after the first position, checked on simulated experiments with and without drift
(and with the effects drift must not be mistaken for), and against scipy."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from simulate_longformat import simulate

from washout.data.longformat import COLUMNS
from washout.errors import WashoutError
from washout.stats.drift import drift, drift_frame, with_clocks
from washout.stats.family import adjust

ALPHA = 0.05


def test_drift_with_position_is_found_and_ranks_first() -> None:
    df = simulate(drift_per_position={"c": 0.01}, runs=60, orders=("random",), seed=7)
    result = drift(df)
    top = {(r.test, r.against) for r in result.rows[:2]}
    assert top == {("c", "position"), ("c", "time_since_reset")}
    assert all(r.spearman > 0.4 and r.significant for r in result.rows[:2])
    assert {r.test for r in result.significant()} == {"c"}


def test_drift_across_runs_is_found() -> None:
    df = simulate(runs=40, seed=8)
    b = df["test"] == "b"
    df.loc[b, "value"] *= 1 + 0.002 * df.loc[b, "run"]  # e.g. a filling disk
    found = [(r.test, r.against) for r in drift(df).significant()]
    assert found == [("b", "run")]


def test_every_correlation_matches_scipy() -> None:
    df = simulate(drift_per_position={"a": 0.005}, runs=10, seed=9)
    result = drift(df, correction="holm")
    clocks = with_clocks(df, df)
    clocks = clocks[(clocks["order"] == "random") & (clocks["position"] >= 1)]
    ps = []
    for row in result.rows:
        sel = clocks[(clocks["test"] == row.test) & (clocks["metric"] == row.metric)]
        ref = spearmanr(sel[row.against], sel["value"])
        assert row.n == len(sel)
        assert row.spearman == pytest.approx(ref.statistic, rel=1e-12)
        assert row.p == pytest.approx(ref.pvalue, rel=1e-12)
        ps.append(row.p)
    assert [r.significant for r in result.rows] == adjust(ps, ALPHA, "holm")[0]
    assert result.family_size == 5 * 3
    rhos = [abs(r.spearman) for r in result.rows]
    assert rhos == sorted(rhos, reverse=True)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_fixed_versus_random_shift_is_not_drift(seed: int) -> None:
    """e is 5% faster in random runs only: pooled with its fixed-order trials (always last,
    on even runs) that shift passed for drift with position."""
    df = simulate(random_factor={"e": 0.95}, runs=50, cv=0.01, seed=seed)
    assert drift(df).significant() == []
    blocked = df.assign(run=df["run"] % 2 * 1000 + df["run"])  # all fixed runs, then random
    assert drift(blocked).significant() == []


@pytest.mark.parametrize("seed", [3, 5])
def test_the_first_trial_after_the_reset_is_not_drift(seed: int) -> None:
    df = simulate(first_after_reset=1.10, runs=50, cv=0.01, orders=("random",), seed=seed)
    assert drift(df).significant() == []
    assert {r.n for r in drift(df).rows} <= set(range(35, 46))  # positions >= 1 only


def test_time_since_reset_counts_the_typical_durations_of_the_trials_before() -> None:
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    rows = []
    for run, took in enumerate([(4.0, 7.0, 30.0), (2.0, 9.0, 3.0), (6.0, 8.0, 1.0)]):
        start = t0 + timedelta(hours=run)
        for pos, seconds in enumerate(took):
            # the first trial of run 1 failed: it still ran and took its time
            status = "failed" if (run, pos) == (1, 0) else "ok"
            rows.append(
                (
                    run,
                    "random",
                    pos,
                    f"t{pos}",
                    "wall",
                    seconds,
                    status,
                    "w",
                    start.isoformat(),
                    (start + timedelta(seconds=seconds)).isoformat(),
                )
            )
            start += timedelta(seconds=seconds)
    df = pd.DataFrame(
        rows,
        columns=list(COLUMNS),
    )
    ok = df[df["status"] == "ok"]
    # medians: t0 4 s, t1 8 s: every run's third trial starts 12 s after its first
    assert with_clocks(df, ok)["time_since_reset"].tolist() == [
        0.0,
        4.0,
        12.0,
        4.0,
        12.0,
        0.0,
        4.0,
        12.0,
    ]


@pytest.mark.parametrize("seed", [1, 3])
def test_slow_runs_are_not_drift_with_time(seed: int) -> None:
    """The quickstart's situation: the first trial after the reset takes 3 times as long,
    runs differ by 10%, and each trial starts when the one before it ends. A slow run's later
    trials start later and are slower, and the first trial's cost moves every later start:
    neither is drift."""
    df = simulate(
        run_cv=0.10, first_after_reset=3.0, cv=0.01, runs=100, orders=("random",), seed=seed
    )
    df = df.sort_values(["run", "position"])
    took = pd.to_timedelta(df["value"], unit="s")
    ended = (
        pd.Timestamp("2026-01-01", tz="UTC")
        + pd.to_timedelta(df["run"] * 1000, unit="s")
        + took.groupby(df["run"]).cumsum()
    )
    df = df.assign(started=(ended - took).astype(str), ended=ended.astype(str))
    assert drift(df).significant() == []


def test_fixed_order_trials_are_not_used() -> None:
    result = drift(simulate(drift_per_position={"c": 0.05}, runs=8, orders=("fixed",), seed=10))
    assert result.rows == [] and result.family_size == 0


def test_missing_start_times_drop_only_that_clock() -> None:
    df = simulate(runs=8, seed=12)
    df["started"] = np.nan
    rows = drift(df).rows
    later = df[(df["order"] == "random") & (df["position"] >= 1)].groupby("test").size()
    assert all(r.n == 0 for r in rows if r.against == "time_since_reset")
    assert all(r.n == later[r.test] for r in rows if r.against == "run")


def test_by_worker_separates_workers() -> None:
    df = pd.concat(
        [
            simulate(workers=("w1",), runs=40, orders=("random",), seed=13),
            simulate(
                workers=("w2",),
                drift_per_position={"d": 0.015},
                runs=40,
                orders=("random",),
                seed=14,
            ),
        ]
    )
    flagged = {(r.worker, r.test) for r in drift(df, by_worker=True).significant()}
    assert flagged == {("w2", "d")}
    assert {r.worker for r in drift(df).rows} == {None}


def test_family_wise_false_positives_stay_within_alpha() -> None:
    n_exp = 200
    flagged = uncorrected = 0
    for seed in range(n_exp):
        result = drift(simulate(runs=10, seed=2000 + seed))
        flagged += bool(result.significant())
        uncorrected += any(r.p < ALPHA for r in result.rows)
    assert flagged / n_exp <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / n_exp)
    assert flagged > 0
    assert uncorrected / n_exp > 0.3


def test_outputs_and_errors() -> None:
    result = drift(simulate(runs=5, metrics=("wall", "rps"), seed=15), metric="rps")
    assert {r.metric for r in result.rows} == {"rps"}
    keys = {"test", "metric", "against", "spearman", "p", "significant"}
    assert keys <= set(result.rows[0].to_dict())
    assert keys <= set(drift_frame(result).columns)
    assert {r.against for r in result.rows} == {"position", "time_since_reset", "run"}
    with pytest.raises(WashoutError) as err:
        drift(simulate(runs=2).drop(columns=["run"]))
    assert "run" in str(err.value) and "\n" not in str(err.value)
    no_times = drift(simulate(runs=4, seed=18).drop(columns=["started"]))
    assert all(r.n == 0 for r in no_times.rows if r.against == "time_since_reset")


def test_a_constant_metric_counts_with_p_one() -> None:
    df = simulate(runs=6, seed=16)
    df.loc[df["test"] == "b", "value"] = 3.0
    rows = [r for r in drift(df).rows if r.test == "b"]
    assert all(math.isnan(r.spearman) and r.p == 1.0 and not r.significant for r in rows)


def test_published_memcached_get_hits_is_not_drift() -> None:
    """get_hits' throughput is lower in the first trial after the reset (the carryover
    analysis finds it); at positions 1 and 2 it does not rise with its position."""
    from conftest import FIXTURES

    from washout.data.sources import load_trials

    df, _ = load_trials(FIXTURES / "ordersage-artifact" / "memcached" / "all_exp_results.csv")
    result = drift(df)
    assert result.significant() == []
    hits = [r for r in result.rows if r.test.endswith("get_hits_test.sh")]
    assert {r.n for r in hits if r.against != "time_since_reset"} == {26}
    # OrderSage files carry no start times: that clock is not compared, not invented
    assert all(r.n == 0 for r in result.rows if r.against == "time_since_reset")


def test_a_csv_without_positions_has_no_drift_to_compare(tmp_path) -> None:
    """Without positions the first trial after the reset cannot be told from the others."""
    from washout.data.sources import load_trials

    path = tmp_path / "bare.csv"
    simulate(runs=4, seed=17).drop(columns=["position", "started"]).to_csv(path, index=False)
    df, _ = load_trials(path)
    result = drift(df)
    assert result.family_size == 0 and result.rows == []
