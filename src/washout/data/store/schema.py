"""The store's tables, its schema version, and a new store's first image.

A new store is put together in memory (its schema and experiment rows committed there) and
written out whole: :func:`new_store_image` gives the bytes that
:meth:`~washout.data.store.writer.StoreWriter.create` puts under the store's name at once, so
no process ever sees a store without its schema.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from washout.version import __version__

SCHEMA_VERSION = 3
"""2 added ``trial.superseded``, 3 the trial's context (the long format's
:data:`~washout.data.longformat.CONTEXT_COLUMNS`: bytes of environment padding and of the
working directory's path, ASLR 1 or 0; NULL where not randomized); an older store is
upgraded when opened for writing, and read as it is."""
CONTEXT_KINDS: tuple[str, ...] = ("env", "cwd", "aslr")
"""What ``[experiment] context`` may randomize, in the order of the context columns."""
SQLITE_MAGIC = b"SQLite format 3\x00"

TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE experiment (
    id INTEGER PRIMARY KEY CHECK (id = 1), name TEXT NOT NULL, spec_text TEXT NOT NULL,
    spec_source TEXT NOT NULL, seed INTEGER NOT NULL, design TEXT NOT NULL,
    runs_per_kind INTEGER NOT NULL, planned_trials INTEGER NOT NULL,
    created TEXT NOT NULL, tool_version TEXT NOT NULL);
CREATE TABLE test (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, spec_index INTEGER NOT NULL,
    command TEXT NOT NULL, metrics TEXT NOT NULL);
CREATE TABLE worker (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, host TEXT NOT NULL,
    fingerprint TEXT);
CREATE TABLE environment (
    id INTEGER PRIMARY KEY, worker_id INTEGER NOT NULL REFERENCES worker(id),
    run_index INTEGER, captured TEXT NOT NULL, data TEXT NOT NULL, fingerprint TEXT NOT NULL);
CREATE TABLE run (
    id INTEGER PRIMARY KEY, worker_id INTEGER NOT NULL REFERENCES worker(id),
    idx INTEGER NOT NULL, order_kind TEXT NOT NULL, permutation TEXT NOT NULL,
    reset_started TEXT, reset_ended TEXT, reset_info TEXT, status TEXT NOT NULL,
    UNIQUE (worker_id, idx));
CREATE TABLE trial (
    id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES run(id),
    position INTEGER NOT NULL, test TEXT NOT NULL, attempt INTEGER NOT NULL,
    status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', exit_code INTEGER,
    started TEXT NOT NULL, ended TEXT, duration REAL, stdout_tail TEXT, stderr_tail TEXT,
    cpus TEXT, superseded INTEGER NOT NULL DEFAULT 0, context_env_bytes INTEGER,
    context_cwd_bytes INTEGER, context_aslr INTEGER);
CREATE INDEX trial_slot ON trial (run_id, position);
CREATE TABLE metric (
    trial_id INTEGER NOT NULL REFERENCES trial(id), name TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (trial_id, name)) WITHOUT ROWID;
CREATE TABLE event (
    id INTEGER PRIMARY KEY, time TEXT NOT NULL, worker TEXT, kind TEXT NOT NULL,
    message TEXT NOT NULL);
"""


@dataclass(frozen=True)
class TrialContext:
    """The context a trial ran in, as the store keeps it (its context columns):
    environment padding in bytes, the length of its working directory's path (``PWD``) in
    bytes, ASLR on; None where the experiment does not randomize it."""

    env_bytes: int | None
    cwd_bytes: int | None
    aslr: bool | None

    def to_dict(self) -> dict[str, int | bool | None]:
        return {"env_bytes": self.env_bytes, "cwd_bytes": self.cwd_bytes, "aslr": self.aslr}


FINISHED = ("ok", "failed", "timeout")
SUPERSEDED = "superseded"
"""The long-format status of a trial from an interrupted run's earlier attempt (included
only on request: those trials did not all have their planned predecessors)."""


@dataclass(frozen=True)
class ExperimentRecord:
    """What the store knows about its experiment (enough to re-plan it)."""

    name: str
    spec_text: str
    spec_source: str
    seed: int
    design: str
    runs_per_kind: int
    planned_trials: int
    created: str
    tool_version: str


def is_store(path: str | Path) -> bool:
    """True if ``path`` is a regular file that starts as an SQLite database does (washout
    or not: :meth:`~washout.data.store.reader.Store.open` checks). Anything else (a FIFO, a
    device, a directory) is not read: opening a FIFO to read it waits for a writer."""
    path = Path(path)
    try:
        if not path.is_file():
            return False
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def new_store_image(
    record: ExperimentRecord,
    tests: Iterable[tuple[str, str, list[str]]],
    extra: Iterable[str] = (),
    meta: dict[str, str] | None = None,
) -> bytes:
    """A new store's whole file: :data:`TABLES` and ``extra`` statements (the columnar
    copy's), the ``meta`` rows, the experiment and its tests, committed in an in-memory
    database and serialized (SQLite's ``sqlite3_serialize``: the bytes its file would hold)."""
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        conn.execute("BEGIN")
        for statement in [*TABLES.split(";"), *extra]:
            if statement.strip():
                conn.execute(statement)
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [
                ("schema_version", str(SCHEMA_VERSION)),
                ("created_with", __version__),
                *(meta or {}).items(),
            ],
        )
        conn.execute(
            "INSERT INTO experiment VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.name,
                record.spec_text,
                record.spec_source,
                record.seed,
                record.design,
                record.runs_per_kind,
                record.planned_trials,
                record.created,
                record.tool_version,
            ),
        )
        conn.executemany(
            "INSERT INTO test (name, spec_index, command, metrics) VALUES (?, ?, ?, ?)",
            [
                (name, i, command, json.dumps(metrics))
                for i, (name, command, metrics) in enumerate(tests)
            ],
        )
        conn.execute("COMMIT")
        return conn.serialize()
