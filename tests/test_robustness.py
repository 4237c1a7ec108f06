"""Experiments survive kills, hangs, Ctrl-C and failing tests without losing a trial."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import gone, washout

from washout.harness.plan import schedule


def write_spec(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


def start(*args: str | Path, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "washout", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def wait_for_trials(db: Path, where: str, timeout: float = 60) -> None:
    """Block until the store has a trial matching ``where`` (state, not the clock)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                if sqlite3.connect(db).execute(f"SELECT 1 FROM trial WHERE {where}").fetchone():
                    return
            except sqlite3.OperationalError:
                pass  # schema not created yet
        time.sleep(0.05)
    raise AssertionError(f"no trial with {where} within {timeout} s")


def check_store_against_plan(db: Path, n_tests: int, runs: int, seed: int) -> Counter[str]:
    """Every planned slot exactly once with status ok, in the planned order, and every
    current (not superseded) trial after its run's last reset and right after its planned
    predecessor; earlier attempts of interrupted runs are kept as superseded. Returns the
    status counts, superseded trials counted as ``superseded``."""
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    names = [n for (n,) in conn.execute("SELECT name FROM test ORDER BY spec_index")]
    plan = schedule(n_tests, runs, ("fixed", "random"), "alternate", seed)
    rows = conn.execute(
        "SELECT r.idx, r.order_kind, t.position, t.test, t.status, t.superseded,"
        " t.started, r.reset_ended FROM trial t JOIN run r ON r.id = t.run_id"
        " ORDER BY t.id"
    ).fetchall()
    current = [row[:5] for row in rows if not row[5]]
    ok = Counter((idx, pos) for idx, _, pos, _, status in current if status == "ok")
    assert set(ok.values()) == {1}, "a slot was recorded ok more than once"
    expected = {
        (run.index, pos): (run.order, names[t])
        for run in plan.runs
        for pos, t in enumerate(run.tests)
    }
    assert set(ok) == set(expected)
    for idx, order, pos, test, *_ in rows:
        assert (order, test) == expected[(idx, pos)]
    # A run is the unit of order: its current trials start after its (last) reset, at
    # position 0, and each follows the one planned before it (or its own failed attempt).
    by_run: dict[int, list[int]] = {}
    for idx, _, pos, _, _, superseded, started, reset_ended in rows:
        if not superseded:
            assert started >= reset_ended, f"run {idx} position {pos} ran before its reset"
            by_run.setdefault(idx, []).append(pos)
    for idx, positions in by_run.items():
        assert positions[0] == 0 and all(b - a in (0, 1) for a, b in zip(positions, positions[1:]))
        assert positions[-1] == len(plan.runs[idx].tests) - 1
    metrics = conn.execute(
        "SELECT count(*) FROM metric m JOIN trial t ON t.id = m.trial_id"
        " WHERE t.status = 'ok' AND t.superseded = 0"
        " AND m.name NOT IN ('user', 'system', 'max_rss') AND m.name NOT LIKE 'health.%'"
    ).fetchone()[0]
    assert metrics == len(expected)
    assert conn.execute("SELECT count(*) FROM trial WHERE status = 'running'").fetchone()[0] == 0
    return Counter(
        "superseded" if superseded else status for _, _, _, _, status, superseded, *_ in rows
    )


@pytest.mark.parametrize("phase", ["trials-and-resets", "database-writes"])
def test_sigkill_at_random_moments_then_resume(tmp_path: Path, phase: str) -> None:
    """SIGKILL ``washout run``/``resume`` again and again; the store must end up exactly as planned.

    Phase 1 spends its time in trials and resets (kills land there); phase 2 runs no-op
    trials without a reset, so most of the time is washout's own bookkeeping and SQLite
    writes, and kills land there, in launcher batches and their folds too (6,000 trials:
    with batches 3,000 could end before a third kill, 1 seed in 30).
    """
    slow = phase == "trials-and-resets"
    runs, n_tests, seed = (6, 4, 5) if slow else (600, 5, 9)
    lines = ["[experiment]", 'name = "killme"', f"runs = {runs}", f"seed = {seed}"]
    if slow:
        lines += ["[reset]", 'command = "sleep 0.15"']
    for i in range(n_tests):
        lines += [
            "[[test]]",
            f'name = "t{i}"',
            f'command = "{"sleep 0.0" + str(3 + i) if slow else "true"}"',
        ]
    spec = write_spec(tmp_path / "k.toml", "\n".join(lines) + "\n")
    db = tmp_path / "k.db"
    rng = random.Random(1234 if slow else 4321)
    kills = 0
    proc = start("run", spec, "--db", db, "--quiet")
    for _ in range(25):
        if kills >= 8:
            break
        try:
            proc.wait(timeout=rng.uniform(0.45, 1.4))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            kills += 1
        if proc.returncode == 0:
            break
        if not db.exists():  # killed before the store was created: start again
            proc = start("run", spec, "--db", db, "--quiet")
            continue
        proc = start("resume", db, "--quiet")
    proc.wait(timeout=300)
    if proc.returncode != 0:
        washout("resume", db, "--quiet")
    assert kills >= 3, "the experiment finished before it could be killed enough"
    counts = check_store_against_plan(db, n_tests, runs, seed)
    assert set(counts) <= {"ok", "superseded"}  # interrupted trials' runs were re-run whole
    assert "complete" in washout("status", db).stdout
    assert "nothing to resume" in washout("resume", db).stdout


