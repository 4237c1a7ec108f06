"""Distribution-free confidence interval for a median, with the confidence it achieves.

Le Boudec, *Performance Evaluation of Computer and Communication Systems* (EPFL Press 2010),
Theorem 2.1: for an i.i.d. sample with a continuous distribution and order statistics
x(1) <= ... <= x(n), the number B of observations below the true median is
Binomial(n, 1/2), so P(x(j) <= median <= x(n-j+1)) = P(j <= B <= n-j)
= 1 - 2 P(B <= j-1). The interval at level gamma uses the largest j >= 1 with
P(j <= B <= n-j) >= gamma (the narrowest such symmetric interval); that probability is
the *achieved* confidence, reported because the binomial is discrete. When even j = 1
falls short (n < 6 at 95%), there is no interval.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from washout.errors import WashoutError

if TYPE_CHECKING:
    import numpy as np

# Achieved-confidence comparisons allow this relative slack for the binomial cdf's rounding.
_SLACK = 1e-12


def check_confidence(confidence: float) -> float:
    """The confidence as a float in (0, 1), or a one-line error naming the value."""
    if not (isinstance(confidence, (int, float)) and 0.0 < float(confidence) < 1.0):
        raise WashoutError(f"ci-confidence = {confidence!r}: expected a number between 0 and 1")
    return float(confidence)


@lru_cache(maxsize=4096)
def median_ci_rank(n: int, confidence: float = 0.95) -> tuple[int, float] | None:
    """``(j, achieved)`` for a sample of size n: the CI is [x(j), x(n-j+1)] (1-based).

    None when no j >= 1 reaches the confidence (the sample is too small).
    """
    import numpy as np
    from scipy.stats import binom

    level = check_confidence(confidence)
    if n < 1:
        return None
    ks = np.arange(0, n // 2)  # k = j - 1 for j = 1 .. n // 2 (j <= n - j)
    achieved = 1.0 - 2.0 * binom.cdf(ks, n, 0.5)
    ok = np.nonzero(achieved >= level * (1.0 - _SLACK))[0]
    if ok.size == 0:
        return None
    k = int(ok[-1])
    return k + 1, float(achieved[k])


def median_ci(
    values: "np.ndarray | list[float]", confidence: float = 0.95, *, presorted: bool = False
) -> tuple[float, float, float] | None:
    """``(lo, hi, achieved confidence)`` of the median of ``values``, or None if n is too small."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if not presorted:
        x = np.sort(x)
    rank = median_ci_rank(int(x.size), float(confidence))
    if rank is None:
        return None
    j, achieved = rank
    return float(x[j - 1]), float(x[x.size - j]), achieved
