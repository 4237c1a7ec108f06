"""Drift: does a test's metric move with where and when it ran, apart from order effects?

Per test x metric (x worker when asked), four comparisons, each judged only from enough
trials and with a p-value that is exact or resampled (never a large-sample approximation):

- ``position``: a trend with the trial's position in its run (warm-up, accumulating state);
- ``time_since_reset``: a trend with the seconds from the start of the run's first trial
  (the reset itself has no timestamp in the long format) to the trial's start, counted in
  the *typical* durations of the trials before it: the sum, over the earlier positions of
  its run, of each test's median duration (``ended`` - ``started``). The observed offsets
  would make a slow run's later trials look later, so run-to-run speed (load on the
  machine) would pass for drift with time; the typical durations keep what the clock is
  for, tests of different lengths;
- ``run``: a monotone trend with the run index, across runs (ageing, a filling disk), that
  stands out against a level that wanders (:func:`washout.stats.serial.trend_p`);
- ``wander``: the level changed across the experiment, not monotonically: successive runs
  are more alike than independent runs would be, around the best monotone fit
  (:func:`washout.stats.serial.wander_p`), with how much (``wander_pct``,
  :func:`washout.stats.serial.slow_sd`).

For position and time since the reset, Spearman's rank correlation (Spearman 1904, "The
proof and measurement of association between two things", Am. J. Psychol. 15(1)) with a
permutation p-value (:func:`washout.stats.resampling.permutation_p`: exact up to 8 trials,
sequential Monte Carlo above). Permutation is the design's own null: in a random run a
test's position is drawn at random, so it is exchangeable across the test's trials unless
the position matters, also when the machine's level wanders or whole runs differ (a
trial's position is drawn independently of both). Student's t on n - 2 degrees of freedom,
used before, said p = 0 for any perfect ranking (rho = 1 with 3 trials, whose exact p is
1/3) and is anti-conservative in the tails up to some 50 trials. The run index is not
drawn at random, so runs are not exchangeable when the machine wanders: the ``run`` row's
``spearman`` is descriptive and its p is the trend test's.

Only random-order runs are used, and in them only the trials at positions >= 1:
- in fixed (and reverse, Williams) runs a test's position is tied to its order kind, so a
  plain fixed-vs-random level shift would pass for drift with position, and with a blocked
  design for drift over runs;
- the first trial after the reset is its own effect (washout.stats.carryover, predecessor
  ``(reset)``); left in, it would pass for a trend over positions and time since the reset.
In a random run the test at each position is drawn at random, so a trend among these trials
is not made by which test ran before (carryover) either.

A comparison is judged from at least ``MIN_TRIALS`` trials (position, time since the reset)
or ``MIN_RUNS`` runs (run, wander); with fewer it is not made (p NaN, ``n`` < ``min_n``:
"too few to judge"): a comparison of fewer can rarely reach a family-wise level (the
smallest p of 7 trials at distinct positions is 2 / 7! = 4e-4, with tied positions far
larger), and a trend across fewer runs cannot be told from a wander. A clock that does not
vary makes no comparison either. A metric that does not vary has no correlation (rho NaN)
and p = 1, and counts. Significance is family-wise over every comparison with a p-value,
by Bonferroni or Holm (``washout.stats.family``); the resampling draws enough for that
family's level (``washout.stats.resampling``).
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
WANDER = "wander"
"""The ``against`` of the comparison "the level wandered across runs, not monotonically"."""
RANDOM_ORDER = "random"
MIN_TRIALS = 8
"""The fewest trials a trend with position or time since the reset is judged from."""
MIN_RUNS = 10
"""The fewest runs a trend across runs, or a wandering level, is judged from."""


@dataclass(frozen=True)
class DriftRow:
    """One comparison of one test's metric: a trend with a clock (``against`` in
    ``CLOCKS``) or a wandering level (``against`` ``WANDER``). ``n`` < ``min_n``: too few
    trials to judge (p NaN). ``spearman``: the rank correlation with the clock (NaN for
    ``WANDER``); ``wander_pct``: for ``WANDER``, the standard deviation of the level's
    slowly varying part in % (NaN otherwise)."""

    test: str
    metric: str
    worker: str | None
    against: str
    n: int
    spearman: float
    p: float
    significant: bool
    min_n: int
    wander_pct: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DriftResult(FrameView):
    """Every comparison, strongest |rho| first, with the family it was corrected over."""

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

    def too_few(self) -> list[DriftRow]:
        """The comparisons with some trials but too few to judge."""
        return [r for r in self.rows if 0 < r.n < r.min_n]

    def to_frame(self) -> pd.DataFrame:
        """One row per comparison (:func:`drift_frame`)."""
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


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's correlation of the average ranks (as
    ``scipy.stats.spearmanr``); NaN when either does not vary."""
    import numpy as np

    from washout.stats.serial import ranks

    rx, ry = ranks(x) - (len(x) + 1) / 2, ranks(y) - (len(y) + 1) / 2
    norm = float(np.sqrt((rx @ rx) * (ry @ ry)))
    return float(np.clip(rx @ ry / norm, -1.0, 1.0)) if norm > 0 else float("nan")


