"""The columnar copy: the trial and metric columns the long format needs, as numpy arrays in
BLOBs, for every trial up to ``columnar_state.covers``.

A reader of a large store pays most for SQLite handing it one Python object per value (2.3M
metric values at the ordering-trap paper's scale); the copy lets it take them as a few BLOBs.
The writer appends to it when its session ends (:func:`write_columns`); the SQL tables stay
the truth: any insert, update or delete of a covered row, by whatever writer, deletes the
state row (the triggers, made with the first copy), so a reader uses the copy only while it
is exactly the SQL tables (:func:`read_columns`).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from washout.data.store.integrity import damaged

if TYPE_CHECKING:
    import numpy as np

COLUMNAR_SCHEMA: tuple[str, ...] = (
    "CREATE TABLE columnar (name TEXT NOT NULL, chunk INTEGER NOT NULL, data BLOB NOT NULL,"
    " crc INTEGER NOT NULL, PRIMARY KEY (name, chunk))",
    "CREATE TABLE columnar_state (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " covers INTEGER NOT NULL, names TEXT NOT NULL)",
)
"""The copy's tables."""
COLUMNAR_TRIGGERS: tuple[str, ...] = tuple(
    f"CREATE TRIGGER IF NOT EXISTS columnar_{table}_{event.lower()} AFTER {event} ON {table}"
    f" WHEN {row.format(key=key)} <= (SELECT covers FROM columnar_state)"
    " BEGIN DELETE FROM columnar_state; END"
    for table, key in (("trial", "id"), ("metric", "trial_id"))
    for event, row in (
        ("INSERT", "NEW.{key}"),
        ("UPDATE", "min(OLD.{key}, NEW.{key})"),
        ("DELETE", "OLD.{key}"),
    )
)
"""The triggers that drop the copy's state row when a covered row changes, made with the
first copy (:func:`write_columns`): until there is one they guard nothing, and each row
inserted ran one (a tenth of a quick form's fold: bench/RESULTS.md, "Trimming the
fold")."""

COLUMNAR_DTYPES: dict[str, str] = {
    "trial.id": "<i8",
    "trial.run_id": "<i8",
    "trial.position": "<i8",
    "trial.status": "<i4",
    "trial.test": "<i4",
    "trial.superseded": "<i1",
    "metric.trial_id": "<i8",
    "metric.name": "<i4",
    "metric.value": "<f8",
}
"""Each copied column and its dtype; ``status``, ``test`` and ``name`` are codes into the
name lists in ``columnar_state.names``."""
COLUMNAR_MIN_TRIALS = 10_000
"""A session appends to the copy only once this many trials lie past what it covers: a
reader takes fewer from SQL about as fast (3,000 trials of ten metrics: 16 ms either
way), while writing them into the copy took 19 us a trial at the end of every session (a
tenth of a quick form's own cost per trial: bench/RESULTS.md, "Engine overhead per
trial")."""
COLUMNAR_CHUNK = 2**22
"""Rows per BLOB (32 MiB of float64): far below SQLite's 1 GB limit on one value."""


@dataclass(frozen=True)
class Columns:
    """A current columnar copy: the trials with id up to ``covers``, their codes' names
    (``status``, ``test``, ``metric``) and one array per :data:`COLUMNAR_DTYPES` column."""

    covers: int
    names: dict[str, list[str]]
    arrays: dict[str, np.ndarray]


