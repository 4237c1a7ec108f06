"""Trial rows in the store: recorded as running before a trial starts, then finished, each
time in one append to the trial journal that the store folds in."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from washout.data.longformat import CONTEXT_COLUMNS
from washout.data.store import ExperimentRecord, Store
from washout.data.store.writer import StoreWriter


def finished(metrics: dict[str, float], status: str = "ok") -> dict[str, Any]:
    """``StoreWriter.finish_trial``'s fields for a trial that just ended with these metrics."""
    now = datetime.now(UTC)
    return dict(
        status=status,
        reason="",
        exit_code=0,
        started=now,
        ended=now,
        duration=0.5,
        stdout_tail="",
        stderr_tail="",
        cpus=None,
        metrics=metrics,
    )


def after_a_crash(path: Path, copy: Path) -> sqlite3.Connection:
    """What ``resume`` would find if the writer of ``path`` were killed right now: its
    files copied as they are (store, log, trial journal), reopened (which folds the
    journal) and closed; a plain SQLite connection to the copy."""
    for suffix in ("", "-wal", "-trials"):
        if Path(f"{path}{suffix}").exists():
            shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
    StoreWriter.reopen(copy).close()
    return sqlite3.connect(copy)


def test_finishing_a_trial_can_begin_the_next_in_the_same_record(tmp_path: Path) -> None:
    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 2, "now", "test")
    store = StoreWriter.create(tmp_path / "e.db", record, [("a", "true", []), ("b", "true", [])])
    run_id = store.run_id(store.worker_id("local", "localhost"), 0, "fixed", ["a", "b"])
    now = datetime.now(UTC)
    first = store.begin_trial(run_id, 0, "a", 0, now)
    fields = finished({"wall": 0.5})
    second = store.finish_trial(first, **fields, then=(run_id, 1, "b", 0, now))
    assert second is not None and second != first
    appended = (tmp_path / "e.db-trials").read_bytes().count(b"\n")
    assert appended == 3  # the header, then one line for both
    reader = after_a_crash(tmp_path / "e.db", tmp_path / "crashed.db")
    assert reader.execute("SELECT id, test, status FROM trial ORDER BY id").fetchall() == [
        (first, "a", "ok"),
        (second, "b", "running"),
    ]
    assert store.finish_trial(second, **fields) is None
    assert store.counts() == {"ok": 2}
    assert len(store.long_frame()) == 2


