"""A long-format CSV read by Arrow's CSV reader (while pandas is imported) is the frame
pandas would read, or Arrow leaves the file to pandas: the same values, types, categories,
missing cells and one-line errors either way."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from washout.data.importers.longcsv import _arrow_reading, read_long_csv
from washout.data.longformat import COLUMNS
from washout.errors import WashoutError

HEADER = ",".join(COLUMNS)
ORDER_COLUMNS = ("order", "test", "metric", "value", "status")


def _read(path: Path, columns: tuple[str, ...] | None, arrow: bool) -> pd.DataFrame | str:
    """The frame after its row checks, or the one-line error."""
    try:
        frame, check = read_long_csv(path, columns, arrow=arrow)
        check()
    except WashoutError as err:
        return str(err)
    return frame


def assert_same_read(path: Path, columns: tuple[str, ...] | None = None) -> pd.DataFrame | str:
    """Arrow's read of ``path`` and pandas' give the same frame (types and categories
    included) or the same error; returns it."""
    by_arrow, by_pandas = _read(path, columns, True), _read(path, columns, False)
    if isinstance(by_pandas, str) or isinstance(by_arrow, str):
        assert by_arrow == by_pandas
    else:
        pd.testing.assert_frame_equal(by_arrow, by_pandas)
        for column in by_pandas.columns:
            if isinstance(by_pandas[column].dtype, pd.CategoricalDtype):
                assert list(by_arrow[column].cat.categories) == list(
                    by_pandas[column].cat.categories
                )
    return by_pandas


def arrow_takes(path: Path, columns: tuple[str, ...] = COLUMNS) -> bool:
    """Whether Arrow's read gives the frame itself (not leaving the file to pandas)."""
    reading = _arrow_reading(path, columns)
    return reading is not None and reading() is not None


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


ROWS = (
    "0,fixed,0,a,wall,1.5,ok,n1,2026-01-01T00:00:00,2026-01-01T00:00:01\n"
    "0,fixed,1,b,wall,,failed,n1,,\n"
    "1,random,0,b,wall,2.25e-3,ok,n2,2026-01-01T00:00:02,\n"
    "1,random,1,a,wall,-0,ok,n2,,\n"
)


@pytest.mark.parametrize("columns", [None, ORDER_COLUMNS, ("value",)])
def test_a_plain_export_is_read_by_arrow_as_pandas_reads_it(tmp_path: Path, columns) -> None:
    path = write(tmp_path / "plain.csv", f"{HEADER}\n{ROWS}")
    assert arrow_takes(path)
    frame = assert_same_read(path, columns)
    assert isinstance(frame, pd.DataFrame) and len(frame) == 4
    if columns is None:  # empty time stamps are missing, the others kept as text
        assert frame["started"].dtype == object and frame["started"].isna().tolist() == [
            False,
            True,
            False,
            True,
        ]


