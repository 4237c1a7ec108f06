"""What a report says, independent of how it is written (HTML or Markdown).

:func:`build_report` turns an :class:`~washout.analysis.result.Analysis` into a
:class:`Report`: the verdict in one sentence, what ran, the tables as text cells (from
:mod:`washout.report.text`, as the terminal has them), why in words, and the figures (how
to draw each matplotlib ``Figure``; html.py inlines them as SVG, markdown.py writes PNGs).
Values the source does not offer are left out and said to be missing, never made up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from washout.data.outputs import csv_text
from washout.data.sources import SOURCE_KINDS
from washout.report import figures, text
from washout.report.text import Table

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from washout.analysis.result import Analysis
    from washout.stats.order import OrderAnalysis, OrderComparison
    from washout.sweep.result import Curve, ImportantPoint, SweepResult


@dataclass
class FigureItem:
    """One figure: a unique file-name-safe key, a title, a caption saying how to read it,
    and how to draw it. Drawing waits for the rendering, so that html.py can draw the
    figures on several cores and only one figure at a time is held in memory."""

    key: str
    title: str
    caption: str
    draw: Callable[[], Figure]


@dataclass
class Section:
    """A titled group of figures, and the tables (a title and a table each) shown before
    them."""

    title: str
    intro: str
    figures: list[FigureItem]
    tables: list[tuple[str, Table]] = field(default_factory=list)


@dataclass
class SweepPart:
    """The sweep section: a summary sentence, term/point/range tables and figures."""

    summary: str
    tables: list[tuple[str, Table]]
    figures: list[FigureItem]


@dataclass
class Report:
    """Everything a report shows, as plain text and figures."""

    title: str
    verdict: str
    facts: list[tuple[str, str]]
    notes: list[str]
    spec_text: str | None
    workers: Table | None
    tests: Table | None
    warnings: list[tuple[str, str]]
    sections: list[Section]
    sweep: SweepPart | None = None
    findings: list[str] = field(default_factory=list)
    """Carryover, drift and claims in words (washout.report.words.render_words)."""
    legend: str = ""
    """What the per-test table's columns mean."""
    order_matters: bool = False
    """The verdict is that order matters (the report says so first)."""
    comparison: Table | None = None
    """hyperfine's table: mean ± σ, median, min … max, user, system, max RSS per test."""
    ranking_heading: str = ""
    """What the summary's ratios are computed from."""
    ranking: list[str] = field(default_factory=list)
    """hyperfine's summary: "A ran r times faster than B" (or "no significant difference")
    lines, with their notes."""
    tests_note: str = ""
    """Which comparisons the per-test table shows, when not all."""
    tests_csv: tuple[str, str] | None = None
    """Every comparison as CSV: its file name and text (the table's whole form)."""
    context: Table | None = None
    """Whether each test's metric depends on its context (washout.stats.context)."""
    context_findings: list[str] = field(default_factory=list)
    """The context in words, and the comparisons' margins set against it."""

    def all_figures(self) -> list[FigureItem]:
        """Every figure, in the order the report shows them: the sections', the sweep's."""
        shown = [item for section in self.sections for item in section.figures]
        return shown + (self.sweep.figures if self.sweep else [])


# ---------------------------------------------------------------------------------------
# Number formatting
# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Order analysis
# ---------------------------------------------------------------------------------------


def comparison_lines(analysis: Analysis) -> list[str]:
    """hyperfine's summary as one sentence per line (the terminal's, joined), then its
    warnings."""
    comparison = analysis.comparison
    if comparison is None:
        return []
    lines = [f"{head} {line}" for head, body in text.ranking_lines(comparison) for line in body]
    return lines + [f"{test!r}: {w}" for test, w in text.comparison_warnings(comparison)]


def _usable(trials: pd.DataFrame) -> pd.DataFrame:
    from washout.stats.trials import usable_trials

    return usable_trials(trials, "report")[0]


