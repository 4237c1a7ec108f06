"""Writing the long format to CSV, JSON (records) or Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from washout.errors import WashoutError

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "json", "parquet")


def write_long(frame: pd.DataFrame, fmt: str, output: Path | None, stdout: IO[str]) -> None:
    """Write ``frame`` to ``output`` (or ``stdout`` for text formats); a write the file
    system refuses (full, read-only) is a one-line error."""
    if fmt not in FORMATS:
        raise WashoutError(f"--format = {fmt!r}: expected one of {', '.join(FORMATS)}")
    try:
        _write(frame, fmt, output, stdout)
    except OSError as err:
        if output is None:  # stdout (a closed pipe): not a file washout was told to write
            raise
        raise WashoutError(f"-o = {str(output)!r}: cannot write: {err.strerror or err}") from None


def _write(frame: pd.DataFrame, fmt: str, output: Path | None, stdout: IO[str]) -> None:
    if fmt == "parquet":
        if output is None:
            raise WashoutError("--format = 'parquet': needs -o FILE (binary output)")
        try:
            frame.to_parquet(output, index=False)
        except ImportError:
            raise WashoutError(
                "--format = 'parquet': needs pyarrow (pip install pyarrow)"
            ) from None
        return
    if fmt == "csv":
        text = frame.to_csv(index=False)
    else:
        text = frame.to_json(orient="records", indent=None) + "\n"
    if output is None:
        stdout.write(text)
    else:
        output.write_text(text)
