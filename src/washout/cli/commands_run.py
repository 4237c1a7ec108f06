"""washout run, validate, resume, status, export: running experiments and getting data out."""

from __future__ import annotations

import gc
import math
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from washout.cli.app import LIST_JOIN, SORT_HELP, TIME_UNIT_HELP, app
from washout.errors import ExitCode, StoreWriteError, WashoutError

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterable
    from types import FrameType

    from rich.console import Console, RenderableType

    from washout.data.store import Store
    from washout.data.store.writer import StoreWriter
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


STYLES: dict[str, tuple[bool, bool | None, bool]] = {
    "auto": (True, None, True),
    "full": (True, None, True),
    "basic": (False, False, True),
    "nocolor": (True, False, True),
    "color": (False, True, True),
    "none": (False, False, False),
}
"""hyperfine's ``--style`` values: (progress bar shown, results in colour (None: on a
terminal), results shown). ``full`` is ``auto`` here: washout draws its progress on a
terminal only. ``none``: no output but errors and the resume hint; exports are written."""


def _execute(
    experiment: Experiment,
    store: StoreWriter,
    quiet: bool,
    allow_mismatch: bool,
    *,
    ignore_failure: bool = False,
    exports: dict[str, Path] | None = None,
    show_output: bool = False,
    time_unit: tuple[str, float] | None = None,
    style: str = "auto",
    sort: str = "auto",
) -> None:
    """Run with a progress bar (trials done/total, ETA) unless quiet; then summarize, write
    the ``exports`` (format: path) and exit with the :class:`~washout.errors.ExitCode` that
    says how it ended; ``ignore_failure`` (hyperfine's ``-i``) makes a test whose every
    trial failed a warning, not an exit status; ``time_unit``: the summary's and the
    Markdown export's times in it (hyperfine's ``--time-unit``); ``style``: hyperfine's
    ``--style`` (:data:`STYLES`); ``sort``: hyperfine's ``--sort``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from washout.harness.engine import execute
    from washout.harness.status import exit_code

    progress_shown, color, results = STYLES[style]
    quiet = quiet or not progress_shown
    console = _console(quiet)
    total = experiment.planned_trials
    per_test = total // max(len(experiment.tests), 1)
    live = None if quiet or not sys.stderr.isatty() else _LiveMedians(store, per_test)

    class LiveProgress(Progress):
        """The progress bar, and under it the live medians (on a terminal only)."""

        def get_renderables(self) -> Iterable[RenderableType]:
            yield from super().get_renderables()
            if live is not None and live.table is not None:
                yield live.table

    progress = LiveProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("trials"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=True,  # the results take its place
    )
    task = progress.add_task(experiment.spec.experiment.name, total=total)

    asked_to_stop = False

    def on_stop(presses: int) -> None:
        nonlocal asked_to_stop
        asked_to_stop = True
        if presses == 1:
            console.print(
                "Stopping after the current trial (Ctrl-C again to stop now)", style="yellow"
            )

    def advance(worker: str, n: int) -> None:
        progress.advance(task, n)
        if live is not None:
            live.update()

    # Everything made so far (the imports' objects most of all) is left out of the full
    # collections the run's garbage sets off: one scanned them all for ~40 ms, every few
    # thousand trials of the quick form (bench/RESULTS.md, "Engine overhead per trial").
    gc.freeze()
    with _presses_after_a_stop_ignored(lambda: asked_to_stop):
        with progress:
            outcome = execute(
                experiment,
                store,
                allow_mismatch=allow_mismatch,
                progress=advance,
                on_stop_request=on_stop,
                on_start=lambda done: progress.update(task, completed=done),
            )
            if live is not None and not outcome.store_error:
                live.update(final=True)  # the final counts, before the results replace it
                progress.refresh()
        if outcome.store_error:  # the store refuses writes: nothing more can be said from it
            raise StoreWriteError(outcome.store_error)
        if show_output:
            _show_output(store)
        complete = _what_ran(experiment, store, outcome, results)
    if complete:
        _analysis(experiment, store, exports or {}, time_unit, color, results, sort)
    code = exit_code(outcome, store)
    if code == ExitCode.TEST_ALWAYS_FAILED:
        _explain_failed_tests(experiment, store, ignore_failure)
        if ignore_failure:
            code = ExitCode.DONE
    if code != ExitCode.DONE:
        raise typer.Exit(code)


class _LiveMedians:
    """Per-test medians so far, read from the store as trials finish (the engine's progress
    hook runs between trials, so reading never overlaps a trial of this worker): at most
    once a second, and a finish that comes sooner is shown once the second is up. Reading
    a large store takes longer; then it is read less often, so that it never takes more
    than a tenth of the time. :meth:`update` with ``final`` reads the final counts."""

    def __init__(self, store: Store, planned: int | None) -> None:
        self.store = store
        self.planned = planned
        self.table: RenderableType | None = None
        self.read_at = -math.inf
        self.cost = 0.0
        self.pending: asyncio.TimerHandle | None = None

    def update(self, final: bool = False) -> None:
        import time

        from washout.report.terminal import medians_table

        now = time.monotonic()
        due = self.read_at + max(1.0, 10 * self.cost)
        if not final and now < due:
            self._later(due - now)
            return
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None
        table = medians_table(self.store.long_frame(columns=_LIVE_COLUMNS), self.planned)
        if table is not None:
            self.table = table
        first = self.read_at == -math.inf  # its time is mostly pandas' import
        self.read_at = time.monotonic()
        self.cost = 0.0 if first else self.read_at - now

    def _later(self, delay: float) -> None:
        """Read once ``delay`` is up, unless another trial's finish reads before."""
        import asyncio

        if self.pending is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self.pending = loop.call_later(delay, self._due)

    def _due(self) -> None:
        self.pending = None
        self.update()


