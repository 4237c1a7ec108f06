"""The user's own claims ("A beats B") checked under both orders, run by run.

A claim compares one metric of two tests: ``A < B``, ``A > 1.1 * B``, ``A <= 0.9*B``
(operators ``<``, ``<=``, ``>``, ``>=``; an optional positive factor k multiplies B). Test
names may contain spaces, dashes, dots and braces; a name with other awkward characters
is quoted, ``'...'`` or ``"..."``.

A and B run in the same runs, so they share each run's level (the machine's state, the
reset, the page cache): a claim is judged on the per-run ratios r = A / B of A's and B's
trials in the same run (a test's trials in one run are averaged), which cancels that shared
noise. Pairing by run is what lets a true 2% advantage show through 5% run-to-run noise.
Per order kind, on the log ratios L = log r:

- the ratio is the Hodges-Lehmann estimate exp(median of the Walsh averages
  (L_i + L_j) / 2, i <= j) (Hodges & Lehmann 1963, "Estimates of location based on rank
  tests", Ann. Math. Statist. 34(2)): a robust geometric mean of the per-run ratios, the
  estimate that goes with the test below;
- its CI is Tukey's distribution-free interval [W_(k), W_(M+1-k)] of the sorted Walsh
  averages (Hollander & Wolfe 1999, "Nonparametric Statistical Methods", 2nd ed., sec. 3.3),
  exponentiated;
- the claim holds when the one-sided Wilcoxon signed-rank test (Wilcoxon 1945, Biometrics
  Bull. 1(6)) of L - log k (alternative "less" for < and <=, "greater" for > and >=) is
  significant and the ratio satisfies the claim (``<`` and ``<=`` differ only there).

Significance is family-wise (Bonferroni or Holm, ``washout.stats.family``) over every claim
x metric x order kind evaluated: "holds" in either order is a finding, so both orders count.
The CIs are simultaneous over that family by Bonferroni: two-sided at 1 - 2 alpha / m, so
the bound a claim is tested against is the one-sided test's own level.

The order changes the conclusion (the ordering trap: Duplyakin et al., USENIX ATC 2023,
where a uFS result flipped once the order was randomised) only when both: the per-run log
ratios of fixed-order runs differ from those of random-order runs (two-sample
Kruskal-Wallis, the order analysis' test, family-wise over the claims x metrics:
``interaction_p``), and the claim holds in one order and not in the other. A claim that is
significant in one order and just short of it in the other, with the same ratio in both, is
not a changed conclusion. The order-safe estimate is the random-order one (top-level
``ratio`` and ``ratio_ci``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from washout.errors import WashoutError
from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.frames import FrameView
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

OPERATORS: tuple[str, ...] = ("<=", ">=", "<", ">")
EVALUATED_ORDERS: tuple[str, ...] = ("fixed", "random")
_FORM = 'expected e.g. "A < B", "A > 1.1 * B" or "A <= 0.9*B" (quote names as \'...\')'
# The largest number of differences whose signed-rank p is exact (scipy.stats.wilcoxon's).
EXACT_MAX_N = 50
_FACTOR = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*\*\s*(.*)$", re.S)


@dataclass(frozen=True)
class Claim:
    """A parsed claim: ``a op factor * b``."""

    text: str
    a: str
    op: str
    factor: float
    b: str

    def holds_for(self, left: float, right: float) -> bool:
        """Whether ``left op factor * right``."""
        k = self.factor * right
        return {"<": left < k, "<=": left <= k, ">": left > k, ">=": left >= k}[self.op]


def _bad(text: str, problem: str) -> WashoutError:
    return WashoutError(f"claim {text!r}: {problem}")


def _name(text: str, part: str, side: str) -> str:
    """A test name: a quoted string, or the stripped raw text."""
    s = part.strip()
    if s[:1] in ("'", '"'):
        if len(s) < 2 or s[-1] != s[0] or s[0] in s[1:-1]:
            raise _bad(text, f"unbalanced quotes around test {side}; {_FORM}")
        s = s[1:-1]
    elif any(c in s for c in "'\"*"):
        raise _bad(text, f"cannot read test {side} from {part.strip()!r}; {_FORM}")
    if not s.strip():
        raise _bad(text, f"test {side} is missing; {_FORM}")
    return s


def parse_claim(text: str) -> Claim:
    """Parse one claim, or raise a one-line WashoutError naming it and what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise WashoutError(f"claim {text!r}: empty; {_FORM}")
    s = text.strip()
    # The left name runs to the first operator outside quotes.
    i, quote = 0, ""
    while i < len(s):
        c = s[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "<>":
            break
        i += 1
    if quote:
        raise _bad(text, f"unbalanced quotes; {_FORM}")
    if i == len(s):
        raise _bad(text, f"no comparison operator (<, <=, >, >=); {_FORM}")
    op = s[i : i + 2] if s[i + 1 : i + 2] == "=" else s[i]
    left, right = s[:i], s[i + len(op) :]
    if left.rstrip().endswith(("=", "!")):
        shown = left.rstrip()[-1] + op
        raise _bad(text, f"operator {shown!r} is not one of {', '.join(OPERATORS)}")
    if right.lstrip()[:1] in ("<", ">", "="):
        shown = op + right.lstrip()[:1]
        raise _bad(text, f"operator {shown!r} is not one of {', '.join(OPERATORS)}")
    factor = 1.0
    m = _FACTOR.match(right)
    if m:
        factor, right = float(m.group(1)), m.group(2)
        if not (math.isfinite(factor) and factor > 0):
            raise _bad(text, f"factor {m.group(1)} must be a positive number")
    if any(c in right for c in "<>") and right.strip()[:1] not in ("'", '"'):
        raise _bad(text, f"more than one comparison; {_FORM}")
    return Claim(text=s, a=_name(text, left, "A"), op=op, factor=factor, b=_name(text, right, "B"))


@dataclass(frozen=True)
class ClaimSide:
    """A claim evaluated on the runs of one order kind: the per-run ratio A / B (its
    Hodges-Lehmann estimate and CI), the one-sided signed-rank p, and the medians of A's and
    B's trials for reference."""

    holds: bool
    ratio: float
    ratio_ci: tuple[float, float] | None
    ratio_ci_confidence: float | None
    p: float
    n_runs: int
    median_a: float
    median_b: float
    n_a: int
    n_b: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio_ci"] = list(self.ratio_ci) if self.ratio_ci else None
        return d


@dataclass(frozen=True)
class ClaimResult(FrameView):
    """One claim on one metric, under fixed and under random order. ``ratio`` and
    ``ratio_ci`` are the random-order (order-safe) estimate; ``interaction_p`` tests whether
    the per-run ratio differs between fixed and random runs."""

    claim: str
    a: str
    op: str
    factor: float
    b: str
    metric: str
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    interaction_p: float | None
    fixed: ClaimSide | None
    random: ClaimSide | None
    order_changes_conclusion: bool | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio_ci"] = list(self.ratio_ci) if self.ratio_ci else None
        d["fixed"] = self.fixed.to_dict() if self.fixed else None
        d["random"] = self.random.to_dict() if self.random else None
        return d

    def to_frame(self) -> pd.DataFrame:
        """One row per order kind (:func:`claims_frame`)."""
        return claims_frame([self])


def _known(text: str, name: str, tests: Sequence[str]) -> None:
    if name not in tests:
        shown = ", ".join(repr(t) for t in list(tests)[:20]) + (", ..." if len(tests) > 20 else "")
        raise _bad(text, f"unknown test {name!r} (tests: {shown})")


def _metrics_for(claim: Claim, ok: pd.DataFrame, metric: str | None) -> list[str]:
    have = {t: sorted(ok.loc[ok["test"] == t, "metric"].unique()) for t in (claim.a, claim.b)}
    if metric is not None:
        for t in (claim.a, claim.b):
            if metric not in have[t]:
                raise _bad(
                    claim.text,
                    f"test {t!r} has no metric {metric!r} (its metrics: "
                    f"{', '.join(have[t]) or 'none'})",
                )
        return [metric]
    shared = [m for m in have[claim.a] if m in have[claim.b]]
    if not shared:
        raise _bad(claim.text, f"tests {claim.a!r} and {claim.b!r} share no metric")
    return shared


@lru_cache(maxsize=64)
def signed_rank_null(n: int) -> np.ndarray:
    """P(T+ <= t), t = 0 .. n(n+1)/2: the exact null distribution function of the signed-rank
    statistic for n distinct non-zero differences, from the number of subsets of {1..n}
    with each sum (Wilcoxon 1945; counted by the recursion c_k(t) = c_{k-1}(t) +
    c_{k-1}(t - k), exact in floats up to n = 50: the counts stay below 2^53)."""
    import numpy as np

    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k]
    return np.cumsum(counts) / 2.0**n