@pytest.mark.parametrize(
    "name,text,taken",
    [
        ("names that look like numbers or NA", HEADER + "\n0,fixed,0,007,1e3,1,ok,NA,,\n", True),
        ("empty names", HEADER + "\n0,fixed,0,,wall,1,ok,,,\n", True),
        ("a comma inside quotes", HEADER + '\n0,fixed,0,"a,b",wall,1,ok,n,,\n', True),
        ("a quote in a name", HEADER + '\n0,fixed,0,"say ""hi""",wall,1,ok,n,,\n', False),
        ("a line break in a name", HEADER + '\n0,fixed,0,"a\nb",wall,1,ok,n,,\n', False),
        ("extra columns", "note," + HEADER + "\nx,0,fixed,0,a,wall,1,ok,n,,\n", True),
        ("the required columns", "run,order,test,metric,value,status\n0,fixed,a,w,1,ok\n", True),
        ("a value 'nan'", HEADER + "\n0,fixed,0,a,wall,nan,ok,n,,\n", False),
        ("a value 'inf'", HEADER + "\n0,fixed,0,a,wall,-inf,ok,n,,\n", False),
        ("a value '12 ms'", HEADER + "\n0,fixed,0,a,wall,12 ms,ok,n,,\n", False),
        ("a value with spaces", HEADER + "\n0,fixed,0,a,wall, 12 ,ok,n,,\n", True),
        ("an empty run", HEADER + "\n,fixed,0,a,wall,1,ok,n,,\n", False),
        ("a run '1.0'", HEADER + "\n1.0,fixed,0,a,wall,1,ok,n,,\n", False),
        ("a short row", HEADER + "\n0,fixed,0,a,wall,1,ok\n", False),
        ("a long row", HEADER + "\n0,fixed,0,a,wall,1,ok,n,,,extra\n", False),
        ("a repeated column", HEADER + ",test\n0,fixed,0,a,wall,1,ok,n,,,b\n", False),
        ("no rows", HEADER + "\n", False),
        ("a missing column", "run,order,test,value,status\n0,fixed,a,1,ok\n", False),
        ("an unknown status", HEADER + "\n0,fixed,0,a,wall,1,done,n,,\n", True),
        ("a second ok row", HEADER + "\n" + "0,fixed,0,a,wall,1,ok,n,,\n" * 2, True),
    ],
)
def test_what_arrow_might_read_otherwise_is_left_to_pandas(
    tmp_path: Path, name: str, text: str, taken: bool
) -> None:
    path = write(tmp_path / "edge.csv", text)
    assert arrow_takes(path) is taken, name
    assert_same_read(path)
    assert_same_read(path, ORDER_COLUMNS)


def test_bom_crlf_and_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    text = "run,order,test,metric,value,status\r\n0,fixed,a,wall,1,ok\r\n1,random,a,wall,2,ok\r\n"
    excel = tmp_path / "excel.csv"
    excel.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert arrow_takes(excel)
    assert_same_read(excel)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(text.replace("a,wall", "\xe9,wall").encode("latin-1"))
    assert not arrow_takes(latin)
    assert "cannot read as CSV" in str(assert_same_read(latin))


def test_a_line_break_in_a_quoted_name_at_a_block_boundary_is_left_to_pandas(
    tmp_path: Path,
) -> None:
    """Arrow cuts a file into 8 MB blocks at line breaks; a quoted name holding one would
    be cut in two. Every block boundary of a 20 MB file has such a name nearby."""
    rows, size, run = [], 0, 0
    while size < 20 << 20:
        test = '"t\n1"' if run % 500 == 0 else "t"
        row = f"{run},{('fixed', 'random')[run % 2]},0,{test},wall,{1 + run % 7},ok,n1,,\n"
        rows.append(row)
        size += len(row)
        run += 1
    path = write(tmp_path / "big.csv", HEADER + "\n" + "".join(rows))
    assert not arrow_takes(path)
    frame = assert_same_read(path, ORDER_COLUMNS)
    assert isinstance(frame, pd.DataFrame) and len(frame) == run


NAMES = st.text(alphabet=st.sampled_from(list('ab ,"\n\r1.-NAé_')), max_size=6)
VALUES = st.one_of(
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**6), 10**6),
    st.sampled_from(["nan", "inf", "1e999", "0x10", "1_0", "+1", ".5", "5.", "1E-3"]),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.sampled_from(["fixed", "random", "williams", "backwards"]),
            NAMES,
            NAMES,
            VALUES,
            st.sampled_from(["ok", "failed", "OK"]),
            NAMES,
        ),
        min_size=1,
        max_size=12,
    )
)
def test_any_small_file_reads_the_same_either_way(tmp_path: Path, rows) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "order", "position", "test", "metric", "value", "status", "worker"])
    for position, (run, order, test, metric, value, status, worker) in enumerate(rows):
        shown = "" if value is None else value if isinstance(value, str) else repr(value)
        writer.writerow([run, order, position, test, metric, shown, status, worker])
    path = write(tmp_path / "any.csv", out.getvalue())
    frame = assert_same_read(path)
    if isinstance(frame, pd.DataFrame):  # every value is the number its text says
        for (*_, value, _, _), read in zip(rows, frame["value"]):
            if isinstance(value, float):
                assert read == value
            elif value is None:
                assert math.isnan(read)
