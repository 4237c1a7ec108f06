"""Carryover: which preceding test shifts which test, and what the first trial after the reset
pays.

Data: per test T and metric (and worker, when asked), T's trials in random-order runs. A
random run is a uniform permutation of the tests (washout.harness.plan), so given that T is at
position k >= 1 its predecessor is equally likely to be each other test, whatever k is and
whatever happened in other runs. Among T's trials at positions >= 1, "came right after S" is
therefore assigned at random, and comparing those trials with T's trials after other tests
is a randomized comparison that neither a trend over positions nor the first trial's own
cost can bias (the random assignment is what the test rests on: Edgington & Onghena,
"Randomization Tests", 4th ed. 2007, ch. 1). Fixed, reverse and Williams runs are not used:
their predecessors are tied to positions, so a predecessor would be confounded with drift.
A trial's predecessor is the test one position earlier in the same run and worker, whatever
that trial's status (a failed trial still ran and left its state).

Per test and metric:

1. Scale. log(value) when all of the test's values are > 0, so effects are relative and
   Delta% = 100 (exp(d) - 1) for a difference d of mean logs; otherwise the value itself and
   Delta% = 100 d / |mean of the comparison group|.
2. Run level (run-to-run differences taken out by within-run centring). A trial's deviation
   is its log value minus its test's mean log value at the same kind of position (first
   after the reset, or later), so the first trial's cost does not leak into the level; the
   run level seen by a trial is the mean deviation of the *other* trials of its run and
   metric (leave one out, so a test's own effect is not shrunk). The level is subtracted
   when that makes the test's values at positions >= 1 less variable than the raw ones
   (a choice made without the predecessor labels, so it cannot favour any pair), which is
   the case when runs differ in level more than trials do. ``run_adjusted`` says which.
3. Predecessor pairs. Trials after S against trials after the other predecessors, both at
   positions >= 1. Delta% and its interval come from the difference of the mean (log)
   values with Student's pooled-variance t (the labels are exchangeable under the null, so
   the variances are equal). The p-value comes from the same t-test on the values' ranks
   within the test, scaled to (0, 1): the rank transform (Conover & Iman 1981, "Rank
   transformations as a bridge between parametric and nonparametric statistics", Am.
   Statist. 35(3)), close to Mann-Whitney's test. A few outliers (a daemon waking up) cannot
   make a pair significant, and it stays close to the randomization distribution of the
   ranks (Pitman 1937, "Significance tests which may be applied to samples from any
   populations", JRSS Suppl. 4(1)). A metric with only two values gets Fisher's exact test
   instead, because the normal approximation fails there. The calibration suite
   (tests/test_calibration.py, bench/calibration.py) checks the false-positive rate.
4. Blame. A real effect of B on C makes "after B" part of every other predecessor's
   comparison group. So the pairs are found step by step: per test, the most significant
   pair is set aside and the others are compared again without its trials, until none is
   significant; each set-aside pair is finally compared with the predecessors that were not
   set aside.
5. First after the reset (predecessor ``(reset)``): T's trials at position 0 against the
   straight line fitted to its trials at positions >= 1 (after predecessors not set aside),
   extrapolated to position 0: the coefficient of a position-0 indicator in the least-squares
   fit y = a + b * position + f * [position = 0] (the same fit on the ranks gives t and p),
   with Student's t on n - 3 degrees of freedom (Draper & Smith, "Applied Regression
   Analysis", 3rd ed. 1998, ch. 14: dummy variables). So a trend over positions is not
   mistaken for a first-trial effect. The extrapolation costs much precision (4-10 times
   the variance of a plain comparison of position 0 with later positions), so the trend is
   only fitted when its slope over positions >= 1 differs from 0 at level ``TREND_LEVEL``
   (a lenient pretest: a trend too weak to pass it is also too weak to pass for a
   first-trial effect at a family-wise level; the calibration suite checks this); otherwise
   b = 0 and the test has n - 2 degrees of freedom.
6. Pooled first after the reset, per metric (and worker): the mean of the log-scale tests'
   f (on the ranks for p), standard error sqrt(sum se^2) / m, Welch-Satterthwaite degrees of
   freedom (Welch 1947, Biometrika 34(1/2)). Treating the tests as independent ignores that
   they share runs; the run level that is shared enters their f with opposite signs, so
   this errs on the conservative side.
7. Family-wise over every pair, first-after-reset row and pooled row of the call (all tests,
   predecessors, metrics, workers), by Bonferroni (default) or Holm (washout.stats.family).
   ``ci`` is the Bonferroni-simultaneous interval of Delta%: Student's t at 1 - alpha/(2m).

This is the carryover question of Duplyakin et al. (USENIX ATC 2023, "Avoiding the Ordering
Trap"): an order effect is usually one test leaving state (caches, page cache, allocator,
thermal) that the next one inherits, or a reset that leaves the first test to pay for it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from washout.errors import WashoutError
from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.frames import FrameView
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

RESET = "(reset)"
RANDOM_ORDER = "random"
TREND_LEVEL = 0.2
"""A test's trend over positions >= 1 is taken out of its first-after-reset comparison when
its slope differs from 0 at this level (step 5 of the module doc)."""


@dataclass(frozen=True)
class CarryoverPair:
    """One comparison: test ``test`` right after ``predecessor`` versus after other tests
    (for ``(reset)``: at position 0 versus its trend over later positions).

    ``mean_after`` and ``mean_other`` are plain means of the raw values; ``delta_pct`` and
    ``ci`` come from the model (run-adjusted, log scale) and are what the test judges.
    """

    test: str
    predecessor: str
    metric: str
    worker: str | None
    n_after: int
    n_other: int
    mean_after: float
    mean_other: float
    delta_pct: float
    ci: tuple[float, float]
    t: float
    p: float
    significant: bool
    run_adjusted: bool

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci"] = list(self.ci)
        return d


class _Cell(TypedDict):
    """The fields a cell's ``CarryoverPair`` rows share."""

    test: str
    metric: str
    worker: str | None
    run_adjusted: bool


