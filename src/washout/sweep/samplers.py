"""Samplers: which settings to measure next, given those measured so far.

The paper's four (Hui et al., SIGMOD 2024; their published code as docs/sweep-method.md §3
describes it) and ours:

- ``random``: a uniformly random batch. Seeded as scikit-learn's train_test_split draws the
  paper's samples (one permutation per seed, the sample at ratio r its tail), so for one seed
  the samples for growing r are nested and equal the paper's.
- ``balanced``: one setting at a time among those whose level of the current parameter is the
  least represented so far; the parameter rotates after each pick.
- ``stratified``: each batch keeps the measured share of every level of one parameter as close
  as possible to its share in the space; the parameter rotates per batch.
- ``dist-aware``: settings drawn with probability proportional to the "neighbour variability"
  of their k nearest measured settings (k = 2^parameters, capped at 32 here so large spaces
  stay tractable: exact for up to 5 parameters): mean over neighbours of the column sums of
  |dz(y)| / distance over
  neighbour pairs, halved, on z-scored level values.
- ``coverage`` (ours): greedy pairwise coverage, the idea of covering arrays: each pick is the
  setting whose level pairs are the least measured so far (weight 1/(1 + count) per pair and
  per level). Every level is seen as early as possible and every 2-way cell of the ANOVA gets
  data, so the model is estimable at a small sample and no validation level is unseen.

Every sampler returns indices into the space, never one already measured. The first batch of
the paper's samplers is random, as in the paper.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np

from washout.errors import choose
from washout.sweep.space import Space

Sampler = Callable[[Space, np.ndarray, np.ndarray, int, int, int], np.ndarray]
"""(space, measured indices, their metric values, how many to add, seed, batch number) -> indices.

