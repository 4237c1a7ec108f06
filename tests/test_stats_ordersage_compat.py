"""--compat ordersage: OrderSage's node_stats.csv reproduced from the artifact's raw trials."""

from __future__ import annotations

import io
import json
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ARTIFACT, washout
from scipy.stats import norm

from washout.data.sources import load_trials
from washout.stats.ordersage_compat import ci_case, drop_failures, ordersage_stats, rank_ci

SHAPIRO = ("SW_test_stat_fixed", "SW_p-value_fixed", "SW_test_stat_random", "SW_p-value_random")


def _decimals(text: str) -> int:
    """Decimal places a number was written with ("3.16E-06" -> 8, "37" -> 0)."""
    exponent = Decimal(text).as_tuple().exponent
    return -int(exponent) if isinstance(exponent, int) else 0


def assert_matches_node_stats(csv_text: str, published: Path, full_precision: bool) -> None:
    """Our CSV equals OrderSage's, column by column, row by row.

    Numbers: to 1e-12 relative where the file has full precision, else our value rounds to
    the digits the spreadsheet kept. Shapiro-Wilk: 1e-4 relative, because OrderSage's scipy
    computed it in single precision (its values are exact float32 numbers) and ours in double.
    """
    ours = pd.read_csv(io.StringIO(csv_text), dtype=str, keep_default_na=False)
    theirs = pd.read_csv(published, dtype=str, keep_default_na=False)
    assert list(ours.columns) == list(theirs.columns)
    assert len(ours) == len(theirs)
    for column in theirs.columns:
        for mine, text in zip(ours[column], theirs[column]):
            where = f"{column}: ours {mine!r}, published {text!r}"
            if text.upper() in ("TRUE", "FALSE") or text == "" or not _is_number(text):
                assert mine.upper() == text.upper(), where
                continue
            got, want = float(mine), float(text)
            rounding = 0.0 if full_precision else 0.5 * 10.0 ** -_decimals(text) * (1 + 1e-9)
            if column in SHAPIRO:
                assert abs(got - want) <= max(1e-4 * abs(want), rounding), where
            elif full_precision:
                assert math.isclose(got, want, rel_tol=1e-12), where
            else:
                assert abs(got - want) <= rounding, where


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_memcached_node_stats_reproduced_with_95_percent_cis() -> None:
    trials, info = load_trials(ARTIFACT / "memcached" / "all_exp_results.csv")
    assert (info.test_column, info.generation) == ("exp_command", "exp")
    frame = ordersage_stats(trials, info.generation, info.test_column, ci_confidence=0.95)
    assert_matches_node_stats(
        frame.to_csv(index=False), ARTIFACT / "memcached" / "node_stats.csv", full_precision=True
    )


def test_npbench_node_stats_reproduced_as_the_spreadsheet_left_them() -> None:
    trials, info = load_trials(ARTIFACT / "npbench" / "all_test_results.csv")
    assert (info.test_column, info.generation) == ("test_command", "test")
    frame = ordersage_stats(trials, info.generation, info.test_column)  # 1 - 0.05/3 by default
    assert_matches_node_stats(
        frame.to_csv(index=False), ARTIFACT / "npbench" / "node_stats.csv", full_precision=False
    )


def test_shapiro_wilk_published_values_are_single_precision() -> None:
    """Why the Shapiro-Wilk columns get a looser tolerance than the rest."""
    published = pd.read_csv(ARTIFACT / "memcached" / "node_stats.csv")
    for column in SHAPIRO:
        values = published[column].to_numpy()
        assert (values.astype(np.float32).astype(float) == values).all()


def test_default_confidence_is_bonferroni_adjusted_and_changes_memcached_cis() -> None:
    trials, info = load_trials(ARTIFACT / "memcached" / "all_exp_results.csv")
    adjusted = ordersage_stats(trials, info.generation, info.test_column)
    plain = ordersage_stats(trials, info.generation, info.test_column, ci_confidence=0.95)
    hits = lambda f: f[f.exp_command == "./get_hits_test.sh"].iloc[0]  # noqa: E731
    assert hits(adjusted).fixed_ci_low < hits(plain).fixed_ci_low
    # The published Table 3 shows case 3 for get_hits: the paper used the adjusted CIs.
    assert (hits(plain).ci_case, hits(adjusted).ci_case) == (1, 3)


@pytest.mark.parametrize("n", range(1, 40))
@pytest.mark.parametrize("confidence", [0.9, 0.95, 1 - 0.05 / 3])
def test_rank_ci_is_the_normal_approximation_ranks(n: int, confidence: float) -> None:
    x = np.arange(n, dtype=float) * 10  # value = 10 * 0-based rank
    z = norm.ppf((1 + confidence) / 2)
    lo = max(math.floor(n / 2 - z * math.sqrt(n / 4)), 0)
    hi = min(math.ceil(n / 2 + z * math.sqrt(n / 4)) + 1, n - 1)
    assert rank_ci(x, confidence) == (10.0 * lo, 10.0 * hi)


