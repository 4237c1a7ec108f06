"""The long format put together from a store's tables (and its columnar copy) with numpy.

Statuses, tests and metric names travel as small integer codes and rows are put together
with numpy rather than pandas merges: at the ordering-trap paper's scale (2.3M rows,
bench/analysis_scale.py) the merges and string conversions cost more than reading the rows.
Every function here reads through the caller's connection, inside the caller's read
transaction (:meth:`washout.data.store.reader.Store.long_frame`).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from washout.data.store.columnar import Columns
from washout.data.store.schema import FINISHED, SUPERSEDED

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def _copied_trials(
    copy: Columns, include_superseded: bool, statuses: list[str], tests: list[str]
) -> tuple[np.ndarray, ...]:
    """:func:`_trial_codes` of the trials the columnar copy covers."""
    import numpy as np

    a, names = copy.arrays, copy.names
    codes = a["trial.status"]
    keep = codes != (names["status"].index("running") if "running" in names["status"] else -2)
    superseded = a["trial.superseded"] != 0
    if include_superseded:
        superseded = superseded[keep]
    else:
        keep &= ~superseded
        superseded = np.zeros(int(keep.sum()), dtype=bool)
    status = _lookup(statuses, names["status"])[codes[keep]]
    status[superseded] = statuses.index(SUPERSEDED)
    test = _lookup(tests, names["test"])[a["trial.test"][keep]]
    return a["trial.id"][keep], a["trial.run_id"][keep], a["trial.position"][keep], status, test


def _trial_codes(
    conn: sqlite3.Connection,
    live: str,
    include_superseded: bool,
    statuses: list[str],
    tests: list[str],
    copy: Columns | None = None,
) -> tuple[np.ndarray, ...] | None:
    """Every finished trial's id, run id, position, status code (into ``statuses``) and
    test code (into ``tests``), in id order; None if there is none. Both lists gain
    the names this version does not know (a status it does not write, a test missing
    from the test table). The trials ``copy`` covers come from it, the rest from SQL.

    The integers leave SQLite as one comma-separated text per column (one query, so
    every column lists the same rows in the same order) parsed by numpy: a Python
    tuple per row cost four times as much at 1.1M trials."""
    import numpy as np

    parts = [] if copy is None else [_copied_trials(copy, include_superseded, statuses, tests)]
    case = " ".join(f"WHEN ? THEN {i}" for i in range(len(statuses)))
    which = "1" if include_superseded else live
    where = f"t.status != 'running' AND {which} AND t.id > {0 if copy is None else copy.covers:d}"
    row = conn.execute(
        "SELECT count(*), group_concat(t.id), group_concat(t.run_id),"
        f" group_concat(t.position), group_concat(CASE WHEN NOT {live} THEN"
        f" {statuses.index(SUPERSEDED)} ELSE CASE t.status {case} ELSE -1 END END),"
        " group_concat(coalesce(s.spec_index, -1))"
        f" FROM trial t LEFT JOIN test s ON s.name = t.test WHERE {where}",
        statuses,
    ).fetchone()
    if not row[0]:
        return _joined(parts)
    trial_id, run_id, position, status, test = (
        np.fromstring(text, dtype=np.int64, sep=",") for text in row[1:]
    )
    if any(c.size != row[0] for c in (trial_id, run_id, position, status, test)):
        raise ValueError("cannot read the trials (a column is cut short)")
    by_id = np.argsort(trial_id, kind="stable")
    trial_id, run_id, position, status, test = (
        c[by_id] for c in (trial_id, run_id, position, status, test)
    )
    for codes, names, column in ((status, statuses, "status"), (test, tests, "test")):
        unknown = codes < 0
        if unknown.any():
            other = dict(
                conn.execute(
                    f"SELECT t.id, t.{column} FROM trial t LEFT JOIN test s"
                    f" ON s.name = t.test WHERE {where}"
                ).fetchall()
            )
            extra, extra_codes = np.unique(
                [other[i] for i in trial_id[unknown].tolist()], return_inverse=True
            )
            known = dict(zip(names, range(len(names))))
            codes[unknown] = [
                known.setdefault(name, len(known)) for name in extra[extra_codes].tolist()
            ]
            names[:] = list(known)
    return _joined([*parts, (trial_id, run_id, position, status, test)])


def _metric_rows(
    conn: sqlite3.Connection, names: list[str], copy: Columns | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every recorded metric value as (trial id, code into ``names`` or -1 for a metric
    no test of the spec names, value): those of the trials ``copy`` covers from it, the
    rest from SQL straight into a numpy record array, trial and metric packed into one
    integer (each value a row leaves SQLite as costs a Python object: 2.3M rows)."""
    import numpy as np

    mcase = " ".join(f"WHEN ? THEN {i}" for i in range(len(names)))
    recorded = np.fromiter(
        conn.execute(
            f"SELECT trial_id * {len(names) + 1} + CASE name {mcase} ELSE {len(names)}"
            f" END, value FROM metric WHERE trial_id > {0 if copy is None else copy.covers:d}",
            names,
        ),
        dtype=[("key", np.int64), ("value", np.float64)],
    )
    m_trial, m_code = np.divmod(recorded["key"], len(names) + 1)
    m_code[m_code == len(names)] = -1
    if copy is None:
        return m_trial, m_code, recorded["value"]
    index = {name: i for i, name in enumerate(names)}
    lut = np.array([index.get(n, -1) for n in copy.names["metric"]] + [-1], dtype=np.int64)
    a = copy.arrays
    return (
        np.concatenate([a["metric.trial_id"], m_trial]),
        np.concatenate([lut[a["metric.name"]], m_code]),
        np.concatenate([a["metric.value"], recorded["value"]]),
    )


