"""Order analysis: did running the tests in a fixed order change their results?

docs/design.md, "Order analysis", is the spec. Per test x metric (x worker), the successful
fixed-order trials F and random-order trials R are compared:

- Kruskal-Wallis H (tie-corrected) and p from chi^2 with k - 1 = 1 degree of freedom, the
  statistic scipy.stats.kruskal computes (Kruskal & Wallis 1952, "Use of ranks in
  one-criterion variance analysis", JASA 47(260), eqs. 1.1 and 1.4), computed for all
  comparisons at once from one sort of the data (:mod:`washout.stats.kruskal`).
- Family-wise correction over the m comparisons with both samples non-empty
  (:mod:`washout.stats.family`: Bonferroni or Holm).
- eta^2_H = (H - k + 1) / (n - k), clipped at 0 (Tomczak & Tomczak 2014, "The need to report
  effect size estimates revisited", Trends in Sport Sciences 21(1), eq. 5).
- Delta% = (mean F - mean R) / mean F * 100 (Duplyakin et al., USENIX ATC 2023, Sec. 4),
  and the same of the medians, (median F - median R) / median F * 100, the effect beside the
  medians every table shows (a skewed sample's mean can differ from its median by far more
  than the medians differ from each other).
- Exact median CIs (:mod:`washout.stats.median_ci`, Le Boudec Thm 2.1) and their overlap
  case (Duplyakin et al. 2023, Algorithm 2): 1 disjoint, 2 each median strictly inside the
  other's CI, 3 otherwise. By default at the family-wise confidence 1 - alpha/m, the level
  the verdict uses (Bonferroni, Dunn 1961): per-test 95% CIs over m tests would make "red
  flags" of chance differences (case 1 in 11% of 30-test experiments with no effect).
- CV = population standard deviation / mean; Shapiro-Wilk p for n >= 3 (Shapiro & Wilk 1965,
  Biometrika 52; Royston's AS R94 as scipy.stats.shapiro, :mod:`washout.stats.shapiro`).

When every value of a comparison is equal, H is 0/0 and scipy returns NaN: reported as
null, and counted in the family with p = 1 (the exact permutation p-value: every
relabelling gives the same data), so m stays "comparisons with both samples non-empty".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from washout.data.longformat import is_in
from washout.errors import WashoutError
from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.frames import FrameView
from washout.stats.kruskal import Samples, chi2_sf_1, kruskal_two
from washout.stats.median_ci import check_confidence, median_ci_rank

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

ORDERS: tuple[str, str] = ("fixed", "random")
# The long-format columns the order analysis reads ("worker" too when split by worker).
COLUMNS: tuple[str, ...] = ("order", "test", "metric", "value", "status")
CASE_WORDS: dict[int, str] = {1: "red flag", 2: "likely no change", 3: "inconclusive"}


def _values(frame: pd.DataFrame, source: str) -> np.ndarray:
    """The ``value`` column as floats, NaN where missing; a one-line error at the first
    entry that is not a number or is infinite."""
    import numpy as np
    import pandas as pd

    raw = frame["value"]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = np.isinf(values)
    if raw.dtype.kind not in "fiub":  # text: anything unparsable is an error, not "missing"
        bad |= np.isnan(values) & raw.notna().to_numpy() & (raw.astype(str).str.strip() != "")
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise WashoutError.at(
            f"{source}: row {frame.index[i]}",
            "value",
            raw.iloc[i],
            "a trial's value must be a finite number (or empty when it has none)",
        )
    return values


def collect_samples(
    df: pd.DataFrame, by_worker: bool = False, source: str = "long format"
) -> Samples:
    """Group long-format rows into comparisons (test x metric [x worker]) of sorted samples.

    Only ``fixed`` and ``random`` rows take part; rows with status other than ``ok`` are
    counted as excluded, and so are ``ok`` rows without a value for the metric (the store
    records those when a metric could not be parsed): ``missing`` counts the latter among
    the excluded. Comparisons come in order of first appearance of their test, then
    metric, then worker.

    A radix sort by sample, then an in-place sort of each sample and an argsort of each
    comparison's merged samples, orders everything: several times faster than a lexsort
    over (key, value).
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    absent = [c for c in COLUMNS if c not in df.columns]
    if absent:
        raise WashoutError(
            f"{source}: column(s) {', '.join(absent)} missing "
            f"(columns present: {', '.join(map(str, df.columns))})"
        )
    compared = is_in(df["order"], ORDERS)
    frame = df if compared.all() else df.loc[compared]
    key_cols = ["test", "metric"] + (["worker"] if by_worker else [])
    if by_worker and "worker" not in frame.columns:
        frame = frame.assign(worker="local")
    # Each column's pass over the rows on its own thread: the hashing, gathers and
    # comparisons run without the GIL, so the passes share the cores.
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        first_seen = [pool.submit(_first_seen_codes, frame[col]) for col in key_cols]
        random_rows = pool.submit(is_in, frame["order"], ("random",))
        ok_rows = pool.submit(is_in, frame["status"], ("ok",))
        values_read = pool.submit(_values, frame, source)
    uniques: list[Any] = []
    columns = []
    for col, seen in zip(key_cols, first_seen):
        codes, levels = seen.result()
        if (codes < 0).any():
            i = int(np.flatnonzero(codes < 0)[0])
            raise WashoutError.at(
                f"{source}: row {frame.index[i]}", col, frame[col].iloc[i], "missing"
            )
        columns.append(codes)
        uniques.append(levels)
    # The key columns in mixed radix, in the smallest integer type that holds every
    # combination: each pass over millions of rows costs its fresh memory's page faults.
    combinations = math.prod(len(levels) for levels in uniques)
    combined: np.ndarray = columns[0].astype(np.int32 if combinations < 2**31 else np.int64)
    for codes, levels in zip(columns[1:], uniques[1:]):
        np.multiply(combined, len(levels), out=combined)
        np.add(combined, codes, out=combined)
    gcodes, gvals = _dense_codes(combined)
    n_groups = len(gvals)
    rest = np.asarray(gvals, dtype=np.int64)
    parts = []
    for levels in reversed(uniques):
        parts.append(levels[rest % len(levels)])
        rest = rest // len(levels)
    parts.reverse()
    workers = parts[2] if by_worker else [None] * n_groups
    keys = [
        (str(t), str(m), None if w is None else str(w))
        for t, m, w in zip(parts[0], parts[1], workers)
    ]

    o, status_ok, all_values = random_rows.result(), ok_rows.result(), values_read.result()
    missing = status_ok & np.isnan(all_values)
    ok = status_ok & ~missing
    key_type = np.min_scalar_type(max(2 * n_groups - 1, 0))  # 16 bits for < 32,768 comparisons
    gcodes *= 2
    gcodes += o
    slot = gcodes.astype(key_type)
    excluded = np.bincount(slot[~ok], minlength=2 * n_groups).reshape(n_groups, 2)
    no_value = np.bincount(slot[missing], minlength=2 * n_groups).reshape(n_groups, 2)
    values = all_values[ok]
    slot_ok = slot[ok]
    # A radix sort groups the values by sample; then each sample's few hundred values are
    # sorted in place (np.sort has a SIMD path, argsort of floats has none here; a tenth of
    # an argsort and gather per sample), and each comparison's two sorted samples are
    # argsorted (timsort merges the two runs): faster than one argsort of millions of floats.
    counts = np.bincount(slot_ok, minlength=2 * n_groups)
    starts = np.cumsum(counts) - counts
    ordered = values[np.argsort(slot_ok, kind="stable")]
    for start, n in zip(starts.tolist(), counts.tolist()):
        ordered[start : start + n].sort()
    per_group = counts.reshape(n_groups, 2).sum(axis=1)
    by_value = np.empty(values.size, dtype=np.int64)
    for start, n in zip((np.cumsum(per_group) - per_group).tolist(), per_group.tolist()):
        by_value[start : start + n] = start + np.argsort(ordered[start : start + n], kind="stable")
    return Samples(
        keys=keys,
        values=ordered,
        by_value=by_value,
        starts=starts.reshape(n_groups, 2),
        counts=counts.reshape(n_groups, 2),
        excluded=excluded,
        missing=no_value,
    )


