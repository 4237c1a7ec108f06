"""The incremental loop: the paper's sample sizes and splits, termination rules, robustness."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CONFIGSPACES as FIXTURES
from sklearn.metrics import r2_score as sk_r2
from sklearn.model_selection import train_test_split

from washout.errors import WashoutError
from washout.sweep.anova import fit_anova
from washout.sweep.incremental import (
    HOLDOUT_MIN,
    LoopOptions,
    method_options,
    pooled_holdout,
    r2_score,
    run_loop,
    sample_sizes,
    validation_splits,
)
from washout.sweep.space import Space, load_space_csv


@pytest.fixture(autouse=True)
def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def silo() -> Space:
    space = load_space_csv(FIXTURES / "silo_ycsb.csv", "tput")
    space.y = space.y / space.numeric_levels(0)[space.codes[:, 0]]  # the paper: per thread
    return space


@pytest.mark.parametrize("n", [144, 600, 3840, 5184])
def test_sample_sizes_are_train_test_split_sizes(n: int) -> None:
    expected = [
        len(train_test_split(np.arange(n), test_size=1 - r)[0])
        for r in np.linspace(0.05, 1, 20)[:19]
    ]
    assert sample_sizes(n, 0.05, 0.05) == expected + [n]


def test_random_anova_loop_reproduces_the_papers_protocol(silo: Space) -> None:
    """At every ratio: the paper's sample (train_test_split, seed), its 10 splits
    (random_state = split), the model fitted on 80%, sklearn's r2_score on 20%."""
    seed = 4
    options = method_options("paper", seed=seed, threshold=1.0, budget=60)  # never stops early
    result = run_loop(silo, lambda idx: silo.y[idx], options)
    for step, r in zip(result.steps[:-1], np.linspace(0.05, 1, 20)):  # last: cut by budget
        sample, _ = train_test_split(np.arange(len(silo)), test_size=1 - r, random_state=seed)
        assert step.measured == len(sample)
        for i, ours in enumerate(step.r2_splits):
            exp, unexp = train_test_split(sample, test_size=0.2, random_state=i)
            if len(exp) < 2:
                continue
            fit = fit_anova(silo.codes[exp], silo.y[exp], silo.n_levels)
            assert ours == pytest.approx(sk_r2(silo.y[unexp], fit.predict(silo.codes[unexp])))


def test_tiny_samples_with_unseen_levels_do_not_crash(silo: Space) -> None:
    """5% of silo is 7 settings: splits fit on 5 and validate on levels never seen."""
    for sampler in ("random", "balanced", "stratified", "dist-aware", "coverage"):
        for model in ("anova", "smooth", "mlp"):
            result = run_loop(
                silo,
                lambda idx: silo.y[idx],
                method_options("paper", sampler=sampler, model=model, budget=7),
            )
            assert result.steps[0].measured == 7
            assert len(result.steps[0].r2_splits) == 10


def test_holdout_rule_is_never_looser_and_stops_at_the_threshold(silo: Space) -> None:
    for seed in (0, 5):
        paper = run_loop(silo, lambda idx: silo.y[idx], method_options("paper", seed=seed))
        ours = run_loop(
            silo, lambda idx: silo.y[idx], method_options("paper", seed=seed, rule="holdout")
        )
        assert ours.steps[-1].measured >= paper.steps[-1].measured
        last = ours.steps[-1]
        if ours.terminated:
            assert min(last.r2_splits) >= 0.9 and last.r2_holdout >= 0.9
        assert all(not s.passed for s in ours.steps[:-1])


def test_budget_stops_the_loop_unterminated(silo: Space) -> None:
    result = run_loop(silo, lambda idx: silo.y[idx], LoopOptions(threshold=1.0, budget=30))
    assert not result.terminated
    assert result.steps[-1].measured == 30
    assert len(np.unique(result.measured)) == 30


