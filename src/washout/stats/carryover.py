"""Carryover: which test shifts the test after it (or the one two positions later), and what
the first trial after the reset pays, estimated together in one model.

Data: the random-order trials of each metric (and worker, when asked). A random run is a
uniform permutation of the tests (washout.harness.plan), so given that T is at position
k >= 1 its predecessor is equally likely to be each other test, whatever k is and whatever
happened in other runs; at k >= 2 the same holds for the test two positions earlier. Which
test T followed is therefore assigned at random, which is what the comparisons rest on
(Edgington & Onghena, "Randomization Tests", 4th ed. 2007, ch. 1). Fixed, reverse and
Williams runs are not used: their predecessors are tied to positions, so a predecessor
would be confounded with drift. A trial's predecessor is the test one position earlier in
the same run and worker, whatever that trial's status (a failed trial still ran and left its
state); a trial whose predecessor (or, at k >= 2, the test two positions earlier) was not
recorded is left out.

The model is the carry-over model of cross-over trials (Jones & Kenward, "Design and
Analysis of Cross-Over Trials", 3rd ed. 2014, sections 1.5 and 5.2: runs are the subjects,
tests the treatments, positions the periods), one per metric (and worker), fitted by least
squares. On the log scale (the value itself when a value is <= 0), trial i of test T in run
r at position k is

    y_i = u_r + mu_T + f_T [k = 0] + g_T(S1) [k >= 1] + h_T(S2) [k >= 2] + b_T k + e_i,

- u_r the run's level (every trial of a run shares it: load, frequency, a noisy
  neighbour), when subtracting the mean deviation of the other trials of a run makes the
  tests' later trials less variable (deviations from each test's mean at the same kind of
  position, first or later; a choice made without the predecessors, so it cannot favour any
  pair; ``run_adjusted``);
- f_T the first trial after the reset (S1 = the reset);
- g_T(S) what predecessor S leaves to T, coded so that sum_S g_T(S) = 0;
- h_T(S) what the test S two positions earlier leaves, measured from T's second trial after
  the reset (k = 1, where no test ran two positions earlier), so a lag-2 effect does not
  pass for a first-trial effect. Modelled with at least ``LAG2_TESTS`` tests (with three,
  the test two positions earlier is the one that did not run right before, so lag 2 cannot
  be told from lag 1) and when a typical test has at least ``LAG2_TRIALS`` trials at
  positions >= 2 per test that can precede it there (with fewer, the terms would take the
  degrees of freedom the other comparisons need, and a lag-2 effect is too weak to pass for
  lag 1 at a family-wise level: the calibration suite checks both);
- b_T a straight line over positions (drift), so the first trial is compared with the line
  through T's later trials extrapolated to position 0 (Draper & Smith, "Applied Regression
  Analysis", 3rd ed. 1998, ch. 14: dummy variables), not with a level a drift moved. It is
  always fitted: choosing it by a pretest makes the first-trial comparison too often
  significant when the chosen slope is noise;
- e_i independent, with a variance of T's own.

Fitting. The run levels are absorbed by weighted within-run centring (Frisch & Waugh 1933,
"Partial time regressions as compared with individual trends", Econometrica 1(4); Lovell 1963,
JASA 58(304)); the rest by weighted least squares with weights 1 / sigma_T^2 estimated from
the residuals of an unweighted fit (feasible generalized least squares: Carroll & Ruppert,
"Transformation and Weighting in Regression", 1988, section 2.1), with the Moore-Penrose
inverse, so a comparison the data cannot make is found and left out (NaN): c'beta is
estimable iff c lies in the row space of the design (Searle, "Linear Models", 1971, section
5.4). Because every effect is in one fit, a real "C after B" cannot pass for "A after B"
through the run levels (a level estimated without it carries C's shift to the other trials of
its run, whose predecessor is then never B).

Variances. The trials fall into variance groups: per test; for a pair its first trials after
the reset apart, and the trials after a predecessor set aside (below) apart, since a real
effect can change their spread (on ranks, a large effect bunches them at one end); the
trials a comparison compares are exchangeable under its null, so they share one. A group's
variance is its squared residuals over the sum of its (1 - h_ii), h the hat matrix's diagonal
(the per-group version of HC2: MacKinnon & White 1985, "Some heteroskedasticity-consistent
covariance matrix estimators with improved finite sample properties", J. Econometrics 29(3));
Var(c'beta) = sum_i (c' N^+ x_i w_i)^2 sigma_g(i)^2 (N the weighted normal matrix), with
Satterthwaite's degrees of freedom over the groups (Satterthwaite 1946, "An approximate
distribution of estimates of variance components", Biometrics Bulletin 2(6)). A group with
less than half a degree of freedom takes its test's variance; a comparison resting on a test
without any is not made.

What is reported, per comparison:
- pairs: "T right after S" (lag 1) against T after its other predecessors, "T two positions
  after S" (lag 2) against T two positions after the others: g_T(S) minus the mean of the
  other g_T (h_T); ``(reset)``: f_T minus the mean of the g_T, the first trial against the
  line through the later ones;
- Delta% = 100 (exp(d) - 1) of the estimate d (100 d / |mean of T's later values| on the raw
  scale), with its Bonferroni-simultaneous interval d +- t_{df, 1 - alpha/(2m)} se;
- t and p from the same model fitted to aligned ranks: y minus its run level from the fit
  above, ranked within the test and scaled to (0, 1) (the aligned rank transform: Salter &
  Fawcett 1993, "The ART test of interaction", Commun. Statist. Simul. 22(1); Conover & Iman
  1981, "Rank transformations as a bridge between parametric and nonparametric statistics",
  Am. Statist. 35(3)), so a few outliers (a daemon waking up) cannot make a finding; a
  metric with only two values (a count of 0 or 1 errors) gets Fisher's exact test of the
  trials compared instead (Fisher 1935, "The logic of inductive inference", JRSS 98(1)),
  because the normal approximation fails there;
- pooled first trial after the reset, per metric (and worker): the mean of the tests' resets,
  one contrast of the same model (with two tests only this mean is estimable: each test's
  own is confounded with the run levels).

Blame. A real effect of B on C makes "after B" part of every other predecessor's reference,
so the pairs are found step by step (per test and lag): the most significant pair is set
aside and the others are compared again with the predecessors not set aside, until no new
pair is significant; a set-aside pair is compared with those not set aside.

Family-wise over every comparison of the call (pairs of both lags, first-after-reset rows and
pooled rows, over tests, metrics and workers), by Bonferroni (default) or Holm
(washout.stats.family). The calibration suite (tests/test_calibration.py,
bench/calibration.py) checks every false-positive rate, also beside real effects of the
other kinds.

This is the carryover question of Duplyakin et al. (USENIX ATC 2023, "Avoiding the Ordering
Trap"): an order effect is usually one test leaving state (caches, page cache, allocator,
thermal) that the next one or two inherit, or a reset that leaves the first test to pay for
it. State that outlives two tests in between (lag 3) is not modelled, and is then blamed on
lag-1 and lag-2 pairs (docs/why.md gives how often).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from washout.errors import WashoutError
from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.frames import FrameView
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import scipy.sparse as sparse

RESET = "(reset)"
RANDOM_ORDER = "random"
LAG2_TESTS = 4
"""Lag-2 carryover is modelled from this many tests per run on (the module doc)."""
JOINT_COLUMNS = 800
"""Largest model fitted jointly (with run levels); a larger one is fitted test by test."""
LAG2_TRIALS = 5
"""... and when a typical test has this many trials at positions >= 2 per test that can run
two positions before it (the module doc)."""
_NONE = -2  # no test two positions earlier: the trial is first after the reset
_RESET, _LAG1, _LAG2, _MEAN, _TREND = range(5)  # kinds of column; the first three = the lag


@dataclass(frozen=True)
class CarryoverPair:
    """One comparison: test ``test`` right after ``predecessor`` (``lag`` 1), or two positions
    after it (``lag`` 2), versus after other tests; for ``(reset)``: its first trial after the
    reset versus its later ones.

    ``mean_after`` and ``mean_other`` are plain means of the raw values; ``delta_pct`` and
    ``ci`` come from the model (log scale, run levels taken out) and are what it judges.
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
    lag: int = 1

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci"] = list(self.ci)
        return d


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
    """``ok`` with ``predecessor`` and ``predecessor2`` columns: the tests one and two
    positions earlier in the same run and worker (looked up among all recorded trials),
    ``(reset)`` where the run starts there (position 0 for the first, 1 for the second; the
    second is None at position 0), NaN when that position was not recorded (or the trial's
    own position is unknown)."""
    import numpy as np
    import pandas as pd

    if pd.to_numeric(df["position"], errors="coerce").isna().all():
        raise WashoutError(
            "long format: column position has no values: the carryover "
            "analysis needs each trial's position in its run"
        )
    everything = df.copy()
    if "worker" not in everything.columns:
        everything["worker"] = "local"
    everything["position"] = pd.to_numeric(everything["position"], errors="coerce")
    keys = ["worker", "run", "position"]
    slots = everything.loc[everything["position"].notna(), [*keys, "test"]].drop_duplicates(keys)
    where = pd.MultiIndex.from_frame(slots[keys].astype({"position": float}))
    names = slots["test"].astype(str).to_numpy(dtype=object)
    out = ok.copy()
    out["position"] = pd.to_numeric(out["position"], errors="coerce").astype(float)
    for lag, name in ((1, "predecessor"), (2, "predecessor2")):
        earlier = out[keys].assign(position=out["position"] - lag)
        found = where.get_indexer(pd.MultiIndex.from_frame(earlier))
        out[name] = np.where(found >= 0, names[found], None)
        out.loc[(out["position"] == lag - 1).to_numpy(dtype=bool), name] = RESET
    out.loc[(out["position"] == 0).to_numpy(dtype=bool), "predecessor2"] = None
    return out