def _first_seen_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(column)``: codes numbering the values in order of first appearance
    (-1: missing) and those values (an object array). A categorical's own small integer
    codes are renumbered through a table instead of hashing every row."""
    import numpy as np
    import pandas as pd

    if not isinstance(column.dtype, pd.CategoricalDtype):
        codes, levels = pd.factorize(column, sort=False)
        return codes, np.asarray(levels, dtype=object)
    raw = column.cat.codes.to_numpy()
    seen = pd.unique(raw)
    seen = seen[seen >= 0]
    small = np.min_scalar_type(-len(column.cat.categories) - 1)
    renumber = np.full(len(column.cat.categories) + 1, -1, dtype=small)
    renumber[seen] = np.arange(len(seen))  # renumber[-1]: a missing value stays -1
    levels = np.asarray(column.cat.categories, dtype=object)[seen]
    return renumber[raw], levels


def _dense_codes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(keys, sort=True)`` of non-negative integer keys: the rank of each key
    among the distinct ones (int64, or int32 when counted), and those keys ascending. Keys
    below a few times the row count (every test x metric x worker combination, as a rule)
    are counted, not hashed."""
    import numpy as np
    import pandas as pd

    if not keys.size or int(keys.max()) >= 4 * keys.size + 1024:
        codes, distinct = pd.factorize(keys, sort=True)
        return codes, np.asarray(distinct, dtype=np.int64)
    present = np.bincount(keys) > 0
    distinct = np.flatnonzero(present)
    rank = (np.cumsum(present) - 1).astype(np.int32)
    return rank[keys], distinct


