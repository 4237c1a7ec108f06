"""Shapiro-Wilk W and p for many samples of one size at once, in numpy.

The algorithm is Royston's AS R94 (P. Royston, "Remark AS R94: A remark on Algorithm AS 181:
the W-test for normality", Applied Statistics 44(4), 1995, 547-551), the one scipy.stats.shapiro
runs, with the auxiliary algorithms it specifies: normal quantiles by AS 111 (J. D. Beasley
and S. G. Springer, Applied Statistics 26(1), 1977, 118-121), the normal upper tail by AS 66
(I. D. Hill, Applied Statistics 22(3), 1973, 424-427) and polynomials by AS 181.2. The same
approximations, not exact quantiles, so that results agree with scipy to rounding.

Why not scipy.stats.shapiro: it takes one sample per call, and importing scipy.stats is a
large part of analysing a paper-scale study (bench/RESULTS.md, "Analysis at paper scale").
Here all samples of one size are one matrix: W is a squared correlation, a matrix-vector
product.

Steps (AS R94): coefficients m_i = Phi^-1((i - 3/8) / (n + 1/4)) for the lower half; the
two outermost normalised coefficients a_1, a_2 from Royston's polynomials in 1/sqrt(n), the
rest -m_i / sqrt((sum m^2 - 2 m_1^2 - 2 m_2^2) / (1 - 2 a_1^2 - 2 a_2^2)) (a_2 and its terms
only for n > 5; a_1 = sqrt(1/2) for n = 3); W = 1 - w1 with w1 = (sqrt(SSa SSx) - Sax)
(sqrt(SSa SSx) + Sax) / (SSa SSx), the squared correlation of the data (scaled by its range)
with the antisymmetric coefficients, computed so W near 1 keeps its digits. p: n = 3 exact,
1 - (6/pi) acos(sqrt(W)) (W below 3/4 clamped to 3/4, p = 0, as scipy does); 4 <= n <= 11,
y = -log(gamma - log(w1)) with gamma = -2.273 + 0.459 n, normal with mean and log-sd
polynomials in n (p = 1e-19 when log(w1) >= gamma); n >= 12, y = log(w1), normal with mean and
log-sd polynomials in log n.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Royston (1995), AS R94: polynomial coefficients, lowest order first.
_C1 = (0.0, 0.221157, -0.147981, -2.071190, 4.434685, -2.706056)
_C2 = (0.0, 0.042981, -0.293762, -1.752461, 5.682633, -3.582633)
_C3 = (0.5440, -0.39978, 0.025054, -0.0006714)
_C4 = (1.3822, -0.77857, 0.062767, -0.0020322)
_C5 = (-1.5861, -0.31082, -0.083751, 0.0038915)
_C6 = (-0.4803, -0.082676, 0.0030302)
_G = (-2.273, 0.459)
_SMALL = 1e-19  # AS R94: the range below which data count as constant; p for W out of range


def _poly(coefficients: tuple[float, ...], x: float | np.ndarray) -> float | np.ndarray:
    """sum_k c_k x^k, Horner's rule (AS 181.2)."""
    result = coefficients[-1] * x
    for c in reversed(coefficients[1:-1]):
        result = (result + c) * x
    return coefficients[0] + result


def normal_quantile_as111(p: np.ndarray) -> np.ndarray:
    """Phi^-1(p) by AS 111 (Beasley & Springer 1977): a rational function of q = p - 1/2 for
    |q| <= 0.42, else of r = sqrt(-log(min(p, 1 - p))). Against the exact quantile: absolute
    error below 4e-9 for 0.01 <= p <= 0.99, below 6e-7 down to p = 1.25e-4 (the smallest
    AS R94 asks for, n = 5000)."""
    import numpy as np

    a = (2.50662823884, -18.61500062529, 41.39119773534, -25.44106049637)
    b = (1.0, -8.47351093090, 23.08336743743, -21.06224101826, 3.13082909833)
    c = (-2.78718931138, -2.29796479134, 4.85014127135, 2.32121276858)
    d = (1.0, 3.54388924762, 1.63706781897)
    q = p - 0.5
    r = q * q
    central = q * _poly(a, r) / _poly(b, r)
    tail_r = np.sqrt(-np.log(np.where(q > 0, 1.0 - p, p)))
    tail = np.copysign(_poly(c, tail_r) / _poly(d, tail_r), q)
    return np.where(np.abs(q) <= 0.42, central, tail)


