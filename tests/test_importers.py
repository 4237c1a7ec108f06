"""Sources: OrderSage results files, long-format CSVs and washout stores, told apart by content."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ARTIFACT, is_health

from washout.data.longformat import COLUMNS
from washout.data.sources import load_trials
from washout.errors import WashoutError

WASHOUT = Path(sys.executable).parent / "washout"
HEADER = ",".join(COLUMNS)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "study,raw,column,generation,runs",
    [
        ("memcached", "all_exp_results.csv", "exp_command", "exp", 100),
        ("npbench", "all_test_results.csv", "test_command", "test", 200),
    ],
)
def test_ordersage_files_become_long_format(study, raw, column, generation, runs) -> None:
    frame, info = load_trials(ARTIFACT / study / raw)
    source = pd.read_csv(ARTIFACT / study / raw)
    assert (info.kind, info.test_column, info.generation) == ("ordersage", column, generation)
    assert list(frame.columns) == list(COLUMNS)
    assert len(frame) == len(source)
    assert (frame["status"] == "ok").all() and (frame["metric"] == "result").all()
    assert frame["run"].nunique() == runs == source["run_uuid"].nunique()
    # every run holds every test once, at positions 0..k-1
    per_run = frame.groupby("run")["position"].apply(sorted)
    assert all(p == list(range(source[column].nunique())) for p in per_run)
    assert np.array_equal(frame["value"].to_numpy(), source["result"].to_numpy())
    assert list(frame["test"]) == list(source[column])
    assert list(frame["order"]) == list(source["order_type"])


def _ordersage(tmp_path: Path, rows: list[str]) -> Path:
    head = (
        "run_uuid,hostname,run_num,total_runs,test_command,test_number,order_number,"
        "order_type,time_start,time_stop,completion_status,result"
    )
    return write(tmp_path / "x_test_results.csv", "\n".join([head, *rows]) + "\n")


def test_ordersage_failures_become_failed_trials_without_values(tmp_path: Path) -> None:
    path = _ordersage(
        tmp_path,
        ["u1,h,0,1,./a.sh,0,0,fixed,1,2,Success,3.5", "u1,h,0,1,./b.sh,1,1,fixed,2,3,Failure,"],
    )
    frame, _ = load_trials(path)
    assert list(frame["status"]) == ["ok", "failed"]
    assert frame["value"].iloc[0] == 3.5 and np.isnan(frame["value"].iloc[1])


@pytest.mark.parametrize(
    "row,field,shown",
    [
        ("u1,h,0,1,./a.sh,0,0,fixed,1,2,Success,", "result", "''"),
        ("u1,h,0,1,./a.sh,0,0,fixed,1,2,Success,inf", "result", "inf"),
        ("u1,h,0,1,./a.sh,0,0,fixed,1,2,Success,12ms", "result", "'12ms'"),
        ("u1,h,0,1,./a.sh,0,0,sorted,1,2,Success,1", "order_type", "'sorted'"),
        ("u1,h,0,1,./a.sh,0,0,fixed,1,2,Done,1", "completion_status", "'Done'"),
    ],
)
def test_bad_ordersage_rows_are_one_line_errors_naming_file_line_field_value(
    tmp_path: Path, row: str, field: str, shown: str
) -> None:
    path = _ordersage(tmp_path, ["u0,h,0,1,./a.sh,0,0,fixed,1,2,Success,1", row])
    with pytest.raises(WashoutError) as err:
        load_trials(path)
    message = str(err.value)
    assert message.startswith(f"{path}: line 3: {field} = {shown}: "), message
    assert "\n" not in message


def test_long_csv_round_trips_what_export_writes(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "run": [0, 0, 1, 1],
            "order": ["fixed", "fixed", "random", "random"],
            "position": [0, 1, 0, 1],
            "test": ["NA", "null", "null", "NA"],
            "metric": ["wall", "wall", "wall", "wall"],
            "value": [1.5, np.nan, 2.0, 3.25],
            "status": ["ok", "failed", "ok", "ok"],
            "worker": ["local"] * 4,
            "started": ["2026-01-01T00:00:00+00:00"] * 4,
            "ended": [np.nan] * 4,
        }
    )
    path = tmp_path / "long.csv"
    frame.to_csv(path, index=False)
    read, info = load_trials(path)
    assert info.kind == "long-csv"
    assert list(read.columns) == list(COLUMNS)
    assert list(read["test"]) == ["NA", "null", "null", "NA"]  # names kept verbatim
    assert read["value"].tolist()[0] == 1.5 and np.isnan(read["value"].iloc[1])
    assert list(read["status"]) == list(frame["status"])


def test_long_csv_without_optional_columns_means_the_local_machine(tmp_path: Path) -> None:
    path = write(tmp_path / "l.csv", "run,order,test,metric,value,status\n0,fixed,a,wall,1,ok\n")
    read, _ = load_trials(path)
    assert list(read.columns) == list(COLUMNS) and read["worker"].iloc[0] == "local"


@pytest.mark.parametrize(
    "cell,field,shown",
    [
        ("0,fixed,0,a,wall,nan,ok,local,,", "value", "'nan'"),
        ("0,fixed,0,a,wall,-inf,ok,local,,", "value", "-inf"),
        ("0,fixed,0,a,wall,1.2.3,failed,local,,", "value", "'1.2.3'"),
        ("0,sorted,0,a,wall,1,ok,local,,", "order", "'sorted'"),
        ("0,fixed,0,a,wall,1,done,local,,", "status", "'done'"),
    ],
)
def test_bad_long_csv_cells_are_one_line_errors(tmp_path: Path, cell, field, shown) -> None:
    path = write(tmp_path / "l.csv", f"{HEADER}\n0,fixed,0,a,wall,1,ok,local,,\n{cell}\n")
    with pytest.raises(WashoutError) as err:
        load_trials(path)
    assert str(err.value).startswith(f"{path}: line 3: {field} = {shown}: "), str(err.value)


def test_unknown_csv_and_missing_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(WashoutError, match="neither a washout store, a long-format CSV"):
        load_trials(write(tmp_path / "other.csv", "a,b\n1,2\n"))
    with pytest.raises(WashoutError, match="no such file"):
        load_trials(tmp_path / "absent.csv")
    binary = tmp_path / "blob"
    binary.write_bytes(b"\xff\xfe\x00\x81" * 10)
    with pytest.raises(WashoutError, match="not a washout store or a CSV"):
        load_trials(binary)
    with pytest.raises(WashoutError, match="column.* missing"):
        load_trials(
            write(tmp_path / "half.csv", "exp_command,order_type,result,completion_status\n")
        )


def test_sqlite_file_is_read_as_a_store_and_a_foreign_one_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(WashoutError, match="not a washout store"):
        load_trials(foreign)


def test_a_real_store_and_its_export_give_the_same_trials(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    subprocess.run(
        [
            str(WASHOUT),
            "run",
            "true",
            "sleep 0.01",
            "--runs",
            "6",  # each command 6 times: 3 runs per order kind
            "--seed",
            "5",
            "--db",
            str(db),
            "-q",
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
    )
    exported = tmp_path / "x.csv"
    subprocess.run(
        [str(WASHOUT), "export", str(db), "-o", str(exported)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    from_store, info = load_trials(db, resources=True)  # export gives every metric
    from_csv, info_csv = load_trials(exported)
    assert (info.kind, info_csv.kind) == ("store", "long-csv")
    own = from_store[~from_store["metric"].astype(str).map(is_health)]  # and health's taken
    assert len(own) == 12 * 4 and set(from_store["test"]) == {"true", "sleep 0.01"}
    pd.testing.assert_frame_equal(
        from_store[["run", "order", "test", "metric", "value", "status"]].reset_index(drop=True),
        from_csv[["run", "order", "test", "metric", "value", "status"]].reset_index(drop=True),
        check_dtype=False,
    )


def test_spreadsheet_saved_csv_with_bom_and_crlf_is_read(tmp_path: Path) -> None:
    text = "run,order,test,metric,value,status\r\n0,fixed,a,wall,1,ok\r\n1,random,a,wall,2,ok\r\n"
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    frame, info = load_trials(path)
    assert info.kind == "long-csv" and list(frame["value"]) == [1.0, 2.0]
    raw = (ARTIFACT / "npbench" / "all_test_results.csv").read_bytes()
    bom = tmp_path / "x_test_results.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + raw)
    assert len(load_trials(bom)[0]) == 600


def test_a_column_subset_reads_only_what_is_asked_and_still_checks_every_row(
    tmp_path: Path,
) -> None:
    text = (
        "run,order,position,test,metric,value,status,worker\n"
        "0,fixed,0,a,wall,1,ok,n1\n1,random,0,a,wall,2,ok,n2\n"
    )
    path = write(tmp_path / "l.csv", text)
    read, _ = load_trials(path, ("order", "test", "metric", "value", "status", "worker"))
    assert list(read.columns) == ["order", "test", "metric", "value", "status", "worker"]
    assert list(read["worker"]) == ["n1", "n2"]
    bad = write(tmp_path / "bad.csv", text.replace("1,ok,n1", "1,done,n1"))
    with pytest.raises(WashoutError, match="status"):
        load_trials(bad, ("value",))
    no_run = write(tmp_path / "no_run.csv", text.replace("run,", "x,"))
    with pytest.raises(WashoutError, match="run"):
        load_trials(no_run, ("order", "test", "metric", "value", "status"))


def test_a_second_ok_row_for_one_trial_is_refused(tmp_path: Path) -> None:
    """Rows appended twice were taken as more samples (and could flip a verdict); a failed
    attempt and its ok retry share the trial's key and are kept."""
    rows = [
        "0,fixed,0,a,wall,1.0,ok,n1,,",
        "0,fixed,1,b,wall,2.0,failed,n1,,",
        "0,fixed,1,b,wall,2.5,ok,n1,,",
        "0,fixed,0,a,wall,1.0,ok,n2,,",
        "1,random,0,b,wall,2.1,ok,n1,,",
        "1,random,1,a,wall,1.1,ok,n1,,",
    ]
    path = write(tmp_path / "retry.csv", "\n".join([HEADER, *rows]) + "\n")
    frame, _ = load_trials(path)
    assert list(frame["status"]) == ["ok", "failed", "ok", "ok", "ok", "ok"]
    doubled = write(tmp_path / "doubled.csv", "\n".join([HEADER, *rows, *rows[4:]]) + "\n")
    with pytest.raises(WashoutError) as err:
        load_trials(doubled, ("order", "test", "value"))  # a column subset checks it too
    assert str(err.value) == (
        f"{doubled}: line 8: (run, position, test, metric, worker) = (1, 0, 'b', 'wall', 'n1'): "
        "a second ok row for this trial and metric (the first is line 6); each trial has one "
        "value per metric"
    )
    no_position = write(
        tmp_path / "short.csv",
        "run,order,test,metric,value,status\n0,fixed,a,wall,1,ok\n0,fixed,a,wall,1,ok\n",
    )
    with pytest.raises(WashoutError, match=r"short.csv: line 3: \(run, test, metric\) = "):
        load_trials(no_position)