def write_columns(c: sqlite3.Connection) -> None:
    """Bring the copy up to every trial before the first one still running, inside the
    caller's transaction on ``c``, once :data:`COLUMNAR_MIN_TRIALS` lie past it: the trials
    after the part it covers are appended, or, if a covered row changed since (its state
    row gone), the whole copy is written again."""
    state = c.execute("SELECT covers, names FROM columnar_state").fetchone()
    if state is not None and not _matches(c, state[0], _last_copied(c), _names(state[1])):
        state = None  # not the copy of these rows (its state edited): written whole again
    covered = 0 if state is None else state[0]
    (top,) = c.execute("SELECT coalesce(max(id), 0) FROM trial").fetchone()
    (running,) = c.execute(  # only the trials after the copy: a range of ids
        "SELECT min(id) FROM trial WHERE id > ? AND status = 'running'", (covered,)
    ).fetchone()
    top = top if running is None else min(top, running - 1)
    if (state is not None and covered >= top) or top - covered < COLUMNAR_MIN_TRIALS:
        return
    import numpy as np  # only now: a session that added no trial does not pay for it

    if state is None:
        c.execute("DELETE FROM columnar")
        start, chunk = 0, 0
        names: dict[str, list[str]] = {"status": [], "test": [], "metric": []}
    else:
        start, names = state[0], json.loads(state[1])
        (chunk,) = c.execute("SELECT coalesce(max(chunk), -1) + 1 FROM columnar").fetchone()
    span = (start, top)
    status_code = _name_codes(c, names["status"], "trial", "t.status", span)
    trials = np.fromiter(
        c.execute(
            f"SELECT t.id, t.run_id, t.position, {status_code},"
            " coalesce(s.spec_index, -1), t.superseded FROM trial t"
            " LEFT JOIN test s ON s.name = t.test WHERE t.id > ? AND t.id <= ?"
            " ORDER BY t.id",
            (*names["status"], *span),
        ),
        dtype=[(n, np.int64) for n in ("id", "run_id", "position", "status", "test", "sup")],
    )
    # Tests by their spec_index; a test the test table lacks, by name.
    test_code = {name: i for i, name in enumerate(names["test"])}
    lut = np.array(
        [
            test_code.setdefault(name, len(test_code))
            for (name,) in c.execute("SELECT name FROM test ORDER BY spec_index")
        ]
        + [-1],
        dtype=np.int64,
    )
    test = lut[trials["test"]]
    for i, name in c.execute(
        "SELECT t.id, t.test FROM trial t LEFT JOIN test s ON s.name = t.test"
        " WHERE s.id IS NULL AND t.id > ? AND t.id <= ?",
        span,
    ):
        test[np.searchsorted(trials["id"], i)] = test_code.setdefault(name, len(test_code))
    names["test"] = list(test_code)
    metric_code = _name_codes(c, names["metric"], "metric", "name", span)
    metrics = np.fromiter(
        c.execute(
            f"SELECT trial_id, {metric_code}, value FROM metric"
            " WHERE trial_id > ? AND trial_id <= ?",
            (*names["metric"], *span),
        ),
        dtype=[("trial_id", np.int64), ("name", np.int64), ("value", np.float64)],
    )
    columns = {
        "trial.id": trials["id"],
        "trial.run_id": trials["run_id"],
        "trial.position": trials["position"],
        "trial.status": trials["status"],
        "trial.test": test,
        "trial.superseded": trials["sup"],
        "metric.trial_id": metrics["trial_id"],
        "metric.name": metrics["name"],
        "metric.value": metrics["value"],
    }
    for name, values in columns.items():
        data = values.astype(COLUMNAR_DTYPES[name])
        for k, at in enumerate(range(0, len(data), COLUMNAR_CHUNK)):
            blob = data[at : at + COLUMNAR_CHUNK].tobytes()
            c.execute(
                "INSERT INTO columnar VALUES (?, ?, ?, ?)",
                (name, chunk + k, blob, zlib.crc32(blob)),
            )
    for trigger in COLUMNAR_TRIGGERS:  # the copy is guarded from the moment it exists
        c.execute(trigger)
    c.execute(
        "INSERT OR REPLACE INTO columnar_state VALUES (1, ?, ?)",
        (top, json.dumps(names)),
    )