def signed_rank_p(d: np.ndarray, alternative: str) -> float:
    """One-sided Wilcoxon signed-rank p of the differences ``d`` (H0: symmetric about 0;
    alternative "less" or "greater"), as ``scipy.stats.wilcoxon(d, alternative=...)``
    computes it with its defaults (zero_method "wilcox", no continuity correction).

    Zero differences are dropped (Wilcoxon's convention); T+ is the sum of the mid-ranks
    of |d| over the positive d. For n <= 50 without ties the p is exact (:func:`
    signed_rank_null`); otherwise T+ is referred to the normal distribution with mean
    n(n+1)/4 and variance n(n+1)(2n+1)/24 - sum(t^3 - t)/48 over tie groups of size t
    (Lehmann 1975, "Nonparametrics", ch. 3 sec. 2).
    """
    import numpy as np

    from washout.stats.serial import ranks

    d = np.asarray(d, dtype=float)
    d = d[d != 0]
    n = int(d.size)
    if n == 0:
        return 1.0  # every difference is zero: no evidence either way
    magnitude = np.abs(d)
    t_plus = float(ranks(magnitude)[d > 0].sum())
    _, tie_sizes = np.unique(magnitude, return_counts=True)
    if n <= EXACT_MAX_N and tie_sizes.max() == 1:
        cdf = signed_rank_null(n)
        t = int(round(t_plus))
        # P(T+ >= t) = P(T+ <= M - t) by symmetry, without 1 - cdf's cancellation
        return float(cdf[t] if alternative == "less" else cdf[cdf.size - 1 - t])
    mean = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float(np.sum(tie_sizes**3 - tie_sizes)) / 48.0
    z = (t_plus - mean) / math.sqrt(var)
    return 0.5 * math.erfc((-z if alternative == "less" else z) / math.sqrt(2.0))