MANY = 40
"""Comparisons above which a report summarises across them, as the ordering-trap paper
summarises its 1,880 configurations (the share where order matters, the distribution of
effects and p-values), and details only the most affected: a figure and a table row per
test do not fit the time and size a report may take at that scale (bench/RESULTS.md,
"Report time")."""
SHOWN = 30
"""Comparisons a summarising report details in its table and figures."""
FINDINGS = 30
"""Sentences of why a report lists; the JSON has every finding."""


def many(order: OrderAnalysis | None) -> bool:
    """Whether a report summarises ``order`` across tests (:data:`MANY`)."""
    return order is not None and len(order.tests) > MANY


def most_affected(order: OrderAnalysis) -> list[OrderComparison]:
    """The comparisons, the most affected first: the smallest Kruskal-Wallis p, then the
    largest |Δ median %|."""

    def rank(t: OrderComparison) -> tuple[float, float, str, str]:
        p = t.kw_p if t.kw_p is not None else 2.0
        return (p, -abs(t.delta_median_pct or 0.0), t.test, t.metric)

    return sorted(order.tests, key=rank)


def shown_tests(order: OrderAnalysis) -> list[OrderComparison]:
    """The comparisons a report details: all of them, or the :data:`SHOWN` most affected."""
    return most_affected(order)[:SHOWN] if many(order) else list(order.tests)


def order_sections(analysis: Analysis) -> list[Section]:
    """The order figures: per test (figures 1-4) or, with many tests, across tests and for
    the most affected; then from the trials, an overview of every trial per metric (of the
    tests shown), a trials figure by position and time for each test :func:`flagged_tests`
    names (at most :data:`DETAIL_FIGURES`), and those tests per worker where there are
    several."""
    order = analysis.order
    sections = []
    if order is not None and order.tests and not many(order):
        sections.append(Section("Order effects", "", _per_test_figures(order)))
    elif order is not None and order.tests:
        top = shown_tests(order)
        sections += [
            Section(
                "Across tests",
                f"Order matters in {len(order.significant):,} of {len(order.tests):,} "
                f"comparisons ({text.share(len(order.significant) / len(order.tests))}); how "
                "much and how surely, across all of them.",
                _across_figures(order),
            ),
            Section(
                "Most affected tests",
                f"The {len(top)} comparisons with the smallest p-values, of "
                f"{len(order.tests):,}; every one is in the CSV of the per-test results.",
                [
                    FigureItem(
                        "ci-medians",
                        "Fixed vs random medians with their CIs, the most affected tests",
                        "Each test's fixed and random medians and CIs as the difference from "
                        "its fixed-order median, coloured by CI case.",
                        partial(figures.ci_medians, top),
                    ),
                    FigureItem(
                        "delta-pct",
                        "Δ median % of the most affected tests",
                        "Positive: the fixed order had the larger median. Bars in the warm "
                        "colour are significant after correction.",
                        partial(figures.delta_pct, top),
                    ),
                ],
            ),
        ]
    return sections + _trials_sections(analysis) + _health_sections(analysis)


def _per_test_figures(order: OrderAnalysis) -> list[FigureItem]:
    """The paper's figures 5, 2, 4 and 6, a mark per test."""
    return [
        FigureItem(
            "ci-medians",
            "Fixed vs random medians with their CIs",
            "Each panel is one test on its own scale: squares are the fixed-order median, "
            "circles the random-order median, whiskers their distribution-free CIs. The "
            "colour is the CI case: disjoint CIs (case 1) mean the order moved the median.",
            partial(figures.ci_medians, order.tests),
        ),
        FigureItem(
            "kw-significance",
            "p-values and effect sizes",
            "Tests sorted by effect size eta²_H. A p-value below the dashed corrected "
            "threshold is significant after the family-wise correction.",
            partial(figures.kw_significance, order),
        ),
        FigureItem(
            "delta-pct",
            "Δ median % per test",
            "Positive: the fixed order had the larger median. Bars in the warm colour are "
            "significant after correction.",
            partial(figures.delta_pct, order.tests),
        ),
        _ci_cases(order),
    ]