def carryover(
    df: pd.DataFrame,
    *,
    alpha: float = 0.05,
    correction: str = "bonferroni",
    by_worker: bool = False,
    metric: str | None = None,
) -> CarryoverResult:
    """Every (test, predecessor, lag, metric[, worker]) comparison and the first trial after
    the reset per test and pooled, largest |Delta%| first; see the module doc.

    ``by_worker``: analyse each worker separately when the data has several (a worker's own
    caches and daemons are what carries over); otherwise all workers are pooled and
    ``worker`` is None. ``metric``: only that metric (default: every metric).
    """
    import numpy as np

    level, method = check_alpha(alpha), check_method(correction)
    ok, excluded = usable_trials(df, "carryover analysis")
    if metric is not None:
        ok = ok[ok["metric"] == metric]
    ok = ok[ok["order"] == RANDOM_ORDER]
    ok = with_predecessors(df, ok)
    known = ok["predecessor"].notna() & ~(
        (ok["position"] >= 2).to_numpy(dtype=bool) & ok["predecessor2"].isna()
    )
    ok = ok[known].reset_index(drop=True)
    if ok.empty:
        return CarryoverResult([], [], level, method, 0, None, 0, excluded, (RANDOM_ORDER,))
    split = by_worker and ok["worker"].nunique() > 1
    group_keys = ["worker", "metric"] if split else ["metric"]
    keys, parts = [], []
    for key, frame in ok.groupby(group_keys, sort=True, observed=True):
        keys.append((str(key[-1]), str(key[0]) if split else None))
        parts += [
            (len(keys) - 1, _Group.of(part, *keys[-1], joint=joint))
            for part, joint in _parts(frame)
        ]
    # A real effect of B on C is part of every other predecessor's comparison group, so the
    # pairs are found step by step: each test's most significant pair (per lag) is set aside
    # and the others are compared again with the predecessors not set aside, until no new
    # pair is significant; a set-aside pair is compared with those not set aside.
    flagged = [np.zeros(len(g.layout.labels), dtype=bool) for _, g in parts]
    while True:
        found = [g.comparisons(f) for (_, g), f in zip(parts, flagged)]
        pairs = [c for rows_of_part, _ in found for c in rows_of_part]
        pooled = [
            _pooled([p for (k, _), (_, p) in zip(parts, found) if k == i]) for i in range(len(keys))
        ]
        family = [c.p for c in [*pairs, *pooled]]
        significant, per_test = adjust(family, level, method)
        start, new = 0, False
        for (_, g), (rows_of_part, _), f in zip(parts, found, flagged):
            hit = np.array(significant[start : start + len(rows_of_part)], dtype=bool)
            start += len(rows_of_part)
            new |= g.set_aside(np.array([c.p for c in rows_of_part]), hit & ~f, f)
        if not new:
            break
    m = int(np.isfinite(np.array(family, dtype=float)).sum())
    rows = [c.pair(level, m, s) for c, s in zip(pairs, significant)]
    first_rows = [
        c.first_after_reset(level, m, s)
        for c, s in zip(pooled, significant[len(pairs) :])
        if c.tests > 0
    ]
    rows.sort(
        key=lambda q: (
            -abs(q.delta_pct) if np.isfinite(q.delta_pct) else 0.0,
            q.p if np.isfinite(q.p) else 2.0,
        )
    )
    return CarryoverResult(
        pairs=rows,
        first_after_reset=first_rows,
        alpha=level,
        correction=method,
        family_size=m,
        alpha_per_test=per_test,
        runs_used=int(ok[["worker", "run"]].drop_duplicates().shape[0]),
        excluded_trials=excluded,
        orders_used=(RANDOM_ORDER,),
    )