def long_frame(
    conn: sqlite3.Connection,
    live: str,
    tests: list[tuple[str, list[str]]],
    copy: Columns | None,
    include_superseded: bool,
    stamps: bool = True,
    resources: bool = False,
    context: tuple[str, ...] = (),
) -> pd.DataFrame:
    """The long format of the store behind ``conn`` (what it holds:
    :meth:`washout.data.store.reader.Store.long_frame`); ``live`` is the SQL condition of a
    trial that is not superseded, ``tests`` each test's name and metrics in spec order,
    ``copy`` the current columnar copy if there is one, ``context`` the context columns
    its trials have (:data:`~washout.data.longformat.CONTEXT_COLUMNS`), after the others.

    A trial without a value for one of its test's metrics (failed, timed out,
    interrupted, or unparsable output) still has its row, with value NaN; a test
    without metrics gets one row with metric NaN.
    """
    import numpy as np
    import pandas as pd

    from washout.data.health import HEALTH_METRICS
    from washout.data.longformat import COLUMNS, RESOURCE_METRICS, label_column

    measured = (*RESOURCE_METRICS, *HEALTH_METRICS) if resources else ()
    metrics_of = {name: [*ms, *(m for m in measured if m not in ms)] for name, ms in tests}
    test_names = [name for name, _ in tests]
    statuses = [*FINISHED, "interrupted", SUPERSEDED]
    wanted = [c for c in COLUMNS if stamps or c not in ("started", "ended")]
    found = _trial_codes(conn, live, include_superseded, statuses, test_names, copy)
    if found is None:
        return pd.DataFrame({c: pd.Series(dtype=float if c == "value" else object) for c in wanted})
    trial_id, run_id, position, status, test_code = found
    runs = conn.execute(
        "SELECT r.id, r.idx, r.order_kind, w.id, w.name FROM run r"
        " JOIN worker w ON w.id = r.worker_id ORDER BY r.id"
    ).fetchall()
    r_id = np.array([r[0] for r in runs], dtype=np.int64)
    r_at = np.searchsorted(r_id, run_id)
    if not r_id.size or np.any(r_id[np.minimum(r_at, r_id.size - 1)] != run_id):
        raise IndexError("a trial of a run (or a run of a worker) the store does not hold")
    r_idx = np.array([r[1] for r in runs], dtype=np.int64)[r_at]
    r_worker = np.array([r[3] for r in runs], dtype=np.int64)[r_at]
    order = _lexsort((trial_id, position, r_idx, r_worker))

    # One row per trial and expected metric of its test (one, metric NaN, if none).
    names = sorted({m for ms in metrics_of.values() for m in ms})
    code_of = {m: i for i, m in enumerate(names)}
    per_test = [[code_of[m] for m in metrics_of.get(t, [])] or [-1] for t in test_names]
    flat = np.array([c for codes in per_test for c in codes], dtype=np.int64)
    first = np.cumsum([0] + [len(codes) for codes in per_test])[:-1]
    k = np.array([len(codes) for codes in per_test], dtype=np.int64)[test_code[order]]
    trial_of_row = np.repeat(order, k)
    within = np.arange(trial_of_row.size) - np.repeat(np.cumsum(k) - k, k)
    metric_of_row = flat[first[test_code[trial_of_row]] + within]

    value = np.full(trial_of_row.size, np.nan)
    if names:
        m_trial, m_code, m_value = _metric_rows(conn, names, copy)
        if m_trial.size:
            m_at = _positions(trial_id, m_trial)  # -1: not one of these trials (running)
            ok = (m_code >= 0) & (m_at >= 0)
            keys = m_at[ok] * len(names) + m_code[ok]
            m_value = m_value[ok]
            want = trial_of_row * len(names) + metric_of_row
            has = metric_of_row >= 0
            if trial_id.size * len(names) <= 4 * want.size + 1024:
                # every (trial, metric) slot counted: a table, not a search (the metric
                # table's key is (trial, name), so each slot is written at most once)
                table = np.full(trial_id.size * len(names), np.nan)
                table[keys] = m_value
                value[has] = table[want[has]]
            elif keys.size:
                if np.any(keys[1:] < keys[:-1]):  # rows in key order (as stored): no sort
                    sort = np.argsort(keys)
                    keys, m_value = keys[sort], m_value[sort]
                at = np.minimum(np.searchsorted(keys, want), keys.size - 1)
                hit = has & (keys[at] == want)
                value[hit] = m_value[at[hit]]

    if resources:  # a health measure not taken has no row (its absence is not a value)
        taken = _taken(value, test_code[trial_of_row], metric_of_row, names, test_names, tests)
        trial_of_row, metric_of_row, value = trial_of_row[taken], metric_of_row[taken], value[taken]

    order_code, order_names = pd.factorize(np.array([r[2] for r in runs], dtype=object))
    worker_code, worker_names = pd.factorize(np.array([r[4] for r in runs], dtype=object))
    columns = {
        "run": r_idx[trial_of_row],
        "order": label_column(order_code[r_at][trial_of_row], list(order_names)),
        "position": position[trial_of_row],
        "test": label_column(test_code[trial_of_row], test_names),
        "metric": label_column(metric_of_row, names),
        "value": value,
        "status": label_column(status[trial_of_row], statuses),
        "worker": label_column(worker_code[r_at][trial_of_row], list(worker_names)),
    }
    which = "1" if include_superseded else live
    if stamps:
        times = _trial_rows(conn, which, ("started", "ended"))
        for i, column in enumerate(("started", "ended")):
            out = np.array([row[i] for row in times], dtype=object)
            out[pd.isna(out)] = np.nan  # NULL (never ended) as NaN, like any missing value
            columns[column] = out[trial_of_row]
    # The arrays as they are: copying them into pandas' 2-D blocks cost 25-35 ms at 2.3M
    # rows; each column's dtype kept (time stamps stay object, not inferred as str).
    series = {c: pd.Series(columns[c], dtype=columns[c].dtype, copy=False) for c in wanted}
    if context:  # nullable: a trial of another session may have none (NA)
        found_context = _trial_rows(conn, which, context)
        for i, column in enumerate(context):
            kind = "boolean" if column == "context_aslr" else "Int64"
            values = pd.array([row[i] for row in found_context], dtype=kind)
            series[column] = pd.Series(values[trial_of_row])
    return pd.DataFrame(series, copy=False)


