"""Metric sources are honest and bounded: numbers are whole tokens, hostile JSON and special
files give a failed trial with a reason, a ``file`` metric comes from the trial that wrote it,
and output streams through a bounded tail (real runs of the CLI, real files and FIFOs)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import washout
from hypothesis import given, settings
from hypothesis import strategies as st

from washout.harness.executors.base import OUTPUT_TAIL, CommandOptions
from washout.harness.executors.local import LocalExecutor
from washout.harness.measure import MetricError, extract
from washout.harness.metrics.json import json_value
from washout.harness.metrics.stdout import last_number
from washout.harness.spec import MetricSpec


def trials(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT test, status, reason FROM trial ORDER BY id").fetchall()


def outcomes(db: Path) -> dict[str, tuple[str, str]]:
    """Each test's (status, reason), of its last trial."""
    return {test: (status, reason) for test, status, reason in trials(db)}


def metric_values(db: Path) -> dict[str, list[float]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT t.test, m.value FROM metric m JOIN trial t ON t.id = m.trial_id"
            " WHERE m.name NOT IN ('user', 'system', 'max_rss') AND m.name NOT LIKE 'health.%'"
            " ORDER BY t.id"
        ).fetchall()
    values: dict[str, list[float]] = {}
    for test, value in rows:
        values.setdefault(test, []).append(value)
    return values


def run_spec(
    tmp_path: Path, body: str, *, experiment: str = "", check: bool = False, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], Path]:
    spec = tmp_path / "spec.toml"
    spec.write_text('[experiment]\nruns = 1\norders = ["fixed"]\n' + experiment + body)
    db = tmp_path / "spec.db"
    return washout(
        "run", spec, "--db", db, "--quiet", cwd=tmp_path, check=check, timeout=timeout
    ), db


@pytest.mark.parametrize(
    "text, expected",
    [
        ("result 42", 42.0),
        ("took 1.5 s", 1.5),
        ("rps: 1e6.", 1e6),
        ("(3)", 3.0),
        ("-3.5\n\n", -3.5),
        ("x 12 y 1,234,567", 12.0),
        ("7 on 2024-01-02", 7.0),
        ("9 v1.2.3", 9.0),
        ("5 then 12ms", 5.0),
        ('"8",', 8.0),
        ("energy=12e3 J", 12000.0),
        ("rps=1,234 n=3", 3.0),
    ],
)
def test_last_number_is_the_last_whole_numeric_token(text: str, expected: float) -> None:
    assert last_number(text) == expected


@pytest.mark.parametrize(
    "text", ["1,234,567", "2024-01-02", "v1.2.3", "12ms", "", "t=12ms", "x=", "12\u00a034"]
)
def test_digits_inside_other_tokens_are_not_numbers(text: str) -> None:
    with pytest.raises(MetricError, match="no number in stdout"):
        last_number(text)


def test_json_beyond_the_parser_limits_is_a_reason_not_a_crash() -> None:
    with pytest.raises(MetricError, match="not a finite number"):
        json_value('{"v": ' + "1" * 5000 + "}", "v")
    with pytest.raises(MetricError, match="nested deeper"):
        json_value("[" * 100_000, "0")
    assert json_value('{"big": ' + "9" * 5000 + ', "v": 12}', "v") == 12.0


