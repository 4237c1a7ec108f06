"""Terminal rendering of an order analysis: what a person reads first.

A verdict line, then one row per comparison with the significant ones marked, Delta% and the
median-CI case in words, then the warnings. ``washout analyze`` prints it and the post-run
summary reuses it.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import RenderableType

    from washout.harness.engine import Experiment
    from washout.stats.compare import Comparison, Ranking
    from washout.stats.order import OrderAnalysis, OrderComparison


# Significant comparisons named on the verdict line; the table marks them all.
_NAMED = 5


def _pct(value: float) -> str:
    """A percentage with two significant digits, without exponents."""
    return f"{value:.2g}%" if value < 10 else f"{value:.0f}%"


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def verdict_line(analysis: OrderAnalysis) -> str:
    """One sentence: does order matter, over how many comparisons, at what level."""
    m = analysis.family_size
    if analysis.correction == "bonferroni" and analysis.alpha_per_test is not None:
        level = f"Bonferroni, alpha/{m} = {analysis.alpha_per_test:.3g}"
    else:
        level = f"{analysis.correction.capitalize()}, alpha = {analysis.alpha:g}, m = {m}"
    hits = len(analysis.significant)
    if analysis.verdict == "order-matters":
        shown = [
            t.test if t.worker is None else f"{t.test}@{t.worker}"
            for t in analysis.significant[:_NAMED]
        ]
        names = ", ".join(shown) + (f" and {hits - _NAMED} more" if hits > _NAMED else "")
        return (
            f"ORDER MATTERS: {hits} of {m} comparisons differ between fixed and random "
            f"order ({level}): {names}"
        )
    if m == 0:
        return "No comparison possible: no test has both fixed- and random-order trials"
    line = f"No evidence that order matters: 0 of {m} comparisons significant ({level})"
    shifts = analysis.detectable_span()
    if shifts:
        lo, hi = _pct(shifts[0]), _pct(shifts[1])
        span = lo if lo == hi else f"{lo} to {hi}"
        line += f"; these trials would detect shifts of about {span} with 80% power"
    return line


def _case(t: OrderComparison) -> str:
    from washout.stats.order import CASE_WORDS

    return "-" if t.ci_case is None else f"{t.ci_case} {CASE_WORDS[t.ci_case]}"


def render_analysis(analysis: OrderAnalysis) -> RenderableType:
    """The analysis as a rich renderable: verdict, table, warnings."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    matters = analysis.verdict == "order-matters"
    verdict = Text(verdict_line(analysis), style="bold red" if matters else "bold green")
    by_worker = any(t.worker is not None for t in analysis.tests)
    show_metric = len({t.metric for t in analysis.tests}) > 1
    table = Table(show_edge=False, header_style="bold")
    table.add_column("", width=1)
    table.add_column("test", overflow="fold")
    if show_metric:
        table.add_column("metric", overflow="fold")
    if by_worker:
        table.add_column("worker", overflow="fold")
    for name in ("n F/R", "median F", "median R", "Delta%", "KW p", "eta2_H"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("CI case", no_wrap=True)
    for t in analysis.tests:
        cells = ["*" if t.significant else "", t.test] + ([t.metric] if show_metric else [])
        if by_worker:
            cells.append(t.worker or "")
        cells += [
            f"{t.n_fixed}/{t.n_random}",
            _fmt(t.median_fixed, ".6g"),
            _fmt(t.median_random, ".6g"),
            _fmt(t.delta_pct, "+.2f"),
            _fmt(t.kw_p, ".2g"),
            _fmt(t.eta_squared, ".3f"),
            _case(t),
        ]
        # Text, not str: a test named "[red]x" is data, never rich markup.
        table.add_row(*map(Text, cells), style="red" if t.significant else None)
    parts: list[RenderableType] = [verdict, table]
    if any(t.significant for t in analysis.tests):
        parts.append(Text("* significant after the family-wise correction", style="dim"))
    notes = [
        f"{t.test}/{t.metric}{'' if t.worker is None else '@' + t.worker}: {w}"
        for t in analysis.tests
        for w in t.warnings
    ]
    if notes:
        parts.append(Text("warnings:", style="yellow"))
        parts.extend(Text(f"  {n}", style="yellow") for n in notes)
    return Group(*parts)


TIME_UNITS: tuple[tuple[str, float], ...] = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6))
"""hyperfine's units for a time, largest first: a value is shown in the largest unit it
reaches (so 0.0093 s is 9.3 ms)."""
SECOND_METRICS: tuple[str, ...] = ("wall", "user", "system")


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit (name, size in seconds) to show ``seconds`` in."""
    for name, size in TIME_UNITS:
        if abs(seconds) >= size:
            return name, size
    return TIME_UNITS[-1]


def seconds(value: float | None, unit: tuple[str, float] | None = None) -> str:
    """A time with hyperfine's automatic unit (or the given one) and its decimals (three
    for seconds, one otherwise): ``1.020 s``, ``9.3 ms``; ``-`` if none."""
    if value is None:
        return "-"
    name, size = unit or time_unit(value)
    return f"{value / size:.{3 if name == 's' else 1}f} {name}"


def byte_size(value: float | None) -> str:
    """Bytes in binary units, as sizes are written in a spec: ``12.3 MiB``; ``-`` if none."""
    if value is None:
        return "-"
    for name, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.3g} {name}"
    return f"{value:.0f} B"


def metric_value(metric: str, value: float | None, unit: tuple[str, float] | None = None) -> str:
    """A value of ``metric``: a time with its unit, bytes for ``max_rss``, else 4 digits."""
    if metric in SECOND_METRICS:
        return seconds(value, unit)
    if metric == "max_rss":
        return byte_size(value)
    return "-" if value is None else f"{value:.4g}"


def ranking_line(r: Ranking, metric: str) -> str:
    """hyperfine's sentence, its ± covering the CI, then the CI and where it comes from."""
    error = f" ± {r.error:.2f}" if r.error is not None else ""
    how = "faster than" if metric == "wall" else f"better on {metric} than"
    line = f"{r.ratio:.2f}{error} times {how} {r.test!r}"
    if r.ratio_ci is not None and r.confidence is not None:
        line += (
            f"  ({r.confidence:.0%} CI {r.ratio_ci[0]:.3g}…{r.ratio_ci[1]:.3g}, "
            f"{r.n_runs} random-order runs, paired by run)"
        )
    else:
        line += f"  ({r.n_runs} random-order runs: too few for a CI)"
    return line


