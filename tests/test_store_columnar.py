"""The store's columnar copy of its trial and metric columns: written by the writer when its
session ends, read instead of the SQL rows only while it is exactly them, bit for bit.
Real SQLite files, written through the store's own API and changed behind its back with
the sqlite3 module, as another program would."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import washout
from test_store_lifecycle import built_store, one_line_error
from test_store_trials import finished

from washout.data.store import ExperimentRecord, Store, columnar
from washout.data.store.writer import StoreWriter

# Floats whose bits a text round trip or a narrowing would change.
AWKWARD = [
    0.1 + 0.2,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -0.0,
    2.0**53 + 2,
    1 / 3,
    -123456.78901234567,
]


@pytest.fixture(autouse=True)
def every_session_writes_the_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests' stores are small: the copy is written for any trial past it."""
    monkeypatch.setattr(columnar, "COLUMNAR_MIN_TRIALS", 0)


def add_trials(store: StoreWriter, run: int, values: list[float], status: str = "ok") -> list[int]:
    """One run of trials of tests a and b, each with metrics x (from ``values``) and y."""
    run_id = store.run_id(store.worker_id("local", "localhost"), run, "fixed", ["a", "b"])
    now = datetime.now(UTC)
    ids = []
    for position, value in enumerate(values):
        trial = store.begin_trial(run_id, position, "ab"[position % 2], 0, now)
        store.finish_trial(trial, **finished({"x": value, "y": float(position)}, status))
        ids.append(trial)
    return ids


def new_store(path: Path) -> StoreWriter:
    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 2, 8, "now", "test")
    return StoreWriter.create(path, record, [("a", "true", ["x", "y"]), ("b", "true", ["x", "y"])])


def writer_session(path: Path) -> None:
    """What a ``resume`` with nothing to run does to the store."""
    StoreWriter.reopen(path).close()


def sql_rows(path: Path, include_superseded: bool = False) -> pd.DataFrame:
    """The long format read through SQL alone: from a copy of the store without the
    columnar copy's state row."""
    plain = path.with_name(f"plain-{path.name}")
    with sqlite3.connect(path) as src, sqlite3.connect(plain) as dst:
        src.backup(dst)
        dst.execute("DELETE FROM columnar_state")
    dst.close()
    with Store.open(plain, readonly=True) as store:
        assert store._columns() is None
        return store.long_frame(include_superseded)


def state(path: Path) -> tuple[int, int] | None:
    """(covers, number of BLOBs) of the columnar copy, None if it is not current."""
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT covers FROM columnar_state").fetchone()
        (blobs,) = conn.execute("SELECT count(*) FROM columnar").fetchone()
    conn.close()
    return None if row is None else (row[0], blobs)