def test_the_loop_is_deterministic_for_a_seed(silo: Space) -> None:
    calls: list[np.ndarray] = []

    def measure(idx: np.ndarray) -> np.ndarray:
        calls.append(idx)
        return silo.y[idx]

    a = run_loop(silo, measure, LoopOptions(sampler="coverage", model="smooth", seed=2, budget=40))
    b = run_loop(
        silo,
        lambda idx: silo.y[idx],
        LoopOptions(sampler="coverage", model="smooth", seed=2, budget=40),
    )
    np.testing.assert_array_equal(a.measured, b.measured)
    assert sum(len(c) for c in calls) == len(a.measured)


def test_r2_matches_sklearn() -> None:
    rng = np.random.default_rng(0)
    y, p = rng.normal(size=50), rng.normal(size=50)
    assert r2_score(y, p) == pytest.approx(sk_r2(y, p))
    assert np.isnan(r2_score(np.ones(3), np.ones(3)))


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("rule", "strict", "rule = 'strict': unknown rule"),
        ("model", "gp", "--model = 'gp': unknown model"),
        ("start", 0.0, "start = 0.0"),
        ("budget", 0, "budget = 0"),
        ("validation", "loo", "validation = 'loo': unknown"),
    ],
)
def test_bad_options_are_one_line_errors(field: str, value: object, message: str) -> None:
    with pytest.raises(WashoutError, match=message):
        LoopOptions(**{field: value}).check()


def test_stable_rule_waits_for_unchanged_conclusions() -> None:
    from washout.sweep.incremental import conclusion_signature

    herd = load_space_csv(FIXTURES / "herd_ycsb.csv", "tput")  # stops within 10-15%
    base = dict(seed=1, analysis="anova-main", start=0.05, step=0.05, growth=1.0)
    holdout = run_loop(herd, lambda idx: herd.y[idx], LoopOptions(rule="holdout", **base))
    stable = run_loop(herd, lambda idx: herd.y[idx], LoopOptions(rule="stable", **base))
    assert stable.steps[-1].measured >= holdout.steps[-1].measured
    assert stable.terminated
    # the conclusions one batch earlier were the same
    options = LoopOptions(rule="stable", **base)
    before = type(stable)(
        stable.measured[stable.steps[-1].measured - stable.steps[-2].measured :],
        stable.y[stable.steps[-1].measured - stable.steps[-2].measured :],
    )
    assert conclusion_signature(herd, before, options) == conclusion_signature(
        herd, stable, options
    )


def test_ours_is_the_default_and_paper_is_the_papers_options() -> None:
    ours, paper = LoopOptions(), method_options("paper")
    assert ours == method_options() and ours.method == "ours" and paper.method == "paper"
    assert (paper.sampler, paper.model, paper.rule, paper.conclude, paper.coding) == (
        "random",
        "anova",
        "paper",
        "measured",
        "treatment",
    )
    assert (paper.start, paper.step, paper.growth) == (0.05, 0.05, 1.0)
    assert (paper.validation, ours.validation) == ("random", "folds")
    assert (ours.sampler, ours.model, ours.rule, ours.conclude, ours.coding) == (
        "coverage",
        "smooth",
        "settled",
        "predicted",
        "sum",
    )
    # one component overridden: the rest stays the method's, and it is no longer the method
    mixed = method_options("paper", model="smooth")
    assert mixed.model == "smooth" and mixed.sampler == "random" and mixed.method == "custom"
    with pytest.raises(WashoutError, match="--method = 'fast': unknown method"):
        method_options("fast")


def test_adaptive_batches_start_small_and_grow_geometrically() -> None:
    sizes = sample_sizes(5184, 0.02, 0.01, 1.25)
    assert sizes[0] == 103 and sizes[-1] == 5184  # 2%, as train_test_split sizes it
    steps = np.diff(sizes)
    assert steps[0] == 52  # 1% of the space while little is measured
    # later, each batch adds at least a quarter of what is measured: few iterations
    assert all(b >= np.ceil(0.25 * a) for a, b in zip(sizes, steps[:-1]))  # last: capped
    assert len(sizes) < 25
    assert sample_sizes(144, 0.02, 0.01, 1.25)[:3] == [2, 12, 15]
    # the first predicted batch holds HOLDOUT_MIN settings: the holdout rule can be met there
    assert sample_sizes(600, 0.02, 0.01, 1.25, least=17)[:3] == [17, 27, 34]