@dataclass(frozen=True)
class FirstAfterReset:
    """The first trial after the reset, pooled over the tests of one metric (and worker)."""

    metric: str
    worker: str | None
    tests: int
    delta_pct: float
    ci: tuple[float, float]
    p: float
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci"] = list(self.ci)
        return d


@dataclass(frozen=True)
class CarryoverResult(FrameView):
    """All pairs, largest |Delta%| first, the pooled first-after-reset rows, and the family
    they were corrected over."""

    pairs: list[CarryoverPair]
    first_after_reset: list[FirstAfterReset]
    alpha: float
    correction: str
    family_size: int
    alpha_per_test: float | None
    runs_used: int
    excluded_trials: int
    orders_used: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": [p.to_dict() for p in self.pairs],
            "first_after_reset": [r.to_dict() for r in self.first_after_reset],
            "alpha": self.alpha,
            "correction": self.correction,
            "family_size": self.family_size,
            "alpha_per_test": self.alpha_per_test,
            "runs_used": self.runs_used,
            "excluded_trials": self.excluded_trials,
            "orders_used": list(self.orders_used),
        }

    def significant(self) -> list[CarryoverPair]:
        return [p for p in self.pairs if p.significant]

    def to_frame(self) -> pd.DataFrame:
        """One row per pair (:func:`carryover_frame`)."""
        return carryover_frame(self)


def with_predecessors(df: pd.DataFrame, ok: pd.DataFrame) -> pd.DataFrame:
    """``ok`` with a ``predecessor`` column: the test one position earlier in the same run
    and worker (looked up among all recorded trials), ``(reset)`` at position 0, NaN when the
    previous position was not recorded (or the trial's own position is unknown)."""
    import pandas as pd

    if pd.to_numeric(df["position"], errors="coerce").isna().all():
        raise WashoutError(
            "long format: column position has no values: the carryover "
            "analysis needs each trial's position in its run"
        )
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