def spearman_p(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, max_draws: int) -> float:
    """Two-sided permutation p-value of Spearman's rho, |rho| of the orderings of y's ranks
    against x's (module doc); 1 when y does not vary."""
    from washout.stats.resampling import permutation_p
    from washout.stats.serial import ranks

    rx = ranks(x) - (len(x) + 1) / 2
    ry = ranks(y) - (len(y) + 1) / 2
    if not ry.any():
        return 1.0
    return permutation_p(lambda rows: abs(rows @ rx), ry, rng, max_draws)


@dataclass(frozen=True)
class _Comparison:
    """One comparison before its p-value: the clock's and the metric's values of the trials
    with both, in run order."""

    test: str
    metric: str
    worker: str | None
    against: str
    clock: np.ndarray
    value: np.ndarray
    min_n: int

    @property
    def made(self) -> bool:
        """Enough trials, and a clock that varies."""
        import numpy as np

        return len(self.value) >= self.min_n and bool(np.ptp(self.clock) > 0)


def _comparisons(ok: pd.DataFrame, group_keys: list[str], split: bool) -> list[_Comparison]:
    """Every (group, clock) comparison and each group's wander, over the finite values."""
    import numpy as np

    out = []
    for key, group in ok.groupby(group_keys, sort=True, observed=True):
        worker = str(key[0]) if split else None
        test, met = (key[1], key[2]) if split else (key[0], key[1])
        value = group["value"].to_numpy(dtype=float)
        for against in (*CLOCKS, WANDER):
            clock = group["run" if against == WANDER else against].to_numpy(dtype=float)
            keep = np.isfinite(clock) & np.isfinite(value)
            least = MIN_TRIALS if against in ("position", "time_since_reset") else MIN_RUNS
            out.append(
                _Comparison(str(test), str(met), worker, against, clock[keep], value[keep], least)
            )
    return out


def _p(c: _Comparison, rng: np.random.Generator, max_draws: int) -> float:
    """The comparison's p-value (module doc)."""
    from washout.stats.serial import trend_p, wander_p

    if c.against == "run":
        return trend_p(c.value, c.clock, rng, max_draws)
    if c.against == WANDER:
        return wander_p(c.value, rng, max_draws)
    return spearman_p(c.clock, c.value, rng, max_draws)


def drift(
    df: pd.DataFrame,
    *,
    alpha: float = 0.05,
    correction: str = "bonferroni",
    by_worker: bool = False,
    metric: str | None = None,
    seed: int = 0,
) -> DriftResult:
    """Trends of every test's metric with position, time since reset and run, and a level
    wandering across runs, over its random-order trials after the first position (see the
    module doc).

    ``by_worker``: one row set per worker when the data has several (each worker has its own
    clocks); otherwise pooled, ``worker`` None. ``metric``: only that metric. ``seed``: of
    the resampling (the same data and seed give the same p-values).
    """
    import numpy as np

    from washout.stats.resampling import max_draws_for
    from washout.stats.serial import slow_sd

    level, method = check_alpha(alpha), check_method(correction)
    ok, excluded = usable_trials(df, "drift analysis")
    if metric is not None:
        ok = ok[ok["metric"] == metric]
    ok = with_clocks(df, ok)
    ok = ok[(ok["order"] == RANDOM_ORDER) & (ok["position"] >= 1)]
    split = by_worker and ok["worker"].nunique() > 1
    group_keys = ["worker", "test", "metric"] if split else ["test", "metric"]
    ok = ok.sort_values(["run", "worker", "position"], kind="stable")  # run order
    comparisons = _comparisons(ok, group_keys, split)
    family = sum(c.made for c in comparisons)
    max_draws = max_draws_for(level / max(family, 1))
    found: list[dict[str, Any]] = []
    for i, c in enumerate(comparisons):
        rho = spearman(c.clock, c.value) if c.against != WANDER and len(c.value) >= 3 else np.nan
        found.append(
            dict(
                test=c.test,
                metric=c.metric,
                worker=c.worker,
                against=c.against,
                n=len(c.value),
                spearman=rho,
                p=_p(c, np.random.default_rng([seed, i]), max_draws) if c.made else np.nan,
                min_n=c.min_n,
                wander_pct=100 * slow_sd(c.value) if c.against == WANDER and c.made else np.nan,
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
        family_size=family,
        alpha_per_test=per_test,
        excluded_trials=excluded,
    )


def drift_frame(result: DriftResult) -> pd.DataFrame:
    """The correlations as a DataFrame, one row per (test, metric, clock[, worker])."""
    import pandas as pd

    columns = list(DriftRow.__dataclass_fields__)
    return pd.DataFrame([r.to_dict() for r in result.rows], columns=columns)
