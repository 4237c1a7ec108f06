"""The long format: one row per trial and metric, the common currency of washout.

``washout export`` writes it, ``washout analyze`` and ``washout report`` read it (from a
store, a CSV, or an OrderSage file converted to it). Columns, exactly (DESIGN.md):

    run, order, position, test, metric, value, status, worker, started, ended

``run`` and ``position`` count from 0; ``order`` is fixed/random/reverse/williams; ``status``
is ok/failed/timeout/interrupted; ``worker`` is ``local`` for the local machine; ``started``
and ``ended`` are UTC ISO-8601 strings (or NaN where unknown). A trial that produced no
value for a metric (failed, timed out) has ``value`` NaN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

COLUMNS: tuple[str, ...] = (
    "run", "order", "position", "test", "metric", "value", "status", "worker", "started", "ended",
)
ORDER_KINDS: tuple[str, ...] = ("fixed", "random", "reverse", "williams")
STATUSES: tuple[str, ...] = ("ok", "failed", "timeout", "interrupted")


def empty_frame() -> "pd.DataFrame":
    """A long-format frame with no rows and the right columns."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
