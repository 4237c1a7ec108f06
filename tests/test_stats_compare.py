"""hyperfine's comparison (washout.stats.compare): figures against numpy/scipy, the ranking's
per-run Hodges-Lehmann ratio, the fixed-vs-random note calibrated by simulation, warnings."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from washout.analysis.units import byte_size, seconds
from washout.data.longformat import COLUMNS
from washout.stats.claims import hodges_lehmann
from washout.stats.compare import (
    OUTLIERS_DETECTED,
    RESOURCE_METRICS,
    compare_tests,
    modified_zscores,
    trial_warnings,
)
from washout.stats.trials import without_resource_metrics


def frame(
    scales: dict[str, float],
    runs: int = 12,
    seed: int = 0,
    fixed_factor: dict[str, float] | None = None,
    resources: bool = False,
) -> pd.DataFrame:
    """Alternating fixed/random runs, every test once per run; each run has its own level
    (shared by its tests, as a machine's state is) and each trial its own noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for run in range(2 * runs):
        order = "fixed" if run % 2 == 0 else "random"
        level = rng.lognormal(0, 0.2)
        for position, (test, scale) in enumerate(scales.items()):
            factor = (fixed_factor or {}).get(test, 1.0) if order == "fixed" else 1.0
            value = scale * factor * level * rng.lognormal(0, 0.02)
            metrics = {"wall": value}
            if resources:
                metrics |= {"user": value / 2, "system": value / 4, "max_rss": 2.0**20}
            for metric, v in metrics.items():
                rows.append(
                    dict(zip(COLUMNS, (run, order, position, test, metric, v, "ok", "local")))
                )
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def test_figures_match_numpy() -> None:
    df = frame({"a": 1.0, "b": 2.0})
    df.loc[0, "status"] = "failed"  # not counted
    result = compare_tests(df, tests=["a", "b"])
    for s in result.summaries:
        ok = df[(df["test"] == s.test) & (df["status"] == "ok") & (df["metric"] == "wall")]
        v = ok["value"].to_numpy()
        assert s.runs == v.size
        assert s.mean == pytest.approx(v.mean())
        assert s.stddev == pytest.approx(np.std(v, ddof=1))
        assert s.median == pytest.approx(np.median(v))
        assert (s.min, s.max) == (v.min(), v.max())
        assert s.user is None and s.max_rss is None


def test_resource_means_and_their_place_outside_the_analyses() -> None:
    df = frame({"a": 1.0, "b": 2.0}, resources=True)
    s = compare_tests(df).summaries[0]
    wall = df[(df["test"] == "a") & (df["metric"] == "wall")]["value"]
    assert s.user == pytest.approx(wall.mean() / 2)
    assert s.system == pytest.approx(wall.mean() / 4)
    assert s.max_rss == 2.0**20
    assert set(without_resource_metrics(df)["metric"]) == {"wall"}
    assert set(without_resource_metrics(df, "user")["metric"]) == {"wall", *RESOURCE_METRICS}


def test_ranking_is_the_hodges_lehmann_ratio_of_random_runs_paired_by_run() -> None:
    df = frame({"slow": 3.0, "fast": 1.0, "mid": 1.5}, runs=15)
    result = compare_tests(df, tests=["slow", "fast", "mid"])
    assert [r.test for r in result.rankings] == ["mid", "slow"]
    for r in result.rankings:
        assert r.fastest == "fast"
        wide = df[(df["order"] == "random") & (df["metric"] == "wall")].pivot(
            index="run", columns="test", values="value"
        )
        logs = np.log(wide[r.test] / wide["fast"]).to_numpy()
        i, j = np.triu_indices(logs.size)
        assert r.ratio == pytest.approx(math.exp(np.median((logs[i] + logs[j]) / 2)))
        _, ci, achieved = hodges_lehmann(logs, 1 - 0.05 / 2)  # Bonferroni over 2 comparisons
        assert r.ratio_ci == pytest.approx((math.exp(ci[0]), math.exp(ci[1])))
        assert r.confidence == achieved and achieved >= 1 - 0.05 / 2
        assert r.significant == (not r.ratio_ci[0] <= 1 <= r.ratio_ci[1])
    # the run level cancels: 20% run-to-run noise, 2% trial noise, the ratio is tight
    assert result.rankings[1].ratio == pytest.approx(3.0, rel=0.03)
    assert not any(r.orders_disagree for r in result.rankings)


def test_a_ratio_without_a_ci_says_how_many_runs_a_ci_needs() -> None:
    """hyperfine's --runs 10 in the quick form is 5 random-order runs: at 95% the
    signed-rank interval needs 6 (the most extreme of 2^5 sign patterns has p = 1/16), so
    no difference can be significant; the summary says so, and how many it needs. At 3
    comparisons (Bonferroni, 98.3%) it needs 7. The count is the smallest with an interval,
    as hodges_lehmann computes it."""
    from washout.report.text import ranking_lines
    from washout.stats.claims import fewest_for_interval

    for runs, tests, needed in ((5, 2, 6), (6, 2, 6), (6, 4, 7)):
        df = frame({f"t{i}": 1.0 + 0.17 * i for i in range(tests)}, runs=runs)
        rankings = compare_tests(df).rankings
        assert {r.runs_for_ci for r in rankings} == {needed}
        confidence = 1 - 0.05 / (tests - 1)
        assert fewest_for_interval(confidence) == needed
        assert hodges_lehmann(np.arange(needed - 1.0), confidence)[1] is None
        assert hodges_lehmann(np.arange(float(needed)), confidence)[1] is not None
        assert all((r.ratio_ci is None) == (runs < needed) for r in rankings)
    df = frame({"a": 1.0, "b": 1.17}, runs=5)
    head, [line] = ranking_lines(compare_tests(df))[0]
    assert head == "No significant difference between 'a' and 'b':"
    assert line.endswith("(too few runs for a CI, which needs 6; 5 runs)")


def test_orders_disagree_when_fixed_order_changes_the_ratio() -> None:
    df = frame({"a": 1.0, "b": 2.0}, runs=15, fixed_factor={"b": 1.5})
    (r,) = compare_tests(df).rankings
    assert r.orders_disagree and r.interaction_p < 0.01
    assert r.ratio == pytest.approx(2.0, rel=0.05)  # the order-safe estimate
    assert r.fixed_ratio == pytest.approx(3.0, rel=0.05)


def test_disagreement_note_is_calibrated() -> None:
    """No order effect on the ratio, but one that shifts both tests alike in fixed order:
    the note appears in at most alpha of the simulated experiments (plus binomial slack)."""
    n, alpha = 120, 0.05
    hits = sum(
        compare_tests(
            frame(
                {"a": 1.0, "b": 2.0, "c": 2.5},
                runs=8,
                seed=s,
                fixed_factor={"a": 1.3, "b": 1.3, "c": 1.3},
            ),
            alpha=alpha,
        )
        .rankings[0]
        .orders_disagree
        for s in range(n)
    )
    assert hits / n <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / n)


