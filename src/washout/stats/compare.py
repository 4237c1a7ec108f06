"""The comparison hyperfine users expect: per test mean ± σ, median, min…max, user and
system CPU time and max RSS, then which test is fastest and by how much, order-safe.

Per test (successful trials of every order kind; warmups are not ``ok`` and so never
count): the arithmetic mean, the sample standard deviation (n - 1 in the denominator, as
hyperfine reports σ), the median, min and max of the compared metric (``wall`` unless told),
and the means of the resource metrics ``user``, ``system`` (CPU seconds of the trial's
process tree) and ``max_rss`` (bytes) where trials have them.

The ranking compares every other test with the fastest (the lowest median under random
order), or with the test named as the reference (hyperfine's ``--reference``): "F ran r
times faster than T" (r below 1: T ran 1/r times faster than F). ``r`` is the
Hodges-Lehmann estimate of the per-run ratio T / F over the random-order runs (the
order-safe estimate), paired by run as
a claim is (:mod:`washout.stats.claims`: a test's trials in one run averaged, the log
ratio of each run where both tests succeeded), with Tukey's distribution-free CI
(:func:`~washout.stats.claims.hodges_lehmann`). The per-run means of every test are
computed in one pass over the trials, so k tests cost k - 1 ratios, not a pass over the
data per pair. The CIs are simultaneous over the k - 1 comparisons by Bonferroni
(two-sided at 1 - alpha / (k - 1)); a ratio is significant when its CI excludes 1. Fixed
and random orders disagree about a comparison when the per-run log ratios of fixed-order
runs differ from those of random-order runs (two-sample Kruskal-Wallis, the claims'
interaction test), family-wise over the comparisons (Bonferroni or Holm).

Warnings follow hyperfine: a trial is a statistical outlier when its modified z-score
0.6745 (x - median) / MAD exceeds 14 in absolute value (Iglewicz & Hoaglin 1993, "How to
Detect and Handle Outliers", ASQC; 14 is hyperfine's threshold); when the first trial of
a test (in time) is such an outlier upwards, the first run was significantly slower.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.data.longformat import RESOURCE_METRICS, is_in
from washout.stats.claims import EVALUATED_ORDERS, fewest_for_interval, hodges_lehmann
from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.frames import FrameView
from washout.stats.trials import AROUND_TRIALS, usable_trials

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

OUTLIER_THRESHOLD = 14.0
"""|modified z-score| above which a trial is an outlier (hyperfine's threshold)."""
OUTLIERS_DETECTED = (
    "Statistical outliers were detected. Consider re-running this benchmark on a quiet "
    "system without any interferences from other programs."
)
SLOW_FIRST_RUN = (
    "The first benchmarking run for this command was significantly slower than the rest "
    "({first}). This could be caused by (filesystem) caches that were not filled until "
    "after the first run. You should consider using the '--warmup' option to fill those "
    "caches before the actual benchmark. Alternatively, use the '--prepare' option to "
    "clear the caches before each timing run."
)


@dataclass(frozen=True)
class TestSummary:
    """One test's trials of the compared metric, hyperfine's figures, and its warnings."""

    __test__ = False  # not a pytest test class

    test: str
    metric: str
    runs: int
    mean: float
    stddev: float | None
    median: float
    min: float
    max: float
    user: float | None
    system: float | None
    max_rss: float | None
    times: tuple[float, ...]
    warnings: tuple[str, ...]
    max_rss_by_trial: tuple[float, ...] = ()
    """Each trial's ``max_rss`` (bytes) in the order of ``times``; empty where some trial
    has none (hyperfine 1.20's ``memory_usage_byte``)."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["times"] = list(self.times)
        d["warnings"] = list(self.warnings)
        d["max_rss_by_trial"] = list(self.max_rss_by_trial)
        return d


@dataclass(frozen=True)
class Ranking:
    """``fastest`` ran ``ratio`` times faster than ``test`` (random order, paired by run),
    with its CI at ``confidence`` (``fastest``: the reference, the fastest test unless one
    was named, :attr:`Comparison.reference`); ``fixed_ratio`` is the same estimate over fixed-order
    runs and ``orders_disagree`` whether the two differ significantly (family-wise)."""

    fastest: str
    test: str
    ratio: float
    ratio_ci: tuple[float, float] | None
    confidence: float | None
    n_runs: int
    fixed_ratio: float | None
    interaction_p: float | None
    orders_disagree: bool
    runs_for_ci: int | None = None
    """The fewest random-order runs that give ``ratio_ci`` at the family's confidence (what
    a ratio without a CI lacks: with 5 runs, none at 95%)."""

    @property
    def significant(self) -> bool:
        """Whether the ratio's CI excludes 1 (a difference, in either direction)."""
        return self.ratio_ci is not None and not self.ratio_ci[0] <= 1.0 <= self.ratio_ci[1]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio_ci"] = list(self.ratio_ci) if self.ratio_ci else None
        return d