def _name_codes(
    c: sqlite3.Connection, known: list[str], table: str, column: str, span: tuple[int, int]
) -> str:
    """``known`` extended by the names ``column`` of ``table`` holds in the trial-id
    ``span`` being copied, and the SQL expression that codes them as indices into it
    (its ``?`` bound to ``known``'s names)."""
    key = "id" if table == "trial" else "trial_id"
    field = column.rpartition(".")[2]
    for (name,) in c.execute(
        f"SELECT DISTINCT {field} FROM {table} WHERE {key} > ? AND {key} <= ?", span
    ):
        if name not in known:
            known.append(name)
    whens = " ".join(f"WHEN ? THEN {i}" for i in range(len(known)))
    return f"CASE {column} {whens} ELSE -1 END" if known else "-1"


def read_columns(conn: sqlite3.Connection, path: Path) -> Columns | None:
    """The copy if the store has one that is current (its state row is there: no covered
    row changed since it was written), else None. A BLOB whose CRC-32 does not match is
    damage, reported as such."""
    import numpy as np

    state = conn.execute("SELECT covers, names FROM columnar_state").fetchone()
    if state is None:
        return None
    names = _names(state[1])
    if not isinstance(state[0], int) or names is None:
        raise damaged(path, f"columnar_state = {state!r:.60}: not the copy's state")
    parts: dict[str, list[np.ndarray]] = {name: [] for name in COLUMNAR_DTYPES}
    for name, chunk, data, crc in conn.execute(
        "SELECT name, chunk, data, crc FROM columnar ORDER BY name, chunk"
    ):
        if not isinstance(data, bytes) or zlib.crc32(data) != crc:
            raise damaged(path, f"columnar copy of {name}, chunk {chunk}: bad CRC-32")
        if name in parts:
            parts[name].append(np.frombuffer(data, dtype=COLUMNAR_DTYPES[name]))
    arrays = {  # one chunk (up to 4M rows) is used as it is, without a copy
        name: p[0] if len(p) == 1 else np.concatenate([np.zeros(0, COLUMNAR_DTYPES[name]), *p])
        for name, p in parts.items()
    }
    for table in ("trial", "metric"):
        if len({len(a) for n, a in arrays.items() if n.startswith(f"{table}.")}) != 1:
            raise damaged(path, f"columnar copy of {table}: columns of unequal length")
    ids = arrays["trial.id"]
    if not _matches(conn, state[0], int(ids[-1]) if ids.size else None, names):
        return None  # not the copy of these rows (its state edited): SQL holds them
    return Columns(state[0], names, arrays)


def _last_copied(c: sqlite3.Connection) -> int | None:
    """The last trial id in the copy (the last element of its last ``trial.id`` BLOB)."""
    row = c.execute(
        "SELECT substr(data, -8) FROM columnar WHERE name = 'trial.id' AND typeof(data) = 'blob'"
        " ORDER BY chunk DESC LIMIT 1"
    ).fetchone()
    if row is None or not isinstance(row[0], bytes) or len(row[0]) < 8:
        return None  # no copy, or not one: written whole again
    return int.from_bytes(row[0], "little", signed=True)


def _matches(c: sqlite3.Connection, covers: object, last: int | None, names: object) -> bool:
    """Whether a copy whose state says ``covers`` and whose last trial is ``last`` holds the
    trials up to ``covers``: the writer copies every one of them (none is running), so the
    table's last trial up to ``covers`` is the copy's last. Two lookups in the trial
    table's key, whatever its size."""
    if not isinstance(covers, int) or names is None:
        return False
    (top,) = c.execute("SELECT max(id) FROM trial WHERE id <= ?", (covers,)).fetchone()
    return top == last


def _names(text: object) -> dict[str, list[str]] | None:
    """The copy's code names (``columnar_state.names``), or None if they are not a JSON
    object of name lists."""
    try:
        names = json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not isinstance(names, dict) or any(
        not isinstance(names.get(k), list) for k in ("status", "test", "metric")
    ):
        return None
    return names
