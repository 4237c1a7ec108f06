"""A grid's values reach the command as written, and a scan's size is known before anything
is made (real runs of the CLI)."""

from __future__ import annotations

import resource
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import washout


def test_a_substituted_value_is_never_read_again(tmp_path: Path) -> None:
    """``{{``/``}}`` are literal braces of the template only: a value holding ``}}``
    (a JSON document) reaches the command, and the test's name, as it is."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[experiment]\nruns = 1\norders = ["fixed"]\n[[test]]\nname = "t {{{j}}}"\n'
        "command = \"printf '%s {{}}' {j}\"\n"
        'params = { j = [\'{"a":{"b":1}}\', "{{x}}"] }\n'
    )
    db = tmp_path / "spec.db"
    washout("run", spec, "--db", db, "--quiet", cwd=tmp_path)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT test, stdout_tail FROM trial ORDER BY id").fetchall()
    assert rows == [
        ('t {{"a":{"b":1}}}', '{"a":{"b":1}} {}'),
        ("t {{{x}}}", "{{x}} {}"),
    ]


def _limit_memory() -> None:
    """At most 3 GB of address space: a scan made whole before its size is checked fails
    here instead of taking the machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize(
    "scan, error",
    [
        (
            ["-P", "x", "0", "1e12"],
            "--parameter-scan x 0 1e+12 -D 1: 1,000,000,000,001 values; at most 100,000 tests",
        ),
        (["-P", "x", "0", "inf"], "--parameter-scan x 0 inf -D 1: MIN, MAX and the step must"),
        (["-P", "x", "nan", "1"], "--parameter-scan x nan 1 -D 1: MIN, MAX and the step must"),
        (["-P", "x", "0", "1", "-D", "inf"], "-D inf: MIN, MAX and the step must be finite"),
        (["-P", "x", "0", "1e308", "-D", "1e-308"], "uncountably many values; at most 100,000"),
        (
            ["-P", "x", "1", "1000", "-L", "y", ",".join(map(str, range(104)))],
            "-D 1: 1,000 values make 104,000 tests; at most 100,000",
        ),
    ],
)
def test_a_scan_is_bounded_before_its_values_are_made(
    tmp_path: Path, scan: list[str], error: str
) -> None:
    """hyperfine's ``-P NAME MIN MAX [-D STEP]``: the number of tests is counted from the
    range, so a scan of 10^12 values is a one-line error at once (it was 6.5 GB in 15 s),
    and non-finite bounds are one-line errors (they were tracebacks)."""
    t0 = time.monotonic()
    proc = washout(
        "run",
        "echo {x} {y}",
        *scan,
        "--runs",
        "1",
        "--db",
        tmp_path / "s.db",
        "--quiet",
        cwd=tmp_path,
        check=False,
        preexec_fn=_limit_memory,
    )
    assert time.monotonic() - t0 < 30
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert error in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