def _across_figures(order: OrderAnalysis) -> list[FigureItem]:
    """Many tests summarised: the distributions of their effects and p-values, and their
    CI cases."""
    return [
        FigureItem(
            "effects",
            "Effects across tests",
            "How many comparisons shifted by how much (Δ median %, symmetric log) and how "
            "strongly (eta²_H); significant ones in the warm colour.",
            partial(figures.effect_distribution, order),
        ),
        FigureItem(
            "p-values",
            "p-values across tests",
            "Without any order effect the p-values would spread evenly; a pile at the left of "
            "the corrected threshold is the comparisons where order matters.",
            partial(figures.p_distribution, order),
        ),
        _ci_cases(order),
    ]


def _ci_cases(order: OrderAnalysis) -> FigureItem:
    return FigureItem(
        "ci-cases",
        "CI cases",
        "How many tests fall in each case of the CI comparison.",
        partial(figures.ci_case_counts, order),
    )


def _trials_sections(analysis: Analysis) -> list[Section]:
    """Every successful trial of the tests shown: an overview per metric, the flagged
    tests by position and time, and those per worker where there are several."""
    from washout.data.longformat import is_in

    order, trials = analysis.order, analysis.trials
    if trials is None or len(trials) == 0:
        return []
    summarised = many(order)
    if summarised and order is not None:
        keep = {(t.test, t.metric) for t in shown_tests(order)}
        chosen = is_in(trials["test"], {t for t, _ in keep}) & is_in(
            trials["metric"], {m for _, m in keep}
        )
        trials = trials.loc[chosen]
    ok = _usable(trials)
    if ok.empty:
        return []
    tests, metrics = ok["test"].astype(str), ok["metric"].astype(str)
    pairs = list(dict.fromkeys(zip(tests, metrics)))
    if summarised:
        pairs = [pair for pair in pairs if pair in keep]
    many_metrics = metrics.nunique() > 1

    def one(test: str, metric: str) -> pd.DataFrame:
        return ok[(tests == test) & (metrics == metric)].reset_index(drop=True)

    def named(test: str, metric: str) -> str:
        return f"{test} · {metric}" if many_metrics else test

    overviews = []
    for j, metric in enumerate(dict.fromkeys(m for _, m in pairs)):
        drawn = {t for t, m in pairs if m == metric}
        rows = ok[(metrics == metric) & tests.isin(drawn)]
        overviews.append(
            FigureItem(
                f"overview-{j}",
                f"{metric}: every trial of "
                + (f"the {len(drawn)} most affected tests" if summarised else "every test"),
                "Each test's trials as points, fixed and random order side by side, as the "
                "difference from that test's fixed-order median; bars are the medians.",
                partial(figures.trials_overview, rows, metric),
            )
        )
    flags = [f for f in flagged_tests(analysis) if (f.test, f.metric) in set(pairs)]
    detail = flags[:DETAIL_FIGURES]
    shown = overviews + [
        FigureItem(
            f"trials-{i}",
            f"{named(f.test, f.metric)}: trials by position and time ({', '.join(f.reasons)})",
            "Left: each trial's value against its position in the run; in the fixed order a "
            "test always sits at the same position. Right: the same trials against time "
            "(or run number, where the source has no timestamps).",
            partial(
                figures.trials_over_run, one(f.test, f.metric), named(f.test, f.metric), f.metric
            ),
        )
        for i, f in enumerate(detail)
    ]
    sections = [Section("Trials", _trials_intro(flags, len(pairs), named), shown)]
    workers = (
        ([(f.test, f.metric) for f in detail] if summarised else pairs)
        if ok["worker"].nunique() > 1
        else []
    )
    per_worker = [
        FigureItem(
            f"workers-{i}",
            f"{named(test, metric)}: per worker",
            "The same test on every worker; bars are medians.",
            partial(figures.per_worker, frame, named(test, metric), metric),
        )
        for i, (test, metric) in enumerate(workers)
        if (frame := one(test, metric))["worker"].nunique() > 1
    ]
    if per_worker:
        sections.append(Section("Workers", "Each test across workers, side by side.", per_worker))
    return sections