@dataclass(frozen=True)
class _Comparison:
    """One contrast of a group's model: the estimate on the model's scale with its standard
    error and degrees of freedom (for Delta% and the interval), t and p from the ranks (or
    Fisher's exact test), and the plain description of the trials compared."""

    test: str
    predecessor: str
    lag: int
    metric: str
    worker: str | None
    run_adjusted: bool
    n_after: int
    n_other: int
    mean_after: float
    mean_other: float
    estimate: float
    se: float
    df: float
    log_scale: bool
    base: float
    t: float
    p: float
    rank_estimate: float = float("nan")
    rank_se: float = float("nan")
    rank_df: float = float("nan")
    tests: int = 0

    def interval(self, level: float, m: int) -> tuple[float, float, float]:
        """Delta% and its Bonferroni-simultaneous interval over a family of ``m``."""
        import numpy as np
        from scipy.special import stdtrit

        q = stdtrit(self.df, 1.0 - level / (2 * max(m, 1))) if self.df > 0 else np.nan
        lo, mid, hi = (
            _delta_pct(self.estimate + k * q * self.se, self.log_scale, self.base)
            for k in (-1, 0, 1)
        )
        return mid, lo, hi

    def pair(self, level: float, m: int, significant: bool) -> CarryoverPair:
        delta, lo, hi = self.interval(level, m)
        return CarryoverPair(
            test=self.test,
            predecessor=self.predecessor,
            metric=self.metric,
            worker=self.worker,
            n_after=self.n_after,
            n_other=self.n_other,
            mean_after=self.mean_after,
            mean_other=self.mean_other,
            delta_pct=delta,
            ci=(lo, hi),
            t=self.t,
            p=self.p,
            significant=significant,
            run_adjusted=self.run_adjusted,
            lag=self.lag,
        )

    def first_after_reset(self, level: float, m: int, significant: bool) -> FirstAfterReset:
        delta, lo, hi = self.interval(level, m)
        return FirstAfterReset(
            metric=self.metric,
            worker=self.worker,
            tests=self.tests,
            delta_pct=delta,
            ci=(lo, hi),
            p=self.p,
            significant=significant,
        )


def _delta_pct(diff: float, log_scale: bool, base: float) -> float:
    """Delta% of a difference: 100 (exp(d) - 1) on the log scale, 100 d / |base| otherwise."""
    import math

    if not math.isfinite(diff):
        return math.nan
    if log_scale:
        return 100.0 * math.expm1(min(diff, 700.0))
    return 100.0 * diff / abs(base) if base else math.nan


@dataclass(frozen=True)
class _Design:
    """A group's design without the run levels: the columns of every test (each zero outside
    its test's trials), each trial's test and run, and which trials have a run level."""

    matrix: sparse.csr_matrix
    test: np.ndarray
    run: np.ndarray
    runs: int
    adjusted: np.ndarray