def _taken(
    value: np.ndarray,
    test_of_row: np.ndarray,
    metric_of_row: np.ndarray,
    names: list[str],
    test_names: list[str],
    tests: list[tuple[str, list[str]]],
) -> np.ndarray:
    """Which rows to keep: all but a health measure's without a value where the test does
    not name that metric itself (a test's own metric keeps its row, NaN or not)."""
    import numpy as np

    from washout.data.health import HEALTH_METRICS

    own = dict(tests)
    code_of = {m: i for i, m in enumerate(names)}
    added = np.zeros((len(test_names), len(names) + 1), dtype=bool)  # the last: code -1
    for t, test in enumerate(test_names):
        for m in HEALTH_METRICS:
            if m in code_of and m not in own.get(test, ()):
                added[t, code_of[m]] = True
    return ~(added[test_of_row, metric_of_row] & np.isnan(value))


def _trial_rows(
    conn: sqlite3.Connection, which: str, names: tuple[str, ...]
) -> list[tuple[object, ...]]:
    """Columns ``names`` of every finished trial (``which``: the SQL condition of the trials
    read, as :func:`_trial_codes` reads them), in id order: the order of its trial ids."""
    return conn.execute(
        f"SELECT {', '.join(names)} FROM trial WHERE status != 'running' AND {which} ORDER BY id"
    ).fetchall()


