"""The trial journal's crash semantics: a writer SIGKILLed at any moment, while appending
or while folding, loses no trial it recorded and doubles none; a torn last record is
dropped by the next writer, and a damaged one stops it in one line with the store intact."""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import washout
from test_robustness import SLOW_SPEC

from washout.data.store import ExperimentRecord, Store
from washout.data.store.journal import FOLDED_KEY, read_pending
from washout.data.store.writer import STATEMENTS, StoreWriter
from washout.errors import DamagedStoreError
from washout.harness.engine import Experiment
from washout.harness.spec import parse_spec_text

METRICS = 40
"""Metrics per trial: a fold of a few hundred trials then takes milliseconds, so random
kills land inside folds as well as between appends."""

WRITER = r"""
import os, sys
from datetime import UTC, datetime
from washout.data.store.writer import StoreWriter

db, run_index, first, fold_every, metrics = sys.argv[1], *map(int, sys.argv[2:])
store = StoreWriter.reopen(db)
run_id = store.run_id(store.worker_id("local", "localhost"), run_index, "fixed", ["a"], defer=True)
now = datetime.now(UTC)
fields = dict(status="ok", reason="", exit_code=0, started=now, ended=now, duration=0.001,
              stdout_tail="", stderr_tail="", cpus=None)
seq = first
trial = store.begin_trial(run_id, 0, "a", 0, now)
os.write(1, b"ready\n")
while True:
    values = {f"m{k}": float(seq) for k in range(metrics)}
    trial = store.finish_trial(trial, **fields, metrics=values, then=(run_id, 0, "a", 0, now))
    os.write(1, str(seq).encode() + b"\n")  # acknowledged: recorded
    seq += 1
    if seq % fold_every == 0:
        store.counts()  # a read through the writer folds the journal first
"""
"""A writer recording trials until it is killed, each acknowledged on stdout once
``finish_trial`` returned."""


def new_store(path: Path) -> None:
    record = ExperimentRecord("e", "", "e.toml", 1, "alternate", 1, 1, "now", "test")
    StoreWriter.create(path, record, [("a", "true", [])]).close()


def acknowledged(out: bytes) -> set[int]:
    """The sequence numbers a killed writer said it recorded (a cut last line is not)."""
    return {int(line) for line in out.split(b"\n")[:-1]}


@pytest.mark.timeout(240)
def test_sigkill_while_appending_and_folding_loses_nothing_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "j.db"
    new_store(db)
    rng = random.Random(31)
    said: set[int] = set()
    torn = 0
    for kill in range(24):
        first = kill * 1_000_000
        fold_every = rng.choice([25, 200, 1000])
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, db, *map(str, (kill, first, fold_every, METRICS))],
            stdout=subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        out = proc.stdout.read()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the writer stopped before it was killed"
        got = acknowledged(out)
        assert got, "the writer was killed before it recorded a trial"
        said |= got
        journal = Path(f"{db}-trials").read_bytes()
        torn += not journal.endswith(b"\n")
    StoreWriter.reopen(db).close()  # what resume does first: fold what the last one left
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rows = conn.execute(
        "SELECT t.id, t.status, count(m.name), min(m.value), max(m.value) FROM trial t"
        " LEFT JOIN metric m ON m.trial_id = t.id GROUP BY t.id"
    ).fetchall()
    finished = [r for r in rows if r[1] == "ok"]
    assert all(n == METRICS and low == high for _, _, n, low, high in finished)
    values = [int(low) for *_, low, _ in finished]
    assert len(values) == len(set(values)), "a trial was folded in twice"
    assert said <= set(values), f"lost: {sorted(said - set(values))[:5]}"
    assert len(set(values) - said) <= 24  # at most the one in flight at each kill
    assert {status for _, status, *_ in rows} <= {"ok", "running"}
    assert len(said) > 1000


