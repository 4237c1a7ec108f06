"""Writing a store: :class:`StoreWriter`, the engine's, one process at a time.

A process killed at any moment loses at most the trial in flight: a trial is recorded as
``running`` when it starts and again, with its metrics, when it ends, each time in the
trial journal (:mod:`~washout.data.store.journal`: one write(2), where a commit costs ten
times more), which every transaction folds into SQLite first; the engine folds it between
runs when due (:meth:`StoreWriter.fold_if_due`), and :meth:`~StoreWriter.close` and
:meth:`~StoreWriter.reopen` (``resume``) fold what is left. ``resume`` marks rows left
``running`` as ``interrupted`` and re-runs their runs whole, keeping the earlier partial
attempts marked ``superseded``. ``synchronous=NORMAL`` in WAL mode survives a killed process
(the OS keeps the log) without an fsync per commit, as the journal does; a power cut can
lose the last trials, never corrupt the file (SQLite documentation, "Write-Ahead Logging"
and PRAGMA synchronous).

A new store appears under its name whole: its first image (schema, experiment, tests) is
written into an unnamed file and linked in once complete (:func:`_place`), so a process
killed while creating it leaves nothing, or a store ``resume`` takes.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from washout.data.longformat import CONTEXT_COLUMNS
from washout.data.store.batch import RAW, encode_facts, expand
from washout.data.store.columnar import COLUMNAR_SCHEMA, write_columns
from washout.data.store.integrity import UNWRITABLE_CODES, damaged, primary_code, value_problem
from washout.data.store.journal import (
    FINISH,
    FOLDED_KEY,
    JournalDamage,
    JournalWriter,
    Scalar,
    Statement,
    folded_mark,
    journal_damaged,
    read_pending,
)
from washout.data.store.lock import WriterLock, describe_writer, only_name, writer_of
from washout.data.store.reader import (
    Store,
    checked_version,
    collector_paused,
    connect,
    existing_store,
    file_kind,
)
from washout.data.store.schema import (
    SCHEMA_VERSION,
    ExperimentRecord,
    TrialContext,
    new_store_image,
)
from washout.errors import (
    StoreBusyError,
    StoreError,
    StoreExistsError,
    StoreWriteError,
    WashoutError,
)

log = logging.getLogger(__name__)

NextTrial = tuple[int, int, str, int, datetime]
"""A trial to begin: (run id, position, test name, attempt, start time)."""

CHECKPOINT_PAGES = 4300
"""Log pages between two checkpoints while an experiment runs
(:meth:`StoreWriter.hold_checkpoints`): 17 MB, what 1,000 trials wrote when each was its
own commit (4-4.3 pages a trial, measured), where SQLite's automatic checkpoint comes every
1,000 pages. Larger gains nothing: a checkpoint's cost grew with the pages it copied (45 ms
per 1,000 commits here). The pages a trial write takes are learned at each checkpoint (its
log's length), never more than :data:`FIRST_PAGES_PER_WRITE`: folds of 40 trials (the
quick form) wrote 0.35 pages a write, folds of one trial 3.1 (measured), so a fixed count
of writes checkpointed the quick form every ~350 pages, paying a checkpoint's syncs
(5-10 ms here) every 500 trials."""
FIRST_PAGES_PER_WRITE = CHECKPOINT_PAGES / 1000
"""Pages a trial write is taken to cost until a checkpoint tells (a checkpoint after 1,000
writes, as before they were learned)."""

FOLD_SECONDS = 0.1
"""After a finished trial and between two runs, the journal is folded into SQLite once
this long has passed since the last fold (:meth:`StoreWriter.fold_if_due`): ``washout
status`` and readers of a live store see a trial at most this much (and the trial after
it) late, while trials of a short command (a no-op: 0.5-1.3 ms) pay one commit per
hundred or more of them, not one each. A trial's start never folds: position 0 follows its
reset as later positions follow their predecessor, by one append."""

RESTART_BYTES = 16 << 20
"""A journal this large is started afresh after a fold (about 30,000 trials of a wall-only
test); until then a fold reads it from where the last one stopped."""

STATEMENTS: dict[str, str] = {
    "environment": "INSERT INTO environment (worker_id, run_index, captured, data, fingerprint)"
    " VALUES (?, ?, ?, ?, ?)",
    "fingerprint": "UPDATE worker SET fingerprint = ? WHERE id = ?",
    "run": "INSERT INTO run (id, worker_id, idx, order_kind, permutation, status)"
    " VALUES (?, ?, ?, ?, ?, 'pending')",
    "reset": "UPDATE run SET reset_started = ?, reset_ended = ?, reset_info = ?,"
    " status = 'running' WHERE id = ?",
    "run_status": "UPDATE run SET status = ? WHERE id = ?",
    "whole_run": "INSERT INTO run (id, worker_id, idx, order_kind, permutation, reset_started,"
    " reset_ended, reset_info, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "begin_trial": "INSERT INTO trial (id, run_id, position, test, attempt, status, started)"
    " VALUES (?, ?, ?, ?, ?, 'running', ?)",
    "trial": "INSERT INTO trial (id, run_id, position, test, attempt, status, reason,"
    " exit_code, started, ended, duration, stdout_tail, stderr_tail, cpus,"
    " context_env_bytes, context_cwd_bytes, context_aslr)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    FINISH: "UPDATE trial SET status = ?, reason = ?, exit_code = ?, started = ?,"
    " ended = ?, duration = ?, stdout_tail = ?, stderr_tail = ?, cpus = ?,"
    " context_env_bytes = ?, context_cwd_bytes = ?, context_aslr = ? WHERE id = ?",
    "metric": "INSERT INTO metric (trial_id, name, value) VALUES (?, ?, ?)",
}
"""Every statement a deferred write or a journal record may hold, by name: a record names
its statements and gives their parameters, never SQL. In the order a fold applies them
(:meth:`StoreWriter._run`): a table's rows before the rows that refer to them. ``trial``
is a trial's start and finish as one row, ``whole_run`` a run's row with its reset and
status, which a fold applies in their place when all are in it (the journal holds them as
statements of their own: :func:`_whole_rows`)."""
_RANK = {name: rank for rank, name in enumerate(STATEMENTS)}
_ROWS: dict[str, tuple[str, int]] = {
    "run": ("run", 0),
    "whole_run": ("run", 0),
    "reset": ("run", -1),
    "run_status": ("run", -1),
    "begin_trial": ("trial", 0),
    "trial": ("trial", 0),
    FINISH: ("trial", -1),
}
"""The statements that change a row that statements of another kind change too: its table,
and where its id is among their parameters."""


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="microseconds")


def _context(context: TrialContext | None) -> tuple[int | None, int | None, bool | None]:
    """A trial's context columns (:data:`~washout.data.longformat.CONTEXT_COLUMNS`)."""
    return (
        (None, None, None)
        if context is None
        else (context.env_bytes, context.cwd_bytes, context.aslr)
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _exists(path: Path) -> StoreExistsError:
    """A new store's path is taken: say by whom, and how to continue that experiment."""
    holder = writer_of(path)
    return StoreExistsError(
        f"{path}: already exists"
        + ("" if holder is None else f", in use by {describe_writer(holder)}")
        + f"; choose another --db, or 'washout resume {path}' to continue that experiment"
    )


def _place(image: bytes, path: Path) -> None:
    """A new file ``path`` holding ``image``, appearing under its name only whole: written
    into an unnamed file of its directory (``O_TMPFILE``, open(2)) and linked in (linkat(2),
    which never replaces a file: FileExistsError if ``path`` is taken). Where the file
    system has no unnamed files, a hidden temporary file beside it is linked, then removed."""
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    temporary = None
    try:
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644, dir_fd=directory)
        except OSError as err:
            if err.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            temporary = f".{path.name}.{secrets.token_hex(4)}.new"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=directory)
        try:
            view = memoryview(image)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            # linkat(2) with AT_SYMLINK_FOLLOW (a dir_fd makes Python use it): the unnamed
            # file's /proc link names the file itself
            source = f"/proc/self/fd/{fd}" if temporary is None else temporary
            os.link(source, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        finally:
            os.close(fd)
            if temporary is not None:
                os.unlink(temporary, dir_fd=directory)
    finally:
        os.close(directory)


class StoreWriter(Store):
    """The store's one writer: the engine's only. It holds the store's writer lock from
    :meth:`create` or :meth:`reopen` to :meth:`close`, and every write is a committed
    transaction (or goes with the next one, ``defer``)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, lock: WriterLock) -> None:
        super().__init__(conn, path)
        self._lock = lock
        self._journal = JournalWriter(path)
        self._unfolded = True
        """Whether the journal may hold records not folded yet (at first: an earlier
        writer's)."""
        self._folded_at = time.monotonic()
        self._deferred: list[Statement] = []
        """Writes that go with the next transaction or journal record (``defer`` of
        :meth:`_write`)."""
        self._journaled: list[Statement] = []
        """The statements of the journal's records not folded yet, as this writer appended
        them (:meth:`_fold` applies these, not the file's, once the journal is its own)."""
        self._journaled_records = 0
        self._next_trial: int | None = None
        """The id the next trial gets (chosen by the writer, as run ids are)."""
        self._runs: dict[tuple[int, int], int] | None = None
        """Every run's id by (worker id, run index), read once by the writer and kept up to
        date by it (a deferred row is not in the table yet): :meth:`run_id`."""
        self._next_run = 0
        self._fingerprints: dict[int, str] = {}
        """Each worker's fingerprint as this writer last recorded it: the worker's row is
        updated only when it changes (forgotten when a write is refused, since what was
        deferred with it is lost)."""
        self._commits = 0
        """Trial writes (journal records and commits) since the log was last folded into
        the file (:meth:`fold_if_due`)."""
        self._pages_per_write = FIRST_PAGES_PER_WRITE
        """Log pages per trial write at the last checkpoint (:data:`CHECKPOINT_PAGES`)."""

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | Path,
        record: ExperimentRecord,
        tests: Iterable[tuple[str, str, list[str]]],
        meta: dict[str, str] | None = None,
    ) -> StoreWriter:
        """Create a new store, holding its writer lock; refuses to touch an existing file
        (never overwrite), also when another process creates the same path at the same
        instant (the lock, then the link, let one of them win). ``meta``: more rows of the
        ``meta`` table."""
        path = Path(path)
        kind = file_kind(path)
        if kind is not None:
            raise StoreError(f"{path}: {kind}; a store is a file of its own: give a new file name")
        if os.path.lexists(path):
            raise _exists(path)
        image = new_store_image(record, tests, COLUMNAR_SCHEMA, meta)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreWriteError(f"{path}: cannot create: {err.strerror}") from None
        try:
            lock = WriterLock.take(path, attempts=1)  # taken: another creates it now
        except StoreBusyError:
            raise _exists(path) from None
        try:
            _place(image, path)
        except FileExistsError:
            lock.release()
            raise _exists(path) from None
        except OSError as err:
            lock.release()
            raise StoreWriteError(f"{path}: cannot create: {err.strerror}") from None
        try:
            store = cls(connect(path, readonly=False), path, lock)
        except BaseException:
            lock.release()
            path.unlink(missing_ok=True)  # a store that never held a trial
            raise
        store._unfolded = False  # a journal there is a removed store's: never folded here
        try:
            store._log_ahead()
            store._restart_journal()  # a journal left by a removed store of this name
        except BaseException:
            store.close()
            for made in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), store._journal.path):
                made.unlink(missing_ok=True)  # a store that never held a trial
            raise
        return store

    @classmethod
    def reopen(cls, path: str | Path) -> StoreWriter:
        """Open an existing store to write it (``washout resume``): its integrity is
        checked (the whole file), then its writer lock taken (failing at once, naming the
        live holder), then every value checked, before anything is written. A version-1
        store gains the ``superseded`` column (version 2), an older store the context
        columns (version 3), a store older than the columnar copy its tables."""
        path = Path(path)
        existing_store(path)
        try:
            conn = connect(path, readonly=False)
        except sqlite3.Error as err:
            raise WashoutError(f"{path}: cannot open: {err}") from None
        try:
            found, tables = checked_version(conn, path, readonly=False)
            only_name(path)
            lock = WriterLock.take(path)
        except BaseException:
            conn.close()
            raise
        try:
            store = cls(conn, path, lock)
        except BaseException:
            lock.release()
            conn.close()
            raise
        try:
            problem = value_problem(conn)
            if problem is not None:
                raise damaged(path, problem)
            store._log_ahead()
            if found != str(SCHEMA_VERSION) or "columnar_state" not in tables:
                with store._transaction() as c:
                    if found == "1":
                        c.execute(
                            "ALTER TABLE trial ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0"
                        )
                    if found in ("1", "2"):
                        for column in CONTEXT_COLUMNS:
                            c.execute(f"ALTER TABLE trial ADD COLUMN {column} INTEGER")
                    if found != str(SCHEMA_VERSION):
                        c.execute(
                            "UPDATE meta SET value = ? WHERE key = 'schema_version'",
                            (str(SCHEMA_VERSION),),
                        )
                    if "columnar_state" not in tables:  # a store older than the columnar copy
                        for statement in COLUMNAR_SCHEMA:
                            c.execute(statement)
            with store._transaction():  # what the journal holds (a killed writer's)
                pass
            store._restart_journal()
        except BaseException:
            store._journal.close()
            store._lock.release()
            conn.close()
            raise
        return store

    def _log_ahead(self) -> None:
        """WAL journal, ``synchronous = NORMAL`` (a new store's image is in rollback mode)."""
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.OperationalError as err:
            raise self._write_error(err) from None

    def close(self) -> None:
        """Commit any deferred writes, bring the columnar copy up to date (the writer's
        session ends), give up the writer lock and close the connection; safe to call twice.

        A copy that cannot be written (disk full, read-only file) is left as it was: it is a
        cache, readers fall back to the SQL tables, and the session's trials are intact."""
        try:
            try:
                if self._lock.held:
                    if self._deferred or self._unfolded:
                        with self._transaction():
                            pass
                    self._restart_journal()
            except (StoreWriteError, sqlite3.Error):
                pass  # what was recorded holds (the journal is folded by 'resume')
            if self._lock.held:
                try:
                    self.write_columns()
                except (WashoutError, sqlite3.Error) as err:
                    log.warning("%s: columnar copy not written: %s", self.path, err)
        finally:
            self._deferred.clear()
            self._journal.close()
            self._lock.release()
            super().close()

    def __enter__(self) -> StoreWriter:
        return self

    # -- transactions --------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic, committed unit of work (BEGIN IMMEDIATE ... COMMIT), which first
        folds the journal (:meth:`_fold`), then commits the writes deferred until then
        (``defer`` of :meth:`_write`), before its own: every write and read after it sees
        every trial recorded before.

        A write the disk or file system refuses (full, read-only, I/O error) rolls back
        and becomes a one-line :class:`StoreWriteError`: every earlier commit is intact,
        and so is the journal.
        """
        folded = False
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            deferred, self._deferred = self._deferred, []  # tried once, with this transaction
            try:
                folded = self._fold()
                self._run(deferred)
                yield self._conn
            except BaseException:
                self._fingerprints.clear()
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            self._commits += 1
        except sqlite3.OperationalError as err:
            self._fingerprints.clear()
            if self._conn.in_transaction:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite rolled back on its own (it may, on SQLITE_FULL)
            raise self._write_error(err) from None
        if folded:
            self._unfolded = False
            self._journaled, self._journaled_records = [], 0
            self._folded_at = time.monotonic()
            if self._journal.size > RESTART_BYTES:
                self._restart_journal()

    def _fold(self) -> bool:
        """Inside a transaction: apply the journal's records not folded yet, drop a last
        record cut short (a killed writer's, noted as an event) and mark how far it is
        folded (``meta``), so that a writer killed after the commit never applies a
        record twice. Whether it folded.

        Once this writer has started the journal afresh, every record after its header is
        one it appended whole, and it holds them as it wrote them: they are applied from
        memory, not read back and decoded (most of a fold's cost: bench/RESULTS.md,
        "Engine overhead per trial"). The journal as a file is read when a writer opens
        the store (an earlier writer's records)."""
        if not self._unfolded:
            return False
        token, end, records = self._journal.token, self._journal.size, self._journaled_records
        torn = 0
        try:
            with collector_paused():
                if token is not None:
                    self._run(self._journaled)
                else:
                    row = self._conn.execute(
                        "SELECT value FROM meta WHERE key = ?", (FOLDED_KEY,)
                    ).fetchone()
                    pending = read_pending(self.path, None if row is None else row[0])
                    self._run([statement for record in pending.records for statement in record])
                    token, end, records, torn = (
                        pending.token,
                        pending.end,
                        len(pending.records),
                        pending.torn,
                    )
        except (
            JournalDamage,
            KeyError,
            ValueError,
            TypeError,
            sqlite3.IntegrityError,
            sqlite3.ProgrammingError,
        ) as err:
            raise journal_damaged(self.path, err) from None
        if torn and token is not None:
            self._conn.execute(
                "INSERT INTO event (time, worker, kind, message) VALUES (?, NULL, ?, ?)",
                (
                    _now(),
                    "resume",
                    f"the trial journal's last record was cut short ({torn} bytes, "
                    "written when washout was killed): dropped",
                ),
            )
        if token is not None:
            self._conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (FOLDED_KEY, folded_mark(token, end)),
            )
        self._commits += records
        return True

    def _run(self, statements: list[Statement]) -> None:
        """Statements as one ``executemany`` per kind, the kinds in the order of
        :data:`STATEMENTS` (a row before the rows that refer to it), each kind's in their
        order: a fold of a run per trial (the quick form) made seven calls per trial in
        the journal's order, where a fold now makes eight in all. Two statements that
        change one row (:data:`_ROWS`) keep their order: one that the kinds' order would
        move before an earlier one of its row applies what was gathered first."""
        groups: dict[str, list[tuple[Scalar, ...]]] = {}
        ranks: dict[tuple[str, Scalar], int] = {}
        """The last kind (its rank) gathered for each row of :data:`_ROWS`."""
        for name, params in _whole_rows(_expanded(statements)):
            rank = _RANK[name]
            row = _ROWS.get(name)
            if row is not None:
                key = (row[0], params[row[1]])
                if ranks.get(key, rank) > rank:
                    self._apply(groups)
                    groups, ranks = {}, {}
                ranks[key] = rank
            if name in groups:
                groups[name].append(params)
            else:
                groups[name] = [params]
        self._apply(groups)

    def _apply(self, groups: dict[str, list[tuple[Scalar, ...]]]) -> None:
        """Each kind's statements as one ``executemany``, in the order of the kinds."""
        for name, sql in STATEMENTS.items():
            rows = groups.get(name)
            if rows:
                self._conn.executemany(sql, rows)

    def _restart_journal(self) -> None:
        """Start the journal afresh (everything in it is folded and marked): when a writer
        opens the store (a record cut short is gone with it), closes it, and once it holds
        :data:`RESTART_BYTES`; not after every fold, since truncating a file with pages
        in the cache took milliseconds here (4.6 ms a time, measured under load)."""
        try:
            self._journal.restart()
        except OSError as err:
            raise self._journal_error(err) from None
        self._unfolded = False
        self._journaled, self._journaled_records = [], 0
        self._folded_at = time.monotonic()

    def fold(self) -> None:
        """Fold what the journal holds into SQLite now: before a local trial that may run
        :data:`FOLD_SECONDS` or longer, so that readers see it ``running`` while it runs
        (washout does no work inside a local trial's window), and before every read
        through the writer."""
        if self._unfolded:
            with self._transaction():
                pass

    def fold_during_trial(self) -> None:
        """Fold the journal while a trial runs (the engine calls this once the trial has run
        :data:`FOLD_SECONDS`), so that readers see it ``running`` and what came before it;
        a fold the store refuses now is tried again after the trial, which reports it."""
        try:
            self._fold_when_due()
        except StoreWriteError as err:
            log.warning("%s: fold during a trial: %s", self.path, err)

    def _fold_when_due(self) -> None:
        """Fold the journal if :data:`FOLD_SECONDS` passed since the last fold."""
        if self._unfolded and time.monotonic() - self._folded_at >= FOLD_SECONDS:
            with self._transaction():
                pass

    def _append(self, statements: list[Statement]) -> None:
        """The deferred writes and ``statements`` as one journal record, one write(2)."""
        deferred, self._deferred = self._deferred, []
        try:
            self._journal.append(deferred + statements)
        except OSError as err:
            self._fingerprints.clear()
            raise self._journal_error(err) from None
        self._journaled += deferred
        self._journaled += statements
        self._journaled_records += 1
        self._unfolded = True

    def _write(self, statements: list[Statement], defer: bool) -> None:
        """Statements in one transaction now, or with ``defer`` in the next transaction or
        journal record rather than one of their own: a run's row and records before its
        first trial go with that trial's start, and the run's end with its last trial's
        result. Either way they are recorded before the next trial starts (or when the
        store is closed)."""
        self._deferred += statements
        if not defer:
            with self._transaction():
                pass

    def _journal_error(self, err: OSError) -> StoreWriteError:
        """A refused journal write as a one-line error; a full disk in the words the store
        itself uses for one (SQLite's), whichever file filled it."""
        why = f"database or disk is full ({err.strerror})" if err.errno == errno.ENOSPC else None
        return StoreWriteError(
            f"{self._journal.path}: cannot write: {why or err.strerror}; every trial recorded "
            f"before is intact: make room or fix the file, then 'washout resume {self.path}'"
        )

    def _write_error(self, err: sqlite3.OperationalError) -> Exception:
        """A refused write as a one-line error (or ``err`` itself if it is not one)."""
        if primary_code(err) not in UNWRITABLE_CODES:
            return err
        return StoreWriteError(
            f"{self.path}: cannot write: {err}; every trial committed before is intact: "
            f"make room or fix the file, then 'washout resume {self.path}'"
        )

    # -- checkpoints ---------------------------------------------------------------------
    def hold_checkpoints(self) -> None:
        """Fold the log into the store only when :meth:`fold_if_due` says so, not when
        a commit happens to fill it (SQLite's automatic checkpoint, every 1,000 pages).

        A checkpoint copies the log into the file and syncs both: 15-555 ms stalls
        between two trials of a run were measured (bench/RESULTS.md, "Engine overhead per
        trial"); the engine calls :meth:`fold_if_due` before a run's environment check
        and reset, where a pause changes nothing that is measured. Fewer, larger
        checkpoints also copy a page changed by many commits once. A crash loses nothing:
        the log is the committed data (SQLite documentation, "Write-Ahead Logging")."""
        self._conn.execute("PRAGMA wal_autocheckpoint = 0")

    def fold_if_due(self) -> None:
        """Between two runs: fold the journal into SQLite if :data:`FOLD_SECONDS` passed
        since the last fold (as after every finished trial), then the log into the store's
        file once it holds about :data:`CHECKPOINT_PAGES` pages (the trial writes since the
        last time, by the pages a write took then); PASSIVE, so a reader of the live store
        (``washout status``) is never waited for (what it still reads is folded next
        time)."""
        self._fold_when_due()
        if self._commits * self._pages_per_write >= CHECKPOINT_PAGES:
            try:
                _, log, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.OperationalError as err:
                raise self._write_error(err) from None
            if log > 0:
                self._pages_per_write = min(log / self._commits, FIRST_PAGES_PER_WRITE)
            self._commits = 0

    def write_columns(self) -> None:
        """Bring the columnar copy (:mod:`~washout.data.store.columnar`) up to every trial
        before the first one still running, in one transaction: a writer killed meanwhile
        leaves the copy as it was. Called when the writer's session ends (:meth:`close`:
        end of run, resume or sweep batch); a session that added no trial costs a query."""
        with self._transaction() as c:
            write_columns(c)

    # -- the experiment's records ----------------------------------------------------------
    def event(self, kind: str, message: str, worker: str | None = None) -> None:
        """A line of the store's log (setup, resume, rerun, mismatch, ...)."""
        with self._transaction() as c:
            c.execute(
                "INSERT INTO event (time, worker, kind, message) VALUES (?, ?, ?, ?)",
                (_now(), worker, kind, message),
            )

    def add_session(self, token: str) -> None:
        """Record the token that marks the processes of this session's trials (before any
        runs), so a later session can kill what they left running if this one dies."""
        with self._transaction() as c:
            c.execute(
                "INSERT INTO meta (key, value) VALUES ('sessions', json_array(?))"
                " ON CONFLICT (key) DO UPDATE SET value = json_insert(value, '$[#]', ?)",
                (token, token),
            )

    def worker_id(self, name: str, host: str) -> int:
        """The worker's row id, created the first time."""
        with self._transaction() as c:
            c.execute("INSERT OR IGNORE INTO worker (name, host) VALUES (?, ?)", (name, host))
            return int(c.execute("SELECT id FROM worker WHERE name = ?", (name,)).fetchone()[0])

    def record_environment(
        self,
        worker_id: int,
        run_index: int | None,
        data: dict[str, Any],
        fingerprint: str,
        *,
        defer: bool = False,
    ) -> None:
        """A worker's captured environment (before run ``run_index``; None: at the start),
        and its fingerprint as the worker's latest (written when it changed)."""
        statements: list[Statement] = [
            ("environment", (worker_id, run_index, _now(), encode_facts(data), fingerprint))
        ]
        if self._fingerprints.get(worker_id) != fingerprint:
            statements.append(("fingerprint", (fingerprint, worker_id)))
            self._fingerprints[worker_id] = fingerprint
        self._write(statements, defer)

    # -- runs and trials -----------------------------------------------------------------
    def run_id(
        self,
        worker_id: int,
        index: int,
        order: str,
        permutation: list[str],
        *,
        defer: bool = False,
    ) -> int:
        """The run's row, created as ``pending`` the first time (with ``defer``, created with
        the next transaction: the run's first trial's start). Its id is chosen here, which
        this process may do as the store's one writer."""
        run, row = self._run_row(worker_id, index, order, permutation)
        if row is not None:
            self._write([row], defer)
        return run

    def _run_row(
        self, worker_id: int, index: int, order: str, permutation: list[str]
    ) -> tuple[int, Statement | None]:
        """A run's id, and the statement that makes its row when it has none yet."""
        if self._runs is None:  # read once, not two queries per run
            rows = self._conn.execute("SELECT worker_id, idx, id FROM run")
            self._runs = {(w, i): run for w, i, run in rows}
            self._next_run = max(self._runs.values(), default=0) + 1
        key = (worker_id, index)
        if key in self._runs:
            return self._runs[key], None
        new = self._runs[key] = self._next_run
        self._next_run += 1
        return new, ("run", (new, worker_id, index, order, json.dumps(permutation)))

    def record_reset(
        self, run_id: int, started: datetime, ended: datetime, info: str, *, defer: bool = False
    ) -> None:
        """The run's reset: when it ran and what it said; the run is then ``running``."""
        self._write([("reset", (_iso(started), _iso(ended), info, run_id))], defer)

    def set_run_status(self, run_id: int, status: str, *, defer: bool = False) -> None:
        """``done``, ``aborted`` or ``warmup``."""
        self._write([("run_status", (status, run_id))], defer)

    def begin_trial(
        self, run_id: int, position: int, test: str, attempt: int, started: datetime
    ) -> int:
        """Record a trial as ``running`` (before it runs: a crash leaves it to be seen), with
        the writes deferred until then, in one journal record; its id."""
        statement, trial_id = self._running((run_id, position, test, attempt, started))
        self._append([statement])
        return trial_id

    def _running(self, trial: NextTrial) -> tuple[Statement, int]:
        """The statement that records ``trial`` as ``running``, and the id it gets."""
        trial_id = self.planned_trial()
        run_id, position, test, attempt, started = trial
        return ("begin_trial", (trial_id, run_id, position, test, attempt, _iso(started))), trial_id

    def finish_trial(
        self,
        trial_id: int,
        *,
        status: str,
        reason: str,
        exit_code: int | None,
        started: datetime,
        ended: datetime,
        duration: float,
        stdout_tail: str,
        stderr_tail: str,
        cpus: str | None,
        metrics: dict[str, float],
        context: TrialContext | None = None,
        then: NextTrial | None = None,
    ) -> int | None:
        """Record a finished trial, its metrics and its ``context`` (environment padding,
        working directory length, ASLR: :data:`~washout.data.longformat.CONTEXT_COLUMNS`)
        in one journal record (one write(2));
        with ``then``, that record also begins the next trial (as :meth:`begin_trial`) and
        this returns its id: the next trial is still recorded as ``running`` before it
        starts.
        """
        fields = (status, reason, exit_code, _iso(started), _iso(ended), duration)
        statements: list[Statement] = [
            (FINISH, (*fields, stdout_tail, stderr_tail, cpus, *_context(context), trial_id)),
            *(("metric", (trial_id, k, v)) for k, v in metrics.items()),
        ]
        next_id = None
        if then is not None:
            begin, next_id = self._running(then)
            statements.append(begin)
        self._append(statements)  # a fold makes it one row with its start (_whole_rows)
        self._fold_when_due()
        return next_id

    # -- a launcher's batch (docs/design.md, "The batch launcher") ---------------------------
    def planned_run(
        self, worker_id: int, index: int, order: str, permutation: list[str]
    ) -> tuple[int, Statement]:
        """A run a batch will record: its id and the statement that makes its row, to go in
        the record of the trial before it (:meth:`unplan` gives the id back if the batch
        ends first)."""
        run, row = self._run_row(worker_id, index, order, permutation)
        assert row is not None, "a batch plans only runs not begun"
        return run, row

    def planned_trial(self) -> int:
        """The id the next trial gets (chosen by the writer, as run ids are): one started
        now, or one a batch will start."""
        if self._next_trial is None:  # read once: this process writes every trial after
            (last,) = self._conn.execute("SELECT max(id) FROM trial").fetchone()
            self._next_trial = (last or 0) + 1
        trial_id, self._next_trial = self._next_trial, self._next_trial + 1
        return trial_id

    def unplan(self, runs: list[tuple[int, int]], next_trial: int | None) -> None:
        """Give back the ids a batch planned and did not begin: the runs of these (worker
        id, index) keys, and every trial id from ``next_trial`` on (None: none)."""
        for key in runs:
            assert self._runs is not None
            self._next_run = min(self._next_run, self._runs.pop(key))
        if next_trial is not None:
            self._next_trial = next_trial

    @property
    def journal_descriptor(self) -> int:
        """The trial journal's descriptor, for a launcher's batch to append its records to
        (:meth:`take_batch` takes them in after it)."""
        if self._deferred:
            raise RuntimeError("a batch starts after the deferred writes are recorded")
        return self._journal.descriptor

    def take_batch(self) -> list[list[Statement]]:
        """Take in the records a launcher's batch appended to the journal, to be folded with
        this writer's own, and return them (a last one cut short is taken back)."""
        try:
            with collector_paused():
                records = self._journal.appended_by_batch()
        except JournalDamage as err:
            raise journal_damaged(self.path, err) from None
        except OSError as err:
            raise self._journal_error(err) from None
        for record in records:
            self._journaled += record
        self._journaled_records += len(records)
        self._unfolded = self._unfolded or bool(records)
        return records

    def forget_trial(self, trial_id: int) -> None:
        """Remove a trial committed as ``running`` that never started (its worker was
        given up before it could run it): only trials that ran are recorded."""
        with self._transaction() as c:
            c.execute("DELETE FROM trial WHERE id = ? AND status = 'running'", (trial_id,))

    def mark_interrupted(self) -> int:
        """Rows left ``running`` by a killed process become ``interrupted``; returns how many."""
        with self._transaction() as c:
            cur = c.execute(
                "UPDATE trial SET status = 'interrupted',"
                " reason = 'washout stopped while this trial ran' "
                " WHERE status = 'running'"
            )
            return cur.rowcount

    def supersede_run(self, run_id: int) -> int:
        """Keep the trials of a run's interrupted attempt as ``superseded`` (out of the
        analysis: they lost their planned successors or predecessors); returns how many."""
        with self._transaction() as c:
            return c.execute(
                "UPDATE trial SET superseded = 1 WHERE run_id = ? AND superseded = 0", (run_id,)
            ).rowcount


def _whole_rows(statements: Iterable[Statement]) -> list[Statement]:
    """The statements with each row made and then changed among them made whole where it
    is made: a trial's start and its finish as one ``trial`` row, a run's row with its
    reset and its status as one ``whole_run`` row. The same rows in the end, with one
    write each rather than a write and its updates (a batch's run of one trial had four
    writes to its run and two to its trial: bench/RESULTS.md, "Engine overhead per
    trial"); any other statement stays where it is."""
    out: list[Statement] = []
    trials: dict[Scalar, int] = {}
    runs: dict[Scalar, int] = {}
    for name, params in statements:
        if name == "begin_trial":
            trials[params[0]] = len(out)
        elif name == "run":
            runs[params[0]] = len(out)
            params = (*params, None, None, None, "pending")
            name = "whole_run"
        elif name == FINISH and params[-1] in trials:
            at = trials.pop(params[-1])
            out[at] = ("trial", (*out[at][1][:5], *params[:-1]))
            continue
        elif name == "reset" and params[-1] in runs:
            at = runs[params[-1]]
            out[at] = ("whole_run", (*out[at][1][:5], *params[:-1], "running"))
            continue
        elif name == "run_status" and params[-1] in runs:
            at = runs[params[-1]]
            out[at] = ("whole_run", (*out[at][1][:-1], params[0]))
            continue
        out.append((name, params))
    return out


def _expanded(statements: list[Statement]) -> Iterator[Statement]:
    """The statements, each raw one (a launcher's batch's: :mod:`.batch`) as those it
    stands for."""
    for name, params in statements:
        if name in RAW:
            yield from expand(name, params)
        else:
            yield name, params


def _folding_first(read: Callable[..., Any]) -> Callable[..., Any]:
    """A read of the store that first folds what the writer's journal holds."""

    @functools.wraps(read)
    def folded(self: StoreWriter, *args: Any, **kwargs: Any) -> Any:
        self.fold()
        return read(self, *args, **kwargs)

    return folded


for _name, _read in vars(Store).items():
    # Every read through the writer sees every trial it recorded (the engine's own reads:
    # resume's slots, the session's exit code, a sweep's next batch).
    if callable(_read) and not _name.startswith("_") and _name not in ("open", "close"):
        setattr(StoreWriter, _name, _folding_first(_read))
