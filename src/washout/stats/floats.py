"""Values near the float limit (a metric of 1e300): their means, spreads and squares
overflow, and every statistic made of them is reported as undefined (NaN, null in JSON), not
with numpy's RuntimeWarnings on stderr. Each public entry point into the statistics
(analysis, planning, OrderSage's table) runs under :func:`undefined_on_overflow`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def undefined_on_overflow(func: Callable[P, T]) -> Callable[P, T]:
    """``func`` with numpy's floating-point errors (overflow, division by zero, invalid
    operations) silent: their results, inf and NaN, are what the statistics report as
    undefined."""

    @functools.wraps(func)
    def quiet(*args: P.args, **kwargs: P.kwargs) -> T:
        import numpy as np

        with np.errstate(all="ignore"):
            return func(*args, **kwargs)

    return quiet
