"""Writing the long format to CSV, JSON (records) or Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from washout.data.outputs import write_output
from washout.errors import WashoutError

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "json", "parquet")


def write_long(
    frame: pd.DataFrame, fmt: str, output: Path | None, stdout: IO[str], *sources: Path
) -> None:
    """Write ``frame`` to ``output`` (:func:`~washout.data.outputs.write_output`: whole or
    not at all, never over a store or one of ``sources``), or to ``stdout`` for the text
    formats; a write the file system refuses (full, read-only) is a one-line error."""
    if fmt not in FORMATS:
        raise WashoutError(f"--format = {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if output is None:
            raise WashoutError("--format = 'parquet': needs -o FILE (binary output)")
        try:
            import pyarrow  # noqa: F401  (pandas' Parquet writer)
        except ImportError:
            raise WashoutError(
                "--format = 'parquet': needs pyarrow (pip install pyarrow)"
            ) from None
        write_output(output, lambda f: frame.to_parquet(f, index=False), *sources)
        return
    if fmt == "csv":
        text = frame.to_csv(index=False)
    else:
        text = frame.to_json(orient="records", indent=None) + "\n"
    if output is None:
        stdout.write(text)
    else:
        write_output(output, text, *sources)