_LIVE_COLUMNS = ("test", "metric", "value", "status")


def _show_output(store: Store) -> None:
    """hyperfine's ``--show-output``, after the fact: the stored output tails of each test's
    last trial (washout keeps a trial's output to read its metrics), escapes shown."""
    from washout.harness.printable import printable

    console = _console()
    for test, status, stdout, stderr in store.last_outputs():
        console.print(f"Output of {test!r} (its last trial, {status}):", style="bold")
        for stream, text in (("stdout", stdout), ("stderr", stderr)):
            shown = printable((text or "").rstrip("\n"))
            console.print(f"  {stream}: " + (shown.replace("\n", "\n  ") if shown else "(empty)"))


def _explain_failed_tests(experiment: Experiment, store: Store, ignored: bool) -> None:
    """For each test whose every trial failed: its first failure's reason (its exit code,
    signal or timeout) and stderr tail, and where to look next (hyperfine, too, says how a
    failing command failed and how to see its output); the trial's text with its control
    characters escaped (:func:`~washout.harness.printable.printable`)."""
    from washout.harness.executors.base import tail
    from washout.harness.printable import printable

    commands = {t.name: t.command for t in experiment.tests}
    console = _console()
    for test, trials, status, reason, stderr in store.tests_without_success():
        console.print(
            f"Test {test!r}: all {trials} trial(s) {status}; the first: {printable(reason)}",
            style="red",
        )
        shown = printable(tail(stderr.encode(), 600).strip()) if stderr else ""
        console.print("  stderr (tail): " + (shown.replace("\n", "\n  ") if shown else "(empty)"))
        console.print(f"  Run it by hand to see its whole output: {commands.get(test, test)}")
    console.print(f"Every stored failure, with its reason: washout status {store.path}")
    if not ignored:
        console.print("Use the '-i'/'--ignore-failure' option to make this exit with status 0.")


@contextmanager
def _presses_after_a_stop_ignored(asked_to_stop: Callable[[], bool]) -> Iterator[None]:
    """Ctrl-C once the user has asked to stop is ignored until what ran is printed (with its
    'Resume with' line): the second of two quick presses may arrive after the engine had
    already stopped at the first and put its handler away, and would cut that short. Before
    any request Ctrl-C interrupts as usual; while the engine runs, the engine handles it.
    Outside the main thread (where no handler can be set) nothing changes."""
    previous = signal.getsignal(signal.SIGINT)

    def on_press(signum: int, frame: FrameType | None) -> None:
        if not asked_to_stop():
            raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, on_press)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _what_ran(experiment: Experiment, store: Store, outcome: Outcome, shown: bool = True) -> bool:
    """What ran, failures, where the data is, and how to resume if it is not complete;
    whether it is. Not ``shown`` (``--style none``): nothing, unless it is not complete."""
    from washout.harness.status import progress_of

    state = progress_of(store, experiment)
    out = _console(quiet=not shown and state.complete, stderr=False)
    for note in outcome.notes:
        out.print(f"Note: {note}", style="yellow")
    out.print(f"Data: {store.path}")
    out.print(f"Seed: {outcome.seed}  (same spec and seed give the same schedule)")
    out.print(
        f"Trials: {state.done} of {state.planned} planned slots done "
        f"({outcome.executed} this session); failed {state.failed}, "
        f"timed out {state.timeout}, interrupted {state.interrupted}"
    )
    from washout.harness.printable import printable

    for worker, error in outcome.worker_errors.items():
        out.print(f"Worker {worker} stopped: {printable(error)}", style="red")
    if outcome.stopped:
        out.print(f"Stopped: {outcome.stopped}", style="yellow")
    if not state.complete:
        out.print(f"Resume with: washout resume {store.path}")
    return state.complete


