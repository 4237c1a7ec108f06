"""Property-based tests: random and mutated specs, CSVs and metric outputs give a clean
one-line error (a MetricError, i.e. a failed trial, for metrics) or a valid result, never any
other exception and never a hang (hypothesis, with a deadline per example)."""

from __future__ import annotations

import io
import json
import subprocess
import tempfile
from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import FIXTURES, washout
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from washout.data.sources import load_trials
from washout.errors import WashoutError
from washout.harness.measure import MetricError, extract
from washout.harness.spec import (
    MetricSpec,
    Spec,
    expand_tests,
    parse_spec_text,
    spec_from_data,
    unsafe_placeholder,
)

DEADLINE = timedelta(seconds=10)  # generous on a loaded machine; a hang still fails

VALID_SPEC = """[experiment]
name = "fuzz"
runs = 3
design = "alternate"
seed = 7
alpha = 0.05
correction = "holm"
on_failure = "retry:2"
timeout = "30s"

[reset]
command = "sync"
timeout = "10s"

[[test]]
name = "io-{rw}-{bs}"
command = "fio --rw={rw} --bs={bs}"
params = { rw = ["read", "randread"], bs = ["4k", "1m"] }
[test.metrics.bw]
regex = 'bw=(?P<value>[0-9.]+)'
better = "higher"

[[test]]
name = "plain"
command = "echo 1"
cpus = "0-1"
[test.metrics.n]
stdout = "last-number"
"""

SCALARS = st.one_of(
    st.integers(-5, 10**6),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
)


def one_line_or_spec(text: str | dict) -> None:
    try:
        spec = (
            parse_spec_text(text, "fuzz.toml")
            if isinstance(text, str)
            else spec_from_data(text, "fuzz.toml")
        )
    except WashoutError as err:
        message = str(err)
        assert message.startswith("fuzz.toml") and "\n" not in message
        return
    assert isinstance(spec, Spec)
    assert expand_tests(spec, "fuzz.toml")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_specs_fail_cleanly(data: st.DataObject) -> None:
    lines = VALID_SPEC.splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["drop", "dup", "value", "key", "garble"]))
        line = lines[i]
        if action == "drop":
            lines.pop(i)
        elif action == "dup":
            lines.insert(i, line)
        elif action == "value" and "=" in line:
            key = line.split("=", 1)[0]
            value = data.draw(SCALARS)
            rendered = (
                repr(value).replace("'", '"') if not isinstance(value, bool) else str(value).lower()
            )
            lines[i] = f"{key}= {rendered}"
        elif action == "key" and "=" in line:
            lines[i] = (
                data.draw(st.sampled_from(["bogus", "runs", "name", "timeout", "metrics"]))
                + " ="
                + line.split("=", 1)[1]
            )
        else:
            j = data.draw(st.integers(0, max(0, len(line) - 1)))
            lines[i] = line[:j] + data.draw(st.text(max_size=3)) + line[j + 1 :]
        if not lines:
            break
    one_line_or_spec("\n".join(lines))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_as_spec_fails_cleanly(text: str) -> None:
    one_line_or_spec(text)


# What TOML can give: scalars of every type, hostile strings, nested tables and arrays.
HOSTILE_TEXT = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        [
            "",
            " ",
            "\t\n",
            "a\x00b",
            "\ufeff",
            "A=B",
            "{x}",
            '"{x}"',
            "$(touch x)",
            "x' ; y",
            "1e999",
            "-0",
            "99999",
            "0-1",
            "a < b",
            "a <",
            "fixed",
            "retry:2",
            "30s",
        ]
    ),
)
LEAVES = st.one_of(HOSTILE_TEXT, st.integers(-(2**63), 2**63 - 1), st.floats(), st.booleans())
KEYS = st.one_of(
    st.sampled_from(
        [
            "name",
            "command",
            "runs",
            "seed",
            "port",
            "host",
            "env",
            "params",
            "metrics",
            "claims",
            "timeout",
            "cpus",
            "orders",
            "design",
            "on_failure",
            "regex",
            "json",
            "file",
            "wall",
            "stdout",
            "kind",
            "comand",
            "x",
        ]
    ),
    HOSTILE_TEXT,
)
TOML_VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=150, deadline=DEADLINE)
@given(
    experiment=st.dictionaries(KEYS, TOML_VALUES, max_size=4),
    tests=st.lists(st.dictionaries(KEYS, TOML_VALUES, max_size=5), max_size=3),
    workers=st.lists(st.dictionaries(KEYS, TOML_VALUES, max_size=3), max_size=3),
    top=st.dictionaries(KEYS, TOML_VALUES, max_size=2),
)
def test_random_spec_tables_fail_cleanly(
    experiment: dict, tests: list, workers: list, top: dict
) -> None:
    """Any value of any type in any field (and keys that are no field) of [experiment],
    [[test]] and [[worker]]: a Spec, or one line naming the file."""
    data = {
        **top,
        "experiment": experiment,
        "test": [{"name": f"t{i}", "command": "true", **t} for i, t in enumerate(tests)],
        "worker": workers,
    }
    one_line_or_spec(data)


