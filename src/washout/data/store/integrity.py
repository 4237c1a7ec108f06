"""Whether a store can be trusted: SQLite's own check of its pages, the header's size, and
the type of every value washout reads (a value edited to text or a BLOB, a row taken away),
each found problem one line, ``X.db: damaged: ...``.

A value of the wrong type is found where it is met: every read of the store
(:func:`reports_damage`) turns the ValueError or TypeError it causes into the damaged error
naming the first such value (:func:`value_problem`); a writer checks every value before it
writes (:meth:`~washout.data.store.writer.StoreWriter.open`).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

from washout.errors import DamagedStoreError

P = ParamSpec("P")
R = TypeVar("R")

DAMAGED_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
UNWRITABLE_CODES = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
}

WHOLE_CHECK_BYTES = 64 * 2**20
"""Up to this size (store and log together) every open checks the whole file (``PRAGMA
quick_check``, about 10 ms per MB). A larger store opened read-only has its header and
every table but the two large ones checked; those are read whole by every reader, which
reports damage met there (docs/guarantees.md)."""
SCANNED_TABLES = ("trial", "metric", "columnar")
"""The tables a reader walks whole (the long frame, the counts and the other reads marked
``@reports_damage``); ``columnar``'s BLOBs also carry a CRC-32 each, checked on every read."""

INTACT: set[tuple[object, ...]] = set()
"""Stores that passed the integrity check in this process, as :func:`identity` saw them:
a command that opens one store several times (``report``: trials, metadata, claims) pays
for one check."""

_TEXT, _INT, _REAL, _NULL = "text", "integer", "real", "null"
VALUE_TYPES: dict[str, dict[str, tuple[str, ...]]] = {
    "meta": {"key": (_TEXT,), "value": (_TEXT,)},
    "experiment": {
        "name": (_TEXT,),
        "spec_text": (_TEXT,),
        "spec_source": (_TEXT,),
        "seed": (_INT,),
        "design": (_TEXT,),
        "runs_per_kind": (_INT,),
        "planned_trials": (_INT,),
        "created": (_TEXT,),
        "tool_version": (_TEXT,),
    },
    "test": {"name": (_TEXT,), "spec_index": (_INT,), "command": (_TEXT,), "metrics": (_TEXT,)},
    "worker": {"name": (_TEXT,), "host": (_TEXT,), "fingerprint": (_TEXT, _NULL)},
    "environment": {
        "worker_id": (_INT,),
        "run_index": (_INT, _NULL),
        "captured": (_TEXT,),
        "data": (_TEXT,),
        "fingerprint": (_TEXT,),
    },
    "run": {
        "worker_id": (_INT,),
        "idx": (_INT,),
        "order_kind": (_TEXT,),
        "permutation": (_TEXT,),
        "reset_started": (_TEXT, _NULL),
        "reset_ended": (_TEXT, _NULL),
        "reset_info": (_TEXT, _NULL),
        "status": (_TEXT,),
    },
    "trial": {
        "run_id": (_INT,),
        "position": (_INT,),
        "test": (_TEXT,),
        "attempt": (_INT,),
        "status": (_TEXT,),
        "reason": (_TEXT,),
        "exit_code": (_INT, _NULL),
        "started": (_TEXT,),
        "ended": (_TEXT, _NULL),
        "duration": (_REAL, _INT, _NULL),
        "stdout_tail": (_TEXT, _NULL),
        "stderr_tail": (_TEXT, _NULL),
        "cpus": (_TEXT, _NULL),
        "superseded": (_INT,),
        "context_env_bytes": (_INT, _NULL),
        "context_cwd_bytes": (_INT, _NULL),
        "context_aslr": (_INT, _NULL),
    },
    "metric": {"trial_id": (_INT,), "name": (_TEXT,), "value": (_REAL, _INT)},
    "event": {"time": (_TEXT,), "worker": (_TEXT, _NULL), "kind": (_TEXT,), "message": (_TEXT,)},
    "columnar": {"name": (_TEXT,), "chunk": (_INT,), "data": ("blob",), "crc": (_INT,)},
    "columnar_state": {"covers": (_INT,), "names": (_TEXT,)},
}
"""The SQLite type (``typeof``) each column washout reads may hold. The schema's column
affinities give these to every value washout writes; a value edited by hand may be
anything."""