@dataclass(frozen=True)
class _Fit:
    """Weighted least squares of one response on a design with the run levels absorbed."""

    design: _Design
    beta: np.ndarray
    run_mean: np.ndarray
    """Per run, the weighted mean of its adjusted trials' design rows (xbar_r)."""
    weights: np.ndarray
    inverse: np.ndarray
    row_space: np.ndarray
    run_level: np.ndarray
    residual: np.ndarray
    leverage: np.ndarray
    scale: float
    """The largest |y| after taking out the run means: below 1e-9 of it is rounding error."""

    def variances(self, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(variance, dof)`` per variance group (numbered by ``group``, each within
        one test): the group's squared residuals over its sum of (1 - h_ii); a group without
        degrees of freedom of its own (below one half) takes its test's (NaN for a test
        without any)."""
        import numpy as np

        size = int(group.max()) + 1
        tests = int(self.design.test.max()) + 1
        test_of = np.zeros(size, dtype=int)
        test_of[group] = self.design.test
        free = 1.0 - self.leverage
        squares = self.residual**2
        dof = np.bincount(group, free, size)
        test_dof = np.bincount(self.design.test, free, tests)
        with np.errstate(invalid="ignore", divide="ignore"):
            variance = np.bincount(group, squares, size) / dof
            test_variance = np.bincount(self.design.test, squares, tests) / test_dof
        own = dof >= 0.5
        variance = np.where(own, variance, test_variance[test_of])
        dof = np.where(own, dof, test_dof[test_of])
        bad = ~(dof >= 0.5)
        return np.where(bad, np.nan, variance), np.where(bad, 0.0, dof)

    def contrasts(
        self, c: np.ndarray, group: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(estimate, se, df)`` of each column of ``c`` (NaN where it is not estimable or
        not defined): the sandwich variance over the variance groups ``group`` (one number
        per trial) with Satterthwaite's degrees of freedom (module doc)."""
        import numpy as np

        if c.shape[1] == 0:
            empty = np.empty(0)
            return empty, empty, empty
        defined = np.isfinite(c).all(axis=0)
        c = np.where(defined, c, 0.0)
        estimable = defined & (
            np.linalg.norm(c - self.row_space @ (self.row_space.T @ c), axis=0)
            <= 1e-7 * np.maximum(np.linalg.norm(c, axis=0), 1e-300)
        )
        estimate = self.beta @ c
        g = _centred_times(self.design, self.run_mean, self.inverse @ c) * self.weights[:, None]
        variance, dof = self.variances(group)
        share = np.zeros((variance.size, c.shape[1]))
        np.add.at(share, group, g * g)
        material = share > 1e-9 * np.maximum(share.sum(axis=0), 1e-300)
        part = share * np.nan_to_num(variance)[:, None]
        var = part.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            df = var**2 / (part**2 / np.where(dof > 0, dof, 1.0)[:, None]).sum(axis=0)
        # a group without degrees of freedom leaves the comparisons it enters undefined
        usable = estimable & ~(material & ~(dof > 0)[:, None]).any(axis=0)
        nan = np.full(c.shape[1], np.nan)
        return (
            np.where(usable, estimate, nan),
            np.where(usable, np.sqrt(np.maximum(var, 0.0)), nan),
            np.where(usable, np.where(var > 0, df, 1e12), nan),  # no spread: any df
        )


def _fit(design: _Design, y: np.ndarray, weights: np.ndarray) -> _Fit:
    """Weighted least squares of ``y`` on ``design`` plus a level per run for the adjusted
    trials (absorbed by weighted within-run centring), with the residuals and the hat
    matrix's diagonal the variances need (module doc). The design is sparse (a column lives
    on one test's trials), so the centred design x_i - xbar_r is never formed: N = X'WX -
    sum_r W_r xbar_r xbar_r', and likewise for the products below."""
    import numpy as np
    import scipy.sparse as sparse

    x, run, runs = design.matrix, design.run, design.runs
    w = weights
    on = design.adjusted
    wa = np.where(on, w, 0.0)
    total = np.bincount(run, wa, runs)
    safe = np.where(total > 0, total, 1.0)
    by_run = sparse.csr_matrix((wa / safe[run], (run, np.arange(run.size))), shape=(runs, run.size))
    x_bar = np.asarray((by_run @ x).todense())
    y_bar = by_run @ y
    normal = np.asarray((x.T @ x.multiply(w[:, None])).todense()) - (x_bar.T * total) @ x_bar
    values, vectors = np.linalg.eigh(normal)
    keep = values > 1e-10 * max(float(values.max(initial=0.0)), 1e-300)
    row_space = vectors[:, keep]
    inverse = (row_space / values[keep]) @ row_space.T
    y_c = y - np.where(on, y_bar[run], 0.0)
    beta = inverse @ (x.T @ (w * y_c) - x_bar.T @ np.bincount(run, wa * y_c, runs))
    residual = y_c - _centred_times(design, x_bar, beta)
    scale = float(np.abs(y_c).max(initial=0.0))  # a residual below rounding error is none
    m = np.asarray(x @ inverse)
    mean = x_bar @ inverse
    quad = np.asarray(x.multiply(m).sum(axis=1)).ravel()
    cross = np.einsum("ij,ij->i", m, x_bar[run])
    bar = np.einsum("ij,ij->i", mean, x_bar)[run]
    leverage = w * np.where(on, quad - 2.0 * cross + bar, quad)
    leverage += np.where(on, wa / safe[run], 0.0)
    return _Fit(
        design,
        beta,
        x_bar,
        w,
        inverse,
        row_space,
        y_bar - x_bar @ beta,
        np.where(np.abs(residual) > 1e-9 * scale, residual, 0.0),
        leverage,
        scale,
    )