def test_a_torn_last_record_is_dropped_and_noted(tmp_path: Path) -> None:
    db, crashed = tmp_path / "t.db", tmp_path / "crashed.db"
    new_store(db)
    store = StoreWriter.reopen(db)
    run_id = store.run_id(store.worker_id("local", "localhost"), 0, "fixed", ["a"], defer=True)
    store.begin_trial(run_id, 0, "a", 0, datetime.now(UTC))
    for suffix in ("", "-wal", "-trials"):  # the files as a writer killed now leaves them,
        shutil.copyfile(f"{db}{suffix}", f"{crashed}{suffix}")
    record = json.dumps([["finish_trial", ["ok", "", 0, None, None, 1.0, "", "", None, 1]]])
    with open(f"{crashed}-trials", "ab") as f:  # killed in the middle of its next append
        f.write(record[:30].encode())
    resumed = StoreWriter.reopen(crashed)
    assert resumed.counts() == {"running": 1}
    assert any("cut short (30 bytes" in message for *_, message in resumed.events())
    resumed.close()
    assert Path(f"{crashed}-trials").read_bytes().count(b"\n") == 1  # started afresh
    store.close()


def test_the_journal_is_a_data_file_like_the_store(tmp_path: Path) -> None:
    """Created with the store's permissions (SQLite's 0644 less the umask), not executable: os.open
    without a mode made it 0777 less the umask, so every store came with an executable
    NAME.db-trials beside it."""
    db = tmp_path / "t.db"
    new_store(db)
    StoreWriter.reopen(db).close()
    assert (Path(f"{db}-trials").stat().st_mode & 0o777) == (db.stat().st_mode & 0o777)
    assert not Path(f"{db}-trials").stat().st_mode & 0o111


