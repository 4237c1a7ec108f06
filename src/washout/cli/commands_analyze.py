"""washout analyze: did the order of trials change the results?"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from washout.cli.app import app
from washout.errors import WashoutError

if TYPE_CHECKING:
    from washout.stats.compare import Comparison
    from washout.stats.order import OrderAnalysis

FORMATS: tuple[str, ...] = ("table", "json", "csv")
T = TypeVar("T")
U = TypeVar("U")


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
    fmt: str = typer.Option("table", "--format", help="Output: table, json or csv."),
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
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="Restrict carryover, drift and claims to one metric, and compare tests on it "
        "(user, system and max_rss are analysed only when named here).",
    ),
) -> None:
    """Did order change the results? Fixed vs random per test (Kruskal-Wallis, corrected)."""
    import sys

    from washout.data.sources import load_trials
    from washout.report.terminal import frame_table, render_analysis, render_comparison
    from washout.stats.family import check_alpha, check_method
    from washout.stats.median_ci import check_confidence

    alpha = check_alpha(alpha)
    correction = check_method(correction)
    fmt = _choice("--format", fmt, FORMATS) or "table"
    compat = _choice("--compat", compat, ("ordersage",))
    if ci_confidence is not None:
        ci_confidence = check_confidence(ci_confidence)
    # The order analysis alone reads only its own columns (a third faster on a large CSV).
    from washout.stats.order import COLUMNS as ORDER_COLUMNS

    alone = not (carryover or drift or claim or compat)
    trials, info = load_trials(
        source,
        (*ORDER_COLUMNS, *(["worker"] if by_worker else [])) if alone else None,
        defer_checks=alone,
    )
    if info.journaled_note:
        typer.echo(info.journaled_note, err=True)
    if compat == "ordersage":
        _refuse_why(carryover or drift or bool([*claim, *_spec_claims(source, info.kind)]))
        from washout.stats.ordersage_compat import ordersage_stats

        frame = ordersage_stats(
            trials,
            generation=info.generation or "test",
            test_column=info.test_column,
            ci_confidence=ci_confidence,
            by_worker=by_worker,
        )
        if fmt == "csv":
            frame.to_csv(sys.stdout, index=False)
        elif fmt == "json":
            typer.echo(frame.to_json(orient="records"))
        else:
            keys = 1 + by_worker + ("metric" in frame.columns)
            _print_table(frame_table(frame, keys=keys))
        return

    from washout.stats.compare import (
        COMPARED_TESTS,
        compare_tests,
        compared_metric,
        without_resource_metrics,
    )
    from washout.stats.order import analyze_order

    analysed = without_resource_metrics(trials, metric)  # the order and why analyses'

    def results() -> tuple[Comparison | None, OrderAnalysis]:
        """The comparison and the order analysis."""
        comparison = None
        if fmt != "csv" and trials["test"].nunique() <= COMPARED_TESTS:
            from washout.report.terminal import metric_value

            shown = compared_metric(trials, metric) or "wall"
            # the runs pair the tests: a source read for the order analysis alone lacks them
            # (a store read again with each trial's CPU time and RSS, which the table shows)
            every = (
                trials
                if "run" in trials.columns and info.kind != "store"
                else load_trials(source, resources=True)[0]
            )
            comparison = compare_tests(
                every,
                metric=shown,
                alpha=alpha,
                correction=correction,
                describe=lambda v: metric_value(shown, v),
            )
        analysis = analyze_order(
            analysed,
            alpha=alpha,
            correction=correction,
            by_worker=by_worker,
            ci_confidence=ci_confidence,
        )
        return comparison, analysis

    # Beside the analysis, in a forked child: a long CSV's row checks (a failed one is the
    # error), or the claims of a store's spec (its pydantic models take 0.05 s to import).
    def rows_and_claims() -> list[str]:
        if info.check is not None:
            info.check()
        return _spec_claims(source, info.kind)

    if info.check is None and info.kind != "store":
        stored, (comparison, analysis) = rows_and_claims(), results()
    else:
        stored, (comparison, analysis) = _beside_work(rows_and_claims, results)
    claims = [*claim, *stored]
    why = carryover or drift or bool(claims)
    if fmt == "csv":
        _refuse_why(why)
    found = None
    if why:
        from washout.stats.why import explain

        found = explain(
            analysed,
            carryover=carryover,
            drift=drift,
            claims=claims,
            alpha=alpha,
            correction=correction,
            by_worker=by_worker,
            metric=metric,
        )
    if fmt == "json":
        compared = {"comparison": comparison.to_dict()} if comparison else {}
        why_found = found.to_dict() if found else {}
        typer.echo(_json_document({**analysis.to_dict(), **why_found, **compared}))
    elif fmt == "csv":
        analysis.to_frame().to_csv(sys.stdout, index=False)
    else:
        _print_table(render_analysis(analysis))
        if found is not None:
            from washout.stats.why import render_words

            _print_table("\n".join(render_words(found)))
        if comparison is not None and comparison.summaries:
            _print_table(render_comparison(comparison))


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


def _beside_work(job: Callable[[], T], work: Callable[[], U]) -> tuple[T, U]:
    """``job()`` from a forked child and ``work()`` from this process, at once
    (:func:`washout.report.parallel.beside`; one after the other without a second core).
    An error of ``job``'s (a failed check) is raised first: ``work``'s own error, which the
    bad rows would explain, only when ``job`` succeeds."""
    from washout.report.parallel import beside

    done: dict[str, Any] = {}

    def meanwhile() -> None:
        try:
            done["result"] = work()
        except Exception as err:  # shown only if ``job`` succeeds
            done["error"] = err

    first = beside(job, meanwhile)
    if "error" in done:
        raise done["error"]
    result: U = done["result"]
    return first, result


def _json_document(document: dict) -> str:
    """The analysis as JSON, one comparison per line under ``tests``.

    Readable, and written by json's C encoder: ``indent=2`` takes the pure-Python encoder,
    which spent more time on 1,880 comparisons than the analysis itself
    (bench/analysis_scale.py).
    """
    import json

    head = json.dumps({k: v for k, v in document.items() if k != "tests"}, allow_nan=False)
    tests = ",\n".join("  " + json.dumps(t, allow_nan=False) for t in document["tests"])
    return f'{head[:-1]}, "tests": [{chr(10) + tests + chr(10) if tests else ""}]}}'


def _print_table(renderable: object) -> None:
    """Print a rich renderable to stdout; piped output is not squeezed into 80 columns."""
    import sys

    from rich.console import Console

    piped = not sys.stdout.isatty()
    Console(highlight=False, width=160 if piped else None, soft_wrap=piped, markup=False).print(
        renderable
    )