def test_single_test_or_a_value_of_zero_has_no_ranking() -> None:
    result = compare_tests(frame({"only": 1.0}))
    assert len(result.summaries) == 1 and result.rankings == ()
    assert result.to_dict()["rankings"] == []
    zero = frame({"a": 1.0, "b": 2.0})
    zero.loc[zero.index[-1], "value"] = 0.0  # a count, say: no ratio, but still a summary
    result = compare_tests(zero)
    assert result.rankings == () and [s.min for s in result.summaries][1] == 0.0


def test_modified_zscores_match_scipy_mad() -> None:
    x = np.random.default_rng(1).lognormal(0, 0.3, 50)
    expected = (x - np.median(x)) / stats.median_abs_deviation(x, scale="normal")
    assert modified_zscores(x) == pytest.approx(expected, rel=1e-3)
    assert not modified_zscores(np.ones(5)).any()


def test_hyperfines_warnings() -> None:
    steady = 1.0 + np.random.default_rng(2).normal(0, 0.001, 30)
    assert trial_warnings(steady, "1 s") == ()
    slow_first = np.concatenate([[1.5], steady])
    (w,) = trial_warnings(slow_first, "1.500 s")
    assert w.startswith("The first benchmarking run for this command was significantly slower")
    assert "1.500 s" in w
    assert trial_warnings(np.concatenate([steady, [1.5]]), "") == (OUTLIERS_DETECTED,)


def test_hyperfines_units() -> None:
    assert seconds(0.00926016) == "9.3 ms"
    assert seconds(1.0204) == "1.020 s"
    assert seconds(5.2e-6) == "5.2 µs"
    assert seconds(0.0002, ("ms", 1e-3)) == "0.2 ms"
    assert seconds(None) == "-"
    assert byte_size(3 * 2**20) == "3 MiB" and byte_size(512) == "512 B"
    # three significant digits without scientific notation: a thousand of a unit and more
    # is written in the next unit up (max RSS of `true` was "1.02e+03 KiB")
    assert byte_size(1020 * 2**10) == "0.996 MiB"
    assert byte_size(999 * 2**10) == "999 KiB" and byte_size(1023.9 * 2**20) == "1 GiB"
    assert byte_size(1000) == "1000 B" and byte_size(2000 * 2**30) == "2000 GiB"
    for value in np.geomspace(1, 2**45, 2000):
        assert "e+" not in byte_size(value)