def test_holdout_pools_the_latest_batches_up_to_its_minimum() -> None:
    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=4), rng.normal(size=4)) for _ in range(5)]
    pooled = (
        np.concatenate([y for y, _ in batches[-3:]]),
        np.concatenate([p for _, p in batches[-3:]]),
    )
    assert HOLDOUT_MIN == 10  # 3 batches of 4 are the fewest that hold 10
    assert pooled_holdout(batches) == pytest.approx(sk_r2(*pooled))
    assert pooled_holdout([]) is None
    assert pooled_holdout(batches[:2]) is None  # 8 settings predicted: no holdout R^2 yet


def test_a_space_no_model_can_fit_ends_not_terminated_with_its_best_r2() -> None:
    """Independent noise: neither the splits nor the holdout may claim termination; every
    setting is measured and the result says how far the model got."""
    from washout.sweep.explore import explore
    from washout.sweep.space import full_grid

    space = full_grid(["a", "b", "c"], [[1.0, 2, 3, 4], [1.0, 2, 3, 4, 5], ["x", "y", "z"]])
    space.y = np.exp(np.random.default_rng(7).normal(0, 0.5, len(space)))
    result = explore(space, LoopOptions())
    assert not result.terminated
    assert result.settings_measured == len(space)
    assert result.r2_best is not None and result.r2_best < 0.8
    assert result.r2_best == max(s.r2_min for s in result.steps if s.r2_min is not None)
    assert result.steps[0].settings_measured == 1 + 3 + 4 + 2  # every main effect estimable


@pytest.mark.parametrize("n", [2, 7, 29, 30, 143])
def test_folds_validate_every_setting_once_per_repetition(n: int) -> None:
    y = np.random.default_rng(n).lognormal(size=n)
    splits = validation_splits(y, 10, "folds", seed=3)
    assert len(splits) == 10
    for repetition in (splits[:5], splits[5:]):
        tests = np.concatenate([test for _, test in repetition])
        np.testing.assert_array_equal(np.sort(tests), np.arange(n))  # each setting once
        for train, test in repetition:
            np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(n))
            assert len(test) in (n // 5, -(-n // 5))  # 20% each, as the paper's split
    assert not all(
        np.array_equal(a[1], b[1]) for a, b in zip(splits[:5], splits[5:])
    )  # the second repetition deals afresh
    assert [t.tolist() for _, t in splits] == [
        t.tolist() for _, t in validation_splits(y, 10, "folds", seed=3)
    ]  # deterministic for a seed
    assert len(validation_splits(y, 3, "folds")) == 3


def test_folds_span_the_values_random_splits_need_not() -> None:
    """Stratified on the value: every fold holds one of each run of 5 sorted values, so it
    reaches below the 5th smallest and above the 5th largest value. The paper's random 20%
    parts of the same 30 values do not (that is what sank herd's worst split)."""
    y = np.random.default_rng(0).lognormal(size=30)
    low, high = np.sort(y)[4], np.sort(y)[-5]
    for _, test in validation_splits(y, 10, "folds"):
        assert y[test].min() <= low and y[test].max() >= high
        blocks = np.searchsorted(np.sort(y), y[test]) // 5
        np.testing.assert_array_equal(np.sort(blocks), np.arange(6))
    spans = [
        y[test].min() <= low and y[test].max() >= high
        for _, test in validation_splits(y, 10, "random")
    ]
    assert not all(spans)


def test_random_validation_is_the_papers_train_test_split() -> None:
    y = np.arange(23.0)
    for i, (train, test) in enumerate(validation_splits(y, 10, "random")):
        expected = train_test_split(np.arange(23), test_size=0.2, random_state=i)
        np.testing.assert_array_equal(train, expected[0])
        np.testing.assert_array_equal(test, expected[1])
