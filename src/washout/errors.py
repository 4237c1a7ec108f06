"""The errors a user sees: a single line naming the file, field and value.

Every one is a :class:`WashoutError`; its kinds let a caller tell apart what went wrong:
:class:`SpecError` (a spec or the options that stand for one), :class:`SourceError` (a file
of trials that cannot be read; :class:`DamagedStoreError`: a damaged store),
:class:`WorkerError` (a worker that cannot be used) and :class:`StoreError` (a store that
cannot be written).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Self, TypeVar

T = TypeVar("T")


class ExitCode(IntEnum):
    """Every exit status of the ``washout`` command (documented in docs/guarantees.md).

    130 and 143 follow the shell's 128 + signal number for SIGINT and SIGTERM.
    """

    DONE = 0
    BAD_INPUT = 2
    """A one-line error: a spec, option, file or database washout cannot use."""
    WORKER_FAILED = 3
    """A worker stopped on an error (setup, reset, connection, provenance change)."""
    TEST_ALWAYS_FAILED = 4
    """The experiment ran, but every trial of some test failed."""
    ABORTED = 5
    """A trial failed under ``on_failure = "abort"``."""
    STORE_BUSY = 6
    """Another washout process is writing this store."""
    STORE_UNWRITABLE = 7
    """The store could not be written (disk full, read-only, I/O error); what was
    committed is intact and ``washout resume`` continues."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT)."""
    TERMINATED = 143
    """SIGTERM."""


class WashoutError(Exception):
    """A user-facing error; the CLI prints ``str(err)`` on one line and exits with
    :attr:`exit_code` (2, bad input, unless a subclass says otherwise).

    Build messages as ``file: field = value: what is wrong`` so the user can find the spot.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()) if "\n" in message else message)

    @classmethod
    def at(cls, source: str, field: str | None, value: object, problem: str) -> Self:
        """An error naming where (file and field), what (value) and why (problem)."""
        where = source if field is None else f"{source}: {field}"
        shown = repr(value) if isinstance(value, str) else str(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        return cls(f"{where} = {shown}: {problem}")


class SpecError(WashoutError):
    """A spec (or the command-line options that make one) that washout cannot use."""


class SourceError(WashoutError):
    """A file of trials (store, long CSV, OrderSage results) that cannot be read."""


class DamagedStoreError(SourceError):
    """A store whose content washout cannot trust: SQLite finds it malformed, it is cut
    short, or a value washout reads is of the wrong type or missing (``X.db: damaged:
    ...``)."""


class WorkerError(WashoutError):
    """A worker that cannot be used: unreachable, a failed setup or reset, a provenance
    change, a sync that failed. A run stopped by one exits with
    :attr:`ExitCode.WORKER_FAILED`; raised before any worker starts (workers that disagree
    at the start), it is bad input like any other."""


class StoreError(WashoutError):
    """A store that cannot be written as asked."""


class StoreBusyError(StoreError):
    """Another live washout process holds the store's writer lock."""

    exit_code = ExitCode.STORE_BUSY


class StoreExistsError(StoreError):
    """A new store's path is taken (washout never overwrites a file)."""


class StoreWriteError(StoreError):
    """A write to the store failed (disk full, read-only file system, I/O error)."""

    exit_code = ExitCode.STORE_UNWRITABLE


def choose(choices: dict[str, T], name: str, option: str, what: str) -> T:
    """``choices[name]``, or a one-line error naming the option, the value and the choices."""
    try:
        return choices[name]
    except KeyError:
        raise WashoutError(
            f"{option} = {name!r}: unknown {what} (choose from {', '.join(choices)})"
        ) from None
