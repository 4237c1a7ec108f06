"""Writing the long format to CSV, JSON (records) or Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from washout.errors import WashoutError

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "json", "parquet")


def write_long(frame: pd.DataFrame, fmt: str, output: Path | None, stdout: IO[str]) -> None:
    """Write ``frame`` to ``output`` (or ``stdout`` for text formats)."""
    if fmt not in FORMATS:
        raise WashoutError(f"--format = {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if output is None:
            raise WashoutError("--format = 'parquet': needs -o FILE (binary output)")
        try:
            frame.to_parquet(output, index=False)
        except ImportError:
            raise WashoutError("--format = 'parquet': needs pyarrow (pip install pyarrow)") from None
        return
    if fmt == "csv":
        text = frame.to_csv(index=False)
    else:
        text = frame.to_json(orient="records", indent=None) + "\n"
    if output is None:
        stdout.write(text)
    else:
        output.write_text(text)
