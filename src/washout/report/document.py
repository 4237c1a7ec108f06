"""What a report says, independent of how it is written (HTML or Markdown).

:func:`build_report` turns the order analysis (an ``OrderAnalysis``), the long-format
trials, the experiment's metadata from the store and, for sweeps, the sweep result into a
:class:`Report`: the verdict in one sentence, what ran, the per-test table as text cells,
and the figures (how to draw each matplotlib ``Figure``; html.py inlines them as SVG,
markdown.py writes PNGs). Values the source does not offer are left out and said to be
missing, never made up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from washout.report import figures

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from washout.stats.order import OrderAnalysis
    from washout.stats.why import Why
    from washout.sweep.result import Curve, Fixed, ImportantPoint, SweepResult


@dataclass(frozen=True)
class WorkerProvenance:
    """A worker as the store knows it; ``matched``: its environment fingerprint is the one
    most workers have (None when it has none)."""

    name: str
    host: str
    fingerprint: str | None
    matched: bool | None


@dataclass(frozen=True)
class ReportMeta:
    """What the source says about the experiment beside its trials (a store says much, a CSV
    only its name); ``notes`` say what the source could not support."""

    name: str | None = None
    source: str | None = None
    seed: int | None = None
    design: str | None = None
    runs: int | None = None
    spec_text: str | None = None
    workers: tuple[WorkerProvenance, ...] = ()
    failures: int | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_store(cls, path: str | Path, notes: Sequence[str] = ()) -> ReportMeta:
        """Name, seed, design, runs, spec text, the workers with their fingerprints and the
        count of unsuccessful trials, from a washout store."""
        from collections import Counter

        from washout.data.store import Store

        with Store.open(path, readonly=True) as store:
            exp = store.experiment()
            workers = store.workers()
            counts = store.counts()
        prints = Counter(f for *_, f in workers if f)
        usual = prints.most_common(1)[0][0] if prints else None
        return cls(
            name=exp.name,
            seed=exp.seed,
            design=exp.design,
            runs=exp.runs_per_kind,
            spec_text=exp.spec_text,
            workers=tuple(
                WorkerProvenance(name, host, f, None if f is None else f == usual)
                for _, name, host, f in workers
            ),
            failures=sum(
                n for status, n in counts.items() if status not in ("ok", "running", "warmup")
            ),
            notes=tuple(notes),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    """A titled group of figures."""

    title: str
    intro: str
    figures: list[FigureItem]


@dataclass
class Table:
    """A table as text cells; ``highlight[i]`` marks row i (a significant test)."""

    columns: list[str]
    rows: list[list[str]]
    highlight: list[bool] = field(default_factory=list)


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
    """Carryover, drift and claims in words (washout.stats.why.render_words)."""
    order_matters: bool = False
    """The verdict is that order matters (the report says so first)."""
    comparison: Table | None = None
    """hyperfine's table: mean ± σ, median, min … max, user, system, max RSS per test."""
    ranking: list[str] = field(default_factory=list)
    """hyperfine's "A ran r ± e times faster than B" lines, with their notes."""

    def all_figures(self) -> list[FigureItem]:
        """Every figure, in the order the report shows them: the sections', the sweep's."""
        shown = [item for section in self.sections for item in section.figures]
        return shown + (self.sweep.figures if self.sweep else [])


# ---------------------------------------------------------------------------------------
# Number formatting
# ---------------------------------------------------------------------------------------


def fmt(x: object) -> str:
    """A measurement for a table: thousands separated, about four significant digits."""
    if not figures.finite(x):
        return "–"
    v = float(x)
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 0.001:
        return f"{v:.4g}"
    return f"{v:.3e}"


def fmt_p(p: object) -> str:
    """A p-value: two significant digits, scientific below 1e-4."""
    if not figures.finite(p):
        return "–"
    v = float(p)
    return f"{v:.1e}" if v < 1e-4 else f"{v:.2g}"


def fmt_ci(ci: Sequence[object] | None) -> str:
    if not ci:
        return "no CI"
    lo, hi = ci
    return f"[{fmt(lo)}, {fmt(hi)}]"


# ---------------------------------------------------------------------------------------
# hyperfine's comparison
# ---------------------------------------------------------------------------------------


