"""Drift: does a test's metric move with where and when it ran, apart from order effects?

Per test x metric (x worker when asked), the Spearman rank correlation of the metric with
three clocks (Spearman 1904, "The proof and measurement of association between two
things", Am. J. Psychol. 15(1)), and its p-value as ``scipy.stats.spearmanr`` computes it
(the t-distribution approximation with n - 2 degrees of freedom):

- ``position``: the trial's position in its run (warm-up, accumulating state);
- ``time_since_reset``: seconds from the earliest ``started`` of the trial's run on its
  worker (the first trial after the reset) to the trial's ``started``; the reset itself has
  no timestamp in the long format, so the run's first trial stands for it;
- ``run``: the run index, across runs (ageing, thermal state, a filling disk).

Only random-order runs are used, and in them only the trials at positions >= 1:
- in fixed (and reverse, Williams) runs a test's position is tied to its order kind, so a
  plain fixed-vs-random level shift would pass for drift with position, and with a blocked
  design for drift over runs;
- the first trial after the reset is its own effect (washout.stats.carryover, predecessor
  ``(reset)``); left in, it would pass for a trend over positions and time since the reset.
In a random run the test at each position is drawn at random, so a trend among these trials
is not made by which test ran before (carryover) either.

A comparison whose clock does not vary or with fewer than 3 trials is not made (NaN) and is
left out of the family; a metric that does not vary has no correlation (rho NaN) and p = 1,
and counts. Significance is family-wise over every (test, metric, clock[, worker]) with a
p-value, by Bonferroni or Holm (``washout.stats.family``).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import pandas as pd

CLOCKS: tuple[str, ...] = ("position", "time_since_reset", "run")
RANDOM_ORDER = "random"


@dataclass(frozen=True)
class DriftRow:
    """The correlation of one test's metric with one clock."""

    test: str
    metric: str
    worker: str | None
    against: str
    n: int
    spearman: float
    p: float
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DriftResult:
    """Every correlation, strongest |rho| first, with the family it was corrected over."""

    rows: list[DriftRow]
    alpha: float
    correction: str
    family_size: int
    alpha_per_test: float | None
    excluded_trials: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"] = [r.to_dict() for r in self.rows]
        return d

    def significant(self) -> list[DriftRow]:
        return [r for r in self.rows if r.significant]


def with_clocks(df: "pd.DataFrame", ok: "pd.DataFrame") -> "pd.DataFrame":
    """``ok`` with a ``time_since_reset`` column in seconds (NaN where ``started`` is absent
    or unreadable; the run's earliest start is taken over all its recorded trials), and
    numeric ``position`` and ``run`` (NaN where unknown)."""
    import pandas as pd

    everything = df.copy()
    if "worker" not in everything.columns:
        everything["worker"] = "local"
    if "started" not in everything.columns:
        everything["started"] = None
    everything["_t"] = pd.to_datetime(everything["started"], utc=True, errors="coerce")
    first = everything.groupby(["worker", "run"])["_t"].min().rename("_first").reset_index()
    out = ok.copy()
    if "started" not in out.columns:
        out["started"] = None
    out["_t"] = pd.to_datetime(out["started"], utc=True, errors="coerce")
    out = out.merge(first, on=["worker", "run"], how="left")
    out["time_since_reset"] = (out["_t"] - out["_first"]).dt.total_seconds()
    for clock in ("position", "run"):  # numbers, NaN where unknown
        out[clock] = pd.to_numeric(out[clock], errors="coerce").astype(float)
    return out.drop(columns=["_t", "_first"])


def _spearman(x: Any, y: Any) -> tuple[int, float, float]:
    """(n, rho, p) over the finite pairs. No comparison (NaN, NaN) with fewer than 3 pairs or
    a constant clock; a constant metric has no correlation (rho NaN) and p = 1."""
    import numpy as np
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = int(len(x))
    if n < 3 or np.ptp(x) == 0:
        return n, float("nan"), float("nan")
    if np.ptp(y) == 0:
        return n, float("nan"), 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = spearmanr(x, y)
    return n, float(res.statistic), float(res.pvalue)


def drift(
    df: "pd.DataFrame",
    *,
    alpha: float = 0.05,
    correction: str = "bonferroni",
    by_worker: bool = False,
    metric: str | None = None,
) -> DriftResult:
    """Spearman correlations of every test's metric with position, time since reset and run,
    over its random-order trials after the first position (see the module doc).

    ``by_worker``: one row set per worker when the data has several (each worker has its own
    clocks); otherwise pooled, ``worker`` None. ``metric``: only that metric.
    """
    import numpy as np

    level, method = check_alpha(alpha), check_method(correction)
    ok, excluded = usable_trials(df, "drift analysis")
    if metric is not None:
        ok = ok[ok["metric"] == metric]
    ok = with_clocks(df, ok)
    ok = ok[(ok["order"] == RANDOM_ORDER) & (ok["position"] >= 1)]
    split = by_worker and ok["worker"].nunique() > 1
    group_keys = ["worker", "test", "metric"] if split else ["test", "metric"]

    found: list[dict[str, Any]] = []
    for key, group in ok.groupby(group_keys, sort=True):
        worker = str(key[0]) if split else None
        test, met = (key[1], key[2]) if split else (key[0], key[1])
        for clock in CLOCKS:
            n, rho, p = _spearman(group[clock], group["value"])
            found.append(dict(
                test=str(test), metric=str(met), worker=worker, against=clock, n=n,
                spearman=rho, p=p,
            ))
    significant, per_test = adjust([r["p"] for r in found], level, method)
    rows = [DriftRow(**r, significant=s) for r, s in zip(found, significant)]
    rows.sort(key=lambda r: (
        -abs(r.spearman) if np.isfinite(r.spearman) else 0.0,
        r.p if np.isfinite(r.p) else 2.0,
    ))
    return DriftResult(
        rows=rows,
        alpha=level,
        correction=method,
        family_size=int(sum(np.isfinite(r["p"]) for r in found)),
        alpha_per_test=per_test,
        excluded_trials=excluded,
    )


def drift_frame(result: DriftResult) -> "pd.DataFrame":
    """The correlations as a DataFrame, one row per (test, metric, clock[, worker])."""
    import pandas as pd

    columns = list(DriftRow.__dataclass_fields__)
    return pd.DataFrame([r.to_dict() for r in result.rows], columns=columns)
