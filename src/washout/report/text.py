"""What every output says, as text: the verdict, the tables' cells, hyperfine's summary
lines and the notes, made once from an :class:`~washout.analysis.result.Analysis`, so the
terminal, Markdown and HTML outputs say the same thing in the same numbers.

Conventions (docs/design.md, "Outputs"): a table shows one location statistic, with its
unit in every cell (times in hyperfine's units, bytes in binary units, other metrics with SI
prefixes); an effect is computed from the statistic beside it; every column has a title;
"ran r times faster" only when the ratio's CI excludes 1, else "no significant difference";
``±`` only for a standard deviation, as in hyperfine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from washout.analysis.units import SECOND_METRICS, metric_value, time_unit

if TYPE_CHECKING:
    from washout.analysis.result import Analysis
    from washout.stats.compare import Comparison, Ranking
    from washout.stats.context import ContextResult
    from washout.stats.energy import NetEnergy
    from washout.stats.health import HealthJudgement
    from washout.stats.order import OrderAnalysis, OrderComparison
    from washout.sweep.result import Fixed, ImportantPoint, SweepResult

NAMED = 5
"""Significant comparisons named in the verdict; the table marks them all."""
CASE_WORDS: dict[int, str] = {1: "red flag", 2: "likely no change", 3: "inconclusive"}
NONE = "–"
"""What a cell without a value shows."""


@dataclass
class Table:
    """A table as text cells; ``highlight[i]`` marks row i (a significant test, a warning);
    ``numeric`` names the columns aligned right; ``wide`` those a narrow output leaves out
    (the terminal's), ``caption`` says what every column means."""

    columns: list[str]
    rows: list[list[str]]
    highlight: list[bool] = field(default_factory=list)
    numeric: set[str] = field(default_factory=set)
    wide: set[str] = field(default_factory=set)
    caption: str = ""


# -- numbers ----------------------------------------------------------------------------


def fmt(x: object) -> str:
    """A number without a known unit: thousands separated, about four significant digits."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return NONE
    v = float(x)
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 0.001:
        return f"{v:.4g}"
    return f"{v:.3e}"


def p_value(p: float | None) -> str:
    """A p-value: two significant digits (``0.20``, ``0.013``), scientific below 1e-4."""
    if p is None or not math.isfinite(p):
        return NONE
    return f"{p:.1e}" if p < 1e-4 else f"{p:#.2g}"


def percent(value: float | None) -> str:
    """A signed percentage with two decimals: ``+5.26``."""
    return NONE if value is None or not math.isfinite(value) else f"{value:+.2f}"


def share(value: float) -> str:
    """A share of a whole, as a person says it: ``70%``, ``4.3%``, ``0.05%``."""
    pct = 100 * value
    return f"{pct:.0f}%" if pct >= 10 or pct == 0 else f"{pct:.2g}%"


def span(lo: float, hi: float) -> str:
    """A shift range with two significant digits: ``2.1% to 4.5%`` (one figure if equal)."""
    a, b = share(lo / 100), share(hi / 100)
    return a if a == b else f"{a} to {b}"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural but for one: ``1 run``, ``6 runs``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def ratio_ci(
    ci: tuple[float, float] | None, confidence: float | None, runs_for_ci: int | None = None
) -> str:
    """A ratio's CI, with the ratio's two decimals: ``95% CI 1.85…1.92``; without one, how
    many runs a CI needs, where that is known."""
    if ci is None or confidence is None:
        return "too few runs for a CI" + (f", which needs {runs_for_ci}" if runs_for_ci else "")
    return f"{confidence:.0%} CI {ci[0]:.2f}…{ci[1]:.2f}"


def where(t: OrderComparison, several_metrics: bool = False) -> str:
    """A comparison's name: its test, metric (where there are several), worker."""
    name = t.test + (f" · {t.metric}" if several_metrics else "")
    return name + ("" if t.worker is None else f" @ {t.worker}")


# -- the order analysis -----------------------------------------------------------------


def verdict(analysis: Analysis) -> str:
    """The whole result in one sentence: whether order matters, over how many
    comparisons, at what level, which differ (or what shifts these trials would detect)."""
    order = analysis.order
    if order is None:
        found = [n for n in analysis.notes if n.startswith("No order analysis")]
        return found[0] if found else "No order analysis"
    m = order.family_size
    if m == 0:
        return "No comparison possible: no test has both fixed- and random-order trials"
    if order.correction == "bonferroni" and order.alpha_per_test is not None:
        level = f"Kruskal-Wallis, Bonferroni, alpha/{m} = {order.alpha_per_test:.3g}"
    else:
        level = f"Kruskal-Wallis, {order.correction.capitalize()}, alpha = {order.alpha:g}, m = {m}"
    hits = order.significant
    verb = "differs" if len(hits) == 1 else "differ"
    if hits:
        several = len({t.metric for t in order.tests}) > 1
        names = ", ".join(where(t, several) for t in hits[:NAMED])
        more = f" and {len(hits) - NAMED} more" if len(hits) > NAMED else ""
        return (
            f"Order matters: {len(hits)} of {m} comparisons {verb} between fixed and random "
            f"order ({level}): {names}{more}"
        )
    line = (
        f"No evidence that order matters: 0 of {m} comparisons {verb} between fixed and "
        f"random order ({level})"
    )
    if analysis.detectable_shift is not None:
        line += (
            f"; these trials would detect shifts of about {span(*analysis.detectable_shift)} "
            "with 80% power"
        )
    return line


def _median_cells(t: OrderComparison, side: str) -> tuple[str, str]:
    """A side's median and its CI, in the median's unit."""
    median = getattr(t, f"median_{side}")
    ci = getattr(t, f"ci_{side}")
    if median is None:
        return NONE, NONE
    unit = time_unit(median) if t.metric in SECOND_METRICS else None
    interval = NONE if ci is None else ", ".join(metric_value(t.metric, v, unit) for v in ci)
    return metric_value(t.metric, median, unit), NONE if ci is None else f"[{interval}]"


def order_table(order: OrderAnalysis, rows: Sequence[OrderComparison] | None = None) -> Table:
    """One row per comparison (of ``rows``, default all): the trials used, both medians
    with their CIs, the CI case, Delta% of the medians, Kruskal-Wallis p, eta^2_H, whether
    it is significant."""
    several = len({t.metric for t in order.tests}) > 1
    by_worker = any(t.worker is not None for t in order.tests)
    columns = ["test", *(["metric"] if several else []), *(["worker"] if by_worker else [])]
    numbers = [
        "n fixed / random",
        "median fixed",
        "CI fixed",
        "median random",
        "CI random",
        "CI case",
        "Δ median %",
        "p (KW)",
        "eta²_H",
        "significant",
    ]
    cells, flags = [], []
    for t in order.tests if rows is None else rows:
        excluded = t.excluded_fixed + t.excluded_random
        med_f, ci_f = _median_cells(t, "fixed")
        med_r, ci_r = _median_cells(t, "random")
        cells.append(
            [
                t.test,
                *([t.metric] if several else []),
                *([t.worker or ""] if by_worker else []),
                f"{t.n_fixed} / {t.n_random}" + (f" ({excluded} excluded)" if excluded else ""),
                med_f,
                ci_f,
                med_r,
                ci_r,
                NONE if t.ci_case is None else f"{t.ci_case} {CASE_WORDS[t.ci_case]}",
                percent(t.delta_median_pct),
                p_value(t.kw_p),
                NONE if t.eta_squared is None else f"{t.eta_squared:.3f}",
                "yes" if t.significant else "no",
            ]
        )
        flags.append(t.significant)
    confidence = f"{order.ci_confidence:.4g}"
    caption = (
        f"Medians of the successful trials, with distribution-free {confidence} CIs (Le "
        "Boudec, Thm 2.1); CI case after Duplyakin et al. (ATC 2023), Algorithm 2; "
        "Δ median % = (median fixed − median random) / median fixed; p from Kruskal-Wallis; "
        "eta²_H = (H − k + 1) / (n − k); significant after the family-wise correction."
    )
    return Table(
        columns + numbers,
        cells,
        flags,
        numeric=set(numbers[:-1]) - {"CI case"},
        wide={"CI fixed", "CI random"},
        caption=caption,
    )


def order_warnings(
    order: OrderAnalysis, rows: Sequence[OrderComparison] | None = None
) -> list[tuple[str, str]]:
    """Every warning of the order analysis (of ``rows``, default all) as (comparison,
    warning), in table order."""
    several = len({t.metric for t in order.tests}) > 1
    chosen = order.tests if rows is None else rows
    return [(where(t, several), w) for t in chosen for w in t.warnings]


# -- hyperfine's comparison -------------------------------------------------------------

COMPARISON_COLUMNS: tuple[str, ...] = (
    "test",
    "mean ± σ",
    "min … max",
    "user",
    "system",
    "max RSS",
    "runs",
)


def comparison_table(comparison: Comparison, unit: tuple[str, float] | None = None) -> Table:
    """hyperfine's table, one row per test: mean ± σ (σ the standard deviation, as
    hyperfine), min … max in the unit of the mean, mean user and system CPU time and peak
    RSS, and the successful trials of both orders (highlighted: a warning). ``unit``:
    every time in that unit (hyperfine's ``--time-unit``), not each in its own."""
    m = comparison.metric
    rows = []
    for s in comparison.summaries:
        finite = math.isfinite(s.mean)
        timed = m in SECOND_METRICS and finite
        own = unit or (time_unit(s.mean) if timed else None)
        spread = "" if s.stddev is None or not finite else f" ± {metric_value(m, s.stddev, own)}"
        rows.append(
            [
                s.test,
                metric_value(m, s.mean, own) + spread,
                f"{metric_value(m, s.min, own)} … {metric_value(m, s.max, own)}",
                metric_value("user", s.user, unit),
                metric_value("system", s.system, unit),
                metric_value("max_rss", s.max_rss),
                str(s.runs),
            ]
        )
    columns = list(COMPARISON_COLUMNS)
    if m != "wall":
        columns[1] = f"{m}: mean ± σ"
    caption = (
        f"{m}, every successful trial of both orders, as hyperfine reports them (σ: the "
        "standard deviation); user, system and max RSS are means per trial"
    )
    return Table(
        columns,
        rows,
        [bool(s.warnings) for s in comparison.summaries],
        numeric=set(columns[1:]),
        caption=caption,
    )


def summary_heading(comparison: Comparison) -> str:
    """What the summary's ratios are computed from, which is not the table's data."""
    runs = sorted({r.n_runs for r in comparison.rankings})
    many = f"{runs[0]}-{runs[-1]} random-order runs"
    return (
        f"Summary (from the {counted(runs[0], 'random-order run') if len(runs) == 1 else many} "
        "alone, per-run ratios paired by run: "
        "the order-safe estimate; the table above is over every run)"
    )


def ratio_phrase(r: Ranking, comparison: Comparison, inverse: bool = False) -> str:
    """ "1.88 times faster than 'b' (95% CI 1.85…1.92, 10 runs)"; ``inverse``: the ratio
    seen from the other test (its CI below 1). A metric whose better way the source does
    not say is "lower on" it, not "better"."""
    metric = comparison.metric
    if metric == "wall":
        how = "faster than"
    elif comparison.better is None:
        how = f"{'higher' if inverse else 'lower'} on {metric} than"
    else:
        how = f"better on {metric} than"
    ratio, ci, other = r.ratio, r.ratio_ci, r.test
    if inverse and ci is not None:
        ratio, ci, other = 1 / r.ratio, (1 / ci[1], 1 / ci[0]), r.fastest
    shown = f"{ratio_ci(ci, r.confidence)}, {counted(r.n_runs, 'run')}"
    return f"{ratio:.2f} times {how} {other!r}  ({shown})"


def ranking_lines(comparison: Comparison) -> list[tuple[str, list[str]]]:
    """The summary as (head, lines): hyperfine's "'a' ran" with its "r times faster than
    'b'" lines, for the ratios whose CI lies above 1; a test whose CI lies below 1 ran faster
    than the reference; the rest "no significant difference", with the ratio and its CI; a
    note where fixed and random orders disagree."""
    out: list[tuple[str, list[str]]] = []
    faster = [r for r in comparison.rankings if r.significant and r.ratio > 1]
    if faster:
        out.append((f"{faster[0].fastest!r} ran", [ratio_phrase(r, comparison) for r in faster]))
    for r in comparison.rankings:
        if r.significant and r.ratio < 1:
            out.append((f"{r.test!r} ran", [ratio_phrase(r, comparison, inverse=True)]))
        elif not r.significant:
            ci = ratio_ci(r.ratio_ci, r.confidence, r.runs_for_ci)
            runs = f"{';' if r.ratio_ci is None else ','} {counted(r.n_runs, 'run')}"
            head = f"No significant difference between {r.fastest!r} and {r.test!r}:"
            out.append((head, [f"ratio {r.ratio:.2f}  ({ci}{runs})"]))
    for r in comparison.rankings:
        if r.orders_disagree:
            out.append((f"{r.fastest!r} vs {r.test!r}:", [disagreement(r)]))
    return out


def disagreement(r: Ranking) -> str:
    """What to say when fixed and random orders disagree about a ratio."""
    fixed = "n/a" if r.fixed_ratio is None else f"{r.fixed_ratio:.2f}"
    p = "n/a" if r.interaction_p is None else f"{r.interaction_p:.2g}"
    return (
        f"fixed and random orders disagree about this ratio (fixed order: {fixed}, "
        f"Kruskal-Wallis p = {p}): order changed it; the random-order estimate is the "
        "order-safe one"
    )


def comparison_warnings(comparison: Comparison) -> list[tuple[str, str]]:
    """hyperfine's warnings, as (test, warning)."""
    return [(s.test, w) for s in comparison.summaries for w in s.warnings]


# -- context ----------------------------------------------------------------------------


def context_table(result: ContextResult) -> Table:
    """One row per test x metric (x worker) of the context analysis: its trials and
    levels, Kruskal-Wallis p, eta^2_H, the spread the context alone makes with its
    simultaneous interval, whether it is significant."""
    several = len({r.metric for r in result.rows}) > 1
    by_worker = any(r.worker is not None for r in result.rows)
    columns = ["test", *(["metric"] if several else []), *(["worker"] if by_worker else [])]
    numbers = ["trials", "levels", "p (KW)", "eta²_H", "spread", "interval", "significant"]
    cells = []
    for r in result.rows:
        interval = NONE if r.spread_ci is None else f"{r.spread_ci[0]:.1%} … {r.spread_ci[1]:.1%}"
        cells.append(
            [
                r.test,
                *([r.metric] if several else []),
                *([r.worker or ""] if by_worker else []),
                str(r.n),
                str(r.levels),
                p_value(r.kw_p),
                NONE if r.eta_squared is None else f"{r.eta_squared:.3f}",
                NONE if r.spread is None else f"{r.spread:.1%}",
                interval,
                "yes" if r.significant else "no",
            ]
        )
    kinds = ", ".join(c.removeprefix("context_") for c in result.columns)
    caption = (
        f"Context ({kinds}): Kruskal-Wallis across each test's context levels, once the run's "
        "level and the first trial after the reset are taken out; eta²_H = (H − k + 1) / "
        "(n − k); spread = the slowest level's median over the fastest's − 1, its interval "
        f"at {result.confidence:.0%} or more (every level's median CI at once); significant "
        f"after {result.correction}"
    )
    return Table(
        columns + numbers,
        cells,
        [r.significant for r in result.rows],
        numeric=set(numbers[:-1]),
        caption=caption,
    )


# -- sweeps -----------------------------------------------------------------------------


def fixed_text(fixed: Fixed) -> str:
    """The fixed side of an interaction point (``{"keys": 128}`` -> ``keys = 128``)."""
    if not fixed:
        return NONE
    return ", ".join(f"{k} = {v}" for k, v in fixed.items())


def interval_text(low: float | None, high: float | None) -> str:
    """A share's interval in percent (``41.2-52.3%``), or a dash without one."""
    if low is None or high is None:
        return NONE
    return f"{100 * float(low):.1f}-{100 * float(high):.1f}%"


def point_interval_text(point: ImportantPoint) -> str:
    """Where the draws put a point (``8-16``) and how often they found one (``(93%)``)."""
    where = "" if point.low is None else f"{fmt(point.low)}-{fmt(point.high)} "
    return where + ("" if point.found is None else f"({float(point.found):.0%})")


def sweep_intervals(sweep: SweepResult) -> str | None:
    """What a sweep's intervals are and how a term's importance is read from them (None
    for a sweep without intervals: a full measurement, or the paper's method)."""
    level = sweep.interval_level
    if not level:
        return None
    return (
        f"Shares and points carry {level:.0%} intervals for the fully measured space's "
        "values; a term is important when its whole interval is at or above 10%, and may be "
        "important when the interval crosses it."
    )


def sweep_tables(sweep: SweepResult) -> list[tuple[str, Table]]:
    """A sweep's conclusions as tables: its significant terms with their share of the
    variance (and, with intervals, each share's interval and the importance it gives), its
    knee and turning points (and where the draws put each), and the ranges a fair
    comparison must cover."""
    level = bool(sweep.interval_level)
    tables = [
        (
            "Significant terms",
            Table(
                ["term", "share of variance"] + (["interval", "importance"] if level else []),
                [
                    [t.term, f"{100 * float(t.share):.1f}%"]
                    + ([interval_text(t.low, t.high), t.importance or NONE] if level else [])
                    for t in sweep.significant_terms
                ],
                numeric={"share of variance", "interval"},
            ),
        ),
        (
            "Knee and turning points",
            Table(
                ["term", "parameter", "fixed", "type", "at", "turn ratio"]
                + (["interval (draws with a point)"] if level else []),
                [
                    [
                        p.term,
                        p.parameter,
                        fixed_text(p.fixed),
                        p.type,
                        fmt(p.value),
                        fmt(p.turn_ratio),
                    ]
                    + ([point_interval_text(p)] if level else [])
                    for p in sweep.important_points
                ],
                numeric={"at", "turn ratio"},
            ),
        ),
    ]
    if sweep.ranges:
        rows = [[k, ", ".join(map(str, v))] for k, v in sweep.ranges.items()]
        tables.append(("Ranges a fair comparison must cover", Table(["parameter", "range"], rows)))
    return tables


# -- what was left out ------------------------------------------------------------------


def left_out(analysis: Analysis) -> list[str]:
    """The notes (what the source or options did not support), then what the analyses did
    not use and why."""
    lines = [n for n in analysis.notes if not (analysis.order is None and n == verdict(analysis))]
    lines += [f"Not analysed: {e.count:,} {e.what} ({e.reason})" for e in analysis.excluded]
    return lines


# -- each trial's health ---------------------------------------------------------------

SHOWN_STRATA = 5
"""Strata (a test's healthy against unhealthy trials) a terminal names; the JSON and the
report have every one."""


def health_lines(analysis: Analysis) -> list[str]:
    """What the health measures say of the trials: how many were unhealthy and why, set
    aside (``--healthy-only``) or only shown, and the trials without any measure; nothing
    where the trials have no health measure and none was asked for."""
    j = analysis.health
    if j is None:
        return []
    causes = ", ".join(f"{n} {cause}" for cause, n in j.causes().items())
    bad = len(j.unhealthy)
    if not j.judged:
        if not analysis.options.healthy_only:
            return []
        return [
            f"Health: none of the {j.unmeasured} trials has a health measure (health off, or "
            "a source without them): none set aside."
        ]
    if analysis.options.healthy_only:
        line = (
            f"Health: set aside {bad} of {j.judged} trials with health measures as unhealthy "
            f"({causes}); the analyses use the other {j.judged - bad + j.unmeasured}"
            if bad
            else f"Health: all {j.judged} trials with health measures were healthy; none set aside"
        )
    elif bad:
        line = (
            f"Health: {bad} of {j.judged} trials with health measures were unhealthy "
            f"({causes}), analysed with the others: --healthy-only sets them aside"
        )
    else:
        return []  # every trial healthy and nothing asked: nothing to say
    if j.unmeasured:
        line += f"; {j.unmeasured} trials had no health measure and were kept"
    return [line + "."]


def stratum_lines(health: HealthJudgement, limit: int | None = SHOWN_STRATA) -> list[str]:
    """Each affected test's metric, unhealthy trials' median against the healthy ones'."""
    lines = []
    for s in health.strata[:limit]:
        line = (
            f"{s.test} · {s.metric}: median {metric_value(s.metric, s.median_unhealthy)} over "
            f"{s.unhealthy} unhealthy trial{'s' if s.unhealthy != 1 else ''}"
        )
        if s.median_healthy is not None:
            line += (
                f", {metric_value(s.metric, s.median_healthy)} over {s.healthy} healthy "
                f"({percent(s.shift_pct)}%)"
            )
        else:
            line += ", and no healthy trial"
        lines.append(line)
    if limit is not None and len(health.strata) > limit:
        lines.append(f"and {len(health.strata) - limit} more (--format json has every one)")
    return lines


def unhealthy_table(health: HealthJudgement) -> Table:
    """Every unhealthy trial: where it ran (worker, run, position), its test, and why."""
    rows = [
        [t.test, t.worker, str(t.run), str(t.position), "; ".join(t.reasons)]
        for t in health.unhealthy
    ]
    return Table(
        ["test", "worker", "run", "position", "why unhealthy"],
        rows,
        numeric={"run", "position"},
        caption="Each unhealthy trial and the measures that flagged it, with their limits",
    )


def strata_table(health: HealthJudgement) -> Table:
    """Each affected test's metric: healthy trials against unhealthy ones."""
    rows = [
        [
            s.test,
            s.metric,
            str(s.healthy),
            metric_value(s.metric, s.median_healthy),
            str(s.unhealthy),
            metric_value(s.metric, s.median_unhealthy),
            percent(s.shift_pct),
        ]
        for s in health.strata
    ]
    columns = ["test", "metric", "healthy", "median healthy", "unhealthy", "median unhealthy"]
    columns.append("Δ median %")
    return Table(
        columns,
        rows,
        numeric=set(columns[2:]),
        caption="Δ median % = (median unhealthy − median healthy) / median healthy, over the "
        "successful trials of both orders",
    )


# -- energy net of the idle arm ---------------------------------------------------------


def energy_table(energy: Sequence[NetEnergy]) -> Table:
    """Each test's energy per trial, gross and net of its idle arm, with their intervals;
    a figure that was not measured says so (never estimated)."""

    def mean_ci(metric: str, mean: float | None, low: float | None, high: float | None) -> str:
        if mean is None:
            return "not available"
        if low is None or high is None:
            return metric_value(metric, mean)
        low_high = f"{metric_value(metric, low)}, {metric_value(metric, high)}"
        return f"{metric_value(metric, mean)} [{low_high}]"

    several = len({e.worker for e in energy}) > 1
    rows = [
        [
            e.test + (f" @ {e.worker}" if several else ""),
            e.metric,
            str(e.n),
            mean_ci(e.metric, e.gross, e.gross_low, e.gross_high),
            str(e.n_idle),
            mean_ci(e.metric, e.idle, None, None),
            mean_ci(e.metric, e.net, e.net_low, e.net_high),
        ]
        for e in energy
    ]
    confidence = f"{energy[0].confidence:.0%}" if energy else ""
    return Table(
        ["test", "metric", "trials", "gross", "idle trials", "idle", "net"],
        rows,
        highlight=[bool(e.reason) for e in energy],
        numeric={"trials", "gross", "idle trials", "idle", "net"},
        caption=f"Means per trial in the metric's unit, {confidence} CIs in brackets "
        "(Student's t for gross, Welch's for net = gross − idle); idle: the same "
        "readings over sleep as long as the test's median trial",
    )
