"""washout bisect: find the commit that changed a metric, each step an order-aware experiment."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from washout.cli.app import app
from washout.errors import WashoutError

if TYPE_CHECKING:
    from collections.abc import Callable

    from washout.bisection.result import BisectResult

FORMATS = ("table", "json")


def parse_threshold(text: str) -> float:
    """``2%`` or ``0.02`` as the fraction 0.02; a one-line error otherwise."""
    value = text.strip()
    try:
        fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise WashoutError(f"--threshold = {text!r}: expected a percentage such as 2%") from None
    if not 0 < fraction < 1:
        raise WashoutError(f"--threshold = {text!r}: expected more than 0% and less than 100%")
    return fraction


def _say(quiet: bool) -> Callable[[str], None]:
    def say(message: str) -> None:
        if not quiet:
            print(f"washout: {message}", file=sys.stderr, flush=True)

    return say


def _finish(result: BisectResult, fmt: str, report: Path | None) -> None:
    """Print the result (text or JSON) and write the HTML report if asked."""
    if report is not None:
        from washout.data.outputs import write_output
        from washout.report.bisect import page

        write_output(report, page(result), option="--report")
    if fmt == "json":
        import json

        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        from washout.report.bisect import text

        typer.echo(text(result))


def continue_bisect(
    directory: Path,
    quiet: bool,
    allow_mismatch: bool,
    fmt: str = "table",
    report: Path | None = None,
) -> None:
    """Run a bisect to its end and print its result; a stopped look exits with its code."""
    from washout.bisection.driver import BisectStopped, advance

    try:
        result = advance(directory, _say(quiet), allow_mismatch)
    except BisectStopped as stopped:
        print(f"washout: {stopped}", file=sys.stderr)
        raise typer.Exit(stopped.exit_code) from None
    _finish(result, fmt, report)


@app.command("bisect")
def bisect_command(
    target: Path = typer.Argument(
        ...,
        metavar="SPEC.toml | DIR",
        help="The spec each step runs, or a bisect's directory (prints its result as it stands).",
    ),
    good: str | None = typer.Option(
        None, "--good", help="A commit where the metric is as it should be."
    ),
    bad: str | None = typer.Option(None, "--bad", help="A later commit where it changed."),
    repo: Path = typer.Option(Path("."), "--repo", help="The git repository (default: here)."),
    build: str | None = typer.Option(
        None, "--build", help="The shell command that builds a commit, run in its worktree."
    ),
    build_timeout: float | None = typer.Option(
        None, "--build-timeout", help="Seconds a build may take."
    ),
    directory: Path | None = typer.Option(
        None, "--dir", help="The bisect's directory (default: ./washout-results/NAME-bisect)."
    ),
    test: str | None = typer.Option(None, "--test", help="The test judged (default: the first)."),
    metric: str | None = typer.Option(None, "--metric", help="Its metric (default: its first)."),
    threshold: str | None = typer.Option(
        None,
        "--threshold",
        help="Equivalence margin, e.g. 2% (default: from each run's own change).",
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="The chance of any wrong decision, at most."),
    runs: int = typer.Option(10, "--runs", "-r", help="Runs per look (each build once per run)."),
    max_runs: int = typer.Option(60, "--max-runs", "-M", help="Most runs of one step."),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Seed for the random orders."),
    fmt: str = typer.Option("table", "--format", "-f", help="table or json."),
    report: Path | None = typer.Option(None, "--report", "-o", help="Also write an HTML report."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    allow_mismatch: bool = typer.Option(
        False, "--allow-mismatch", help="Record provenance mismatches and proceed."
    ),
) -> None:
    """Find the commit that changed a metric: each step runs the candidate between the good and
    bad builds in seeded random orders, and decides like good, like bad or unknown."""
    from washout.bisection.state import is_bisect_dir

    if fmt not in FORMATS:
        raise WashoutError(f"--format = {fmt!r}: unknown format (choose from {', '.join(FORMATS)})")
    if is_bisect_dir(target):
        from washout.bisection.driver import show

        _finish(show(target), fmt, report)
        return
    if good is None or bad is None:
        raise WashoutError(f"{target}: a new bisect needs --good REV and --bad REV")
    from washout.bisection.driver import Request, start

    root = start(
        Request(
            spec=target,
            good=good,
            bad=bad,
            repo=repo,
            build=build,
            build_timeout=build_timeout,
            directory=directory,
            test=test,
            metric=metric,
            threshold=None if threshold is None else parse_threshold(threshold),
            alpha=alpha,
            runs=runs,
            max_runs=max_runs,
            seed=seed,
        )
    )
    if not quiet:
        print(
            f"washout: bisect in {root} (continue it with 'washout resume {root}')", file=sys.stderr
        )
    continue_bisect(root, quiet, allow_mismatch, fmt, report)