@dataclass(frozen=True)
class Comparison(FrameView):
    """The per-test summaries (in the tests' order) and the ranking against the fastest
    (empty for a single test, without random-order runs of two tests together, or when a
    value is not positive: a ratio needs positive values)."""

    metric: str
    summaries: tuple[TestSummary, ...]
    rankings: tuple[Ranking, ...]
    alpha: float
    correction: str
    better: str | None = "lower"
    """Which values are better, ``lower`` or ``higher``; None when the source does not say
    (the ranking then starts from the lowest, and says "lower", not "better")."""
    reference: str | None = None
    """The test named as every ratio's reference (hyperfine's ``--reference``); None: the
    fastest is."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "alpha": self.alpha,
            "correction": self.correction,
            "better": self.better,
            "reference": self.reference,
            "summaries": [s.to_dict() for s in self.summaries],
            "rankings": [r.to_dict() for r in self.rankings],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per test: hyperfine's figures (its trial times left out) and, but for
        the fastest, its ratio to the fastest with the CI and whether it is significant."""
        import pandas as pd

        ranked = {r.test: r for r in self.rankings}
        rows = []
        for s in self.summaries:
            row = {k: v for k, v in s.to_dict().items() if k not in ("times", "warnings")}
            r = ranked.get(s.test)
            lo, hi = r.ratio_ci if r is not None and r.ratio_ci else (None, None)
            row |= {
                "ratio": r.ratio if r else None,
                "ratio_ci_lo": lo,
                "ratio_ci_hi": hi,
                "significant": r.significant if r else None,
                "warnings": "; ".join(s.warnings),
            }
            rows.append(row)
        return pd.DataFrame(rows)


COMPARED_TESTS = 20
"""Most tests ``analyze`` and reports give the comparison: it is for a handful of commands;
a study of hundreds of configurations gets the order analysis alone."""


def compared_metric(df: pd.DataFrame, metric: str | None = None) -> str | None:
    """The metric to compare tests on: ``metric`` if given, else ``wall``, else the first of
    the trials' own metrics (not one of :data:`AROUND_TRIALS`); None if the trials have no
    metric."""
    if metric is not None:
        return metric
    present = sorted(df["metric"].dropna().astype(str).unique())
    own = [m for m in present if m not in AROUND_TRIALS] or present
    if not own:
        return None
    return "wall" if "wall" in own else own[0]