# Shell fragments: quotes, escapes, substitutions, here-documents, comments and a placeholder.
FRAGMENTS = st.lists(
    st.sampled_from(
        [
            "echo",
            " ",
            "x",
            "y",
            '"',
            "'",
            "$(",
            ")",
            "(",
            "`",
            "\\",
            "#",
            "\n",
            "<<E",
            "E",
            "${",
            "}",
            ";",
            "|",
            "=",
            "$",
            "{v}",
            "{{",
            "}}",
        ]
    ),
    max_size=14,
).map("".join)
INJECTIONS = [
    "$(touch MARK)",
    "`touch MARK`",
    "; touch MARK",
    "' ; touch MARK ; '",
    '" ; touch MARK ; "',
    "\n touch MARK",
    "$(touch MARK)'\"`",
    "\\'$(touch MARK)",
]


@settings(max_examples=150, deadline=DEADLINE)
@given(template=FRAGMENTS.map(lambda t: t + " {v}"), injection=st.sampled_from(INJECTIONS))
def test_an_accepted_placeholder_never_runs_its_value(template: str, injection: str) -> None:
    """Whatever shell surrounds a placeholder, if the spec is accepted the value, however
    hostile, never runs: the filled command is run by a real /bin/sh."""
    text = {"test": [{"name": "t{v}", "command": template, "params": {"v": [injection]}}]}
    try:
        spec = spec_from_data(text, "fuzz.toml")
    except WashoutError as err:
        assert "\n" not in str(err)
        return
    assert unsafe_placeholder(template) is None
    (test,) = expand_tests(spec)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            ["/bin/sh", "-c", test.command],
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
        assert not (Path(tmp) / "MARK").exists(), test.command


LONG_CSV = (FIXTURES / "ordersage-artifact" / "memcached" / "all_exp_results.csv").read_text()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_csvs_load_or_fail_cleanly(data: st.DataObject) -> None:
    """OrderSage and long-format CSVs with cells, lines or headers mutated, or lines
    repeated (a repeated ok trial must be refused, not counted twice)."""
    base = data.draw(st.sampled_from(["ordersage", "long"]))
    if base == "ordersage":
        lines = LONG_CSV.splitlines()[:40]
    else:
        lines = ["run,order,position,test,metric,value,status,worker,started,ended"] + [
            f"{r},{'fixed' if r % 2 == 0 else 'random'},{p},t{p},wall,{1 + r * 0.01 + p},ok,local,,"
            for r in range(8)
            for p in range(3)
        ]
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        if data.draw(st.booleans()):
            lines.insert(data.draw(st.integers(1, len(lines))), lines[max(i, 1)])
            continue
        cells = lines[i].split(",")
        j = data.draw(st.integers(0, len(cells) - 1))
        cells[j] = data.draw(
            st.one_of(
                st.sampled_from(["", "nan", "inf", "-1", "x", "fixed", '"']), st.text(max_size=4)
            )
        )
        lines[i] = ",".join(cells)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.csv"
        path.write_text("\n".join(lines) + "\n")
        try:
            frame, _info = load_trials(path)
        except WashoutError as err:
            assert "\n" not in str(err) and "data.csv" in str(err)
            return
        assert {"run", "order", "test", "metric", "value", "status"} <= set(frame.columns)
        ok = frame[frame["status"] == "ok"]
        assert not ok.duplicated(["run", "position", "test", "metric", "worker"]).any()


