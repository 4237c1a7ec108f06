"""Drift: Spearman correlations with position, time since reset and run, checked on
simulated experiments with and without drift, and against scipy."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from simulate_longformat import simulate
from washout.errors import WashoutError
from washout.stats.drift import drift, drift_frame, with_clocks
from washout.stats.family import adjust

ALPHA = 0.05


def test_drift_with_position_is_found_and_ranks_first() -> None:
    df = simulate(drift_per_position={"c": 0.01}, runs=30, orders=("random",), seed=7)
    result = drift(df)
    top = {(r.test, r.against) for r in result.rows[:2]}
    assert top == {("c", "position"), ("c", "time_since_reset")}
    assert all(r.spearman > 0.4 and r.significant for r in result.rows[:2])
    assert {r.test for r in result.significant()} == {"c"}


def test_drift_across_runs_is_found() -> None:
    df = simulate(runs=20, seed=8)
    b = df["test"] == "b"
    df.loc[b, "value"] *= 1 + 0.002 * df.loc[b, "run"]  # e.g. a filling disk
    found = [(r.test, r.against) for r in drift(df).significant()]
    assert found == [("b", "run")]


def test_every_correlation_matches_scipy() -> None:
    df = simulate(drift_per_position={"a": 0.005}, runs=10, seed=9)
    result = drift(df, correction="holm")
    clocks = with_clocks(df, df)
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


def test_time_since_reset_counts_from_the_runs_first_start() -> None:
    t0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
    rows = []
    for run, gaps in enumerate([(0, 7, 30), (0, 2, 3)]):
        for pos, gap in enumerate(gaps):
            start = t0 + timedelta(hours=run, seconds=gap)
            # the first trial of run 1 failed: it still marks the start of the run
            status = "failed" if (run, pos) == (1, 0) else "ok"
            rows.append((run, "random", pos, f"t{pos}", "wall", 1.0 + gap, status, "w",
                         start.isoformat(), ""))
    df = pd.DataFrame(rows, columns=["run", "order", "position", "test", "metric", "value",
                                     "status", "worker", "started", "ended"])
    ok = df[df["status"] == "ok"]
    assert with_clocks(df, ok)["time_since_reset"].tolist() == [0.0, 7.0, 30.0, 2.0, 3.0]


def test_constant_clocks_are_left_out_of_the_family() -> None:
    result = drift(simulate(runs=8, orders=("fixed",), seed=10))
    position = [r for r in result.rows if r.against in ("position", "time_since_reset")]
    assert all(math.isnan(r.p) and not r.significant for r in position)
    assert result.family_size == 5  # only the run clock varies


def test_missing_start_times_drop_only_that_clock() -> None:
    df = simulate(runs=8, seed=12)
    df["started"] = np.nan
    rows = drift(df).rows
    assert all(r.n == 0 for r in rows if r.against == "time_since_reset")
    assert all(r.n == 16 for r in rows if r.against == "run")


def test_by_worker_separates_workers() -> None:
    df = pd.concat([
        simulate(workers=("w1",), runs=20, orders=("random",), seed=13),
        simulate(workers=("w2",), drift_per_position={"d": 0.015}, runs=20,
                 orders=("random",), seed=14),
    ])
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


def test_published_memcached_get_hits_drifts_with_position() -> None:
    """The same effect seen as drift: get_hits' throughput rises with its position."""
    from conftest import FIXTURES
    from washout.sources import load_trials

    df, _ = load_trials(FIXTURES / "ordersage-artifact" / "memcached" / "all_exp_results.csv")
    result = drift(df)
    position = [r for r in result.significant() if r.against == "position"]
    assert [r.test.split("/")[-1] for r in position] == ["get_hits_test.sh"]
    assert position[0].spearman > 0.3 and position[0].n == 100
    # OrderSage files carry no start times: that clock is not compared, not invented
    assert all(r.n == 0 for r in result.rows if r.against == "time_since_reset")


def test_a_csv_without_positions_or_times_still_has_the_run_clock(tmp_path) -> None:
    from washout.sources import load_trials

    path = tmp_path / "bare.csv"
    simulate(runs=4, seed=17).drop(columns=["position", "started"]).to_csv(path, index=False)
    df, _ = load_trials(path)
    result = drift(df)
    assert result.family_size == 5
    assert {r.against for r in result.rows if r.n > 0} == {"run"}