def test_a_damaged_record_stops_the_writer_in_one_line_and_costs_nothing(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    new_store(db)
    journal = Path(f"{db}-trials")
    with journal.open("ab") as f:
        f.write(b'[["DROP TABLE trial",[]]]\n')
    with pytest.raises(DamagedStoreError, match=r"trial journal d\.db-trials: .*move .* aside"):
        StoreWriter.reopen(db)
    with Store.open(db) as store:
        assert store.counts() == {} and store.experiment().name == "e"
        assert store.journaled() == 0  # it finishes no trial


def test_readers_say_what_the_journal_still_holds(tmp_path: Path) -> None:
    """Trials recorded but not folded yet are told of by status, analyze and report (a
    live writer holds them now; a stopped one's wait for resume), never silently left out."""
    experiment = Experiment.prepare(parse_spec_text(SLOW_SPEC, "p.toml"), SLOW_SPEC, "p.toml")
    db = tmp_path / "p.db"
    store = experiment.create_store(db)
    run_id = store.run_id(store.worker_id("local", "localhost"), 0, "fixed", ["a", "b"])
    now = datetime.now(UTC)
    fields = dict(status="ok", reason="", exit_code=0, started=now, ended=now, duration=0.001)
    fields |= dict(stdout_tail="", stderr_tail="", cpus=None, metrics={"wall": 0.001})
    first = store.begin_trial(run_id, 0, "a", 0, now)
    second = store.finish_trial(first, **fields, then=(run_id, 1, "b", 0, now))  # type: ignore[arg-type]
    assert second is not None
    status = washout("status", db).stdout
    assert "running (pid" in status
    assert "1 more finished trial(s) in the trial journal" in status
    assert "folded into the store between runs" in status
    analyzed = washout("analyze", db, check=False)
    assert "1 finished trial(s) are in its trial journal" in analyzed.stdout  # among the notes
    store._journal.close()  # as if killed: the journal stays as it is, the lock goes
    store._lock.release()
    stopped = washout("status", db).stdout
    assert f"`washout resume {db}` folds them in" in stopped
    with StoreWriter.reopen(db) as resumed:
        assert resumed.counts() == {"ok": 1, "running": 1}
        assert resumed.journaled() == 0


def test_a_large_journal_is_started_afresh_after_a_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folds read on from where the last one stopped; past RESTART_BYTES the journal
    is truncated to a new header (a new token, so the old mark never skips a record)."""
    from washout.data.store import writer

    db = tmp_path / "r.db"
    new_store(db)
    store = StoreWriter.reopen(db)
    run_id = store.run_id(store.worker_id("local", "localhost"), 0, "fixed", ["a"], defer=True)
    now = datetime.now(UTC)
    fields = dict(status="ok", reason="", exit_code=0, started=now, ended=now, duration=0.1)
    fields |= dict(stdout_tail="", stderr_tail="", cpus=None, metrics={"wall": 0.1})
    journal = Path(f"{db}-trials")
    trial = store.begin_trial(run_id, 0, "a", 0, now)
    for _ in range(3):  # small: kept after each fold, read on from the mark
        trial = store.finish_trial(trial, **fields, then=(run_id, 0, "a", 0, now))  # type: ignore[arg-type]
        assert store.counts()["ok"] >= 1
    kept = journal.read_bytes().count(b"\n")
    assert kept == 1 + 4
    monkeypatch.setattr(writer, "RESTART_BYTES", 0)
    for _ in range(3):  # large: started afresh after every fold
        trial = store.finish_trial(trial, **fields, then=(run_id, 0, "a", 0, now))  # type: ignore[arg-type]
        store.counts()
        assert journal.read_bytes().count(b"\n") == 1
    store.close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status, count(*) FROM trial GROUP BY status").fetchall() == [
        ("ok", 6),
        ("running", 1),
    ]
    assert conn.execute("SELECT count(*) FROM metric").fetchone() == (6,)


def record_trials(store: StoreWriter, runs: int) -> None:
    """What the engine records for ``runs`` runs of two trials, without folding:
    environments, resets, starts, finishes, statuses; the second run aborted, then reset
    and begun again (its reset after its status), its trial left running."""
    worker = store.worker_id("local", "localhost")
    now = datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=UTC)
    fields = dict(status="ok", reason="", exit_code=0, started=now, ended=now, duration=0.002)
    fields |= dict(stdout_tail="out", stderr_tail="", cpus="0")
    for index in range(runs):
        run = store.run_id(worker, index, "fixed", ["a", "b"], defer=True)
        facts = {"load": f"0.{index}", "os": "Linux"}
        store.record_environment(worker, index, facts, f"f{index % 2}", defer=True)
        store.record_reset(run, now, now, "no reset configured", defer=True)
        first = store.begin_trial(run, 0, "a", 0, now)
        second = store.finish_trial(
            first, **fields, metrics={"wall": 0.002, "m": float(index)}, then=(run, 1, "b", 0, now)
        )  # type: ignore[arg-type]
        assert second is not None
        store.set_run_status(run, "done" if index != 1 else "aborted", defer=True)
        store.finish_trial(second, **fields, metrics={"wall": 0.003})  # type: ignore[arg-type]
    again = store.run_id(worker, 1, "fixed", ["a", "b"])
    store.record_reset(again, now, now, "again", defer=True)
    store.begin_trial(again, 0, "a", 1, now)


def tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row a fold writes, table by table."""
    conn = sqlite3.connect(db)
    try:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("worker", "environment", "run", "trial", "metric")
        }
    finally:
        conn.close()


def test_a_fold_from_memory_writes_what_a_fold_of_the_file_writes(tmp_path: Path) -> None:
    """A live writer folds the records it appended from memory (not read back); resume folds
    a killed writer's from the file: both leave the same rows."""
    db, crashed = tmp_path / "m.db", tmp_path / "crashed.db"
    new_store(db)
    store = StoreWriter.reopen(db)
    record_trials(store, 5)
    for suffix in ("", "-wal", "-trials"):  # killed now: the journal is all there is
        shutil.copyfile(f"{db}{suffix}", f"{crashed}{suffix}")
    assert store.counts() == {"ok": 10, "running": 1}  # a read through the writer folds first
    store.close()
    StoreWriter.reopen(crashed).close()
    folded = tables(db)
    assert folded == tables(crashed)
    assert [status for *_, status in folded["run"]] == ["done", "running", "done", "done", "done"]
    assert len(folded["environment"]) == 5 and len(folded["metric"]) == 15


