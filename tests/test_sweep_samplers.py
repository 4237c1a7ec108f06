"""Samplers: the paper's random samples exactly, and each sampler's defining property."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from conftest import CONFIGSPACES as FIXTURES
from sklearn.model_selection import train_test_split

from washout.errors import WashoutError
from washout.sweep.samplers import SAMPLERS, get_sampler
from washout.sweep.space import Space, full_grid, load_space_csv


@pytest.fixture(scope="module")
def herd() -> Space:
    return load_space_csv(FIXTURES / "herd_ycsb.csv", "tput")


def _grow(space: Space, name: str, sizes: list[int], seed: int) -> np.ndarray:
    sampler = get_sampler(name)
    measured = np.empty(0, dtype=int)
    for batch, size in enumerate(sizes):
        new = sampler(space, measured, space.y[measured], size - len(measured), seed, batch)
        assert len(new) == size - len(measured)
        assert len(np.unique(new)) == len(new)
        assert not np.isin(new, measured).any()
        measured = np.concatenate([new, measured])
    return measured


@pytest.mark.parametrize("seed", [0, 7])
def test_random_samples_are_the_papers_train_test_split_samples(herd: Space, seed: int) -> None:
    n = len(herd)
    for r in np.linspace(0.05, 1, 20)[:19]:
        sample, _ = train_test_split(np.arange(n), test_size=1 - r, random_state=seed)
        grown = _grow(herd, "random", [len(sample)], seed)
        np.testing.assert_array_equal(grown, sample)  # same settings, same order


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_sampler_adds_new_distinct_settings_and_is_reproducible(
    herd: Space, name: str
) -> None:
    first = _grow(herd, name, [30, 60, 90], seed=3)
    again = _grow(herd, name, [30, 60, 90], seed=3)
    np.testing.assert_array_equal(first, again)


def test_coverage_sees_every_level_and_pair_first(herd: Space) -> None:
    """herd has 5 x 5 x 6 x 4 levels: 30 settings can cover every level; the pairs (at most
    36 cells for one pair) take a few more; random sampling misses some of both."""
    ours = _grow(herd, "coverage", [30], seed=0)
    for f, n in enumerate(herd.n_levels):
        assert len(np.unique(herd.codes[ours, f])) == n
    ours = _grow(herd, "coverage", [40], seed=0)
    for a, b in combinations(range(4), 2):
        cells = {(x, y) for x, y in herd.codes[ours][:, [a, b]]}
        assert len(cells) == herd.n_levels[a] * herd.n_levels[b]
    missed = 0
    for seed in range(10):
        rnd = _grow(herd, "random", [40], seed)
        missed += any(
            len({(x, y) for x, y in herd.codes[rnd][:, [a, b]]})
            < herd.n_levels[a] * herd.n_levels[b]
            for a, b in combinations(range(4), 2)
        )
    assert missed == 10


def test_stratified_keeps_level_shares(herd: Space) -> None:
    measured = _grow(herd, "stratified", [30, 90], seed=1)
    f = 0  # batch 1 stratifies on the first parameter
    counts = np.bincount(herd.codes[measured, f], minlength=herd.n_levels[f])
    assert counts.max() - counts.min() <= 1  # equal level sizes in herd: 18 each


def _spread(space: Space, measured: np.ndarray) -> int:
    return sum(
        int(np.ptp(np.bincount(space.codes[measured, f], minlength=n)))
        for f, n in enumerate(space.n_levels)
    )


def test_balanced_evens_out_levels(herd: Space) -> None:
    balanced = [_spread(herd, _grow(herd, "balanced", [30, 150], seed)) for seed in range(5)]
    rnd = [_spread(herd, _grow(herd, "random", [30, 150], seed)) for seed in range(5)]
    assert np.mean(balanced) < 0.5 * np.mean(rnd)


def test_dist_aware_prefers_where_the_metric_varies() -> None:
    """y changes steeply with x only where z = 1: later draws concentrate there."""
    space = full_grid(["x", "z"], [list(map(float, range(40))), [0.0, 1.0]])
    x, z = space.codes[:, 0].astype(float), space.codes[:, 1]
    space.y = np.where(z == 1, np.sin(x) * 100, 1.0)
    first = get_sampler("dist-aware")(space, np.empty(0, dtype=int), np.empty(0), 20, 5, 0)
    steep = 0
    for seed in range(5):
        more = get_sampler("dist-aware")(space, first, space.y[first], 20, seed, 1)
        steep += int((space.codes[more, 1] == 1).sum())
    assert steep > 0.75 * 100


def test_unknown_sampler_is_a_one_line_error() -> None:
    with pytest.raises(WashoutError, match="--sampler = 'lhs': unknown sampler"):
        get_sampler("lhs")
