"""The trials a statistic may use: successful trials with a finite value, and how many were not.

docs/design.md: "successful trials only; the count of excluded trials is reported, never
silently dropped". Every analysis of why order matters (carryover, drift, claims) and
planning starts here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from washout.data.health import HEALTH_METRICS
from washout.data.longformat import RESOURCE_METRICS, is_in
from washout.errors import WashoutError

if TYPE_CHECKING:
    import pandas as pd

BASE_COLUMNS: tuple[str, ...] = ("run", "order", "position", "test", "metric", "value", "status")


def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """A one-line error naming the missing long-format columns an analysis needs."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise WashoutError(
            f"long format: column(s) {', '.join(missing)} missing: {what} needs them "
            f"(columns present: {', '.join(map(str, df.columns))})"
        )


def usable_trials(df: pd.DataFrame, what: str) -> tuple[pd.DataFrame, int]:
    """``(ok, excluded)``: rows with status ``ok`` and a finite numeric value, and the count of
    the other rows (failed, timed-out, interrupted trials and missing values).

    A missing ``worker`` column means one machine, ``local``. ``value`` becomes float.
    """
    import numpy as np
    import pandas as pd

    require_columns(df, BASE_COLUMNS, what)
    frame = df.copy()
    if "worker" not in frame.columns:
        frame["worker"] = "local"
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    keep = (frame["status"] == "ok") & np.isfinite(frame["value"].to_numpy())
    return frame.loc[keep].reset_index(drop=True), int((~keep).sum())


AROUND_TRIALS: tuple[str, ...] = (*RESOURCE_METRICS, *HEALTH_METRICS)
"""The metrics washout measures of every trial, whatever its test: out of the analyses
unless named."""


def without_resource_metrics(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """``df`` without the rows of the resource and the health metrics (:data:`AROUND_TRIALS`)
    but the kind ``metric`` names, if it names one: the default analyses cover the spec's own
    metrics, so measuring CPU time, RSS and each trial's health does not change their
    family-wise correction."""
    if "metric" not in df.columns:
        return df
    dropped = [m for kind in (RESOURCE_METRICS, HEALTH_METRICS) if metric not in kind for m in kind]
    keep = ~is_in(df["metric"], dropped)
    return df if bool(keep.all()) else df.loc[keep].reset_index(drop=True)


def check_metric(trials: pd.DataFrame, metric: str, where: str, store: bool = False) -> None:
    """A one-line error where ``metric`` (``--metric``) is none of the source's (``where``):
    the trials' own metrics, and with ``store`` its resource and health measures (a store
    gives them only to the analyses that take them). Without it a misspelt name restricted
    carryover, drift and claims to nothing, left no comparison, and OrderSage's table took
    it for no restriction, without a word."""
    from washout.data.longformat import present

    names = sorted({str(m) for m in present(trials["metric"])} if "metric" in trials else set())
    if metric not in names and not (store and metric in AROUND_TRIALS):
        measures = ", user, system, max_rss, health.*" if store else ""
        raise WashoutError(
            f"{where}: metric = {metric!r}: no such metric here "
            f"(metrics: {', '.join(names) or 'none'}{measures})"
        )
