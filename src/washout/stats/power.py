"""Planning: how many runs per order an experiment needs, and what a finished one could see.

The order analysis tests each test's fixed-order sample against its random-order sample
with Kruskal-Wallis (Kruskal & Wallis 1952, JASA 47(260)) at the Bonferroni level
alpha / m, m the family of test x metric comparisons (docs/design.md). Its power has no closed
form for an arbitrary distribution, so it is estimated by simulation from a pilot (a
bootstrap of the design, cf. Efron & Tibshirani 1993, "An Introduction to the Bootstrap",
ch. 6): draw both groups of n runs with replacement from the pilot's fixed-order values of
the test (the undisturbed baseline; all its ok values if it has fewer than two fixed ones),
smoothed so that a small pilot's few distinct values do not turn into artificial ties (see
:func:`smoothed_resample`), add Delta% of the pilot mean to one group (a pure location
shift, so the means differ by exactly Delta% and the shape stays the pilot's), and count
how often the test rejects. The power at n is that fraction over ``n_sim`` simulated
experiments, seeded, with the same draws for every shift (common random numbers).

Above ``SIM_RUNS_CAP`` runs per order the simulation runs at the cap with the shift scaled
to the same power: to first order a rank test's power depends on n and the shift only
through Delta sqrt(n1 n2 / (N + 1)) (Noether 1987, "Sample size determination for some
common nonparametric tests", JASA 82(398), 645-647: power = Phi(sqrt(12 n1 n2 / (N + 1))
|p - 1/2| - z), with p - 1/2 = Delta integral f^2 for a small location shift: Lehmann 1975,
ch. 2 sec. 4). The cost of a power estimate then stops growing with n: a finished
experiment of 1,000 runs per order is summarised as fast as one of 256.

- runs needed: the smallest n whose power reaches the target at the pilot's variance
  raised to the upper confidence limit that makes the power reach the target on average
  over pilots of its size (:func:`runs_for_average_power`; planned on the pilot's own
  spread, the true power fell short on average), searched from the normal-theory guess
  (stepping until the target is bracketed, then bisecting);
- smallest detectable Delta% at n: the smallest shift whose power reaches the target, by
  doubling from 1% and bisecting to 1% relative precision;
- how uncertain the pilot makes the runs needed: the runs needed at the ends of an 80%
  confidence interval of the pilot's variance (:func:`runs_needed_interval`).

Kruskal-Wallis is computed vectorised over the simulations, by the same code as the order
analysis (:func:`washout.stats.kruskal.kruskal_merged`): the same H and p as
``scipy.stats.kruskal``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.errors import WashoutError
from washout.stats.family import check_alpha
from washout.stats.floats import undefined_on_overflow
from washout.stats.kruskal import chi2_sf_1, kruskal_merged
from washout.stats.trials import usable_trials, without_resource_metrics

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from washout.stats.kruskal import Samples

N_SIM = 400
# The confidence of the interval ``washout plan`` gives the runs needed (that of the
# pilot's variance it comes from: :func:`runs_needed_interval`).
PLAN_CONFIDENCE = 0.8
# Comparisons simulated at each end of the analysis' "would detect shifts of about X% to Y%".
SPAN_ENDS = 2
MAX_RUNS = 4096
SIM_RUNS_CAP = 256
"""The most runs per order simulated (module docstring: larger n by the equivalent shift)."""
MAX_DELTA_PCT = 1000.0
CALIBRATION_PILOTS = 2000
"""Simulated normal pilots that calibrate the confidence the plan is made at
(:func:`planning_confidence`): their average power is known to about 0.005."""
CALIBRATION_TRIALS = 100
"""Larger pilots are calibrated as pilots of this size (a little more cautious than they
need: q falls slowly with the pilot's size, 0.63 at 50, 0.61 at 100, 0.60 at 200)."""


@dataclass(frozen=True)
class PowerSearch:
    """What a search for runs or a detectable shift aims at and how it simulates: the
    ``power`` to reach with Kruskal-Wallis at ``alpha_per_test``, ``n_sim`` simulated
    experiments per candidate from ``seed``, and at most ``max_runs`` runs per order."""

    power: float = 0.8
    alpha_per_test: float = 0.05
    n_sim: int = N_SIM
    seed: int = 0
    max_runs: int = MAX_RUNS

    def power_at(self, values: Any, n: int, delta_pct: float) -> float:
        """:func:`simulated_power` of n runs per order and a shift of ``delta_pct``."""
        return simulated_power(
            values, n, delta_pct, self.alpha_per_test, n_sim=self.n_sim, seed=self.seed
        )


def kruskal_rows(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kruskal-Wallis H and p for two groups, row by row: x is (S, n1), y is (S, n2)
    (:func:`washout.stats.kruskal.kruskal_merged`, the order analysis' own computation).

    Rows whose values are all equal have no test: H NaN, p 1.

    A row without ties (every simulated row: its draws carry kernel noise) has the ranks
    1..N, so its second group's rank sum is the sum of the positions its values take in
    the row sorted, and the tie correction is 1: the same H, bit for bit (the rank sums
    are integers, exact in floats whatever the order they are added in), without the
    tie-group bookkeeping that was most of a power simulation's time. Rows with ties go
    through :func:`kruskal_merged`.
    """
    import numpy as np

    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    n1, n2 = x.shape[1], y.shape[1]
    z = np.concatenate([x, y], axis=1)
    s, n = z.shape
    order = np.argsort(z, axis=1)
    ranked = np.sort(z, axis=1)  # z in that order (a sort is cheaper than gathering it)
    second = order >= n1
    h = np.full(s, np.nan)
    tied = (ranked[:, 1:] == ranked[:, :-1]).any(axis=1)
    untied = ~tied if n1 and n2 else np.zeros(s, dtype=bool)
    if untied.any():
        rank_second = second[untied] @ np.arange(1.0, n + 1.0)
        rank_first = n * (n + 1) / 2 - rank_second
        size, size_1, size_2 = float(n), float(n1), float(n2)
        h[untied] = 12.0 / (size * (size + 1)) * (
            rank_first**2 / size_1 + rank_second**2 / size_2
        ) - 3 * (size + 1)
    rest = ~untied
    if rest.any():
        h[rest], _ = kruskal_merged(
            ranked[rest].ravel(),
            np.repeat(np.arange(int(rest.sum())), n),
            second[rest].ravel(),
            np.tile([n1, n2], (int(rest.sum()), 1)),
        )
    p = np.ones(s)
    defined = ~np.isnan(h)
    p[defined] = chi2_sf_1(h[defined])
    return h, p


def smoothed_resample(v: np.ndarray, size: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Draws from the pilot by the shrunk smoothed bootstrap (Silverman 1986, "Density
    Estimation", sec. 6.4.1): a value drawn with replacement plus Gaussian kernel noise of
    Silverman's bandwidth h = 0.9 min(s, IQR / 1.34) n^(-1/5) (eq. 3.31), rescaled about the
    mean by 1 / sqrt(1 + h^2 / s^2) so the variance stays the pilot's s^2.

    Plain resampling would copy the pilot's handful of distinct values many times; a small
    shift then breaks every tie between the groups the same way, and the simulated test
    finds differences far more easily than it would on real, continuous measurements.
    """
    import numpy as np

    drawn = np.asarray(rng.choice(v, size=size), dtype=float)  # changed in place below
    s = float(np.std(v))
    if len(v) < 2 or s == 0:
        return drawn
    q75, q25 = np.percentile(v, [75, 25])
    spread = min(s, (q75 - q25) / 1.34) or s
    h = 0.9 * spread * len(v) ** -0.2
    mean = float(np.mean(v))
    # mean + (drawn - mean + h noise) / sqrt(1 + h^2 / s^2), in place: the same operations
    # in the same order, without four arrays of the simulation's size made and dropped
    noise = rng.standard_normal(size)
    noise *= h
    drawn -= mean
    drawn += noise
    drawn /= np.sqrt(1 + h**2 / s**2)
    drawn += mean
    return drawn


def simulated_power(
    values: Any,
    n: int,
    delta_pct: float,
    alpha_per_test: float,
    *,
    n_sim: int = N_SIM,
    seed: int = 0,
) -> float:
    """Fraction of ``n_sim`` simulated experiments (n runs per order drawn from ``values``
    by :func:`smoothed_resample`, one group shifted by Delta% of their mean) where
    Kruskal-Wallis rejects at ``alpha_per_test``; above ``SIM_RUNS_CAP`` runs, at the cap
    with the shift that has the same power to first order (module docstring)."""
    import numpy as np

    if n > SIM_RUNS_CAP:
        delta_pct *= math.sqrt(_rank_information(n) / _rank_information(SIM_RUNS_CAP))
        n = SIM_RUNS_CAP
    v = np.asarray(values, dtype=float)
    x, unshifted = _draws(v.tobytes(), n, n_sim, seed)
    _, p = kruskal_rows(x, unshifted + delta_pct / 100.0 * abs(float(v.mean())))
    return float(np.mean(p < alpha_per_test))


@functools.lru_cache(maxsize=4)
def _draws(pilot: bytes, n: int, n_sim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The two groups :func:`simulated_power` draws from the pilot (float64 bytes) before the
    shift, read-only: the same for every shift (common random numbers), so a search over
    shifts at one n draws them once (they were a third of a finished experiment's power
    simulation: bench/RESULTS.md, "Engine overhead per trial")."""
    import numpy as np

    v = np.frombuffer(pilot, dtype=float)
    rng = np.random.default_rng([seed, n])
    x = smoothed_resample(v, (n_sim, n), rng)
    y = smoothed_resample(v, (n_sim, n), rng)
    x.flags.writeable = y.flags.writeable = False
    return x, y


def _rank_information(n: int) -> float:
    """n1 n2 / (N + 1) for two groups of n: Noether's (1987) scale of a rank test's
    standardised shift (module docstring)."""
    return n * n / (2 * n + 1)


def normal_theory_runs(cv: float, delta_pct: float, power: float, alpha_per_test: float) -> float:
    """Runs per order for a two-sided two-sample z-test to detect Delta% at this CV,
    n = 2 (z_{1-alpha/2} + z_power)^2 (CV / Delta)^2, divided by 3 / pi, the asymptotic
    efficiency of Kruskal-Wallis (Wilcoxon) relative to it under normality (Lehmann,
    "Nonparametrics", 1975, ch. 2 sec. 4). Only the starting guess of the search."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - alpha_per_test / 2) + NormalDist().inv_cdf(power)
    return 2 * z**2 * (cv / (delta_pct / 100.0)) ** 2 / (3 / math.pi)


def runs_needed_for(
    values: Any, delta_pct: float, search: PowerSearch = PowerSearch()
) -> tuple[int | None, float | None]:
    """``(n, power at n)``: the fewest runs per order reaching the search's ``power``
    (exactly up to 100 runs, within 1% above: finer would be below the simulation's own
    noise); ``(None, power at max_runs)`` when even ``max_runs`` falls short.

    The search starts at :func:`normal_theory_runs`, steps by x1.5 up or down until the
    target is bracketed, then bisects.
    """
    import numpy as np

    def at(n: int) -> float:
        return search.power_at(values, n, delta_pct)

    power, max_runs = search.power, search.max_runs
    v = np.asarray(values, dtype=float)
    cv = _cv(v)
    guess = normal_theory_runs(cv, delta_pct, power, search.alpha_per_test) if cv > 0 else 2.0
    hi = int(min(max(2, math.ceil(guess)), max_runs))
    reached = at(hi)
    if reached < power:  # step up until the target is reached
        while reached < power:
            if hi >= max_runs:
                return None, reached
            lo, hi = hi, int(min(max(hi + 1, math.ceil(1.5 * hi)), max_runs))
            reached = at(hi)
    else:  # step down until it is missed
        lo = hi
        while True:
            if lo <= 2:
                return 2, reached
            lo = max(2, int(lo / 1.5))
            got = at(lo)
            if got < power:
                break
            hi, reached = lo, got
    while hi - lo > max(1, hi // 100):
        mid = (lo + hi) // 2
        got = at(mid)
        if got >= power:
            hi, reached = mid, got
        else:
            lo = mid
    return hi, reached


def runs_for_average_power(
    values: Any, delta_pct: float, search: PowerSearch = PowerSearch()
) -> tuple[int | None, float | None]:
    """``(n, power at n)``: the runs per order planned on the pilot's variance raised to its
    one-sided upper confidence limit at :func:`planning_confidence` (Bonett's interval, so
    the pilot's tails count), which makes the true power reach the search's ``power`` on
    average over pilots of this size (Kieser & Wassmer 1996). Planned on the pilot's own
    spread, the true power fell short on average (0.68-0.75 for a target of 0.8, 59-63% of
    pilots short: issue 27): the power curve is concave around its target, so a pilot that
    understates the noise loses more power than one that overstates it gains."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    q = planning_confidence(len(v), search.power, search.alpha_per_test)
    _, upper = variance_interval(v, 2 * q - 1)
    return runs_needed_for(rescaled(v, float(upper)), delta_pct, search)


@functools.lru_cache(maxsize=256)
def planning_confidence(pilot_trials: int, power: float, alpha_per_test: float) -> float:
    """The one-sided confidence q of the upper limit of the pilot's variance to plan on, so
    that the power averaged over pilots of ``pilot_trials`` reaches ``power``: Kieser &
    Wassmer's (1996, "On the use of the upper confidence limit for the variance from a pilot
    sample for sample size determination", Biometrical Journal 38(8), 941-949) calibration,
    for the limit the plan uses (:func:`variance_interval`: Bonett's, whose centre is the
    pilot's s^2, below the population's variance for more than half the pilots) and under
    normal theory, averaged over ``CALIBRATION_PILOTS`` seeded normal pilots (q by
    bisection). A plan on the variance U, simulated from the pilot, is the plan for a
    population whose rank-test spread is U k (:func:`rank_spread_factor`: the pilot's shape
    moves it too), so its power is Phi(sqrt(U k / sigma^2) (z_{1-alpha/2} + z_power) -
    z_{1-alpha/2}) (two-sided level, the far tail neglected). For pilots of 10 at alpha 0.01
    and power 0.8, planning on s^2 itself gives 0.67 on average and q is 0.72; for 50, 0.77
    and 0.63. At least 0.5, at most 0.999."""
    from statistics import NormalDist

    import numpy as np
    from scipy.stats import norm

    n = min(max(pilot_trials, 2), CALIBRATION_TRIALS)
    pilots = np.random.default_rng([19_960_941, n]).standard_normal((CALIBRATION_PILOTS, n))
    variance, root = bonett_parts(pilots)
    shape = rank_spread_factor(pilots)
    z_alpha, z_power = norm.ppf(1 - alpha_per_test / 2), NormalDist().inv_cdf(power)

    def average(q: float) -> float:
        _, upper = bonett_limits(variance, root, n, NormalDist().inv_cdf(q))
        return float(np.mean(norm.cdf(np.sqrt(upper * shape) * (z_alpha + z_power) - z_alpha)))

    lo, hi = 0.5, 0.999
    if average(lo) >= power:
        return lo
    if average(hi) < power:
        return hi
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if average(mid) < power else (lo, mid)
    return hi


def rank_spread_factor(pilots: np.ndarray) -> np.ndarray:
    """Per pilot (row), k = sigma_eff^2 / var: how much the spread a rank test sees in the
    pilot's smoothed bootstrap distribution f (:func:`smoothed_resample`: a Gaussian mixture
    whose variance is the pilot's) differs from its variance. A rank test's power for a
    shift Delta depends on the density only through Delta integral f^2 (Lehmann 1975, ch. 2
    sec. 4), and a normal of variance sigma^2 has integral f^2 = 1 / (2 sigma sqrt(pi)), so
    sigma_eff^2 = 1 / (4 pi (integral f^2)^2); for the mixture, integral f^2 is the mean over
    pairs of components of the normal density of their distance with variance 2 tau^2. k is
    1 for a normal f and about 0.92 on average (5% of them below 0.52) for pilots of 10
    from a normal population: a pilot whose bulk is tight, with an outlier, promises more
    power than its variance says."""
    import numpy as np

    rows = np.atleast_2d(np.asarray(pilots, dtype=float))
    n = rows.shape[1]
    out = []
    for chunk in np.array_split(rows, max(1, len(rows) * n * n // 4_000_000)):
        s = chunk.std(axis=1)
        q75, q25 = np.percentile(chunk, [75, 25], axis=1)
        spread = np.minimum(s, (q75 - q25) / 1.34)
        h = 0.9 * np.where(spread > 0, spread, s) * n**-0.2
        shrink = 1 / np.sqrt(1 + h**2 / s**2)
        mean = chunk.mean(axis=1, keepdims=True)
        centres, tau = mean + (chunk - mean) * shrink[:, None], h * shrink
        gaps = centres[:, :, None] - centres[:, None, :]
        squared = np.mean(np.exp(-(gaps**2) / (4 * tau[:, None, None] ** 2)), axis=(1, 2))
        squared /= 2 * tau * math.sqrt(math.pi)
        out.append(1 / (4 * math.pi * squared**2 * s**2))
    return np.concatenate(out)


def rescaled(values: np.ndarray, variance: float) -> np.ndarray:
    """The pilot rescaled about its mean so that its spread (np.var, what
    :func:`smoothed_resample` keeps) is ``variance``; its shape is kept."""
    import numpy as np

    spread = float(np.var(values))
    scale = math.sqrt(variance / spread) if spread > 0 else 1.0
    return values.mean() + (values - values.mean()) * scale


def variance_interval(
    samples: Any, confidence: float = PLAN_CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided ``confidence`` interval for the population variance from each sample (the
    last axis of ``samples``), by Bonett (2006, "Approximate confidence interval for
    standard deviation of nonnormal distributions", Computational Statistics & Data
    Analysis 50(3), 775-782): exp(ln(c s^2) -/+ z se), s^2 the unbiased sample variance,
    z = z_{1 - (1 - confidence)/2}, c = n / (n - z), se = c sqrt((g4 - (n - 3) / n) / (n - 1)),
    and the kurtosis g4 = n sum (y - m)^4 / (sum (y - mean)^2)^2 about the trimmed mean m
    (proportion 1 / (2 sqrt(n - 4)) cut from each end; the median for n <= 5).

    Nearly exact for normal samples; for skewed and heavy-tailed ones (latencies) it widens
    with the sample's kurtosis, where the chi-square interval's coverage collapses (0.55
    instead of 0.8 for lognormal samples of 20 with sigma 0.5; Bonett's 0.68: still short,
    tests/test_stats_power.py). (0, 0) for a sample without spread."""
    from statistics import NormalDist

    import numpy as np

    v = np.asarray(samples, dtype=float)
    variance, root = bonett_parts(v)
    return bonett_limits(variance, root, v.shape[-1], NormalDist().inv_cdf(0.5 + confidence / 2))


def bonett_parts(samples: Any) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`variance_interval` needs of each sample, whatever the confidence:
    ``(s^2, sqrt((g4 - (n - 3) / n) / (n - 1)))``."""
    import numpy as np
    from scipy.stats import trim_mean

    v = np.asarray(samples, dtype=float)
    n = v.shape[-1]
    if n > 5:
        centre = trim_mean(v, 1 / (2 * math.sqrt(n - 4)), axis=-1)
    else:
        centre = np.median(v, axis=-1)
    squares = np.sum((v - v.mean(axis=-1, keepdims=True)) ** 2, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        kurtosis = n * np.sum((v - centre[..., None]) ** 4, axis=-1) / squares**2
        root = np.sqrt((kurtosis - (n - 3) / n) / (n - 1))
    return np.var(v, axis=-1, ddof=1), root


def bonett_limits(
    variance: np.ndarray, root: np.ndarray, n: int, z: float
) -> tuple[np.ndarray, np.ndarray]:
    """Bonett's limits exp(ln(c s^2) -/+ z c root), c = n / (n - z), of samples of n from
    their :func:`bonett_parts`; (0, 0) for a sample without spread."""
    import numpy as np

    c = n / (n - z)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_centre = np.log(c * variance)
        lo, hi = np.exp(log_centre - z * c * root), np.exp(log_centre + z * c * root)
    spread = variance > 0
    return np.where(spread, lo, 0.0), np.where(spread, hi, 0.0)


def runs_needed_interval(
    values: Any,
    delta_pct: float,
    search: PowerSearch = PowerSearch(),
    confidence: float = PLAN_CONFIDENCE,
) -> tuple[int | None, int | None]:
    """The runs needed at either end of the ``confidence`` interval of the pilot's variance
    (:func:`variance_interval`): :func:`runs_needed_for` on the pilot rescaled about its
    mean to that variance (its shape kept). A small pilot's spread is itself uncertain, and
    the runs needed grow with it (as the variance, for a shift of fixed size: Lehmann 1975,
    ch. 2 sec. 4); using the variance's upper confidence limit for the plan is Browne's
    (1995, "On the use of a pilot sample for sample size determination", Statistics in
    Medicine 14(17)). Bootstrap percentiles of the pilot, used before, under-cover for small
    pilots: a resample cannot be more spread out than the pilot itself. An end beyond
    ``max_runs`` is None."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    ends = []
    for variance in variance_interval(v, confidence):
        n, _ = runs_needed_for(rescaled(v, float(variance)), delta_pct, search)
        ends.append(n)
    return ends[0], ends[1]


def detectable_delta_for(values: Any, n: int, search: PowerSearch = PowerSearch()) -> float | None:
    """The smallest Delta% (of the mean) detected with the search's ``power`` at n runs per
    order, to 1% of itself; None when even ``MAX_DELTA_PCT`` is not (n too small for the
    level; the search's ``max_runs`` does not apply).

    The search starts where :func:`normal_theory_runs` would put it, steps by x1.5 until
    the target is bracketed, then bisects.
    """
    import numpy as np

    def at(delta: float) -> float:
        return search.power_at(values, n, delta)

    power = search.power
    cv = _cv(np.asarray(values, dtype=float))
    if cv > 0:  # invert n = normal_theory_runs(cv, delta): delta scales as 1 / sqrt(n)
        start = 100.0 * math.sqrt(normal_theory_runs(cv, 100.0, power, search.alpha_per_test) / n)
    else:
        start = 1.0
    hi = min(start, MAX_DELTA_PCT)
    if at(hi) < power:
        while True:
            if hi >= MAX_DELTA_PCT:
                return None
            lo, hi = hi, min(1.5 * hi, MAX_DELTA_PCT)
            if at(hi) >= power:
                break
    else:
        lo = hi / 1.5
        while at(lo) >= power:
            if lo < 1e-6:  # no spread: any shift is seen
                return lo
            hi, lo = lo, lo / 1.5
    while hi - lo > 0.01 * hi:
        mid = (lo + hi) / 2
        if at(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def detectable_span(
    samples: Samples,
    alpha_per_test: float,
    *,
    power: float = 0.8,
    n_sim: int = N_SIM,
    seed: int = 0,
) -> tuple[float, float] | None:
    """``(smallest, largest)`` Delta% that a finished experiment's comparisons would detect
    with ``power``: :func:`detectable_delta_for`, the computation ``washout plan`` runs, on
    each comparison's fixed-order trials at n = the smaller of its fixed and random counts.

    Simulating every comparison of a large family would take minutes, so the span's ends are
    simulated for the ``SPAN_ENDS`` comparisons with the smallest and the largest relative
    spread, IQR / |mean| / sqrt(n) (the detectable shift of a rank test scales with the
    spread over sqrt(n): Lehmann 1975, ch. 2 sec. 4); every comparison when there are few.
    None when no comparison has two trials in each order and a non-zero mean.
    """
    import numpy as np

    pools, sizes, spreads = [], [], []
    for g in range(len(samples.keys)):
        n = int(samples.counts[g].min())
        pool = samples.sample(g, 0)
        mean = float(np.mean(pool)) if n >= 2 else 0.0
        if mean == 0.0:
            continue
        q25, q75 = np.percentile(pool, [25, 75])
        pools.append(pool)
        sizes.append(n)
        spreads.append((q75 - q25) / abs(mean) / math.sqrt(n))
    if not pools:
        return None
    ranked = np.argsort(spreads, kind="stable").tolist()
    chosen = sorted(set(ranked[:SPAN_ENDS] + ranked[-SPAN_ENDS:]))
    search = PowerSearch(power, alpha_per_test, n_sim, seed)
    found = [detectable_delta_for(pools[i], sizes[i], search) for i in chosen]
    shifts = [f for f in found if f is not None]
    return (min(shifts), max(shifts)) if shifts else None


@dataclass(frozen=True)
class RunsNeeded:
    """The plan for one test's metric."""

    test: str
    metric: str
    # the runs per order planned for the target power on average over pilots
    # (runs_for_average_power), and the power at them with the variance it planned on
    runs_needed: int | None
    power_at: float | None
    # runs_needed at the ends of the pilot variance's PLAN_CONFIDENCE interval (None beyond
    # MAX_RUNS).
    runs_interval: tuple[int | None, int | None] | None
    cv: float
    n_pilot: int
    source: str
    delta_pct: float
    alpha_per_test: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["runs_interval"] = list(self.runs_interval) if self.runs_interval else None
        return d


@dataclass(frozen=True)
class DetectableDelta:
    """What an experiment of n runs per order could detect for one test's metric."""

    test: str
    metric: str
    n: int
    detectable_pct: float | None
    cv: float
    alpha_per_test: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pilot_samples(
    df: pd.DataFrame, metric: str | None
) -> list[tuple[str, str, np.ndarray, str, pd.DataFrame]]:
    """Per (test, metric): the resampling pool, where it came from, and the test's ok rows.
    The spec's own metrics, as the analysis takes them (the resource and health measures
    only where ``metric`` names one): a store's export, which holds every trial's measures,
    plans as the store does, with the same family and so the same alpha per test."""
    ok, _ = usable_trials(without_resource_metrics(df, metric), "planning")
    if metric is not None:
        if metric not in set(ok["metric"]):
            raise WashoutError(
                f"metric = {metric!r}: not in the pilot (metrics: "
                f"{', '.join(sorted(map(str, ok['metric'].unique())))})"
            )
        ok = ok[ok["metric"] == metric]
    if ok.empty:
        raise WashoutError("pilot: no successful trials with a value to plan from")
    out = []
    for (test, met), group in ok.groupby(["test", "metric"], sort=True):
        fixed = group.loc[group["order"] == "fixed", "value"].to_numpy(dtype=float)
        pool, source = (
            (fixed, "fixed") if len(fixed) >= 2 else (group["value"].to_numpy(dtype=float), "all")
        )
        out.append((str(test), str(met), pool, source, group))
    return out


def _cv(v: np.ndarray) -> float:
    """Coefficient of variation: population standard deviation / mean (docs/design.md)."""
    import numpy as np

    mean = float(np.mean(v)) if len(v) else float("nan")
    return float(np.std(v) / mean) if mean else float("nan")


def _check_power(power: float) -> float:
    if not (isinstance(power, (int, float)) and 0.0 < float(power) < 1.0):
        raise WashoutError(f"power = {power!r}: expected a number between 0 and 1")
    return float(power)


@undefined_on_overflow
def plan_runs(
    df: pd.DataFrame,
    delta_pct: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    family_size: int | None = None,
    metric: str | None = None,
    n_sim: int = N_SIM,
    seed: int = 0,
    max_runs: int = MAX_RUNS,
) -> list[RunsNeeded]:
    """Runs per order each test needs to detect ``delta_pct`` with Kruskal-Wallis at
    alpha / m (m = ``family_size``, default the pilot's number of test x metric pairs): the
    fewest whose power reaches ``power`` on average over pilots of this size
    (:func:`runs_for_average_power`), with the runs needed at the ends of the variance's
    interval (:func:`runs_needed_interval`)."""
    import numpy as np

    level, target = check_alpha(alpha), _check_power(power)
    if not (isinstance(delta_pct, (int, float)) and np.isfinite(delta_pct) and delta_pct > 0):
        raise WashoutError(f"detect = {delta_pct!r}: expected a positive percentage, e.g. 2%")
    samples = _pilot_samples(df, metric)
    per_test = level / (family_size or len(samples))
    search = PowerSearch(target, per_test, n_sim, seed, max_runs)
    rows = []
    for test, met, pool, source, _ in samples:
        n, reached, interval = None, None, None
        if len(pool) >= 2:
            n, reached = runs_for_average_power(pool, float(delta_pct), search)
            interval = runs_needed_interval(pool, float(delta_pct), search)
        rows.append(
            RunsNeeded(
                test,
                met,
                n,
                reached,
                interval,
                _cv(pool),
                int(len(pool)),
                source,
                float(delta_pct),
                per_test,
            )
        )
    return rows


@undefined_on_overflow
def detectable_deltas(
    df: pd.DataFrame,
    *,
    n: int | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    family_size: int | None = None,
    metric: str | None = None,
    n_sim: int = N_SIM,
    seed: int = 0,
) -> list[DetectableDelta]:
    """Per test x metric, the smallest Delta% detectable at n runs per order (default: the
    data's own, the smaller of its fixed and random trial counts) at alpha / m."""
    level, target = check_alpha(alpha), _check_power(power)
    samples = _pilot_samples(df, metric)
    per_test = level / (family_size or len(samples))
    search = PowerSearch(target, per_test, n_sim, seed)
    rows = []
    for test, met, pool, _, group in samples:
        counts = group["order"].value_counts()
        size = n if n is not None else int(min(counts.get("fixed", 0), counts.get("random", 0)))
        found = None
        if len(pool) >= 2 and size >= 2:
            found = detectable_delta_for(pool, size, search)
        rows.append(DetectableDelta(test, met, size, found, _cv(pool), per_test))
    return rows


def plan_frame(rows: list[RunsNeeded] | list[DetectableDelta]) -> pd.DataFrame:
    """The plan (or the detectable differences) as a DataFrame, one row per test x metric."""
    import pandas as pd

    return pd.DataFrame([r.to_dict() for r in rows])
