"""The long format: one row per trial and metric, the common currency of washout.

``washout export`` writes it, ``washout analyze`` and ``washout report`` read it (from a
store, a CSV, or an OrderSage file converted to it). Columns, exactly (docs/design.md):

    run, order, position, test, metric, value, status, worker, started, ended

``run`` and ``position`` count from 0; ``order`` is fixed/random/reverse/williams (or
``warmup``, run -1, for the warmup trials); ``status`` is ok/failed/timeout/interrupted (or
``warmup``, or ``superseded`` for the trials of a run's interrupted attempt); ``worker`` is
``local`` for the local machine; ``started`` and ``ended`` are UTC ISO-8601 strings (or NaN
where unknown). A trial that produced no value for a metric (failed, timed out) has
``value`` NaN. Only ``ok`` trials of the analysed order kinds are ever analysed. Trials run
in randomized contexts have the :data:`CONTEXT_COLUMNS` after these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    import numpy as np
    import pandas as pd

COLUMNS: tuple[str, ...] = (
    "run",
    "order",
    "position",
    "test",
    "metric",
    "value",
    "status",
    "worker",
    "started",
    "ended",
)
ORDER_KINDS: tuple[str, ...] = ("fixed", "random", "reverse", "williams", "warmup")
"""Every order a long-format file may name: the plan's kinds and ``warmup``."""
STATUSES: tuple[str, ...] = ("ok", "failed", "timeout", "interrupted", "warmup", "superseded")
"""Every status a long-format file may hold: whatever ``washout export`` writes."""
# The columns with few distinct values: categoricals with sorted categories, from a store
# as from a CSV, so grouping works on small integer codes.
LABELS: tuple[str, ...] = ("order", "test", "metric", "status", "worker")


def label_column(codes: np.ndarray, names: Sequence[object]) -> pd.Categorical:
    """``names[codes]`` (code -1: missing) as a categorical whose categories are the names
    present, sorted: the form ``read_csv`` gives a label column. Which names are present is
    counted (``bincount``), not found by sorting the codes: a tenth of the time at 2.3M rows."""
    import numpy as np
    import pandas as pd

    codes = np.asarray(codes, dtype=np.int64)
    present = np.flatnonzero(np.bincount(codes + 1, minlength=len(names) + 1)[1:])
    order = sorted(present.tolist(), key=lambda i: str(names[i]))
    rank = np.full(len(names) + 1, -1, dtype=np.int64)  # code -1 indexes the last slot
    rank[order] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[codes], pd.Index([names[i] for i in order]))


def is_in(column: pd.Series, wanted: Collection[object]) -> np.ndarray:
    """Boolean mask of ``column`` in ``wanted``, through its few distinct values: a label
    column's own categorical codes, else the codes of one hashing pass. ``Series.isin`` of a
    categorical compares every code against a hash table: ten times the time at 2.3M rows."""
    import numpy as np
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, levels = column.cat.codes.to_numpy(), column.cat.categories
    else:
        codes, levels = pd.factorize(column)
    hit = np.array([level in wanted for level in levels] + [False])  # code -1: missing
    return hit[codes]


def present(column: pd.Series) -> list[object]:
    """The distinct values of a label column that some row holds: a categorical's from its
    codes (a column of millions of rows is never turned into text), else one hashing
    pass."""
    import numpy as np
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        return list(column.cat.categories[np.unique(codes[codes >= 0])])
    return list(pd.unique(column.dropna()))


def empty_frame() -> pd.DataFrame:
    """A long-format frame with no rows and the right columns."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})


CONTEXT_COLUMNS: tuple[str, ...] = ("context_env_bytes", "context_cwd_bytes", "context_aslr")
"""The trial's context, where the experiment randomized it (``[experiment] context``): bytes of
environment padding, the length of the working directory's path (``PWD``) in bytes, ASLR on.
Each optional, after the columns above: present where the store (or file) has it, NA for a
trial without it; as nullable integers and booleans (``Int64``, ``boolean``)."""
ASLR_WORDS: dict[str, bool] = {
    **dict.fromkeys(("true", "1", "1.0", "on", "yes"), True),
    **dict.fromkeys(("false", "0", "0.0", "off", "no"), False),
}
"""How a ``context_aslr`` entry may be written in a file (any case)."""


def typed_context(frame: pd.DataFrame, where: Callable[[int], str]) -> None:
    """The context columns of ``frame`` (as read from a file: numbers, booleans or text) typed
    as a store gives them, in place: whole bytes >= 0 as ``Int64``, ASLR as ``boolean``, an
    empty cell NA; a one-line error at the first other value (``where(i)``: row i's place)."""
    import numpy as np
    import pandas as pd

    from washout.errors import SourceError

    for column in CONTEXT_COLUMNS:
        if column not in frame.columns:
            continue
        raw = frame[column]
        text = raw.astype("string").str.strip().str.lower()
        empty = (raw.isna() | (text == "")).to_numpy(dtype=bool)
        if column == "context_aslr":
            typed = pd.array(text.map(ASLR_WORDS, na_action="ignore"), dtype="boolean")
            good = ~pd.isna(typed)
            expected = "expected true or false"
        else:
            numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
            good = np.isfinite(numbers) & (numbers >= 0) & (numbers == np.round(numbers))
            typed = pd.array(np.where(good, numbers, np.nan), dtype="Int64")
            expected = "expected a whole number of bytes, 0 or more"
        bad = ~empty & ~np.asarray(good, dtype=bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise SourceError.at(where(i), column, raw.iloc[i], expected)
        frame[column] = pd.Series(typed, index=frame.index)


RESOURCE_METRICS: tuple[str, ...] = ("user", "system", "max_rss")
"""What the executor measures of every trial's process tree (getrusage(2)): user and system
CPU seconds and the peak resident set size in bytes. Stored with every trial; in the long
format only when asked for (or when a test names one), so the default analyses and their
family-wise correction cover the spec's own metrics."""