def modified_zscores(x: np.ndarray) -> np.ndarray:
    """0.6745 (x - median) / MAD, MAD the median absolute deviation (Iglewicz & Hoaglin
    1993); all zeros when MAD is 0 (more than half the values equal: nothing stands out)."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    median = np.median(x)
    mad = np.median(np.abs(x - median))
    if mad == 0:
        return np.zeros_like(x)
    return 0.6745 * (x - median) / mad


def trial_warnings(times_in_trial_order: np.ndarray, first: str) -> tuple[str, ...]:
    """hyperfine's warnings for one test's values in the order the trials ran: the slow
    first run if the first value is an upward outlier, else outliers if any value is one.
    ``first`` is the first value as it should be printed."""
    if len(times_in_trial_order) < 3:
        return ()
    scores = modified_zscores(times_in_trial_order)
    if scores[0] > OUTLIER_THRESHOLD:
        return (SLOW_FIRST_RUN.format(first=first),)
    if (abs(scores) > OUTLIER_THRESHOLD).any():
        return (OUTLIERS_DETECTED,)
    return ()


def _summary(
    test: str,
    metric: str,
    values: np.ndarray,
    resources: dict[str, float],
    first: Callable[[float], str],
    peaks: np.ndarray,
) -> TestSummary:
    """hyperfine's figures of one test's values (in the order its trials ran), with each
    trial's peak RSS (``peaks``, NaN where a trial has none)."""
    import numpy as np

    return TestSummary(
        test=test,
        metric=metric,
        runs=int(values.size),
        mean=float(values.mean()),
        stddev=float(values.std(ddof=1)) if values.size > 1 else None,
        median=float(np.median(values)),
        min=float(values.min()),
        max=float(values.max()),
        user=resources.get("user"),
        system=resources.get("system"),
        max_rss=resources.get("max_rss"),
        times=tuple(values.tolist()),
        warnings=trial_warnings(values, first(float(values[0]))),
        max_rss_by_trial=() if np.isnan(peaks).any() else tuple(peaks.tolist()),
    )


def _peaks(here: pd.DataFrame, ok: pd.DataFrame, keys: list[str]) -> dict[str, np.ndarray]:
    """Each test's trials' ``max_rss`` in the order of ``here`` (its trials of the compared
    metric), matched by trial (``keys``: worker, run, position, started); NaN where a trial
    has none, or where the trials cannot be told apart."""
    import numpy as np

    rss = ok[ok["metric"] == "max_rss"]
    if not keys or rss.empty or rss.duplicated(["test", *keys]).any():
        return {str(t): np.full(len(v), np.nan) for t, v in here.groupby("test", observed=True)}
    matched = here[["test", *keys]].merge(
        rss[["test", *keys, "value"]], on=["test", *keys], how="left", sort=False
    )
    return {
        str(t): v.to_numpy(dtype=float)
        for t, v in matched.groupby("test", observed=True, sort=False)["value"]
    }


