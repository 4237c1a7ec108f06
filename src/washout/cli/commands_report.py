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

    from washout.analysis.result import Analysis
    from washout.sweep.result import SweepResult

from washout.cli.app import HEALTHY_ONLY_HELP, app


class ReportFormat(StrEnum):
    html = "html"
    md = "md"


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
    healthy_only: bool = typer.Option(False, "--healthy-only", help=HEALTHY_ONLY_HELP),
) -> None:
    """Write a report: the verdict, what ran, the per-test table and the paper's figures."""
    from washout.analysis.compute import analyze
    from washout.analysis.result import Options
    from washout.cli.extras import require_extra
    from washout.data.outputs import check_output
    from washout.report.render import FORMATS

    require_extra("report", "washout report")

    out = check_output(output or Path(f"report.{fmt.value}"), source)
    options = Options(
        alpha=alpha,
        correction=correction,
        by_worker=by_worker,
        carryover=None,
        drift=None,
        claims=tuple(claim),
        describe=True,
        healthy_only=healthy_only,
    )
    # The figures' libraries (matplotlib) are imported while a child analyses why.
    analysis = analyze(source, options, meanwhile=partial(import_module, FORMATS[fmt.value]))
    _write(out, fmt.value, analysis, source)
    if analysis.sweep is not None:
        typer.echo(f"{out}: sweep of {analysis.sweep.settings_measured} settings")
    else:
        typer.echo(f"{out}: {analysis.verdict}")


def write_sweep_report(
    out: Path, fmt: str, name: str, sweep: SweepResult, settings: pd.DataFrame
) -> None:
    """A sweep-only report: R^2 against sampling rate, coefficients with their knee and
    turning points, and the tile map of ``settings`` (parameter columns, metric last)."""
    from washout.analysis.compute import sweep_analysis

    _write(out, fmt, sweep_analysis(sweep, settings, name))


def _write(out: Path, fmt: str, analysis: Analysis, *sources: Path) -> None:
    """Render ``analysis`` as HTML or Markdown and write it (never over ``sources``), with
    a progress bar while figures are drawn."""
    from washout.report.render import Settings, renderer, write

    with _figure_progress() as progress:
        rendered = renderer(fmt)(analysis, Settings(stem=out.stem, progress=progress))
    write(rendered, out, *sources)


@contextmanager
def _figure_progress() -> Iterator[Callable[[int, int], None]]:
    """A progress bar with an ETA on stderr while the figures are drawn (rich hides it when
    stderr is not a terminal), redrawn as figures are done rather than by a thread of its
    own: figures are drawn in forked processes, and a fork copies the locks other threads
    hold (washout.analysis.parallel draws serially while another thread runs)."""
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