def test_hostile_json_fails_its_trial_and_leaves_the_store_resumable(tmp_path: Path) -> None:
    (tmp_path / "digits.json").write_text('{"v": ' + "1" * 5000 + "}")
    (tmp_path / "deep.json").write_text("[" * 100_000)
    proc, db = run_spec(
        tmp_path,
        """
[[test]]
name = "digits"
command = "cat digits.json"
[test.metrics.v]
json = "v"
[[test]]
name = "deep"
command = "cat deep.json"
[test.metrics.v]
json = "0"
""",
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    reasons = outcomes(db)
    assert reasons["digits"] == ("failed", "metric v: json path v is inf, not a finite number")
    assert reasons["deep"][0] == "failed" and "nested deeper" in reasons["deep"][1]
    assert "Traceback" not in washout("resume", db, "--quiet", check=False).stderr
    assert {s for _, s, _ in trials(db)} == {"failed"}  # no row left running


def test_a_file_metric_must_be_written_by_this_trial(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("99\n")  # left by an earlier trial
    (tmp_path / "written.txt").write_text("99\n")
    proc, db = run_spec(
        tmp_path,
        """
[[test]]
name = "stale"
command = "true"
[test.metrics.v]
file = "out.txt"
[[test]]
name = "fresh"
command = "echo 7 > written.txt"
[test.metrics.v]
file = "written.txt"
""",
    )
    assert "Traceback" not in proc.stderr
    reasons = outcomes(db)
    assert reasons["stale"] == (
        "failed",
        "metric v: file out.txt could not be read: No such file or directory",
    )
    assert reasons["fresh"] == ("ok", "")
    assert metric_values(db)["fresh"] == [7.0]
    assert not (tmp_path / "out.txt").exists()


def test_special_files_are_refused_without_waiting(tmp_path: Path) -> None:
    (tmp_path / "old.dir").mkdir()  # special files where the metric file goes: left alone
    os.mkfifo(tmp_path / "old.fifo")
    t0 = time.monotonic()
    proc, db = run_spec(
        tmp_path,
        """
[[test]]
name = "fifo"
command = "mkfifo made.fifo"
timeout = "20s"
[test.metrics.v]
file = "made.fifo"
[[test]]
name = "dir"
command = "mkdir made.dir"
[test.metrics.v]
file = "made.dir"
[[test]]
name = "old-fifo"
command = "touch ran-fifo"
[test.metrics.v]
file = "old.fifo"
[[test]]
name = "old-dir"
command = "touch ran-dir"
[test.metrics.v]
file = "old.dir"
""",
        timeout=60,
    )
    assert time.monotonic() - t0 < 20, "a FIFO metric must not wait for a writer"
    assert "Traceback" not in proc.stderr
    reasons = outcomes(db)
    assert reasons["fifo"] == (
        "failed",
        "metric v: file made.fifo could not be read: a FIFO, not a regular file",
    )
    assert reasons["dir"] == (
        "failed",
        "metric v: file made.dir could not be read: a directory, not a regular file",
    )
    assert reasons["old-fifo"] == (
        "failed",
        "metric v: file old.fifo cannot be removed "
        "before the trial (a value must come from this "
        "trial): a FIFO, not a regular file",
    )
    assert "old.dir cannot be removed" in reasons["old-dir"][1]
    assert (tmp_path / "old.fifo").exists() and (tmp_path / "old.dir").is_dir()
    assert not (tmp_path / "ran-fifo").exists() and not (tmp_path / "ran-dir").exists()


def test_output_streams_through_a_bounded_tail(tmp_path: Path) -> None:
    """300 MB of output in small writes: washout's memory stays far below it and the kept
    tail is exactly ``output_tail`` bytes; a stdout metric reads that tail."""
    probe = tmp_path / "probe.py"
    # Peak RSS of this process image (VmHWM): ru_maxrss would carry over the RSS of the
    # (large) test process it was started from.
    probe.write_text("""
import asyncio, re
from pathlib import Path
from washout.harness.executors.base import CommandOptions
from washout.harness.executors.local import LocalExecutor
result = asyncio.run(
    LocalExecutor().run("yes | head -c 300000000; echo 1234", CommandOptions(timeout=120))
)
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
print(result.status, len(result.stdout), result.stdout_cut, result.stdout[-5:].decode().strip(),
      peak_kb // 1024)
""")
    out = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, check=True, timeout=180
    ).stdout.split()
    status, kept, cut, last, rss_mb = out
    assert (status, kept, cut, last) == ("ok", str(OUTPUT_TAIL), "True", "1234")
    assert int(rss_mb) < 80, f"{rss_mb} MB for 300 MB of output"

    proc, db = run_spec(
        tmp_path,
        """
[[test]]
name = "count"
command = "seq 1 300000"
[test.metrics.n]
stdout = "last-number"
[[test]]
name = "json"
command = "printf '{\\"v\\": 1, \\"pad\\": \\"%070000d\\"}' 0"
[test.metrics.v]
json = "v"
""",
        experiment='output_tail = "64KiB"\n',
    )
    assert "Traceback" not in proc.stderr
    assert metric_values(db)["count"] == [300000.0]
    reasons = outcomes(db)
    assert reasons["json"][0] == "failed"
    kept = "only the last 65536 bytes of stdout are kept: [experiment] output_tail"
    assert kept in reasons["json"][1]


def test_the_wall_of_a_command_with_much_output_is_the_command() -> None:
    """A command printing 300 MB is slowed by washout's reading no more than by ``cat``'s
    (it was 16x the command alone: every 64 KiB read went through the event loop into a
    growing list); with ``output_tail = 0`` nothing reads it, as if alone. The 5% goal is
    measured in bench/output_overhead.py; the bounds here are loose enough for a loaded
    machine and still catch the 16x it was."""
    gigabyte = "yes | head -c 300000000"

    async def wall(command: str, output_tail: int = OUTPUT_TAIL) -> float:
        walls = [
            (
                await LocalExecutor().run(
                    command, CommandOptions(timeout=120, output_tail=output_tail)
                )
            ).duration
            for _ in range(3)
        ]
        return min(walls)

    async def walls() -> tuple[float, float, float, float]:
        return (
            await wall(gigabyte),
            await wall(f"{gigabyte} | cat"),
            await wall(gigabyte, output_tail=0),
            await wall(f"{gigabyte} > /dev/null"),
        )

    read_by_washout, read_by_cat, discarded, alone = asyncio.run(walls())
    assert read_by_washout < 2 * read_by_cat + 0.3, (read_by_washout, read_by_cat)
    assert discarded < 2 * alone + 0.3, (discarded, alone)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**4000), max_value=10**4000)
    | st.floats()
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("ab0"), inner, max_size=3)
    ),
    max_leaves=30,
)
SOURCES = [
    MetricSpec(stdout="last-number"),
    MetricSpec(**{"json": "a.0"}),
    MetricSpec(regex=r"v=(?P<value>\S+)"),
    MetricSpec(regex=r"(?P<value>(1|11)+)2"),  # backtracks catastrophically on many ones
]
TEXT = "0123456789.,-+eE v=:[]{}\"'\n\u00a0\u2009\u202f\u2003" + "nanifty"


