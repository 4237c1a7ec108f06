"""The trial journal: what the engine records between two folds, appended beside the store.

A finished trial (its fields and metrics, the next trial's start, and the run's records that
waited for them) is one line of JSON appended to ``NAME.db-trials`` (beside the store's
real file) with one write(2), before the next trial starts. A process killed at any moment
leaves every write it made in the page cache, exactly as a commit in WAL mode with
``synchronous = NORMAL`` does, and a power cut can lose the last records of either
(write(2), and SQLite, "Write-Ahead Logging" and PRAGMA synchronous); one write costs a few
microseconds where a commit costs tens (bench/RESULTS.md, "Engine overhead per trial").

The store's writer folds the journal into SQLite (:mod:`~washout.data.store.writer`): in
the same transaction it records how far it folded (the journal's token and end, in
``meta``); a journal started afresh gets a new token. So a writer killed while
folding leaves either nothing folded or everything folded and marked, never a record twice.
A record is whole when its newline is written: a last line without one (a write cut short
by SIGKILL or a full disk) is dropped when the journal is next folded. A fold reads on from
where the last one stopped; the journal is started afresh when a writer opens or closes
the store, and once it is large.

A record is a list of statements, each a name the writer knows and its parameters (text,
numbers or null): no SQL is ever read from the file.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from washout.errors import DamagedStoreError, StoreWriteError

SUFFIX = "-trials"
"""The journal's name beside the store's real file (``-journal`` is SQLite's own)."""
FOLDED_KEY = "journal_folded"
"""The ``meta`` row saying how far the journal was folded: ``{"token": ..., "end": ...}``."""
FINISH = "finish_trial"
"""The name of the statement that finishes a trial (what a reader counts as pending)."""

_HEADER = "washout-trials"
_HEADER_BYTES = 256
"""More than a header line takes: a longer first line is not one."""
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
"""A record as one line of JSON: made once, where ``json.dumps`` with separators makes an
encoder per call (a record's statements hold no container twice, so no circularity check)."""
_DECODE = json.JSONDecoder().decode
"""A record's line of text as JSON (what ``json.loads`` of a str calls)."""

Scalar = str | int | float | None
Statement = tuple[str, tuple[Scalar, ...]]
"""A statement of a record: its name (the writer's) and its parameters."""


def journal_path(store: str | Path) -> Path:
    """The journal of the store at ``store``: beside its real file, as its lock is."""
    return Path(f"{os.path.realpath(store)}{SUFFIX}")


class JournalDamage(ValueError):
    """A whole record of the journal that is not one washout wrote (edited, or another
    file under its name)."""


def journal_damaged(store: str | Path, problem: object) -> DamagedStoreError:
    """The one-line error of a journal washout did not write as it is."""
    path = journal_path(store)
    return DamagedStoreError(
        f"{store}: damaged: its trial journal {path.name}: {problem} (the store itself is "
        f"intact: move {path} aside to use it without the journal's trials)"
    )


@dataclass(frozen=True)
class Pending:
    """What a journal holds that is not yet folded into its store."""

    token: str | None
    """The journal's token (None: no journal, or not even a whole header)."""
    records: list[list[Statement]]
    """Whole records after the folded point, oldest first."""
    end: int
    """The offset after the last whole record."""
    torn: int
    """Bytes after it: a last record cut short."""

    @property
    def finished(self) -> int:
        """Finished trials among the records."""
        return sum(name == FINISH for record in self.records for name, _ in record)


_SCALARS = frozenset({str, int, float, bool, type(None)})
"""The types of a statement's parameters as JSON gives them back (a context's ASLR is a
boolean)."""


def _statement(item: object, line: int) -> Statement:
    if (
        type(item) is list
        and len(item) == 2
        and type(item[0]) is str
        and type(item[1]) is list
        and _SCALARS.issuperset(map(type, item[1]))
    ):
        return item[0], tuple(item[1])
    raise JournalDamage(f"record {line}: not a statement: {str(item)[:80]!r}")


def read_pending(store: str | Path, folded: str | None) -> Pending:
    """The records of the store's journal after the point ``folded`` (its ``meta`` value,
    None if never folded) says were folded; :class:`JournalDamage` for a whole record
    washout did not write."""
    try:
        f = journal_path(store).open("rb")
    except FileNotFoundError:
        return Pending(None, [], 0, 0)
    with f:
        first = f.readline(_HEADER_BYTES)
        if not first.endswith(b"\n"):  # not even a whole header: nothing appended under it
            return Pending(None, [], 0, len(first))
        try:
            header = json.loads(first)
        except (ValueError, UnicodeDecodeError):
            header = None
        if not isinstance(header, dict) or header.get(_HEADER) != 1:
            raise JournalDamage("its first line is not a washout journal's header")
        token = str(header.get("token"))
        start = len(first)
        mark = _mark(folded)
        if mark is not None and mark[0] == token:
            start = max(start, mark[1])  # read on from where the last fold stopped
        f.seek(start)
        data = f.read()
    records, at = decode_records(data, start)
    return Pending(token, records, start + at, len(data) - at)


def decode_records(data: bytes, start: int) -> tuple[list[list[Statement]], int]:
    """The whole records of ``data`` (the journal's bytes from offset ``start``) and the
    length they take; :class:`JournalDamage` for one washout did not write.

    The records are UTF-8 text, decoded at once and each parsed from text (a quarter of
    a batch's reading back was each line's own decoding and encoding detection); a byte
    that is not UTF-8 is damage to the record it falls in."""
    whole = data.rfind(b"\n") + 1
    try:
        lines = data[:whole].decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError as err:  # the record it is in: one more than the lines before
        line = data.count(b"\n", 0, err.start) + 1
        raise JournalDamage(f"record {line} after byte {start}: not JSON") from None
    return [_record(line, at, start) for at, line in enumerate(lines, 1)], whole


def _record(text: str, line: int, start: int) -> list[Statement]:
    """One record's statements from its line of text."""
    try:
        items = _DECODE(text)
    except ValueError:
        raise JournalDamage(f"record {line} after byte {start}: not JSON") from None
    if not isinstance(items, list):
        raise JournalDamage(f"record {line} after byte {start}: not a list of statements")
    return [_statement(item, line) for item in items]


def _mark(folded: str | None) -> tuple[str, int] | None:
    """The (token, end) of a ``meta`` mark, None if there is none or it is not one."""
    try:
        mark = json.loads(folded) if folded is not None else None
        return (str(mark["token"]), int(mark["end"])) if isinstance(mark, dict) else None
    except (ValueError, TypeError, KeyError):
        return None


def folded_mark(token: str, end: int) -> str:
    """The ``meta`` value saying the journal ``token`` is folded up to byte ``end``."""
    return json.dumps({"token": token, "end": end})


class JournalWriter:
    """The writer's end of a journal: appends whole records, one write(2) each."""

    def __init__(self, store: Path) -> None:
        self.path = journal_path(store)
        try:
            self._fd = os.open(  # as SQLite makes the store (0644 less the umask), not 0777
                self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
            )
        except OSError as err:
            raise StoreWriteError(f"{self.path}: cannot open: {err.strerror}") from None
        self._size = os.fstat(self._fd).st_size
        self._reader = -1
        self.appended = 0
        """Records appended since the journal was last started afresh."""
        self.token: str | None = None
        """The journal's token once this writer started it afresh (None before: the file
        may hold an earlier writer's records under its own)."""

    @property
    def size(self) -> int:
        """The journal's length in bytes."""
        return self._size

    def restart(self) -> None:
        """Start the journal afresh under a new token (its records are folded)."""
        os.ftruncate(self._fd, 0)
        self._size = 0
        self.token = None
        token = secrets.token_hex(8)
        self._write((json.dumps({_HEADER: 1, "token": token}) + "\n").encode())
        self.token = token
        self.appended = 0

    def append(self, record: list[Statement]) -> None:
        """One record, whole in one write(2); a write cut short (a full disk) is taken back
        and raised as OSError."""
        self._write((_ENCODE(record) + "\n").encode())
        self.appended += 1

    def _write(self, data: bytes) -> None:
        try:
            written = os.write(self._fd, data)
        except OSError:
            os.ftruncate(self._fd, self._size)
            raise
        if written != len(data):
            os.ftruncate(self._fd, self._size)
            raise OSError(errno.ENOSPC, "a record cut short: " + os.strerror(errno.ENOSPC))
        self._size += written

    @property
    def descriptor(self) -> int:
        """The journal's descriptor (opened to append), for a launcher's batch to write its
        records with (:meth:`appended_by_batch` takes them in)."""
        return self._fd

    def appended_by_batch(self) -> list[list[Statement]]:
        """The whole records another process appended through :attr:`descriptor` since
        this writer's last write; a last record cut short (that process killed as it
        wrote) is taken back, so that the next record starts a line of its own."""
        end = os.fstat(self._fd).st_size
        data = os.pread(self._fd_read(), end - self._size, self._size) if end > self._size else b""
        records, whole = decode_records(data, self._size)
        if whole < len(data):
            os.ftruncate(self._fd, self._size + whole)
        self._size += whole
        self.appended += len(records)
        return records

    def _fd_read(self) -> int:
        """A descriptor to read the journal with (this writer's own is write-only)."""
        if self._reader < 0:
            self._reader = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return self._reader

    def close(self) -> None:
        """Close the descriptor; safe twice."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._reader >= 0:
            os.close(self._reader)
            self._reader = -1
