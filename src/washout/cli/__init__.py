"""Command-line entry point: a thin layer over the library.

Each command lives in its own module and registers itself on :data:`washout.cli.app.app`.
Every :class:`~washout.errors.WashoutError` becomes one line on stderr and its exit code
(2 for bad input; :class:`~washout.errors.ExitCode` lists them all): no traceback reaches a
user for bad input.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import NoReturn

# Registration by import: one module per command family.
from washout.cli import (
    commands_analyze,  # noqa: F401,E402
    commands_bisect,  # noqa: F401,E402
    commands_check,  # noqa: F401,E402
    commands_plan,  # noqa: F401,E402
    commands_report,  # noqa: F401,E402
    commands_run,  # noqa: F401,E402
    commands_sweep,  # noqa: F401,E402
)
from washout.cli.app import app, join_parameter_lists
from washout.errors import WashoutError


def main() -> None:
    """Console-script entry: run the app, turning user errors into one line."""
    try:
        app(args=join_parameter_lists(sys.argv[1:]), standalone_mode=True)
    except WashoutError as err:  # it may quote a trial's output: escapes shown, not obeyed
        from washout.harness.printable import printable

        print(f"washout: error: {printable(str(err))}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:  # Ctrl-C before a command starts (in one, typer exits 130)
        print("washout: interrupted", file=sys.stderr)
        sys.exit(130)


def console() -> NoReturn:
    """The ``washout`` console script and ``python -m washout``: :func:`main`, then the
    process ends without the interpreter's teardown, as mypy's does (``hard_exit``).

    Freeing every object and module one by one is a measurable part of a large analysis
    (bench/RESULTS.md, "Analysis at paper scale") and changes nothing a command leaves
    behind: every command has closed its stores and files (``with``) and waited for its
    children by then; the local executor's launchers and group guard, which ``atexit``
    would end, are ended and reaped here, and logging's handlers and the standard streams
    flushed, with Ctrl-C ignored by then (the status is decided). A reader gone from stdout
    (``| head``) gets status 120, as from Python's own exit. :func:`main` itself still
    raises ``SystemExit`` (callers in a process of their own)."""
    code: int | str | None = 0
    try:
        main()
    except SystemExit as done:  # how click ends every command
        code = done.code
    if isinstance(code, str):  # SystemExit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    status = code or 0
    # The command has ended and its status stands: a late Ctrl-C (the second of two quick
    # presses) must not turn the reaping below into a KeyboardInterrupt and death by SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the local executor's processes, where it was imported (not for --help or analyze)
    local = sys.modules.get("washout.harness.executors.local")
    if local is not None:
        local.end_local_processes()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120
    os._exit(status)
