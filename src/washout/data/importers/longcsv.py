"""Read a long-format CSV (as ``washout export`` writes it) back into a DataFrame.

The columns are :data:`washout.data.longformat.COLUMNS`; ``position``, ``worker``, ``started`` and
``ended`` may be absent (``worker`` then means the local machine); the context columns
(:data:`~washout.data.longformat.CONTEXT_COLUMNS`) are read where present. Every row is checked: an
unknown order kind or status, or a value that is neither empty (no value: a failed trial, or
output that gave no number) nor a finite number ("nan", "inf", "12 ms"), is a one-line error
naming the file, line, field and value. Names are kept verbatim (a test
called "NA" stays "NA"). A trial has at most one ``ok`` row per metric: a second ``ok`` row
with the same (run, position, test, metric, worker) is refused, since it would count as one
more sample (failed attempts before an ``ok`` retry share its key and are kept).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from washout.data.longformat import (
    COLUMNS,
    CONTEXT_COLUMNS,
    LABELS,
    ORDER_KINDS,
    STATUSES,
    is_in,
    label_column,
    typed_context,
)
from washout.errors import SourceError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

REQUIRED: tuple[str, ...] = ("run", "order", "test", "metric", "value", "status")
# Label columns (few distinct values each) are read as categoricals: parsed once per distinct
# value, and every later grouping works on small integer codes. Time stamps: plain strings.
_STAMPS: tuple[str, ...] = ("started", "ended")
_CHECKED: tuple[str, ...] = ("order", "test", "metric", "value", "status")
TRIAL_KEY: tuple[str, ...] = ("run", "position", "test", "metric", "worker")
"""What identifies one trial's value of one metric (``position``/``worker`` where present)."""


def line_of(index: int) -> int:
    """The 1-based file line of DataFrame row ``index`` of a CSV with one header line."""
    return int(index) + 2