def _health_sections(analysis: Analysis) -> list[Section]:
    """Beside the trials: which were unhealthy and why, each affected test's healthy
    trials against its unhealthy ones, and those tests' trials by position and time with
    the unhealthy ones marked (where they are among the trials: not with
    ``--healthy-only``); then energy net of the idle arm, where one ran."""
    sections = []
    health = analysis.health
    if health is not None and (health.unhealthy or analysis.options.healthy_only):
        lines = text.health_lines(analysis)
        tables = []
        if health.unhealthy:
            tables = [
                ("Unhealthy trials", text.unhealthy_table(health)),
                ("Healthy against unhealthy trials", text.strata_table(health)),
            ]
        sections.append(
            Section("Trial health", " ".join(lines), _unhealthy_figures(analysis), tables)
        )
    if analysis.energy:
        sections.append(
            Section(
                "Energy",
                "Each test's energy per trial, gross and net of its idle arm: trials of "
                "sleep as long as the test's median trial, interleaved with the others and "
                "read the same way, so net is what the test's work cost above the machine "
                "at rest.",
                [],
                [("Energy per trial", text.energy_table(analysis.energy))],
            )
        )
    return sections


def _unhealthy_figures(analysis: Analysis) -> list[FigureItem]:
    """Per affected test and metric (at most :data:`DETAIL_FIGURES`), its successful trials
    by position and time, the unhealthy ones marked."""
    from washout.stats.health import flag_rows

    health, trials = analysis.health, analysis.trials
    if health is None or trials is None or not len(trials) or analysis.options.healthy_only:
        return []
    ok = _usable(trials)
    if "worker" not in ok.columns:
        ok = ok.assign(worker="local")
    ok = ok.assign(unhealthy=flag_rows(ok, health.unhealthy))
    items = []
    for i, s in enumerate(health.strata[:DETAIL_FIGURES]):
        rows = ok[(ok["test"].astype(str) == s.test) & (ok["metric"].astype(str) == s.metric)]
        items.append(
            FigureItem(
                f"health-{i}",
                f"{s.test} · {s.metric}: trials by position and time, unhealthy ones ringed",
                "As in the trials figures; a ring marks a trial a health measure flagged "
                "(the table above says why).",
                partial(figures.trials_over_run, rows.reset_index(drop=True), s.test, s.metric),
            )
        )
    return items


def _trials_intro(flags: list[Flag], compared: int, named: Callable[[str, str], str]) -> str:
    """Which tests have a trials figure of their own, and that the rest are in the
    overviews."""
    intro = (
        "Every successful trial, fixed and random marked apart: first one overview per "
        "metric, then value against position and time "
    )
    if not flags:
        return intro + (
            f"for flagged tests, and none of the {compared} is flagged (order matters, "
            "inconclusive CIs, carryover, first after the reset, drift): every trial is in "
            "the overviews."
        )
    drawn = flags[:DETAIL_FIGURES]
    intro += (
        f"for the {len(drawn)} flagged test{'s' if len(drawn) > 1 else ''} of {compared}, the "
        f"most significant first ({', '.join(named(f.test, f.metric) for f in drawn)})"
    )
    rest, others = flags[DETAIL_FIGURES:], compared - len(flags)
    if rest:
        intro += (
            f"; {len(rest)} more flagged ({', '.join(named(f.test, f.metric) for f in rest)}) "
            "are only in the overviews" + (f", as are the {others} others" if others else "")
        )
    elif others:
        intro += f"; the other {others} are in the overviews"
    return intro + "."


DETAIL_FIGURES = 8
"""At most this many per-test trials figures in a report (each costs time to draw)."""


@dataclass(frozen=True)
class Flag:
    """A test x metric the analysis flags, why (in words), and the smallest p-value among
    those reasons, which ranks it."""

    test: str
    metric: str
    reasons: tuple[str, ...]
    p: float