def _lookup(into: list[str], names: list[str]) -> np.ndarray:
    """For each of ``names``, its index in ``into`` (appended there if missing), plus a last
    entry -1, so that ``_lookup(...)[codes]`` maps codes into ``names`` (-1: none) to
    codes into ``into``."""
    import numpy as np

    index = {name: i for i, name in enumerate(into)}
    codes = [index.setdefault(name, len(index)) for name in names]
    into[:] = list(index)
    return np.array([*codes, -1], dtype=np.int64)


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each of ``wanted``, its index in the ascending ``ids`` (-1 where absent). Ids
    spanning a few times their count (a store's trial ids, as a rule) index a table; others
    are searched."""
    import numpy as np

    if not ids.size:
        return np.full(wanted.size, -1, dtype=np.int64)
    low, high = int(ids[0]), int(ids[-1])
    if high - low < 4 * ids.size + 1024:
        table = np.full(high - low + 2, -1, dtype=np.int64)  # the last slot: out of range
        table[ids - low] = np.arange(ids.size)
        inside = (wanted >= low) & (wanted <= high)
        return table[np.where(inside, wanted - low, high - low + 1)]
    at = np.minimum(np.searchsorted(ids, wanted), ids.size - 1)
    return np.where(ids[at] == wanted, at, -1)


def _lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """``np.lexsort(keys)`` of integer keys (the last the primary one): the keys as one
    integer in mixed radix, argsorted stably (a fifth of lexsort's time at 2.3M trials: one
    pass instead of one per key, and timsort takes the runs that rows stored in trial order
    already form); lexsort itself where the combination does not fit in 63 bits."""
    import numpy as np

    combined = np.zeros(len(keys[0]), dtype=np.int64)
    span = 1
    for key in reversed(keys):
        low, size = (int(key.min()), int(key.max()) - int(key.min()) + 1) if key.size else (0, 1)
        span *= size
        if span >= 2**63:
            return np.lexsort(keys)
        combined *= size
        combined += key - low
    return np.argsort(combined, kind="stable")


def _joined(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...] | None:
    """Column-wise concatenation of ``parts`` (each a tuple of equal-length columns);
    None if they hold no row."""
    import numpy as np

    if not any(len(part[0]) for part in parts):
        return None
    return tuple(np.concatenate(columns) for columns in zip(*parts))