def _analysis(
    experiment: Experiment,
    store: Store,
    exports: dict[str, Path],
    time_unit: tuple[str, float] | None = None,
    color: bool | None = None,
    shown: bool = True,
    sort: str = "auto",
) -> None:
    """The analysis of a complete experiment (:func:`washout.analysis.compute.analyze` at
    the spec's alpha and correction, with everything the trials support, as ``washout
    analyze`` prints it): the order analysis and why, then hyperfine's comparison (written
    to the ``exports`` too), in hyperfine's ``--sort`` order."""
    from washout.analysis.compute import Context, analyze
    from washout.analysis.result import Options
    from washout.report.hyperfine import in_order
    from washout.report.render import Settings, renderer

    exp = experiment.spec.experiment
    options = Options(
        alpha=exp.alpha, correction=exp.correction, carryover=None, drift=None, compare=True
    )
    frame = store.long_frame(resources=True)
    analysis = analyze(frame, options, context=Context.of_experiment(experiment))
    if shown:  # (--style none: the exports only)
        tty = sys.stdout.isatty()
        width = _console(stderr=False).width if tty else None
        color = tty if color is None else color
        settings = Settings(width=width, color=color, time_unit=time_unit)
        sys.stdout.write(renderer("table")(in_order(analysis, sort), settings).text)
        sys.stdout.flush()  # before an export to stdout ('-'), which follows it as hyperfine's
    if exports and analysis.comparison is not None:
        from washout.report.hyperfine import write_exports

        tests = experiment.tests
        write_exports(
            analysis.comparison,
            {t.name: t.command for t in tests},
            {t.name: t.params for t in tests},
            exports,
            time_unit,
            sort,
        )


