"""Where and how washout writes an output file: every writer of a file (``export -o``,
``report -o`` and its figures, ``run --export-json/-csv/-markdown``, a sweep's
``settings.csv`` and ``sweep.json``, a bisect's ``result.json`` and ``--report``) goes
through :func:`write_output`, and every CSV it writes is made by :func:`csv_text`.

- **Never over a store.** The path is resolved (symlinks followed) and refused when it is
  any file of an SQLite store: the database (its magic), its write-ahead log, its shared
  memory and its rollback journal (their magic numbers, SQLite "Database File Format" 4.1
  and "Write-Ahead Logging"), washout's writer lock (its JSON), or a name SQLite or washout
  would take for one of them beside a store (``X.db-wal``, ``-shm``, ``-journal``, ``-trials``,
  ``-lock``), and never over the command's own input.
- **Whole or not at all.** A regular file is written to a temporary file beside it, synced,
  and renamed over it (rename(2) is atomic): a full disk, an error or a kill leaves the old
  file or none, never a cut one, and a file another name links to (a hard link) keeps its
  content. The file's permissions are kept.
- **Streams as streams.** A pipe, FIFO, terminal or device (``/dev/stdout``, ``/dev/fd/N``
  from a shell's process substitution, a FIFO made by ``mkfifo``) is written as it is,
  never opened for reading and never replaced.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from washout.data.store.schema import SQLITE_MAGIC
from washout.errors import WashoutError

if TYPE_CHECKING:
    import pandas as pd

SIBLINGS = ("-wal", "-shm", "-journal", "-lock", "-trials")
"""The files beside a store ``X.db``: SQLite's log, shared memory and rollback journal,
and washout's writer lock."""
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (SQLITE_MAGIC, "an SQLite database"),
    (bytes.fromhex("377f0682"), "an SQLite write-ahead log"),
    (bytes.fromhex("377f0683"), "an SQLite write-ahead log"),
    (bytes.fromhex("d9d505f920a163d7"), "an SQLite rollback journal"),
)
"""The first bytes of SQLite's files (file format 1.3, 4.1; WAL file format 4.1)."""
_SHM_VERSION = 3007000
"""The wal-index header's version (SQLite "Write-Ahead Logging", the wal-index), in the
machine's byte order, twice in a ``-shm`` file's first 96 bytes."""
_STREAM_NAMES = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/self/fd/\d+")
_LOCK_KEYS = {"host", "pid", "started"}

Content = str | bytes | Callable[[IO[bytes]], None]
"""What to write: text (UTF-8), bytes, or a function that writes into a binary file."""


def _refuse(option: str, given: Path, problem: str) -> WashoutError:
    return WashoutError(f"{option} = {str(given)!r}: {problem}")


def _stream_fd(given: Path) -> int | None:
    """The descriptor ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or
    ``/proc/self/fd/N`` names, else None."""
    text = str(given)
    if not _STREAM_NAMES.fullmatch(text):
        return None
    return {"/dev/stdout": 1, "/dev/stderr": 2}.get(text) or int(text.rpartition("/")[2])


def _what_store_file(head: bytes) -> str | None:
    """What a file starting with ``head`` is, if it is one of a store's files."""
    for magic, kind in _SIGNATURES:
        if head.startswith(magic):
            return kind
    version = (_SHM_VERSION).to_bytes(4, sys.byteorder)
    if len(head) >= 96 and head.startswith(version) and head[:48] == head[48:96]:
        return "an SQLite shared-memory index"
    try:
        holder = json.loads(head)
    except ValueError:
        return None
    return (
        "a washout writer lock" if isinstance(holder, dict) and set(holder) == _LOCK_KEYS else None
    )


def _store_of_name(target: Path) -> Path | None:
    """The store ``X.db`` whose sibling's name ``target`` has (``X.db-wal``...), if that
    store exists."""
    for suffix in SIBLINGS:
        if target.name.endswith(suffix) and len(target.name) > len(suffix):
            base = target.with_name(target.name[: -len(suffix)])
            if base.is_file():
                return base
    return None


def _forbidden(sources: tuple[Path, ...]) -> dict[Path, Path]:
    """Every file of the ``sources`` (inputs, and a store being written) by its resolved
    name, whether it exists yet or not, with the source it belongs to."""
    names = {}
    for source in sources:
        real = Path(os.path.realpath(source))
        names.update({Path(f"{real}{s}"): source for s in ("", *SIBLINGS)})
    return names