def test_a_fold_writes_what_its_statements_one_by_one_in_order_write(tmp_path: Path) -> None:
    """A fold applies a kind of statement at once (fewer calls), and that leaves the rows
    that applying the journal's statements one by one, in its order, leaves."""
    db, alone = tmp_path / "f.db", tmp_path / "alone.db"
    new_store(db)
    store = StoreWriter.reopen(db)
    record_trials(store, 6)
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{db}{suffix}", f"{alone}{suffix}")
    conn = sqlite3.connect(alone, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    (mark,) = conn.execute("SELECT value FROM meta WHERE key = ?", (FOLDED_KEY,)).fetchone()
    conn.execute("BEGIN")
    for record in read_pending(db, mark).records:
        for name, params in record:
            conn.execute(STATEMENTS[name], params)
    conn.execute("COMMIT")
    conn.close()
    store.counts()  # folds
    assert tables(db) == tables(alone)
    store.close()


def test_statements_on_one_row_keep_their_order_in_a_fold(tmp_path: Path) -> None:
    """A fold applies each kind of statement at once (a run's row before its trials'), but
    a run's reset recorded after its status still comes after it, as in the journal."""
    db = tmp_path / "o.db"
    new_store(db)
    store = StoreWriter.reopen(db)
    run = store.run_id(store.worker_id("local", "localhost"), 0, "fixed", ["a"], defer=True)
    now = datetime.now(UTC)
    store.set_run_status(run, "aborted", defer=True)
    store.record_reset(run, now, now, "again", defer=True)  # the run goes on: running
    store.begin_trial(run, 0, "a", 0, now)
    store.close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status, reset_info FROM run").fetchall() == [("running", "again")]


OLD_JOURNAL = "".join(
    line + "\n"
    for line in (
        '{"washout-trials": 1, "token": "5e23f8899faef448"}',
        '[["run",[1,1,0,"fixed","[\\"a\\"]"]],["environment",[1,0,"2026-11-27T12:24:58.607297+00:00",'
        '"{\\"load\\": \\"0.5\\", \\"os\\": \\"Linux\\"}","f00d"]],["fingerprint",["f00d",1]],'
        '["reset",["2026-11-27T12:00:00.123456+00:00","2026-11-27T12:00:00.123456+00:00",'
        '"no reset configured",1]],'
        '["begin_trial",[1,1,0,"a",0,"2026-11-27T12:00:00.123456+00:00"]]]',
        '[["finish_trial",["ok","",0,"2026-11-27T12:00:00.123456+00:00",'
        '"2026-11-27T12:00:00.123456+00:00",0.001,"out","",null,null,null,null,1]],'
        '["metric",[1,"wall",0.001]],["metric",[1,"user",0.0005]],'
        '["begin_trial",[2,1,1,"a",0,"2026-11-27T12:00:00.123456+00:00"]]]',
    )
)
"""The journal washout left at commit ee1c0e9 (before folds applied records from memory)
when killed during its second trial: a run's records and its first trial's start, that
trial's result and the second's start."""


def test_a_journal_of_the_previous_version_is_resumed_and_written_alike(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    new_store(db)
    with StoreWriter.reopen(db) as writer:
        writer.worker_id("local", "localhost")
    Path(f"{db}-trials").write_text(OLD_JOURNAL + '[["finish_trial",["ok"')  # and a torn one
    with StoreWriter.reopen(db) as resumed:
        assert resumed.counts() == {"ok": 1, "running": 1}
        assert any("cut short (22 bytes" in message for *_, message in resumed.events())
        assert [e["fingerprint"] for e in resumed.environments()] == ["f00d"]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT name, value FROM metric ORDER BY name").fetchall() == [
        ("user", 0.0005),
        ("wall", 0.001),
    ]
    conn.close()
    again = tmp_path / "w.db"  # this version writes those records as the same lines
    new_store(again)
    store = StoreWriter.reopen(again)
    worker = store.worker_id("local", "localhost")
    run = store.run_id(worker, 0, "fixed", ["a"], defer=True)
    t = datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=UTC)
    store.record_environment(worker, 0, {"load": "0.5", "os": "Linux"}, "f00d", defer=True)
    store.record_reset(run, t, t, "no reset configured", defer=True)
    first = store.begin_trial(run, 0, "a", 0, t)
    fields = dict(status="ok", reason="", exit_code=0, started=t, ended=t, duration=0.001)
    fields |= dict(stdout_tail="out", stderr_tail="", cpus=None)
    metrics = {"wall": 0.001, "user": 0.0005}
    store.finish_trial(first, **fields, metrics=metrics, then=(run, 1, "a", 0, t))  # type: ignore[arg-type]
    written = Path(f"{again}-trials").read_text().splitlines()[1:]
    captured = re.compile(r'"\d{4}-\d\d-\d\dT[\d:.]+\+00:00","\{')  # the environment's time
    assert [captured.sub("", line) for line in written] == [
        captured.sub("", line) for line in OLD_JOURNAL.splitlines()[1:]
    ]
    store.close()


