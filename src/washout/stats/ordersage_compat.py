"""OrderSage's own numbers (``washout analyze --compat ordersage``): its node_stats.csv.

Reproduces what OrderSage's ``toolstats.py`` (Duplyakin et al., USENIX ATC 2023;
github.com/ordersage/ordersage) computes, column for column, so that published tables can be
checked from raw data. Each formula below was inferred from its source and verified against
the two node_stats.csv files of the paper's artifact (tests/test_stats_ordersage_compat.py):

- failures: every trial of a fixed-order run with a failed trial is dropped, and failed
  random-order trials are dropped (the run of the others is kept);
- ``coeff_of_variation[_fixed|_random]``: population std / mean, rounded to 3 decimals; the
  older ``exp_command`` layout has one column over both orders, the newer ``test_command``
  layout one per order; rows are sorted by it (the random one), descending;
- Shapiro-Wilk statistic and p per order (scipy.stats.shapiro; OrderSage's scipy computed it in
  single precision, so these agree to about 1e-5 relative), ``Normal_*`` = p > 0.05;
- ``KW_test_stat``, ``KW_p-value``: scipy.stats.kruskal; ``KW_dist_type``: "same" if p > 0.05,
  else "different" (uncorrected);
- ``percent_diff`` = (mean F - mean R) / mean F * 100 (``abs_percent_diff`` in the older
  layout); ``KW_effect_size`` = H / (n - 1), its eta^2 formula with k = 1;
- ``*_pth_quantile`` = numpy.quantile(x, 0.5); the CI of the median by the normal
  approximation of Le Boudec (2010, Thm 2.1 and Sec. 2.2.1): with z = Phi^-1((1 + c) / 2),
  0-based ranks max(floor(n/2 - z sqrt(n/4)), 0) and min(ceil(n/2 + z sqrt(n/4)) + 1, n - 1)
  into the sorted sample; confidence c = 1 - 0.05 / m by default (m = number of tests; the
  older generation used c = 0.95);
- ``ci_case`` by OrderSage's rules: if the random CI's top is above the fixed one's, the gap
  is random low - fixed high, else fixed low - random high; a positive gap is case 1 (and is
  ``inner_diff``); otherwise case 2 if (random top higher) fixed median >= random low or
  random median <= fixed high, (else) random median > fixed low or fixed median < random
  high; otherwise case 3.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from washout.errors import WashoutError
from washout.stats.floats import undefined_on_overflow
from washout.stats.kruskal import kruskal_two
from washout.stats.median_ci import check_confidence
from washout.stats.order import collect_samples, shapiro_all, summarize
from washout.stats.trials import without_resource_metrics

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

GENERATIONS: dict[str, str] = {"exp": "exp_command", "test": "test_command"}
_SHARED_TAIL: tuple[str, ...] = (
    "fixed_pth_quantile",
    "fixed_ci_low",
    "fixed_ci_high",
    "random_pth_quantile",
    "random_ci_low",
    "random_ci_high",
    "ci_case",
    "inner_diff",
)
_SW: tuple[str, ...] = (
    "KW_dist_type",
    "Normal_fixed",
    "Normal_random",
    "SW_test_stat_fixed",
    "SW_p-value_fixed",
    "SW_test_stat_random",
    "SW_p-value_random",
    "KW_test_stat",
    "KW_p-value",
    "percent_diff",
    "KW_effect_size",
)
COLUMNS: dict[str, tuple[str, ...]] = {
    "exp": ("coeff_of_variation", *_SW, "abs_percent_diff", *_SHARED_TAIL),
    "test": ("coeff_of_variation_fixed", "coeff_of_variation_random", *_SW, *_SHARED_TAIL),
}
SORT_BY: dict[str, str] = {"exp": "coeff_of_variation", "test": "coeff_of_variation_random"}
P_SAME = 0.05


def rank_ci(sorted_sample: np.ndarray, confidence: float, p: float = 0.5) -> tuple[float, float]:
    """OrderSage's normal-approximation CI of the p-quantile: values at 0-based ranks
    floor(np - z sqrt(np(1-p))) and ceil(np + z sqrt(np(1-p))) + 1, clipped to the sample."""
    from scipy.stats import norm

    n = sorted_sample.size
    z = float(norm.ppf((1 + confidence) / 2.0))
    half = z * math.sqrt(n * p * (1 - p))
    lo = max(int(math.floor(n * p - half)), 0)
    hi = min(int(math.ceil(n * p + half) + 1), n - 1)
    return float(sorted_sample[lo]), float(sorted_sample[hi])


def ci_case(
    f_m: float, f_lo: float, f_hi: float, r_m: float, r_lo: float, r_hi: float
) -> tuple[int, float | None]:
    """``(case, inner_diff)`` by OrderSage's rules (see the module doc)."""
    if r_hi > f_hi:
        gap = r_lo - f_hi
        if gap > 0:
            return 1, gap
        return (2 if f_m >= r_lo or r_m <= f_hi else 3), None
    gap = f_lo - r_hi
    if gap > 0:
        return 1, gap
    return (2 if r_m > f_lo or f_m < r_hi else 3), None