A sampler is a pure function of its arguments (its random draws come from (seed, batch)), so a
resumed sweep chooses the same settings."""

DIST_AWARE_MAX_NEIGHBOURS = 32
DIST_AWARE_CHUNK = 512


def _unmeasured(space: Space, measured: np.ndarray) -> np.ndarray:
    mask = np.ones(len(space), dtype=bool)
    mask[measured] = False
    return np.flatnonzero(mask)


def random_batch(
    space: Space, measured: np.ndarray, y: np.ndarray, k: int, seed: int, batch: int
) -> np.ndarray:
    """k settings uniformly at random: the next unmeasured ones from the end of one permutation.

    The permutation is scikit-learn's (``RandomState(seed).permutation(n)``, what
    train_test_split shuffles with), so with test_size = 1 - r the paper's sample is its tail.
    """
    order = np.random.RandomState(seed).permutation(len(space))[::-1]
    taken = np.zeros(len(space), dtype=bool)
    taken[measured] = True
    return order[~taken[order]][:k][::-1]  # in permutation order, as the paper's sample file


def balanced_batch(
    space: Space, measured: np.ndarray, y: np.ndarray, k: int, seed: int, batch: int
) -> np.ndarray:
    """k picks, each among settings holding the least represented level of a rotating parameter."""
    if batch == 0:
        return random_batch(space, measured, y, k, seed, batch)
    counts = [
        np.bincount(space.codes[measured, f], minlength=n) for f, n in enumerate(space.n_levels)
    ]
    rng = np.random.default_rng([seed, batch])
    available = np.ones(len(space), dtype=bool)
    available[measured] = False
    chosen: list[int] = []
    n_params = len(space.parameters)
    for pick in range(k):
        if not available.any():
            break
        f = (batch * k + pick) % n_params
        pool = np.flatnonzero(available)
        level_counts = counts[f][space.codes[pool, f]]
        pool = pool[level_counts == level_counts.min()]
        i = int(rng.choice(pool))
        chosen.append(i)
        available[i] = False
        for g in range(n_params):
            counts[g][space.codes[i, g]] += 1
    return np.asarray(chosen, dtype=int)


def stratified_batch(
    space: Space, measured: np.ndarray, y: np.ndarray, k: int, seed: int, batch: int
) -> np.ndarray:
    """k settings keeping the level shares of one parameter (rotating per batch) proportional."""
    if batch == 0:
        return random_batch(space, measured, y, k, seed, batch)
    rng = np.random.default_rng([seed, batch])
    f = (batch - 1) % len(space.parameters)
    pool = _unmeasured(space, measured)
    n_levels = space.n_levels[f]
    population = np.bincount(space.codes[:, f], minlength=n_levels)
    have = np.bincount(space.codes[measured, f], minlength=n_levels)
    total = len(measured) + min(k, len(pool))
    want = np.maximum(population / len(space) * total - have, 0.0)
    avail = np.bincount(space.codes[pool, f], minlength=n_levels)
    quota = np.minimum(np.floor(want).astype(int), avail)
    while quota.sum() < min(k, len(pool)):  # largest remainders first, then any room left
        room = (avail - quota) > 0
        gap = np.where(room, want - quota, -np.inf)
        quota[int(np.argmax(gap))] += 1
    chosen = [
        rng.choice(pool[space.codes[pool, f] == lv], size=q, replace=False)
        for lv, q in enumerate(quota)
        if q > 0
    ]
    return np.concatenate(chosen).astype(int) if chosen else np.empty(0, dtype=int)


def dist_aware_batch(
    space: Space, measured: np.ndarray, y: np.ndarray, k: int, seed: int, batch: int
) -> np.ndarray:
    """k settings drawn with probability proportional to neighbour variability (see module doc)."""
    from scipy.spatial import cKDTree

    if batch == 0 or len(measured) < 2:
        return random_batch(space, measured, y, k, seed, batch)
    x = np.column_stack(
        [space.numeric_levels(f)[space.codes[:, f]] for f in range(space.codes.shape[1])]
    )
    sd = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    zy = (y - y.mean()) / (y.std() if y.std() > 0 else 1.0)
    pool = _unmeasured(space, measured)
    n_nb = int(min(2 ** z.shape[1], DIST_AWARE_MAX_NEIGHBOURS, len(measured)))
    _, nb = cKDTree(z[measured]).query(z[pool], k=n_nb)
    nb = nb.reshape(len(pool), n_nb)
    score = np.empty(len(pool))
    for lo in range(0, len(pool), DIST_AWARE_CHUNK):  # pool x k x k at a time, bounded memory
        part = nb[lo : lo + DIST_AWARE_CHUNK]
        pts = z[measured][part]
        dist = np.linalg.norm(pts[:, :, None, :] - pts[:, None, :, :], axis=-1)
        dy = np.abs(zy[part][:, :, None] - zy[part][:, None, :])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(dist > 0, dy / dist, 0.0)
        score[lo : lo + DIST_AWARE_CHUNK] = ratio.sum(axis=1).mean(axis=1) / 2
    rng = np.random.default_rng([seed, batch])
    size = min(k, len(pool))
    if not np.isfinite(score).all() or np.count_nonzero(score) < size:
        score = np.where(np.isfinite(score), score, 0.0) + 1e-12
    return rng.choice(pool, size=size, replace=False, p=score / score.sum())


def coverage_batch(
    space: Space, measured: np.ndarray, y: np.ndarray, k: int, seed: int, batch: int
) -> np.ndarray:
    """k settings, greedily, each covering the least-measured levels and level pairs (ours).

    gain(s) = sum over parameters of 1/(1 + count of s's level) + sum over parameter pairs of
    1/(1 + count of s's level pair), counts over the measured and already chosen settings.
    After each pick only the settings sharing one of its levels or pairs change; their gains
    are updated in place.
    """
    codes = space.codes
    n_params = codes.shape[1]
    groups = [codes[:, f] for f in range(n_params)]
    sizes = list(space.n_levels)
    for a, b in combinations(range(n_params), 2):
        groups.append(codes[:, a] * space.n_levels[b] + codes[:, b])
        sizes.append(space.n_levels[a] * space.n_levels[b])
    counts = [np.bincount(g[measured], minlength=m).astype(float) for g, m in zip(groups, sizes)]
    members = [
        np.split(np.argsort(g, kind="stable"), np.cumsum(np.bincount(g, minlength=m))[:-1])
        for g, m in zip(groups, sizes)
    ]
    gain = np.random.default_rng([seed, batch]).random(len(space)) * 1e-6
    for g, c in zip(groups, counts):
        gain += 1.0 / (1.0 + c[g])
    gain[measured] = -np.inf
    chosen: list[int] = []
    for _ in range(min(k, len(space) - len(measured))):
        i = int(np.argmax(gain))
        chosen.append(i)
        for g, c, mem in zip(groups, counts, members):
            cell = g[i]
            gain[mem[cell]] += 1.0 / (2.0 + c[cell]) - 1.0 / (1.0 + c[cell])
            c[cell] += 1
        gain[i] = -np.inf
    return np.asarray(chosen, dtype=int)


SAMPLERS: dict[str, Sampler] = {
    "random": random_batch,
    "balanced": balanced_batch,
    "stratified": stratified_batch,
    "dist-aware": dist_aware_batch,
    "coverage": coverage_batch,
}


def get_sampler(name: str, source: str = "--sampler") -> Sampler:
    """The sampler called ``name``, or a one-line error listing the choices."""
    return choose(SAMPLERS, name, source, "sampler")