COMPARISON_COLUMNS: tuple[str, ...] = (
    "test",
    "mean ± σ",
    "median",
    "min … max",
    "user",
    "system",
    "max RSS",
    "runs",
)


def comparison_rows(comparison: Comparison) -> list[list[str]]:
    """One row of :data:`COMPARISON_COLUMNS` per test, times in hyperfine's unit of its mean."""
    m = comparison.metric
    rows = []
    for s in comparison.summaries:
        unit = time_unit(s.mean) if m in SECOND_METRICS else None
        spread = "" if s.stddev is None else f" ± {metric_value(m, s.stddev, unit)}"
        rows.append(
            [
                s.test,
                metric_value(m, s.mean, unit) + spread,
                metric_value(m, s.median, unit),
                f"{metric_value(m, s.min, unit)} … {metric_value(m, s.max, unit)}",
                seconds(s.user),
                seconds(s.system),
                byte_size(s.max_rss),
                str(s.runs),
            ]
        )
    return rows


def disagreement_note(r: Ranking) -> str:
    """What to say when fixed and random orders disagree about a ratio."""
    return (
        f"fixed and random orders disagree about this ratio (fixed order: {r.fixed_ratio:.2f}, "
        f"Kruskal-Wallis p = {r.interaction_p:.2g}): order changed it; the random-order "
        "estimate is the order-safe one"
    )