@settings(max_examples=300, deadline=timedelta(seconds=10))
@given(
    st.one_of(
        st.binary(max_size=3000),
        st.text(alphabet=TEXT, max_size=300).map(str.encode),
        st.integers(min_value=1, max_value=26).map(lambda n: b"1" * n),  # budget: its own test
        JSON_VALUES.map(lambda v: json.dumps(v, allow_nan=True).encode()),
        st.integers(min_value=1, max_value=200_000).map(lambda n: b"[" * n + b"]" * (n % 3)),
    ),
    st.booleans(),
)
def test_any_output_gives_a_finite_value_or_a_reason(output: bytes, cut: bool) -> None:
    """Whatever a command prints, whole or cut to its tail, every source gives a finite
    number or a MetricError (the engine's one-line reason for a failed trial) within its
    budget, never another exception or a hang (the deadline)."""
    for source in SOURCES:
        try:
            value = extract(source, stdout=output, wall=1.0, file_content=None, stdout_cut=cut)
        except MetricError as err:
            assert str(err) and "\n" not in str(err)
        else:
            assert math.isfinite(value)


def test_a_number_cut_by_the_output_tail_is_not_read_in_part(tmp_path: Path) -> None:
    """Output just longer than ``output_tail``: the kept tail starts inside ``1234567``,
    whose end (``567``) no parser reads; the trial fails saying the output was cut."""
    pad = 65536 - 4  # the kept 64 KiB start 4 bytes before the padding: "567 " or "567\n"
    proc, db = run_spec(
        tmp_path,
        f"""
[[test]]
name = "last-number"
command = "printf 'result 1234567 '; head -c {pad} /dev/zero | tr '\\\\0' ' '"
[test.metrics.v]
stdout = "last-number"
[[test]]
name = "json"
command = "printf '1234567 '; head -c {pad} /dev/zero | tr '\\\\0' ' '"
[test.metrics.v]
json = ""
[[test]]
name = "regex"
command = "printf 'v=1234567\\\\n'; head -c {pad} /dev/zero | tr '\\\\0' '-'"
[test.metrics.v]
regex = '^(?P<value>[0-9]+)$'
[[test]]
name = "whole"
command = "printf 'result 1234567 '; head -c {pad - 20} /dev/zero | tr '\\\\0' ' '"
[test.metrics.v]
stdout = "last-number"
""",
        experiment='output_tail = "64KiB"\n',
    )
    assert "Traceback" not in proc.stderr
    reasons = outcomes(db)
    kept = " (only the last 65536 bytes of stdout are kept: [experiment] output_tail)"
    assert reasons["last-number"] == ("failed", "metric v: no number in stdout" + kept)
    assert reasons["json"] == (
        "failed",
        "metric v: stdout is not a whole JSON document (its start was cut)" + kept,
    )
    assert reasons["regex"] == (
        "failed",
        "metric v: regex '^(?P<value>[0-9]+)$' does not match stdout" + kept,
    )
    assert reasons["whole"] == ("ok", "")
    assert metric_values(db)["whole"] == [1234567.0]


