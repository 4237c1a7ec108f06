"""The covering condition of a sweep's stop: every cell of strength ``t`` over some factors
holds a measured setting, and a greedy step that proposes settings in the cells that do not.

A cell is one combination of levels of ``t`` factors that some setting of the space has
(constraints can exclude a combination; it is then no cell). A sample covers the cells of
strength ``t`` when, for every ``t`` of the chosen factors, every such combination is
measured at least once: a strength-``t`` covering array over those factors, restricted to
the space's settings (covering arrays and combinatorial interaction testing: Cohen, Dalal,
Fredman & Patton, "The AETG System", IEEE TSE 23(7), 1997). Until it holds, an ANOVA fitted
on the sample estimates the terms of order ``t`` among those factors from no data in some
cell: R^2 on folds of the same sample cannot see what it never holds.

The step is AETG's greedy choice over a finite candidate set (here the unmeasured settings
of the space, rather than rows built level by level): each pick is the setting that covers
the most cells still uncovered, ties broken at random from the seed, until no cell is left
or the batch is full. Cohen et al. (1997) show that such a greedy pick covers at least the
average share of the uncovered cells, so the picks needed grow with the logarithm of the
number of cells.

Which cells count: with ``expect`` > 0 only those a uniform random sample of the measured
size would expect at least ``expect`` settings in (a cell of m of N settings, at n
measured: m n / N >= expect). Every 3-way cell of a 3-parameter space is a setting, and
covering them all is measuring everything; the cells a sample of that size can be asked to
hold grow with it (bench/RESULTS.md, "Sweeps", part H).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from washout.sweep.space import Space


def cell_ids(space: Space, strength: int, factors: tuple[int, ...]) -> list[np.ndarray]:
    """Per ``strength``-subset of ``factors``, each setting's cell as one integer (its levels
    in mixed radix)."""
    ids = []
    for subset in combinations(factors, strength):
        cell = np.zeros(len(space), dtype=np.int64)
        for f in subset:
            cell = cell * space.n_levels[f] + space.codes[:, f]
        ids.append(cell)
    return ids


def _uncovered_masks(
    ids: list[np.ndarray], measured: np.ndarray, expect: float, size: int | None = None
) -> list[np.ndarray]:
    """Per subset, a mask over the settings: its cell has no measured setting, and a uniform
    random sample of ``size`` settings (default: as many as are measured) would expect at
    least ``expect`` in it."""
    least = expect * len(ids[0]) / max(size or len(measured), 1)  # the cell size expecting that
    masks = []
    for cell in ids:
        members = np.bincount(cell)
        seen = np.zeros(len(members), dtype=bool)
        seen[cell[measured]] = True
        masks.append(~seen[cell] & (members[cell] >= least))
    return masks


def uncovered_cells(
    space: Space, measured: np.ndarray, strength: int, factors: tuple[int, ...], expect: float = 0
) -> int:
    """How many cells of ``strength`` over ``factors`` hold no measured setting, counting
    only those where a uniform random sample of as many settings would expect at least
    ``expect`` (0: every cell); 0 when fewer than ``strength`` factors are given."""
    if strength < 1 or len(factors) < strength:
        return 0
    ids = cell_ids(space, strength, factors)
    masks = _uncovered_masks(ids, np.asarray(measured, dtype=int), expect)
    return sum(len(np.unique(cell[mask])) for cell, mask in zip(ids, masks))


def covering_picks(
    space: Space,
    measured: np.ndarray,
    strength: int,
    factors: tuple[int, ...],
    k: int,
    seed: int,
    batch: int,
    expect: float = 0,
    size: int | None = None,
) -> np.ndarray:
    """At most ``k`` unmeasured settings, greedily, each covering the most cells of
    ``strength`` over ``factors`` (those :func:`uncovered_cells` counts at a sample of
    ``size``, by default as many as are measured) left uncovered by the measured and already
    picked ones; none once every such cell is covered. The loop passes the size the batch
    brings the sample to, so the next stop finds the cells it will count covered, not only
    those the last one counted."""
    if strength < 1 or len(factors) < strength:
        return np.empty(0, dtype=int)
    ids = cell_ids(space, strength, factors)
    masks = _uncovered_masks(ids, np.asarray(measured, dtype=int), expect, size)
    tie = np.random.default_rng([seed, batch, strength]).random(len(space)) * 1e-6
    free = np.ones(len(space), dtype=bool)
    free[measured] = False
    chosen: list[int] = []
    while len(chosen) < k:
        gain = np.sum(masks, axis=0, dtype=float)
        gain = np.where(free & (gain > 0), gain + tie, -np.inf)
        i = int(np.argmax(gain))
        if not np.isfinite(gain[i]):
            break
        chosen.append(i)
        free[i] = False
        for cell, mask in zip(ids, masks):
            mask &= cell != cell[i]
    return np.asarray(chosen, dtype=int)
