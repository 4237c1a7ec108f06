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
from math import comb, pi, sqrt
from typing import TYPE_CHECKING

from washout.errors import WashoutError

if TYPE_CHECKING:
    import numpy as np


def check_confidence(confidence: float) -> float:
    """The confidence as a float in (0, 1), or a one-line error naming the value."""
    if not (isinstance(confidence, (int, float)) and 0.0 < float(confidence) < 1.0):
        raise WashoutError(f"ci-confidence = {confidence!r}: expected a number between 0 and 1")
    return float(confidence)


# Coverage is summed in floats (relative error ~1e-15); comparisons allow this much slack.
_SLACK = 1e-12
# Below this n the central binomial probability is computed exactly in integers.
_EXACT_CENTRE = 4096


def central_probability(n: int) -> float:
    """P(B = floor(n/2)) for B ~ Binomial(n, 1/2).

    Exactly (C(n, m) / 2^n in integers, correctly rounded) for small n; above, the
    asymptotic expansion C(2m, m) / 4^m = (pi m)^(-1/2) (1 - 1/(8m) + 1/(128 m^2) + 5/(1024 m^3)
    - 21/(32768 m^4) + O(m^-5)) (Graham, Knuth & Patashnik, Concrete Mathematics, 2nd ed.,
    exercise 9.60), whose omitted terms are below 1e-16 from m = 2048; for odd n = 2m + 1,
    P(B = m) = C(2m, m) / 4^m * (2m + 1) / (2m + 2).
    """
    m = n // 2
    if n <= _EXACT_CENTRE:
        return comb(n, m) / 2**n
    x = 1.0 / m
    series = 1.0 + x * (-1 / 8 + x * (1 / 128 + x * (5 / 1024 - x * 21 / 32768)))
    even = series / sqrt(pi * m)
    return even if n == 2 * m else even * (2 * m + 1) / (2 * m + 2)


@lru_cache(maxsize=4096)
def median_ci_rank(n: int, confidence: float = 0.95) -> tuple[int, float] | None:
    """``(j, achieved)`` for a sample of size n: the CI is [x(j), x(n-j+1)] (1-based).

    None when no j >= 1 reaches the confidence (the sample is too small). The coverage
    P(j <= B <= n-j) is summed from the centre outwards, C(n, j-1) = C(n, j) j / (n-j+1),
    so the narrowest interval is found in about z sqrt(n) steps, whatever n is.
    """
    level = check_confidence(confidence) * (1.0 - _SLACK)
    if n < 1:
        return None
    j = n // 2
    term = central_probability(n)  # P(B = j)
    covered = term if n == 2 * j else 2 * term  # P(j <= B <= n - j)
    while j >= 1:
        if covered >= level:
            return j, min(covered, 1.0)
        term *= j / (n - j + 1)  # P(B = j - 1)
        covered += 2 * term
        j -= 1
    return None


def median_ci(
    values: np.ndarray | list[float], confidence: float = 0.95, *, presorted: bool = False
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