VALUE_RANGES: dict[str, dict[str, str]] = {
    "experiment": {
        "seed": "seed >= 0",
        "runs_per_kind": "runs_per_kind BETWEEN 1 AND 1000000",
        "planned_trials": "planned_trials >= 0",
    },
    "test": {
        "spec_index": "spec_index >= 0 AND spec_index < (SELECT count(*) FROM test) AND NOT"
        " EXISTS (SELECT 1 FROM test u WHERE u.spec_index = test.spec_index AND u.id != test.id)",
    },
    "trial": {
        "context_env_bytes": "context_env_bytes IS NULL OR context_env_bytes >= 0",
        "context_cwd_bytes": "context_cwd_bytes IS NULL OR context_cwd_bytes > 0",
        "context_aslr": "context_aslr IS NULL OR context_aslr IN (0, 1)",
    },
}
"""What the experiment's numbers must be for it to be planned again (a spec's own limits:
a seed is not negative, 1 to 1,000,000 runs per order kind), the tests' places in the spec
(each its own, 0 to one less than the tests: a reader codes a trial's test by it, so a
place out of range or taken twice named trials' tests wrongly or failed), and a trial's
context (bytes are not negative, ASLR is on or off)."""


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _lists_of_texts(value: object) -> bool:
    return isinstance(value, dict) and all(_texts(v) for v in value.values())


JSON_COLUMNS: dict[str, tuple[str, Callable[[object], bool], str, str]] = {
    "test": ("metrics", _texts, "a list of names", "1"),
    "run": ("permutation", _texts, "a list of names", "1"),
    "environment": ("data", lambda v: isinstance(v, dict), "an object", "1"),
    "columnar_state": ("names", _lists_of_texts, "an object of name lists", "1"),
    "meta": (
        "value",
        _texts,
        "a list of names",
        "key IN ('sessions', 'spec_redacted', 'context')",
    ),
}
"""Columns holding JSON: what its value must be (and in words), and which rows hold it."""
REFERENCES: tuple[tuple[str, str, str], ...] = (
    ("metric", "trial_id", "trial"),
    ("trial", "run_id", "run"),
    ("run", "worker_id", "worker"),
    ("environment", "worker_id", "worker"),
)
"""(table, column, table it refers to by id): a row whose reference has no row is damage
(a row deleted by hand while foreign keys were off)."""


class _Readable(Protocol):
    """What :func:`reports_damage` needs of a store: its path and connection."""

    path: Path
    _conn: sqlite3.Connection


def primary_code(err: sqlite3.Error) -> int | None:
    """SQLite's primary result code of an error (its extended code's low byte)."""
    code = getattr(err, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def damaged(path: Path, problem: str) -> DamagedStoreError:
    """The one-line error of a damaged store, with how to save what is readable."""
    return DamagedStoreError(
        f"{path}: damaged: {problem} (copy what is readable with 'sqlite3 {path} .recover')"
    )


def header_problem(path: Path) -> str | None:
    """What the file's own header says is wrong with its size, if anything: a valid
    in-header page count (SQLite, "Database File Format" 1.3.7: valid when the change
    counter at offset 24 equals the version-valid-for number at offset 92) times the page
    size (offset 16; 1 means 65536) must fit in the file, or it was cut short."""
    with path.open("rb") as f:
        header = f.read(100)
    if len(header) < 100:
        return f"file is {len(header)} bytes, shorter than SQLite's 100-byte header"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if header[24:28] != header[92:96] or pages == 0:
        return None  # an older writer's header: no page count to check against
    size = path.stat().st_size
    if size < pages * page_size:
        return f"file is {size} bytes, its header says {pages} pages of {page_size} bytes"
    return None


def integrity_problems(conn: sqlite3.Connection, path: Path, readonly: bool) -> list[str]:
    """What SQLite finds wrong with the store (empty if nothing): ``PRAGMA quick_check``
    of the whole file, or, for a large store opened read-only, of its header and of every
    table but :data:`SCANNED_TABLES` (``PRAGMA quick_check(TABLE)``)."""
    wal = Path(f"{path}-wal")
    size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    if not readonly or size <= WHOLE_CHECK_BYTES:
        tables: list[str | None] = [None]
    else:
        problem = header_problem(path)
        if problem is not None:
            return [problem]
        tables = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name not in SCANNED_TABLES
        ]
    problems = []
    for table in tables:
        quoted = None if table is None else table.replace('"', '""')
        pragma = "PRAGMA quick_check(3)" if table is None else f'PRAGMA quick_check("{quoted}")'
        problems += [p for (p,) in conn.execute(pragma) if p != "ok"]
    return problems


def identity(path: Path) -> tuple[object, ...]:
    """A store file as it is now: path, size and modification time of it and its log (a
    write to either makes it another)."""
    stats = [path.stat()]
    wal = Path(f"{path}-wal")
    if wal.exists():
        stats.append(wal.stat())
    return (str(path.resolve()), *((s.st_size, s.st_mtime_ns) for s in stats))


