"""washout explore and washout sweep: evaluate a parameter space at a fraction of the cost."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from washout.cli.app import app

if TYPE_CHECKING:
    from washout.sweep.incremental import Step
    from washout.sweep.result import SweepResult

FORMATS = ("table", "json")


def _format(value: str) -> str:
    from washout.errors import WashoutError

    if value not in FORMATS:
        raise WashoutError(
            f"--format = {value!r}: unknown format (choose from {', '.join(FORMATS)})"
        )
    return value


def _print_summary(result: SweepResult, fmt: str) -> None:
    """JSON on stdout, or the sweep's conclusions as tables (washout.report.terminal)."""
    if fmt == "json":
        import json

        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    import sys

    from washout.analysis.compute import sweep_analysis
    from washout.report.render import Settings, renderer

    sys.stdout.write(renderer("table")(sweep_analysis(result), Settings()).text)


@app.command()
def explore(
    data: Path = typer.Argument(..., help="CSV with one row per measured setting."),
    metric: str = typer.Option(..., "--metric", help="Column holding the metric."),
    param: list[str] = typer.Option(
        None, "--param", help="Parameter column (repeat); default: every other column."
    ),
    method: str = typer.Option(
        "ours",
        "--method",
        help=(
            "ours (coverage sampler, smooth model, settled rule, predicted-space conclusions, "
            "sum coding, adaptive batches from 2%) or paper (Hui et al.: random, anova, paper "
            "rule, measured conclusions, treatment coding, 5% steps). The options below "
            "override single parts."
        ),
    ),
    sampler: str = typer.Option(
        None, "--sampler", help="random, balanced, stratified, dist-aware, coverage (ours)."
    ),
    model: str = typer.Option(None, "--model", help="anova, anova-main, mlp, smooth (ours)."),
    rule: str = typer.Option(
        None,
        "--rule",
        help=(
            "Termination: paper (all splits >= threshold); holdout (ours: also the latest "
            "batches, predicted before they were measured); settled (ours, the default: "
            "holdout, and no share of variance moved by more than 2 points or 5% since the "
            "previous batch); stable (ours: holdout, and conclusions unchanged since the "
            "previous batch)."
        ),
    ),
    conclude: str = typer.Option(
        None,
        "--conclude",
        help=(
            "Draw the ANOVA's conclusions from the measured settings (the paper) or the "
            "predicted full space (ours: measured values + the model's predictions)."
        ),
    ),
    coding: str = typer.Option(
        None,
        "--coding",
        help="The conclusions' ANOVA coding: sum (ours, label-invariant) or treatment (paper).",
    ),
    validation: str = typer.Option(
        None,
        "--validation",
        help=(
            "The validation splits: folds (ours: 5-fold, stratified on the value, repeated) "
            "or random (paper: random 80/20 splits)."
        ),
    ),
    seed: int = typer.Option(0, "--seed"),
    start: float = typer.Option(None, "--start", help="Fraction measured first."),
    step: float = typer.Option(None, "--step", help="Least fraction added per iteration."),
    growth: float = typer.Option(
        None, "--growth", help="Each batch adds at least (growth - 1) x what is measured."
    ),
    threshold: float = typer.Option(
        0.9, "--threshold", help="R^2 every validation split must reach."
    ),
    splits: int = typer.Option(10, "--splits", help="Validation splits (20% each) per iteration."),
    budget: int = typer.Option(None, "--budget", help="Most settings to measure."),
    full: bool = typer.Option(False, "--full", help="Analyse every row instead of sampling."),
    versus: Path = typer.Option(
        None,
        "--versus",
        help=(
            "A second system's CSV (same parameters): analysed the same way; ranges then "
            "cover both sides of every important point of either system."
        ),
    ),
    fmt: str = typer.Option("table", "--format", "-f", help="table or json."),
    report: Path = typer.Option(
        None, "--report", help="Also write a report (.html, or .md with PNG figures)."
    ),
) -> None:
    """Incremental sampling on an already measured space: reading a row measures a setting."""
    from washout.cli.extras import require_extra

    require_extra("sweep", "washout explore")
    if report is not None:
        require_extra("report", "washout explore --report")
    from threadpoolctl import threadpool_limits

    from washout.sweep.explore import explore as run_explore
    from washout.sweep.incremental import method_options
    from washout.sweep.space import load_space_csv

    fmt = _format(fmt)
    options = method_options(
        method,
        start=start,
        step=step,
        growth=growth,
        threshold=threshold,
        splits=splits,
        sampler=sampler,
        model=model,
        rule=rule,
        seed=seed,
        budget=budget,
        conclude=conclude,
        coding=coding,
        validation=validation,
    )
    options.check("explore")
    space = load_space_csv(data, metric, param or None)
    import time

    from rich.console import Console

    console = Console(stderr=True, highlight=False, markup=False)
    started = time.monotonic()

    def on_step(step: Step) -> None:
        """Progress on stderr: settings read so far, worst split R^2, time per iteration."""
        finite = [v for v in step.r2_splits if v == v]
        worst = f"{min(finite):.3f}" if finite else "n/a"
        console.print(
            f"{step.measured}/{len(space)} settings: worst split R^2 {worst} "
            f"({time.monotonic() - started:.1f} s)"
        )

    with threadpool_limits(1):  # small dense solves: one BLAS thread is fastest and fair to others
        result = run_explore(space, options, full=full, on_step=None if full else on_step)
        if versus is not None:
            from washout.sweep.conclusions import joint_ranges
            from washout.sweep.result import Versus

            other = load_space_csv(versus, metric, space.parameters)  # same parameter columns
            other_result = run_explore(other, options, full=full)
            result = result.with_fields(
                versus=Versus(
                    str(versus),
                    other_result.significant_terms,
                    other_result.important_points,
                    other_result.ranges,
                ),
                ranges=joint_ranges(
                    [result.important_points, other_result.important_points], [space, other]
                ),
            )
    _print_summary(result, fmt)
    if report is not None:
        from washout.cli.commands_report import write_sweep_report

        write_sweep_report(
            report, "md" if report.suffix == ".md" else "html", data.stem, result, space.frame()
        )


