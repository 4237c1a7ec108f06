"""washout analyze: did the order of trials change the results?"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from washout.cli.app import HEALTHY_ONLY_HELP, SORT_HELP, TIME_UNIT_HELP, app
from washout.data.outputs import csv_text
from washout.errors import WashoutError

if TYPE_CHECKING:
    from washout.analysis.result import Options

FORMATS: tuple[str, ...] = ("table", "json", "csv")


def _choice(option: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    """``value`` lower-cased if it is one of ``allowed`` (or None), else a one-line error."""
    if value is None:
        return None
    name = value.strip().lower()
    if name not in allowed:
        raise WashoutError(f"{option} = {value!r}: expected one of {', '.join(allowed)}")
    return name


@app.command("analyze")
def analyze_command(
    source: Path = typer.Argument(
        ...,
        metavar="SOURCE",
        help="A washout database, a long-format CSV, or an OrderSage "
        "*_exp_results.csv / *_test_results.csv file.",
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="Family-wise significance level."),
    correction: str = typer.Option(
        "bonferroni", "--correction", help="Family-wise correction: bonferroni or holm."
    ),
    by_worker: bool = typer.Option(
        False, "--by-worker", help="Compare per worker (or worker group) too."
    ),
    fmt: str = typer.Option("table", "--format", "-f", help="Output: table, json or csv."),
    compat: str | None = typer.Option(
        None, "--compat", help="Reproduce another tool's numbers: ordersage."
    ),
    ci_confidence: float | None = typer.Option(
        None,
        "--ci-confidence",
        help="Confidence of the median CIs (default 1 - alpha/m, the verdict's family-wise "
        "level; with --compat ordersage, 1 - 0.05/m).",
    ),
    carryover: bool = typer.Option(
        False, "--carryover", help="Which preceding test shifts which test (random-order runs)."
    ),
    drift: bool = typer.Option(
        False, "--drift", help="Drift with position, time since the reset, and run index."
    ),
    claim: list[str] = typer.Option(
        [],
        "--claim",
        help='A claim to check under both orders, e.g. "A < B" or '
        '"A > 1.1 * B" (repeatable; a store adds its spec\'s claims).',
    ),
    context: bool | None = typer.Option(
        None,
        "--context/--no-context",
        help="Whether each metric depends on the context its trials ran in ([experiment] "
        "context, run --context): by default where the trials have one.",
    ),
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="Restrict carryover, drift and claims to one metric, and compare tests on it "
        "(user, system and max_rss are analysed only when named here).",
    ),
    healthy_only: bool = typer.Option(False, "--healthy-only", help=HEALTHY_ONLY_HELP),
    time_unit: str | None = typer.Option(None, "--time-unit", "-u", help=TIME_UNIT_HELP),
    sort: str = typer.Option("auto", "--sort", help=SORT_HELP),
    reference: str | None = typer.Option(
        None,
        "--reference",
        help="The test the comparison's ratios are to (hyperfine's); default: a store's "
        "[experiment] reference, else the fastest.",
    ),
) -> None:
    """Did order change the results? Fixed vs random per test (Kruskal-Wallis, corrected)."""
    import sys

    from washout.analysis.compute import analyze
    from washout.analysis.result import Options
    from washout.analysis.units import named_time_unit
    from washout.report.hyperfine import check_sort, in_order
    from washout.report.render import Settings, renderer

    fmt = _choice("--format", fmt, FORMATS) or "table"
    compat = _choice("--compat", compat, ("ordersage",))
    unit = None if time_unit is None else named_time_unit(time_unit)
    check_sort(sort)
    options = Options(
        alpha=alpha,
        correction=correction,
        by_worker=by_worker,
        ci_confidence=ci_confidence,
        metric=metric,
        carryover=carryover,
        drift=drift,
        claims=tuple(claim),
        compare=False if fmt == "csv" else None,
        healthy_only=healthy_only,
        context=context,
        reference=reference,
    ).checked()
    if compat == "ordersage":
        if healthy_only:
            raise WashoutError(
                "--healthy-only goes without --compat: OrderSage's numbers are of every trial"
            )
        _ordersage(source, options, fmt)
        return
    if fmt == "csv":
        _refuse_why(options.why)
    analysis = analyze(source, options)
    if fmt == "csv":
        _refuse_why(bool(analysis.claims))  # the spec's
        from washout.report.text import health_lines

        for line in health_lines(analysis):  # the table cannot say what was set aside
            sys.stderr.write(line + "\n")
    tty = fmt == "table" and sys.stdout.isatty()
    width = _terminal_width() if tty else None
    settings = Settings(width=width, color=tty, time_unit=unit)
    sys.stdout.write(renderer(fmt)(in_order(analysis, sort), settings).text)


def _terminal_width() -> int:
    from rich.console import Console

    return Console().width


def _ordersage(source: Path, options: Options, fmt: str) -> None:
    """OrderSage's own table (``--compat ordersage``): its numbers, not washout's analysis."""
    import sys

    from washout.data.sources import load_trials
    from washout.report.terminal import frame_table, table_text
    from washout.stats.ordersage_compat import ordersage_stats
    from washout.stats.trials import check_metric

    trials, info = load_trials(source)
    _refuse_why(options.why or bool(_spec_claims(source, info.kind)))
    if options.metric is not None:
        check_metric(trials, options.metric, str(source), store=info.kind == "store")
    frame = ordersage_stats(
        trials,
        generation=info.generation or "test",
        test_column=info.test_column,
        ci_confidence=options.ci_confidence,
        by_worker=options.by_worker,
        metric=options.metric,
    )
    if fmt == "csv":
        sys.stdout.write(csv_text(frame))
    elif fmt == "json":
        sys.stdout.write(frame.to_json(orient="records") + "\n")
    else:
        keys = 1 + options.by_worker + ("metric" in frame.columns)
        width = _terminal_width() if sys.stdout.isatty() else None
        sys.stdout.write(table_text(frame_table(frame, keys=keys), width))


def _spec_claims(source: Path, kind: str) -> list[str]:
    """The claims of a store's spec (only a store has one); none for other sources."""
    if kind != "store":
        return []
    from washout.harness.spec import stored_claims

    return stored_claims(source)


def _refuse_why(why: bool) -> None:
    """The one-line error for carryover, drift or claims with an output that cannot say them."""
    if why:
        raise WashoutError(
            "--carryover, --drift and --claim (or claims in the spec) go with "
            "--format table or json, without --compat"
        )
