"""Carryover: which preceding test shifts which test.

For each test T, metric M and each other test S, T's trials immediately preceded by S are
compared with T's other trials; a further comparison puts T's first trials after the reset
(position 0, predecessor ``(reset)``) against its trials at later positions. Only runs whose
predecessors vary are used (order kinds random, reverse, williams): in a fixed-order run T's
predecessor is always the same test, so it carries no information about which predecessor
matters. A trial's predecessor is the test at the previous position of the same run on the
same worker, whatever that trial's status (a failed trial still ran and left its state);
trials whose previous position is not recorded are left out.

Statistics, per pair:
- Delta% = (mean_after - mean_other) / mean_other * 100: the mean, like the order analysis's
  Delta% (docs/design.md), so the two read the same way; positive means the metric is higher
  after S.
- p: two-sided Mann-Whitney U test of "after S" against "other" (Mann & Whitney 1947, Ann.
  Math. Statist. 18(1)), as ``scipy.stats.mannwhitneyu`` computes it (exact for small samples
  without ties, otherwise the tie-corrected normal approximation).
- significance: family-wise over every pair analysed in one call (all tests, predecessors,
  metrics and workers), by Bonferroni (default) or Holm (``washout.stats.family``). The
  family is every pair with both samples non-empty, as in the order analysis; a pair whose
  values are all equal has p = 1 (the exact permutation p-value).

This is the carryover question of Duplyakin et al. (USENIX ATC 2023, "Avoiding the Ordering
Trap"): an order effect is usually one test leaving state (caches, page cache, allocator,
thermal) that the next one inherits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.errors import WashoutError
from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

RESET = "(reset)"
VARYING_ORDERS: tuple[str, ...] = ("random", "reverse", "williams")


@dataclass(frozen=True)
class CarryoverPair:
    """One comparison: test ``test`` right after ``predecessor`` versus its other trials."""

    test: str
    predecessor: str
    metric: str
    worker: str | None
    n_after: int
    n_other: int
    mean_after: float
    mean_other: float
    delta_pct: float
    u: float
    p: float
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CarryoverResult:
    """All pairs, largest |Delta%| first, with the family they were corrected over."""

    pairs: list[CarryoverPair]
    alpha: float
    correction: str
    family_size: int
    alpha_per_test: float | None
    runs_used: int
    excluded_trials: int
    orders_used: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pairs"] = [p.to_dict() for p in self.pairs]
        d["orders_used"] = list(self.orders_used)
        return d

    def significant(self) -> list[CarryoverPair]:
        return [p for p in self.pairs if p.significant]


def with_predecessors(df: "pd.DataFrame", ok: "pd.DataFrame") -> "pd.DataFrame":
    """``ok`` with a ``predecessor`` column: the test one position earlier in the same run
    and worker (looked up among all recorded trials), ``(reset)`` at position 0, NaN when the
    previous position was not recorded (or the trial's own position is unknown)."""
    import pandas as pd

    if pd.to_numeric(df["position"], errors="coerce").isna().all():
        raise WashoutError("long format: column position has no values: the carryover "
                           "analysis needs each trial's position in its run")
    everything = df.copy()
    if "worker" not in everything.columns:
        everything["worker"] = "local"
    everything["position"] = pd.to_numeric(everything["position"], errors="coerce") + 1
    slots = (
        everything.loc[everything["position"].notna(), ["worker", "run", "position", "test"]]
        .drop_duplicates(["worker", "run", "position"])
        .rename(columns={"test": "predecessor"})
    )
    out = ok.copy()
    out["position"] = pd.to_numeric(out["position"], errors="coerce")
    out = out.merge(slots, on=["worker", "run", "position"], how="left")
    out["predecessor"] = out["predecessor"].astype(object)
    out.loc[(out["position"] == 0).to_numpy(dtype=bool), "predecessor"] = RESET
    return out


def _compare(after: "np.ndarray", other: "np.ndarray") -> tuple[float, float, float, float, float]:
    """(mean_after, mean_other, delta_pct, U, p) for one pair; NaN where undefined."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    mean_after, mean_other = float(np.mean(after)), float(np.mean(other))
    delta = (mean_after - mean_other) / mean_other * 100.0 if mean_other != 0 else float("nan")
    if np.ptp(np.concatenate([after, other])) == 0:
        # All values equal: every relabelling gives the same data, the exact p is 1.
        return mean_after, mean_other, 0.0, len(after) * len(other) / 2.0, 1.0
    res = mannwhitneyu(after, other, alternative="two-sided")
    return mean_after, mean_other, delta, float(res.statistic), float(res.pvalue)


def carryover(
    df: "pd.DataFrame",
    *,
    alpha: float = 0.05,
    correction: str = "bonferroni",
    by_worker: bool = False,
    metric: str | None = None,
) -> CarryoverResult:
    """Every (test, predecessor, metric[, worker]) comparison, largest |Delta%| first.

    ``by_worker``: analyse each worker separately when the data has several (a worker's own
    caches and daemons are what carries over); otherwise all workers are pooled and
    ``worker`` is None. ``metric``: only that metric (default: every metric).
    """
    import numpy as np

    level, method = check_alpha(alpha), check_method(correction)
    ok, excluded = usable_trials(df, "carryover analysis")
    if metric is not None:
        ok = ok[ok["metric"] == metric]
    ok = ok[ok["order"].isin(VARYING_ORDERS)]
    ok = with_predecessors(df, ok)
    ok = ok[ok["predecessor"].notna()]
    split = by_worker and ok["worker"].nunique() > 1
    group_keys = ["worker", "test", "metric"] if split else ["test", "metric"]

    rows: list[dict[str, Any]] = []
    for key, group in ok.groupby(group_keys, sort=True):
        worker = str(key[0]) if split else None
        test, met = (key[1], key[2]) if split else (key[0], key[1])
        values = group["value"].to_numpy(dtype=float)
        preds = group["predecessor"].to_numpy(dtype=object)
        for pred in sorted(set(preds) - {test}, key=lambda s: (s != RESET, str(s))):
            mask = preds == pred
            after, other = values[mask], values[~mask]
            if len(after) == 0 or len(other) == 0:
                continue
            mean_a, mean_o, delta, u, p = _compare(after, other)
            rows.append(dict(
                test=str(test), predecessor=str(pred), metric=str(met), worker=worker,
                n_after=int(len(after)), n_other=int(len(other)), mean_after=mean_a,
                mean_other=mean_o, delta_pct=delta, u=u, p=p,
            ))
    significant, per_test = adjust([r["p"] for r in rows], level, method)
    pairs = [CarryoverPair(**r, significant=s) for r, s in zip(rows, significant)]
    pairs.sort(key=lambda q: (
        -abs(q.delta_pct) if np.isfinite(q.delta_pct) else 0.0,
        q.p if np.isfinite(q.p) else 2.0,
    ))
    return CarryoverResult(
        pairs=pairs,
        alpha=level,
        correction=method,
        family_size=int(sum(np.isfinite(r["p"]) for r in rows)),
        alpha_per_test=per_test,
        runs_used=int(ok[["worker", "run"]].drop_duplicates().shape[0]),
        excluded_trials=excluded,
        orders_used=VARYING_ORDERS,
    )


def carryover_frame(result: CarryoverResult) -> "pd.DataFrame":
    """The pairs as a DataFrame, one row per pair, in the result's order."""
    import pandas as pd

    columns = list(CarryoverPair.__dataclass_fields__)
    return pd.DataFrame([p.to_dict() for p in result.pairs], columns=columns)
