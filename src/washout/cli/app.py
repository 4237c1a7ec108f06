"""The Typer application every command module registers with.

Kept free of heavy imports: ``washout --help`` must start in well under 0.3 s, so command
modules import pandas, scipy and friends inside their functions.
"""

from __future__ import annotations

import typer

from washout import __version__

app = typer.Typer(
    name="washout",
    help="Order-aware performance experiments: run fixed and random orders, "
    "tell whether order changed the results, and why.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"washout {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """washout: avoid the ordering trap in systems performance measurement."""
