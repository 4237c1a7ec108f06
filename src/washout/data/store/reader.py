"""Reading a store: :class:`Store`, opened read-only, for everything but the engine.

WAL lets ``washout status`` and ``washout analyze`` read while an experiment writes; they
open the file read-only (so read-only files and file systems work, and a reader never
changes a store) and check its integrity first. Every read that can meet damage reports it
in one line (:func:`~washout.data.store.integrity.reports_damage`).
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import stat
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from washout.data.longformat import CONTEXT_COLUMNS
from washout.data.store.columnar import Columns, read_columns
from washout.data.store.integrity import (
    DAMAGED_CODES,
    INTACT,
    UNWRITABLE_CODES,
    VALUE_RANGES,
    damaged,
    identity,
    integrity_problems,
    primary_code,
    reports_damage,
)
from washout.data.store.journal import (
    FOLDED_KEY,
    JournalDamage,
    journal_damaged,
    journal_path,
    read_pending,
)
from washout.data.store.lock import writer_of
from washout.data.store.schema import (
    CONTEXT_KINDS,
    SCHEMA_VERSION,
    SUPERSEDED,
    ExperimentRecord,
    is_store,
)
from washout.errors import StoreWriteError, WashoutError
from washout.version import __version__

if TYPE_CHECKING:
    import pandas as pd

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


def file_kind(path: Path) -> str | None:
    """What ``path`` is when it exists but is not a regular file (``a directory``, ``a
    character device``...), else None: a store is one regular file of its own."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    """A connection to the store at ``path`` (its resolved path: every name of a store
    reaches one file and one log). ``check_same_thread=False``: the engine may run in a
    helper thread when its caller is inside an event loop; one thread at a time uses the
    connection (the caller waits). Read-only through a URI (``mode=ro``): the file, its
    directory or the disk may be read-only, and a reader must never change a store."""
    target = _read_only_uri(path) if readonly else str(path.resolve())
    conn = sqlite3.connect(
        target, uri=readonly, isolation_level=None, timeout=30.0, check_same_thread=False
    )
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _read_only_uri(path: Path) -> str:
    """A read-only URI for ``path``. Where no writer can be (a read-only directory or file
    system, no ``-shm`` file, no write-ahead log with data) it is also ``immutable``: a
    reader of a WAL database must otherwise create the ``-shm`` file (SQLite, "WAL-mode
    read-only databases" in "Write-Ahead Logging"), which such a place refuses."""
    real = path.resolve()
    uri = f"{real.as_uri()}?mode=ro"
    wal, shm = Path(f"{real}-wal"), Path(f"{real}-shm")
    no_log = not wal.exists() or wal.stat().st_size == 0
    if no_log and not shm.exists() and not os.access(real.parent, os.W_OK):
        uri += "&immutable=1"
    return uri


def checked_version(conn: sqlite3.Connection, path: Path, readonly: bool) -> tuple[str, set[str]]:
    """The schema version of the store behind ``conn`` and its tables, once its integrity
    is checked (once per process and state of the file) and it is known to be a washout
    store of a version this washout reads."""
    try:
        state = identity(path)
        if state not in INTACT:
            problems = integrity_problems(conn, path, readonly)
            if problems:
                raise damaged(path, "; ".join(problems[:3]))
            INTACT.add(state)
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
        if "meta" not in tables:
            raise WashoutError(f"{path}: an SQLite database, but not a washout store")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as err:
        if primary_code(err) in DAMAGED_CODES:
            raise damaged(path, str(err)) from None
        if not readonly and primary_code(err) in UNWRITABLE_CODES:
            raise StoreWriteError(
                f"{path}: cannot open for writing: {err} (a read-only "
                "file, directory or file system?)"
            ) from None
        raise WashoutError(f"{path}: cannot read: {err}") from None
    found = "none" if row is None else str(row[0])
    if found not in [str(v) for v in range(1, SCHEMA_VERSION + 1)]:
        raise WashoutError(
            f"{path}: schema_version = {found}: this washout "
            f"({__version__}) reads schema versions 1 to {SCHEMA_VERSION}"
        )
    if found == "1" and "superseded" in {c[1] for c in conn.execute("PRAGMA table_info(trial)")}:
        raise damaged(path, "meta: schema_version = 1, but the trial table is version 2's")
    return found, tables


def existing_store(path: Path) -> None:
    """A one-line error unless ``path`` is a regular file that starts as SQLite's do."""
    kind = file_kind(path)
    if kind is not None:
        raise WashoutError(f"{path}: {kind}, not a store (a store is one SQLite file)")
    if not path.exists():
        raise WashoutError(f"{path}: no such database")
    if not is_store(path):
        raise WashoutError(f"{path}: not an SQLite database")


def _typed(rows: Iterable[tuple[Any, ...]], *kinds: type | tuple[type, ...]) -> list[Any]:
    """``rows`` as a list, each value checked against its column's Python type (TypeError
    otherwise: a value edited by hand, named by ``reports_damage``)."""
    found = list(rows)
    for row in found:
        for value, kind in zip(row, kinds, strict=True):
            if not isinstance(value, kind):
                raise TypeError(f"{value!r:.40}: expected {kind}")
    return found


_TEXT_OR_NONE = (str, type(None))
_NUMBER = (int, float)


class Store:
    """An experiment's SQLite store, opened read-only (:meth:`open`); a context manager
    that closes it. The engine writes through its subclass
    :class:`~washout.data.store.writer.StoreWriter`."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        live: str = "superseded = 0",
        columnar: bool = True,
    ) -> None:
        self._conn = conn
        self.path = path
        self._live = live
        """The SQL condition of a trial that is not superseded (every trial of a version-1
        store, which had no ``superseded`` column)."""
        self._columnar = columnar  # has the columnar tables (older stores may not)

    @staticmethod
    def open(path: str | Path, *, readonly: Literal[True] = True) -> Store:
        """Open an existing washout store read-only, with a clear message for anything
        else. Its integrity is checked first (``PRAGMA quick_check``; for a large store,
        see :data:`~washout.data.store.integrity.WHOLE_CHECK_BYTES`), so a damaged store
        says so in one line. ``readonly`` is always true: only the engine writes."""
        path = Path(path)
        existing_store(path)
        try:
            conn = connect(path, readonly)
        except sqlite3.Error as err:
            raise WashoutError(f"{path}: cannot open: {err}") from None
        try:
            found, tables = checked_version(conn, path, readonly)
        except BaseException:
            conn.close()
            raise
        live = "1" if found == "1" else "superseded = 0"
        return Store(conn, path, live=live, columnar="columnar_state" in tables and found != "1")

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """``with Store.open(path) as store:`` closes the store however the block ends."""
        self.close()

    # -- the experiment ------------------------------------------------------------------
    @reports_damage
    def experiment(self) -> ExperimentRecord:
        """What the store was created for: enough to re-plan the experiment."""
        rows = self._conn.execute(
            "SELECT name, spec_text, spec_source, seed, design, runs_per_kind, planned_trials,"
            " created, tool_version FROM experiment"
        ).fetchall()
        if len(rows) != 1:
            raise IndexError("no experiment row")
        (row,) = _typed(rows, str, str, str, int, str, int, int, str, str)
        ranges = " AND ".join(VALUE_RANGES["experiment"].values())
        if self._conn.execute(f"SELECT 1 FROM experiment WHERE NOT ({ranges})").fetchone():
            raise ValueError("an experiment that cannot be planned again")
        return ExperimentRecord(*row)

    @reports_damage
    def tests(self) -> list[tuple[str, list[str]]]:
        """Test names in spec order, each with its metric names. Their places are 0 to one
        less than the tests, each its own (readers code a trial's test by it): ValueError,
        reported as damage, where they are not."""
        rows = _typed(
            self._conn.execute("SELECT name, metrics, spec_index FROM test ORDER BY spec_index"),
            str,
            str,
            int,
        )
        if [place for _, _, place in rows] != list(range(len(rows))):
            raise ValueError("the tests' places in the spec are not 0 to n - 1")
        found = [(name, json.loads(metrics)) for name, metrics, _ in rows]
        _typed(((metrics,) for _, metrics in found), list)
        return found

    @reports_damage
    def events(self) -> list[tuple[str, str | None, str, str]]:
        """The log: (time, worker, kind, message), oldest first."""
        return _typed(
            self._conn.execute("SELECT time, worker, kind, message FROM event ORDER BY id"),
            str,
            _TEXT_OR_NONE,
            str,
            str,
        )

    @reports_damage
    def spec_redacted(self) -> list[str]:
        """What was masked in the stored spec (``env API_TOKEN``, ``a password in a URL``):
        empty if it is as written. A run restores them from the spec file to resume."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'spec_redacted'").fetchone()
        found = [] if row is None else json.loads(row[0])
        return [what for (what,) in _typed(((w,) for w in found), str)]

    @reports_damage
    def context(self) -> tuple[list[str], int] | None:
        """What the experiment randomizes per trial (``[experiment] context``, or ``run
        --context``: washout.harness.plan.CONTEXT_KINDS) and its number of levels; None
        where nothing."""
        rows = dict(
            self._conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('context', 'context_levels')"
            ).fetchall()
        )
        if "context" not in rows:
            return None
        kinds = [kind for (kind,) in _typed(((k,) for k in json.loads(rows["context"])), str)]
        if any(kind not in CONTEXT_KINDS for kind in kinds) or not kinds:
            raise ValueError(f"meta: context = {rows['context']!r}")
        return kinds, int(rows.get("context_levels", ""))

    def context_columns(self) -> tuple[str, ...]:
        """The long format's context columns of this store's trials (none if it
        randomizes nothing)."""
        kinds = (self.context() or ([], 0))[0]
        return tuple(c for c, kind in zip(CONTEXT_COLUMNS, CONTEXT_KINDS) if kind in kinds)

    @reports_damage
    def sessions(self) -> list[str]:
        """The tokens of every session that has run trials into this store, oldest first."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'sessions'").fetchone()
        found = [] if row is None else json.loads(row[0])
        return [token for (token,) in _typed(((t,) for t in found), str)]

    @reports_damage
    def environments(self) -> list[dict[str, Any]]:
        """Every captured environment, oldest first, with its worker's name."""
        rows = self._conn.execute(
            "SELECT w.name, w.host, e.run_index, e.captured, e.data, e.fingerprint"
            " FROM environment e JOIN worker w ON w.id = e.worker_id ORDER BY e.id"
        )
        return [
            {
                "worker": n,
                "host": h,
                "run_index": r,
                "captured": c,
                "data": json.loads(d),
                "fingerprint": f,
            }
            for n, h, r, c, d, f in _typed(rows, str, str, (int, type(None)), str, str, str)
        ]

    @reports_damage
    def workers(self) -> list[tuple[int, str, str, str | None]]:
        """(id, name, host, latest fingerprint) of every worker, in the order they came."""
        return _typed(
            self._conn.execute("SELECT id, name, host, fingerprint FROM worker ORDER BY id"),
            int,
            str,
            str,
            _TEXT_OR_NONE,
        )

    # -- progress ------------------------------------------------------------------------
    @reports_damage
    def slot_attempts(self, worker_id: int) -> dict[tuple[int, int], list[str]]:
        """Statuses of every current (not superseded) attempt per (run index, position) of
        a worker, oldest first."""
        rows = self._conn.execute(
            "SELECT r.idx, t.position, t.status FROM trial t JOIN run r ON r.id = t.run_id"
            f" WHERE r.worker_id = ? AND {self._live} ORDER BY t.id",
            (worker_id,),
        )
        slots: dict[tuple[int, int], list[str]] = {}
        for idx, pos, status in _typed(rows, int, int, str):
            slots.setdefault((idx, pos), []).append(status)
        return slots

    @reports_damage
    def counts(self) -> dict[str, int]:
        """Trials per status, the superseded ones under ``superseded`` alone."""
        rows = self._conn.execute(
            f"SELECT CASE WHEN {self._live} THEN status ELSE '{SUPERSEDED}' END AS s, count(*)"
            " FROM trial GROUP BY s"
        )
        return dict(_typed(rows, str, int))

    def journaled(self) -> int:
        """Finished trials in the store's trial journal, not folded into it yet
        (:mod:`~washout.data.store.journal`): a live writer folds them after trials and
        between runs, ``resume`` what a stopped one left; no read of the store sees them
        before. A live writer that starts the journal afresh meanwhile is read again."""
        try:
            try:
                return self._pending_finished()
            except JournalDamage:
                if writer_of(self.path) is None:
                    raise
                time.sleep(0.05)  # a live writer may have started it afresh meanwhile
                return self._pending_finished()
        except JournalDamage as err:
            raise journal_damaged(self.path, err) from None
        except OSError as err:
            raise WashoutError(f"{journal_path(self.path)}: cannot read: {err.strerror}") from None

    def _pending_finished(self) -> int:
        """Finished trials in the journal after the mark of its last fold."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (FOLDED_KEY,)).fetchone()
        folded = row[0] if row is not None and isinstance(row[0], str) else None
        return read_pending(self.path, folded).finished

    @reports_damage
    def runs_done(self) -> int:
        """Runs every trial of which is done (status ``done``), over every worker."""
        (done,) = self._conn.execute("SELECT count(*) FROM run WHERE status = 'done'").fetchone()
        return int(done)

    @reports_damage
    def finished_durations(self) -> list[float]:
        """Durations of finished trials (for an ETA)."""
        rows = self._conn.execute(
            "SELECT duration FROM trial WHERE status IN ('ok','failed','timeout')"
            " AND duration IS NOT NULL"
        )
        return [float(d) for (d,) in _typed(rows, _NUMBER)]

    @reports_damage
    def failures(self, limit: int = 20) -> list[tuple[str, int, int, str, str, str]]:
        """Recent failed/timeout/interrupted trials: (worker, run, position, test, status,
        reason); warmups are not among them."""
        rows = self._conn.execute(
            "SELECT w.name, r.idx, t.position, t.test, t.status, t.reason FROM trial t"
            " JOIN run r ON r.id = t.run_id JOIN worker w ON w.id = r.worker_id"
            f" WHERE t.status NOT IN ('ok', 'running', 'warmup') AND {self._live}"
            " ORDER BY t.id DESC LIMIT ?",
            (limit,),
        )
        return _typed(rows, str, int, int, str, str, str)

    @reports_damage
    def last_outputs(self) -> list[tuple[str, str, str | None, str | None]]:
        """(test, status, stdout tail, stderr tail) of each test's last finished trial."""
        rows = self._conn.execute(
            "SELECT test, status, stdout_tail, stderr_tail FROM trial WHERE id IN"
            " (SELECT max(id) FROM trial WHERE status != 'running' GROUP BY test) ORDER BY id"
        )
        return _typed(rows, str, str, _TEXT_OR_NONE, _TEXT_OR_NONE)

    @reports_damage
    def tests_without_success(self) -> list[tuple[str, int, str, str, str | None]]:
        """Tests whose every current finished trial failed or timed out, with their trial
        count and their first failure: (test, trials, status, reason, stderr tail)."""
        rows = self._conn.execute(
            "SELECT t.test, count(*), min(t.id) FROM trial t JOIN test s ON s.name = t.test"
            f" WHERE t.status IN ('ok', 'failed', 'timeout') AND {self._live}"
            " GROUP BY t.test HAVING sum(t.status = 'ok') = 0 ORDER BY s.spec_index"
        ).fetchall()
        return [
            (
                test,
                n,
                *_typed(
                    self._conn.execute(
                        "SELECT status, reason, stderr_tail FROM trial WHERE id = ?", (first,)
                    ),
                    str,
                    str,
                    _TEXT_OR_NONE,
                )[0],
            )
            for test, n, first in _typed(rows, str, int, int)
        ]

    @reports_damage
    def ok_durations(self, worker_id: int) -> list[tuple[str, float]]:
        """(test, duration) of a worker's current ok trials, in the order they were
        written (the idle arm's lengths: :mod:`washout.harness.idle`)."""
        rows = self._conn.execute(
            "SELECT t.test, t.duration FROM trial t JOIN run r ON r.id = t.run_id"
            f" WHERE r.worker_id = ? AND t.status = 'ok' AND {self._live}"
            " AND t.duration IS NOT NULL ORDER BY t.id",
            (worker_id,),
        )
        return [(test, float(d)) for test, d in _typed(rows, str, _NUMBER)]

    # -- the long format -----------------------------------------------------------------
    @reports_damage
    def long_frame(
        self,
        include_superseded: bool = False,
        columns: Collection[str] | None = None,
        resources: bool = False,
    ) -> pd.DataFrame:
        """The long format (see :mod:`washout.data.longformat`): one row per trial and metric,
        ordered by worker, run, position and attempt; label columns as categoricals
        (:data:`washout.data.longformat.LABELS`), time stamps as Python strings.

        Trials of an interrupted run's earlier attempts are left out, or with
        ``include_superseded`` given with status ``superseded``. ``columns``: the columns
        the caller needs; the time stamps (a third of the reading time of a large store)
        are read only when asked for, every other column always. ``resources``: every trial
        also has a row per :data:`~washout.data.longformat.RESOURCE_METRICS` (NaN where the
        executor could not measure it) and per health measure taken around it
        (:data:`~washout.data.health.HEALTH_METRICS`; none for a measure not taken).

        Its queries read one snapshot (one read transaction), so trials a writer finishes
        meanwhile cannot pair one query's rows with another's. The cyclic garbage collector
        is paused meanwhile: the millions of row tuples are acyclic, and its repeated
        passes over them took most of the time.
        """
        from washout.data.store.frame import long_frame

        snapshot = not self._conn.in_transaction
        if snapshot:
            self._conn.execute("BEGIN")
        try:
            stamps = columns is None or any(c in columns for c in ("started", "ended"))
            with collector_paused():
                return long_frame(
                    self._conn,
                    self._live,
                    self.tests(),
                    self._columns(),
                    include_superseded,
                    stamps,
                    resources,
                    self.context_columns(),
                )
        finally:
            if snapshot and self._conn.in_transaction:
                self._conn.execute("ROLLBACK")  # it only read

    def _columns(self) -> Columns | None:
        """The current columnar copy, if the store has one (older stores may not)."""
        return read_columns(self._conn, self.path) if self._columnar else None


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while many acyclic objects are made (rows read
    from SQLite, a journal's statements decoded and folded): its passes over them find
    nothing to free and took about a tenth of a fold's time (bench/RESULTS.md, "Trimming
    the fold"). Left as it was found, paused or not."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_long(
    path: str | Path,
    include_superseded: bool = False,
    columns: Collection[str] | None = None,
    resources: bool = False,
) -> pd.DataFrame:
    """The long format of a store file (for analysis, reports, export), read-only;
    ``columns`` and ``resources`` as :meth:`Store.long_frame` takes them."""
    with Store.open(path) as store:
        return store.long_frame(include_superseded, columns, resources)
