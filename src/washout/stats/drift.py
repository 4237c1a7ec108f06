"""Drift: does a test's metric move with where and when it ran, apart from order effects?

Per test x metric (x worker when asked), the Spearman rank correlation of the metric with
three clocks (Spearman 1904, "The proof and measurement of association between two
things", Am. J. Psychol. 15(1)), and its p-value as ``scipy.stats.spearmanr`` computes it
(the t-distribution approximation with n - 2 degrees of freedom):

- ``position``: the trial's position in its run (warm-up, accumulating state);
- ``time_since_reset``: seconds from the start of the run's first trial (the reset itself
  has no timestamp in the long format) to the trial's start, counted in the *typical*
  durations of the trials before it: the sum, over the earlier positions of its run, of
  each test's median duration (``ended`` - ``started``). The observed offsets would make
  a slow run's later trials look later, so run-to-run speed (load on the machine) would
  pass for drift with time; the typical durations keep what the clock is for, tests of
  different lengths;
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

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.frames import FrameView
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import numpy as np
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
class DriftResult(FrameView):
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

    def to_frame(self) -> pd.DataFrame:
        """One row per correlation (:func:`drift_frame`)."""
        return drift_frame(self)


def with_clocks(df: pd.DataFrame, ok: pd.DataFrame) -> pd.DataFrame:
    """``ok`` with a ``time_since_reset`` column in seconds (see the module doc; NaN where a
    trial of the run before it has no readable ``started`` and ``ended``, or its own position
    is unknown), and numeric ``position`` and ``run`` (NaN where unknown)."""
    import pandas as pd

    slots = df.copy()
    if "worker" not in slots.columns:
        slots["worker"] = "local"
    for column in ("started", "ended"):
        if column not in slots.columns:
            slots[column] = None
    slots["position"] = pd.to_numeric(slots["position"], errors="coerce")
    slots = slots[slots["position"].notna()].drop_duplicates(["worker", "run", "position"])
    took = (
        pd.to_datetime(slots["ended"], utc=True, errors="coerce")
        - pd.to_datetime(slots["started"], utc=True, errors="coerce")
    ).dt.total_seconds()
    typical = took.groupby(slots["test"].astype(str)).median()
    slots = slots.assign(_typical=slots["test"].astype(str).map(typical).astype(float))
    slots = slots.sort_values(["worker", "run", "position"])
    runs = [slots["worker"], slots["run"]]
    unknown = slots["_typical"].isna()
    # the sum over earlier positions; NaN as soon as one of them has no typical duration
    earlier = slots["_typical"].fillna(0.0).groupby(runs, sort=False).cumsum()
    gaps = unknown.astype(int).groupby(runs, sort=False).cumsum() - unknown
    slots["time_since_reset"] = (earlier - slots["_typical"]).where(gaps == 0)
    keys = ["worker", "run", "position"]
    out = ok.assign(position=pd.to_numeric(ok["position"], errors="coerce").astype(float))
    out = out.merge(
        slots[[*keys, "time_since_reset"]].astype({"position": float}), on=keys, how="left"
    )
    out["run"] = pd.to_numeric(out["run"], errors="coerce").astype(float)  # NaN where unknown
    return out


def spearman_by_group(
    group: np.ndarray, groups: int, x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group (numbered 0 .. groups - 1): (n, rho, p) over the finite (x, y) pairs, all
    groups at once: rho is Pearson's correlation of the average ranks, p from Student's t on
    n - 2 degrees of freedom, as ``scipy.stats.spearmanr`` computes them. No comparison (NaN,
    NaN) with fewer than 3 pairs or a constant x; a constant y has no correlation (rho NaN)
    and p = 1."""
    import numpy as np
    import pandas as pd
    from scipy.special import stdtr

    keep = np.isfinite(x) & np.isfinite(y)
    g = group[keep]
    n = np.bincount(g, None, groups)
    spread = []
    for values in (x[keep], y[keep]):
        rank = pd.Series(values).groupby(g).rank().to_numpy()
        spread.append(rank - (np.bincount(g, rank, groups) / np.maximum(n, 1))[g])
    dx, dy = spread
    sxx, syy = np.bincount(g, dx * dx, groups), np.bincount(g, dy * dy, groups)
    sxy = np.bincount(g, dx * dy, groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.clip(sxy / np.sqrt(sxx * syy), -1.0, 1.0)
        t = rho * np.sqrt((n - 2) / ((1.0 + rho) * (1.0 - rho)))
        p = 2.0 * stdtr(np.maximum(n - 2, 1), -np.abs(t))
    compared = (n >= 3) & (sxx > 0)
    rho = np.where(compared & (syy > 0), rho, np.nan)
    p = np.where(compared, np.where(syy > 0, p, 1.0), np.nan)
    return n, rho, p


def drift(
    df: pd.DataFrame,
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

    grouped = ok.groupby(group_keys, sort=True, observed=True)
    group, keys = grouped.ngroup().to_numpy(), grouped.size().index
    value = ok["value"].to_numpy(dtype=float)
    by_clock = {
        clock: spearman_by_group(group, len(keys), ok[clock].to_numpy(dtype=float), value)
        for clock in CLOCKS
    }
    found: list[dict[str, Any]] = []
    for g, key in enumerate(keys):
        worker = str(key[0]) if split else None
        test, met = (key[1], key[2]) if split else (key[0], key[1])
        for clock in CLOCKS:
            n, rho, p = (a[g] for a in by_clock[clock])
            found.append(
                dict(
                    test=str(test),
                    metric=str(met),
                    worker=worker,
                    against=clock,
                    n=int(n),
                    spearman=float(rho),
                    p=float(p),
                )
            )
    significant, per_test = adjust([r["p"] for r in found], level, method)
    rows = [DriftRow(**r, significant=s) for r, s in zip(found, significant)]
    rows.sort(
        key=lambda r: (
            -abs(r.spearman) if np.isfinite(r.spearman) else 0.0,
            r.p if np.isfinite(r.p) else 2.0,
        )
    )
    return DriftResult(
        rows=rows,
        alpha=level,
        correction=method,
        family_size=int(sum(np.isfinite(r["p"]) for r in found)),
        alpha_per_test=per_test,
        excluded_trials=excluded,
    )


def drift_frame(result: DriftResult) -> pd.DataFrame:
    """The correlations as a DataFrame, one row per (test, metric, clock[, worker])."""
    import pandas as pd

    columns = list(DriftRow.__dataclass_fields__)
    return pd.DataFrame([r.to_dict() for r in result.rows], columns=columns)
