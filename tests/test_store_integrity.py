"""The integrity check on opening a store: small stores are checked whole every time; a
large one opened by a read command has its header and every table but the two it reads
whole checked, and damage in those two is reported as it is read (docs/guarantees.md).
Real stores written by a real run, real page damage, the real CLI."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import washout
from test_store_lifecycle import built_store, one_line_error

from washout.data.store import WHOLE_CHECK_BYTES

READERS = ("status", "export", "analyze", "report")


@pytest.fixture
def large_store(tmp_path: Path) -> Path:
    """A real run's store grown past :data:`WHOLE_CHECK_BYTES` with superseded trials that
    keep 4 KB of output each (as the trials of cut-short runs are kept), no write-ahead
    log left."""
    db = built_store(tmp_path)
    conn = sqlite3.connect(db)
    with conn:
        run_id, test = conn.execute("SELECT run_id, test FROM trial LIMIT 1").fetchone()
        tail = "x" * 4000
        copies = WHOLE_CHECK_BYTES // 4000 + 500
        conn.executemany(
            "INSERT INTO trial (run_id, position, test, attempt, status, started, stdout_tail,"
            " superseded) VALUES (?, 0, ?, ?, 'ok', '2026-01-01T00:00:00', ?, 1)",
            ((run_id, test, 100 + i, tail) for i in range(copies)),
        )
    conn.close()
    assert db.stat().st_size > WHOLE_CHECK_BYTES
    assert not Path(f"{db}-wal").exists()
    return db


def _damage_page_of(db: Path, name: str) -> None:
    """Overwrite the root page of table or index ``name`` with bytes no page holds."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xff" * page_size)


def test_a_large_intact_store_is_read(large_store: Path) -> None:
    assert "complete" in washout("status", large_store).stdout
    assert "verdict" in washout("analyze", large_store, "--format", "json").stdout


@pytest.mark.parametrize(
    ("table", "readers"),
    [
        # trial and metric are read whole by the commands that read them (status reads no
        # metric values); every other table is checked on opening.
        ("trial", READERS),
        ("metric", ("export", "analyze", "report")),
        ("experiment", READERS),
        ("run", READERS),
    ],
)
def test_damage_a_read_command_meets_in_a_large_store_is_one_line(
    large_store: Path, table: str, readers: tuple[str, ...]
) -> None:
    _damage_page_of(large_store, table)
    for command in readers:
        one_line_error(washout(command, large_store, check=False), 2, f"{large_store}: damaged: ")


def test_a_truncated_large_store_is_damaged_by_its_header(large_store: Path) -> None:
    with large_store.open("r+b") as f:
        f.truncate(large_store.stat().st_size - 3 * 4096)
    for command in READERS:
        one_line_error(
            washout(command, large_store, check=False), 2, f"{large_store}: damaged: ", "header"
        )
    one_line_error(washout("resume", large_store, check=False), 2, f"{large_store}: damaged: ")


def test_damage_readers_never_meet_is_found_before_any_write(large_store: Path) -> None:
    # The trade-off: an index analyze and export never use is not checked when they read
    # a large store, and what they print does not depend on it; resume (a writer) checks
    # the whole file, and status, which looks slots up by that index, meets the damage.
    _damage_page_of(large_store, "trial_slot")
    washout("analyze", large_store)
    washout("export", large_store)
    one_line_error(washout("status", large_store, check=False), 2, f"{large_store}: damaged: ")
    one_line_error(washout("resume", large_store, check=False), 2, f"{large_store}: damaged: ")


@pytest.mark.parametrize("runs", [79378, 4])
def test_an_edited_run_count_is_damage_not_a_longer_experiment(tmp_path: Path, runs: int) -> None:
    """A store whose runs per order kind was edited (to 79378 by the fuzz test, which then
    ran its resume for hours) no longer plans the trials it was created for: every command
    that plans it again says so in one line, and resume runs nothing."""
    db = built_store(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE experiment SET runs_per_kind = ?", (runs,))
        before = conn.execute("SELECT count(*) FROM trial").fetchone()
    conn.close()
    words = (f"{db}: damaged: experiment.planned_trials is 12", f"runs_per_kind {runs} plans")
    for command in ("status", "resume"):
        one_line_error(washout(command, db, check=False), 2, *words)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM trial").fetchone() == before
    conn.close()
