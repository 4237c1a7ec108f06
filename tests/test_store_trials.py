"""Trial rows in the store: committed as running before a trial starts, then finished."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from washout.store import ExperimentRecord, Store


def test_finishing_a_trial_can_begin_the_next_in_the_same_commit(tmp_path: Path) -> None:
    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 2, "now", "test")
    store = Store.create(tmp_path / "e.db", record, [("a", "true", []), ("b", "true", [])])
    run_id = store.run_id(store.worker_id("local", "localhost"), 0, "fixed", ["a", "b"])
    now = datetime.now(UTC)
    first = store.begin_trial(run_id, 0, "a", 0, now)
    fields = dict(status="ok", reason="", exit_code=0, started=now, ended=now, duration=0.5,
                  stdout_tail="", stderr_tail="", cpus=None, metrics={"wall": 0.5})
    second = store.finish_trial(first, **fields, then=(run_id, 1, "b", 0, now))
    assert second is not None and second != first
    reader = sqlite3.connect(tmp_path / "e.db")  # what a crash right now would leave
    assert reader.execute("SELECT id, test, status FROM trial ORDER BY id").fetchall() == [
        (first, "a", "ok"), (second, "b", "running")]
    assert store.finish_trial(second, **fields) is None
    assert store.counts() == {"ok": 2}
    assert len(store.long_frame()) == 2
