"""The one writer of a store: an exclusive ``flock`` on the sidecar file ``NAME.db-lock``.

The sidecar sits beside the store's real file, its path resolved (symlinks followed), so
every name that reaches one store (``link.db`` -> ``c.db``) shares one lock; a store with
more than one hard link is refused a writer (:func:`only_name`), since SQLite, too, keys
its write-ahead log by name. The lock names its holder (host, pid, start time). The kernel
drops it when the holder dies, however it dies, so a lock is never stale (flock(2); SQLite's
own locks are POSIX record locks on the database and its WAL files, which flock does not
touch).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from washout.errors import StoreBusyError, StoreError, StoreWriteError


def lock_path(path: str | Path) -> Path:
    """The sidecar file whose flock marks a store's one writer: beside its real file."""
    return Path(f"{os.path.realpath(path)}-lock")


def writer_of(path: str | Path) -> dict[str, Any] | None:
    """The live process writing the store at ``path`` (host, pid, started), or None.

    Probes the sidecar's flock with a shared, non-blocking request: refused means a
    writer holds it now; a dead writer's lock is already gone.
    """
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:  # being written this instant
                holder = {}
            return holder if isinstance(holder, dict) else {}
        return None
    finally:
        os.close(fd)


def describe_writer(holder: dict[str, Any]) -> str:
    """``pid 123 on host h since 2026-...`` (what is known of it)."""
    if not holder:
        return "another washout process"
    return f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('started')}"


def only_name(path: Path) -> None:
    """Refuse to write a store file that has other names (hard links): SQLite keeps a
    write-ahead log per name, so two names are two logs of one file (SQLite, "How To
    Corrupt An SQLite Database File", 2.5), and two writers would each hold a lock."""
    links = path.stat().st_nlink
    if links > 1:
        raise StoreError(
            f"{path}: the store has {links} names (hard links); SQLite keeps one write-ahead "
            "log per name, so washout writes a store under one name only: remove the "
            "others (or copy the store) first"
        )


def _take_exclusive(fd: int, attempts: int = 20, pause: float = 0.05) -> bool:
    """Take the exclusive flock on ``fd`` without waiting for a writer; a few retries let
    a ``status`` that probes the lock at that instant (a shared lock held for
    microseconds) pass."""
    for attempt in range(attempts):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt + 1 < attempts:
                time.sleep(pause)
    return False


class WriterLock:
    """The writer lock of the store at ``store`` while held (:meth:`take`, :meth:`release`)."""

    def __init__(self, store: Path, fd: int) -> None:
        self.store = store
        self._fd: int | None = fd

    @classmethod
    def take(cls, store: Path, attempts: int = 20) -> WriterLock:
        """Become the store's one writer, or fail at once naming the live holder. The
        holder's host, pid and start time are written into the sidecar after the lock is
        taken (so a reader never sees a loser's). ``attempts``: 1 where no ``status`` can
        be probing (the store does not exist yet)."""
        path = lock_path(store)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise StoreWriteError(
                f"{path}: cannot create the writer lock: {err.strerror}"
            ) from None
        if not _take_exclusive(fd, attempts):
            os.close(fd)
            holder = writer_of(store) or {}
            raise StoreBusyError(
                f"{store}: in use by {describe_writer(holder)}: one washout writes a "
                f"store at a time (follow it with 'washout status {store}')"
            ) from None
        me = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": datetime.now(UTC).isoformat(timespec="microseconds"),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        except OSError as err:
            os.close(fd)
            raise StoreWriteError(f"{path}: cannot write the writer lock: {err.strerror}") from None
        return cls(store, fd)

    @property
    def held(self) -> bool:
        """Whether this process still holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases the flock); safe twice."""
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass  # the lock is released by the close all the same
            os.close(self._fd)
            self._fd = None
