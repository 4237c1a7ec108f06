"""The long-format frame a store gives: the same trials whichever columns are asked for,
and rows this version did not write (an unknown status, a test the spec lacks) kept as
they are. Real stores written by a real run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
from test_store_lifecycle import built_store

from washout.data.store import Store
from washout.stats.order import COLUMNS as ORDER_COLUMNS


def test_the_time_stamps_are_read_only_when_asked_for(tmp_path: Path) -> None:
    with Store.open(built_store(tmp_path), readonly=True) as store:
        whole = store.long_frame()
        order_only = store.long_frame(columns=ORDER_COLUMNS)
    assert len(whole) == 12 and whole["started"].notna().all()
    assert "started" not in order_only and "ended" not in order_only
    pd.testing.assert_frame_equal(order_only, whole.drop(columns=["started", "ended"]))


def test_rows_this_version_did_not_write_are_kept_as_they_are(tmp_path: Path) -> None:
    db = built_store(tmp_path)
    conn = sqlite3.connect(db)
    with conn:
        first, second = (i for (i,) in conn.execute("SELECT id FROM trial ORDER BY id LIMIT 2"))
        conn.execute("UPDATE trial SET status = 'skipped' WHERE id = ?", (first,))
        conn.execute("UPDATE trial SET test = 'gone' WHERE id = ?", (second,))
    conn.close()
    with Store.open(db, readonly=True) as store:
        frame = store.long_frame()
    assert (frame["status"] == "skipped").sum() == 1
    assert (frame["test"] == "gone").sum() == 1
    gone = frame[frame["test"] == "gone"]
    assert gone["metric"].isna().all()  # the spec names no metric for it
    assert sorted(frame["test"].cat.categories) == ["a", "b", "gone"]
    assert len(frame) == 12
