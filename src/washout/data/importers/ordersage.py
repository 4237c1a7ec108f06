"""Read an OrderSage results file (``*_exp_results.csv`` / ``*_test_results.csv``).

OrderSage (Duplyakin et al., USENIX ATC 2023; github.com/ordersage) writes one row per
trial: ``run_uuid, hostname, run_num, total_runs, <x>_command, <x>_number, order_number,
order_type, time_start, time_stop, completion_status, result``. Its older layout calls the
test ``exp_command`` (memcached, Table 3), its newer one ``test_command`` (NPBench, Table 4);
the generation matters for reproducing its node_stats columns
(:mod:`washout.stats.ordersage_compat`).

Mapping to the long format: test = the command, metric = ``result`` (OrderSage records one
number per trial), order = order_type, position = order_number, worker = hostname, status
``Success`` -> ok and ``Failure`` -> failed, run = one id per ``run_uuid`` in order of
appearance (without run_uuid: per hostname, run_num and order_type, since the older layout
numbers fixed and random runs separately). ``time_start``/``time_stop`` are not wall-clock
times, so started/ended stay empty. A trial with two ``Success`` rows is refused, as in a
long-format CSV (:func:`washout.data.importers.longcsv.check_one_ok_row_per_trial`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from washout.data.importers.longcsv import check_choice, check_one_ok_row_per_trial, numeric_column
from washout.data.longformat import COLUMNS
from washout.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd

TEST_COLUMNS: dict[str, str] = {"exp_command": "exp", "test_command": "test"}
REQUIRED: tuple[str, ...] = (
    "order_type",
    "result",
    "completion_status",
    "run_num",
    "order_number",
    "hostname",
)
STATUS_MAP: dict[str, str] = {"Success": "ok", "Failure": "failed"}
METRIC = "result"


@dataclass(frozen=True)
class OrderSageLayout:
    """Which OrderSage generation wrote a file: ``exp`` (older) or ``test`` (newer)."""

    test_column: str
    generation: str


def is_ordersage(columns: list[str]) -> bool:
    """Whether a header looks like an OrderSage results file."""
    return any(c in columns for c in TEST_COLUMNS) and all(
        c in columns for c in ("order_type", "result", "completion_status")
    )


def read_ordersage(path: Path | str) -> tuple[pd.DataFrame, OrderSageLayout]:
    """The trials of an OrderSage results file in the long format, and its layout."""
    import pandas as pd

    path = Path(path)
    try:
        raw = pd.read_csv(
            path,
            encoding="utf-8-sig",
            keep_default_na=False,
            na_values={"result": [""]},
            dtype={
                "hostname": str,
                "order_type": str,
                "completion_status": str,
                "exp_command": str,
                "test_command": str,
                "run_uuid": str,
            },
            low_memory=False,
        )
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise SourceError(f"{path}: cannot read as CSV: {err}") from None
    test_column = next((c for c in TEST_COLUMNS if c in raw.columns), None)
    missing = [c for c in REQUIRED if c not in raw.columns]
    if test_column is None:
        missing.insert(0, "exp_command or test_command")
    if missing:
        raise SourceError(
            f"{path}: column(s) {', '.join(missing)} missing from an OrderSage results file"
        )
    assert test_column is not None  # a missing one is in ``missing``
    check_choice(raw, "order_type", ("fixed", "random"), path)
    check_choice(raw, "completion_status", tuple(STATUS_MAP), path)
    status = raw["completion_status"].map(STATUS_MAP)
    value = numeric_column(raw, "result", path, allow_empty=status != "ok")
    for column in ("run_num", "order_number"):
        numeric_column(raw, column, path)
    if "run_uuid" in raw.columns:
        run_key = raw["run_uuid"]
    else:
        run_key = raw["hostname"] + "\0" + raw["run_num"].astype(str) + "\0" + raw["order_type"]
    frame = pd.DataFrame(
        {
            "run": pd.factorize(run_key, sort=False)[0],
            "order": raw["order_type"],
            "position": raw["order_number"].astype(int),
            "test": raw[test_column],
            "metric": METRIC,
            "value": value,
            "status": status,
            "worker": raw["hostname"],
            "started": pd.NA,
            "ended": pd.NA,
        }
    )
    check_one_ok_row_per_trial(frame, path)
    return frame[list(COLUMNS)], OrderSageLayout(test_column, TEST_COLUMNS[test_column])
