"""Read a long-format CSV (as ``washout export`` writes it) back into a DataFrame.

The columns are :data:`washout.data.longformat.COLUMNS`; ``position``, ``worker``, ``started`` and
``ended`` may be absent (``worker`` then means the local machine). Every row is checked: an
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

from washout.data.longformat import COLUMNS, LABELS, ORDER_KINDS, STATUSES, is_in, label_column
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
    path: Path | str, columns: Collection[str] | None = None
) -> tuple[pd.DataFrame, Callable[[], None]]:
    """The long-format trials of a CSV file, and the rest of their validation (see the module
    doc) to be run before they are trusted: the check of the order and status cells and of
    one ``ok`` row per trial and metric, which raises the one-line error. It costs a tenth
    of a second at 2.3M rows, which a caller can spend beside its analysis; the values are
    checked already (an analysis needs them as numbers).

    ``columns``: return only these long-format columns; read them and the ones every row is
    checked by (order, test, metric, value, status, and the trial key run, position, worker
    where present). The required columns must be in the file either way.

    A file holding no other columns is read whole, as pandas reads a CSV by default: pandas
    3.1 then parses it in parts on every core, where ``usecols``, ``low_memory=False`` or
    categorical columns (categories differ between parts) make it parse on one
    (bench/RESULTS.md, "Analysis at paper scale"). Label columns become categoricals
    afterwards (:func:`_labels`).
    """
    import numpy as np
    import pandas as pd
    from pandas.api.types import is_string_dtype

    path = Path(path)
    wanted = (
        COLUMNS if columns is None else tuple(c for c in COLUMNS if c in columns or c in _CHECKED)
    )
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
    _labels(frame, [c for c in LABELS if c in frame.columns and c in wanted])
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
        if column not in frame.columns:
            frame[column] = pd.NA
    return frame[list(wanted)], check


def _labels(frame: pd.DataFrame, present: list[str]) -> None:
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
