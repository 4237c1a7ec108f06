"""Where ``report`` and ``export`` write: never over their input or any SQLite store."""

from __future__ import annotations

import os
from pathlib import Path

from washout.data.store import is_store
from washout.errors import WashoutError


def check_output(output: Path, *sources: Path) -> Path:
    """``output``, once it is known to be safe to write: not a directory, not one of
    ``sources``, not an SQLite database (a washout store is the experiment's only copy of
    its data); its missing parent directories are created."""
    if output.is_dir():
        raise WashoutError(f"-o = {str(output)!r}: a directory; give a file name inside it")
    for source in sources:
        if output.exists() and source.exists() and os.path.samefile(output, source):
            raise WashoutError(
                f"-o = {str(output)!r}: that is the input {str(source)!r}; "
                "washout never writes over its input"
            )
    if is_store(output):
        raise WashoutError(
            f"-o = {str(output)!r}: an SQLite database (a washout store?); "
            "washout never writes over one: choose another file"
        )
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WashoutError(
            f"-o = {str(output)!r}: cannot create its directory "
            f"{str(output.parent)!r}: {err.strerror}"
        ) from None
    return output
