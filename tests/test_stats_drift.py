"""Drift: trends with position, time since reset and run, and a wandering level, over
random-order trials after the first position, checked on simulated experiments with and
without drift (and with the effects drift must not be mistaken for: a wandering machine,
the first trial after the reset, carryover, run-level noise), against scipy, and at the
sizes users run (the quick form's 10 runs per order judge nothing). The short seeded
calibration here; the full one, every scenario at 5 to 200 runs per order with 2 and 8
tests, is bench/drift_calibration.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays
from scipy.signal import lfilter
from scipy.stats import permutation_test, rankdata, spearmanr
from simulate_longformat import simulate
from test_calibration import false_positive_bound

from washout.analysis.compute import analyze
from washout.analysis.result import Options
from washout.data.longformat import COLUMNS
from washout.errors import WashoutError
from washout.report.words import render_words
from washout.stats.drift import (
    MIN_RUNS,
    MIN_TRIALS,
    WANDER,
    DriftResult,
    drift,
    drift_frame,
    spearman_p,
    with_clocks,
)
from washout.stats.family import adjust
from washout.stats.resampling import permutation_p
from washout.stats.serial import ar1, monotone_residuals, ranks, slow_sd, trend_p, wander_p

ALPHA = 0.05
TRIAL_CV = 0.01
MACHINE = (0.98, 0.02)
"""The wandering machine: an AR(1) log-level over the trial sequence, 0.98 from one trial to
the next, 2% standard deviation (over 1% trial noise): the plain Spearman test called it
drift with the run index in about half of the experiments (issue 27)."""
NAMES = tuple("abcdefgh")
DRIFT_ONLY = Options(drift=True, compare=False)
"""The analysis with drift alone, whose words are drift's."""


@settings(max_examples=300, deadline=None)
@given(
    arrays(
        float,
        array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=9),
        elements=st.sampled_from([0.0, 1.0, 2.5, -3.0, np.inf, -np.inf, np.nan, 1e300]),
    )
)
def test_ranks_are_scipys_average_ranks(values: np.ndarray) -> None:
    """Ties share their mean rank, infinities rank at the ends, and a slice with a NaN is
    all NaN, as scipy.stats.rankdata's default says, along the last axis of any shape."""
    got = ranks(values)
    assert got.shape == values.shape
    np.testing.assert_array_equal(got, rankdata(values, axis=-1))


@pytest.mark.parametrize("phi", [0.0, 0.4, 0.999])
@pytest.mark.parametrize("shape", [(1, 1), (1, 6), (7, 2), (100, 300)])
def test_ar1_is_scipys_filter_from_the_stationary_start(phi: float, shape: tuple[int, int]) -> None:
    """x_t = phi x_{t-1} + e_t from x_0's stationary spread, equal to lfilter's bit for bit,
    and the shocks left as they were."""
    shocks = np.random.default_rng(7).normal(size=shape)
    kept = shocks.copy()
    start = phi * shocks[:, :1] / math.sqrt(1.0 - phi * phi)
    want = lfilter([1.0], [1.0, -phi], shocks[:, 1:], axis=-1, zi=start)[0]
    np.testing.assert_array_equal(ar1(phi, shocks), want)
    np.testing.assert_array_equal(shocks, kept)


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