def test_hung_test_is_killed_with_its_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    spec = write_spec(
        tmp_path / "h.toml",
        f"""
[experiment]
runs = 1
orders = ["fixed"]
[[test]]
name = "hang"
timeout = "1s"
command = "trap '' TERM; sleep 300 & echo $! >> {pids}; (trap '' TERM; sleep 300) & echo $! >> {pids}; wait"
[[test]]
name = "fails"
command = "echo oops >&2; exit 3"
[[test]]
name = "next"
command = "true"
""",  # noqa: E501 (a shell command line as the spec holds it)
    )
    db = tmp_path / "h.db"
    t0 = time.monotonic()
    assert washout("run", spec, "--db", db, "--quiet", check=False).returncode == 4
    assert time.monotonic() - t0 < 30
    conn = sqlite3.connect(db)
    rows = {
        t: (s, r, c, e)
        for t, s, r, c, e in conn.execute(
            "SELECT test, status, reason, exit_code, stderr_tail FROM trial"
        )
    }
    assert rows["hang"][0] == "timeout" and "process group killed" in rows["hang"][1]
    assert rows["fails"][:3] == ("failed", "exit code 3", 3) and "oops" in rows["fails"][3]
    assert rows["next"][0] == "ok"
    assert all(gone(pid) for pid in map(int, pids.read_text().split()))


SLOW_SPEC = """
[experiment]
name = "slow"
runs = 3
seed = 1
[[test]]
name = "a"
command = "sleep 0.4"
[[test]]
name = "b"
command = "sleep 0.4"
"""


def test_ctrl_c_stops_at_the_next_trial_boundary_and_says_how_to_resume(tmp_path: Path) -> None:
    torn_down = tmp_path / "torn-down"
    spec = write_spec(
        tmp_path / "s.toml", SLOW_SPEC + f'[teardown]\ncommand = "touch {torn_down}"\n'
    )
    db = tmp_path / "s.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'ok'")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert f"washout resume {db}" in out
    conn = sqlite3.connect(db)
    statuses = [s for (s,) in conn.execute("SELECT status FROM trial")]
    assert statuses and set(statuses) == {"ok"}  # the trial in flight was allowed to finish
    assert len(statuses) < 12
    assert torn_down.exists()  # what setup started does not outlive a stopped session
    washout("resume", db, "--quiet")
    check_store_against_plan(db, 2, 3, 1)


def test_second_ctrl_c_stops_at_once_keeping_the_trial_as_interrupted(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.toml", SLOW_SPEC.replace("sleep 0.4", "sleep 5"))
    db = tmp_path / "s.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'running'")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 4  # did not wait for the 5 s trial
    assert proc.returncode == 130 and "washout resume" in out
    conn = sqlite3.connect(db)
    assert [s for (s,) in conn.execute("SELECT status FROM trial")] == ["interrupted"]


def test_status_while_running_then_complete(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.toml", SLOW_SPEC)
    db = tmp_path / "s.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'ok'")
    during = washout("status", db).stdout
    assert f"running (pid {proc.pid} on host " in during
    assert "of 12 trials done" in during and "ETA" in during
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    after = washout("status", db).stdout
    assert "complete: 12 of 12 trials" in after