def triggers(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        found = {
            n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
    conn.close()
    return found


def same_bits(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b)
    assert np.array_equal(
        a["value"].to_numpy().view(np.int64), b["value"].to_numpy().view(np.int64)
    )


def test_the_writer_writes_the_copy_and_readers_get_the_same_bits(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    store = new_store(path)
    add_trials(store, 0, AWKWARD)
    assert state(path) is None  # not while the session runs
    store.close()
    assert state(path) == (len(AWKWARD), 9)  # every trial, one BLOB per column
    with Store.open(path, readonly=True) as reader:
        assert reader._columns() is not None
        frame = reader.long_frame()
    assert sorted(frame.loc[frame["metric"] == "x", "value"].map(repr)) == sorted(
        map(repr, [v if v != 0 else 0.0 for v in AWKWARD])  # SQLite keeps no -0.0
    )
    same_bits(frame, sql_rows(path))


def test_a_changed_covered_row_makes_the_copy_stale_and_it_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    store = new_store(path)
    ids = add_trials(store, 0, AWKWARD)
    store.close()
    changes = [
        "UPDATE metric SET value = 42.5 WHERE trial_id = ? AND name = 'x'",
        "DELETE FROM metric WHERE trial_id = ? AND name = 'y'",
        "INSERT INTO metric VALUES (?, 'z', 1.0)",
        "UPDATE trial SET status = 'failed' WHERE id = ?",
        "UPDATE trial SET superseded = 1 WHERE id = ?",
    ]
    for change in changes:
        with sqlite3.connect(path) as conn:
            conn.execute(change, (ids[2],))
        conn.close()
        assert state(path) is None, change  # the triggers took the state row away
        with Store.open(path, readonly=True) as reader:
            frame = reader.long_frame()
        same_bits(frame, sql_rows(path))
        writer_session(path)  # the copy is written again
        assert state(path) is not None
        for include_superseded in (False, True):
            with Store.open(path, readonly=True) as reader:
                assert reader._columns() is not None
                copied = reader.long_frame(include_superseded)
            same_bits(copied, sql_rows(path, include_superseded))
    assert frame[(frame["run"] == 0) & (frame["position"] == 2)].empty  # superseded
    assert set(copied.loc[copied["position"] == 2, "status"]) == {"superseded"}


def test_trials_after_the_copy_are_read_from_sql_and_appended_later(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    store = new_store(path)
    add_trials(store, 0, AWKWARD[:4])
    store.close()
    assert state(path) == (4, 9)
    store = StoreWriter.reopen(path)
    add_trials(store, 1, AWKWARD[4:])
    running = store.begin_trial(store.run_id(1, 2, "fixed", ["a"]), 0, "a", 0, datetime.now(UTC))
    assert state(path) == (4, 9)  # appending does not touch what the copy covers
    with Store.open(path, readonly=True) as reader:
        frame = reader.long_frame()
    assert len(frame) == 2 * len(AWKWARD)
    same_bits(frame, sql_rows(path))
    store.close()
    # Appended as new BLOBs, up to the trial still running (which may yet finish).
    assert state(path) == (running - 1, 18)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE trial SET status = 'interrupted' WHERE id = ?", (running,))
    conn.close()
    assert state(path) == (running - 1, 18)
    with Store.open(path, readonly=True) as reader:
        frame = reader.long_frame()
    assert (frame["status"] == "interrupted").sum() == 2  # its metrics x and y
    same_bits(frame, sql_rows(path))


def test_a_store_without_the_copy_is_read_and_gains_it_when_written(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    store = new_store(path)
    add_trials(store, 0, AWKWARD)
    store.close()
    with sqlite3.connect(path) as conn:  # as a washout before the copy left it
        for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE columnar")
        conn.execute("DROP TABLE columnar_state")
    conn.close()
    with Store.open(path, readonly=True) as reader:
        assert reader._columns() is None
        before = reader.long_frame()
    writer_session(path)
    assert state(path) == (len(AWKWARD), 9)
    with Store.open(path, readonly=True) as reader:
        same_bits(reader.long_frame(), before)


def test_reading_never_writes_not_even_a_stale_copy(tmp_path: Path) -> None:
    db = built_store(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE metric SET value = value * 2")
    conn.close()
    assert state(db) is None
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    for command in ("analyze", "export", "status"):
        washout(command, db)
    assert state(db) is None
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_a_copy_whose_checksum_fails_is_damage_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    store = new_store(db)
    add_trials(store, 0, AWKWARD)
    store.close()
    assert state(db) is not None
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE columnar SET data = zeroblob(length(data)) WHERE name = 'metric.value'"
        )
    conn.close()
    result = washout("analyze", db, check=False)
    one_line_error(result, 2, f"{db}: damaged: columnar copy of metric.value")


def test_a_session_appends_to_the_copy_only_once_enough_trials_lie_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions that leave fewer than ``COLUMNAR_MIN_TRIALS`` trials past the copy leave it
    as it is (their trials read from SQL); the session that brings them to it appends them
    all; readers get the same bits throughout. The triggers that guard the copy come with
    it: before it, no insert runs one."""
    monkeypatch.setattr(columnar, "COLUMNAR_MIN_TRIALS", 12)
    path = tmp_path / "e.db"
    store = new_store(path)
    add_trials(store, 0, AWKWARD)  # 8 trials
    store.close()
    assert state(path) is None and triggers(path) == set()
    with Store.open(path, readonly=True) as reader:
        same_bits(reader.long_frame(), sql_rows(path))
    store = StoreWriter.reopen(path)
    add_trials(store, 1, AWKWARD)  # 16 past the copy (none yet)
    store.close()
    assert state(path) == (16, 9)
    assert triggers(path) == {
        f"columnar_{table}_{event}"
        for table in ("trial", "metric")
        for event in ("insert", "update", "delete")
    }
    store = StoreWriter.reopen(path)
    add_trials(store, 2, AWKWARD)
    store.close()
    assert state(path) == (16, 9)  # 8 past it: SQL holds them
    with Store.open(path, readonly=True) as reader:
        assert reader._columns() is not None
        same_bits(reader.long_frame(), sql_rows(path))