@pytest.mark.parametrize("separator", ["\u202f", "\u00a0", "\u2009"])
def test_digits_grouped_by_a_unicode_space_are_one_number(tmp_path: Path, separator: str) -> None:
    """``1 234 567`` with a narrow no-break, no-break or thin space between the groups (as
    ``printf "%'d"`` writes it in many locales) is 1234567, never 567; a token whose groups
    are not threes is not a number, so it is not read at all."""
    grouped = f"1{separator}234{separator}567"
    proc, db = run_spec(
        tmp_path,
        f"""
[[test]]
name = "grouped"
command = "echo 'ops: {grouped} per s'"
[test.metrics.v]
stdout = "last-number"
[[test]]
name = "unit"
command = "echo 'took 12{separator}ms'"
[test.metrics.v]
stdout = "last-number"
[[test]]
name = "ragged"
command = "echo '12{separator}34'"
[test.metrics.v]
stdout = "last-number"
""",
    )
    assert "Traceback" not in proc.stderr
    reasons = outcomes(db)
    assert reasons["ragged"] == ("failed", "metric v: no number in stdout")
    values = metric_values(db)
    assert values["grouped"] == [1234567.0]
    assert values["unit"] == [12.0]  # a space between a number and its unit still parts them


def test_nan_and_inf_fail_the_metric_rather_than_being_skipped(tmp_path: Path) -> None:
    """``ops=5000 p99=nan``: the last number is nan, so the metric has no value and the
    trial says why; 5000 (another quantity) is never taken in its place."""
    proc, db = run_spec(
        tmp_path,
        """
[[test]]
name = "nan"
command = "echo 'ops=5000 p99=nan'"
[test.metrics.v]
stdout = "last-number"
[[test]]
name = "inf"
command = "echo 'rate: -Infinity'"
[test.metrics.v]
stdout = "last-number"
[[test]]
name = "regex"
command = "echo 'p99=inf'"
[test.metrics.v]
regex = 'p99=(?P<value>\\S+)'
""",
    )
    assert "Traceback" not in proc.stderr
    assert trials(db) == [
        ("nan", "failed", "metric v: last number in stdout is nan, not a finite number"),
        ("inf", "failed", "metric v: last number in stdout is -inf, not a finite number"),
        ("regex", "failed", "metric v: regex group 'value' in stdout is inf, not a finite number"),
    ]


