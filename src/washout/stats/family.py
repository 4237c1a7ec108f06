"""Family-wise error control: which of m comparisons are significant at level alpha.

Bonferroni: comparison i is significant when p_i < alpha / m (Dunn 1961, "Multiple
comparisons among means", JASA 56(293)). Holm (option): sort p ascending, p_(1) <= ... <=
p_(m); reject H_(1), ..., H_(k) where k is the largest index with p_(i) < alpha / (m - i + 1)
for every i <= k, stopping at the first failure (Holm 1979, "A simple sequentially
rejective multiple test procedure", Scand. J. Statist. 6(2), 65-70). Holm controls the same
family-wise error rate as Bonferroni and rejects at least as many hypotheses.

The family is the comparisons that have a p-value: NaN p-values (a comparison that could
not be made, e.g. an empty sample) are not significant and do not count towards m.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from washout.errors import WashoutError

METHODS: tuple[str, ...] = ("bonferroni", "holm")


def check_method(method: str) -> str:
    """The correction name, lower-cased, or a one-line error naming the bad value."""
    name = method.strip().lower()
    if name not in METHODS:
        raise WashoutError(f"correction = {method!r}: expected one of {', '.join(METHODS)}")
    return name


def check_alpha(alpha: float) -> float:
    """alpha as a float in (0, 1), or a one-line error."""
    if not (isinstance(alpha, (int, float)) and 0.0 < float(alpha) < 1.0):
        raise WashoutError(f"alpha = {alpha!r}: expected a number between 0 and 1")
    return float(alpha)


def adjust(
    pvalues: Sequence[float], alpha: float = 0.05, method: str = "bonferroni"
) -> tuple[list[bool], float | None]:
    """Which p-values are significant under a family-wise correction.

    Returns ``(significant, alpha_per_test)``: one bool per input p-value (in input order)
    and, for Bonferroni, the per-comparison threshold alpha/m (None for Holm, whose
    threshold depends on the rank, and None when the family is empty).
    """
    name = check_method(method)
    level = check_alpha(alpha)
    ps = [float(p) for p in pvalues]
    valid = [i for i, p in enumerate(ps) if not math.isnan(p)]
    m = len(valid)
    significant = [False] * len(ps)
    if m == 0:
        return significant, None
    if name == "bonferroni":
        threshold = level / m
        for i in valid:
            significant[i] = ps[i] < threshold
        return significant, threshold
    for rank, i in enumerate(sorted(valid, key=lambda j: ps[j])):
        if not ps[i] < level / (m - rank):
            break
        significant[i] = True
    return significant, None