def walsh_rank(n: int, confidence: float) -> tuple[int, float] | None:
    """``(k, achieved)``: Tukey's two-sided interval [W_(k), W_(M+1-k)] of the M = n(n+1)/2
    sorted Walsh averages covers the centre of a symmetric distribution with probability
    achieved = 1 - 2 P(T+ <= k - 1) >= confidence (Hollander & Wolfe 1999, sec. 3.3,
    eq. 3.27); k - 1 is the largest t with P(T+ <= t) <= (1 - confidence) / 2, from the
    exact null distribution for n <= 50, else from its normal approximation (mean n(n+1)/4,
    variance n(n+1)(2n+1)/24). None when n is too small for the confidence."""
    from statistics import NormalDist

    tail = (1.0 - confidence) / 2.0
    if n <= EXACT_MAX_N:
        cdf = signed_rank_null(n)
        below = int((cdf <= tail * (1 + 1e-12)).sum())  # cdf is increasing: t = 0..below-1
        if below == 0:
            return None
        return below, float(1.0 - 2.0 * cdf[below - 1])
    mean = n * (n + 1) / 4.0
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    t = math.floor(mean + NormalDist().inv_cdf(tail) * sd)
    if t < 0:
        return None
    return t + 1, 1.0 - 2.0 * NormalDist().cdf((t - mean) / sd)


