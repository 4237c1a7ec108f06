"""Resampling p-values: exact over every permutation when there are few, else sequential
Monte Carlo, so a small sample never gets a p-value from a large-sample approximation.

- Exact: the share of all n! orderings of the values whose statistic is at least the
  observed one (the permutation distribution itself; Fisher 1935, "The Design of
  Experiments", sec. 21), as ``scipy.stats.permutation_test`` computes it with
  ``n_resamples=np.inf``.
- Monte Carlo, sequential (Besag & Clifford 1991, "Sequential Monte Carlo p-values",
  Biometrika 78(2), 301-304): draw resamples until ``hits`` of them are at least as extreme
  as the observed statistic, at draw l: p = hits / l; when ``max_draws`` pass with k < hits
  such draws, p = (k + 1) / (max_draws + 1) (Phipson & Smyth 2010, "Permutation p-values
  should never be zero", Stat. Appl. Genet. Mol. Biol. 9(1)). Both are valid p-values:
  P(p <= u) <= u under the null. A comparison far from significance stops after a few
  dozen draws; one near its level draws up to ``max_draws``.

Which draws are "at least as extreme" allows a relative tolerance of 1e-12, so that ties
of the statistic (which are common with ranks) are not split by rounding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

EXACT_UP_TO = 8
"""Samples of at most this many values get the exact permutation p (8! = 40,320 orders)."""
HITS = 10
"""Exceedances after which the sequential Monte Carlo stops (Besag & Clifford's h)."""
FIRST_CHUNK = 100
"""Resamples drawn first; each later batch is four times larger, up to ``CHUNK``."""
CHUNK = 4000
RESOLUTION = 10
"""Draws per unit of 1 / level: with level alpha / m, up to RESOLUTION m / alpha draws, so a
p-value at half the level is found significant with probability 0.93 (its draws at least
as extreme are about Poisson with mean 5, and at most 8 of them keep (k + 1) / (draws + 1)
below the level)."""
MAX_DRAWS = 200_000


def max_draws_for(level: float) -> int:
    """The most resamples a comparison tested at ``level`` draws (``RESOLUTION`` / level,
    at least 999, at most ``MAX_DRAWS``)."""
    return int(min(max(math.ceil(RESOLUTION / level), 999), MAX_DRAWS))


def at_least(draws: np.ndarray, observed: float) -> np.ndarray:
    """Which draws are at least ``observed``, with the module's relative tolerance (none for
    an infinite one: a statistic at infinity is matched only by infinity)."""
    tolerance = 1e-12 * abs(observed) if math.isfinite(observed) else 0.0
    return draws >= observed - tolerance


def sequential_p(
    draw: Callable[[int], np.ndarray], observed: float, max_draws: int, hits: int = HITS
) -> float:
    """Besag & Clifford's sequential Monte Carlo p-value of ``observed``: ``draw(k)`` returns
    the statistic of k fresh resamples (larger is more extreme)."""
    import numpy as np

    seen = found = 0
    batch = FIRST_CHUNK
    while seen < max_draws:
        extreme = at_least(draw(min(batch, max_draws - seen)), observed)
        batch = min(4 * batch, CHUNK)
        total = np.cumsum(extreme) + found
        if total[-1] >= hits:
            return hits / (seen + int(np.argmax(total >= hits)) + 1)
        seen, found = seen + len(extreme), int(total[-1])
    return (found + 1) / (max_draws + 1)


@functools.lru_cache(maxsize=EXACT_UP_TO + 1)
def orderings(n: int) -> np.ndarray:
    """Every ordering of range(n), one per row (n! rows), made once per n."""
    import itertools

    import numpy as np

    return np.array(list(itertools.permutations(range(n))), dtype=np.intp)


def permutation_p(
    statistic: Callable[[np.ndarray], np.ndarray],
    values: np.ndarray,
    rng: np.random.Generator,
    max_draws: int,
) -> float:
    """The permutation p-value of ``statistic`` (rows of a (k, n) array of orderings of
    ``values`` -> k statistics, larger is more extreme): exact over all n! orderings up to
    ``EXACT_UP_TO`` values, else sequential Monte Carlo over random orderings."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    observed = float(statistic(v[None, :])[0])
    if len(v) <= EXACT_UP_TO:
        return float(np.mean(at_least(statistic(v[orderings(len(v))]), observed)))

    def draw(k: int) -> np.ndarray:
        return statistic(rng.permuted(np.broadcast_to(v, (k, len(v))), axis=1))

    return sequential_p(draw, observed, max_draws)