def test_a_runs_deferred_records_are_committed_with_the_next_write_or_at_close(
    tmp_path: Path,
) -> None:
    """A run's row, environment and reset records wait for its first trial's start, and
    its ``done`` for its last result: a crash before either leaves neither (the run then
    has no started trial, or is re-judged by its trials); the run's id is the one its row
    gets, asking again gives it, and closing the store commits what waits. None of it is
    in SQLite before a fold: the journal holds it."""
    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 1, "now", "test")
    path = tmp_path / "e.db"
    store = StoreWriter.create(path, record, [("a", "true", [])])
    worker = store.worker_id("local", "localhost")
    earlier = store.run_id(worker, -1, "warmup", ["a"])
    run_id = store.run_id(worker, 0, "fixed", ["a"], defer=True)
    assert run_id == earlier + 1 and store.run_id(worker, 0, "fixed", ["a"]) == run_id
    now = datetime.now(UTC)
    store.record_environment(worker, 0, {"kernel": "k"}, "f", defer=True)
    store.record_reset(run_id, now, now, "no reset configured", defer=True)
    reader = sqlite3.connect(path)
    crashes = iter(range(10))

    def seen() -> tuple[int, str | None, int]:
        crashed = after_a_crash(path, tmp_path / f"crash{next(crashes)}.db")
        (envs,) = crashed.execute("SELECT count(*) FROM environment").fetchone()
        status = crashed.execute("SELECT status FROM run WHERE id = ?", (run_id,)).fetchone()
        (trials,) = crashed.execute("SELECT count(*) FROM trial").fetchone()
        return envs, status and status[0], trials

    assert seen() == (0, None, 0)
    trial = store.begin_trial(run_id, 0, "a", 0, now)
    assert reader.execute("SELECT count(*) FROM trial").fetchone() == (0,)  # a start never folds
    assert seen() == (1, "running", 1)
    store.set_run_status(run_id, "done", defer=True)
    assert seen() == (1, "running", 1)
    store.finish_trial(trial, **finished({"wall": 0.5}))
    assert seen() == (1, "done", 1)
    store.set_run_status(run_id, "aborted", defer=True)
    store.close()
    status = reader.execute("SELECT status FROM run WHERE id = ?", (run_id,)).fetchone()
    assert status == ("aborted",)
    assert reader.execute("SELECT count(*) FROM trial").fetchone() == (1,)


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_store_is_read_as_it_is_and_upgraded_when_written(
    tmp_path: Path, version: int
) -> None:
    """Stores written before trials could be superseded (version 1) or had a context
    (version 2) stay readable, also read-only; written again, they gain the columns."""
    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 1, "now", "test")
    path = tmp_path / f"v{version}.db"
    store = StoreWriter.create(path, record, [("a", "true", [])])
    run_id = store.run_id(store.worker_id("local", "localhost"), 0, "fixed", ["a"])
    now = datetime.now(UTC)
    store.finish_trial(store.begin_trial(run_id, 0, "a", 0, now), **finished({}))
    store.close()
    conn = sqlite3.connect(path)  # what that version wrote
    for column in CONTEXT_COLUMNS + (("superseded",) if version == 1 else ()):
        conn.execute(f"ALTER TABLE trial DROP COLUMN {column}")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()
    reader = Store.open(path, readonly=True)
    assert reader.counts() == {"ok": 1} and len(reader.long_frame()) == 1
    assert reader.context() is None and "context_env_bytes" not in reader.long_frame()
    reader.close()
    writer = StoreWriter.reopen(path)
    assert writer.counts() == {"ok": 1}
    writer.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("3",)
    columns = ", ".join(("superseded", *CONTEXT_COLUMNS))
    assert conn.execute(f"SELECT {columns} FROM trial").fetchall() == [(0, None, None, None)]


def test_one_writer_at_a_time_and_the_lock_goes_with_its_holder(tmp_path: Path) -> None:
    import os
    import socket

    import pytest

    from washout.data.store import writer_of
    from washout.errors import StoreBusyError

    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 1, "now", "test")
    path = tmp_path / "w.db"
    first = StoreWriter.create(path, record, [("a", "true", [])])  # created locked
    holder = writer_of(path)
    assert holder is not None and holder["pid"] == os.getpid()
    assert holder["host"] == socket.gethostname()
    with pytest.raises(StoreBusyError, match=f"in use by pid {os.getpid()} on host "):
        StoreWriter.reopen(path)
    first.close()
    assert writer_of(path) is None
    second = StoreWriter.reopen(path)
    assert writer_of(path) is not None
    second.close()


def test_creating_the_same_store_at_the_same_instant_one_wins_the_other_is_told(
    tmp_path: Path,
) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from washout.errors import WashoutError

    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 1, "now", "test")
    for attempt in range(20):
        path = tmp_path / f"same-{attempt}.db"
        barrier = threading.Barrier(2)

        def create(barrier: threading.Barrier = barrier, path: Path = path) -> Store | str:
            barrier.wait()
            try:
                return StoreWriter.create(path, record, [("a", "true", [])])
            except WashoutError as err:
                return str(err)

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda _: create(), range(2)))
        stores = [r for r in results if isinstance(r, Store)]
        errors = [r for r in results if isinstance(r, str)]
        assert len(stores) == 1 and len(errors) == 1 and "already exists" in errors[0]
        assert stores[0].experiment().name == "e"
        stores[0].close()


def test_a_status_probing_the_lock_does_not_turn_a_writer_away(tmp_path: Path) -> None:
    """``status`` takes a shared lock for an instant; a ``resume`` starting then still
    becomes the writer."""
    import fcntl
    import os
    import threading

    from washout.data.store import lock_path

    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 1, "now", "test")
    path = tmp_path / "p.db"
    StoreWriter.create(path, record, [("a", "true", [])]).close()
    probe = os.open(lock_path(path), os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH)
    threading.Timer(0.2, os.close, (probe,)).start()  # a slow probe, released soon
    StoreWriter.reopen(path).close()