def comparison_part(trials: pd.DataFrame | None) -> tuple[Table | None, list[str]]:
    """hyperfine's table and ranking lines (washout.stats.compare) on wall time, or on the
    trials' first own metric, lower taken as better; none for more than
    :data:`~washout.stats.compare.COMPARED_TESTS` tests or without successful trials."""
    from washout.report.terminal import (
        COMPARISON_COLUMNS,
        comparison_rows,
        disagreement_note,
        metric_value,
        ranking_line,
    )
    from washout.stats.compare import COMPARED_TESTS, compare_tests, compared_metric

    if trials is None or trials.empty or trials["test"].nunique() > COMPARED_TESTS:
        return None, []
    metric = compared_metric(trials)
    if metric is None:
        return None, []
    result = compare_tests(trials, metric=metric, describe=lambda v: metric_value(metric, v))
    if not result.summaries:
        return None, []
    columns = [COMPARISON_COLUMNS[0], f"{metric} {COMPARISON_COLUMNS[1]}", *COMPARISON_COLUMNS[2:]]
    table = Table(columns, comparison_rows(result), [bool(s.warnings) for s in result.summaries])
    lines = [f"{r.fastest!r} ran {ranking_line(r, metric)}" for r in result.rankings]
    lines += [f"{r.test!r}: {disagreement_note(r)}" for r in result.rankings if r.orders_disagree]
    lines += [f"{s.test!r}: {w}" for s in result.summaries for w in s.warnings]
    return table, lines


# ---------------------------------------------------------------------------------------
# Order analysis
# ---------------------------------------------------------------------------------------


def verdict_sentence(analysis: dict[str, Any]) -> str:
    """The whole result in one sentence, with the test and the threshold it rests on."""
    tests = analysis.get("tests") or []
    compared = [t for t in tests if figures.finite(t.get("kw_p"))]
    m = analysis.get("family_size", len(compared))
    how = (
        f"Kruskal-Wallis, alpha = {analysis.get('alpha')} with {analysis.get('correction')} "
        f"correction over {m} comparison{'s' if m != 1 else ''}"
    )
    if figures.finite(analysis.get("alpha_per_test")):
        how += f" (threshold per test {float(analysis['alpha_per_test']):.3g})"
    if not compared:
        return (
            "Nothing to compare: no test has successful trials in both the fixed and the "
            "random order."
        )
    significant = [t for t in compared if t.get("significant")]
    if analysis.get("verdict") == "order-matters" or significant:
        names = [figures.test_label(t, figures.several_metrics(tests)) for t in significant]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        verb = "differs" if len(significant) == 1 else "differ"
        return (
            f"Order matters: {len(significant)} of {len(compared)} comparisons {verb} "
            f"between fixed and random order ({shown}); {how}."
        )
    return (
        f"No evidence that order matters: none of the {len(compared)} comparisons differs "
        f"between fixed and random order; {how}."
    )


def tests_table(analysis: dict[str, Any]) -> Table:
    """The per-test table: samples, medians with CIs, CI case, Delta%, p, eta^2 (warnings are
    listed under it, see :func:`test_warnings`)."""
    tests = analysis.get("tests") or []
    metrics = {t.get("metric") for t in tests}
    with_worker = any(t.get("worker") not in (None, "") for t in tests)
    columns = (
        ["test"]
        + (["metric"] if len(metrics) > 1 else [])
        + (["worker"] if with_worker else [])
        + [
            "n fixed / random",
            "median fixed [CI]",
            "median random [CI]",
            "CI case",
            "Δ%",
            "p (KW)",
            "eta²",
            "significant",
        ]
    )
    rows, highlight = [], []
    for t in tests:
        row = [str(t["test"])]
        if len(metrics) > 1:
            row.append(str(t.get("metric")))
        if with_worker:
            row.append(str(t.get("worker") or "all"))
        excluded = int(t.get("excluded_fixed") or 0) + int(t.get("excluded_random") or 0)
        delta = t.get("delta_pct")
        row += [
            f"{t.get('n_fixed', 0)} / {t.get('n_random', 0)}"
            + (f" ({excluded} excluded)" if excluded else ""),
            _median_ci(t, "fixed"),
            _median_ci(t, "random"),
            str(t["ci_case"]) if t.get("ci_case") is not None else "–",
            f"{float(delta):+.2f}" if figures.finite(delta) else "–",
            fmt_p(t.get("kw_p")),
            f"{float(t['eta_squared']):.3f}" if figures.finite(t.get("eta_squared")) else "–",
            "yes" if t.get("significant") else "no",
        ]
        rows.append(row)
        highlight.append(bool(t.get("significant")))
    return Table(columns, rows, highlight)


def _median_ci(t: dict[str, Any], side: str) -> str:
    median = t.get(f"median_{side}")
    return f"{fmt(median)} {fmt_ci(t.get(f'ci_{side}'))}" if figures.finite(median) else "–"


