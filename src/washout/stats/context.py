"""Context: does a test's metric depend on the context it ran in, and how far can the context
alone move it?

The size of the environment alone moved SPEC CPU2006 timings enough to flip an -O3 vs -O2
conclusion (Mytkowicz, Diwan, Hauswirth & Sweeney 2009, "Producing wrong data without doing
anything obviously wrong!", ASPLOS): the kernel copies the environment's strings to the top
of the stack, so its size sets where every stack frame lands (cache-line alignment, 4K
aliasing). A trial's context is given by the long format's context columns, each optional:

- ``context_env_bytes`` (int): bytes of padding added to the trial's environment
  (hyperfine's ``HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET`` draws 0-4095);
- ``context_cwd_bytes`` (int): the length of the trial's working directory's path (a shell
  exports it as ``PWD``, so it moves the stack like any other environment byte);
- ``context_aslr`` (bool): address-space layout randomization on or off for the trial.

A context *level* is one combination of the values of the columns present. Per test x
metric (x worker), over its successful trials of every order kind with a context:

- **Values**: what the machine and the design do to a trial is taken out first, as the
  carryover analysis did before its joint model (:func:`run_level_values`): on the log scale
  where all the test's values are positive, the run's level (the mean deviation of the
  other trials of its run) where that makes the test less variable, then the mean of the
  trial's stratum (order kind x first after the reset or not); the result is put back in
  the metric's unit around the test's geometric mean. Every step is computed from the
  values and the design alone, never from the context, so the test below stays valid, and
  it is much more powerful under run-to-run noise and a drifting machine
  (bench/RESULTS.md). ``adjust=False`` takes the values as they are.
- **The test**: Kruskal-Wallis H across the k levels with trials, tie-corrected, and
  p = P(chi^2_{k-1} > H) (Kruskal & Wallis 1952, "Use of ranks in one-criterion variance
  analysis", JASA 47(260), eqs. 1.1 and 1.4, as ``scipy.stats.kruskal``). Levels are
  unordered groups: no assumption that the metric moves steadily with the padding, as
  layout effects are periodic (a cache line every 64 bytes, a page every 4096) and aliased.
  Levels are assigned to each test's trials at random, apart from every other test's, so
  under the null the labels are exchangeable whatever the machine's state does (run-level
  noise, drift, carryover, the first trial after the reset): H is then a randomization test
  (Ernst 2004, "Permutation methods: a basis for exact inference", Stat. Sci. 19(4)), chi^2
  its large-sample approximation. Not made (NaN) with fewer than 2 levels or no level with
  2 trials; where every value is equal, H is 0/0, reported as null and counted with p = 1
  (every relabelling gives the same data), as in the order analysis.
- **Family-wise** over every (test, metric[, worker]) with a p-value, by Bonferroni or Holm
  (:mod:`washout.stats.family`).
- **Effect size** eta^2_H = (H - k + 1) / (n - k), clipped at 0 (Tomczak & Tomczak 2014,
  "The need to report effect size estimates revisited", Trends in Sport Sciences 21(1),
  eq. 5).
- **The spread the context alone makes**: the slowest level's median over the fastest's,
  minus 1 (``spread``), and a distribution-free interval for the same ratio of the levels'
  true medians: each level's median CI (Le Boudec 2010, Theorem 2.1,
  :mod:`washout.stats.median_ci`) at 1 - (1 - gamma) / k, so that all k cover together with
  probability >= gamma (Bonferroni's inequality; Dunn 1961, JASA 56(293)); where they all
  cover, max m / min m lies in [max lo / min hi, max hi / min lo], so the spread lies in
  [max(0, max lo / min hi - 1), max hi / min lo - 1]. The confidence reported is
  1 - sum(1 - achieved_k) over the levels. Needs positive values and enough trials in
  every level (at gamma = 0.95: 7 per level with 2 levels, 8 with 4, 9 with 8); else no
  interval. The point estimate is biased upwards by noise (k sample medians differ even
  when the true ones do not): the lower bound is what the trials show the context does.

:func:`against_context` sets a comparison's margin against that spread ("A and B differ by
3%; the context alone moves A by up to 4%").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from washout.data.longformat import ASLR_WORDS, CONTEXT_COLUMNS
from washout.errors import WashoutError
from washout.stats.family import adjust as familywise
from washout.stats.family import check_alpha, check_method
from washout.stats.median_ci import check_confidence, median_ci_rank
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from washout.stats.claims import ClaimResult
    from washout.stats.compare import Comparison


BEYOND, WITHIN, UNDECIDED, UNKNOWN = "beyond", "within", "undecided", "unknown"
""":func:`against_context`'s verdicts: the margin exceeds the spread's upper bound; it is at
most the spread's lower bound; in between; no interval to judge by."""