def fewest_for_interval(confidence: float) -> int:
    """The fewest values for which :func:`walsh_rank` has an interval at ``confidence``
    (6 at 95%, 7 at 97.5%: below them even the widest interval, the smallest and largest
    Walsh averages, covers with less than the confidence)."""
    n = 1
    while walsh_rank(n, confidence) is None:
        n += 1
    return n


def hodges_lehmann(
    x: np.ndarray, confidence: float
) -> tuple[float, tuple[float, float] | None, float | None]:
    """``(estimate, (lo, hi) or None, achieved confidence or None)`` of the centre of ``x``:
    the median of its Walsh averages (x_i + x_j) / 2, i <= j (Hodges & Lehmann 1963) and
    Tukey's interval between two of their order statistics (:func:`walsh_rank`)."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    i, j = np.triu_indices(x.size)
    walsh = np.sort((x[i] + x[j]) / 2.0)
    estimate = float(np.median(walsh))
    rank = walsh_rank(int(x.size), confidence)
    if rank is None:
        return estimate, None, None
    k, achieved = rank
    return estimate, (float(walsh[k - 1]), float(walsh[walsh.size - k])), achieved


def per_run_logs(
    ok: pd.DataFrame, tests: Sequence[str], metric: str, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per run (worker x run) of fixed or random order with successful trials of every one
    of ``tests`` on ``metric``: the log of each test's mean in that run (one row per run,
    one column per test, in the order given) and the run's order kind. A value that is not
    positive has no log: a one-line error naming ``what``, the test, run and value."""
    import numpy as np

    sel = ok[(ok["metric"] == metric) & ok["test"].isin(tests) & ok["order"].isin(EVALUATED_ORDERS)]
    per_run = (
        sel.groupby(["order", "worker", "run", "test"], observed=True)["value"]
        .mean()
        .unstack("test")
    )
    names = list(dict.fromkeys(tests))  # "A < 2 * A" names one test twice
    if per_run.empty or any(t not in per_run for t in names):
        return np.empty((0, len(tests))), np.empty(0, dtype=object)
    paired = per_run[names].dropna()
    for test in paired.columns:
        bad = paired[test] <= 0
        if bad.any():
            order, worker, run = paired.index[bad.to_numpy()][0]
            raise WashoutError(
                f"{what}: test {test!r} has {metric} = {float(paired[test][bad].iloc[0])!r} "
                f"in run {run} (worker {worker}): per-run ratios need positive values"
            )
    logs = np.log(paired.to_numpy(float))[:, [names.index(t) for t in tests]]
    return logs, paired.index.get_level_values("order").astype(str).to_numpy()


def per_run_log_ratios(ok: pd.DataFrame, claim: Claim, metric: str) -> dict[str, np.ndarray]:
    """Per order kind (fixed, random): log(A / B) of every run (worker x run) with successful
    trials of both tests on ``metric``, a test's trials in one run averaged
    (:func:`per_run_logs`)."""
    logs, orders = per_run_logs(ok, [claim.a, claim.b], metric, f"claim {claim.text!r}")
    ratios = logs[:, 0] - logs[:, 1]
    return {o: ratios[orders == o] for o in EVALUATED_ORDERS}