def render_comparison(comparison: Comparison) -> RenderableType:
    """The per-test table (mean ± σ, median, min … max, user, system, max RSS, runs), then
    "A ran r ± e times faster than B" for every other test, a note where fixed and random
    orders disagree, and hyperfine's warnings."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, header_style="bold")
    table.add_column(COMPARISON_COLUMNS[0], overflow="fold")
    for name in COMPARISON_COLUMNS[1:]:
        table.add_column(name, justify="right", no_wrap=True)
    for cells in comparison_rows(comparison):
        table.add_row(*map(Text, cells))
    parts: list[RenderableType] = [table]
    if comparison.rankings:
        parts += [Text("Summary", style="bold"), Text(f"  {comparison.rankings[0].fastest!r} ran")]
        for r in comparison.rankings:
            parts.append(Text(f"    {ranking_line(r, comparison.metric)}"))
            if r.orders_disagree:
                parts.append(Text(f"      {disagreement_note(r)}", style="yellow"))
    for s in comparison.summaries:
        for w in s.warnings:
            parts.append(Text(f"Warning ({s.test}): {w}", style="yellow"))
    return Group(*parts)


def experiment_comparison(experiment: Experiment, frame: pd.DataFrame) -> Comparison:
    """hyperfine's comparison of an experiment's tests on wall time, or on the first test's
    first metric when some test does not measure wall (in that metric's better direction)."""
    from washout.stats.compare import compare_tests

    tests = experiment.tests
    metric = "wall" if all("wall" in t.metrics for t in tests) else next(iter(tests[0].metrics))
    exp = experiment.spec.experiment
    return compare_tests(
        frame,
        metric=metric,
        alpha=exp.alpha,
        correction=exp.correction,
        tests=[t.name for t in tests],
        lower_is_better=tests[0].metrics[metric].better == "lower",
        describe=lambda v: metric_value(metric, v),
    )


def order_findings(experiment: Experiment, frame: pd.DataFrame) -> list[RenderableType]:
    """What a finished run says about order: the fixed-vs-random analysis, then why in
    words (the first trial after the reset, carryover, drift, the spec's claims), at the
    spec's alpha and correction. Nothing for one test, or one order kind: every order is
    then the same order, and there is no verdict to give."""
    from washout.report.words import explain, render_words
    from washout.stats.compare import without_resource_metrics
    from washout.stats.order import analyze_order

    analysed = without_resource_metrics(frame)
    if len(experiment.tests) < 2 or analysed["order"].nunique() < 2:
        return []
    alpha, correction = experiment.spec.experiment.alpha, experiment.spec.experiment.correction
    verdict = analyze_order(analysed, alpha=alpha, correction=correction)
    found = explain(
        analysed,
        carryover=True,
        drift=True,
        claims=experiment.spec.experiment.claims,
        alpha=alpha,
        correction=correction,
    )
    return [render_analysis(verdict), "\n".join(render_words(found))]


def medians_table(frame: pd.DataFrame) -> RenderableType | None:
    """Per test, its successful trials so far and their median wall time (the live table
    under a run's progress bar); None before any trial succeeded."""
    from rich.table import Table
    from rich.text import Text

    from washout.stats.trials import usable_trials

    ok, _ = usable_trials(frame[frame["metric"] == "wall"], "the live table")
    if ok.empty:
        return None
    table = Table(show_edge=False, header_style="bold")
    for name, justify in (("test", "left"), ("trials", "right"), ("median", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for test, values in ok.groupby("test", observed=True)["value"]:
        table.add_row(Text(str(test)), str(values.size), seconds(float(values.median())))
    return table


def frame_table(frame: pd.DataFrame, keys: int = 1) -> RenderableType:
    """A wide DataFrame as a rich table turned on its side: one column per row of ``frame``
    (headed by its first ``keys`` fields), one line per other field. Used for the
    OrderSage-compatible table, whose 22 columns do not fit a terminal's width."""
    import pandas as pd
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, header_style="bold")
    table.add_column("")
    for row in frame.itertuples(index=False):
        table.add_column(
            Text(" ".join(str(v) for v in row[:keys])), justify="right", overflow="fold"
        )
    for i, column in enumerate(frame.columns[keys:], start=keys):
        table.add_row(
            Text(str(column)), *(Text("" if pd.isna(v) else str(v)) for v in frame.iloc[:, i])
        )
    return table


def to_text(renderable: RenderableType, width: int = 120) -> str:
    """A renderable as plain text (no colour codes), for logs, files and tests."""
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, highlight=False).print(renderable)
    return buffer.getvalue()