@app.command("run")
def run_command(
    args: list[str] = typer.Argument(
        ...,
        metavar="SPEC.toml | COMMAND...",
        help="A spec file, or commands to compare (quick form).",
    ),
    db_name: str | None = typer.Option(
        None, "--db", help="Database path (default: ./washout-results/NAME.db)."
    ),
    runs: int | None = typer.Option(
        None,
        "--runs",
        "-r",
        min=1,
        help="Quick form: runs of each command in total, split evenly across the order kinds "
        "(default 20). With a spec: runs per order kind, as its [experiment] runs.",
    ),
    min_runs: int | None = typer.Option(
        None,
        "--min-runs",
        "-m",
        min=2,
        help="Quick form, without --runs: runs of each command in total from hyperfine's "
        "3-second budget (timed once before the experiment), at least this many (default 10).",
    ),
    max_runs: int | None = typer.Option(
        None,
        "--max-runs",
        "-M",
        min=2,
        help="Quick form, without --runs: at most this many runs of each command in total.",
    ),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Seed for the random orders."),
    warmup: int = typer.Option(
        0,
        "--warmup",
        "-w",
        min=0,
        max=10_000,
        help="Quick form: run each command N times first, stored as warmup, out of the analysis.",
    ),
    prepare: list[str] = typer.Option(
        [],
        "--prepare",
        "-p",
        help="Quick form: command run before every trial, outside its timing; given once per "
        "command, each before its own command's trials (hyperfine's).",
    ),
    conclude: list[str] = typer.Option(
        [],
        "--conclude",
        "-C",
        help="Quick form: command run after every trial, outside its timing (to stop what "
        "--prepare started); once, or once per command (hyperfine's).",
    ),
    reset: str | None = typer.Option(
        None, "--reset", help="Quick form: reset command before every run."
    ),
    setup: str | None = typer.Option(
        None, "--setup", "-s", help="Quick form: setup command, once."
    ),
    cleanup: str | None = typer.Option(
        None, "--cleanup", "-c", help="Quick form: cleanup command, once after the last run."
    ),
    no_shell: bool = typer.Option(
        False,
        "-N",
        help="Quick form: hyperfine's --shell=none, every command started without a shell "
        "(washout starts plain words so anyway; a command needing a shell is refused).",
    ),
    shell: str | None = typer.Option(
        None,
        "--shell",
        "-S",
        help="Quick form: hyperfine's --shell; only 'none' (as -N) and 'default' (washout's "
        "own way: plain words without a shell, shell syntax with /bin/sh -c).",
    ),
    sort: str = typer.Option("auto", "--sort", help=SORT_HELP),
    time_unit: str | None = typer.Option(
        None,
        "--time-unit",
        "-u",
        help=TIME_UNIT_HELP,
    ),
    style: str = typer.Option(
        "auto",
        "--style",
        help="hyperfine's: basic (no progress bar, no colours), nocolor, color (no progress "
        "bar), none (no output but errors; exports are written), auto or full.",
    ),
    parameter_scan: tuple[str, float, float] | None = typer.Option(
        None,
        "--parameter-scan",
        "-P",
        metavar="NAME MIN MAX",
        help="Quick form: one test per value of {NAME} from MIN to MAX (step -D, default 1).",
    ),
    parameter_step: float | None = typer.Option(
        None, "--parameter-step-size", "-D", help="The step of -P (default 1)."
    ),
    parameter_list: list[str] = typer.Option(
        [],
        "--parameter-list",
        "-L",
        metavar="NAME a,b,c",
        help="Quick form: one test per value of {NAME}; repeatable, and with -P: every "
        "combination.",
    ),
    command_name: list[str] = typer.Option(
        [],
        "--command-name",
        "-n",
        help="Quick form: the name of each command's test, in order (repeatable).",
    ),
    export_json: Path | None = typer.Option(
        None, "--export-json", help="Write the summary as hyperfine's JSON."
    ),
    export_markdown: Path | None = typer.Option(
        None, "--export-markdown", help="Write the summary as hyperfine's Markdown table."
    ),
    export_csv: Path | None = typer.Option(
        None, "--export-csv", help="Write the summary as hyperfine's CSV."
    ),
    export_asciidoc: Path | None = typer.Option(
        None, "--export-asciidoc", help="Write the summary as hyperfine's AsciiDoc table."
    ),
    export_orgmode: Path | None = typer.Option(
        None, "--export-orgmode", help="Write the summary as hyperfine's Org table."
    ),
    show_output: bool = typer.Option(
        False,
        "--show-output",
        help="Print each command's output (the kept tails of stdout and stderr of its last "
        "trial) after the run.",
    ),
    output: list[str] = typer.Option(
        [],
        "--output",
        help="Quick form: where each command's stdout goes (hyperfine's): null (the "
        "default), pipe (read, its tail kept), inherit (this terminal) or a file's path, "
        "made anew for each trial; once, or once per command.",
    ),
    reference: str | None = typer.Option(
        None,
        "--reference",
        help="Quick form: the command every ratio of the summary is to (hyperfine's), run "
        "as a test of its own first unless it is one of the commands; default: the fastest.",
    ),
    reference_name: str | None = typer.Option(
        None, "--reference-name", help="Quick form: the --reference command's test name."
    ),
    input_from: str | None = typer.Option(
        None,
        "--input",
        help="Quick form: a file every command reads as its stdin, from its start in every "
        "trial (hyperfine's; default null: /dev/null).",
    ),
    ignore_failure: bool = typer.Option(
        False,
        "--ignore-failure",
        "-i",
        help="Exit 0 even if every trial of a test failed (they stay recorded as failed).",
    ),
    context: str | None = typer.Option(
        None,
        "--context",
        metavar="env,cwd,aslr",
        help="Randomize per trial, seeded, as [experiment] context: the environment's size "
        "(a padding of 0-4095 bytes, as hyperfine pads), the working directory's path "
        "length, ASLR on/off (setarch -R). Stored with every trial.",
    ),
    context_levels: int | None = typer.Option(
        None,
        "--context-levels",
        help="Context levels each test's trials take in turn (default: as [experiment] "
        "context_levels).",
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bar (results are still printed)."
    ),
    allow_mismatch: bool = typer.Option(
        False, "--allow-mismatch", help="Record provenance mismatches and proceed."
    ),
) -> None:
    """Run an experiment: N fixed-order and N random-order runs, a reset before each."""
    from washout.harness.engine import Experiment, new_store
    from washout.harness.quick import check_no_shell, parameter_grid, quick_runs
    from washout.harness.spec import expand_tests, load_spec, spec_from_commands

    is_spec = len(args) == 1 and args[0].lower().endswith(".toml")  # spec.TOML too
    if db_name == "":  # a Path option would take it for "." (a directory)
        raise WashoutError("--db = '': empty; give the store's file name (default: NAME.db)")
    db = None if db_name is None else Path(db_name)
    from washout.analysis.units import named_time_unit
    from washout.harness.spec import context_choice

    chosen_context = context_choice(context, context_levels, ("--context", "--context-levels"))
    unit = None if time_unit is None else named_time_unit(time_unit)
    if style not in STYLES:
        raise WashoutError(f"--style = {style!r}: expected {', '.join(STYLES)} (hyperfine's)")
    from washout.report.hyperfine import check_sort

    check_sort(sort)
    if output and show_output:
        raise WashoutError(
            "--output and --show-output: give one (hyperfine's --show-output is --output "
            "inherit; washout's prints the kept tails after the run, from --output pipe)"
        )
    if "inherit" in output and style == "auto":  # the commands' output and a bar don't mix
        style = "basic"  # (hyperfine's auto style, likewise)
    exports = _exports(
        db,
        export_json=export_json,
        export_markdown=export_markdown,
        export_csv=export_csv,
        export_asciidoc=export_asciidoc,
        export_orgmode=export_orgmode,
    )
    if is_spec and Path(args[0]).is_file():
        spec, text = load_spec(args[0])
        source = args[0]
        quick_only = {
            "--reset": reset,
            "--setup": setup,
            "--cleanup": cleanup,
            "-N": no_shell,
            "--shell": shell,
            "--prepare": prepare,
            "--conclude": conclude,
            "--warmup": warmup,
            "--parameter-scan": parameter_scan,
            "--parameter-list": parameter_list,
            "--command-name": command_name,
            "--min-runs": min_runs,
            "--max-runs": max_runs,
            "--output": output,
            "--input": input_from,
            "--reference": reference,
            "--reference-name": reference_name,
        }
        given = [name for name, value in quick_only.items() if value]
        if given:
            raise WashoutError(
                f"{', '.join(given)} go(es) with the quick form; put them in {source} "
                "([reset], [setup], [teardown], [prepare], [conclude], [experiment] warmup, "
                "[[test]] name, params, output and input, [experiment] reference)"
            )
    else:
        if is_spec:
            raise WashoutError(f"{args[0]}: no such spec file")
        params = parameter_grid(parameter_scan, parameter_step, split_lists(parameter_list))
        spec, text = spec_from_commands(
            args,
            runs=10,
            seed=seed,
            reset=reset,
            setup=setup,
            cleanup=cleanup,
            warmup=warmup,
            prepare=prepare,
            conclude=conclude,
            input=input_from,
            reference=reference,
            reference_name=reference_name,
            names=command_name or None,
            params=params,
            context=chosen_context,
            output=output or ("pipe" if show_output else None),
        )
        source = "command line"
        if no_shell or (shell is not None and shell != "default"):  # before any command runs
            check_no_shell(expand_tests(spec, source), shell or "none")
        runs = quick_runs(spec, runs, min_runs, max_runs)
    experiment = Experiment.prepare(
        spec, text, source, seed=seed, runs=runs, context=chosen_context
    )
    _warn_of_removed_files(experiment, source)
    store = new_store(experiment, db)
    path = store.path
    console = _console(quiet or not STYLES[style][0])
    exp = experiment.spec.experiment
    console.print(
        f"washout: {len(experiment.tests)} tests x {exp.runs} runs per order kind "
        f"({', '.join(exp.orders)}; design {exp.design}) = "
        f"{experiment.plan.total_trials} trials per worker, seed "
        f"{experiment.plan.seed}, data in {path}"
    )
    try:
        _execute(
            experiment,
            store,
            quiet,
            allow_mismatch,
            ignore_failure=ignore_failure,
            exports=exports,
            show_output=show_output,
            time_unit=unit,
            style=style,
            sort=sort,
        )
    finally:
        store.close()