def test_retry_policy_reruns_a_failing_trial(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    spec = write_spec(
        tmp_path / "r.toml",
        f"""
[experiment]
runs = 1
orders = ["fixed"]
on_failure = "retry:3"
[[test]]
name = "flaky"
command = "echo x >> {counter}; [ $(wc -l < {counter}) -ge 3 ]"
""",
    )
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    rows = sqlite3.connect(db).execute("SELECT attempt, status FROM trial ORDER BY id").fetchall()
    assert rows == [(0, "failed"), (1, "failed"), (2, "ok")]


def test_abort_policy_stops_and_resume_reruns_the_failed_slot(tmp_path: Path) -> None:
    flag = tmp_path / "fixed"
    spec = write_spec(
        tmp_path / "a.toml",
        f"""
[experiment]
runs = 2
seed = 3
on_failure = "abort"
[[test]]
name = "ok"
command = "true"
[[test]]
name = "needs-flag"
command = "test -e {flag}"
""",
    )
    db = tmp_path / "a.db"
    proc = washout("run", spec, "--db", db, "--quiet", check=False)
    assert proc.returncode == 5 and "on_failure = 'abort'" in proc.stdout
    flag.touch()
    washout("resume", db, "--quiet")
    counts = check_store_against_plan(db, 2, 2, 3)
    assert counts["failed"] == 0 and counts["superseded"] >= 1  # its run was re-run whole


def test_failed_setup_is_a_one_line_error_and_costs_nothing(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "f.toml", '[setup]\ncommand = "exit 4"\n[[test]]\nname = "a"\ncommand = "true"\n'
    )
    proc = washout("run", spec, "--db", tmp_path / "f.db", "--quiet", check=False)
    assert proc.returncode == 3
    assert "setup command 'exit 4' failed: exit code 4" in proc.stdout


def test_secrets_from_the_environment_never_reach_the_store(tmp_path: Path) -> None:
    token = "s3cr3t-t0ken-value-42"
    spec = write_spec(
        tmp_path / "sec.toml",
        """
[experiment]
runs = 1
orders = ["fixed"]
env = { API_TOKEN = "${WASHOUT_TEST_TOKEN}" }
[[test]]
name = "leaky"
command = "echo $API_TOKEN; echo $API_TOKEN >&2; exit 1"
[[test]]
name = "fine"
command = "echo ${#API_TOKEN}"
[test.metrics.len]
stdout = "last-number"
""",
    )
    db = tmp_path / "sec.db"
    env = {**os.environ, "WASHOUT_TEST_TOKEN": token}
    assert washout("run", spec, "--db", db, "--quiet", env=env, check=False).returncode == 4
    conn = sqlite3.connect(db)
    passed = conn.execute("SELECT value FROM metric WHERE name = 'len'").fetchone()[0]
    assert passed == len(token)
    conn.close()
    for f in tmp_path.glob("sec.db*"):
        assert token.encode() not in f.read_bytes()
    dump = washout("export", db).stdout + washout("status", db).stdout
    assert token not in dump
    missing = washout(
        "run",
        spec,
        "--db",
        tmp_path / "m.db",
        "--quiet",
        check=False,
        env={k: v for k, v in os.environ.items() if k != "WASHOUT_TEST_TOKEN"},
    )
    assert missing.returncode == 2 and "${WASHOUT_TEST_TOKEN}: not set" in missing.stderr


def test_databases_of_another_kind_get_a_clear_message(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "v.toml", '[[test]]\nname = "a"\ncommand = "true"\n[experiment]\nruns = 1\n'
    )
    db = tmp_path / "v.db"
    washout("run", spec, "--db", db, "--quiet")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (y)")
    text = tmp_path / "text.db"
    text.write_text("hello")
    for path, message in [
        (db, "schema_version = 99"),
        (other, "not a washout store"),
        (text, "not an SQLite database"),
        (tmp_path / "none.db", "no such database"),
    ]:
        for command in ("status", "resume", "export"):
            proc = washout(command, path, check=False)
            assert proc.returncode == 2, (command, path, proc.stderr)
            assert message in proc.stderr and proc.stderr.count("\n") == 1
            assert "Traceback" not in proc.stderr


PROVENANCE_SPEC = """
[experiment]
runs = 3
seed = 2
[provenance]
files = ["{server}"]
commands = ["cat {version}"]
[[test]]
name = "rebuild-midway"
command = "if [ $(wc -l < {log}) -ge 3 ]; then echo v2 > {server}; fi; echo x >> {log}"
[[test]]
name = "other"
command = "true"
"""


def test_provenance_change_during_the_experiment_is_refused(tmp_path: Path) -> None:
    """A rebuilt binary mid-experiment stops it, naming worker, item and both values."""
    server, version, log = tmp_path / "server", tmp_path / "version", tmp_path / "log"
    server.write_text("v1\n")
    version.write_text("1.0\n")
    log.write_text("")
    spec = write_spec(
        tmp_path / "p.toml", PROVENANCE_SPEC.format(server=server, version=version, log=log)
    )
    db = tmp_path / "p.db"
    proc = washout("run", spec, "--db", db, "--quiet", check=False)
    assert proc.returncode == 3
    import hashlib

    old = hashlib.sha256(b"v1\n").hexdigest()
    new = hashlib.sha256(b"v2\n").hexdigest()
    assert f"file:{server} differs" in proc.stdout
    assert f"local at the start has '{old}'" in proc.stdout and f"has '{new}'" in proc.stdout
    # resuming with the changed binary is refused too, before anything runs
    again = washout("resume", db, "--quiet", check=False)
    assert again.returncode == 2 and "since the experiment started" in again.stderr
    assert old in again.stderr and new in again.stderr
    # --allow-mismatch records and proceeds
    washout("resume", db, "--quiet", "--allow-mismatch")
    events = [
        m
        for (m,) in sqlite3.connect(db).execute("SELECT message FROM event WHERE kind = 'mismatch'")
    ]
    assert len(events) >= 2