def test_ordersage_ci_case_rules() -> None:
    assert ci_case(10, 9, 11, 20, 19, 21) == (1, 8)  # random above, gap 19 - 11
    assert ci_case(20, 19, 21, 10, 9, 11) == (1, 8)  # fixed above, gap 19 - 11
    assert ci_case(10, 8, 12, 11, 9, 13) == (2, None)
    # npbench softmax: fixed 1487 [1481, 1495], random 1479.5 [1475, 1485] -> 3
    assert ci_case(1487, 1481, 1495, 1479.5, 1475, 1485) == (3, None)


def test_failure_rule_drops_whole_fixed_runs_but_only_failed_random_trials() -> None:
    rows = []
    for run, order in ((0, "fixed"), (1, "random"), (2, "fixed")):
        for pos, test in enumerate("abc"):
            status = "failed" if (run, test) in ((0, "b"), (1, "c")) else "ok"
            rows.append(
                {
                    "run": run,
                    "order": order,
                    "position": pos,
                    "test": test,
                    "metric": "result",
                    "value": 1.0,
                    "status": status,
                    "worker": "n1",
                }
            )
    kept = drop_failures(pd.DataFrame(rows))
    assert sorted(zip(kept.run, kept.test)) == [(1, "a"), (1, "b"), (2, "a"), (2, "b"), (2, "c")]


def test_per_worker_table_has_a_hostname_column_first() -> None:
    trials, info = load_trials(ARTIFACT / "npbench" / "all_test_results.csv")
    frame = ordersage_stats(trials, info.generation, info.test_column, by_worker=True)
    assert list(frame.columns[:2]) == ["hostname", "test_command"]
    assert set(frame.hostname) == {"c220g2-010627.wisc.cloudlab.us"}


def test_long_format_with_several_metrics_gets_a_metric_column() -> None:
    rng = np.random.default_rng(0)
    rows = [
        {
            "run": i,
            "order": order,
            "position": 0,
            "test": "a",
            "metric": metric,
            "value": float(rng.normal(10, 1)),
            "status": "ok",
            "worker": "local",
        }
        for i in range(10)
        for order in ("fixed", "random")
        for metric in ("p50", "p99")
    ]
    frame = ordersage_stats(pd.DataFrame(rows))
    assert list(frame.columns[:3]) == ["test_command", "metric", "coeff_of_variation_fixed"]
    assert sorted(frame.metric) == ["p50", "p99"]
    p50 = pd.DataFrame(rows).query("metric == 'p50'")
    from scipy.stats import kruskal

    h, p = kruskal(p50[p50.order == "fixed"].value, p50[p50.order == "random"].value)
    assert frame.set_index("metric").loc["p50", "KW_test_stat"] == pytest.approx(h, rel=1e-12)


def test_shapiro_columns_follow_scipy_for_small_and_constant_samples() -> None:
    import warnings

    from scipy.stats import shapiro

    rows = [
        {"run": i, "order": order, "test": "a", "metric": "result", "value": value, "status": "ok"}
        for order, values in (("fixed", [5.0] * 4), ("random", [1.0, 2.5, 2.0, 7.0]))
        for i, value in enumerate(values)
    ]
    rows += [
        {"run": 0, "order": o, "test": "b", "metric": "result", "value": 1.0 + k, "status": "ok"}
        for k, o in enumerate(("fixed", "fixed", "random"))
    ]
    frame = ordersage_stats(pd.DataFrame(rows)).set_index("test_command")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        constant = shapiro([5.0] * 4)
    random = shapiro([1.0, 2.5, 2.0, 7.0])
    a = frame.loc["a"]
    assert (a["SW_test_stat_fixed"], a["SW_p-value_fixed"]) == (constant.statistic, constant.pvalue)
    assert a["SW_p-value_random"] == pytest.approx(random.pvalue, rel=1e-12)
    assert np.isnan(frame.loc["b", "SW_p-value_fixed"])  # n = 2: no test (OrderSage would stop)


def test_a_store_and_its_export_give_the_same_table(tmp_path: Path) -> None:
    """A real store and its export, which holds every trial's resource and health measures:
    the same table from both (the spec's metrics, so the same m and the same CIs), as the
    analysis gives; a resource metric is tabled where --metric names it."""
    db, csv = tmp_path / "s.db", tmp_path / "s.csv"
    washout("run", "true", "sleep 0.001", "--runs", "8", "--seed", "1", "--db", db, "-q")
    washout("export", db, "-o", csv)
    assert "health.other_cpu" in csv.read_text()
    tables = [
        json.loads(washout("analyze", src, "--compat", "ordersage", "--format", "json").stdout)
        for src in (db, csv)
    ]
    assert tables[0] == tables[1] and len(tables[0]) == 2
    named = washout("analyze", csv, "--compat", "ordersage", "--metric", "user", "--format", "json")
    assert {row["metric"] for row in json.loads(named.stdout)} == {
        "wall",
        "user",
        "system",
        "max_rss",
    }
