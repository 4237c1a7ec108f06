"""Real experiments through the CLI; the schedule is checked from the exported data and from
a log that the tests, the reset and the setup themselves write."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import exported, is_health, washout

from washout.data.longformat import RESOURCE_METRICS

TESTS = ("alpha", "beta", "gamma", "delta")


def logging_spec(
    tmp: Path, runs: int = 4, seed: int | None = 11, design: str = "alternate", extra: str = ""
) -> Path:
    """A spec whose setup, reset and tests append their names to one log file."""
    log = tmp / "log.txt"
    lines = ["[experiment]", 'name = "logged"', f"runs = {runs}", f'design = "{design}"']
    if seed is not None:
        lines.append(f"seed = {seed}")
    lines += [
        extra,
        "[setup]",
        f'command = "echo SETUP >> {log}"',
        "[reset]",
        f'command = "echo RESET >> {log}"',
    ]
    for name in TESTS:
        lines += ["[[test]]", f'name = "{name}"', f'command = "echo {name} >> {log}"']
    path = tmp / "spec.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_orders(frame: pd.DataFrame) -> dict[int, tuple[str, list[str]]]:
    out = {}
    for run, group in frame.sort_values(["run", "position"]).groupby("run"):
        out[int(run)] = (group["order"].iloc[0], list(group["test"]))
    return out


def test_schedule_from_exported_data_and_log(tmp_path: Path) -> None:
    spec = logging_spec(tmp_path)
    db = tmp_path / "x.db"
    washout("run", spec, "--db", db, "--quiet")
    frame = exported(db)
    assert list(frame.columns) == [
        "run",
        "order",
        "position",
        "test",
        "metric",
        "value",
        "status",
        "worker",
        "started",
        "ended",
    ]
    assert set(frame["worker"]) == {"local"} and set(frame["status"]) == {"ok"}
    assert set(frame["metric"]) == {"wall"} and (frame["value"] > 0).all()
    runs = run_orders(frame)
    assert [runs[i][0] for i in range(8)] == ["fixed", "random"] * 4
    for order, tests in runs.values():
        if order == "fixed":
            assert tests == list(TESTS)
        else:
            assert sorted(tests) == sorted(TESTS)
    # The log, written by the commands themselves: setup once, then a reset before each run
    # followed by that run's tests in the recorded order.
    log = (tmp_path / "log.txt").read_text().split()
    expected = ["SETUP"]
    for i in range(8):
        expected += ["RESET", *runs[i][1]]
    assert log == expected


def test_same_seed_same_schedule_in_two_databases_different_seed_differs(tmp_path: Path) -> None:
    spec = logging_spec(tmp_path, runs=6)
    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    washout("run", spec, "--db", a, "--quiet")
    washout("run", spec, "--db", b, "--quiet")
    washout("run", spec, "--db", c, "--quiet", "--seed", "12")
    ra, rb, rc = (run_orders(exported(p)) for p in (a, b, c))
    assert ra == rb
    assert [t for o, t in ra.values() if o == "random"] != [
        t for o, t in rc.values() if o == "random"
    ]


def test_seed_is_drawn_printed_and_stored_when_absent(tmp_path: Path) -> None:
    spec = logging_spec(tmp_path, runs=1, seed=None)
    db = tmp_path / "x.db"
    out = washout("run", spec, "--db", db, "--quiet")
    seed = sqlite3.connect(db).execute("SELECT seed FROM experiment").fetchone()[0]
    assert f"Seed: {seed}" in out.stdout


def test_never_overwrites_a_database(tmp_path: Path) -> None:
    spec = logging_spec(tmp_path, runs=1)
    db = tmp_path / "x.db"
    washout("run", spec, "--db", db, "--quiet")
    before = db.read_bytes()
    proc = washout("run", spec, "--db", db, "--quiet", check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "already exists" in proc.stderr
    assert db.read_bytes() == before


def test_default_database_path_is_named_after_the_experiment(tmp_path: Path) -> None:
    spec = logging_spec(tmp_path, runs=1)
    washout("run", spec, "--quiet", cwd=tmp_path)
    washout("run", spec, "--quiet", cwd=tmp_path)
    assert sorted(
        p.name for p in (tmp_path / "washout-results").iterdir() if p.suffix == ".db"
    ) == ["logged-2.db", "logged.db"]


def test_quick_form_like_hyperfine(tmp_path: Path) -> None:
    log = tmp_path / "log"
    db = tmp_path / "q.db"
    washout(
        "run",
        f"echo a >> {log}",
        f"echo b >> {log}",
        "--runs",
        "6",  # hyperfine's meaning: 6 of each command, 3 per order kind
        "--seed",
        "1",
        "--reset",
        f"echo R >> {log}",
        "--setup",
        f"echo S >> {log}",
        "--db",
        db,
        "--quiet",
    )
    frame = exported(db)
    assert sorted(frame["order"].value_counts().items()) == [("fixed", 6), ("random", 6)]
    words = log.read_text().split()
    assert words[0] == "S" and words.count("S") == 1 and words.count("R") == 6
    # resume of a quick-form experiment replays the stored spec
    assert "complete" in washout("resume", db).stdout


def test_validate_prints_tests_and_planned_trials(tmp_path: Path) -> None:
    spec = tmp_path / "grid.toml"
    spec.write_text(
        '[experiment]\nruns = 5\n[[test]]\nname = "io-{rw}-{bs}"\n'
        'command = "echo {rw} {bs}"\nparams = { rw = ["read", "rand read"], bs = ["4k", "1m"] }\n'
    )
    out = washout("validate", spec).stdout
    assert "4 tests" in out and "40 trials planned" in out
    assert "io-rand read-4k: echo 'rand read' 4k" in out  # values shell-quoted


def test_grid_values_are_shell_quoted_when_run(tmp_path: Path) -> None:
    spec = tmp_path / "grid.toml"
    marker = tmp_path / "pwned"
    spec.write_text(
        '[experiment]\nruns = 1\n[[test]]\nname = "t-{v}"\ncommand = "echo {v}"\n'
        f'params = {{ v = ["x; touch {marker}", "$(touch {marker})"] }}\n'
        '[test.metrics.n]\nregex = "(?P<value>x)?"\n'
    )
    washout("run", spec, "--db", tmp_path / "g.db", "--quiet", check=False)
    assert not marker.exists()


def test_export_json_and_parquet(tmp_path: Path) -> None:
    spec = logging_spec(tmp_path, runs=1)
    db = tmp_path / "x.db"
    washout("run", spec, "--db", db, "--quiet")
    rows = json.loads(washout("export", db, "--format", "json").stdout)
    rows = [r for r in rows if not is_health(r["metric"])]  # those this machine gives
    per_trial = 1 + len(RESOURCE_METRICS)  # its metric, then CPU times and peak memory
    assert len(rows) == 8 * per_trial and set(rows[0]) == {
        "run",
        "order",
        "position",
        "test",
        "metric",
        "value",
        "status",
        "worker",
        "started",
        "ended",
    }
    pq = tmp_path / "x.parquet"
    washout("export", db, "--format", "parquet", "-o", pq)
    # -f is --format in every command that has one, as in report
    assert (
        washout("export", db, "-f", "json").stdout
        == washout("export", db, "--format", "json").stdout
    )
    for command in (["analyze", db], ["plan", "--pilot", db, "--detect", "5%"]):
        short, long = (json.loads(washout(*command, f, "json").stdout) for f in ("-f", "--format"))
        assert short == long
    assert "workers" in json.loads(washout("check", "-f", "json").stdout)
    frame = pd.read_parquet(pq)
    assert frame[~frame["metric"].astype(str).map(is_health)].shape == (8 * per_trial, 10)


METRICS_SPEC = r"""
[experiment]
name = "metrics"
runs = 1
orders = ["fixed"]