def model_values(
    trials: pd.DataFrame, cell: np.ndarray, run_keys: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, log_scale, run_adjusted)``: each trial's value on the model's scale with its run
    level taken out where that helps (steps 1 and 2 of the module doc), and per cell (test x
    metric [x worker], numbered by ``cell``) whether the log scale and the run adjustment were
    used. ``trials`` needs value, position (0 = first after the reset) and ``run_keys``."""
    import numpy as np

    value = trials["value"].to_numpy(dtype=float)
    first = trials["position"].to_numpy() == 0
    cells = int(cell.max()) + 1 if len(cell) else 0
    log_scale = np.ones(cells, dtype=bool)
    np.logical_and.at(log_scale, cell, value > 0)
    on_log = log_scale[cell]
    z = np.where(on_log, np.log(np.where(value > 0, value, 1.0)), value)
    # deviation from the test's mean at the same kind of position; only log-scale tests
    kind = cell * 2 + first
    typical = np.bincount(kind, z, 2 * cells) / np.maximum(np.bincount(kind, None, 2 * cells), 1)
    dev = np.where(on_log, z - typical[kind], 0.0)
    run = trials.groupby(run_keys, sort=False, observed=True).ngroup().to_numpy()
    total, count = np.bincount(run, dev), np.bincount(run, on_log.astype(float))
    others = count[run] - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        level = np.where(on_log & (others > 0), (total[run] - dev) / others, np.nan)
    later = ~first & np.isfinite(level)
    raw_var = _cell_variance(z, cell, later, cells)
    adj_var = _cell_variance(z - np.nan_to_num(level), cell, later, cells)
    run_adjusted = log_scale & (adj_var < raw_var)
    y = np.where(run_adjusted[cell], z - np.nan_to_num(level), z)
    return y, log_scale, run_adjusted


def _cell_variance(x: np.ndarray, cell: np.ndarray, mask: np.ndarray, cells: int) -> np.ndarray:
    """Per cell, the variance of ``x`` over the masked rows (NaN with fewer than 2)."""
    import numpy as np

    n = np.bincount(cell[mask], None, cells)
    s = np.bincount(cell[mask], x[mask], cells)
    mean = s / np.maximum(n, 1)
    ss = np.bincount(cell[mask], (x[mask] - mean[cell[mask]]) ** 2, cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 1, ss / (n - 1), np.nan)


def _student_p(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Two-sided p of Student's t (NaN where t or the degrees of freedom are undefined)."""
    import numpy as np
    from scipy.special import stdtr

    with np.errstate(invalid="ignore"):
        return np.where(
            np.isnan(t) | ~(df > 0), np.nan, 2.0 * stdtr(np.where(df > 0, df, 1.0), -np.abs(t))
        )