def _shown(value: object) -> str:
    """A stored value as the error shows it: short, its type visible."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def value_problem(conn: sqlite3.Connection) -> str | None:
    """The first value washout could not read, as one phrase (None if there is none): a
    value of a type its column does not take (:data:`VALUE_TYPES`), JSON that is not the
    list or object it should be, a reference to a row that is not there, or no experiment
    row. One scan of each table: found where a read failed, and before a writer writes.
    Text that is not UTF-8 is read with its bad bytes replaced, to be named."""
    factory = conn.text_factory
    conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
    try:
        return _value_problem(conn)
    finally:
        conn.text_factory = factory


def _value_problem(conn: sqlite3.Connection) -> str | None:
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, columns in VALUE_TYPES.items():
        if table not in tables:
            continue
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        wanted = {c: kinds for c, kinds in columns.items() if c in present}
        key = "trial_id, name" if table == "metric" else "rowid"
        test = " OR ".join(
            f"typeof({c}) NOT IN ({', '.join(repr(k) for k in kinds)})"
            for c, kinds in wanted.items()
        )
        row = conn.execute(
            f"SELECT {key}, {', '.join(wanted)} FROM {table} WHERE {test} LIMIT 1"
        ).fetchone()
        if row is not None:
            keys = 2 if table == "metric" else 1
            where = f"{table} row {', '.join(map(_shown, row[:keys]))}"
            kinds_of = dict(zip(wanted, row[keys:], strict=True))
            for column, found in kinds_of.items():
                kind = (
                    _NULL
                    if found is None
                    else {str: _TEXT, int: _INT, float: _REAL}.get(type(found), "blob")
                )
                if kind not in wanted[column]:
                    expected = " or ".join(wanted[column])
                    return f"{where}: {column} = {_shown(found)}: expected {expected}"
    for table, ranges in VALUE_RANGES.items():
        present = (
            {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if table in tables
            else set()
        )
        checked = {c: condition for c, condition in ranges.items() if c in present}
        if not checked:
            continue
        # one scan of the table for all its conditions, each a column of 0 or 1
        row = conn.execute(
            f"SELECT {', '.join(f'NOT ({c}), {column}' for column, c in checked.items())}"
            f" FROM {table} WHERE {' OR '.join(f'NOT ({c})' for c in checked.values())} LIMIT 1"
        ).fetchone()
        if row is not None:
            for (column, condition), broken, bad in zip(checked.items(), row[::2], row[1::2]):
                if broken:
                    return f"{table}: {column} = {_shown(bad)}: expected {condition}"
    if "experiment" in tables:
        (count,) = conn.execute("SELECT count(*) FROM experiment").fetchone()
        if count != 1:
            return f"experiment: {count} rows, expected 1 (the experiment the store was made for)"
    for table, (column, valid, shape, rows) in JSON_COLUMNS.items():
        if table not in tables:
            continue
        for rowid, text in conn.execute(f"SELECT rowid, {column} FROM {table} WHERE {rows}"):
            try:
                value: Any = json.loads(text)
            except ValueError:
                value = None
            if not valid(value):
                return f"{table} row {rowid}: {column} = {_shown(text)}: expected JSON ({shape})"
    for table, column, target in REFERENCES:
        if table in tables and target in tables:
            row = conn.execute(
                f"SELECT t.{column} FROM {table} t LEFT JOIN {target} r"
                f" ON r.id = t.{column} WHERE r.id IS NULL LIMIT 1"
            ).fetchone()
            if row is not None:
                return f"{table}: {column} = {row[0]}: no such {target}"
    return None


def reports_damage(read: Callable[P, R]) -> Callable[P, R]:
    """A store read whose failures caused by the store's content become the one-line
    damaged error: SQLite's "malformed" (on a large store, damage in
    :data:`SCANNED_TABLES` is found by the reads), and a value of the wrong type or a
    missing row (the ValueError, TypeError, IndexError or SQLite error it caused, named by
    :func:`value_problem`; a failure it cannot explain is raised as it is)."""

    @functools.wraps(read)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        store: _Readable = args[0]  # type: ignore[assignment]
        try:
            return read(*args, **kwargs)
        except sqlite3.DatabaseError as err:
            if primary_code(err) in DAMAGED_CODES:
                raise damaged(store.path, str(err)) from None
            # "Could not decode to UTF-8": a number edited to bytes, read as text
            problem = (
                value_problem(store._conn) if isinstance(err, sqlite3.OperationalError) else None
            )
            if problem is None:
                raise
            raise damaged(store.path, problem) from None
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError):
            problem = value_problem(store._conn)
            if problem is None:
                raise
            raise damaged(store.path, problem) from None

    return checked