def test_warnings(analysis: dict[str, Any]) -> list[tuple[str, str]]:
    """Every warning of the analysis as (test, warning), in table order."""
    tests = analysis.get("tests") or []
    several = figures.several_metrics(tests)
    return [
        (figures.test_label(t, several), str(w)) for t in tests for w in t.get("warnings") or []
    ]


def _usable(trials: pd.DataFrame) -> pd.DataFrame:
    from washout.stats.trials import usable_trials

    return usable_trials(trials, "report")[0]


def order_sections(
    analysis: dict[str, Any], trials: pd.DataFrame | None, why: Why | None = None
) -> list[Section]:
    """Figures 1-4 from the analysis; from the trials, one overview of every trial per
    metric, a trials figure by position and time for each test :func:`flagged_tests` names
    (at most :data:`DETAIL_FIGURES`), and per worker where there are several."""
    tests = analysis.get("tests") or []
    sections = []
    if tests:
        sections.append(
            Section(
                "Order effects",
                "",
                [
                    FigureItem(
                        "ci-medians",
                        "Fixed vs random medians with their CIs",
                        "Each panel is one test on its own scale: squares are the fixed-order "
                        "median, circles the random-order median, whiskers their distribution-"
                        "free CIs. The colour is the CI case: disjoint CIs (case 1) mean the "
                        "order moved the median.",
                        partial(figures.ci_medians, tests),
                    ),
                    FigureItem(
                        "kw-significance",
                        "p-values and effect sizes",
                        "Tests sorted by effect size eta²_H. A p-value below the dashed "
                        "corrected threshold is significant after the family-wise correction.",
                        partial(figures.kw_significance, analysis),
                    ),
                    FigureItem(
                        "delta-pct",
                        "Δ% per test",
                        "Positive: the fixed order had the larger mean. Bars in the warm colour "
                        "are significant after correction.",
                        partial(figures.delta_pct, analysis),
                    ),
                    FigureItem(
                        "ci-cases",
                        "CI cases",
                        "How many tests fall in each case of the CI comparison.",
                        partial(figures.ci_case_counts, analysis),
                    ),
                ],
            )
        )
    if trials is None or len(trials) == 0:
        return sections
    ok = _usable(trials)
    if ok.empty:
        return sections
    tests, metrics = ok["test"].astype(str), ok["metric"].astype(str)
    pairs = list(dict.fromkeys(zip(tests, metrics)))
    many_metrics = metrics.nunique() > 1

    def one(test: str, metric: str) -> pd.DataFrame:
        return ok[(tests == test) & (metrics == metric)].reset_index(drop=True)

    def named(test: str, metric: str) -> str:
        return f"{test} · {metric}" if many_metrics else test

    shown = [
        FigureItem(
            f"overview-{j}",
            f"{metric}: every trial of every test",
            "Each test's trials as points, fixed and random order side by side, as the "
            "difference from that test's fixed-order median; bars are the medians.",
            partial(figures.trials_overview, ok[metrics == metric], metric),
        )
        for j, metric in enumerate(dict.fromkeys(metrics))
    ]
    flags = [f for f in flagged_tests(analysis, why) if (f.test, f.metric) in set(pairs)]
    shown += [
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
        for i, f in enumerate(flags[:DETAIL_FIGURES])
    ]
    sections.append(Section("Trials", _trials_intro(flags, len(pairs), named), shown))
    several_workers = ok["worker"].nunique() > 1
    per_worker = [
        FigureItem(
            f"workers-{i}",
            f"{named(test, metric)}: per worker",
            "The same test on every worker; bars are medians.",
            partial(figures.per_worker, frame, named(test, metric), metric),
        )
        for i, (test, metric) in enumerate(pairs)
        if several_workers and (frame := one(test, metric))["worker"].nunique() > 1
    ]
    if per_worker:
        sections.append(Section("Workers", "Each test across workers, side by side.", per_worker))
    return sections


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
"""At most this many per-test trials figures in a report (each costs ~0.1 s to draw)."""


@dataclass(frozen=True)
class Flag:
    """A test x metric the analysis flags, why (in words), and the smallest p-value among
    those reasons, which ranks it."""

    test: str
    metric: str
    reasons: tuple[str, ...]
    p: float