def _check_regular(option: str, given: Path, target: Path, sources: tuple[Path, ...]) -> None:
    """Refuse a regular file (or a name for one) that is any file of a store or an input."""
    inputs = _forbidden(sources)
    if target in inputs:
        source = inputs[target]
        if Path(os.path.realpath(source)) == target:
            problem = f"that is the input {str(source)!r}; washout never writes over its input"
        else:
            problem = (
                f"the name of a file of the store {str(source)!r}; washout never writes over "
                "a store's files: choose another file"
            )
        raise _refuse(option, given, problem)
    store = _store_of_name(target)
    if store is not None:
        raise _refuse(
            option,
            given,
            f"the name of a file of the store {str(store)!r}; washout never writes over a "
            "store's files: choose another file",
        )
    if not target.exists():
        return
    for source in sources:
        if source.exists() and os.path.samefile(target, source):
            raise _refuse(
                option,
                given,
                f"that is the input {str(source)!r}; washout never writes over its input",
            )
    try:
        with target.open("rb") as f:
            head = f.read(4096)
    except OSError as err:
        raise _refuse(option, given, f"cannot read what it is: {err.strerror}") from None
    kind = _what_store_file(head)
    if kind is not None:
        raise _refuse(
            option,
            given,
            f"{kind} (a file of a store); washout never writes over one: choose another file",
        )


def check_output(given: Path, *sources: Path, option: str = "-o") -> Path:
    """``given``, once it is known to be safe to write (see the module's doc): not a
    directory, not any file of a store or of ``sources`` (the command's inputs, or the
    store a run writes), by whatever name; its missing parent directories are created. A
    stream (pipe, FIFO, device) is not read."""
    fd = _stream_fd(given)
    if fd is not None:
        try:
            info = os.fstat(fd)
        except OSError:
            raise _refuse(option, given, f"descriptor {fd} is not open") from None
        if stat.S_ISREG(info.st_mode):
            _check_regular(option, given, Path(os.path.realpath(given)), sources)
        return given
    target = Path(os.path.realpath(given))
    if target.is_dir():
        raise _refuse(option, given, "a directory; give a file name inside it")
    if target.exists() and not target.is_file():
        return given  # a FIFO or a device: written as a stream
    _check_regular(option, given, target, sources)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _refuse(
            option, given, f"cannot create its directory {str(target.parent)!r}: {err.strerror}"
        ) from None
    return given


def _put(f: IO[bytes], content: Content) -> None:
    if callable(content):
        content(f)
    else:
        f.write(content.encode() if isinstance(content, str) else content)
    f.flush()


def write_output(given: Path, content: Content, *sources: Path, option: str = "-o") -> None:
    """Write ``content`` to ``given`` as the module's doc says (checked again here, by
    :func:`check_output`); a write the system refuses (full disk, no permission) is a
    one-line error naming ``option``, and leaves no file behind."""
    check_output(given, *sources, option=option)
    fd = _stream_fd(given)
    target = Path(os.path.realpath(given))
    try:
        if fd is not None or (target.exists() and not target.is_file()):
            _write_stream(given if fd is None else fd, content)
        else:
            _write_whole(target, content)
    except OSError as err:
        raise _refuse(option, given, f"cannot write: {err.strerror or err}") from None


def _write_stream(where: Path | int, content: Content) -> None:
    """Into a stream: a descriptor this process has (duplicated, so closing it leaves the
    original open; what was printed before on stdout goes first), or a FIFO or device
    opened for writing only."""
    if isinstance(where, int):
        if where == 1:
            sys.stdout.flush()
        fd = os.dup(where)
    else:
        fd = os.open(where, os.O_WRONLY)
    with os.fdopen(fd, "wb") as f:
        _put(f, content)


def _write_whole(target: Path, content: Content) -> None:
    """Into a temporary file beside ``target`` (same directory, so the same file system),
    synced, then renamed over it; removed if anything fails."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    f = os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb")
    try:
        with f:
            if target.exists():
                os.fchmod(f.fileno(), stat.S_IMODE(target.stat().st_mode))
            _put(f, content)
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text that every CSV reader reads back cell for cell.

    pandas quotes a cell only for the delimiter, the quote character or a character of its
    line end (``"\n"``, as Python's csv writer decides), so a text cell holding a carriage
    return alone was written bare, and every reader (pandas' and Python's among them)
    took it for the end of a line: a test named ``"\r"`` exported and read back shifted
    its row's values into the wrong columns. A frame with such a cell is written with
    every text cell quoted (``csv.QUOTE_NONNUMERIC``); any other as before."""
    bare_return = any(_holds_return(frame[c]) for c in frame.columns)
    return frame.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC if bare_return else None)


def _holds_return(column: pd.Series) -> bool:
    """Whether a text cell of ``column`` holds a carriage return: searched in one pass where
    every cell is text (a tenth of the time of looking cell by cell in Python on a
    million-row export), else cell by cell, since a cell may be a dict (a sweep's settings)
    or bytes (a damaged store), which neither ``unique()`` nor ``astype(str)`` takes."""
    from pandas.api.types import infer_dtype, is_numeric_dtype

    if is_numeric_dtype(column):
        return False
    if infer_dtype(column, skipna=True) == "string":
        return bool(column.str.contains("\r", regex=False, na=False).any())
    return any(isinstance(v, str) and "\r" in v for v in column.to_numpy())