def _min_p(n_fixed: np.ndarray, n_random: np.ndarray) -> np.ndarray:
    """The smallest Kruskal-Wallis p two samples of these sizes can give: complete separation
    without ties, fixed ranks 1..n_F (NaN where a sample is empty)."""
    import numpy as np

    n_f = n_fixed.astype(float)
    n_r = n_random.astype(float)
    n = n_f + n_r
    r_f = n_f * (n_f + 1) / 2.0
    r_r = n * (n + 1) / 2.0 - r_f
    with np.errstate(divide="ignore", invalid="ignore"):
        h = 12.0 / (n * (n + 1)) * (r_f**2 / n_f + r_r**2 / n_r) - 3 * (n + 1)
    return np.where((n_f > 0) & (n_r > 0), chi2_sf_1(h), np.nan)


def ci_case(
    median_fixed: float,
    ci_fixed: tuple[float, float] | None,
    median_random: float,
    ci_random: tuple[float, float] | None,
) -> int | None:
    """Overlap case of two median CIs (Duplyakin et al. 2023, Algorithm 2); None without CIs.

    1: the CIs are disjoint (red flag); 2: the random median lies strictly inside the fixed
    CI and the fixed median strictly inside the random CI (likely no change); 3: otherwise.
    """
    if ci_fixed is None or ci_random is None:
        return None
    (f_lo, f_hi), (r_lo, r_hi) = ci_fixed, ci_random
    if f_hi < r_lo or r_hi < f_lo:
        return 1
    if f_lo < median_random < f_hi and r_lo < median_fixed < r_hi:
        return 2
    return 3