METRICS = [
    MetricSpec(stdout="last-number"),
    MetricSpec(json="a.0.b"),
    MetricSpec(json="x"),
    MetricSpec(regex=r"v=(?P<value>\S+)"),
    MetricSpec(regex=r"(?P<value>[0-9.]+)?$"),
    MetricSpec(file="out.txt"),
    MetricSpec(file="out.json", json="a.0.b"),
]
OUTPUTS = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from(["a", "b", "x"]), inner, max_size=3),
        ),
        max_leaves=10,
    ).map(lambda v: __import__("json").dumps(v).encode()),
    st.sampled_from(
        [
            b"v=1e999",
            b"v=nan",
            b"1,234,567",
            b"2024-01-02",
            b"v1.2.3",
            b"\xff\xfe",
            b'{"a": [{"b": true}]}',
            b'{"a": [{"b": "12"}]}',
            b"[" * 50 + b"]" * 50,
        ]
    ),
)


@settings(max_examples=300, deadline=DEADLINE)
@given(output=OUTPUTS, spec=st.sampled_from(METRICS), readable=st.booleans())
def test_any_output_gives_a_value_or_a_failed_trial(
    output: bytes, spec: MetricSpec, readable: bool
) -> None:
    """stdout or a metric file of any content: a finite number or a MetricError (the trial
    is recorded as failed with that reason), never another exception or a hang."""
    try:
        value = extract(spec, stdout=output, wall=1.0, file_content=output if readable else None)
    except MetricError as err:
        assert str(err) and "\n" not in str(err)
        return
    assert value == value and abs(value) != float("inf")


@pytest.mark.parametrize(
    "output",
    [
        b'{"a": [{"b": ' + b"9" * 5000 + b"}]}",
        b"[" * 100_000 + b"]" * 100_000,
        b"9" * 5000,
    ],
    ids=["5000-digit JSON integer", "100k nested brackets", "5000-digit number"],
)
def test_huge_numbers_and_deep_json_fail_the_trial_not_washout(output: bytes) -> None:
    """A value or a MetricError (a failed trial with its reason) from every source."""
    for spec in METRICS:
        try:
            value = extract(spec, stdout=output, wall=1.0, file_content=output)
        except MetricError:
            continue
        assert value == value and abs(value) != float("inf")


TEST = "[[test]]\nname='a'\ncommand='x'\n"