def test_every_comparison_matches_scipy() -> None:
    """rho as scipy's spearmanr; p of every comparison of 8 trials or fewer the exact
    permutation p of scipy's permutation_test; the family is the comparisons with a p."""
    df = simulate(drift_per_position={"a": 0.005}, runs=9, seed=9)
    result = drift(df, correction="holm")
    clocks = with_clocks(df, df)
    clocks = clocks[(clocks["order"] == "random") & (clocks["position"] >= 1)]
    exact = 0
    for row in result.rows:
        sel = clocks[(clocks["test"] == row.test) & (clocks["metric"] == row.metric)]
        assert row.n == len(sel)
        if row.against != WANDER:
            ref = spearmanr(sel[row.against], sel["value"])
            assert row.spearman == pytest.approx(ref.statistic, rel=1e-12)
        if row.against in ("position", "time_since_reset") and row.n >= MIN_TRIALS:
            x, y = sel[row.against].to_numpy(float), sel["value"].to_numpy(float)
            assert row.n > 8 or row.p == pytest.approx(_exact_p(x, y), rel=1e-12)
            exact += row.n <= 8
        elif row.against in ("run", WANDER):
            assert math.isnan(row.p) == (row.n < MIN_RUNS)
    assert exact >= 1
    ps = [r.p for r in result.rows]
    assert [r.significant for r in result.rows] == adjust(ps, ALPHA, "holm")[0]
    assert result.family_size == sum(not math.isnan(p) for p in ps)
    rhos = [abs(r.spearman) for r in result.rows if not math.isnan(r.spearman)]
    assert rhos == sorted(rhos, reverse=True)