def _centred_times(design: _Design, run_mean: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(x_i - xbar_r) v per trial (xbar_r, the run's row of ``run_mean``, only for the
    adjusted trials), for a vector or the columns of a matrix."""
    import numpy as np

    shift = (run_mean @ v)[design.run]
    on = design.adjusted if v.ndim == 1 else design.adjusted[:, None]
    return np.asarray(design.matrix @ v) - np.where(on, shift, 0.0)


def _weights(fit: _Fit, group: np.ndarray) -> np.ndarray:
    """1 / sigma^2 per trial from a fit's variances by ``group`` (a group without an
    estimate, or with none above 0, gets the typical weight)."""
    import numpy as np

    var, _ = fit.variances(group)
    good = np.isfinite(var) & (var > 0)
    typical = float(np.median(var[good])) if good.any() else 1.0
    var = np.where(good, np.maximum(var, 1e-12 * typical), typical)
    return 1.0 / var[group]


def _model(design: _Design, y: np.ndarray) -> _Fit:
    """The fit the comparisons come from: unweighted, then weighted by the tests' variances
    (per test, not per variance group: a group whose values bunch up, the first trials'
    ranks with a large first-trial effect, would otherwise pin the run levels)."""
    import numpy as np

    return _fit(design, y, _weights(_fit(design, y, np.ones_like(y)), design.test))


def _aligned_ranks(model: _Fit, effect: np.ndarray) -> _Fit:
    """The model on aligned ranks: the residuals plus one kind of ``effect`` (everything else
    the fit found taken out), ranked within each test and scaled to (0, 1) (module doc).
    Unweighted: ranks within a test spread alike in every test."""
    import numpy as np
    import pandas as pd

    test = model.design.test
    aligned = model.residual + effect
    aligned[np.abs(aligned) <= 1e-9 * model.scale] = 0.0  # rounding error is a tie
    rank = pd.Series(aligned).groupby(test).rank().to_numpy()
    score = rank / (np.bincount(test)[test] + 1.0) - 0.5
    return _fit(model.design, score, np.ones_like(score))


def _student_p(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Two-sided p of Student's t (NaN where t or the degrees of freedom are undefined)."""
    import numpy as np
    from scipy.special import stdtr

    t, df = np.asarray(t, dtype=float), np.asarray(df, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(
            np.isnan(t) | ~(df > 0),
            np.nan,
            2.0 * stdtr(np.where(df > 0, df, 1.0), -np.abs(np.nan_to_num(t))),
        )


def _t(estimate: np.ndarray, se: np.ndarray) -> np.ndarray:
    """estimate / se; with no spread, 0 for no difference and undefined (NaN: no comparison)
    for any other, since a handful of ranks can fall exactly on a line by chance."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(se > 0, estimate / se, np.where(estimate == 0, 0.0, np.nan))


def _run_adjusted(z: np.ndarray, test: np.ndarray, first: np.ndarray, run: np.ndarray) -> bool:
    """Whether subtracting their run's level makes the tests' later trials less variable
    (summed over the tests): the level a trial sees is the mean deviation of the other trials
    of its run, a deviation being a value minus its test's mean at the same kind of position
    (module doc). One answer for all the tests: with only some tests given run levels, the
    levels would take most of what those tests' trials say."""
    import numpy as np

    tests = int(test.max()) + 1
    kind = test * 2 + first
    typical = np.bincount(kind, z, 2 * tests) / np.maximum(np.bincount(kind, None, 2 * tests), 1)
    dev = z - typical[kind]
    total, count = np.bincount(run, dev), np.bincount(run)
    others = count[run] - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        level = np.where(others > 0, (total[run] - dev) / others, np.nan)
    later = ~first & np.isfinite(level)

    def spread(x: np.ndarray) -> float:
        n = np.bincount(test[later], None, tests)
        mean = np.bincount(test[later], x[later], tests) / np.maximum(n, 1)
        return float(np.bincount(test[later], (x[later] - mean[test[later]]) ** 2, tests).sum())

    return bool(later.any()) and spread(z - np.nan_to_num(level)) < spread(z)


@dataclass(frozen=True)
class _Group:
    """One metric's (and worker's) model, fitted once: on the log (or raw) values for Delta%
    and its interval, on the aligned ranks for t and p; and what describes each comparison."""

    metric: str
    worker: str | None
    names: list[str]
    test: np.ndarray
    value: np.ndarray
    position: np.ndarray
    pred1: np.ndarray
    pred2: np.ndarray
    log_scale: bool
    run_adjusted: bool
    layout: _Layout
    model: _Fit
    ranks: tuple[_Fit | None, _Fit | None]
    """The model on the ranks aligned for lag 1 and for lag 2 (None without such columns;
    those of the first trials depend on the pairs set aside: :meth:`comparisons`)."""
    reset_ranks: dict[bytes, _Fit] = field(default_factory=dict, compare=False)
    """The model on the ranks aligned for the first trials, per set of pairs set aside."""

    @staticmethod
    def of(frame: pd.DataFrame, metric: str, worker: str | None, joint: bool) -> _Group:
        """The model of ``frame``'s trials (one metric and worker); ``joint``: with run
        levels when they help (else without, as for a test fitted on its own)."""
        import numpy as np

        # the tests of these runs: those fitted here and those that ran before them
        seen = {*frame["test"].astype(str), *frame["predecessor"].astype(str)}
        seen |= set(frame["predecessor2"].dropna().astype(str))
        names = sorted(seen - {RESET})
        code = {name: i for i, name in enumerate(names)}
        test = frame["test"].astype(str).map(code).to_numpy()
        position = frame["position"].to_numpy(dtype=float)
        value = frame["value"].to_numpy(dtype=float)
        pred1 = frame["predecessor"].astype(str).map(code).fillna(-1).to_numpy(dtype=int)
        second = frame["predecessor2"]
        pred2 = np.where(
            second.isna().to_numpy(),
            _NONE,
            second.astype(str).map(code).fillna(-1).to_numpy(dtype=float),
        ).astype(int)
        run = frame.groupby(["worker", "run"], sort=False, observed=True).ngroup().to_numpy()
        runs = int(run.max()) + 1
        log_scale = bool((value > 0).all())
        y = np.log(value) if log_scale else value
        adjusted = np.full(test.size, joint and _run_adjusted(y, test, position == 0, run))
        adjusted &= np.bincount(run, None, runs)[run] >= 2
        tests = len(names)
        deep = np.bincount(test[position >= 2], None, tests)[np.unique(test)]
        lag2 = tests >= LAG2_TESTS and bool(np.median(deep) >= LAG2_TRIALS * (tests - 1))
        layout = _Layout.of(test, position, pred1, pred2, tests, lag2)
        design = _Design(layout.matrix, test, run, runs, adjusted)
        model = _model(design, y)
        lags = [
            _aligned_ranks(model, layout.matrix[:, mine] @ model.beta[mine]) if mine.any() else None
            for mine in (layout.kinds == _LAG1, layout.kinds == _LAG2)
        ]
        return _Group(
            metric,
            worker,
            names,
            test,
            value,
            position,
            pred1,
            pred2,
            log_scale,
            bool(adjusted.any()),
            layout,
            model,
            (lags[0], lags[1]),
        )

    def comparisons(self, flagged: np.ndarray) -> tuple[list[_Comparison], _Comparison]:
        """Every comparison of the layout, and the pooled first trial after the reset, with
        the ``flagged`` pairs set aside from the other comparisons' reference."""
        import numpy as np

        lay = self.layout
        lags = np.array([lag for _, _, lag in lay.labels] + [0])
        estimate, se, df, r_estimate, r_se, r_df = (np.full(lags.size, np.nan) for _ in range(6))
        contrasts = lay.contrasts(flagged)
        # aligned for the first trials: their effect is each test's reset contrast (the first
        # trial against the predecessors not set aside), added back to its first trials
        key = (flagged & (lags[:-1] == 1)).tobytes()
        if key not in self.reset_ranks:
            effect = np.zeros(self.test.size)
            for i, (code, _, lag) in enumerate(lay.labels):
                if lag == 0:
                    at = (self.test == code) & (self.position == 0)
                    effect[at] = self.model.beta @ contrasts[:, i]
            self.reset_ranks[key] = _aligned_ranks(self.model, effect)
        for lag, ranks in enumerate((self.reset_ranks[key], *self.ranks)):
            which = lags == lag
            if ranks is None or not which.any():
                continue
            group = self.variance_groups(flagged, first_apart=lag > 0)
            for fit, targets in (
                (self.model, (estimate, se, df)),
                (ranks, (r_estimate, r_se, r_df)),
            ):
                for target, part in zip(targets, fit.contrasts(contrasts[:, which], group)):
                    target[which] = part
        t = _t(r_estimate, r_se)
        p = _student_p(t, r_df)
        later = self.position >= 1
        distinct = np.array(
            [np.unique(self.value[self.test == i]).size for i in range(len(self.names))]
        )
        rows = []
        for i, (code, label, lag) in enumerate(lay.labels):
            mine = self.test == code
            if lag == 0:
                after, other = mine & ~later, mine & later
            else:
                pred = self.pred1 if lag == 1 else self.pred2
                at = mine & (self.position >= lag) & (pred >= 0)
                after = at & (pred == label)
                aside = {lay.labels[j][1] for j in lay.groups_of(code, lag) if flagged[j]}
                other = at & (pred != label) & ~np.isin(pred, list(aside))
            p_i = float(p[i])
            if distinct[code] == 2 and np.isfinite(p_i):
                p_i = _fisher(self.value, after, other)
            rows.append(
                _Comparison(
                    test=self.names[code],
                    predecessor=RESET if lag == 0 else self.names[label],
                    lag=max(lag, 1),
                    metric=self.metric,
                    worker=self.worker,
                    run_adjusted=self.run_adjusted,
                    n_after=int(after.sum()),
                    n_other=int(other.sum()),
                    mean_after=_mean(self.value[after]),
                    mean_other=_mean(self.value[other]),
                    estimate=float(estimate[i]),
                    se=float(se[i]),
                    df=float(df[i]),
                    log_scale=self.log_scale,
                    base=_mean(self.value[mine & later]),
                    t=float(t[i]),
                    p=p_i,
                )
            )
        pooled = _Comparison(
            test="",
            predecessor=RESET,
            lag=1,
            metric=self.metric,
            worker=self.worker,
            run_adjusted=self.run_adjusted,
            n_after=int((~later).sum()),
            n_other=int(later.sum()),
            mean_after=_mean(self.value[~later]),
            mean_other=_mean(self.value[later]),
            estimate=float(estimate[-1]),
            se=float(se[-1]),
            df=float(df[-1]),
            log_scale=self.log_scale,
            base=_mean(self.value[later]),
            t=float(t[-1]),
            p=float(p[-1]),
            rank_estimate=float(r_estimate[-1]),
            rank_se=float(r_se[-1]),
            rank_df=float(r_df[-1]),
            tests=lay.reset_tests,
        )
        return rows, pooled

    def variance_groups(self, flagged: np.ndarray, first_apart: bool) -> np.ndarray:
        """Per trial, its variance group: its test, and whether it follows (at lag 1 or 2) a
        predecessor set aside or (``first_apart``) is a first trial after the reset. Under a
        comparison's null the trials it compares are exchangeable and share a variance;
        trials that a real effect moves may not (their ranks bunch up at one end). So the
        pairs are judged with the first trials apart, the first trials with them in."""
        import numpy as np
        import pandas as pd

        aside = [np.full(self.test.size, -1), np.full(self.test.size, -1)]
        for j, (code, label, lag) in enumerate(self.layout.labels):
            if lag and flagged[j]:
                pred = self.pred1 if lag == 1 else self.pred2
                hit = (self.test == code) & (pred == label) & (self.position >= lag)
                aside[lag - 1][hit] = label
        first = (self.position == 0) & first_apart
        keys = pd.MultiIndex.from_arrays([self.test, first, aside[0], aside[1]])
        return keys.factorize()[0]

    def set_aside(self, p: np.ndarray, candidates: np.ndarray, flagged: np.ndarray) -> bool:
        """Flag, per test and lag, the candidate pair with the smallest p (in place); whether
        any was."""
        new = False
        for group in self.layout.groups:
            mine = [j for j in group if candidates[j]]
            if mine:
                flagged[min(mine, key=lambda j: p[j])] = True
                new = True
        return new


def _parts(frame: pd.DataFrame) -> list[tuple[pd.DataFrame, bool]]:
    """One metric's (and worker's) trials in the parts that are modelled on their own, and
    whether with run levels: tests that never share a run share no parameter (a study of
    several machine types), so each set of tests linked by runs is its own model; one with
    more than ``JOINT_COLUMNS`` columns is fitted test by test, without run levels (the joint
    fit's cost grows with the cube of its columns, some 2 (tests per run)^2)."""
    import numpy as np
    import pandas as pd
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    test = frame["test"].astype(str).factorize()[0]
    run = frame.groupby(["worker", "run"], sort=False, observed=True).ngroup().to_numpy()
    tests = int(test.max()) + 1
    links = coo_matrix(
        (np.ones(test.size), (test, tests + run)), shape=(tests + run.max() + 1,) * 2
    )
    _, label = connected_components(links, directed=False)
    out = []
    for component in pd.unique(label[test]):
        part = frame[label[test] == component]
        k = part["test"].nunique()
        if 2 * k * (k + 1) <= JOINT_COLUMNS:
            out.append((part, True))
        else:
            out += [(one, False) for _, one in part.groupby("test", sort=True, observed=True)]
    return out


def _pooled(parts: list[_Comparison]) -> _Comparison:
    """The pooled first trial after the reset over parts fitted on their own (independent):
    their mean weighted by their tests (over the log-scale parts when the scales differ),
    its variance the sum of theirs, Satterthwaite's degrees of freedom, for the model and for
    the ranks alike."""
    import math
    from dataclasses import replace

    import numpy as np

    if len(parts) == 1:
        return parts[0]
    logs = [c for c in parts if c.log_scale and c.tests > 0]
    use = logs if logs and len(logs) < len(parts) else [c for c in parts if c.tests > 0]
    total = sum(c.tests for c in use)

    def combine(pairs: list[tuple[float, float, float]]) -> tuple[float, float, float]:
        parts_var = [(c.tests / total) ** 2 * se**2 for c, (_, se, _) in zip(use, pairs)]
        var = sum(parts_var)
        estimate = sum(c.tests / total * e for c, (e, _, _) in zip(use, pairs))
        shares = [v**2 / d for v, (_, _, d) in zip(parts_var, pairs) if v > 0]
        if var == 0:  # no spread at all: as good as a normal quantile
            df = 1e12
        else:  # NaN where no part has a finite variance (tests fitted on too few trials)
            df = var**2 / sum(shares) if shares else math.nan
        return estimate, math.sqrt(var), df

    if not use:
        return parts[0]
    estimate, se, df = combine([(c.estimate, c.se, c.df) for c in use])
    r_estimate, r_se, r_df = combine([(c.rank_estimate, c.rank_se, c.rank_df) for c in use])
    t = float(_t(np.array(r_estimate), np.array(r_se)))
    return replace(
        use[0],
        n_after=sum(c.n_after for c in use),
        n_other=sum(c.n_other for c in use),
        estimate=estimate,
        se=se,
        df=df,
        base=sum(c.tests / total * c.base for c in use),
        t=t,
        p=float(_student_p(np.array(t), np.array(r_df))),
        rank_estimate=r_estimate,
        rank_se=r_se,
        rank_df=r_df,
        tests=total,
    )


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else float("nan")


def _fisher(value: np.ndarray, after: np.ndarray, other: np.ndarray) -> float:
    """Fisher's exact test of the share of the higher value, after against other (two-sided
    by doubling the smaller tail, capped at 1): the randomization distribution itself,
    hypergeometric for a 0/1 outcome."""
    from scipy.stats import hypergeom

    high = value == value[after | other].max()
    x, n = int((high & after).sum()), int(after.sum())
    k, total = int((high & (after | other)).sum()), int((after | other).sum())
    if n == 0 or total == n:
        return float("nan")
    tails = min(hypergeom.sf(x - 1, total, k, n), hypergeom.cdf(x, total, k, n))
    return float(min(1.0, 2.0 * tails))


@dataclass(frozen=True)
class _Layout:
    """The columns of a group's design (module doc) and the comparisons to report:
    ``labels`` (test, predecessor code or -1 for the reset, lag 0 for the reset, 1 or 2)."""

    matrix: sparse.csr_matrix
    kinds: np.ndarray
    """Per column, the kind of effect: ``_MEAN``, ``_RESET``, ``_LAG1``, ``_LAG2``, ``_TREND``."""
    labels: list[tuple[int, int, int]]
    levels: list[np.ndarray]
    """Per label, the coefficients giving its level (a row of the contrast before centring)."""
    groups: list[list[int]]
    """Indices into ``labels`` of each factor (a test's predecessors at one lag)."""
    reset_columns: list[int]

    @property
    def reset_tests(self) -> int:
        return len(self.reset_columns)

    @staticmethod
    def of(
        test: np.ndarray,
        position: np.ndarray,
        pred1: np.ndarray,
        pred2: np.ndarray,
        tests: int,
        lag2: bool,
    ) -> _Layout:
        import numpy as np
        import scipy.sparse as sparse

        n = test.size
        columns: list[np.ndarray] = []  # per column, its nonzero rows and their values
        values: list[np.ndarray] = []
        kinds: list[int] = []
        labels: list[tuple[int, int, int]] = []
        levels: list[list[tuple[int, float]]] = []
        groups: list[list[int]] = []
        reset_columns: list[int] = []

        def add(x: np.ndarray, kind: int) -> int:
            columns.append(np.flatnonzero(x))
            values.append(x[columns[-1]].astype(float))
            kinds.append(kind)
            return len(columns) - 1

        for t in np.unique(test).tolist():
            mine = test == t
            later = mine & (position >= 1)
            add(mine, _MEAN)
            if (mine & (position == 0)).any() and later.any():
                f = add(mine & (position == 0), _RESET)
                reset_columns.append(f)
                labels.append((t, -1, 0))
                levels.append([(f, 1.0)])
            # lag 1: effect coding, sum of the predecessors' effects 0
            seen = sorted(set(pred1[later & (pred1 >= 0)].tolist()))
            if len(seen) >= 2:
                cols = [
                    add((later & (pred1 == s)).astype(float) - (later & (pred1 == seen[-1])), _LAG1)
                    for s in seen[:-1]
                ]
                group = []
                for j, s in enumerate(seen):
                    group.append(len(labels))
                    labels.append((t, s, 1))
                    levels.append([(cols[j], 1.0)] if j < len(cols) else [(c, -1.0) for c in cols])
                groups.append(group)
            # lag 2: treatment coding against the second trial after the reset
            if lag2:
                deep = mine & (position >= 2)
                seen2 = sorted(set(pred2[deep & (pred2 >= 0)].tolist()))
                cols2 = [add(deep & (pred2 == s), _LAG2) for s in seen2]
                if len(seen2) >= 2:
                    group = []
                    for s, c in zip(seen2, cols2):
                        group.append(len(labels))
                        labels.append((t, s, 2))
                        levels.append([(c, 1.0)])
                    groups.append(group)
            if len(set(position[later].tolist())) >= 2:
                add(np.where(mine, position, 0.0), _TREND)
        matrix = sparse.csc_matrix(
            (
                np.concatenate(values or [np.empty(0)]),
                (
                    np.concatenate(columns or [np.empty(0, dtype=int)]),
                    np.repeat(np.arange(len(columns)), [c.size for c in columns]),
                ),
            ),
            shape=(n, len(columns)),
        ).tocsr()
        dense_levels = []
        for entries in levels:
            row = np.zeros(matrix.shape[1])
            for c, v in entries:
                row[c] = v
            dense_levels.append(row)
        return _Layout(matrix, np.array(kinds), labels, dense_levels, groups, reset_columns)

    def groups_of(self, test: int, lag: int) -> list[int]:
        """The labels of ``test``'s predecessors at ``lag`` (empty without such a factor)."""
        return next(
            (
                g
                for g in self.groups
                if self.labels[g[0]][0] == test and self.labels[g[0]][2] == lag
            ),
            [],
        )

    def contrasts(self, flagged: np.ndarray) -> np.ndarray:
        """One column per label and a last one for the pooled reset: a pair's level minus the
        mean level of the test's other predecessors at that lag that are not ``flagged`` (NaN
        when there is none); a reset's coefficient minus the mean level of the test's
        predecessors not flagged; the pooled reset the mean of the tests' resets."""
        import numpy as np

        full = self.matrix.shape[1]
        c = np.zeros((full, len(self.labels) + 1))
        for group in self.groups:
            for i in group:
                reference = [j for j in group if j != i and not flagged[j]]
                c[:, i] = (
                    self.levels[i] - np.mean([self.levels[j] for j in reference], axis=0)
                    if reference
                    else np.nan
                )
        resets = [i for i, label in enumerate(self.labels) if label[2] == 0]
        for i in resets:
            group = [j for j in self.groups_of(self.labels[i][0], 1) if not flagged[j]]
            c[:, i] = self.levels[i]
            if group:
                c[:, i] -= np.mean([self.levels[j] for j in group], axis=0)
        if resets:
            c[:, -1] = c[:, resets].mean(axis=1)
        return c


def carryover_frame(result: CarryoverResult) -> pd.DataFrame:
    """The pairs as a DataFrame, one row per pair, in the result's order."""
    import pandas as pd

    columns = list(CarryoverPair.__dataclass_fields__)
    return pd.DataFrame([p.to_dict() for p in result.pairs], columns=columns)