def drop_failures(df: pd.DataFrame) -> pd.DataFrame:
    """OrderSage's failure rule: drop fixed runs with any unsuccessful trial, and the
    unsuccessful random trials."""
    import pandas as pd

    frame = df.loc[df["order"].isin(("fixed", "random"))]
    if "worker" not in frame.columns:
        frame = frame.assign(worker="local")
    bad = (frame["status"] != "ok").to_numpy()
    fixed = (frame["order"] == "fixed").to_numpy()
    runs = pd.MultiIndex.from_frame(frame[["worker", "run"]])
    in_failed_run = runs.isin(runs[bad & fixed])
    return frame.loc[~bad & ~(in_failed_run & fixed)]


def _variation(sample: np.ndarray) -> float:
    """scipy.stats.variation (population std / mean), rounded to 3 decimals as OrderSage."""
    import numpy as np

    if sample.size == 0 or sample.mean() == 0:
        return math.nan
    return round(float(np.std(sample) / np.mean(sample)), 3)


@undefined_on_overflow
def ordersage_stats(
    df: pd.DataFrame,
    generation: str = "test",
    test_column: str | None = None,
    ci_confidence: float | None = None,
    by_worker: bool = False,
    metric: str | None = None,
) -> pd.DataFrame:
    """OrderSage's node_stats table for long-format trials (see the module doc).

    ``generation`` picks the column layout (``exp`` older, ``test`` newer); ``test_column``
    names the test column (default: that generation's). ``ci_confidence`` overrides
    1 - 0.05 / m. With ``by_worker``, one row per hostname and test, as OrderSage's per-node
    table. A ``metric`` column follows the test column when there is more than one metric.
    The metrics are those washout's analysis takes (a resource or health measure only where
    ``metric`` names its kind), so a store and its export, which holds every trial's
    measures, give the same table and the same m.
    """
    import numpy as np
    import pandas as pd

    if generation not in GENERATIONS:
        raise WashoutError(f"generation = {generation!r}: expected one of {', '.join(GENERATIONS)}")
    test_column = test_column or GENERATIONS[generation]
    if "run" not in df.columns:
        raise WashoutError("long format: column run missing: OrderSage's failure rule needs it")
    trials = drop_failures(without_resource_metrics(df, metric))
    samples = collect_samples(trials, by_worker=by_worker)
    tests = {(t, m) for t, m, _ in samples.keys}
    if ci_confidence is None:
        ci_confidence = 1 - P_SAME / max(len(tests), 1)
    confidence = check_confidence(ci_confidence)
    h, p = kruskal_two(samples)
    sw_stat, sw_p = shapiro_all(samples, summarize(samples), constant=1.0)
    several_metrics = len({m for _, m, _ in samples.keys}) > 1

    rows = []
    for g, (test, metric, worker) in enumerate(samples.keys):
        fixed, random = samples.sample(g, 0), samples.sample(g, 1)
        row: dict[str, object] = {}
        if by_worker:
            row["hostname"] = worker
        row[test_column] = test
        if several_metrics:
            row["metric"] = metric
        if generation == "exp":
            row["coeff_of_variation"] = _variation(np.concatenate([fixed, random]))
        else:
            row["coeff_of_variation_fixed"] = _variation(fixed)
            row["coeff_of_variation_random"] = _variation(random)
        sw_f, sw_r = (sw_stat[g, 0], sw_p[g, 0]), (sw_stat[g, 1], sw_p[g, 1])
        kw_p = float(p[g])
        diff = (
            float((fixed.mean() - random.mean()) / fixed.mean() * 100)
            if fixed.size and random.size and fixed.mean() != 0
            else math.nan
        )
        row.update(
            {
                "KW_dist_type": "same" if kw_p > P_SAME else "different",
                "Normal_fixed": bool(sw_f[1] > P_SAME),
                "Normal_random": bool(sw_r[1] > P_SAME),
                "SW_test_stat_fixed": float(sw_f[0]),
                "SW_p-value_fixed": float(sw_f[1]),
                "SW_test_stat_random": float(sw_r[0]),
                "SW_p-value_random": float(sw_r[1]),
                "KW_test_stat": float(h[g]),
                "KW_p-value": kw_p,
                "percent_diff": diff,
                "KW_effect_size": float(h[g]) / (fixed.size + random.size - 1),
            }
        )
        if generation == "exp":
            row["abs_percent_diff"] = abs(diff)
        if fixed.size and random.size:
            f_m, r_m = float(np.quantile(fixed, 0.5)), float(np.quantile(random, 0.5))
            (f_lo, f_hi), (r_lo, r_hi) = rank_ci(fixed, confidence), rank_ci(random, confidence)
            case, inner = ci_case(f_m, f_lo, f_hi, r_m, r_lo, r_hi)
            row.update(
                {
                    "fixed_pth_quantile": f_m,
                    "fixed_ci_low": f_lo,
                    "fixed_ci_high": f_hi,
                    "random_pth_quantile": r_m,
                    "random_ci_low": r_lo,
                    "random_ci_high": r_hi,
                    "ci_case": case,
                    "inner_diff": inner,
                }
            )
        rows.append(row)
    head = (
        (["hostname"] if by_worker else [])
        + [test_column]
        + (["metric"] if several_metrics else [])
    )
    frame = pd.DataFrame(rows, columns=head + list(COLUMNS[generation]))
    frame["ci_case"] = frame["ci_case"].astype("Int64")
    frame["inner_diff"] = frame["inner_diff"].astype(float)
    order = frame.sort_values(by=head, kind="stable").sort_values(
        by=SORT_BY[generation], ascending=False, kind="stable", na_position="last"
    )
    return order.reset_index(drop=True)
