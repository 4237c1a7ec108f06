"""Where trials come from: a washout store, a long-format CSV, or an OrderSage results file.

:func:`load_trials` tells them apart by content, not by name: a SQLite database starts with
the 16-byte magic ``SQLite format 3\\0``; a CSV is a long-format file if its header has the
long-format columns and an OrderSage file if it has OrderSage's.
"""

from __future__ import annotations

import csv
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from washout.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd

SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class SourceInfo:
    """What :func:`load_trials` read: ``kind`` is store, long-csv or ordersage; for OrderSage
    files also the original test-column name (exp_command/test_command) and the layout
    generation (``exp`` older, ``test`` newer)."""

    path: Path
    kind: str
    test_column: str | None = None
    generation: str | None = None


def _header(path: Path) -> list[str]:
    """The column names of a CSV's first line."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            return [c.strip() for c in next(csv.reader(handle), [])]
    except UnicodeDecodeError:
        raise SourceError(f"{path}: not a washout store or a CSV text file") from None


def load_trials(
    path: Path | str, columns: Collection[str] | None = None
) -> tuple[pd.DataFrame, SourceInfo]:
    """The long-format trials of ``path`` and what kind of source it was.

    ``columns``: the long-format columns the caller needs; a long-format CSV then reads
    only those (and the ones it checks every row by), other sources give every column.
    """
    from washout.data.importers.longcsv import REQUIRED as LONG_REQUIRED
    from washout.data.importers.ordersage import is_ordersage

    path = Path(path)
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(SQLITE_MAGIC))
    except OSError as err:
        raise SourceError(f"{path}: cannot read: {err.strerror}") from None
    if magic == SQLITE_MAGIC:
        from washout.data.store import read_long

        return read_long(path), SourceInfo(path, "store")
    header = _header(path)
    if all(c in header for c in LONG_REQUIRED):
        from washout.data.importers.longcsv import read_long_csv

        return read_long_csv(path, columns), SourceInfo(path, "long-csv")
    if is_ordersage(header):
        from washout.data.importers.ordersage import read_ordersage

        frame, layout = read_ordersage(path)
        return frame, SourceInfo(path, "ordersage", layout.test_column, layout.generation)
    shown = ", ".join(header) if header else "(empty)"
    raise SourceError(
        f"{path}: columns = {shown[:200]}: neither a washout store, a long-format CSV "
        f"({', '.join(LONG_REQUIRED)}, ...) nor an OrderSage results file "
        "(exp_command or test_command, order_type, result, completion_status, ...)"
    )