def check_choice(frame: pd.DataFrame, column: str, allowed: tuple[str, ...], path: Path) -> None:
    """A one-line error at the first row whose ``column`` is not one of ``allowed``."""
    import numpy as np

    bad = ~is_in(frame[column], allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SourceError.at(
            f"{path}: line {line_of(frame.index[i])}",
            column,
            frame[column].iloc[i],
            f"expected one of {', '.join(allowed)}",
        )


def _codes(values: pd.Series) -> tuple[np.ndarray, int]:
    """Small non-negative integer codes of a key column (-1: missing) and how many there are."""
    import pandas as pd

    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy(), len(values.cat.categories)
    if values.dtype.kind in "iu" and len(values) and values.min() >= 0:
        return values.to_numpy(), int(values.max()) + 1  # run and position: codes already
    codes, uniques = pd.factorize(values)
    return codes, len(uniques)


def check_one_ok_row_per_trial(frame: pd.DataFrame, path: Path) -> None:
    """A one-line error at the first ``ok`` row whose :data:`TRIAL_KEY` an earlier ``ok``
    row already has: duplicated rows (a file concatenated twice, an export appended to)
    would otherwise be taken as more samples and can flip a verdict.

    The key columns become one integer per row (their codes in mixed radix, worker first).
    In a file written in trial order (each worker's rows in run and position order, as an
    export is), that integer grows along each worker's rows: a counting sort by worker and
    one pass check it. Any other order is sorted whole.
    """
    import numpy as np

    key = [c for c in TRIAL_KEY if c in frame.columns]
    is_ok = (frame["status"] == "ok").to_numpy()
    every = bool(is_ok.all())
    combined = np.zeros(0, dtype=np.int64)
    radix = 1
    for column in sorted(key, key=lambda c: c != "worker"):
        codes, size = _codes(frame[column])
        codes = codes if every else codes[is_ok]
        if radix * (size + 1) >= 2**62:  # too many keys for one integer: hash rows instead
            break
        if radix == 1:
            combined = codes.astype(np.int64)  # written once: no second pass over new pages
            by_worker = np.argsort(codes, kind="stable") if column == "worker" else None
        else:
            combined *= size + 1
            combined += codes
        combined += 1
        radix *= size + 1
    else:
        if by_worker is not None:
            combined = combined[by_worker]
        if np.all(combined[1:] > combined[:-1]):
            return
        ordered = np.sort(combined)
        if not np.any(ordered[1:] == ordered[:-1]):
            return
    ok = frame.loc[is_ok, key]
    repeated = np.flatnonzero(ok.duplicated().to_numpy())
    if len(repeated):
        i = int(repeated[0])
        row = ok.iloc[i]
        first = int(np.flatnonzero((ok == row).all(axis=1).to_numpy())[0])
        raise SourceError.at(
            f"{path}: line {line_of(ok.index[i])}",
            f"({', '.join(key)})",
            tuple(v.item() if isinstance(v, np.generic) else v for v in row),
            f"a second ok row for this trial and metric (the first is line "
            f"{line_of(ok.index[first])}); each trial has one value per metric",
        )


def numeric_column(
    frame: pd.DataFrame, column: str, path: Path, allow_empty: pd.Series | bool = False
) -> pd.Series:
    """``column`` as floats, NaN for empty cells where ``allow_empty`` (a trial without a
    value); a one-line error at the first other cell that is not a finite number."""
    import numpy as np
    import pandas as pd

    raw = frame[column]
    if raw.dtype == np.float64:  # parsed as numbers already: NaN is an empty cell
        values = raw
        empty = np.isnan(raw.to_numpy())
    else:
        values = pd.to_numeric(raw, errors="coerce").astype(float)
        empty = raw.isna().to_numpy()
        if raw.dtype.kind not in "fiub":
            empty = empty | (raw.astype(str).str.strip() == "").to_numpy()
    allowed = allow_empty.to_numpy() if isinstance(allow_empty, pd.Series) else allow_empty
    bad = ~np.isfinite(values.to_numpy()) & ~(empty & allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        shown = "" if empty[i] else raw.iloc[i]
        raise SourceError.at(
            f"{path}: line {line_of(frame.index[i])}", column, shown, "expected a finite number"
        )
    return values


def read_long_csv(
    path: Path | str, columns: Collection[str] | None = None, arrow: bool = True
) -> tuple[pd.DataFrame, Callable[[], None]]:
    """The long-format trials of a CSV file, and the rest of their validation (see the module
    doc) to be run before they are trusted: the check of the order and status cells and of
    one ``ok`` row per trial and metric, which raises the one-line error. It costs a tenth
    of a second at 2.3M rows, which a caller can spend beside its analysis; the values are
    checked already (an analysis needs them as numbers).

    ``columns``: return only these long-format columns; read them and the ones every row is
    checked by (order, test, metric, value, status, and the trial key run, position, worker
    where present). The required columns must be in the file either way.

    Where pyarrow is installed (and ``arrow``), Arrow's CSV reader parses the file on a
    thread while pandas is imported (:func:`_arrow_reading`): the third of a second that
    import takes on one core is spent parsing on the other. Whatever Arrow might read
    otherwise than pandas, it leaves to pandas, which also gives every error.

    pandas reads a file holding no other columns whole, as it reads a CSV by default:
    pandas 3.1 then parses it in parts on every core, where ``usecols``,
    ``low_memory=False`` or categorical columns (categories differ between parts) make it
    parse on one (bench/RESULTS.md, "Analysis at paper scale"). Label columns become
    categoricals afterwards (:func:`categorize_labels`).
    """
    import numpy as np

    path = Path(path)
    wanted = tuple(
        c for c in (*COLUMNS, *CONTEXT_COLUMNS) if columns is None or c in columns or c in _CHECKED
    )
    reading = _arrow_reading(path, wanted) if arrow else None
    import pandas as pd  # after the parse has started: the parse runs while pandas is imported

    frame = reading() if reading else None
    if frame is None:
        frame = _pandas_read(path, wanted)
    # An empty value is a trial without one (failed, or output that gave no number).
    frame["value"] = numeric_column(frame, "value", path, allow_empty=True)
    checked = frame[[c for c in ("order", "status", *TRIAL_KEY) if c in frame.columns]]

    def check() -> None:
        check_choice(checked, "order", ORDER_KINDS, path)
        check_choice(checked, "status", STATUSES, path)
        check_one_ok_row_per_trial(checked, path)

    if "worker" in wanted and "worker" not in frame.columns:
        frame["worker"] = label_column(np.zeros(len(frame), dtype=np.int64), ["local"])
    for column in wanted:
        if column not in frame.columns and column not in CONTEXT_COLUMNS:  # those: optional
            frame[column] = pd.NA
    typed_context(frame, lambda i: f"{path}: line {line_of(frame.index[i])}")
    return frame[[c for c in wanted if c in frame.columns]], check


def _pandas_read(path: Path, wanted: tuple[str, ...]) -> pd.DataFrame:
    """The columns of ``wanted`` and :data:`TRIAL_KEY` that ``path`` has, read by pandas,
    label columns among ``wanted`` as categoricals; the one-line error of a file that is not
    CSV or lacks a required column."""
    import pandas as pd
    from pandas.api.types import is_string_dtype

    try:
        header = list(pd.read_csv(path, encoding="utf-8-sig", nrows=0).columns)
        read = [c for c in header if c in wanted or c in TRIAL_KEY]
        # No NA words: a test named "NA" stays "NA"; only an empty value or time stamp is
        # missing. Label columns are left to pandas' own inference (asking for text makes
        # it build Python strings, twice the time); one that looked numeric is read again
        # as text, so "007" stays "007".
        frame = pd.read_csv(
            path,
            encoding="utf-8-sig",
            keep_default_na=False,
            usecols=None if read == header else read,
            na_values={c: [""] for c in ("value", *_STAMPS)},
            dtype={c: object for c in _STAMPS},
        )
        numeric = [c for c in LABELS if c in frame.columns and not is_string_dtype(frame[c].dtype)]
        if numeric:
            text = pd.read_csv(
                path, encoding="utf-8-sig", keep_default_na=False, usecols=numeric, dtype=str
            )
            for column in numeric:
                frame[column] = text[column]
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise SourceError(f"{path}: cannot read as CSV: {err}") from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SourceError(f"{path}: column(s) {', '.join(missing)} missing from the long format")
    # A column read only for the check (worker, when the caller does not want it) stays
    # text: the check hashes it anyway, and may run beside the caller's analysis.
    categorize_labels(frame, [c for c in LABELS if c in frame.columns and c in wanted])
    return frame


def _arrow_reading(path: Path, wanted: tuple[str, ...]) -> Callable[[], pd.DataFrame | None] | None:
    """Start parsing ``path`` with pyarrow's CSV reader on a thread (the parse itself runs
    without the GIL, on Arrow's own threads), and return what waits for it: the frame of
    :func:`_arrow_frame` (every label column categorical), or None where the pandas read is
    to decide. None at once without pyarrow or with a header pandas would read
    otherwise (repeated names, which it renames) or that lacks a required column."""
    import csv
    import threading
    from importlib.util import find_spec

    if find_spec("pyarrow") is None:
        return None
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if len(set(header)) < len(header) or any(c not in header for c in REQUIRED):
        return None
    read = [c for c in header if c in wanted or c in TRIAL_KEY]
    parsed: list[object] = []

    def parse() -> None:
        try:
            parsed.append(_arrow_table(path, read))
        except Exception:  # noqa: BLE001 (any: the pandas read then gives its own error)
            pass

    thread = threading.Thread(target=parse, name="washout-read-csv", daemon=True)
    thread.start()

    def frame() -> pd.DataFrame | None:
        thread.join()
        return _arrow_frame(parsed[0]) if parsed else None

    return frame


def _arrow_table(path: Path, read: list[str]) -> object:
    """``path``'s columns ``read``, as the long format types them: label columns
    dictionary-encoded while parsing (what :func:`categorize_labels` does after a pandas
    read), only an empty value or time stamp missing."""
    import pyarrow as pa
    import pyarrow.csv as arrow_csv

    label = pa.dictionary(pa.int32(), pa.string())
    types = {"run": pa.int64(), "position": pa.int64(), "value": pa.float64()}
    types |= {c: label for c in LABELS} | {c: pa.string() for c in (*_STAMPS, *CONTEXT_COLUMNS)}
    return arrow_csv.read_csv(
        path,
        # blocks of 8 MB: a few per core at paper scale, and few dictionaries to unify
        read_options=arrow_csv.ReadOptions(block_size=8 << 20),
        convert_options=arrow_csv.ConvertOptions(
            include_columns=read,
            column_types={c: types[c] for c in read},
            null_values=[""],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )


def _arrow_frame(table: object) -> pd.DataFrame | None:
    """The pandas frame of an Arrow read, or None where pandas would read it otherwise or
    report an error: a value cell "nan" or "inf" (pandas' error names it), an empty run or
    position, a label holding a quote or a line break (Arrow splits the file into blocks at
    line breaks, and one inside a quoted cell would be a wrong split), no rows at all."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    assert isinstance(table, pa.Table)
    finite = pc.all(pc.is_finite(table["value"]), min_count=0)  # empty cells: left out
    if not len(table) or not finite.as_py():
        return None
    if any(table[c].null_count for c in ("run", "position") if c in table.column_names):
        return None

    def converted(name: str) -> object:
        column = table[name]
        if name in LABELS:
            return _arrow_labels(column)
        if name in _STAMPS:
            stamps = column.to_numpy(zero_copy_only=False).astype(object)
            stamps[stamps == ""] = np.nan
            return pd.Series(stamps, dtype=object)
        return column.to_numpy()  # an empty value: NaN

    # on as many threads as there are cores: the copies and renumbering run without the GIL
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        columns = dict(zip(table.column_names, pool.map(converted, table.column_names)))
    if any(labels is None for labels in columns.values()):
        return None
    return pd.DataFrame(columns, copy=False)


def _arrow_labels(column: object) -> pd.Categorical | None:
    """A dictionary-encoded Arrow column as a categorical with sorted categories, as
    :func:`categorize_labels` makes a pandas one: each block's few names numbered through a table,
    its codes renumbered in one pass (``to_pandas`` unifies the blocks' dictionaries and
    the sorting renumbers again: four times the time). None for a name with a quote or a
    line break."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    assert isinstance(column, pa.ChunkedArray)
    if column.null_count:
        return None
    blocks = [(chunk.dictionary.to_pylist(), chunk.indices) for chunk in column.chunks]
    names = sorted({name for dictionary, _ in blocks for name in dictionary})
    if any('"' in name or "\n" in name or "\r" in name for name in names):
        return None
    number = {name: i for i, name in enumerate(names)}
    small = np.min_scalar_type(-len(names) - 1)
    codes = np.empty(len(column), dtype=small)
    at = 0
    for dictionary, indices in blocks:
        renumber = np.array([number[name] for name in dictionary], dtype=small)
        codes[at : at + len(indices)] = renumber[indices.to_numpy()]
        at += len(indices)
    return pd.Categorical.from_codes(codes, pd.Index(names))


def categorize_labels(frame: pd.DataFrame, present: list[str]) -> None:
    """Make the label columns ``present`` of ``frame`` categoricals with sorted categories,
    in place.

    Each column is hashed once (:func:`_categorical`), the columns on as many threads as
    there are cores: on pandas' Arrow strings the hashing runs without the GIL (0.23 s ->
    0.13-0.15 s wall for the five columns of 2.3M rows on 2 cores, bench/RESULTS.md).
    As cheap in CPU as ``read_csv``'s own category parsing, which however needs the whole
    file parsed on one core (categories that differ between parts make pandas' parallel
    read fall back to a serial one).
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    columns = [frame[c] for c in present]
    with ThreadPoolExecutor(max_workers=max(1, min(len(present), os.cpu_count() or 1))) as pool:
        categoricals = list(pool.map(_categorical, columns))
    for column, values in zip(present, categoricals):
        frame[column] = values


def _categorical(column: pd.Series) -> pd.Categorical:
    """``column`` as a categorical with its distinct values, sorted, as categories: one
    hashing pass (``pd.factorize``; ``sort=True`` would hash every row a second time),
    then the few distinct names are sorted and the codes renumbered through a table."""
    import numpy as np
    import pandas as pd

    codes, names = pd.factorize(column)
    order = np.argsort(np.asarray(names, dtype=object), kind="stable")
    # the small integer type a categorical keeps its codes in: from_codes need not copy them
    rank = np.empty(len(names) + 1, dtype=np.min_scalar_type(-len(names) - 1))
    rank[order] = np.arange(len(names))
    rank[-1] = -1  # code -1: a missing name (a short row)
    return pd.Categorical.from_codes(rank[codes], names[order])