def split_lists(values: list[str]) -> list[tuple[str, str]]:
    """The ``-L NAME a,b,c`` options as (name, values) pairs (see ``join_parameter_lists``)."""
    pairs = []
    for value in values:
        name, joined, text = value.partition(LIST_JOIN)
        if not joined:
            raise WashoutError(
                f"--parameter-list {value}: expected a name and its values, as -L NAME a,b,c"
            )
        pairs.append((name, text))
    return pairs


def _exports(store: Path | None, **paths: Path | None) -> dict[str, Path]:
    """``--export-FORMAT PATH`` as {format: path} (``-``: stdout, as hyperfine's), each
    checked before anything runs
    (:func:`~washout.data.outputs.check_output`: an export never costs the run its summary,
    nor writes over any file of the ``store`` the run writes)."""
    from washout.data.outputs import check_output

    chosen = {}
    for option, path in paths.items():
        if path is None:
            continue
        if str(path) == "-":  # hyperfine's: to stdout
            path = Path("/dev/stdout")
        fmt = option.removeprefix("export_")
        chosen[fmt] = check_output(
            path, *([] if store is None else [store]), option=f"--export-{fmt}"
        )
    return chosen


@app.command("resume")
def resume_command(
    db: Path = typer.Argument(
        ..., help="The database of an interrupted experiment, or a bisect's directory."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    allow_mismatch: bool = typer.Option(
        False, "--allow-mismatch", help="Record provenance mismatches and proceed."
    ),
) -> None:
    """Continue an interrupted experiment (same spec and seed): complete runs are kept, a run
    cut short is re-run whole after a fresh reset."""
    from washout.bisection.state import is_bisect_dir
    from washout.harness.engine import Experiment, reopen_store
    from washout.harness.status import progress_of

    if is_bisect_dir(db):  # a bisect's directory: its steps resume one after another
        from washout.cli.commands_bisect import continue_bisect

        continue_bisect(db, quiet, allow_mismatch)
        return
    store = reopen_store(db)
    try:
        experiment = Experiment.from_store(store, to_run=True)
        if progress_of(store).complete:
            typer.echo(f"{db}: complete; nothing to resume")
            return
        _execute(experiment, store, quiet, allow_mismatch)
    finally:
        store.close()


@app.command("validate")
def validate_command(spec_path: Path = typer.Argument(..., metavar="SPEC.toml")) -> None:
    """Load, expand and check a spec (a sweep spec too) without running it."""
    from washout.harness.engine import Experiment
    from washout.harness.spec import load_spec
    from washout.sweep.spec import validate_sweep

    sweep = validate_sweep(spec_path)
    if sweep is not None:
        return typer.echo(sweep)
    spec, text = load_spec(spec_path)
    experiment = Experiment.prepare(spec, text, str(spec_path))
    exp = spec.experiment
    typer.echo(
        f"{spec_path}: valid. Experiment {exp.name!r}: {len(experiment.tests)} tests, "
        f"{exp.runs} runs per order kind ({', '.join(exp.orders)}), design {exp.design}, "
        f"{spec.schedules} worker(s): {experiment.planned_trials} trials planned."
    )
    if exp.context:
        levels = "; ".join(
            ", ".join(f"{k} {v}" for k, v in level.to_dict().items() if v is not None)
            for level in experiment.plan.levels
        )
        typer.echo(
            f"  context ({', '.join(exp.context)}), {len(experiment.plan.levels)} levels: {levels}"
        )
    for test in experiment.tests:
        metrics = ", ".join(f"{n} ({m.better} is better)" for n, m in test.metrics.items())
        typer.echo(f"  {test.name}: {test.command}   [{metrics}]")
    _warn_of_removed_files(experiment, str(spec_path))


def _warn_of_removed_files(experiment: Experiment, source: str) -> None:
    """One line on stderr per ``file`` metric that would remove an existing file outside
    its test's working directory before every trial."""
    from washout.harness.measure import files_removed_outside

    for warning in files_removed_outside(experiment.spec, experiment.tests):
        typer.echo(f"{source}: warning: {warning}", err=True)


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
    fmt: str = typer.Option("csv", "--format", "-f", help="csv, json or parquet."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="File to write (default: stdout; parquet needs -o)."
    ),
    include_superseded: bool = typer.Option(
        False,
        "--include-superseded",
        help="Also the trials of interrupted runs' earlier attempts (status superseded).",
    ),
) -> None:
    """Write the long format: one row per trial and metric (every metric recorded, the
    trial's CPU time and peak memory included)."""
    from washout.data.export import write_long
    from washout.data.outputs import check_output
    from washout.data.store import read_long

    if output is not None:
        check_output(output, db)
    frame = read_long(db, include_superseded, resources=True)
    write_long(frame, fmt, output, sys.stdout, db)
