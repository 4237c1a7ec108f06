"""Kruskal-Wallis fixed vs random for many two-sample comparisons at once.

The comparisons' samples (:class:`Samples`, built from the long format by
:func:`washout.stats.order.collect_samples`) and the tie-corrected Kruskal-Wallis H and p
of each (Kruskal & Wallis 1952, "Use of ranks in one-criterion variance analysis", JASA
47(260), eqs. 1.1 and 1.4, as ``scipy.stats.kruskal``), vectorised over the comparisons.
The order analysis (:mod:`washout.stats.order`), planning (:mod:`washout.stats.power`) and
the OrderSage-compatible statistics all test with this one computation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Samples:
    """Successful fixed/random trials of every comparison, sorted, in flat arrays.

    Comparison g's order-o sample (o = 0 fixed, 1 random) is
    ``values[starts[g, o] : starts[g, o] + counts[g, o]]``, sorted ascending; the fixed block
    directly precedes the random one. ``excluded[g, o]`` counts its trials left out:
    unsuccessful ones, and the ``missing[g, o]`` successful ones without a value.
    """

    keys: list[tuple[str, str, str | None]]
    values: np.ndarray
    # Indices into ``values`` that visit each comparison's fixed and random values merged
    # in ascending order, comparison by comparison (what the rank tests need).
    by_value: np.ndarray
    starts: np.ndarray
    counts: np.ndarray
    excluded: np.ndarray
    missing: np.ndarray

    def sample(self, g: int, o: int) -> np.ndarray:
        """Comparison g's sorted sample for order o (0 fixed, 1 random)."""
        s = int(self.starts[g, o])
        return self.values[s : s + int(self.counts[g, o])]


def chi2_sf_1(x: np.ndarray) -> np.ndarray:
    """P(chi^2_1 > x) = erfc(sqrt(x / 2)) (chi^2 with one degree of freedom is the square of a
    standard normal), elementwise; 1 for x <= 0, NaN for NaN. math.erfc is accurate to a few
    ulp and spares the analysis the import of scipy.stats."""
    import numpy as np

    root = np.sqrt(np.maximum(np.asarray(x, dtype=float), 0.0) / 2.0)
    return np.frompyfunc(math.erfc, 1, 1)(root).astype(float)


def kruskal_two(samples: Samples) -> tuple[np.ndarray, np.ndarray]:
    """Tie-corrected Kruskal-Wallis H and p (fixed vs random) for every comparison at once
    (:func:`kruskal_merged`)."""
    import numpy as np

    idx = samples.by_value
    g = np.repeat(np.arange(len(samples.keys), dtype=np.int32), samples.counts.sum(axis=1))
    # Each comparison's random block follows its fixed block in ``values``.
    is_random = np.repeat(
        np.tile(np.array([False, True]), len(samples.keys)), samples.counts.ravel()
    )
    return kruskal_merged(samples.values[idx], g, is_random[idx], samples.counts)


def kruskal_merged(
    values: np.ndarray, group: np.ndarray, second: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Tie-corrected Kruskal-Wallis H and p of G two-sample comparisons at once.

    ``values`` holds the comparisons one after another, each one's two samples merged in
    ascending order; ``group`` is each value's comparison (0..G-1, non-decreasing),
    ``second`` whether it belongs to the second sample, ``counts`` the (G, 2) sample sizes.

    H = [12 / (N (N+1)) * sum_i R_i^2 / n_i - 3 (N+1)] / [1 - sum_t (t^3 - t) / (N^3 - N)],
    R_i the rank sum of sample i with mid-ranks for ties, t the tie-group sizes; p = P(chi^2_1 > H)
    (Kruskal & Wallis 1952, eqs. 1.1 and 1.4, as scipy.stats.kruskal). NaN where a sample is
    empty or all values are equal (0/0, even where rounding makes scipy say inf).
    """
    import numpy as np

    n_groups = counts.shape[0]
    per_group = counts.sum(axis=1)
    total = values.size
    h = np.full(n_groups, np.nan)
    p = np.full(n_groups, np.nan)
    if total == 0:
        return h, p
    # Runs of equal values within a comparison (tie groups), each with its mid-rank and how
    # many of its values are in the second sample: the rank sums are sums over runs, exact
    # in floats (half-integers), without a rank per value.
    new_run = np.ones(total, dtype=bool)
    new_run[1:] = (values[1:] != values[:-1]) | (group[1:] != group[:-1])
    run_starts = np.flatnonzero(new_run)
    run_group = group[run_starts]
    run_len = np.diff(np.append(run_starts, total)).astype(float)
    in_second = np.add.reduceat(np.asarray(second, dtype=np.int8), run_starts, dtype=np.int64)
    group_start = np.cumsum(per_group) - per_group
    mid_rank = run_starts - group_start[run_group] + (run_len + 1.0) / 2.0
    rank_second = np.bincount(run_group, weights=mid_rank * in_second, minlength=n_groups)
    rank_first = np.bincount(
        run_group, weights=mid_rank * (run_len - in_second), minlength=n_groups
    )
    ties = np.bincount(run_group, weights=run_len**3 - run_len, minlength=n_groups)
    n_1 = counts[:, 0].astype(float)
    n_2 = counts[:, 1].astype(float)
    n = per_group.astype(float)
    both = (counts[:, 0] > 0) & (counts[:, 1] > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = 12.0 / (n * (n + 1)) * (rank_first**2 / n_1 + rank_second**2 / n_2) - 3 * (n + 1)
        correction = 1.0 - ties / (n**3 - n)
        h_all = raw / correction
    single_run = np.bincount(run_group, minlength=n_groups) == 1
    defined = both & ~single_run & (correction > 0)
    h[defined] = h_all[defined]
    p[defined] = chi2_sf_1(h[defined])
    return h, p
