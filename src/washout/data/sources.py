"""Where trials come from: a washout store, what ``washout export`` writes (a long-format
CSV, JSON records or Parquet), or an OrderSage results file.

:func:`load_trials` tells them apart by content, not by name: a SQLite database starts with
the 16-byte magic ``SQLite format 3\\0``, a Parquet file with ``PAR1``, a JSON export with
``[``; a CSV is a long-format file if its header has the long-format columns and an
OrderSage file if it has OrderSage's. :func:`load_everything` is ``washout.load``: every
metric, time stamps as datetimes.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from washout.data.store.schema import SQLITE_MAGIC
from washout.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd


SOURCE_KINDS = {
    "store": "washout store",
    "long-csv": "long-format CSV",
    "long-json": "long-format JSON",
    "long-parquet": "long-format Parquet",
    "ordersage": "OrderSage results CSV",
}
"""Each kind of source a path can be, in words."""


@dataclass(frozen=True)
class SourceInfo:
    """What :func:`load_trials` read: ``kind`` is store, long-csv, long-json, long-parquet
    or ordersage; for OrderSage files also the original test-column name
    (exp_command/test_command) and the layout generation (``exp`` older, ``test`` newer)."""

    path: Path
    kind: str
    test_column: str | None = None
    generation: str | None = None
    # With ``defer_checks``: a long CSV's row checks, not yet run (raises the one-line error).
    check: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    journaled: int = 0
    """A store's finished trials still in its trial journal: not in what was read."""

    @property
    def journaled_note(self) -> str | None:
        """What a reader tells of trials it could not read yet (None: there are none)."""
        if not self.journaled:
            return None
        return (
            f"{self.path}: note: {self.journaled} finished trial(s) are in its trial journal, "
            "not in the store yet, nor in what follows (a running washout folds them in "
            f"between runs; for a stopped one, 'washout resume {self.path}' does)"
        )

    @property
    def what(self) -> str:
        """The kind of source in words (``long-format CSV``...)."""
        return SOURCE_KINDS[self.kind]


def _header(path: Path) -> list[str]:
    """The column names of a CSV's first line."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            return [c.strip() for c in next(csv.reader(handle), [])]
    except UnicodeDecodeError:
        raise SourceError(f"{path}: not a washout store or a CSV text file") from None


def load_trials(
    path: Path | str,
    columns: Collection[str] | None = None,
    resources: bool = False,
    defer_checks: bool = False,
) -> tuple[pd.DataFrame, SourceInfo]:
    """The long-format trials of ``path`` and what kind of source it was.

    ``columns``: the long-format columns the caller needs; a long-format CSV then reads
    only those (and the ones it checks every row by), a store leaves out the time stamps
    unless asked for them, an OrderSage file gives every column. ``resources``: a store
    adds each trial's CPU time and peak RSS (:data:`~washout.data.longformat.RESOURCE_METRICS`).
    ``defer_checks``: a long-format CSV's row checks are left to the caller, as
    ``SourceInfo.check``, to run beside its analysis and before it shows any result
    (:func:`~washout.data.importers.longcsv.read_long_csv`).
    """
    from washout.data.importers.hyperfine import EXPORT_OPTIONS, export_kind
    from washout.data.importers.longcsv import REQUIRED as LONG_REQUIRED
    from washout.data.importers.longexport import exported_format
    from washout.data.importers.ordersage import is_ordersage
    from washout.data.store.reader import file_kind

    path = Path(path)
    kind = file_kind(path)
    if kind is not None:
        raise SourceError(f"{path}: {kind}, not a file of trials (a store or a CSV)")
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError as err:
        raise SourceError(f"{path}: cannot read: {err.strerror}") from None
    if head.startswith(SQLITE_MAGIC):
        from washout.data.store import Store

        with Store.open(path) as store:
            frame = store.long_frame(columns=columns, resources=resources)
            return frame, SourceInfo(path, "store", journaled=store.journaled())
    exported = exported_format(head)
    if exported is not None:
        from washout.data.importers.longexport import read_long_export

        frame, check = read_long_export(path, exported)
        if not defer_checks:
            check()
        info = SourceInfo(path, f"long-{exported}", check=check if defer_checks else None)
        return frame, info
    header = _header(path)
    if all(c in header for c in LONG_REQUIRED):
        from washout.data.importers.longcsv import read_long_csv

        frame, check = read_long_csv(path, columns)
        if not defer_checks:
            check()
        return frame, SourceInfo(path, "long-csv", check=check if defer_checks else None)
    if is_ordersage(header):
        from washout.data.importers.ordersage import read_ordersage

        frame, layout = read_ordersage(path)
        return frame, SourceInfo(path, "ordersage", layout.test_column, layout.generation)
    hyperfine = export_kind(head, header)
    if hyperfine is not None:
        raise SourceError(
            f"{path}: hyperfine's {hyperfine} export format (hyperfine's or washout's "
            f"--export-{EXPORT_OPTIONS[hyperfine]}): each command's summary or times, not the "
            "order its runs ran in, so there is no order to analyse; analyse the washout "
            "store that holds the trials, or run the commands with `washout run COMMAND...`"
        )
    shown = ", ".join(header) if header else "(empty)"
    raise SourceError(
        f"{path}: columns = {shown[:200]}: neither a washout store, a long-format CSV "
        f"({', '.join(LONG_REQUIRED)}, ...) nor an OrderSage results file "
        "(exp_command or test_command, order_type, result, completion_status, ...)"
    )


def load_everything(path: Path | str) -> pd.DataFrame:
    """What ``washout.load`` gives: the long format of ``path`` with every metric of every
    trial (a store's resource metrics too: :data:`~washout.data.longformat.RESOURCE_METRICS`)
    and ``started``/``ended`` as UTC datetimes (NaT where unknown, as in an OrderSage
    file)."""
    import pandas as pd

    frame, _ = load_trials(path, resources=True)
    for column in ("started", "ended"):
        frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601", errors="coerce")
    return frame