def _delta_pct(diff: np.ndarray, log_scale: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Delta% of a difference: 100 (exp(d) - 1) on the log scale, 100 d / |base| otherwise."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.where(log_scale, 100.0 * np.expm1(diff), 100.0 * diff / np.abs(base))


@dataclass
class _Moments:
    """Sums over T's trials at positions >= 1, per (cell, predecessor) slot."""

    n: np.ndarray
    y: np.ndarray
    yy: np.ndarray
    k: np.ndarray
    kk: np.ndarray
    ky: np.ndarray
    raw: np.ndarray

    def pooled(self, keep: np.ndarray, cells: int, slots: int) -> _Moments:
        """Per cell, the sums over the kept slots."""
        import numpy as np

        def total(a: np.ndarray) -> np.ndarray:
            return np.where(keep, a, 0.0).reshape(cells, slots).sum(axis=1)

        return _Moments(*(total(getattr(self, f)) for f in self.__dataclass_fields__))


def carryover(
    df: pd.DataFrame,
    *,
    alpha: float = 0.05,
    correction: str = "bonferroni",
    by_worker: bool = False,
    metric: str | None = None,
) -> CarryoverResult:
    """Every (test, predecessor, metric[, worker]) comparison, largest |Delta%| first, and
    the first trial after the reset per test and pooled; see the module doc.

    ``by_worker``: analyse each worker separately when the data has several (a worker's own
    caches and daemons are what carries over); otherwise all workers are pooled and
    ``worker`` is None. ``metric``: only that metric (default: every metric).
    """
    import numpy as np
    import pandas as pd
    from scipy.special import stdtrit

    level, method = check_alpha(alpha), check_method(correction)
    ok, excluded = usable_trials(df, "carryover analysis")
    if metric is not None:
        ok = ok[ok["metric"] == metric]
    ok = ok[ok["order"] == RANDOM_ORDER]
    ok = with_predecessors(df, ok)
    ok = ok[ok["predecessor"].notna()].reset_index(drop=True)
    split = by_worker and ok["worker"].nunique() > 1
    cell_keys = ["worker", "test", "metric"] if split else ["test", "metric"]
    if ok.empty:
        return CarryoverResult([], [], level, method, 0, None, 0, excluded, (RANDOM_ORDER,))

    cell_frame = ok.groupby(cell_keys, sort=True, observed=True)
    cell = cell_frame.ngroup().to_numpy()
    cell_index = cell_frame.size().index
    cells = len(cell_index)
    y, log_scale, run_adjusted = model_values(ok, cell, ["worker", "run", "metric"])
    centre = np.bincount(cell, y, cells) / np.bincount(cell, None, cells)
    y = y - centre[cell]  # differences only: centred sums stay accurate

    labels = sorted(ok["predecessor"].astype(str).unique(), key=lambda s: (s != RESET, s))
    slots = len(labels)
    pred = pd.Categorical(ok["predecessor"].astype(str), categories=labels).codes
    position = ok["position"].to_numpy(dtype=float)
    value = ok["value"].to_numpy(dtype=float)
    first = position == 0
    slot = cell * slots + pred
    size = cells * slots
    later = ~first

    def sums(x: np.ndarray | None, where: np.ndarray) -> np.ndarray:
        return np.bincount(slot[where], None if x is None else x[where], size)

    def moments_of(
        x: np.ndarray,
    ) -> tuple[_Moments, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """The sums the statistics need of ``x``: per slot at positions >= 1, per cell at 0."""
        later_sums = _Moments(
            sums(None, later),
            sums(x, later),
            sums(x * x, later),
            sums(position, later),
            sums(position**2, later),
            sums(position * x, later),
            sums(value, later),
        )
        n, total, squares, raw = (
            np.bincount(cell[first], w, cells)
            for w in (None, x[first], x[first] ** 2, value[first])
        )
        return later_sums, (n, total, squares, raw)

    # significance from ranks within the cell (scaled to (0, 1)): outliers cannot make it
    cell_size = np.bincount(cell, None, cells)
    score = pd.Series(y).groupby(cell).rank().to_numpy() / (cell_size[cell] + 1.0) - 0.5
    moments, first_sums = moments_of(y)
    rank_moments, rank_first_sums = moments_of(score)
    n0, raw0 = first_sums[0], first_sums[3]
    # a metric with two values (a count of 0 or 1 errors) gets exact tests: with one value
    # rare, the normal approximation of a rank test is far off at family-wise levels
    high = value == pd.Series(value).groupby(cell).transform("max").to_numpy()
    two_valued = pd.Series(value).groupby(cell).nunique().to_numpy() == 2
    high_later, high_first = (
        sums(high.astype(float), later),
        np.bincount(cell[first], high[first].astype(float), cells),
    )
    slot_cell = np.repeat(np.arange(cells), slots)
    slot_label = np.tile(np.arange(slots), cells)
    test_of_cell = cell_index.get_level_values("test").astype(str).to_numpy(dtype=object)
    label_of_slot = np.array(labels, dtype=object)[slot_label]
    is_pair = (
        (moments.n > 0) & (label_of_slot != RESET) & (label_of_slot != test_of_cell[slot_cell])
    )
    group_keys = ["worker", "metric"] if split else ["metric"]
    group_frame = cell_index.to_frame(index=False)[group_keys]
    group_of_cell = pd.MultiIndex.from_frame(group_frame).factorize()[0]
    groups = int(group_of_cell.max()) + 1

    flagged = np.zeros(size, dtype=bool)
    while True:
        ranked = _statistics(
            rank_moments,
            is_pair,
            flagged,
            cells,
            slots,
            slot_cell,
            rank_first_sums,
            log_scale,
            centre,
            group_of_cell,
            groups,
        )
        if two_valued.any():
            _exact_two_valued(
                ranked,
                two_valued,
                high_later,
                high_first,
                is_pair & ~flagged,
                moments.n,
                n0,
                cells,
                slots,
                slot_cell,
            )
        family = np.concatenate([ranked["pair_p"][is_pair], ranked["reset_p"], ranked["pool_p"]])
        significant, per_test = adjust(family.tolist(), level, method)
        pair_sig = np.zeros(size, dtype=bool)
        pair_sig[is_pair] = significant[: int(is_pair.sum())]
        candidates = pair_sig & ~flagged
        if not candidates.any():
            break
        p_rank = np.where(candidates, ranked["pair_p"], np.inf).reshape(cells, slots)
        best = p_rank.argmin(axis=1)
        new = np.isfinite(p_rank[np.arange(cells), best])
        flagged[np.arange(cells)[new] * slots + best[new]] = True

    stats = _statistics(
        moments,
        is_pair,
        flagged,
        cells,
        slots,
        slot_cell,
        first_sums,
        log_scale,
        centre,
        group_of_cell,
        groups,
    )
    m = int(np.isfinite(family).sum())
    reset_sig = significant[int(is_pair.sum()) : int(is_pair.sum()) + cells]
    pool_sig = significant[int(is_pair.sum()) + cells :]

    def interval(
        diff: np.ndarray,
        se: np.ndarray,
        df_: np.ndarray,
        log: np.ndarray,
        base: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        q = stdtrit(np.where(df_ > 0, df_, 1.0), 1.0 - level / (2 * max(m, 1)))
        return (_delta_pct(diff - q * se, log, base), _delta_pct(diff + q * se, log, base))

    pair_lo, pair_hi = interval(
        stats["pair_diff"],
        stats["pair_se"],
        stats["pair_df"],
        log_scale[slot_cell],
        stats["pair_base"],
    )
    reset_lo, reset_hi = interval(
        stats["reset_diff"], stats["reset_se"], stats["reset_df"], log_scale, stats["reset_base"]
    )
    pool_lo, pool_hi = interval(
        stats["pool_diff"],
        stats["pool_se"],
        stats["pool_df"],
        np.ones(groups, dtype=bool),
        np.ones(groups),
    )

    rows: list[CarryoverPair] = []
    for c, key in enumerate(cell_index):
        key = key if isinstance(key, tuple) else (key,)
        test, met = (key[1], key[2]) if split else (key[0], key[1])
        common = _Cell(
            test=str(test),
            metric=str(met),
            worker=str(key[0]) if split else None,
            run_adjusted=bool(run_adjusted[c]),
        )
        if n0[c] > 0:
            rows.append(
                CarryoverPair(
                    predecessor=RESET,
                    n_after=int(n0[c]),
                    n_other=int(stats["reset_n"][c]),
                    mean_after=float(raw0[c] / n0[c]),
                    mean_other=float(stats["reset_raw"][c]),
                    delta_pct=float(stats["reset_delta"][c]),
                    ci=(float(reset_lo[c]), float(reset_hi[c])),
                    t=float(ranked["reset_t"][c]),
                    p=float(ranked["reset_p"][c]),
                    significant=bool(reset_sig[c]),
                    **common,
                )
            )
        for s in range(slots):
            i = c * slots + s
            if not is_pair[i]:
                continue
            rows.append(
                CarryoverPair(
                    predecessor=labels[s],
                    n_after=int(moments.n[i]),
                    n_other=int(stats["pair_n_other"][i]),
                    mean_after=float(moments.raw[i] / moments.n[i]),
                    mean_other=float(stats["pair_raw_other"][i]),
                    delta_pct=float(stats["pair_delta"][i]),
                    ci=(float(pair_lo[i]), float(pair_hi[i])),
                    t=float(ranked["pair_t"][i]),
                    p=float(ranked["pair_p"][i]),
                    significant=bool(pair_sig[i]),
                    **common,
                )
            )
    rows.sort(
        key=lambda q: (
            -abs(q.delta_pct) if np.isfinite(q.delta_pct) else 0.0,
            q.p if np.isfinite(q.p) else 2.0,
        )
    )
    group_index = pd.MultiIndex.from_frame(group_frame).unique()
    pooled = [
        FirstAfterReset(
            metric=str(g[-1] if isinstance(g, tuple) else g),
            worker=str(g[0]) if split else None,
            tests=int(stats["pool_tests"][i]),
            delta_pct=float(stats["pool_delta"][i]),
            ci=(float(pool_lo[i]), float(pool_hi[i])),
            p=float(ranked["pool_p"][i]),
            significant=bool(pool_sig[i]),
        )
        for i, g in enumerate(group_index)
        if stats["pool_tests"][i] > 0
    ]
    return CarryoverResult(
        pairs=rows,
        first_after_reset=pooled,
        alpha=level,
        correction=method,
        family_size=m,
        alpha_per_test=per_test,
        runs_used=int(ok[["worker", "run"]].drop_duplicates().shape[0]),
        excluded_trials=excluded,
        orders_used=(RANDOM_ORDER,),
    )


def _statistics(
    moments: _Moments,
    is_pair: np.ndarray,
    flagged: np.ndarray,
    cells: int,
    slots: int,
    slot_cell: np.ndarray,
    first: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    log_scale: np.ndarray,
    centre: np.ndarray,
    group_of_cell: np.ndarray,
    groups: int,
) -> dict[str, np.ndarray]:
    """Steps 3, 5 and 6 of the module doc with the ``flagged`` pairs set aside: per pair
    (slot), per cell and per group of cells, the difference on the model's scale, its
    standard error, degrees of freedom, t, p and Delta%."""
    import numpy as np

    in_pool = is_pair & ~flagged
    pool = moments.pooled(in_pool, cells, slots)
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        # pairs: after S against the pool of the other predecessors not set aside
        mine = np.where(in_pool, 1.0, 0.0)
        n_a, n_o = moments.n, pool.n[slot_cell] - mine * moments.n
        y_o = pool.y[slot_cell] - mine * moments.y
        yy_o = pool.yy[slot_cell] - mine * moments.yy
        mean_a, mean_o = moments.y / n_a, y_o / n_o
        ss = (moments.yy - moments.y * mean_a) + (yy_o - y_o * mean_o)
        df = n_a + n_o - 2
        se = np.sqrt(np.maximum(ss, 0.0) / df * (1.0 / n_a + 1.0 / n_o))
        diff = mean_a - mean_o
        out["pair_diff"], out["pair_se"], out["pair_df"] = diff, se, df
        out["pair_t"] = _t(diff, se)
        out["pair_p"] = np.where(is_pair & (n_o > 0), _student_p(out["pair_t"], df), np.nan)
        out["pair_n_other"] = n_o
        out["pair_raw_other"] = (pool.raw[slot_cell] - mine * moments.raw) / n_o
        out["pair_base"] = mean_o + centre[slot_cell]
        out["pair_delta"] = _delta_pct(diff, log_scale[slot_cell], out["pair_base"])

        # first after the reset: position 0 against the line through positions >= 1
        n0, y0, yy0, raw0 = first
        n1 = pool.n
        k_bar, y_bar = pool.k / n1, pool.y / n1
        sxx = pool.kk - n1 * k_bar**2
        sxy = pool.ky - n1 * k_bar * y_bar
        varies = sxx > 1e-9 * np.maximum(n1, 1)
        slope = np.where(varies, sxy / np.where(varies, sxx, 1.0), 0.0)
        syy = pool.yy - n1 * y_bar**2
        slope_t = _t(
            slope,
            np.sqrt(np.maximum(syy - slope * sxy, 0.0) / (n1 - 2) / np.where(varies, sxx, 1.0)),
        )
        sloped = varies & (_student_p(slope_t, n1 - 2) < TREND_LEVEL)
        slope = np.where(sloped, slope, 0.0)
        intercept = y_bar - slope * k_bar
        residual = syy - slope * sxy
        mean0 = y0 / n0
        df = n0 + n1 - np.where(sloped, 3, 2)
        s2 = (np.maximum(yy0 - n0 * mean0**2, 0.0) + np.maximum(residual, 0.0)) / df
        leverage = np.where(sloped, k_bar**2 / np.where(sloped, sxx, 1.0), 0.0)
        se = np.sqrt(s2 * (1.0 / n0 + 1.0 / n1 + leverage))
        diff = mean0 - intercept
        valid = (n0 > 0) & (n1 > 0) & (df > 0)
        out["reset_diff"], out["reset_se"], out["reset_df"] = diff, se, df
        out["reset_t"] = _t(diff, se)
        out["reset_p"] = np.where(valid, _student_p(out["reset_t"], df), np.nan)
        out["reset_n"], out["reset_raw"] = n1, pool.raw / n1
        out["reset_base"] = intercept + centre
        out["reset_delta"] = _delta_pct(diff, log_scale, out["reset_base"])

        # pooled over the log-scale tests of a metric (and worker)
        use = valid & log_scale & np.isfinite(se) & np.isfinite(diff)
        var = np.where(use, se**2, 0.0)
        k = np.bincount(group_of_cell[use], None, groups)
        mean = np.bincount(group_of_cell[use], diff[use], groups) / k
        total_var = np.bincount(group_of_cell, var, groups)
        df = total_var**2 / np.bincount(
            group_of_cell[use], var[use] ** 2 / out["reset_df"][use], groups
        )
        se = np.sqrt(total_var) / k
        out["pool_tests"], out["pool_diff"], out["pool_se"], out["pool_df"] = k, mean, se, df
        out["pool_t"] = _t(mean, se)
        out["pool_p"] = np.where(k > 0, _student_p(out["pool_t"], df), np.nan)
        out["pool_delta"] = 100.0 * np.expm1(mean)
    return out


def _exact_two_valued(
    ranked: dict[str, np.ndarray],
    two_valued: np.ndarray,
    high_later: np.ndarray,
    high_first: np.ndarray,
    in_pool: np.ndarray,
    n_later: np.ndarray,
    n_first: np.ndarray,
    cells: int,
    slots: int,
    slot_cell: np.ndarray,
) -> None:
    """In cells whose metric takes two values, replace the pair and first-after-reset
    p-values by Fisher's exact test of the share of the higher value (Fisher 1935, "The logic
    of inductive inference", JRSS 98(1); two-sided by doubling the smaller tail, capped at 1):
    the randomization distribution itself, hypergeometric for a 0/1 outcome. The first trial
    after the reset is compared with all later trials (no trend)."""
    import numpy as np
    from scipy.stats import hypergeom

    def fisher(
        x: np.ndarray, n: np.ndarray, k_other: np.ndarray, n_other: np.ndarray
    ) -> np.ndarray:
        total, k = n + n_other, x + k_other
        with np.errstate(invalid="ignore"):
            tails = np.minimum(hypergeom.sf(x - 1, total, k, n), hypergeom.cdf(x, total, k, n))
        return np.minimum(1.0, 2.0 * tails)

    pool_n = np.where(in_pool, n_later, 0.0).reshape(cells, slots).sum(axis=1)
    pool_high = np.where(in_pool, high_later, 0.0).reshape(cells, slots).sum(axis=1)
    mine = in_pool.astype(float)
    pairs = two_valued[slot_cell] & np.isfinite(ranked["pair_p"])
    exact = fisher(
        high_later,
        n_later,
        pool_high[slot_cell] - mine * high_later,
        pool_n[slot_cell] - mine * n_later,
    )
    ranked["pair_p"] = np.where(pairs, exact, ranked["pair_p"])
    resets = two_valued & np.isfinite(ranked["reset_p"])
    ranked["reset_p"] = np.where(
        resets, fisher(high_first, n_first, pool_high, pool_n), ranked["reset_p"]
    )


def _t(diff: np.ndarray, se: np.ndarray) -> np.ndarray:
    """diff / se; with no spread, 0 for no difference and undefined (NaN: no comparison) for
    any other, since a handful of ranks can fall exactly on a line by chance."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(se > 0, diff / se, np.where(diff == 0, 0.0, np.nan))


def carryover_frame(result: CarryoverResult) -> pd.DataFrame:
    """The pairs as a DataFrame, one row per pair, in the result's order."""
    import pandas as pd

    columns = list(CarryoverPair.__dataclass_fields__)
    return pd.DataFrame([p.to_dict() for p in result.pairs], columns=columns)
