"""Read back what ``washout export`` writes as JSON records or Parquet, into the frame a
long-format CSV gives (:mod:`washout.data.importers.longcsv`), with the same checks: an
unknown order or status, a value that is not a finite number, a second ``ok`` row for one
trial and metric are one-line errors naming the file, row, field and value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from washout.data.importers.longcsv import (
    REQUIRED,
    TRIAL_KEY,
    categorize_labels,
    check_choice,
    check_one_ok_row_per_trial,
    numeric_column,
)
from washout.data.longformat import (
    COLUMNS,
    CONTEXT_COLUMNS,
    LABELS,
    ORDER_KINDS,
    STATUSES,
    typed_context,
)
from washout.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd

PARQUET_MAGIC = b"PAR1"
"""The first (and last) four bytes of a Parquet file (Apache Parquet, "File format")."""


def exported_format(head: bytes) -> str | None:
    """``parquet`` or ``json`` for a file starting with ``head`` as an export of that
    format does (a JSON export is an array of records: ``[`` then ``{`` or ``]``, so an
    AsciiDoc table's ``[cols=...]`` is not one), else None."""
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"[") and text[1:].lstrip(b" \t\r\n")[:1] in (b"{", b"]", b""):
        return "json"
    return None


def read_long_export(path: Path, fmt: str) -> tuple[pd.DataFrame, Callable[[], None]]:
    """The long-format trials of a JSON or Parquet export, and the check of their order,
    status and one ``ok`` row per trial and metric (as
    :func:`~washout.data.importers.longcsv.read_long_csv` gives it)."""
    import numpy as np
    import pandas as pd

    frame = _parquet(path) if fmt == "parquet" else _records(path)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise SourceError(f"{path}: column(s) {', '.join(missing)} missing from the long format")
    frame["value"] = numeric_column(frame, "value", path, allow_empty=True)
    for column in ("run", "position"):
        if column in frame.columns:
            numbers = numeric_column(frame, column, path)
            if not np.array_equal(numbers, np.round(numbers)):
                i = int(np.flatnonzero(numbers.to_numpy() != np.round(numbers.to_numpy()))[0])
                raise SourceError.at(
                    f"{path}: row {i + 1}", column, frame[column].iloc[i], "expected a whole number"
                )
            frame[column] = numbers.astype(np.int64)
    for column in ("started", "ended"):
        if column in frame.columns:
            stamps = frame[column].astype(object)
            frame[column] = stamps.where(stamps.notna(), np.nan)
    categorize_labels(frame, [c for c in LABELS if c in frame.columns])
    if "worker" not in frame.columns:
        frame["worker"] = pd.Categorical(["local"] * len(frame))
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = pd.NA
    checked = frame[[c for c in ("order", "status", *TRIAL_KEY) if c in frame.columns]]

    def check() -> None:
        check_choice(checked, "order", ORDER_KINDS, path)
        check_choice(checked, "status", STATUSES, path)
        check_one_ok_row_per_trial(checked, path)

    typed_context(frame, lambda i: f"{path}: row {i + 1}")
    context = [c for c in CONTEXT_COLUMNS if c in frame.columns]
    return frame[[*COLUMNS, *context]].reset_index(drop=True), check


def _parquet(path: Path) -> pd.DataFrame:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except ImportError:
        raise SourceError(
            f"{path}: a Parquet file: reading it needs pyarrow (pip install pyarrow)"
        ) from None
    except Exception as err:  # noqa: BLE001 (pyarrow's errors: any means "not readable")
        raise SourceError(f"{path}: cannot read as Parquet: {str(err)[:200]}") from None
    for column in LABELS:  # the names as written, not the categories Parquet kept
        if column in frame.columns and isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(object)
    return frame


def _records(path: Path) -> pd.DataFrame:
    """A JSON array of records, each an object of the long format's columns."""
    import pandas as pd

    try:
        records = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise SourceError(f"{path}: cannot read as JSON: {str(err)[:200]}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise SourceError(f"{path}: JSON that is not a list of records (what export writes)")
    # no records (an export of no trial): the columns all the same
    frame = pd.DataFrame.from_records(records, columns=None if records else list(COLUMNS))
    for column in LABELS:  # a label is its text: 7 and "7" are one test
        if column in frame.columns:
            frame[column] = [None if v is None else str(v) for v in frame[column]]
    return frame