def _num(x: float) -> float | None:
    """A float for JSON: None for NaN and infinities."""
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class OrderComparison:
    """One test x metric (x worker): fixed vs random order. Field names are the JSON keys."""

    test: str
    metric: str
    worker: str | None
    n_fixed: int
    n_random: int
    excluded_fixed: int
    excluded_random: int
    mean_fixed: float | None
    mean_random: float | None
    median_fixed: float | None
    median_random: float | None
    cv_fixed: float | None
    cv_random: float | None
    shapiro_p_fixed: float | None
    shapiro_p_random: float | None
    kw_h: float | None
    kw_p: float | None
    significant: bool
    eta_squared: float | None
    delta_pct: float | None
    delta_median_pct: float | None
    ci_fixed: tuple[float, float] | None
    ci_random: tuple[float, float] | None
    ci_confidence_fixed: float | None
    ci_confidence_random: float | None
    ci_case: int | None
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of one comparison (lists for CIs, no NaN)."""
        out: dict[str, Any] = {}
        for name in JSON_TEST_KEYS:
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out


JSON_TEST_KEYS: tuple[str, ...] = (
    "test",
    "metric",
    "worker",
    "n_fixed",
    "n_random",
    "excluded_fixed",
    "excluded_random",
    "mean_fixed",
    "mean_random",
    "median_fixed",
    "median_random",
    "cv_fixed",
    "cv_random",
    "shapiro_p_fixed",
    "shapiro_p_random",
    "kw_h",
    "kw_p",
    "significant",
    "eta_squared",
    "delta_pct",
    "delta_median_pct",
    "ci_fixed",
    "ci_random",
    "ci_confidence_fixed",
    "ci_confidence_random",
    "ci_case",
    "warnings",
)


@dataclass(frozen=True)
class OrderAnalysis(FrameView):
    """The family of fixed-vs-random comparisons and its verdict."""

    alpha: float
    correction: str
    family_size: int
    alpha_per_test: float | None
    verdict: str  # "order-matters" | "no-evidence"
    tests: tuple[OrderComparison, ...]
    ci_confidence: float = 0.95
    # The trials compared, for what is simulated only when shown (:meth:`detectable_span`).
    samples: Samples | None = field(default=None, compare=False, repr=False)

    def detectable_span(self, power: float = 0.8) -> tuple[float, float] | None:
        """The smallest and largest |Delta%| these trials would detect with ``power`` at the
        verdict's level alpha/m, simulated as ``washout plan`` does
        (:func:`washout.stats.power.detectable_span`); None when nothing can be simulated."""
        if self.samples is None or not self.family_size:
            return None
        from washout.stats.power import detectable_span

        return detectable_span(self.samples, self.alpha / self.family_size, power=power)

    @property
    def significant(self) -> tuple[OrderComparison, ...]:
        """The comparisons significant after the family-wise correction."""
        return tuple(t for t in self.tests if t.significant)

    def to_dict(self) -> dict[str, Any]:
        """The ``washout analyze --format json`` object (valid JSON: null, never NaN)."""
        return {
            "alpha": self.alpha,
            "correction": self.correction,
            "family_size": self.family_size,
            "alpha_per_test": self.alpha_per_test,
            "verdict": self.verdict,
            "ci_confidence": self.ci_confidence,
            "tests": [t.to_dict() for t in self.tests],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per comparison; CIs split into _lo/_hi columns, warnings joined by '; '."""
        import pandas as pd

        rows = []
        for t in self.tests:
            row = t.to_dict()
            for side in ORDERS:
                ci = row.pop(f"ci_{side}")
                row[f"ci_{side}_lo"], row[f"ci_{side}_hi"] = ci if ci is not None else (None, None)
            row["warnings"] = "; ".join(t.warnings)
            rows.append(row)
        columns = [c for c in JSON_TEST_KEYS if c not in ("ci_fixed", "ci_random", "warnings")]
        columns[columns.index("ci_confidence_fixed") : columns.index("ci_confidence_fixed")] = [
            "ci_fixed_lo",
            "ci_fixed_hi",
            "ci_random_lo",
            "ci_random_hi",
        ]
        columns += ["warnings"]
        frame = pd.DataFrame(rows, columns=columns)
        for col in ("ci_case",):
            frame[col] = frame[col].astype("Int64")
        return frame


@dataclass(frozen=True)
class SampleSummary:
    """Per (comparison, order) summaries over a :class:`Samples`, as (G, 2) arrays."""

    mean: np.ndarray
    median: np.ndarray
    std: np.ndarray  # population standard deviation
    constant: np.ndarray  # bool: n >= 1 and all values equal