def test_a_second_ok_row_in_an_ordersage_file_is_refused(tmp_path: Path) -> None:
    row = "u1,h,0,1,./a.sh,0,0,fixed,1,2,Success,3.5"
    path = _ordersage(tmp_path, [row, "u1,h,0,1,./b.sh,1,1,fixed,2,3,Success,4", row])
    with pytest.raises(WashoutError, match=r"line 4: .* \(the first is line 2\)"):
        load_trials(path)


def _long_rows(n_runs: int, tests: list[str], workers: list[str]) -> list[str]:
    """Rows of a long-format CSV: every test once per run, on the run's worker."""
    rows = []
    for run in range(n_runs):
        kind = ("fixed", "random")[run % 2]
        worker = workers[run % len(workers)]
        for position, test in enumerate(tests):
            value = 1 + (run * 7 + position) % 13 / 8
            rows.append(f"{run},{kind},{position},{test},wall,{value},ok,{worker},,")
    return rows


@pytest.mark.parametrize("runs", [4, 40_000], ids=["small", "over-5MB"])
def test_names_that_look_like_numbers_stay_verbatim(tmp_path: Path, runs: int) -> None:
    """Label columns are left to pandas' type inference (it reads text faster that way, and
    on every core above 5 MB): a test, metric or worker column that reads as numbers is read
    again as text, so "007" is not 7 and "1.50" is not 1.5, in a small file and a large one."""
    tests = ["007", "1.50", "12", "NA", "True"]
    path = write(
        tmp_path / "numeric.csv",
        "\n".join([HEADER, *_long_rows(runs, tests, ["0", "01"])]).replace(",wall,", ",1e3,")
        + "\n",
    )
    assert runs < 100 or path.stat().st_size > 5 * 2**20
    frame, _ = load_trials(path)
    assert list(frame["test"].iloc[:5]) == tests and sorted(frame["test"].unique()) == sorted(tests)
    assert set(frame["metric"]) == {"1e3"} and list(frame["worker"].iloc[[0, 5]]) == ["0", "01"]
    assert isinstance(frame["test"].dtype, pd.CategoricalDtype)
    assert list(frame["test"].cat.categories) == sorted(tests)
    numeric_only = write(tmp_path / "digits.csv", f"{HEADER}\n0,fixed,0,007,wall,1,ok,1,,\n")
    assert load_trials(numeric_only)[0]["test"].iloc[0] == "007"


def test_errors_deep_in_a_large_file_name_the_right_line(tmp_path: Path) -> None:
    """Above 5 MB pandas parses a file in parts on several threads; a bad cell or a second ok
    row far into it is still reported at its line in the file."""
    rows = _long_rows(40_000, [f"t{i}" for i in range(5)], ["n1", "n2"])
    bad = rows.copy()
    bad[150_000] = bad[150_000].replace(",ok,", ",done,")
    path = write(tmp_path / "bad.csv", "\n".join([HEADER, *bad]) + "\n")
    assert path.stat().st_size > 5 * 2**20
    with pytest.raises(WashoutError, match=rf"{path}: line 150002: status = 'done': "):
        load_trials(path)
    doubled = write(tmp_path / "doubled.csv", "\n".join([HEADER, *rows, rows[7]]) + "\n")
    with pytest.raises(WashoutError) as err:
        load_trials(doubled, ("order", "test", "value"))
    assert f"line {len(rows) + 2}: (run, position, test, metric, worker) = " in str(err.value)
    assert "(the first is line 9)" in str(err.value)