def evaluate_claims(
    df: pd.DataFrame,
    claims: Sequence[str],
    *,
    metric: str | None = None,
    alpha: float = 0.05,
    correction: str = "bonferroni",
) -> list[ClaimResult]:
    """Evaluate each claim on each metric (``metric``, default every metric both tests
    share) under fixed and random order, paired by run (see the module doc). Unknown tests
    or metrics are one-line errors."""
    import numpy as np

    from washout.stats.power import kruskal_rows

    level, method = check_alpha(alpha), check_method(correction)
    ok, _ = usable_trials(df, "claim evaluation")
    tests = sorted(df["test"].dropna().astype(str).unique())
    parsed = [parse_claim(c) for c in claims]
    for c in parsed:
        _known(c.text, c.a, tests)
        _known(c.text, c.b, tests)

    jobs: list[tuple[Claim, str]] = [(c, m) for c in parsed for m in _metrics_for(c, ok, metric)]
    ratios = [per_run_log_ratios(ok, c, m) for c, m in jobs]
    # One family: every claim x metric x order kind with runs to judge it on.
    family = [
        (i, o) for i, by_order in enumerate(ratios) for o in EVALUATED_ORDERS if by_order[o].size
    ]
    pvalues = []
    for i, o in family:
        c = jobs[i][0]
        alternative = "less" if c.op in ("<", "<=") else "greater"
        pvalues.append(signed_rank_p(ratios[i][o] - math.log(c.factor), alternative))
    significant, _ = adjust(pvalues, level, method)
    # Simultaneous by Bonferroni (an alpha above 1/2 would ask for less than nothing).
    confidence = max(1.0 - 2.0 * level / max(len(family), 1), 0.0)

    sides: dict[tuple[int, str], ClaimSide] = {}
    for (i, o), p, sig in zip(family, pvalues, significant):
        c, m = jobs[i]
        log_ratio, log_ci, achieved = hodges_lehmann(ratios[i][o], confidence)
        here = ok[(ok["order"] == o) & (ok["metric"] == m)]
        a = here.loc[here["test"] == c.a, "value"].to_numpy(dtype=float)
        b = here.loc[here["test"] == c.b, "value"].to_numpy(dtype=float)
        ratio = math.exp(log_ratio)
        sides[i, o] = ClaimSide(
            holds=bool(sig and c.holds_for(ratio, 1.0)),
            ratio=ratio,
            ratio_ci=(math.exp(log_ci[0]), math.exp(log_ci[1])) if log_ci else None,
            ratio_ci_confidence=achieved,
            p=p,
            n_runs=int(ratios[i][o].size),
            median_a=float(np.median(a)),
            median_b=float(np.median(b)),
            n_a=int(a.size),
            n_b=int(b.size),
        )

    # The per-run ratio in fixed vs random runs, family-wise over the claims x metrics.
    both = [i for i in range(len(jobs)) if (i, "fixed") in sides and (i, "random") in sides]
    interaction = [float(kruskal_rows(ratios[i]["fixed"], ratios[i]["random"])[1][0]) for i in both]
    differs = dict(zip(both, adjust(interaction, level, method)[0]))
    interaction_p = dict(zip(both, interaction))

    results = []
    for i, (c, m) in enumerate(jobs):
        fixed, random = sides.get((i, "fixed")), sides.get((i, "random"))
        changes = None
        if fixed is not None and random is not None:
            changes = bool(differs[i] and fixed.holds != random.holds)
        results.append(
            ClaimResult(
                claim=c.text,
                a=c.a,
                op=c.op,
                factor=c.factor,
                b=c.b,
                metric=m,
                ratio=random.ratio if random else None,
                ratio_ci=random.ratio_ci if random else None,
                interaction_p=interaction_p.get(i),
                fixed=fixed,
                random=random,
                order_changes_conclusion=changes,
            )
        )
    return results


def claims_frame(results: Sequence[ClaimResult]) -> pd.DataFrame:
    """One row per claim x metric x order kind."""
    import pandas as pd

    rows = []
    for r in results:
        for order in EVALUATED_ORDERS:
            side = getattr(r, order)
            rows.append(
                {
                    "claim": r.claim,
                    "metric": r.metric,
                    "order": order,
                    **(side.to_dict() if side else {"holds": None}),
                    "interaction_p": r.interaction_p,
                    "order_changes_conclusion": r.order_changes_conclusion,
                }
            )
    return pd.DataFrame(rows)