def summarize(samples: Samples) -> SampleSummary:
    """Means, medians, population standard deviations (two-pass) of every sample at once."""
    import numpy as np

    counts = samples.counts.ravel()
    starts = samples.starts.ravel()
    slots = np.repeat(np.arange(counts.size), counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.bincount(slots, weights=samples.values, minlength=counts.size) / counts
        dev = samples.values - mean[slots]
        std = np.sqrt(np.bincount(slots, weights=dev * dev, minlength=counts.size) / counts)
    last = np.maximum(counts - 1, 0)
    has = counts > 0
    safe = np.where(has, starts, 0)
    lo_mid = np.where(has, safe + (counts - 1) // 2, 0)
    hi_mid = np.where(has, safe + counts // 2, 0)
    median = np.full(counts.size, np.nan)
    constant = np.zeros(counts.size, dtype=bool)
    if samples.values.size:
        # (a + b) / 2 as numpy's median has it; where a + b overflows (values near the
        # float limit), the halves' sum, which does not (and loses only subnormal digits)
        lo, hi = samples.values[lo_mid[has]], samples.values[hi_mid[has]]
        with np.errstate(over="ignore"):
            total = lo + hi
        median[has] = np.where(np.isfinite(total), total / 2.0, lo * 0.5 + hi * 0.5)
        constant[has] = samples.values[safe[has]] == samples.values[(safe + last)[has]]
    shape = samples.counts.shape
    return SampleSummary(
        mean.reshape(shape), median.reshape(shape), std.reshape(shape), constant.reshape(shape)
    )


def shapiro_all(
    samples: Samples, summary: SampleSummary, constant: float = float("nan")
) -> tuple[np.ndarray, np.ndarray]:
    """Shapiro-Wilk W and p of every sample, each (G, 2) (Shapiro & Wilk 1965, by Royston's
    AS R94 as scipy.stats.shapiro: :mod:`washout.stats.shapiro`); NaN below n = 3,
    ``constant`` for a constant sample (W undefined; scipy itself then returns 1).

    Samples of equal size are tested together, one matrix per size.
    """
    import numpy as np

    from washout.stats.shapiro import shapiro_sorted

    stat = np.full(samples.counts.shape, np.nan)
    p = np.full(samples.counts.shape, np.nan)
    big_enough = samples.counts >= 3
    stat[big_enough & summary.constant] = p[big_enough & summary.constant] = constant
    testable = big_enough & ~summary.constant
    for n in np.unique(samples.counts[testable]):
        where = np.argwhere(testable & (samples.counts == n))
        starts = samples.starts[where[:, 0], where[:, 1]]
        block = samples.values[starts[:, None] + np.arange(n)[None, :]]
        w, pw = shapiro_sorted(block)
        stat[where[:, 0], where[:, 1]] = w
        p[where[:, 0], where[:, 1]] = pw
    return stat, p


def _min_n_for_ci(confidence: float) -> int:
    """The smallest sample size with a median CI at this confidence."""
    n = 1
    while median_ci_rank(n, confidence) is None:
        n += 1
    return n


def _median_cis(
    samples: Samples, confidence: float
) -> tuple[list[list[tuple[float, float] | None]], list[list[float | None]]]:
    """Every sample's median CI (Le Boudec Thm 2.1, :func:`median_ci_rank`) and its achieved
    confidence, as (G, 2) nested lists; None where a sample is empty or too small. The
    order statistics of all samples are gathered at once."""
    import numpy as np

    sizes = samples.counts.ravel().tolist()
    ranks = {n: rank for n in set(sizes) if n and (rank := median_ci_rank(n, confidence))}
    j = np.array([ranks[n][0] if n in ranks else 0 for n in sizes], dtype=np.int64)
    has = j > 0
    starts = samples.starts.ravel()[has]
    lo = samples.values[starts + j[has] - 1].tolist()
    hi = samples.values[starts + samples.counts.ravel()[has] - j[has]].tolist()
    bounds = iter(zip(lo, hi))
    cis = [next(bounds) if n in ranks else None for n in sizes]
    conf = [ranks[n][1] if n in ranks else None for n in sizes]
    return [cis[i : i + 2] for i in range(0, len(cis), 2)], [
        conf[i : i + 2] for i in range(0, len(conf), 2)
    ]


def analyze_order(
    df: pd.DataFrame,
    alpha: float = 0.05,
    correction: str = "bonferroni",
    by_worker: bool = False,
    ci_confidence: float | None = None,
) -> OrderAnalysis:
    """Compare fixed- and random-order trials per test x metric (x worker); see the module doc.

    ``ci_confidence`` is the median CIs' confidence; None: 1 - alpha/m, the verdict's level.
    """
    import numpy as np

    alpha = check_alpha(alpha)
    correction = check_method(correction)
    samples = collect_samples(df, by_worker=by_worker)
    summary = summarize(samples)
    h, p = kruskal_two(samples)
    counts, excluded = samples.counts, samples.excluded
    both = (counts[:, 0] > 0) & (counts[:, 1] > 0)
    family_p = np.where(both, np.where(np.isnan(p), 1.0, p), np.nan)
    significant, alpha_per_test = adjust(family_p.tolist(), alpha, correction)
    family_size = int(both.sum())
    level = alpha / family_size if family_size else alpha
    ci_confidence = check_confidence(1.0 - level if ci_confidence is None else ci_confidence)
    min_n = _min_n_for_ci(ci_confidence)
    pct = f"{ci_confidence * 100:g}%"
    _, shapiro_p = shapiro_all(samples, summary)
    floor_p = _min_p(counts[:, 0], counts[:, 1])

    # Every per-comparison figure as Python numbers up front: indexing numpy arrays element
    # by element cost more than the statistics (1,880 comparisons x 30 figures).
    n_sides = counts.tolist()
    ex_sides, no_sides = excluded.tolist(), samples.missing.tolist()
    cis, achieved = _median_cis(samples, ci_confidence)
    mean, median = summary.mean.tolist(), summary.median.tolist()
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = (summary.std / summary.mean).tolist()
    constant, shapiro_l = summary.constant.tolist(), shapiro_p.tolist()
    h_l, p_l, floor_l, both_l = h.tolist(), p.tolist(), floor_p.tolist(), both.tolist()
    tests = []
    for g, (test, metric, worker) in enumerate(samples.keys):
        (n_f, n_r), (ex_f, ex_r), (no_f, no_r) = n_sides[g], ex_sides[g], no_sides[g]
        warnings: list[str] = []
        if n_f == 0 or n_r == 0:
            missing = " and ".join(o for o, n in zip(ORDERS, (n_f, n_r)) if n == 0)
            warnings.append(f"no successful {missing}-order trials: not compared")
        if ex_f - no_f or ex_r - no_r:
            warnings.append(
                f"{ex_f - no_f + ex_r - no_r} unsuccessful trial(s) excluded "
                f"(fixed {ex_f - no_f}, random {ex_r - no_r})"
            )
        if no_f or no_r:
            warnings.append(
                f"{no_f + no_r} successful trial(s) without a value excluded "
                f"(fixed {no_f}, random {no_r})"
            )
        for side, n, ci in zip(ORDERS, n_sides[g], cis[g]):
            if n and ci is None:
                warnings.append(
                    f"too few trials for a {pct} median CI: {side} n = {n} (needs {min_n})"
                )
        h_g = h_l[g]
        if both_l[g] and math.isnan(h_g):
            warnings.append("all values equal: Kruskal-Wallis undefined (counted as p = 1)")
        else:
            for side, n, flat in zip(ORDERS, n_sides[g], constant[g]):
                if n >= 3 and flat:
                    warnings.append(f"all {side}-order values equal: no Shapiro-Wilk p")
        mean_f, mean_r = mean[g]
        n_all = n_f + n_r
        median_f, median_r = median[g]
        eta = delta = delta_median = None
        if both_l[g]:
            if not math.isnan(h_g) and n_all > 2:
                eta = max(0.0, (h_g - 1.0) / (n_all - 2))
            if mean_f != 0:
                delta = _num((mean_f - mean_r) / mean_f * 100.0)
            if median_f != 0:
                delta_median = _num((median_f - median_r) / median_f * 100.0)
            if floor_l[g] >= level:
                warnings.append(
                    f"low power: even complete separation of {n_f} fixed and {n_r} random "
                    f"trials gives p = {floor_l[g]:.3g}, not below alpha/m = {level:.3g}"
                )
        tests.append(
            OrderComparison(
                test=test,
                metric=metric,
                worker=worker,
                n_fixed=n_f,
                n_random=n_r,
                excluded_fixed=ex_f,
                excluded_random=ex_r,
                mean_fixed=_num(mean_f) if n_f else None,
                mean_random=_num(mean_r) if n_r else None,
                median_fixed=_num(median_f) if n_f else None,
                median_random=_num(median_r) if n_r else None,
                cv_fixed=_num(cv[g][0]) if n_f and mean_f else None,
                cv_random=_num(cv[g][1]) if n_r and mean_r else None,
                shapiro_p_fixed=_num(shapiro_l[g][0]),
                shapiro_p_random=_num(shapiro_l[g][1]),
                kw_h=_num(h_g),
                kw_p=_num(p_l[g]),
                significant=bool(significant[g]),
                eta_squared=eta,
                delta_pct=delta,
                delta_median_pct=delta_median,
                ci_fixed=cis[g][0],
                ci_random=cis[g][1],
                ci_confidence_fixed=achieved[g][0],
                ci_confidence_random=achieved[g][1],
                ci_case=ci_case(median_f, cis[g][0], median_r, cis[g][1]),
                warnings=tuple(warnings),
            )
        )
    verdict = "order-matters" if any(t.significant for t in tests) else "no-evidence"
    return OrderAnalysis(
        alpha=alpha,
        correction=correction,
        family_size=family_size,
        alpha_per_test=alpha_per_test if correction == "bonferroni" else None,
        verdict=verdict,
        tests=tuple(tests),
        ci_confidence=ci_confidence,
        samples=samples,
    )