def _rho_magnitude(x: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    """|Spearman's rho| of orderings of y against x, as scipy's permutation_test wants it."""
    from scipy.stats import rankdata

    rx = rankdata(x) - (len(x) + 1) / 2

    def statistic(y: np.ndarray, axis: int) -> np.ndarray:
        ry = rankdata(y, axis=axis) - (y.shape[axis] + 1) / 2
        return np.abs(np.moveaxis(ry, axis, -1) @ rx) / np.sqrt(
            (rx @ rx) * np.sum(ry * ry, axis=axis)
        )

    return statistic


def _exact_p(x: np.ndarray, y: np.ndarray) -> float:
    """scipy's exact permutation p of |Spearman's rho| over all orderings of y."""
    return permutation_test(
        (y,),
        _rho_magnitude(x),
        permutation_type="pairings",
        n_resamples=np.inf,
        alternative="greater",
        vectorized=True,
    ).pvalue


@pytest.mark.parametrize("n", [3, 4, 6, 8])
def test_spearman_p_is_the_exact_permutation_p_for_few_trials(n: int) -> None:
    """Up to 8 trials the p-value is the exact permutation one, as scipy's permutation_test
    computes it over all n! orderings, with tied positions too; three trials in perfect
    order have p = 1/3 (Student's t said 0: issue 27)."""
    rng = np.random.default_rng(n)
    for x in (np.arange(n, dtype=float), rng.integers(1, 4, n).astype(float)):
        if np.ptp(x) == 0:
            continue
        y = rng.standard_normal(n) + 0.5 * x
        assert spearman_p(x, y, rng, 999) == pytest.approx(_exact_p(x, y), rel=1e-12)
    assert spearman_p(np.arange(3.0), np.array([1.0, 2.0, 3.0]), rng, 999) == pytest.approx(1 / 3)
    assert spearmanr([0, 1, 2], [1, 2, 3]).pvalue == 0.0  # what drift printed before


def test_spearman_p_above_eight_trials_agrees_with_scipys_permutation_test() -> None:
    """Above 8 trials, sequential Monte Carlo: within 3 Monte-Carlo standard errors of
    scipy's permutation_test with 100,000 resamples, both for a p near 0.01 (every draw
    up to the limit) and for a large one (stopped early)."""
    rng = np.random.default_rng(3)
    x = rng.integers(1, 7, 30).astype(float)
    for slope in (0.09, 0.0):
        y = rng.standard_normal(30) + slope * x * 5
        ref = permutation_test(
            (y,),
            _rho_magnitude(x),
            permutation_type="pairings",
            n_resamples=100_000,
            alternative="greater",
            vectorized=True,
            rng=1,
        ).pvalue
        got = spearman_p(x, y, np.random.default_rng(4), 20_000)
        se = math.sqrt(ref * (1 - ref) / 20_000) + math.sqrt(ref * (1 - ref) / 100_000)
        assert abs(got - ref) <= max(3 * se, 0.35 * ref if ref > 0.2 else 0.0), (got, ref)


def test_sequential_p_values_are_valid_under_the_null() -> None:
    """P(p <= u) <= u for the permutation p of exchangeable data, exact and Monte Carlo, at
    the levels a family uses."""
    rng = np.random.default_rng(11)
    for n in (6, 12):
        x = np.arange(n, dtype=float)
        ps = np.array([spearman_p(x, rng.standard_normal(n), rng, 2000) for _ in range(2000)])
        for u in (0.01, 0.05, 0.2):
            assert np.mean(ps <= u) <= u + 3 * math.sqrt(u * (1 - u) / 2000), (n, u)


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


def test_outputs_and_errors() -> None:
    result = drift(simulate(runs=5, metrics=("wall", "rps"), seed=15), metric="rps")
    assert {r.metric for r in result.rows} == {"rps"}
    keys = {"test", "metric", "against", "spearman", "p", "significant"}
    assert keys <= set(result.rows[0].to_dict())
    assert keys <= set(drift_frame(result).columns)
    assert {r.against for r in result.rows} == {"position", "time_since_reset", "run", WANDER}
    with pytest.raises(WashoutError) as err:
        drift(simulate(runs=2).drop(columns=["run"]))
    assert "run" in str(err.value) and "\n" not in str(err.value)
    no_times = drift(simulate(runs=4, seed=18).drop(columns=["started"]))
    assert all(r.n == 0 for r in no_times.rows if r.against == "time_since_reset")


def test_a_constant_metric_counts_with_p_one() -> None:
    df = simulate(runs=15, seed=16)
    df.loc[df["test"] == "b", "value"] = 3.0
    rows = [r for r in drift(df).rows if r.test == "b"]
    assert all(math.isnan(r.spearman) and r.p == 1.0 and not r.significant for r in rows)


def test_published_memcached_get_hits_does_not_drift_and_its_level_wanders() -> None:
    """get_hits' throughput is lower in the first trial after the reset (the carryover
    analysis finds it); at positions 1 and 2 it does not rise with its position, nor trend
    across runs. Its level wanders by about 3%, at p = 0.005 (400,000 permutations), right
    at the family-wise level of 0.05 / 9: the fixed-order runs, which drift does not use
    and which ran before the random ones, wander too (lag-1 correlation of their ranks
    0.33, permutation p < 0.01), so it is the machine's, not chance, though too weak to be
    reported for sure."""
    from conftest import FIXTURES

    from washout.data.sources import load_trials

    df, _ = load_trials(FIXTURES / "ordersage-artifact" / "memcached" / "all_exp_results.csv")
    result = drift(df)
    assert not [r for r in result.significant() if r.against != WANDER]
    [hits_wander] = [
        r for r in result.rows if r.test.endswith("get_hits_test.sh") and r.against == WANDER
    ]
    assert hits_wander.p < 0.02 and 2.0 < hits_wander.wander_pct < 4.0
    fixed = df[df["test"].str.endswith("get_hits_test.sh") & (df["order"] == "fixed")]
    fixed = fixed.sort_values("run")
    assert wander_p(fixed["value"].to_numpy(float), np.random.default_rng(0), 20_000) < 0.01
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


# ---------------------------------------------------------------------------------------
# Calibration (short seeded variants of bench/drift_calibration.py)
# ---------------------------------------------------------------------------------------

FINDINGS: dict[str, Callable[[DriftResult], bool]] = {
    "position or time": lambda r: any(
        x.against in ("position", "time_since_reset") for x in r.significant()
    ),
    "trend across runs": lambda r: any(x.against == "run" for x in r.significant()),
    "wandering level": lambda r: any(x.against == WANDER for x in r.significant()),
}
"""What a drift analysis can report, each a function of its result: "reported it"."""


@dataclass(frozen=True)
class DriftScenario:
    """Simulated experiments with known effects (``effects(tests)``: simulate's arguments for
    those test names; ``per_run``: every test's level grows by this fraction per run);
    ``breaks``: the FINDINGS that are true here, every other one's null holds."""

    name: str
    effects: Callable[[tuple[str, ...]], dict] = lambda tests: {}
    per_run: float = 0.0
    breaks: frozenset[str] = field(default_factory=frozenset)

    def simulate(self, tests: int, runs: int, seed: int) -> pd.DataFrame:
        names = NAMES[:tests]
        df = simulate(tests=names, runs=runs, cv=TRIAL_CV, seed=seed, **self.effects(names))
        if self.per_run:
            df["value"] *= 1 + self.per_run * df["run"]
        return df


DRIFT_SCENARIOS: tuple[DriftScenario, ...] = (
    DriftScenario("no drift"),
    DriftScenario(
        "AR(1) machine state",
        lambda t: {"machine_ar1": MACHINE},
        breaks=frozenset({"wandering level"}),
    ),
    DriftScenario(
        "first after reset +10%, carryover +8%, run noise 5%",
        lambda t: {"first_after_reset": 1.10, "carryover": {(t[1], t[0]): 1.08}, "run_cv": 0.05},
    ),
    DriftScenario(
        "1% per position (last test)",
        lambda t: {"drift_per_position": {t[-1]: 0.01}},
        breaks=frozenset({"position or time"}),
    ),
    DriftScenario("1% per run", per_run=0.01, breaks=frozenset({"trend across runs"})),
    DriftScenario("0.1% per run", per_run=0.001, breaks=frozenset({"trend across runs"})),
)


def finding_rates(
    scenario: DriftScenario, tests: int, runs: int, experiments: int, seed: int = 0
) -> dict[str, float]:
    """Per finding, the share of ``experiments`` simulated experiments that report it."""
    hits = dict.fromkeys(FINDINGS, 0)
    for e in range(experiments):
        result = drift(scenario.simulate(tests, runs, seed + e), alpha=ALPHA)
        for name, reported in FINDINGS.items():
            hits[name] += reported(result)
    return {name: count / experiments for name, count in hits.items()}


def _scenario(name: str) -> DriftScenario:
    return next(s for s in DRIFT_SCENARIOS if s.name == name)


@pytest.mark.parametrize(
    ("scenario", "tests", "runs"),
    [
        ("AR(1) machine state", 2, 50),
        ("AR(1) machine state", 8, 20),
        ("first after reset +10%, carryover +8%, run noise 5%", 8, 20),
        ("no drift", 2, 100),
    ],
)
def test_no_drift_is_reported_where_there_is_none(scenario: str, tests: int, runs: int) -> None:
    """Experiment-wide false positives within alpha + 2 Monte-Carlo se for every finding
    whose null holds: a wandering machine is not a trend (the plain Spearman test said
    "drifts with the run index" in about half of these), nor are the first trial's cost,
    carryover and run-to-run noise; where the machine wanders, that is found."""
    s = _scenario(scenario)
    experiments = 60
    rates = finding_rates(s, tests, runs, experiments, seed=1000 * tests + runs)
    for name, rate in rates.items():
        if name not in s.breaks:
            assert rate <= false_positive_bound(experiments), (name, rates)
    if s.breaks:
        assert rates["wandering level"] >= 0.25, rates


def test_real_drift_is_found() -> None:
    """Power: a 1%-per-position drift of one test in 20 runs of 8 tests, and a 1%-per-run
    trend of every test in 20 runs of 2 (bench/drift_calibration.py has every size)."""
    assert (
        finding_rates(_scenario("1% per position (last test)"), 8, 20, 15)["position or time"]
        >= 0.8
    )
    rates = finding_rates(_scenario("1% per run"), 2, 20, 15)
    assert rates["trend across runs"] >= 0.8 and rates["wandering level"] <= 0.2, rates


def test_the_quick_forms_default_size_judges_no_drift_and_says_so() -> None:
    """`washout run 'a' 'b'` runs 10 runs per order: each command has some 5 random-order
    trials after the first position, too few to judge anything (the t approximation gave
    "Spearman rho = +1.00 (n=3, p=0)" and reported drift in 17% of such experiments)."""
    for seed in range(20):
        result = drift(simulate(tests=("a", "b"), runs=10, cv=TRIAL_CV, seed=seed))
        assert result.significant() == [] and result.family_size == 0
        assert result.too_few()
    frame = simulate(tests=("a", "b"), runs=10, seed=0)
    most = max(r.n for r in drift(frame).rows)
    assert render_words(analyze(frame, DRIFT_ONLY)) == [
        f"Too few trials to judge drift: a trend with position or time since the reset needs "
        f"{MIN_TRIALS} random-order trials of a test after the first position, a trend "
        f"across runs or a wandering level {MIN_RUNS}, and no test has more than {most}."
    ]


def test_a_wandering_level_is_told_from_a_trend_in_words() -> None:
    """The machine wandered: "the level changed across the experiment, not monotonically",
    with how much (the standard deviation of the slow part: within a third of that of the
    simulated machine state around its line, over the test's own trials); a steady trend is
    a trend, not a wander."""
    from simulate_longformat import _machine_state

    wandering = simulate(tests=NAMES[:2], runs=100, cv=TRIAL_CV, machine_ar1=MACHINE, seed=6)
    analysis = analyze(wandering, DRIFT_ONLY)
    words = render_words(analysis)
    assert any("the level changed across the experiment, not monotonically" in w for w in words)
    from washout.report.document import flagged_tests  # the report's flags say the same

    assert ("a", "wall", ("a level that wandered across runs",)) in [
        (f.test, f.metric, f.reasons) for f in flagged_tests(analysis)
    ]
    result = drift(wandering)
    [found] = [r for r in result.significant() if r.test == "a"]
    assert found.against == WANDER
    state = _machine_state(MACHINE, 1, len(wandering), 6)[0]
    mine = (
        (wandering["test"] == "a") & (wandering["order"] == "random") & (wandering["position"] >= 1)
    )
    left = monotone_residuals(state[mine.to_numpy()])[0]
    assert found.wander_pct == pytest.approx(100 * np.std(left), rel=1 / 3)
    assert not any(r.against == "run" for r in result.significant())
    trend = _scenario("1% per run").simulate(2, 50, seed=5)
    assert {r.against for r in drift(trend).significant()} == {"run"}


def test_trend_and_wander_p_values_by_hand() -> None:
    """The pieces on small series: a perfect monotone series of 12 runs is a trend
    (KVB's statistic is infinite: only draws on their own line match it); an AR(1) path
    with phi 0.9 wanders; exchangeable values do neither; slow_sd reads the slow part."""
    rng = np.random.default_rng(2)
    t = np.arange(12, dtype=float)
    assert trend_p(t + 0.0, t, rng, 5000) < 0.001
    assert wander_p(np.sin(t / 2), rng, 5000) < 0.01
    assert wander_p(np.exp(t / 3) + 0.1 * rng.standard_normal(12), rng, 5000) > 0.2  # curved
    noise = rng.standard_normal(12)
    assert trend_p(noise, t, rng, 5000) > 0.05 and wander_p(noise, rng, 5000) > 0.05
    assert trend_p(np.ones(12), t, rng, 999) == 1.0
    level = np.repeat([0.0, 0.05, -0.05, 0.0], 50)  # up, down, up: sd 3.5%
    values = 100 * np.exp(level + 0.001 * rng.standard_normal(200))
    assert 0.02 < slow_sd(values) <= np.std(level)  # what a monotone fit leaves of it
    assert slow_sd(100 + rng.standard_normal(200)) < 0.002
    exact = permutation_p(lambda rows: rows[:, 0], np.array([4.0, 0, 1, 2, 3]), rng, 999)
    assert exact == pytest.approx(1 / 5)  # the largest first in 24 of the 120 orderings
