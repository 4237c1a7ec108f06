"""washout report: one self-contained HTML file (or Markdown with PNG figures) from a store,
a long-format CSV or an OrderSage results file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    import pandas as pd

    from washout.report.document import Report
    from washout.sweep.result import SweepResult

from washout.cli.app import app


class ReportFormat(StrEnum):
    html = "html"
    md = "md"


WRITERS = {ReportFormat.html: "washout.report.html", ReportFormat.md: "washout.report.markdown"}
"""The module that writes each format (it imports matplotlib)."""


@app.command("report")
def report(
    source: Path = typer.Argument(
        ...,
        help="A washout store (SQLite), a long-format CSV, an OrderSage results CSV, or "
        "a sweep's directory (washout sweep --dir).",
    ),
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Where to write (default: report.html, or report.md with --format md).",
    ),
    fmt: ReportFormat = typer.Option(
        ReportFormat.html,
        "--format",
        "-f",
        help="html: one self-contained file; md: Markdown with PNG figures beside it.",
    ),
    alpha: float = typer.Option(0.05, help="Family-wise significance level."),
    correction: str = typer.Option("bonferroni", help="bonferroni or holm."),
    by_worker: bool = typer.Option(False, "--by-worker", help="Compare per worker too."),
    claim: list[str] = typer.Option(
        [],
        "--claim",
        help='A claim to check under both orders, e.g. "A < B" '
        "(repeatable; a store adds its spec's claims).",
    ),
) -> None:
    """Write a report: the verdict, what ran, the per-test table and the paper's figures."""
    from washout.cli.extras import require_extra
    from washout.data.outputs import check_output

    require_extra("report", "washout report")

    out = check_output(output or Path(f"report.{fmt.value}"), source)
    if source.is_dir():
        from washout.sweep.result import load_sweep_dir

        sweep, settings = load_sweep_dir(source)
        write_sweep_report(out, fmt.value, source.name, sweep, settings)
        typer.echo(f"{out}: sweep of {sweep.settings_measured} settings")
        return
    from washout.data.sources import load_trials
    from washout.report.parallel import beside
    from washout.report.why import why_for_report
    from washout.stats.compare import without_resource_metrics
    from washout.stats.order import analyze_order

    trials, info = load_trials(source, resources=True)
    if info.journaled_note:
        typer.echo(info.journaled_note, err=True)
    analysed = without_resource_metrics(trials)
    analysis = analyze_order(analysed, alpha=alpha, correction=correction, by_worker=by_worker)
    claims = list(claim)
    if info.kind == "store":  # only a store has a spec: its import (pydantic) costs ~0.3 s
        from washout.harness.spec import stored_claims

        claims += stored_claims(source)
    # The why analyses (scipy) in a child while this process imports matplotlib: the
    # report's two longest imports at once, and neither process imports both.
    analyses = partial(why_for_report, analysed, claims, alpha, correction, by_worker)
    why, notes = beside(analyses, meanwhile=partial(import_module, WRITERS[fmt]))
    from washout.report.document import ReportMeta, build_report

    if info.kind == "store":
        meta = ReportMeta.from_store(source, notes)
    else:
        meta = ReportMeta(source=f"{source.name} ({info.what})", notes=tuple(notes))
    _write(out, fmt.value, build_report(analysis, trials, meta, why=why))
    typer.echo(f"{out}: {analysis.verdict}")


def write_sweep_report(
    out: Path, fmt: str, name: str, sweep: SweepResult, settings: pd.DataFrame
) -> None:
    """A sweep-only report: R^2 against sampling rate, coefficients with their knee and
    turning points, and the tile map of ``settings`` (parameter columns, metric last)."""
    from washout.report.document import ReportMeta, build_report

    _write(out, fmt, build_report(None, None, ReportMeta(name=name), sweep, settings))


def _write(out: Path, fmt: str, report: Report) -> None:
    """Write ``report`` as HTML or Markdown, with a progress bar while figures are drawn."""
    with _figure_progress() as progress:
        if fmt == "md":
            from washout.report.markdown import write_markdown

            write_markdown(out, report, progress)
        else:
            from washout.report.html import write_html

            write_html(out, report, progress)


@contextmanager
def _figure_progress() -> Iterator[Callable[[int, int], None]]:
    """A progress bar with an ETA on stderr while the figures are drawn (rich hides it when
    stderr is not a terminal), redrawn as figures are done rather than by a thread of its
    own: figures are drawn in forked processes, and a fork copies the locks other threads
    hold (washout.report.parallel draws serially while another thread runs)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    bar = Progress(
        "drawing figures",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
        auto_refresh=False,
    )
    task = bar.add_task("figures", total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total, refresh=True)

    with bar:
        yield update