def test_a_workers_fingerprint_is_written_when_it_changes(tmp_path: Path) -> None:
    """Every run's environment is recorded with its fingerprint; the worker's row, which
    holds the latest, is updated only when it changes (most runs: the same machine)."""
    db = tmp_path / "f.db"
    new_store(db)
    store = StoreWriter.reopen(db)
    worker = store.worker_id("local", "localhost")
    run = store.run_id(worker, 0, "fixed", ["a"], defer=True)
    for index, fingerprint in enumerate(["aa", "aa", "bb", "aa"]):
        store.record_environment(worker, index, {"load": str(index)}, fingerprint, defer=True)
        store.begin_trial(run, index, "a", 0, datetime.now(UTC))
    journal = Path(f"{db}-trials").read_text()
    assert journal.count('["fingerprint",') == 3
    assert store.workers()[0][3] == "aa"
    assert [(e["run_index"], e["fingerprint"]) for e in store.environments()] == [
        (0, "aa"),
        (1, "aa"),
        (2, "bb"),
        (3, "aa"),
    ]
    store.close()


def test_the_log_is_checkpointed_by_its_pages_not_a_count_of_writes(tmp_path: Path) -> None:
    """Folds of many trials write a fraction of a page per trial: the quick form (a run per
    trial, a fold per 40) was checkpointed every ~500 trials, each a few hundred pages and
    two syncs; the writer learns a write's pages at each checkpoint and lets the log reach
    CHECKPOINT_PAGES, never checkpointing more often than after 1,000 writes."""
    db = tmp_path / "c.db"
    new_store(db)
    store = StoreWriter.reopen(db)
    store.hold_checkpoints()
    worker = store.worker_id("local", "localhost")
    now = datetime.now(UTC)
    fields = dict(status="ok", reason="", exit_code=0, started=now, ended=now, duration=0.001)
    fields |= dict(stdout_tail="", stderr_tail="", cpus=None)
    sizes = [db.stat().st_size]
    for index in range(3000):
        run = store.run_id(worker, index, "random", ["a"], defer=True)
        store.fold_if_due()  # before a run, as the engine does
        sizes.append(db.stat().st_size)  # the file grows only when the log is copied in
        store.record_environment(worker, index, {"load": str(index)}, "f", defer=True)
        store.record_reset(run, now, now, "no reset configured", defer=True)
        trial = store.begin_trial(run, 0, "a", 0, now)
        store.set_run_status(run, "done", defer=True)
        metrics = {f"m{k}": float(k) for k in range(10)}
        store.finish_trial(trial, **fields, metrics=metrics)  # type: ignore[arg-type]
        if index % 40 == 39:
            store.counts()  # a fold of 40 trials
    checkpoints = sum(b > a for a, b in zip(sizes, sizes[1:], strict=False))
    assert checkpoints == 1  # the first, after 1,000 writes (~490 trials); then ~6,000 trials
    wal = Path(f"{db}-wal").stat().st_size
    assert wal < 2 * 4300 * 4096
    assert store.counts() == {"ok": 3000}
    store.close()
