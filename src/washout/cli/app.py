"""The Typer application every command module registers with.

Kept free of heavy imports: ``washout --help`` must start in well under 0.3 s, so command
modules import pandas, scipy and friends inside their functions.
"""

from __future__ import annotations

import logging

import typer

from washout.version import __version__

app = typer.Typer(
    name="washout",
    help="Order-aware performance experiments: run fixed and random orders, "
    "tell whether order changed the results, and why.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # Help texts are read as Markdown, which leaves "[experiment]" as it is (rich markup took
    # it for a style tag and dropped it) and joins a docstring's lines into its paragraph
    # (rich markup kept them as line breaks in the list of commands).
    rich_markup_mode="markdown",
)


HEALTHY_ONLY_HELP = (
    "Set aside the trials a health measure flags (a thermal throttle, a page swapped, a "
    "new kernel log record, other processes' CPU time over a tenth of a CPU) before "
    "analysing; says how many and why."
)
"""``--healthy-only`` of ``analyze`` and ``report`` (washout.stats.health)."""
TIME_UNIT_HELP = (
    "Show the comparison's times in microsecond, millisecond or second (hyperfine's); "
    "default: each in its own unit."
)
"""``-u/--time-unit`` of ``run`` and ``analyze``."""
SORT_HELP = (
    "hyperfine's: auto (the summary's ratios by size, the tables in the tests' order), "
    "command (both in the tests' order) or mean-time (the tables by mean)."
)
"""``--sort`` of ``run`` and ``analyze``."""
LIST_JOIN = "\0"


def join_parameter_lists(argv: list[str]) -> list[str]:
    """hyperfine's ``-L NAME a,b,c`` takes two values and may be given several times, which
    a Typer option cannot declare (a tuple or a list, not a list of tuples): its two values
    travel as one token joined by NUL, a character no command-line argument can hold.
    Nothing after ``--`` is touched."""
    joined: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return joined + argv[i:]
        if token in ("-L", "--parameter-list") and i + 2 < len(argv):
            joined += [token, argv[i + 1] + LIST_JOIN + argv[i + 2]]
            i += 3
            continue
        joined.append(token)
        i += 1
    return joined


def _version(value: bool) -> None:
    if value:
        typer.echo(f"washout {__version__}")
        raise typer.Exit()


def log_to_stderr(verbosity: int) -> None:
    """Show washout's log (``logging.getLogger("washout")``) on stderr: -v what it does
    (sessions, runs, resets, re-runs), -vv every trial and command as well."""
    if verbosity <= 0:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("washout")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
    verbose: int = typer.Option(
        0,
        "--verbose",
        "-v",
        count=True,
        help="Log what washout does on stderr (-v: sessions, runs, resets; -vv: every trial).",
    ),
) -> None:
    """washout: avoid the ordering trap in systems performance measurement."""
    log_to_stderr(verbose)
