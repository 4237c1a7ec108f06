"""The store: one SQLite file per experiment, WAL, one transaction per trial write.

One module per concern: ``schema`` (the tables and a new store's first image),
``integrity`` (SQLite's check, and values of the wrong type, as one-line "damaged"
errors), ``lock`` (the one writer), ``reader`` (:class:`Store`, read-only: status,
analysis, reports, export), ``writer`` (:class:`~washout.data.store.writer.StoreWriter`,
the engine's), ``columnar`` (the copy of the trial and metric columns a reader takes as a
few BLOBs) and ``frame`` (the long format put together from them). This package gives
what readers use; the engine imports the writer from its module.
"""

from washout.data.store.integrity import WHOLE_CHECK_BYTES
from washout.data.store.lock import describe_writer, lock_path, writer_of
from washout.data.store.reader import Store, read_long
from washout.data.store.schema import (
    FINISHED,
    SCHEMA_VERSION,
    SUPERSEDED,
    ExperimentRecord,
    is_store,
)

__all__ = [
    "FINISHED",
    "SCHEMA_VERSION",
    "SUPERSEDED",
    "WHOLE_CHECK_BYTES",
    "ExperimentRecord",
    "Store",
    "describe_writer",
    "is_store",
    "lock_path",
    "read_long",
    "writer_of",
]