@dataclass(frozen=True)
class ContextLevel:
    """One context level of one test's metric: its trials' count, median and median CI (at
    the level that makes the row's CIs simultaneous; None when too few trials)."""

    env_bytes: int | None
    cwd_bytes: int | None
    aslr: bool | None
    n: int
    median: float
    median_ci: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["median_ci"] = list(self.median_ci) if self.median_ci else None
        return d


@dataclass(frozen=True)
class ContextRow:
    """Whether one test's metric depends on the context, and the spread the context makes."""

    test: str
    metric: str
    worker: str | None
    n: int
    levels: int
    adjusted: bool
    kw_h: float | None
    kw_p: float | None
    significant: bool
    eta_squared: float | None
    spread: float | None
    spread_ci: tuple[float, float] | None
    spread_confidence: float | None
    by_level: tuple[ContextLevel, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["spread_ci"] = list(self.spread_ci) if self.spread_ci else None
        d["by_level"] = [level.to_dict() for level in self.by_level]
        return d


@dataclass(frozen=True)
class ContextResult:
    """Every test x metric (x worker), significant first, then by p; the family it was
    corrected over; the context columns read; the trials left out (unsuccessful, no value,
    or no context)."""

    rows: tuple[ContextRow, ...]
    columns: tuple[str, ...]
    alpha: float
    correction: str
    confidence: float
    family_size: int
    alpha_per_test: float | None
    excluded_trials: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"] = [r.to_dict() for r in self.rows]
        d["columns"] = list(self.columns)
        return d

    def significant(self) -> list[ContextRow]:
        return [r for r in self.rows if r.significant]

    def row(self, test: str, metric: str, worker: str | None = None) -> ContextRow | None:
        """The row of (test, metric[, worker]), or None when it has none."""
        for r in self.rows:
            if (r.test, r.metric, r.worker) == (test, metric, worker):
                return r
        return None

    def to_frame(self) -> pd.DataFrame:
        """One row per test x metric (x worker), the spread's interval as two columns."""
        import pandas as pd

        records = []
        for r in self.rows:
            d = r.to_dict()
            del d["by_level"], d["spread_ci"]
            lo, hi = r.spread_ci or (None, None)
            records.append({**d, "spread_lo": lo, "spread_hi": hi})
        columns = [f for f in ContextRow.__dataclass_fields__ if f not in ("by_level", "spread_ci")]
        return pd.DataFrame(records, columns=[*columns, "spread_lo", "spread_hi"])

    def levels_frame(self) -> pd.DataFrame:
        """One row per test x metric (x worker) x context level."""
        import pandas as pd

        records = []
        for r in self.rows:
            for level in r.by_level:
                lo, hi = level.median_ci or (None, None)
                records.append(
                    dict(
                        test=r.test,
                        metric=r.metric,
                        worker=r.worker,
                        **{k: v for k, v in asdict(level).items() if k != "median_ci"},
                        ci_lo=lo,
                        ci_hi=hi,
                    )
                )
        fields = [f for f in ContextLevel.__dataclass_fields__ if f != "median_ci"]
        return pd.DataFrame(
            records, columns=["test", "metric", "worker", *fields, "ci_lo", "ci_hi"]
        )


def context_values(df: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The context columns present with a value somewhere, as floats (``context_aslr`` 1/0,
    NaN where a trial has none), and their names; a one-line error when there are none or an
    entry is not a whole number of bytes >= 0 (or not true/false for ASLR)."""
    import numpy as np
    import pandas as pd

    out = {}
    for column in CONTEXT_COLUMNS:
        if column not in df.columns:
            continue
        raw = df[column]
        if column == "context_aslr":
            words = raw.astype(str).str.strip().str.lower()
            values = words.map(ASLR_WORDS).astype(float).to_numpy()
            whole = ~np.isnan(values)
            expected = "expected true or false"
        else:
            values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
            whole = np.isfinite(values) & (values >= 0) & (values == np.round(values))
            expected = "expected a whole number of bytes, 0 or more"
        bad = raw.notna().to_numpy() & ~whole
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise WashoutError.at(f"long format: row {df.index[i]}", column, raw.iloc[i], expected)
        if not np.isnan(values).all():
            out[column] = values
    if not out:
        raise WashoutError(
            f"long format: no context column ({', '.join(CONTEXT_COLUMNS)}) with a value: the "
            "context analysis needs trials that ran in randomized contexts"
        )
    return pd.DataFrame(out, index=df.index), tuple(out)


def _context_of(
    key: pd.Series, columns: tuple[str, ...]
) -> tuple[int | None, int | None, bool | None]:
    """A level's (env_bytes, cwd_bytes, aslr) from its context values, None where absent."""
    env, cwd, aslr = (key[c] if c in columns else None for c in CONTEXT_COLUMNS)
    return (
        None if env is None else int(env),
        None if cwd is None else int(cwd),
        None if aslr is None else bool(aslr),
    )


def kruskal_levels(
    group: np.ndarray, cell: np.ndarray, cell_group: np.ndarray, values: np.ndarray, groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per group (numbered 0 .. groups - 1): n, k (its cells, the levels with trials), and the
    tie-corrected Kruskal-Wallis H and p across its cells, all groups at once. ``cell``
    numbers each value's (group, level), ``cell_group`` each cell's group.

    H = [12 / (N (N+1)) * sum_i R_i^2 / n_i - 3 (N+1)] / [1 - sum_t (t^3 - t) / (N^3 - N)],
    R_i the rank sum of cell i with mid-ranks for ties within the group, t the tie-group
    sizes; p = P(chi^2_{k-1} > H) (Kruskal & Wallis 1952, eqs. 1.1 and 1.4, as
    ``scipy.stats.kruskal``). NaN where not made (k < 2, or n = k: no level with 2 trials);
    H NaN and p = 1 where every value is equal.
    """
    import numpy as np
    import pandas as pd
    from scipy.special import chdtrc

    rank = pd.Series(values).groupby(group).rank().to_numpy()
    n = np.bincount(group, minlength=groups).astype(float)
    counts = np.bincount(cell).astype(float)
    sums = np.bincount(cell, rank)
    k = np.bincount(cell_group, minlength=groups)
    squares = np.bincount(cell_group, sums**2 / counts, minlength=groups)
    ties = pd.DataFrame({"g": group, "v": values}).groupby(["g", "v"]).size()
    t = ties.to_numpy(dtype=float)
    tied = np.bincount(ties.index.get_level_values(0).to_numpy(), t**3 - t, minlength=groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = 12.0 / (n * (n + 1)) * squares - 3 * (n + 1)
        correction = 1.0 - tied / (n**3 - n)
        h = raw / correction
        p = chdtrc(np.maximum(k - 1, 1), h)
    made = (k >= 2) & (n > k)
    constant = made & ~(correction > 0)
    h = np.where(made & ~constant, h, np.nan)
    p = np.where(constant, 1.0, np.where(made, p, np.nan))
    return n.astype(int), k, h, p


def adjusted_values(
    ok: pd.DataFrame, group: np.ndarray, groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each trial's value with what the machine and the design did to it taken out, and per
    group (test x metric [x worker]) whether its run level was (the module doc): on the log
    scale where the group's values are all positive, the run level of
    :func:`run_level_values` (the other trials of the run, where that
    makes the group less variable), then the mean of the trial's stratum (order kind x first
    after the reset or not) replaced by the group's own mean, back in the metric's unit."""
    import numpy as np
    import pandas as pd

    trials = ok.assign(position=pd.to_numeric(ok["position"], errors="coerce"))
    y, log_scale, run_adjusted = run_level_values(trials, group, ["worker", "run", "metric"])
    first = (trials["position"] == 0).to_numpy()
    order = pd.factorize(trials["order"].astype(str))[0]
    stratum = pd.factorize(group * 2 * (order.max(initial=0) + 1) + order * 2 + first)[0]
    mean = np.bincount(stratum, y) / np.bincount(stratum)
    centre = np.bincount(group, y, groups) / np.maximum(np.bincount(group, None, groups), 1)
    y = y - mean[stratum] + centre[group]
    return np.where(log_scale[group], np.exp(y), y), run_adjusted


def run_level_values(
    trials: pd.DataFrame, cell: np.ndarray, run_keys: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, log_scale, run_adjusted)``: each trial's value on the model's scale with its run
    level (the mean deviation of the other trials of its run) taken out where that helps (the
    module doc's first step), and per cell (test x metric [x worker], numbered by ``cell``)
    whether the log scale and the run adjustment were used. ``trials`` needs value, position
    (0 = first after the reset) and ``run_keys``."""
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


def _spread(
    levels: Sequence[ContextLevel], achieved: Sequence[float | None], positive: bool
) -> tuple[float | None, tuple[float, float] | None, float | None]:
    """(spread, its simultaneous interval, the interval's confidence) of one row's levels
    (the module doc); None where its values are not all ``positive`` or a level has no CI."""
    medians = [level.median for level in levels]
    if len(levels) < 2 or not positive:
        return None, None, None
    spread = max(medians) / min(medians) - 1
    cis = [level.median_ci for level in levels]
    if any(ci is None for ci in cis):
        return spread, None, None
    los = [ci[0] for ci in cis if ci]
    his = [ci[1] for ci in cis if ci]
    interval = (max(0.0, max(los) / min(his) - 1), max(his) / min(los) - 1)
    confidence = 1.0 - sum(1.0 - a for a in achieved if a is not None)
    return spread, interval, confidence


def context_effect(
    df: pd.DataFrame,
    *,
    alpha: float = 0.05,
    correction: str = "bonferroni",
    confidence: float = 0.95,
    by_worker: bool = False,
    metric: str | None = None,
    adjust: bool = True,
) -> ContextResult:
    """Per test x metric: whether it depends on the context, its effect size and the spread
    the context alone makes (see the module doc).

    ``confidence``: of each row's spread interval (its levels' median CIs simultaneous by
    Bonferroni). ``by_worker``: one row per worker when the data has several (where the
    stack lands for a padding depends on each worker's own environment and paths, so one
    padding is not the same layout on two workers); otherwise pooled, ``worker`` None.
    ``metric``: only that metric. ``adjust``: take the run's level and the stratum's mean
    out of each trial's value first (the module doc); without, the values as they are.
    """
    import numpy as np

    level_alpha, method = check_alpha(alpha), check_method(correction)
    gamma = check_confidence(confidence)
    ok, excluded = usable_trials(df, "context analysis")
    contexts, columns = context_values(ok)
    has_context = contexts.notna().all(axis=1).to_numpy()
    wanted = np.ones(len(ok), bool) if metric is None else (ok["metric"] == metric).to_numpy()
    excluded += int((wanted & ~has_context).sum())
    keep = wanted & has_context
    ok, contexts = ok.loc[keep].reset_index(drop=True), contexts.loc[keep]
    split = by_worker and ok["worker"].nunique() > 1
    keys = ["worker", "test", "metric"] if split else ["test", "metric"]
    grouped = ok.groupby(keys, sort=True, observed=True)
    group, names = grouped.ngroup().to_numpy(), grouped.size().index
    levels = contexts.groupby(list(columns), sort=True)
    level = levels.ngroup().to_numpy()
    level_of = [_context_of(key, columns) for _, key in levels.size().index.to_frame().iterrows()]
    # cells: the (group, level) pairs with trials, sorted by group, then level
    cells, cell = np.unique(group.astype(np.int64) * len(level_of) + level, return_inverse=True)
    cell_group, cell_level = cells // max(len(level_of), 1), cells % max(len(level_of), 1)
    first_cell = np.searchsorted(cell_group, np.arange(len(names) + 1))
    if adjust and len(ok):
        values, adjusted = adjusted_values(ok, group, len(names))
    else:
        values, adjusted = ok["value"].to_numpy(dtype=float), np.zeros(len(names), dtype=bool)
    n, k, h, p = kruskal_levels(group, cell, cell_group, values, len(names))

    sorted_values = values[np.lexsort((values, cell))]
    counts = np.bincount(cell, minlength=len(cells))
    starts = np.cumsum(counts) - counts
    found: list[dict[str, Any]] = []
    for g, name in enumerate(names):
        level_conf = 1.0 - (1.0 - gamma) / max(int(k[g]), 1)
        by_level, achieved = [], []
        cells_of = np.arange(first_cell[g], first_cell[g + 1])
        for c in cells_of:
            x = sorted_values[starts[c] : starts[c] + counts[c]]
            rank = median_ci_rank(int(x.size), level_conf)
            by_level.append(
                ContextLevel(
                    *level_of[int(cell_level[c])],
                    n=int(x.size),
                    median=float(np.median(x)),
                    median_ci=(float(x[rank[0] - 1]), float(x[x.size - rank[0]])) if rank else None,
                )
            )
            achieved.append(rank[1] if rank else None)
        positive = bool(sorted_values[starts[cells_of]].min() > 0)
        spread, interval, spread_conf = _spread(by_level, achieved, positive)
        made = not math.isnan(p[g])
        worker, test, met = name if split else (None, *name)
        found.append(
            dict(
                test=str(test),
                metric=str(met),
                worker=None if worker is None else str(worker),
                n=int(n[g]),
                levels=int(k[g]),
                adjusted=bool(adjusted[g]),
                kw_h=None if math.isnan(h[g]) else float(h[g]),
                kw_p=float(p[g]) if made else None,
                eta_squared=max(0.0, (h[g] - k[g] + 1) / (n[g] - k[g]))
                if made and not math.isnan(h[g])
                else None,
                spread=spread,
                spread_ci=interval,
                spread_confidence=spread_conf,
                by_level=tuple(by_level),
            )
        )
    pvalues = [math.nan if r["kw_p"] is None else r["kw_p"] for r in found]
    significant, per_test = familywise(pvalues, level_alpha, method)
    rows = [ContextRow(**r, significant=s) for r, s in zip(found, significant)]
    rows.sort(key=lambda r: (not r.significant, 2.0 if r.kw_p is None else r.kw_p))
    return ContextResult(
        rows=tuple(rows),
        columns=columns,
        alpha=level_alpha,
        correction=method,
        confidence=gamma,
        family_size=sum(not math.isnan(q) for q in pvalues),
        alpha_per_test=per_test,
        excluded_trials=excluded,
    )


@dataclass(frozen=True)
class ContextMargin:
    """A comparison's margin set against the spread the context alone makes of its tests.

    ``margin`` = max(ratio, 1 / ratio) - 1 of the compared tests' ratio; ``spread`` and its
    bounds are the largest among the tests' rows (the test named ``moved``); ``verdict``:
    ``beyond`` (the margin exceeds every test's upper bound: no context level moved any of
    them that far), ``within`` (some test's lower bound reaches the margin: the context alone
    demonstrably moves it that far), ``undecided`` (in between), ``unknown`` (a test has no
    interval: too few trials per context level, or no context row). ``about``: the
    comparison it judges (a claim, or hyperfine's ranking: ``A vs B``).
    """

    tests: tuple[str, ...]
    metric: str
    worker: str | None
    ratio: float
    margin: float
    moved: str | None
    spread: float | None
    spread_ci: tuple[float, float] | None
    confidence: float | None
    verdict: str
    about: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tests"] = list(self.tests)
        d["spread_ci"] = list(self.spread_ci) if self.spread_ci else None
        return d

    def sentence(self) -> str:
        """The margin and the spread in words."""
        differ = f"{' and '.join(self.tests)} differ by {self.margin:.1%}"
        if self.verdict == UNKNOWN or self.spread_ci is None:
            return (
                f"{differ}; how far the context alone moves "
                f"{self.moved or ' or '.join(self.tests)} is unknown (too few trials per "
                "context level for an interval)"
            )
        lo, hi = self.spread_ci
        confidence = f"{self.confidence:.0%}" if self.confidence is not None else ""
        moves = f"the context alone moves {self.moved} by {self.spread:.1%}"
        if self.verdict == WITHIN:
            return (
                f"{differ}; {moves} (at least {lo:.1%}, {confidence}): "
                "the context alone can make this difference"
            )
        tail = (
            "beyond what the context alone makes"
            if self.verdict == BEYOND
            else "the context alone may make this difference"
        )
        return f"{differ}; {moves} (up to {hi:.1%}, {confidence}): {tail}"


def against_context(
    result: ContextResult,
    ratio: float,
    tests: Sequence[str],
    metric: str,
    worker: str | None = None,
) -> ContextMargin:
    """Set a comparison of ``tests`` on ``metric`` (their ratio, e.g. a claim's or the
    ranking's A / B) against the spread the context alone makes of each (:class:`ContextMargin`).

    A difference no larger than what the context alone makes of one test is one a single
    context could make: measured without randomizing the context (or with A and B in
    different contexts, as two builds are), it could be the context's doing (Mytkowicz et
    al. 2009). Judged on the bounds, so noise alone neither clears nor condemns a margin.
    With ``worker`` None, a result per worker (``by_worker``) gives each test the rows of
    every worker: the comparison pools them, so the largest spread of any worker counts.
    """
    if not (isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0):
        raise WashoutError(f"ratio = {ratio!r}: expected a positive number")
    margin = max(ratio, 1.0 / ratio) - 1.0
    rows: list[tuple[str, ContextRow | None]] = []
    for test in tests:
        own = [
            r
            for r in result.rows
            if (r.test, r.metric) == (test, metric) and worker in (None, r.worker)
        ]
        rows += [(test, r) for r in own] or [(test, None)]
    unbounded = [(t, r) for t, r in rows if r is None or r.spread_ci is None]
    if unbounded or not rows:
        moved, row = unbounded[0] if unbounded else (None, None)
        spread = row.spread if row is not None else None
        return ContextMargin(
            tuple(tests), metric, worker, float(ratio), margin, moved, spread, None, None, UNKNOWN
        )
    bounded = [r for _, r in rows if r is not None]
    upper = max(bounded, key=lambda r: r.spread_ci[1] if r.spread_ci else 0.0)
    lower = max(bounded, key=lambda r: r.spread_ci[0] if r.spread_ci else 0.0)
    if lower.spread_ci and margin <= lower.spread_ci[0]:
        verdict, named = WITHIN, lower
    elif upper.spread_ci and margin > upper.spread_ci[1]:
        verdict, named = BEYOND, upper
    else:
        verdict, named = UNDECIDED, upper
    return ContextMargin(
        tuple(tests),
        metric,
        worker,
        float(ratio),
        margin,
        named.test,
        named.spread,
        named.spread_ci,
        named.spread_confidence,
        verdict,
    )


def context_margins(
    result: ContextResult,
    claims: Sequence[ClaimResult] = (),
    comparison: Comparison | None = None,
) -> tuple[ContextMargin, ...]:
    """Every claim's and every ranking's margin set against the spread the context alone
    makes (:func:`against_context`): a claim's random-order ratio A / B, and each ranking's
    ratio of a test to the reference, the fastest unless one is named (hyperfine's "F ran r
    times faster than T"); those
    without a ratio are left out. ``about`` names the claim, or the ranking as ``F vs T``."""
    found = [
        replace(against_context(result, c.ratio, (c.a, c.b), c.metric), about=c.claim)
        for c in claims
        if c.ratio is not None and math.isfinite(c.ratio) and c.ratio > 0
    ]
    if comparison is not None:
        found += [
            replace(
                against_context(result, r.ratio, (r.fastest, r.test), comparison.metric),
                about=f"{r.fastest} vs {r.test}",
            )
            for r in comparison.rankings
            if math.isfinite(r.ratio) and r.ratio > 0
        ]
    return tuple(found)