def flagged_tests(analysis: dict[str, Any], why: Why | None) -> list[Flag]:
    """The tests x metrics worth a trials figure of their own, most significant (smallest
    p) first: order matters (Kruskal-Wallis significant after correction); inconclusive
    (not significant, yet the CIs are not clearly alike: case 3, partial overlap, or case 1,
    disjoint; Duplyakin et al. 2023, Algorithm 2); a significant carryover pair or first
    trial after the reset for the test; significant drift of the test. A per-worker row
    flags its test."""
    from washout.stats.carryover import RESET
    from washout.stats.why import CLOCK_WORDS

    found: dict[tuple[str, str], tuple[list[str], float]] = {}

    def add(test: str, metric: str, reason: str, p: object) -> None:
        reasons, best = found.get((test, metric), ([], math.inf))
        if reason not in reasons:
            reasons.append(reason)
        found[test, metric] = (reasons, min(best, float(p) if figures.finite(p) else math.inf))

    for t in analysis.get("tests") or []:
        key = str(t["test"]), str(t.get("metric"))
        if t.get("significant"):
            add(*key, "order matters", t.get("kw_p"))
        elif t.get("ci_case") in (1, 3):
            add(*key, f"inconclusive, CI case {t['ci_case']}", t.get("kw_p"))
    if why is not None and why.carryover is not None:
        for pair in why.carryover.significant():
            lag = "two positions " if pair.lag == 2 else ""
            reason = (
                "first after the reset"
                if pair.predecessor == RESET
                else f"carryover {lag}after {pair.predecessor}"
            )
            add(pair.test, pair.metric, reason, pair.p)
    if why is not None and why.drift is not None:
        for row in why.drift.significant():
            add(row.test, row.metric, f"drift with {CLOCK_WORDS[row.against]}", row.p)
    flags = [Flag(test, metric, tuple(r), p) for (test, metric), (r, p) in found.items()]
    return sorted(flags, key=lambda f: (f.p, f.test, f.metric))


# ---------------------------------------------------------------------------------------
# What ran
# ---------------------------------------------------------------------------------------


def what_ran(
    meta: ReportMeta | None, trials: pd.DataFrame | None
) -> tuple[list[tuple[str, str]], list[str], Table | None]:
    """Facts about the experiment (from the store's metadata, then from the trials), notes on
    what the source cannot tell, and the workers with their provenance."""
    meta = meta or ReportMeta()
    facts: list[tuple[str, str]] = []
    notes: list[str] = []
    for key, name in (
        ("name", "experiment"),
        ("source", "source"),
        ("design", "design"),
        ("seed", "seed"),
        ("runs", "runs per order kind"),
    ):
        if getattr(meta, key) not in (None, ""):
            facts.append((name, str(getattr(meta, key))))
    missing = [k for k in ("spec_text", "seed", "workers") if not getattr(meta, k)]
    if missing:
        what = [
            {"spec_text": "spec", "seed": "seed", "workers": "worker provenance"}[k]
            for k in missing
        ]
        listed = what[0] if len(what) == 1 else ", ".join(what[:-1]) + " or " + what[-1]
        notes.append(
            f"The source holds no {listed} (a CSV has none; a washout store records them)."
        )
    notes.extend(meta.notes)  # what else the source could not support
    if trials is not None and len(trials):
        runs = (
            trials.drop_duplicates(["worker", "run"])
            if "worker" in trials.columns
            else trials.drop_duplicates(["run"])
        )
        kinds = runs["order"].astype(str).value_counts()
        facts.append(("runs", ", ".join(f"{n} {k}" for k, n in kinds.items())))
        facts.append(("tests", f"{trials['test'].nunique()}"))
        facts.append(("metrics", ", ".join(map(str, dict.fromkeys(trials["metric"].astype(str))))))
        keys = [c for c in ("worker", "run", "position") if c in trials.columns]
        facts.append(("trials", str(len(trials.drop_duplicates(keys)))))
        if "worker" in trials.columns:
            facts.append(("workers", str(trials["worker"].nunique())))
        status = trials.drop_duplicates(keys)["status"].astype(str).value_counts()
        bad = {k: int(v) for k, v in status.items() if k != "ok"}
        facts.append(
            (
                "unsuccessful trials",
                ", ".join(f"{v} {k}" for k, v in bad.items()) if bad else "none",
            )
        )
        span = _time_span(trials)
        if span:
            facts.append(("time", span))
    if meta.failures is not None:
        facts.append(("unsuccessful trials in the store", str(meta.failures)))
    workers = None
    if meta.workers:
        rows, flags = [], []
        for w in meta.workers:
            matched = w.matched
            rows.append(
                [
                    w.name,
                    w.host,
                    (w.fingerprint or "–")[:16],
                    "yes"
                    if matched
                    else ("NO: environment differs" if matched is False else "unknown"),
                ]
            )
            flags.append(matched is False)
        workers = Table(["worker", "host", "fingerprint", "provenance matched"], rows, flags)
        if any(flags):
            notes.append(
                "Some workers' environment does not match the others: compare "
                "their results with care (a stale build can fake an effect)."
            )
    return facts, notes, workers


