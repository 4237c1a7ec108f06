"""The long-format frame a store gives: the same trials whichever columns are asked for,
and rows this version did not write (an unknown status, a test the spec lacks) kept as
they are. Real stores written by a real run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from test_store_lifecycle import built_store

from washout.data.store import Store
from washout.data.store.frame import _lexsort, _positions
from washout.stats.order import COLUMNS as ORDER_COLUMNS


def test_the_time_stamps_are_read_only_when_asked_for(tmp_path: Path) -> None:
    with Store.open(built_store(tmp_path), readonly=True) as store:
        whole = store.long_frame()
        order_only = store.long_frame(columns=ORDER_COLUMNS)
    assert len(whole) == 12 and whole["started"].notna().all()
    assert whole["started"].dtype == object  # text as written, not inferred as str
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


@given(
    st.integers(0, 40).flatmap(
        lambda n: st.tuples(
            *(arrays(np.int64, n, elements=st.integers(-(2**k), 2**k)) for k in (3, 8, 20, 62))
        )
    )
)
def test_the_row_order_is_lexsorts_however_wide_the_keys(keys) -> None:
    """Rows are ordered by worker, run, position and trial through one combined key where
    the keys fit in 63 bits together; wider ones fall back to lexsort."""
    for chosen in (keys[:3], keys, keys[::-1]):
        assert np.array_equal(_lexsort(chosen), np.lexsort(chosen))


@given(
    st.sets(st.integers(-50, 10**7), max_size=60),
    st.lists(st.integers(-60, 10**7 + 10), max_size=60),
    st.booleans(),
)
def test_a_trials_position_is_found_whether_ids_are_dense_or_sparse(ids, wanted, dense) -> None:
    """Trial ids index a table where they are dense, else they are searched: the same
    positions, -1 for an id that is not there."""
    ordered = sorted(i % 200 for i in ids) if dense else sorted(ids)
    ordered = np.array(sorted(set(ordered)), dtype=np.int64)
    asked = np.array(wanted + ordered[::3].tolist(), dtype=np.int64)
    index = {int(v): i for i, v in enumerate(ordered)}
    assert _positions(ordered, asked).tolist() == [index.get(int(v), -1) for v in asked]