def test_cli_never_shows_a_traceback_for_bad_specs(tmp_path: Path) -> None:
    cases = {
        "syntax.toml": ("[experiment\nruns = 1\n", "line 1"),
        "runs.toml": (
            "[experiment]\nruns = -1\n[[test]]\nname='a'\ncommand='x'\n",
            "experiment.runs = -1",
        ),
        "empty.toml": ("[experiment]\nruns = 1\ntest = []\n", "unknown key 'test' in [experiment]"),
        "notests.toml": ("test = []\n", "test = []"),
        "dup.toml": (
            "[[test]]\nname='a'\ncommand='x'\n[[test]]\nname='a'\ncommand='y'\n",
            "duplicate test name",
        ),
        "regex.toml": (
            "[[test]]\nname='a'\ncommand='x'\n[test.metrics.m]\nregex='(?P<v>1'\n",
            "test[0].metrics.m.regex",
        ),
        "placeholder.toml": (
            "[[test]]\nname='a-{x}'\ncommand='x {y}'\nparams={x=[1]}\n",
            "unknown placeholder {y}",
        ),
        "type.toml": (
            "[experiment]\nalpha = 'high'\n[[test]]\nname='a'\ncommand='x'\n",
            "experiment.alpha = 'high'",
        ),
        "cpus.toml": ("[[test]]\nname='a'\ncommand='x'\ncpus='3-1'\n", "test[0].cpus = '3-1'"),
        # Validation up front: each of these passed validate (or crashed) before.
        "typo.toml": (
            "[[test]]\nname='a'\ncomand='x'\n",
            "unknown key 'comand' in [[test]] 1 (did you mean 'command'?)",
        ),
        "metric-typo.toml": (
            "[[test]]\nname='a'\ncommand='x'\n[test.metrics.m]\nregx='(?P<value>1)'\n",
            "unknown key 'regx' in [test.metrics.m] of [[test]] 1 (did you mean 'regex'?)",
        ),
        "huge.toml": (
            f"[experiment]\nruns = 100000000000\n{TEST}",
            "experiment.runs = 100000000000: at most",
        ),
        "trials.toml": (
            "[experiment]\nruns = 1000000\n[[test]]\nname='t{x}'\ncommand='x'\n"
            "params={x=[1,2,3,4,5,6]}\n",
            "= 12,000,000 trials; at most 10,000,000",
        ),
        "bool.toml": (f"[experiment]\nruns = true\n{TEST}", "experiment.runs = True"),
        "port.toml": (f"{TEST}[[worker]]\nhost='h'\nport=99999\n", "worker[0].port = 99999"),
        "twins.toml": (
            f"{TEST}[[worker]]\nhost='h'\nport=2200\n[[worker]]\nhost='h'\nport=2200\n",
            "worker[1] = 'h:2200': the same host and port as worker[0]",
        ),
        "blank.toml": ("[[test]]\nname='  '\ncommand='x'\n", "test[0].name = '  ': must not be"),
        "blankcmd.toml": ("[[test]]\nname='a'\ncommand=' \t'\n", "test[0].command = ' \\t'"),
        "nul.toml": (
            "[[test]]\nname='a'\ncommand=\"x\\u0000y\"\n",
            "test[0].command = 'x\\x00y': contains a NUL",
        ),
        "envkey.toml": (f"{TEST}env = {{'A=B' = '1'}}\n", "'A=B' is not a variable name"),
        "claim.toml": (
            f"[experiment]\nclaims = ['a <']\n{TEST}",
            "experiment.claims[0]: claim 'a <'",
        ),
        "claimtest.toml": (
            f"[experiment]\nclaims = ['a < b']\n{TEST}",
            "experiment.claims[0] = 'a < b': unknown test 'b'",
        ),
        "sweep.toml": (
            "[sweep]\ncommand = 'x {a}'\n[sweep.params]\na = [1, 2]\n",
            "has a [sweep] table: run it with `washout sweep",
        ),
        "quoted.toml": (
            "[[test]]\nname='t{x}'\ncommand='echo \"{x}\"'\nparams={x=['$(touch pwned)']}\n",
            "placeholder {x} inside quotes",
        ),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        # validate checks a sweep spec as a sweep (and says so); run refuses it in one line
        for command in ("run",) if name == "sweep.toml" else ("validate", "run"):
            proc = (
                washout(command, path, "--db", tmp_path / f"{name}.db", check=False)
                if command == "run"
                else washout(command, path, check=False)
            )
            assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
            assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
            assert str(path) in proc.stderr and expected in proc.stderr, (name, proc.stderr)
        assert not (tmp_path / f"{name}.db").exists()


# -- stores with damaged values, and export-then-analyze round trips ----------------------


def _one_line_or_done(step: Callable[[], object]) -> None:
    """``step`` works, or fails with a one-line WashoutError: never another exception."""
    try:
        step()
    except WashoutError as err:
        assert "\n" not in str(err), str(err)


@pytest.fixture(scope="module")
def run_store(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a real store (warmups, two tests, fixed and random runs, a failed
    trial), its log folded in: the file every damaged store starts from."""
    tmp = tmp_path_factory.mktemp("fuzz-store")
    spec = tmp / "s.toml"
    spec.write_text(
        '[experiment]\nruns = 2\nwarmup = 1\nseed = 5\n[[test]]\nname = "a"\ncommand = "echo 1"\n'
        '[test.metrics.n]\nstdout = "last-number"\n[[test]]\nname = "b"\ncommand = "exit 1"\n'
    )
    washout("run", spec, "--db", tmp / "s.db", "--quiet", check=False)
    assert not (tmp / "s.db-wal").exists()
    return (tmp / "s.db").read_bytes()


EDITED_VALUES = st.one_of(
    st.text(max_size=6),
    st.binary(max_size=6),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.none(),
    st.sampled_from(["[", "{}", "[1]", '["a"]', "null", "-1", "1e999", "fixed", "running"]),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_stores_with_damaged_values_give_one_line_or_a_result(
    run_store: bytes, data: st.DataObject
) -> None:
    """One value of a real store edited to anything SQLite holds (text, a BLOB, a huge
    integer, NaN, NULL), or one row deleted, as the sqlite3 shell would: status, export,
    analyze and resume each work or fail in one line, never a traceback or a hang."""
    import sqlite3

    from washout.data.export import write_long
    from washout.data.store import Store, read_long
    from washout.harness.engine import Experiment, execute, reopen_store
    from washout.harness.status import describe
    from washout.stats.order import analyze_order

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "s.db"
        db.write_bytes(run_store)
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("PRAGMA foreign_keys = OFF")
            tables = [
                n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            table = data.draw(st.sampled_from(sorted(tables)), label="table")
            keys = (
                [k for (k,) in conn.execute(f"SELECT rowid FROM {table}")]
                if (table != "metric")
                else [k for (k,) in conn.execute("SELECT trial_id FROM metric")]
            )
            assume(keys)
            key = data.draw(st.sampled_from(keys), label="row")
            where = "trial_id" if table == "metric" else "rowid"
            columns = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
            column = data.draw(st.sampled_from([None, *columns]), label="column (None: delete)")
            try:
                if column is None:
                    conn.execute(f"DELETE FROM {table} WHERE {where} = ?", (key,))
                else:
                    value = data.draw(EDITED_VALUES, label="value")
                    conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where} = ?", (value, key))
                conn.commit()
            except sqlite3.IntegrityError:
                assume(False)  # a constraint SQLite itself keeps (NOT NULL, UNIQUE)

        def status() -> None:
            with Store.open(db) as store:
                describe(store)

        def export() -> None:
            write_long(read_long(db, resources=True), "csv", None, io.StringIO())

        def analyze() -> None:
            trials, _ = load_trials(db)
            analyze_order(trials)

        def resume() -> None:
            with reopen_store(db) as store:
                experiment = Experiment.from_store(store, to_run=True)
                execute(experiment, store)

        for step in (status, export, analyze, resume):
            _one_line_or_done(step)


ROUND_TRIP_NAMES = st.one_of(
    st.sampled_from(["a", "NA", "007", "x,y", 'q"uote', "line\nbreak", " pad ", "nan", "é"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=5),
)
STATUSES_OF_A_RUN = st.sampled_from(["ok", "ok", "failed", "timeout", "interrupted"])
VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([5e-324, 1.7976931348623157e308, -0.0, 0.1 + 0.2]),
    st.none(),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), fmt=st.sampled_from(["csv", "json", "parquet"]), every=st.booleans())
def test_whatever_export_writes_reads_back_as_the_store_holds_it(
    data: st.DataObject, fmt: str, every: bool
) -> None:
    """A store written through the engine's writer with any statuses, order kinds,
    warmups, superseded runs, hostile test names and extreme values: its export (CSV,
    JSON, Parquet; with or without the superseded trials) loads back to the same frame,
    value for value, and the order analysis of both is the same result or the same
    one-line error."""
    from datetime import UTC, datetime

    import numpy as np
    from test_store_trials import finished

    from washout.data.export import write_long
    from washout.data.store import ExperimentRecord, read_long
    from washout.data.store.writer import StoreWriter
    from washout.stats.order import analyze_order

    names = data.draw(st.lists(ROUND_TRIP_NAMES, min_size=1, max_size=3, unique=True))
    metrics = {n: data.draw(st.lists(st.sampled_from(["wall", "n"]), unique=True)) for n in names}
    runs = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(["fixed", "random", "reverse", "williams", "warmup"]),
                st.booleans(),
            ),
            min_size=1,
            max_size=5,
        )
    )
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "s.db"
        record = ExperimentRecord("p", "", "p.toml", 1, "alternate", 1, 1, "now", "test")
        with StoreWriter.create(db, record, [(n, "true", metrics[n]) for n in names]) as store:
            worker = store.worker_id("local", "localhost")
            for index, (order, superseded) in enumerate(runs):
                run_id = store.run_id(worker, -1 if order == "warmup" else index, order, names)
                for position, name in enumerate(names):
                    status = "warmup" if order == "warmup" else data.draw(STATUSES_OF_A_RUN)
                    trial = store.begin_trial(run_id, position, name, 0, now)
                    values = {m: data.draw(VALUES) for m in metrics[name]}
                    kept = {m: v for m, v in values.items() if v is not None}
                    store.finish_trial(trial, **finished(kept, status))
                if superseded:
                    store.supersede_run(run_id)
        held = read_long(db, include_superseded=every, resources=True)
        out = Path(tmp) / f"export.{fmt}"
        write_long(held, fmt, out, io.StringIO())
        read, _ = load_trials(out)
        assert len(read) == len(held)
        for column in ("run", "position"):
            assert read[column].tolist() == held[column].tolist()
        for column in ("order", "test", "metric", "status", "worker", "started", "ended"):
            assert [None if v != v else v for v in read[column].astype(object)] == [
                None if v != v else v for v in held[column].astype(object)
            ], column
        mine, theirs = held["value"].to_numpy(), read["value"].to_numpy()
        assert np.array_equal(np.signbit(mine), np.signbit(theirs))
        assert np.array_equal(mine, theirs, equal_nan=True)
        results = []
        for frame in (held, read):
            try:
                results.append(analyze_order(frame).to_dict())
            except WashoutError as err:
                results.append(str(err))
        assert json.dumps(results[0], sort_keys=True) == json.dumps(results[1], sort_keys=True)