def test_a_catastrophic_regex_fails_its_trial_within_its_budget(tmp_path: Path) -> None:
    """``(1|11)+2`` on 40 ones backtracks for longer than anyone waits: the trial fails
    with the reason once the regex budget is spent, and the run goes on; the issue's
    ``(\\d+)+x`` on 34 digits is refused at once."""
    t0 = time.monotonic()
    proc, db = run_spec(
        tmp_path,
        """
[[test]]
name = "alternation"
command = "printf '%040d' 0 | tr 0 1"
[test.metrics.v]
regex = '(?P<value>(1|11)+)2'
[[test]]
name = "nested"
command = "printf '%034d' 0 | tr 0 1"
[test.metrics.v]
regex = '(?P<value>(\\d+)+)x'
[[test]]
name = "after"
command = "echo 3"
[test.metrics.v]
stdout = "last-number"
""",
        timeout=60,
    )
    assert time.monotonic() - t0 < 30
    assert "Traceback" not in proc.stderr
    assert trials(db) == [
        (
            "alternation",
            "failed",
            "metric v: regex '(?P<value>(1|11)+)2' ran past its 2 s budget on stdout",
        ),
        ("nested", "failed", "metric v: regex '(?P<value>(\\\\d+)+)x' does not match stdout"),
        ("after", "ok", ""),
    ]


def test_signals_are_honoured_while_a_regex_runs(tmp_path: Path) -> None:
    """SIGTERM while a trial's regex backtracks: washout stops (within the regex budget),
    the store keeps the trial, and nothing is left running."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[experiment]\nruns = 5\norders = ["fixed"]\n[[test]]\nname = "t"\n'
        "command = \"touch started; printf '%040d' 0 | tr 0 1\"\n"
        "[test.metrics.v]\nregex = '(?P<value>(1|11)+)2'\n"
    )
    db = tmp_path / "spec.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "run", str(spec), "--db", str(db), "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # the command took a millisecond: the regex is running now
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert "Traceback" not in stderr
    assert proc.returncode != 0
    statuses = [status for _, status, _ in trials(db)]
    assert statuses and "running" not in statuses and len(statuses) < 5


def test_validate_warns_of_a_file_metric_outside_the_working_directory(tmp_path: Path) -> None:
    """A ``file`` metric is removed before every trial: ``validate`` (and ``run``) say so
    in one line when it names an existing file outside the test's working directory, and
    say nothing of a file inside it or of one that does not exist."""
    work = tmp_path / "work"
    work.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (work / "out.txt").write_text("1\n")
    spec = work / "spec.toml"
    spec.write_text(
        '[[test]]\nname = "a"\ncommand = "echo 1 > out.txt"\n'
        f'[test.metrics.outside]\nfile = "{precious}"\n'
        '[test.metrics.relative]\nfile = "../precious.txt"\n'
        '[test.metrics.inside]\nfile = "out.txt"\n'
        '[test.metrics.absent]\nfile = "/nonexistent/washout-metric"\n'
    )
    proc = washout("validate", spec, cwd=work)
    assert proc.stderr.splitlines() == [
        f"{spec}: warning: test 'a' metric 'outside': file {precious} exists outside the "
        f"working directory ({work}); it is removed before every trial"
    ]
    assert precious.read_text() == "keep me\n"


@settings(max_examples=6, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=2000),
        st.text(alphabet=TEXT, max_size=200).map(str.encode),
        JSON_VALUES.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    ),
    st.sampled_from(["0", "64"]),
)
def test_any_output_is_a_recorded_trial(output: bytes, tail: str) -> None:
    """A real run whose command prints anything (kept whole, cut to 64 bytes, or sent to
    /dev/null): washout exits without a traceback and every trial is recorded, ok with a
    finite value or failed with a one-line reason."""
    with tempfile.TemporaryDirectory() as work:
        Path(work, "out.bin").write_bytes(output)
        metrics = "".join(
            f"[test.metrics.{name}]\n{key} = {value}\n"
            for name, key, value in [
                ("n", "stdout", "'last-number'"),
                ("j", "json", "'a.0'"),
                ("r", "regex", "'v=(?P<value>\\S+)'"),
            ]
        )
        proc, db = run_spec(
            Path(work),
            f'[[test]]\nname = "t"\ncommand = "cat out.bin"\n{metrics}',
            experiment=f"output_tail = {tail}\n",
        )
        assert "Traceback" not in proc.stdout + proc.stderr
        rows = trials(db)
        assert [test for test, _, _ in rows] == ["t"]
        status, reason = rows[0][1:]
        assert status in ("ok", "failed") and "\n" not in reason
        assert (status == "failed") == bool(reason)
        assert all(math.isfinite(v) for v in metric_values(db).get("t", []))