[[test]]
name = "many"
command = "printf 'p50 %s\np99 %s\n' 1.5 9.25; echo '{\"power\": {\"watts\": [3, 41.5]}}' > out.json; echo 'energy=12e3 J' > energy.txt"
cwd = "WORK"
[test.metrics.p50]
regex = 'p50 (?P<value>[0-9.]+)'
[test.metrics.p99]
stdout = "last-number"
[test.metrics.watts]
file = "out.json"
json = "power.watts.1"
better = "lower"
[test.metrics.energy]
file = "energy.txt"
[test.metrics.wall]
wall = true

[[test]]
name = "json-stdout"
command = "echo '{\"result\": {\"ops\": 1234.5}}'"
[test.metrics.ops]
json = "result.ops"
better = "higher"

[[test]]
name = "nothing-parsable"
command = "echo no numbers here"
[test.metrics.n]
stdout = "last-number"

[[test]]
name = "after"
command = "echo 7"
[test.metrics.n]
stdout = "last-number"
"""  # noqa: E501 (shell command lines as the spec holds them)


def test_every_metric_source_and_an_unparsable_trial(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    spec = tmp_path / "m.toml"
    spec.write_text(METRICS_SPEC.replace("WORK", str(work)))
    db = tmp_path / "m.db"
    proc = washout("run", spec, "--db", db, "--quiet", check=False)
    assert proc.returncode == 4  # every trial of nothing-parsable failed
    assert "Test 'nothing-parsable': all 1 trial(s) failed" in proc.stderr
    frame = exported(db).set_index(["test", "metric"])
    assert frame.loc[("many", "p50"), "value"] == 1.5
    assert frame.loc[("many", "p99"), "value"] == 9.25
    assert frame.loc[("many", "watts"), "value"] == 41.5
    assert frame.loc[("many", "energy"), "value"] == 12000.0
    assert 0 < frame.loc[("many", "wall"), "value"] < 5
    assert frame.loc[("json-stdout", "ops"), "value"] == 1234.5
    bad = frame.loc[("nothing-parsable", "n")]
    assert bad["status"] == "failed" and pd.isna(bad["value"])
    assert frame.loc[("after", "n"), "value"] == 7  # the experiment went on
    reason = (
        sqlite3.connect(db)
        .execute("SELECT reason FROM trial WHERE test = 'nothing-parsable'")
        .fetchone()[0]
    )
    assert reason == "metric n: no number in stdout"
    status = washout("status", db).stdout
    assert "nothing-parsable: failed: metric n: no number in stdout" in status


@pytest.mark.parametrize("design", ["coin", "blocked"])
def test_other_designs_through_the_cli(tmp_path: Path, design: str) -> None:
    spec = logging_spec(tmp_path, runs=3, design=design)
    db = tmp_path / "x.db"
    washout("run", spec, "--db", db, "--quiet")
    orders = [o for o, _ in run_orders(exported(db)).values()]
    assert sorted(orders) == ["fixed"] * 3 + ["random"] * 3
    if design == "blocked":
        assert orders == ["fixed"] * 3 + ["random"] * 3


def test_pinning_applies_to_the_trial_and_is_recorded(tmp_path: Path) -> None:
    spec = tmp_path / "pin.toml"
    spec.write_text(
        '[experiment]\nruns = 1\norders = ["fixed"]\ncpus = "1"\n'
        '[[test]]\nname = "where"\ncommand = "grep Cpus_allowed_list /proc/self/status"\n'
        '[test.metrics.cpu]\nstdout = "last-number"\n'
        '[[test]]\nname = "nowhere"\ncpus = "4096"\ncommand = "true"\n'
    )
    db = tmp_path / "pin.db"
    assert washout("run", spec, "--db", db, "--quiet", check=False).returncode == 4
    rows = dict(
        (t, (s, r, c))
        for t, s, r, c in sqlite3.connect(db).execute(
            "SELECT test, status, reason, cpus FROM trial"
        )
    )
    assert rows["where"] == ("ok", "", "1")
    assert exported(db).set_index("test").loc["where", "value"] == 1.0
    assert rows["nowhere"][0] == "failed" and "cannot pin to CPUs 4096" in rows["nowhere"][1]


def test_engine_runs_from_inside_a_running_event_loop(tmp_path: Path) -> None:
    """Jupyter and sync wrappers call the library with a loop already running."""
    import asyncio

    from washout.harness.engine import Experiment, execute
    from washout.harness.spec import load_spec

    spec_path = logging_spec(tmp_path, runs=1)
    spec, text = load_spec(spec_path)
    experiment = Experiment.prepare(spec, text, str(spec_path))

    async def inside() -> int:
        store = experiment.create_store(tmp_path / "loop.db")
        try:
            return execute(experiment, store).executed
        finally:
            store.close()

    # In a thread of its own: the main thread may already hold a running loop (the browser
    # tests' Playwright does), which is exactly the situation under test, but asyncio.run()
    # here would refuse it before the engine is reached.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, inside()).result() == 8


@pytest.mark.parametrize("launcher", ["on", "off"])
def test_plain_commands_run_without_a_shell_and_shell_syntax_keeps_it(
    tmp_path: Path, launcher: str
) -> None:
    """`grep` started directly has as its parent the process that starts commands (washout's
    launcher, or washout itself without one), the same that starts /bin/sh for anything with
    shell syntax, which keeps its meaning."""
    from washout.harness.executors import local
    from washout.harness.executors.local import argv_for

    if launcher == "on" and local.launcher_program()[0] is None:
        pytest.skip(f"no launcher here: {local.launcher_program()[1]}")

    assert argv_for("sleep 0.1") == ["sleep", "0.1"]
    for command in (
        "echo $HOME",
        "ls *.py",
        "cd /tmp",
        "FOO=1 env",
        "a || b",
        "echo 'x'",
        "nosuchprogram-xyz 1",
        "echo ~",
    ):
        assert argv_for(command)[:2] == ["/bin/sh", "-c"], command
    spec = tmp_path / "p.toml"
    spec.write_text(
        '[experiment]\nruns = 1\norders = ["fixed"]\n'
        '[[test]]\nname = "direct"\ncommand = "grep PPid /proc/self/status"\n'
        '[test.metrics.parent]\nstdout = "last-number"\n'
        '[[test]]\nname = "shell"\ncommand = "grep PPid /proc/self/status | cat"\n'
        '[test.metrics.parent]\nstdout = "last-number"\n'
        '[[test]]\nname = "starter"\ncommand = "echo $PPID"\n'
        '[test.metrics.parent]\nstdout = "last-number"\n'
    )
    db = tmp_path / "p.db"
    env = {**os.environ, "WASHOUT_LAUNCHER": launcher}
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "run", str(spec), "--db", str(db), "--quiet"],
        stdout=subprocess.DEVNULL,
        env=env,
    )
    assert proc.wait(timeout=60) == 0
    frame = exported(db)
    parents = frame[frame["metric"] == "parent"].set_index("test")["value"]
    # grep's parent started the shell of `echo $PPID` too: no shell between it and grep
    assert parents["direct"] == parents["starter"]
    assert parents["shell"] != parents["starter"]  # a pipeline: the shell started grep
    if launcher == "off":
        assert parents["direct"] == proc.pid  # washout itself started grep
    else:
        assert parents["direct"] != proc.pid  # its launcher did


def test_help_shows_spec_tables_and_whole_sentences() -> None:
    """Help texts name spec tables in brackets ("[experiment] runs", "[[worker]]"): shown as
    written, not taken for markup and dropped; a command's summary in the list of commands
    is one sentence, not broken where its docstring's lines break."""
    wide = {**os.environ, "COLUMNS": "200"}
    assert "[experiment] runs" in washout("run", "--help", env=wide).stdout
    assert "[[worker]]" in washout("check", "--help", env=wide).stdout
    assert "[sweep] table" in washout("sweep", "--help", env=wide).stdout
    listed = washout("--help", env=wide).stdout.splitlines()
    bisect = next(line for line in listed if "Find the commit" in line)
    assert "the good and bad builds" in bisect
