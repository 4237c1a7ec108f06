"""Command-line entry point: a thin layer over the library.

Each command lives in its own module and registers itself on :data:`washout.cli.app.app`.
Every :class:`~washout.errors.WashoutError` becomes one line on stderr and its exit code
(2 for bad input; :class:`~washout.errors.ExitCode` lists them all): no traceback reaches a
user for bad input.
"""

from __future__ import annotations

import sys

# Registration by import: one module per command family.
from washout.cli import (
    commands_analyze,  # noqa: F401,E402
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
    except WashoutError as err:
        print(f"washout: error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:  # Ctrl-C before an experiment's own handler is installed
        print("washout: interrupted", file=sys.stderr)
        sys.exit(130)