def per_run_means(ok: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The mean of each test's successful trials of ``metric`` in each fixed- or random-order
    run: one row per (order, worker, run), one column per test, NaN where a test has no
    trial in a run (the pairing of :func:`washout.stats.claims.per_run_log_ratios`, for
    every test at once)."""
    sel = ok[(ok["metric"] == metric) & is_in(ok["order"], EVALUATED_ORDERS)]
    means = sel.groupby(["order", "worker", "run", "test"], observed=True)["value"].mean()
    return means.unstack("test")


def compare_tests(
    df: pd.DataFrame,
    *,
    metric: str = "wall",
    alpha: float = 0.05,
    correction: str = "bonferroni",
    tests: Sequence[str] | None = None,
    lower_is_better: bool = True,
    better_known: bool = True,
    describe: Callable[[float], str] = str,
    reference: str | None = None,
) -> Comparison:
    """Summarise every test on ``metric`` and rank them against the fastest, or against
    ``reference`` (module doc); without a random-order trial of the reference, no ranking.

    ``tests`` gives their order (default: sorted); with ``lower_is_better`` False (a
    throughput, say) the best test has the highest median and the ratios are best / other;
    ``better_known`` False: the source does not say which way is better.
    ``describe(value)`` prints a first run's value in the slow-first-run warning. Trials
    are taken in the order they ran: ``started`` where the frame has it, else worker, run
    and position.
    """
    import numpy as np

    from washout.stats.power import kruskal_rows

    level, method = check_alpha(alpha), check_method(correction)
    ok, _ = usable_trials(df, "the comparison")
    names = list(tests) if tests is not None else sorted(ok["test"].astype(str).unique())
    here = ok[ok["metric"] == metric]
    by_time = [c for c in ("started", "worker", "run", "position") if c in here.columns]
    here = here.sort_values(by_time, kind="stable") if by_time else here
    values = {
        str(t): v.to_numpy(dtype=float) for t, v in here.groupby("test", observed=True)["value"]
    }
    peaks = _peaks(here, ok, by_time)
    used = ok[ok["metric"].isin(RESOURCE_METRICS)]
    means = used.groupby(["test", "metric"], observed=True)["value"].mean()
    resources: dict[str, dict[str, float]] = {}
    for (t, m), v in means.items():
        resources.setdefault(str(t), {})[str(m)] = float(v)
    summaries = [
        _summary(t, metric, values[t], resources.get(t, {}), describe, peaks[t])
        for t in names
        if t in values and values[t].size
    ]
    random = here[here["order"] == "random"]
    medians = random.groupby("test", observed=True)["value"].median()
    ranked = [t for t in names if t in medians.index]
    better = ("lower" if lower_is_better else "higher") if better_known else None
    if (
        len(ranked) < 2
        or bool((here["value"] <= 0).any())  # ratios need positive values
        or (reference is not None and reference not in ranked)
    ):
        return Comparison(metric, tuple(summaries), (), level, method, better, reference)
    sign = 1.0 if lower_is_better else -1.0
    fastest = reference or min(ranked, key=lambda t: sign * float(medians[t]))
    others = [t for t in ranked if t != fastest]
    confidence = max(1.0 - level / len(others), 0.0)
    per_run = per_run_means(ok, metric)
    logs = np.log(per_run.to_numpy(dtype=float))
    column = {str(t): i for i, t in enumerate(per_run.columns)}
    orders = per_run.index.get_level_values("order").astype(str).to_numpy()
    best = logs[:, column[fastest]]
    pairs = []  # per other test: its log ratios to the fastest, fixed-order and random-order
    for t in others:
        ratio = sign * (logs[:, column[t]] - best)  # at least 0 when ``fastest`` is better
        both = ~np.isnan(ratio)
        pairs.append({o: ratio[both & (orders == o)] for o in EVALUATED_ORDERS})
    both_orders = [i for i, lr in enumerate(pairs) if lr["fixed"].size and lr["random"].size]
    interaction = [
        float(kruskal_rows(pairs[i]["fixed"], pairs[i]["random"])[1][0]) for i in both_orders
    ]
    differs = dict(zip(both_orders, adjust(interaction, level, method)[0]))
    p_of = dict(zip(both_orders, interaction))
    rankings = []
    runs_for_ci = fewest_for_interval(confidence)  # the same for every comparison
    for i, t in enumerate(others):
        if not pairs[i]["random"].size:
            continue
        estimate, ci, achieved = hodges_lehmann(pairs[i]["random"], confidence)
        fixed = pairs[i]["fixed"]
        rankings.append(
            Ranking(
                fastest=fastest,
                test=t,
                ratio=math.exp(estimate),
                ratio_ci=(math.exp(ci[0]), math.exp(ci[1])) if ci else None,
                confidence=achieved,
                n_runs=int(pairs[i]["random"].size),
                fixed_ratio=math.exp(hodges_lehmann(fixed, confidence)[0]) if fixed.size else None,
                interaction_p=p_of.get(i),
                orders_disagree=bool(differs.get(i, False)),
                runs_for_ci=runs_for_ci,
            )
        )
    rankings.sort(key=lambda r: r.ratio)
    return Comparison(metric, tuple(summaries), tuple(rankings), level, method, better, reference)
