"""Three-valued decisions for a bisect step (like-good, like-bad, unknown) with bounded error
rates, and how the error rate is spent over a step's looks and over a bisect's steps.

Data: per run of a step (the candidate c, the good build g and the bad build b measured in
the same run, in a seeded random order, after a reset), the paired log ratios
x = log(c / g) and y = log(c / b); run-level noise (the machine's state) is shared by the
three and cancels in them. The change being bisected is d = log(b / g), whose sign s was
measured before the bisect began.

**Intervals.** Each location (of x, y or d) is the Hodges-Lehmann estimate (the median of
the Walsh averages) with Tukey's distribution-free interval from the signed-rank
distribution (Hollander & Wolfe 1999, "Nonparametric Statistical Methods", 2nd ed., sec.
3.3; :func:`washout.stats.claims.hodges_lehmann`, the claims' and the comparison's
machinery, not a second one). The two-sided interval at confidence 1 - 2a has each end a
one-sided bound at level a.

**Decisions at level a.** With xs = s x, ys = s y and ds = xs - ys = s log(b / g) (the
change made positive, per run) and u = (xs + ys) / 2 = s log(c / sqrt(g b)) (the candidate
against the midpoint of good and bad in the same run):

- *like-good*: the candidate is equivalent to good, by two one-sided tests at level a
  each (TOST: Schuirmann 1987, "A comparison of the two one-sided tests procedure and the
  power approach for assessing the equivalence of average bioavailability", J.
  Pharmacokinet. Biopharm. 15(6), 657-680; each side's bound beyond its margin, the
  interval form of Berger & Hsu 1996, "Bioequivalence trials, intersection-union tests and
  equivalence confidence sets", Statist. Sci. 11(4), 283-319), and apart from bad
  (ys < 0). With a margin m the user set, the two sides are -m < xs < m. Without one the
  margins come from the change each run measured: the inner side u < 0 (nearer good than
  bad: within half the change of good) and the outer side xs + ds > 0 (not faster than
  good by more than the whole change); each has the same variance-to-distance ratio
  (var u = 1.5 sigma^2 at distance d / 2, var (xs + ds) = 6 sigma^2 at distance d, for
  independent trial noise sigma), and nothing is estimated from other steps;
- *like-bad*: the same with the roles of good and bad exchanged (-m < ys < m, or u > 0
  and ys - ds < 0; apart from good: xs > 0);
- otherwise *unknown*. A claim holds only when every one of its tests rejects: an
  intersection-union test, whose size is the largest of its tests' levels, a (Berger 1982,
  "Multiparameter hypothesis testing and acceptance sampling", Technometrics 24(4),
  295-300). So a candidate at least half-way to bad (or more than m from good) is called
  like-good with probability at most a, and the same for like-bad.
- A candidate significantly beyond good or beyond bad by more than the margin (with a
  margin derived, half the change: xs + ds / 2 < 0 or ys - ds / 2 > 0; with a margin m,
  xs < -m or ys > m, or further than m from both ends in between) is unknown at once: the
  metric is not monotone there, and more runs would not make it like either end. A
  candidate equal to good or bad is flagged so with probability at most a.

**Looks** (sequential, up to a cap). A step measures runs in batches and decides after
each batch (a look). The level of look k is the increment of the Lan-DeMets spending
function alpha*(t) = alpha ln(1 + (e - 1) t) (the Pocock-type function of Lan & DeMets
1983, "Discrete sequential boundaries for clinical trials", Biometrika 70(3), 659-663) at
the information fractions t_k = n_k / n_max (runs so far over the cap). The looks are
combined by the union bound rather than by the joint distribution of the statistics
(which a distribution-free rank statistic does not give in closed form), so the error
over every look of a step is at most sum_k (alpha*(t_k) - alpha*(t_{k-1})) = alpha*(1) =
alpha: conservative, and valid whatever the noise's distribution.

**Steps.** A bisect's family is its steps: the check that good and bad differ, then the
candidates. Each step j gets a share of the bisect's alpha: with K = ceil(log2(commits))
the steps a bisect needs, shares of alpha / (K + 2) go to the check and to steps 1..K,
and the last share is split over any further steps (skips and unknowns), step K + i
taking 1 / (i (i + 1)) of it (these fractions sum to 1). So the shares sum to at most
alpha, and the probability that any step of the bisect decides wrongly, the only way a
wrong commit is named, is at most alpha (Bonferroni).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from washout.stats.claims import hodges_lehmann
from washout.stats.family import check_alpha

if TYPE_CHECKING:
    import numpy as np

Decision = Literal["like-good", "like-bad", "unknown"]


@dataclass(frozen=True)
class PairedEstimate:
    """A location of per-run log ratios as a ratio: the Hodges-Lehmann estimate, its
    distribution-free interval (None when the runs are too few for the confidence), the
    confidence that interval achieves, and the runs it rests on."""

    ratio: float
    low: float | None
    high: float | None
    confidence: float | None
    runs: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def log_bounds(self) -> tuple[float, float] | None:
        """The interval on the log scale, or None."""
        if self.low is None or self.high is None:
            return None
        return math.log(self.low), math.log(self.high)


def paired_estimate(logs: np.ndarray | Sequence[float], confidence: float) -> PairedEstimate:
    """The ratio exp(HL(logs)) with Tukey's two-sided interval at ``confidence``."""
    import numpy as np

    data = np.asarray(logs, dtype=float)
    estimate, ci, achieved = hodges_lehmann(data, confidence)
    return PairedEstimate(
        ratio=math.exp(estimate),
        low=math.exp(ci[0]) if ci else None,
        high=math.exp(ci[1]) if ci else None,
        confidence=achieved,
        runs=int(data.size),
    )


