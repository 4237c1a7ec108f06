"""washout run, validate, resume, status, export: running experiments and getting data out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from washout.cli.app import app
from washout.errors import ExitCode, StoreWriteError, WashoutError

if TYPE_CHECKING:
    from rich.console import Console

    from washout.data.store import Store
    from washout.harness.engine import Experiment, Outcome


def _console(quiet: bool = False, stderr: bool = True) -> Console:
    """Progress and notes go to stderr; results (the summary) to stdout, unwrapped."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160  # piped: wide enough for the analysis table
    # markup=False: paths, test names and error texts are data, never rich markup.
    return Console(
        stderr=stderr, quiet=quiet, highlight=False, soft_wrap=not stderr, width=width, markup=False
    )


def _execute(experiment: Experiment, store: Store, quiet: bool, allow_mismatch: bool) -> None:
    """Run with a progress bar (trials done/total, ETA) unless quiet; then summarize and
    exit with the :class:`~washout.errors.ExitCode` that says how it ended."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from washout.harness.engine import execute

    console = _console(quiet)
    total = experiment.plan.total_trials * experiment.spec.workers
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("trials"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )
    task = progress.add_task(experiment.spec.experiment.name, total=total)

    def on_stop(presses: int) -> None:
        if presses == 1:
            console.print(
                "Stopping after the current trial (Ctrl-C again to stop now)", style="yellow"
            )

    with progress:
        outcome = execute(
            experiment,
            store,
            allow_mismatch=allow_mismatch,
            progress=lambda worker, n: progress.advance(task, n),
            on_stop_request=on_stop,
            on_start=lambda done: progress.update(task, completed=done),
        )
    if outcome.store_error:  # the store refuses writes: nothing more can be said from it
        raise StoreWriteError(outcome.store_error)
    _summary(experiment, store, outcome, quiet)
    code = _exit_code(outcome, store)
    if code == ExitCode.TEST_ALWAYS_FAILED:
        _explain_failed_tests(experiment, store)
    if code != ExitCode.DONE:
        raise typer.Exit(code)


def _exit_code(outcome: Outcome, store: Store) -> ExitCode:
    """How a session ended, the most serious first."""
    if outcome.terminated:
        return ExitCode.TERMINATED
    if outcome.aborted:
        return ExitCode.ABORTED
    if outcome.stopped:
        return ExitCode.INTERRUPTED
    if outcome.worker_errors:
        return ExitCode.WORKER_FAILED
    if store.tests_without_success():
        return ExitCode.TEST_ALWAYS_FAILED
    return ExitCode.DONE


def _explain_failed_tests(experiment: Experiment, store: Store) -> None:
    """For each test whose every trial failed: its first failure's reason (its exit code,
    signal or timeout) and stderr tail, and where to look next (hyperfine, too, says how a
    failing command failed and how to see its output)."""
    from washout.harness.executors.base import tail

    commands = {t.name: t.command for t in experiment.tests}
    console = _console()
    for test, trials, status, reason, stderr in store.tests_without_success():
        console.print(
            f"Test {test!r}: all {trials} trial(s) {status}; the first: {reason}", style="red"
        )
        shown = tail(stderr.encode(), 600).strip() if stderr else ""
        console.print("  stderr (tail): " + (shown.replace("\n", "\n  ") if shown else "(empty)"))
        console.print(f"  Run it by hand to see its whole output: {commands.get(test, test)}")
    console.print(f"Every stored failure, with its reason: washout status {store.path}")


def _summary(experiment: Experiment, store: Store, outcome: Outcome, quiet: bool) -> None:
    """What ran, failures, where the data is, and the order analysis."""
    from washout.harness.status import progress_of

    state = progress_of(store)
    out = _console(stderr=False)
    out.print(f"Data: {store.path}")
    out.print(f"Seed: {outcome.seed}  (same spec and seed give the same schedule)")
    out.print(
        f"Trials: {state['done']} of {state['planned']} planned slots done "
        f"({outcome.executed} this session); failed {state['failed']}, "
        f"timed out {state['timeout']}, interrupted {state['interrupted']}"
    )
    for worker, error in outcome.worker_errors.items():
        out.print(f"Worker {worker} stopped: {error}", style="red")
    if outcome.stopped:
        out.print(f"Stopped: {outcome.stopped}", style="yellow")
    if not state["complete"]:
        out.print(f"Resume with: washout resume {store.path}")
        return
    if quiet:
        return
    from washout.report.terminal import render_analysis
    from washout.stats.order import analyze_order

    frame = store.long_frame()
    if frame["order"].nunique() < 2:
        return
    exp = experiment.spec.experiment
    out.print(render_analysis(analyze_order(frame, alpha=exp.alpha, correction=exp.correction)))
    from washout.stats.why import explain, render_words

    # why order matters: the first trial after the reset, carryover, drift, the spec's claims
    found = explain(
        frame,
        carryover=True,
        drift=True,
        claims=exp.claims,
        alpha=exp.alpha,
        correction=exp.correction,
    )
    out.print("\n".join(render_words(found)))


@app.command("run")
def run_command(
    args: list[str] = typer.Argument(
        ...,
        metavar="SPEC.toml | COMMAND...",
        help="A spec file, or commands to compare (quick form).",
    ),
    db: Path | None = typer.Option(
        None, "--db", help="Database path (default: ./washout-results/NAME.db)."
    ),
    runs: int | None = typer.Option(None, "--runs", min=1, help="Runs per order kind."),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Seed for the random orders."),
    reset: str | None = typer.Option(
        None, "--reset", help="Quick form: reset command before every run."
    ),
    setup: str | None = typer.Option(None, "--setup", help="Quick form: setup command, once."),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bar (for scripts and CI)."
    ),
    allow_mismatch: bool = typer.Option(
        False, "--allow-mismatch", help="Record provenance mismatches and proceed."
    ),
) -> None:
    """Run an experiment: N fixed-order and N random-order runs, a reset before each."""
    from washout.harness.engine import Experiment, new_store
    from washout.harness.spec import load_spec, spec_from_commands

    is_spec = len(args) == 1 and args[0].lower().endswith(".toml")  # spec.TOML too
    if is_spec and Path(args[0]).is_file():
        spec, text = load_spec(args[0])
        source = args[0]
        if reset or setup:
            raise WashoutError(
                "--reset and --setup go with the quick form; "
                f"put them in {source} as [reset] and [setup]"
            )
    else:
        if is_spec:
            raise WashoutError(f"{args[0]}: no such spec file")
        spec, text = spec_from_commands(args, runs=runs or 10, seed=seed, reset=reset, setup=setup)
        source = "command line"
    experiment = Experiment.prepare(spec, text, source, seed=seed, runs=runs)
    store = new_store(experiment, db)
    path = store.path
    console = _console(quiet)
    exp = experiment.spec.experiment
    console.print(
        f"washout: {len(experiment.tests)} tests x {exp.runs} runs per order kind "
        f"({', '.join(exp.orders)}; design {exp.design}) = "
        f"{experiment.plan.total_trials} trials per worker, seed "
        f"{experiment.plan.seed}, data in {path}"
    )
    try:
        _execute(experiment, store, quiet, allow_mismatch)
    finally:
        store.close()


@app.command("resume")
def resume_command(
    db: Path = typer.Argument(..., help="The database of an interrupted experiment."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    allow_mismatch: bool = typer.Option(
        False, "--allow-mismatch", help="Record provenance mismatches and proceed."
    ),
) -> None:
    """Continue an interrupted experiment (same spec and seed): complete runs are kept, a run
    cut short is re-run whole after a fresh reset."""
    from washout.data.store import Store
    from washout.harness.engine import Experiment
    from washout.harness.status import progress_of

    store = Store.open(db)
    try:
        store.lock()
        experiment = Experiment.from_store(store)
        if progress_of(store)["complete"]:
            typer.echo(f"{db}: complete; nothing to resume")
            return
        _execute(experiment, store, quiet, allow_mismatch)
    finally:
        store.close()


@app.command("validate")
def validate_command(spec_path: Path = typer.Argument(..., metavar="SPEC.toml")) -> None:
    """Load, expand and check a spec without running it."""
    from washout.harness.engine import Experiment
    from washout.harness.spec import load_spec

    spec, text = load_spec(spec_path)
    experiment = Experiment.prepare(spec, text, str(spec_path))
    exp = spec.experiment
    workers = spec.workers
    typer.echo(
        f"{spec_path}: valid. Experiment {exp.name!r}: {len(experiment.tests)} tests, "
        f"{exp.runs} runs per order kind ({', '.join(exp.orders)}), design {exp.design}, "
        f"{workers} worker(s): {experiment.plan.total_trials * workers} trials planned."
    )
    for test in experiment.tests:
        metrics = ", ".join(f"{n} ({m.better} is better)" for n, m in test.metrics.items())
        typer.echo(f"  {test.name}: {test.command}   [{metrics}]")


@app.command("status")
def status_command(db: Path = typer.Argument(..., help="An experiment database.")) -> None:
    """Progress of a running or stopped experiment (works while it runs)."""
    from washout.data.store import Store
    from washout.harness.status import describe

    store = Store.open(db, readonly=True)
    try:
        typer.echo(describe(store))
    finally:
        store.close()


@app.command("export")
def export_command(
    db: Path = typer.Argument(..., help="An experiment database."),
    fmt: str = typer.Option("csv", "--format", help="csv, json or parquet."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="File to write (default: stdout; parquet needs -o)."
    ),
    include_superseded: bool = typer.Option(
        False,
        "--include-superseded",
        help="Also the trials of interrupted runs' earlier attempts (status superseded).",
    ),
) -> None:
    """Write the long format: one row per trial and metric."""
    from washout.data.export import write_long
    from washout.data.outputs import check_output
    from washout.data.store import read_long

    if output is not None:
        check_output(output, db)
    write_long(read_long(db, include_superseded), fmt, output, sys.stdout)