def flagged_tests(analysis: Analysis) -> list[Flag]:
    """The tests x metrics worth a trials figure of their own, most significant (smallest
    p) first: order matters (Kruskal-Wallis significant after correction); inconclusive
    (not significant, yet the CIs are not clearly alike: case 3, partial overlap, or case 1,
    disjoint; Duplyakin et al. 2023, Algorithm 2); a significant carryover pair or first
    trial after the reset for the test; significant drift of the test. A per-worker row
    flags its test."""
    from washout.report.words import CLOCK_WORDS
    from washout.stats.carryover import RESET
    from washout.stats.drift import WANDER

    found: dict[tuple[str, str], tuple[list[str], float]] = {}

    def add(test: str, metric: str, reason: str, p: float | None) -> None:
        reasons, best = found.get((test, metric), ([], math.inf))
        if reason not in reasons:
            reasons.append(reason)
        found[test, metric] = (reasons, min(best, float(p) if figures.finite(p) else math.inf))

    for t in analysis.order.tests if analysis.order else ():
        if t.significant:
            add(t.test, t.metric, "order matters", t.kw_p)
        elif t.ci_case in (1, 3):
            add(t.test, t.metric, f"inconclusive, CI case {t.ci_case}", t.kw_p)
    if analysis.carryover is not None:
        for pair in analysis.carryover.significant():
            lag = "two positions " if pair.lag == 2 else ""
            reason = (
                "first after the reset"
                if pair.predecessor == RESET
                else f"carryover {lag}after {pair.predecessor}"
            )
            add(pair.test, pair.metric, reason, pair.p)
    if analysis.drift is not None:
        for row in analysis.drift.significant():
            what = CLOCK_WORDS[row.against]
            add(
                row.test, row.metric, what if row.against == WANDER else f"drift with {what}", row.p
            )
    flags = [Flag(test, metric, tuple(r), p) for (test, metric), (r, p) in found.items()]
    return sorted(flags, key=lambda f: (f.p, f.test, f.metric))


# ---------------------------------------------------------------------------------------
# What ran
# ---------------------------------------------------------------------------------------


def what_ran(analysis: Analysis) -> tuple[list[tuple[str, str]], list[str], Table | None]:
    """Facts about the experiment (what the source records, then what the trials say ran),
    notes on what the source cannot tell, and the workers with their provenance."""
    recorded, ran = analysis.recorded, analysis.what_ran
    facts: list[tuple[str, str]] = []
    notes: list[str] = []
    if recorded is not None and recorded.name:
        facts.append(("experiment", recorded.name))
    source = analysis.source
    if source.path is not None and source.kind != "store" and source.kind in SOURCE_KINDS:
        name = source.path.rsplit("/", 1)[-1]
        facts.append(("source", f"{name} ({SOURCE_KINDS[source.kind]})"))
    if recorded is not None:
        for name, value in (
            ("design", recorded.design),
            ("seed", recorded.seed),
            ("runs per order kind", recorded.runs_per_kind),
        ):
            if value not in (None, ""):
                facts.append((name, str(value)))
    missing = [
        what
        for what, have in (
            ("spec", recorded and recorded.spec_text),
            ("seed", recorded and recorded.seed is not None),
            ("worker provenance", recorded and recorded.workers),
        )
        if not have
    ]
    if missing and analysis.source.kind != "sweep":
        listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " or " + missing[-1]
        notes.append(
            f"The source holds no {listed} (a CSV has none; a washout store records them)."
        )
    if ran is not None:
        facts.append(("runs", ", ".join(f"{n} {k}" for k, n in ran.runs.items())))
        facts.append(("tests", str(ran.tests)))
        facts.append(("metrics", ", ".join(ran.metrics)))
        facts.append(("trials", str(ran.trials)))
        facts.append(("workers", str(ran.workers)))
        bad = ", ".join(f"{v} {k}" for k, v in ran.unsuccessful.items())
        facts.append(("unsuccessful trials", bad or "none"))
        if ran.started and ran.ended:
            import pandas as pd

            start, end = pd.Timestamp(ran.started), pd.Timestamp(ran.ended)
            facts.append(
                (
                    "time",
                    f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC "
                    f"({_duration(end - start)})",
                )
            )
    if recorded is not None and recorded.unsuccessful is not None:
        facts.append(("unsuccessful trials in the store", str(recorded.unsuccessful)))
    workers = None
    if recorded is not None and recorded.workers:
        rows, flags = [], []
        for w in recorded.workers:
            rows.append(
                [
                    w.name,
                    w.host,
                    (w.fingerprint or text.NONE)[:16],
                    "yes"
                    if w.matched
                    else ("NO: environment differs" if w.matched is False else "unknown"),
                ]
            )
            flags.append(w.matched is False)
        workers = Table(["worker", "host", "fingerprint", "provenance matched"], rows, flags)
        if any(flags):
            notes.append(
                "Some workers' environment does not match the others: compare "
                "their results with care (a stale build can fake an effect)."
            )
    return facts, notes + text.left_out(analysis), workers