@dataclass(frozen=True)
class StepDecision:
    """A step's decision at one look: ``final`` when no more runs are needed (decided, or
    the candidate differs from both ends); ``reason`` says why in words."""

    decision: Decision
    final: bool
    reason: str
    vs_good: PairedEstimate
    vs_bad: PairedEstimate
    level: float
    apart: bool = False
    """The candidate differs from both good and bad: the metric is not monotone here."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "final": self.final,
            "reason": self.reason,
            "apart": self.apart,
            "vs_good": self.vs_good.to_dict(),
            "vs_bad": self.vs_bad.to_dict(),
            "level": self.level,
        }


def _within(bounds: tuple[float, float] | None, margin: float) -> bool:
    return bounds is not None and -margin < bounds[0] and bounds[1] < margin


def _side(bounds: tuple[float, float] | None) -> int:
    """+1 when the interval lies above 0, -1 below, 0 when it holds 0 (or there is none)."""
    if bounds is None:
        return 0
    return 1 if bounds[0] > 0 else -1 if bounds[1] < 0 else 0


def decide_step(
    x: np.ndarray, y: np.ndarray, sign: float, level: float, margin: float | None = None
) -> StepDecision:
    """The decision of one look (module doc) from the per-run x = log(c / g) and
    y = log(c / b) (the same runs, in order), the change's sign (+1: b above g), the level
    ``a`` of this look and the margin (a log ratio; None: derived from the change each run
    measured)."""
    import numpy as np

    if margin is not None and not margin > 0:
        raise ValueError(f"margin must be positive, got {margin}")
    confidence = 1.0 - 2.0 * level
    xs, ys = sign * np.asarray(x, dtype=float), sign * np.asarray(y, dtype=float)

    def bounds(values: np.ndarray) -> tuple[float, float] | None:
        return paired_estimate(values, confidence).log_bounds

    gx, by = bounds(xs), bounds(ys)
    if margin is None:  # inner sides: the midpoint; outer sides: one whole change away
        u, ds = bounds((xs + ys) / 2), xs - ys
        inner = ("nearer good than bad", "nearer bad than good")
        good_inner, bad_inner = _side(u) == -1, _side(u) == 1
        good_outer, bad_outer = _side(bounds(xs + ds)) == 1, _side(bounds(ys - ds)) == -1
        # beyond an end by more than half the change, significantly
        beyond = {
            "beyond good": _side(bounds(xs + ds / 2)) == -1,
            "beyond bad": _side(bounds(ys - ds / 2)) == 1,
        }
    else:
        shown = f"within {100 * math.expm1(margin):.2f}% of"
        inner = (f"{shown} good", f"{shown} bad")
        good_inner, good_outer = (
            gx is not None and gx[1] < margin,
            gx is not None and gx[0] > -margin,
        )
        bad_inner, bad_outer = by is not None and by[0] > -margin, by is not None and by[1] < margin
        beyond = {
            "beyond good": gx is not None and gx[1] < -margin,
            "beyond bad": by is not None and by[0] > margin,
            "between good and bad": gx is not None
            and by is not None
            and gx[0] > margin
            and by[1] < -margin,
        }
    like_good = good_inner and good_outer and _side(by) == -1
    like_bad = bad_inner and bad_outer and _side(gx) == 1
    vs_good, vs_bad = paired_estimate(x, confidence), paired_estimate(y, confidence)
    if like_good != like_bad:
        decision: Decision = "like-good" if like_good else "like-bad"
        reason = f"{inner[0]}, below bad" if like_good else f"{inner[1]}, beyond good"
        return StepDecision(decision, True, reason, vs_good, vs_bad, level)
    where = [w for w, found in beyond.items() if found]
    if where and not like_good:
        return StepDecision(
            "unknown",
            True,
            f"{where[0]} by more than the margin: not monotone here",
            vs_good,
            vs_bad,
            level,
            apart=True,
        )
    if gx is None:
        reason = f"too few runs for an interval at level {level:.2g}"
    else:
        reason = "neither like good nor like bad yet"
    return StepDecision("unknown", False, reason, vs_good, vs_bad, level)


@dataclass(frozen=True)
class ChangeCheck:
    """Whether good and bad differ: ``differ`` when the interval of d = log(b / g) excludes
    0, ``same`` when it lies within the user's margin (TOST), else ``undecided``."""

    verdict: Literal["differ", "same", "undecided"]
    change: PairedEstimate
    level: float

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "change": self.change.to_dict(), "level": self.level}