def _time_span(trials: pd.DataFrame) -> str | None:
    x, axis = figures.time_axis(trials)
    if "UTC" not in axis:
        return None
    start, end = x.min(), x.max()
    if "ended" in trials.columns:
        import pandas as pd

        ended = pd.to_datetime(trials["ended"], errors="coerce", utc=True, format="ISO8601")
        if ended.notna().any():
            end = max(end, ended.max())
    return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC ({_duration(end - start)})"


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
    return f"{at.parameter} by {name} ({at.term})", fixed_text(at.fixed)


def fixed_text(fixed: Fixed) -> str:
    """The fixed side of an interaction point (``{"keys": 128}`` -> ``keys = 128``)."""
    if not fixed:
        return "–"
    return ", ".join(f"{k} = {v}" for k, v in fixed.items())


def interval_text(low: float | None, high: float | None) -> str:
    """A share's interval in percent (``41.2-52.3%``), or a dash without one."""
    if low is None or high is None:
        return "–"
    return f"{100 * float(low):.1f}-{100 * float(high):.1f}%"


def point_interval_text(point: ImportantPoint) -> str:
    """Where the draws put a point (``8-16``) and how often they found one (``(93%)``)."""
    where = "" if point.low is None else f"{fmt(point.low)}-{fmt(point.high)} "
    return where + ("" if point.found is None else f"({float(point.found):.0%})")


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
    level = sweep.interval_level
    if level:
        summary += (
            f" Shares and points carry {level:.0%} intervals for the fully measured space's "
            "values; a term is important when its whole interval is at or above 10%, and "
            "may be important when the interval crosses it."
        )
    tables = [
        (
            "Significant terms",
            Table(
                ["term", "share of variance"] + (["interval", "importance"] if level else []),
                [
                    [t.term, f"{100 * float(t.share):.1f}%"]
                    + ([interval_text(t.low, t.high), t.importance or ""] if level else [])
                    for t in sweep.significant_terms
                ],
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
            ),
        ),
    ]
    if sweep.ranges:
        tables.append(
            (
                "Ranges a fair comparison must cover",
                Table(
                    ["parameter", "range"],
                    [[k, ", ".join(map(str, v))] for k, v in sweep.ranges.items()],
                ),
            )
        )
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


def build_report(
    analysis: OrderAnalysis | None,
    trials: pd.DataFrame | None,
    meta: ReportMeta | None = None,
    sweep: SweepResult | None = None,
    settings: pd.DataFrame | None = None,
    why: Why | None = None,
) -> Report:
    """Everything the report shows, for html.py and markdown.py to write. ``analysis`` and
    ``trials`` (the long-format frame it came from) may be None for a sweep-only report;
    ``meta`` is what the source says beside its trials; ``sweep`` adds the sweep section
    and needs ``settings``; ``why`` adds carryover, drift and claims in words."""
    from washout.errors import WashoutError
    from washout.stats.why import render_words

    if sweep is not None and settings is None:
        raise WashoutError(
            "report: settings = None: a sweep section needs the measured "
            "settings (parameter columns and the metric)"
        )
    meta = meta or ReportMeta()
    found = analysis.to_dict() if analysis is not None else None
    facts, notes, workers = what_ran(meta, trials)
    comparison, ranking = comparison_part(trials)  # with CPU time and RSS, when measured
    if trials is not None:
        from washout.stats.compare import without_resource_metrics

        trials = without_resource_metrics(trials)
    return Report(
        title=f"washout report: {meta.name}" if meta.name else "washout report",
        verdict=verdict_sentence(found) if found is not None else "",
        facts=facts,
        notes=notes,
        spec_text=meta.spec_text or None,
        workers=workers,
        tests=tests_table(found) if found is not None else None,
        warnings=test_warnings(found) if found is not None else [],
        sections=order_sections(found, trials, why) if found is not None else [],
        sweep=sweep_part(sweep, settings) if sweep is not None else None,
        findings=render_words(why) if why is not None else [],
        order_matters=found is not None and found.get("verdict") == "order-matters",
        comparison=comparison,
        ranking=ranking,
    )
