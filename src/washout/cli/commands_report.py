"""washout report: one self-contained HTML file (or Markdown with PNG figures) from a store,
a long-format CSV or an OrderSage results file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

import typer

from washout.cli.app import app
from washout.cli.commands_analyze import stored_claims


class ReportFormat(str, Enum):
    html = "html"
    md = "md"


@app.command("report")
def report(
    source: Path = typer.Argument(
        ..., help="A washout store (SQLite), a long-format CSV or an OrderSage results CSV."),
    output: Path | None = typer.Option(
        None, "-o", "--output",
        help="Where to write (default: report.html, or report.md with --format md)."),
    fmt: ReportFormat = typer.Option(
        ReportFormat.html, "--format", "-f",
        help="html: one self-contained file; md: Markdown with PNG figures beside it."),
    alpha: float = typer.Option(0.05, help="Family-wise significance level."),
    correction: str = typer.Option("bonferroni", help="bonferroni or holm."),
    by_worker: bool = typer.Option(False, "--by-worker", help="Compare per worker too."),
    claim: list[str] = typer.Option([], "--claim",
                                    help='A claim to check under both orders, e.g. "A < B" '
                                         "(repeatable; a store adds its spec's claims)."),
) -> None:
    """Write a report: the verdict, what ran, the per-test table and the paper's figures."""
    from washout.report import document
    from washout.sources import load_trials
    from washout.stats.order import analyze_order

    trials, info = load_trials(source)
    analysis = analyze_order(trials, alpha=alpha, correction=correction,
                             by_worker=by_worker).to_dict()
    if info.kind == "store":
        meta = document.meta_from_store(source)
    else:
        kind = {"long-csv": "long-format CSV", "ordersage": "OrderSage results CSV"}[info.kind]
        meta = {"source": f"{source.name} ({kind})"}
    why = explain_for_report(trials, [*claim, *stored_claims(source, info.kind)], alpha,
                             correction, by_worker)
    out = output or Path(f"report.{fmt.value}")
    with _figure_progress() as progress:
        if fmt is ReportFormat.md:
            from washout.report.markdown import write_markdown

            write_markdown(out, analysis, trials, meta, progress=progress, why=why)
        else:
            from washout.report.html import write_html

            write_html(out, analysis, trials, meta, progress=progress, why=why)
    typer.echo(f"{out}: {analysis['verdict']}")


def explain_for_report(trials, claims: list[str], alpha: float, correction: str,  # type: ignore[no-untyped-def]
                       by_worker: bool) -> dict:
    """Carryover, drift and claims for the report's "why" section. Carryover and drift need
    positions and times; a source without them gets the claims only (the report says so)."""
    from washout.errors import WashoutError
    from washout.stats.why import explain

    kwargs = dict(alpha=alpha, correction=correction, by_worker=by_worker)
    try:
        return explain(trials, carryover=True, drift=True, claims=claims, **kwargs)
    except WashoutError:
        return explain(trials, claims=claims, **kwargs) if claims else {}


@contextmanager
def _figure_progress() -> Iterator[Callable[[int, int], None]]:
    """A progress bar with an ETA on stderr while the figures are drawn (rich hides it when
    stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    bar = Progress("drawing figures", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("figures", total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update