def normal_upper_tail_as66(z: np.ndarray) -> np.ndarray:
    """P(Z > z) by AS 66 (Hill 1973, with the 2001 upper cut-off 38): a continued fraction
    below |z| = 1.28, another above; 0 past the cut-offs; absolute error below 5e-12."""
    import numpy as np

    x = np.abs(z)
    y = 0.5 * x * x
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        near = 0.5 - x * (
            0.398942280444
            - 0.399903438504
            * y
            / (
                y
                + 5.75885480458
                - 29.8213557808 / (y + 2.62433121679 + 48.6959930692 / (y + 5.92885724438))
            )
        )
        far = (
            0.398942280385
            * np.exp(-y)
            / (
                x
                - 3.8052e-8
                + 1.00000615302
                / (
                    x
                    + 3.98064794e-4
                    + 1.98615381364
                    / (
                        x
                        - 0.151679116635
                        + 5.29330324926
                        / (
                            x
                            + 4.8385912808
                            - 15.1508972451
                            / (x + 0.742380924027 + 30.789933034 / (x + 3.99019417011))
                        )
                    )
                )
            )
        )
    tail = np.where(x <= 1.28, near, far)  # P(Z > |z|)
    upper = np.where(z > 0, np.where(x <= 38.0, tail, 0.0), np.where(x <= 7.0, 1.0 - tail, 1.0))
    return np.where(np.isnan(z), 1.0, upper)  # AS 66 as scipy calls it: NaN goes to 1


@lru_cache(maxsize=256)
def coefficients(n: int) -> np.ndarray:
    """The n antisymmetric AS R94 coefficients, lowest order statistic first (n >= 3)."""
    import numpy as np

    half = n // 2
    if n == 3:
        half_a = np.array([math.sqrt(0.5)])
    else:
        m = normal_quantile_as111((np.arange(1, half + 1) - 0.375) / (n + 0.25))
        summ2 = 2.0 * float(np.sum(m * m))
        ssumm2 = math.sqrt(summ2)
        rsn = 1.0 / math.sqrt(n)
        a1 = _poly(_C1, rsn) - m[0] / ssumm2
        half_a = np.empty(half)
        if n > 5:
            a2 = -m[1] / ssumm2 + _poly(_C2, rsn)
            fac = math.sqrt((summ2 - 2 * m[0] ** 2 - 2 * m[1] ** 2) / (1 - 2 * a1**2 - 2 * a2**2))
            half_a[:2] = a1, a2
            half_a[2:] = -m[2:] / fac
        else:
            fac = math.sqrt((summ2 - 2 * m[0] ** 2) / (1 - 2 * a1**2))
            half_a[0] = a1
            half_a[1:] = -m[1:] / fac
    full = np.zeros(n)
    full[:half] = -half_a
    full[n - half :] = half_a[::-1]
    full.setflags(write=False)
    return full


def shapiro_sorted(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """W and p of each row of ``block`` (k samples x n values, each row sorted ascending,
    n >= 3); rows whose range is below 1e-19 (constant data) give W = p = 1, as scipy does."""
    import numpy as np

    k, n = block.shape
    a = coefficients(n)
    x = block - block[:, n // 2 : n // 2 + 1]  # shift by a middle value first, as scipy does
    spread = x[:, -1] - x[:, 0]
    flat = spread < _SMALL
    with np.errstate(divide="ignore", invalid="ignore"):
        x = x / np.where(flat, 1.0, spread)[:, None]
        asa = a - a.sum() / n
        xsx = x - x.mean(axis=1, keepdims=True)
        ssa = float(asa @ asa)
        ssx = np.einsum("ij,ij->i", xsx, xsx)
        sax = xsx @ asa
        ssassx = np.sqrt(ssa * ssx)
        w1 = (ssassx - sax) * (ssassx + sax) / (ssa * ssx)
        w = 1.0 - w1
        if n == 3:
            p = np.where(w < 0.75, 0.0, 1.0 - (6.0 / math.pi) * np.arccos(np.sqrt(w)))
            w = np.maximum(w, 0.75)
        else:
            y = np.log(w1)
            if n <= 11:
                gamma = _poly(_G, float(n))
                beyond = y >= gamma
                y = -np.log(gamma - y)
                m, s = _poly(_C3, float(n)), math.exp(_poly(_C4, float(n)))
            else:
                beyond = np.zeros(k, dtype=bool)
                m, s = _poly(_C5, math.log(n)), math.exp(_poly(_C6, math.log(n)))
            p = np.where(beyond, _SMALL, normal_upper_tail_as66((y - m) / s))
    return np.where(flat, 1.0, w), np.where(flat, 1.0, p)