def _duration(span: Any) -> str:
    """A time span as a person says it: 0.8 s, 12 min 5 s, 3 h 12 min, 2 d 4 h."""
    seconds = span.total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {sec} s"


# ---------------------------------------------------------------------------------------
# Sweeps
# ---------------------------------------------------------------------------------------


Curves = dict[str, dict[str, list[tuple[float, float]]]]
"""Panel title -> line label -> (level, coefficient) points."""


def coefficient_panels(sweep: SweepResult) -> tuple[Curves, list[tuple[str, str, float, str]]]:
    """The coefficient curves the sweep's conclusions were drawn from (its ``curves``:
    washout.sweep's ANOVA, Hui et al. 2024, docs/sweep-method.md sections 4 and 7), so the
    sweep's knee and turning points sit on the curves drawn: one panel per main effect
    left in the model, and one per interaction and varied parameter that has a point (a line
    per fixed level). Returns the panels and the marks ``(panel, line, x, kind)``."""
    wanted = {(p.term, p.parameter) for p in sweep.important_points if p.fixed}
    panels: Curves = {}
    for curve in sorted(sweep.curves, key=lambda c: (c.term, str(c.fixed))):
        if curve.fixed and (curve.term, curve.parameter) not in wanted:
            continue
        title, line = _panel_line(curve)
        panels.setdefault(title, {})[line] = sorted(zip(map(float, curve.x), map(float, curve.y)))
    marks = []
    for p in sweep.important_points:
        title, line = _panel_line(p)
        try:
            x = float(p.value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue  # a point along text levels has no place on a numeric axis
        marks.append((title, line, x, p.type))
    return panels, marks


def _panel_line(at: Curve | ImportantPoint) -> tuple[str, str]:
    """The panel and line a curve or point belongs to: its parameter's main effect, or its
    interaction's panel with one line per fixed level."""
    if not at.fixed:
        return at.parameter, "main effect"
    ((name, _),) = at.fixed.items()
    return f"{at.parameter} by {name} ({at.term})", text.fixed_text(at.fixed)


def sweep_part(sweep: SweepResult, settings: pd.DataFrame, metric: str | None = None) -> SweepPart:
    """The sweep section from washout.sweep's result and the measured settings (parameter
    columns and the metric; the metric is the last column unless named). Its R^2 figure
    shows every step of the incremental sampling (without steps, the final one alone)."""
    metric = metric or str(settings.columns[-1])
    params = [str(c) for c in settings.columns if c != metric]
    shares = {t.term: float(t.share) for t in sweep.significant_terms if figures.finite(t.share)}
    # A parameter's weight: the shares of every term it appears in (main and interactions).
    weight = {p: sum(v for t, v in shares.items() if p in t.split(":")) for p in params}
    ranked = sorted(params, key=lambda p: (-weight[p], params.index(p)))
    rate = sweep.sampling_rate
    summary = (
        f"Measured {sweep.settings_measured} of {sweep.settings_total} settings"
        + (f" ({100 * float(rate):.0f}% sampled)" if figures.finite(rate) else "")
        + (
            "; the model reached the R² threshold"
            if sweep.terminated
            else "; stopped before the model reached the R² threshold"
        )
        + "."
    )
    r2 = [float(v) for v in sweep.r2_validation if figures.finite(v)]
    if r2:
        summary += f" Validation R² from {min(r2):.3f} to {max(r2):.3f} over {len(r2)} splits."
    if figures.finite(sweep.r2_holdout):
        holdout = float(sweep.r2_holdout)
        summary += f" R² on the latest batches, predicted before they were measured: {holdout:.3f}."
    if not sweep.terminated and figures.finite(sweep.r2_best):
        summary += f" Best worst-split R² reached: {float(sweep.r2_best):.3f}."
    if sweep.method:
        summary += (
            f" Method: {sweep.method} ({sweep.sampler} sampler, model "
            f"{sweep.model}, rule {sweep.rule}, {sweep.coding} coding)."
        )
    intervals = text.sweep_intervals(sweep)
    if intervals:
        summary += f" {intervals}"
    tables = text.sweep_tables(sweep)
    history = [(s.sampling_rate, s.r2_validation) for s in sweep.steps] or (
        [(rate, tuple(r2))] if r2 and figures.finite(rate) else []
    )
    items = []
    if history:
        items.append(
            FigureItem(
                "sweep-r2",
                "R² against sampling rate",
                "Each dot is one validation split; sampling stops when the "
                "minimum reaches the target.",
                partial(figures.r2_by_rate, history),
            )
        )
    coded = (
        "deviations from the mean over all levels (the sweep's ANOVA, sum-coded)"
        if sweep.coding == "sum"
        else "the other parameters at their lowest level (the sweep's ANOVA, treatment-coded)"
    )
    items.append(
        FigureItem(
            "sweep-coefficients",
            "Coefficients per parameter",
            f"How the metric moves with each parameter's level, {coded}: main effects, and "
            "interactions with one line per level of the fixed parameter. Triangles mark "
            "knees, diamonds turning points.",
            partial(figures.coefficient_curves, *coefficient_panels(sweep), metric, shares),
        )
    )
    items.append(
        FigureItem(
            "sweep-tiles",
            "The parameter space as tiles",
            "The two most important parameters within each tile, the next two across tiles.",
            partial(figures.tile_map, settings, ranked, metric),
        )
    )
    return SweepPart(summary, tables, items)


# ---------------------------------------------------------------------------------------


def build_report(analysis: Analysis, stem: str = "report") -> Report:
    """Everything the report of ``analysis`` shows, for html.py and markdown.py to write;
    ``stem`` names the files that go with it (the per-test CSV)."""
    from washout.report.words import context_words, render_words

    if analysis.sweep is not None and analysis.settings is None:
        from washout.errors import WashoutError

        raise WashoutError(
            "report: settings = None: a sweep section needs the measured "
            "settings (parameter columns and the metric)"
        )
    recorded, order = analysis.recorded, analysis.order
    facts, notes, workers = what_ran(analysis)
    comparison = analysis.comparison
    name = recorded.name if recorded is not None else None
    rows = shown_tests(order) if order is not None else None
    findings = render_words(analysis)
    if len(findings) > FINDINGS:
        findings = findings[:FINDINGS] + [
            f"And {len(findings) - FINDINGS:,} more findings: `washout analyze --carryover "
            "--drift --format json` has every one."
        ]
    return Report(
        title=f"washout report: {name}" if name else "washout report",
        verdict=text.verdict(analysis) if analysis.sweep is None else "",
        facts=facts,
        notes=notes,
        spec_text=(recorded.spec_text or None) if recorded else None,
        workers=workers,
        tests=text.order_table(order, rows) if order is not None else None,
        warnings=text.order_warnings(order, rows) if order is not None else [],
        sections=order_sections(analysis),
        sweep=sweep_part(analysis.sweep, analysis.settings)
        if analysis.sweep is not None and analysis.settings is not None
        else None,
        findings=findings,
        order_matters=analysis.verdict == "order-matters",
        comparison=text.comparison_table(comparison) if comparison is not None else None,
        ranking_heading=text.summary_heading(comparison)
        if comparison is not None and comparison.rankings
        else "",
        ranking=comparison_lines(analysis),
        legend=text.order_table(order, []).caption if order is not None else "",
        tests_note=(
            f"The {len(rows)} most affected of {len(order.tests):,} comparisons (the smallest "
            "p-values first); the CSV has every one."
            if order is not None and rows is not None and len(rows) < len(order.tests)
            else ""
        ),
        tests_csv=(f"{stem}-tests.csv", csv_text(analysis.to_frame()))
        if order is not None and order.tests
        else None,
        context=text.context_table(analysis.context)
        if analysis.context is not None and analysis.context.rows
        else None,
        context_findings=context_words(analysis),
    )