def check_change(d: np.ndarray, level: float, margin: float | None) -> ChangeCheck:
    """The check step at one look: do good and bad differ (at level ``level``, each side)?"""
    change = paired_estimate(d, 1.0 - 2.0 * level)
    bounds = change.log_bounds
    if _side(bounds) != 0:
        return ChangeCheck("differ", change, level)
    if margin is not None and _within(bounds, margin):
        return ChangeCheck("same", change, level)
    return ChangeCheck("undecided", change, level)


def spent(alpha: float, t: float) -> float:
    """The Lan-DeMets Pocock-type spending function alpha ln(1 + (e - 1) t), t in [0, 1]
    (Lan & DeMets 1983): the error rate spent by information fraction t."""
    t = min(max(t, 0.0), 1.0)
    return alpha * math.log1p((math.e - 1.0) * t)


def look_levels(alpha: float, runs: int, max_runs: int) -> list[float]:
    """The level of each look of a step that adds ``runs`` runs per look up to ``max_runs``
    (the last look may add fewer): the increments of :func:`spent`, summing to alpha."""
    check_alpha(alpha)
    if runs < 1 or max_runs < runs:
        raise ValueError(f"need 1 <= runs <= max_runs, got {runs}, {max_runs}")
    totals = list(range(runs, max_runs, runs)) + [max_runs]
    levels, before = [], 0.0
    for n in totals:
        now = spent(alpha, n / max_runs)
        levels.append(now - before)
        before = now
    return levels


def look_runs(runs: int, max_runs: int) -> list[int]:
    """The cumulative runs at each look (``runs``, ``2 runs``, ... , ``max_runs``)."""
    return list(range(runs, max_runs, runs)) + [max_runs]


def expected_steps(commits: int) -> int:
    """ceil(log2(commits)): the steps a bisect of ``commits`` candidates needs, at least 1."""
    return max(1, math.ceil(math.log2(max(commits, 2))))


def step_alpha(alpha: float, step: int, commits: int) -> float:
    """The share of the bisect's alpha for step ``step`` (0: the check that good and bad
    differ; 1, 2, ...: the candidates) of a bisect over ``commits`` candidates (module
    doc): alpha / (K + 2) each up to K; step K + i then gets that share / (i (i + 1)), which
    over every i sums to the last share."""
    check_alpha(alpha)
    k = expected_steps(commits)
    share = alpha / (k + 2)
    if step <= k:
        return share
    i = step - k
    return share / (i * (i + 1))
