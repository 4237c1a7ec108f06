"""Writing the long format to CSV, JSON (records) or Parquet: each read back, value for
value, by :func:`washout.data.sources.load_trials` (``analyze``, ``report``, ``load``)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from washout.data.outputs import csv_text, write_output
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
    text = csv_text(frame) if fmt == "csv" else "".join(json_records(frame))
    if output is None:
        stdout.write(text)
    else:
        write_output(output, text, *sources)


def json_records(frame: pd.DataFrame) -> Iterator[str]:
    """``frame`` as a JSON array of records, one per line, missing values as ``null``.
    Floats are written as Python's ``repr`` (the shortest text that reads back to the same
    bits), where pandas' ``to_json`` keeps 10 significant digits."""
    columns = list(frame.columns)
    values = [frame[c].tolist() for c in columns]
    yield "["
    for i, row in enumerate(zip(*values, strict=True)):
        record = {
            c: None if v is None or (isinstance(v, float) and math.isnan(v)) else v
            for c, v in zip(columns, row, strict=True)
        }
        yield ("," if i else "") + "\n" + json.dumps(record, ensure_ascii=False)
    yield "\n]\n"