@app.command()
def sweep(
    spec: Path = typer.Argument(
        ..., help="Spec with a [sweep] table (and [experiment], [reset] ...)."
    ),
    directory: Path = typer.Option(
        None,
        "--dir",
        help=(
            "Where the batch stores go (default: washout-results/NAME-sweep); run again to resume."
        ),
    ),
    seed: int = typer.Option(None, "--seed", help="Override [experiment].seed."),
    method: str = typer.Option(
        None,
        "--method",
        help=(
            "Override [sweep].method: ours or paper, as for washout explore (the options "
            "the [sweep] table sets still override single parts)."
        ),
    ),
    fmt: str = typer.Option("table", "--format", "-f", help="table or json."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress."),
) -> None:
    """Evaluate a parameter space incrementally: run sampled settings (randomized order, resets),
    fit, validate, add settings until the model predicts well or the budget is spent."""
    from washout.cli.extras import require_extra

    require_extra("sweep", "washout sweep")
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )
    from threadpoolctl import threadpool_limits

    from washout.sweep.runner import run_sweep

    fmt = _format(fmt)
    console = Console(stderr=True, quiet=quiet, highlight=False, markup=False)
    bar = Progress(
        TextColumn("batch trials"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=True,
    )
    task = bar.add_task("trials", total=None)

    def progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    def notify(message: str) -> None:
        bar.reset(task, total=None)
        console.print(message)

    with bar, threadpool_limits(1):
        result = run_sweep(spec, directory, seed, notify=notify, progress=progress, method=method)
    console.print(f"Data: {result.directory} (settings.csv, sweep.json, batch-*.db)")
    _print_summary(result, fmt)
