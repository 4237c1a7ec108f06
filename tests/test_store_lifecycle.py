"""The store and the run lifecycle under faults and concurrency: one writer per store,
outputs that never clobber inputs, runs re-run whole, SIGTERM, damaged, read-only and full
stores, and the exit codes that tell these apart. Real processes, real SQLite, real signals;
a tmpfs mounted here for the read-only and disk-full cases (root only)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import gone, is_health, ok_trials, wait_for, washout
from test_robustness import check_store_against_plan, start, wait_for_trials, write_spec

WAITING = """
[experiment]
name = "waiting"
runs = 2
seed = 4
[[test]]
name = "a"
command = "sleep 0.2"
[[test]]
name = "b"
command = "while [ ! -e {go} ]; do sleep 0.05; done"
[[test]]
name = "c"
command = "sleep 0.2"
"""
"""Test b waits for the file ``go``: the experiment lasts as long as the checks need."""


def waiting_run(tmp_path: Path, name: str) -> tuple[Path, subprocess.Popen[str], Path]:
    """``run`` of :data:`WAITING` into ``NAME.db``, once it has finished a trial: the store,
    the process, and the file that lets it finish. Polled read-only: a connection that
    closed last would fold the log into the file."""
    go = tmp_path / "go"
    spec = write_spec(tmp_path / f"{name}.toml", WAITING.format(go=go))
    db = tmp_path / f"{name}.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for(lambda: ok_trials(db), 60, "no trial finished")
    return db, proc, go


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The single stderr line of a refused command, checked."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    return proc.stderr


def test_a_second_writer_is_refused_naming_the_holder_and_status_tells_alive_from_dead(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    spec = write_spec(tmp_path / "s.toml", WAITING.format(go=go))
    db = tmp_path / "s.db"
    proc = start("run", spec, "--db", db, "--quiet")
    try:
        wait_for_trials(db, "status = 'ok'")
        alive = washout("status", db).stdout
        assert f"running (pid {proc.pid} on host" in alive and "ETA" in alive
        holder = f"in use by pid {proc.pid} on host {socket.gethostname()} since "
        one_line_error(washout("resume", db, "--quiet", check=False), 6, holder)
        one_line_error(
            washout("run", spec, "--db", db, "--quiet", check=False), 2, "already exists, " + holder
        )
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        go.touch()
    dead = washout("status", db).stdout
    assert f"stopped; `washout resume {db}`" in dead and "ETA" not in dead
    washout("resume", db, "--quiet")
    check_store_against_plan(db, 3, 2, 4)


def test_two_runs_started_at_the_same_instant(tmp_path: Path) -> None:
    """Same --db: one runs, the other refuses in one line; no --db: both run, in two files."""
    spec = write_spec(
        tmp_path / "q.toml",
        '[experiment]\nname = "twin"\nruns = 1\n[[test]]\nname = "a"\ncommand = "true"\n',
    )
    for attempt in range(4):
        db = tmp_path / f"same-{attempt}.db"
        procs = [start("run", spec, "--db", db, "--quiet") for _ in range(2)]
        results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        assert sorted(code for code, _ in results) == [0, 2], results
        err = next(e for code, e in results if code == 2)
        assert "already exists" in err and "Traceback" not in err and err.count("\n") == 1
    procs = [start("run", spec, "--quiet", cwd=tmp_path) for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    assert sorted(p.name for p in (tmp_path / "washout-results").glob("*.db")) == [
        "twin-2.db",
        "twin.db",
    ]


def test_outputs_never_clobber_inputs(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "o.toml",
        "[experiment]\nruns = 2\nseed = 1\n"
        '[[test]]\nname = "a"\ncommand = "true"\n[[test]]\nname = "b"\n'
        'command = "true"\n',
    )
    db, other = tmp_path / "o.db", tmp_path / "other.db"
    washout("run", spec, "--db", db, "--quiet")
    washout("run", spec, "--db", other, "--quiet")
    before = {p: p.read_bytes() for p in (db, other)}
    for command in ("report", "export"):
        for target in (db, other):
            one_line_error(
                washout(command, db, "-o", target, check=False), 2, "-o = ", "never writes over"
            )
        one_line_error(washout(command, db, "-o", tmp_path, check=False), 2, "a directory")
    assert {p: p.read_bytes() for p in (db, other)} == before
    csv = tmp_path / "deep" / "er" / "long.csv"  # missing directories are created
    washout("export", db, "-o", csv)
    text = csv.read_text()
    one_line_error(washout("report", csv, "-o", csv, check=False), 2, "that is the input")
    assert csv.read_text() == text
    washout("report", csv, "-o", tmp_path / "new" / "r.html")
    assert (tmp_path / "new" / "r.html").stat().st_size > 0


def test_an_interrupted_run_is_rerun_whole_and_its_partial_attempt_kept_superseded(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    spec = write_spec(
        tmp_path / "w.toml",
        f"""
[experiment]
runs = 1
orders = ["fixed"]
[reset]
command = "echo RESET >> {log}"
[[test]]
name = "a"
command = "echo a >> {log}; sleep 0.5"
[[test]]
name = "b"
command = "echo b >> {log}; sleep 0.5"
[[test]]
name = "c"
command = "echo c >> {log}"
""",
    )
    db = tmp_path / "w.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'ok'")
    proc.send_signal(signal.SIGINT)  # stops at the next trial boundary, mid-run
    assert proc.wait(timeout=30) == 130
    stopped_at = log.read_text().split()
    assert stopped_at[0] == "RESET" and stopped_at[-1] != "c"
    assert "0 of 3 trials done" in washout("status", db).stdout  # what resume will not redo
    washout("resume", db, "--quiet")
    # After a fresh reset the run starts again at position 0: b and c ran after a, as planned.
    assert log.read_text().split() == stopped_at + ["RESET", "a", "b", "c"]
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT test, status, superseded FROM trial ORDER BY id").fetchall()
    kept = len(stopped_at) - 1
    assert rows == [(t, "ok", 1) for t in "abc"[:kept]] + [(t, "ok", 0) for t in "abc"]
    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    frame = frame[frame["metric"] == "wall"]
    assert list(frame["test"]) == ["a", "b", "c"] and set(frame["status"]) == {"ok"}
    everything = pd.read_csv(io.StringIO(washout("export", db, "--include-superseded").stdout))
    everything = everything[~everything["metric"].map(is_health)]  # those the machine gives
    assert list(everything["status"]).count("superseded") == 4 * kept  # 4 metrics each
    assert f"superseded {kept}" in washout("status", db).stdout


def test_sigterm_stops_now_records_interrupted_runs_teardown_and_exits_143(tmp_path: Path) -> None:
    pid_file, torn_down = tmp_path / "pid", tmp_path / "torn-down"
    spec = write_spec(
        tmp_path / "t.toml",
        f"""
[experiment]
runs = 1
orders = ["fixed"]
[teardown]
command = "touch {torn_down}"
[[test]]
name = "long"
command = "echo $$ > {pid_file}; sleep 60"
""",
    )
    db = tmp_path / "t.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'running'")
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    trial_pid = int(pid_file.read_text())
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10  # did not wait for the 60 s trial
    assert proc.returncode == 143 and f"washout resume {db}" in out
    rows = sqlite3.connect(db).execute("SELECT status, reason FROM trial").fetchall()
    assert rows == [("interrupted", "stopped by SIGTERM during this trial")]
    assert torn_down.exists()
    assert gone(trial_pid)


def test_every_failed_trial_of_a_test_and_abort_have_their_own_exit_codes(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "f.toml",
        """
[experiment]
runs = 2
seed = 1
[[test]]
name = "fine"
command = "true"
[[test]]
name = "broken"
command = "echo first line >&2; echo cannot open config.yaml >&2; exit 3"
""",
    )
    proc = washout("run", spec, "--db", tmp_path / "f.db", "--quiet", check=False)
    assert proc.returncode == 4
    assert "Test 'broken': all 4 trial(s) failed; the first: exit code 3" in proc.stderr
    assert "cannot open config.yaml" in proc.stderr and "Run it by hand" in proc.stderr
    aborting = write_spec(
        tmp_path / "a.toml", spec.read_text().replace("seed = 1", 'seed = 1\non_failure = "abort"')
    )
    proc = washout("run", aborting, "--db", tmp_path / "a.db", "--quiet", check=False)
    assert proc.returncode == 5 and "on_failure = 'abort'" in proc.stdout


def built_store(tmp_path: Path) -> Path:
    spec = write_spec(
        tmp_path / "d.toml",
        "[experiment]\nruns = 3\nseed = 2\n"
        '[[test]]\nname = "a"\ncommand = "echo 1"\n'
        '[[test]]\nname = "b"\ncommand = "echo 2"\n',
    )
    db = tmp_path / "d.db"
    washout("run", spec, "--db", db, "--quiet")
    return db


def test_a_truncated_store_is_damaged_not_another_kind_of_file(tmp_path: Path) -> None:
    db = built_store(tmp_path)
    assert not Path(f"{db}-wal").exists()  # every page is in the file now
    with db.open("r+b") as f:
        f.truncate(db.stat().st_size // 2)
    for command in ("status", "export", "analyze", "report", "resume"):
        one_line_error(washout(command, db, check=False), 2, f"{db}: damaged: ")


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small tmpfs mounted at ``where`` for the test (root only), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def test_a_store_on_a_read_only_file_system_is_read(tmp_path: Path) -> None:
    db = built_store(tmp_path)
    with tmpfs(tmp_path / "ro", "4m") as mnt:
        (mnt / db.name).write_bytes(db.read_bytes())
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        copy = mnt / db.name
        assert "complete: 12 of 12 trials" in washout("status", copy).stdout
        exported = pd.read_csv(io.StringIO(washout("export", copy).stdout))
        assert len(exported[~exported["metric"].map(is_health)]) == 12 * 4
        washout("analyze", copy)
        one_line_error(washout("resume", copy, check=False), 7, "cannot open for writing")


def test_export_onto_a_full_disk_is_one_line(tmp_path: Path) -> None:
    db = built_store(tmp_path)
    with tmpfs(tmp_path / "tiny", "64k") as mnt:
        with contextlib.suppress(OSError), (mnt / "filler").open("wb") as filler:
            while True:
                filler.write(b"x" * 4096)
                filler.flush()
        one_line_error(
            washout("export", db, "-o", mnt / "out.csv", check=False),
            2,
            "cannot write: No space left on device",
        )


def test_a_full_disk_stops_in_one_line_with_the_data_intact_and_resumable(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "big.toml",
        """
[experiment]
runs = 40
seed = 3
[[test]]
name = "a"
command = "head -c 3000 /dev/zero | tr '\\\\0' x"
[[test]]
name = "b"
command = "head -c 3000 /dev/zero | tr '\\\\0' y"
""",
    )
    with tmpfs(tmp_path / "small", "300k") as mnt:
        db = mnt / "f.db"
        one_line_error(
            washout("run", spec, "--db", db, "--quiet", check=False),
            7,
            "database or disk is full",
            f"washout resume {db}",
        )
        assert "stopped; `washout resume" in washout("status", db).stdout
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        washout("resume", db, "--quiet")
        check_store_against_plan(db, 2, 40, 3)


def test_the_guarantees_page_lists_every_exit_code() -> None:
    from conftest import ROOT

    from washout.errors import ExitCode

    page = (ROOT / "docs" / "guarantees.md").read_text()
    listed = {int(code) for code in re.findall(r"^\| (\d+) \|", page, re.M)}
    assert listed == {int(code) for code in ExitCode}


def test_the_log_is_folded_into_the_store_between_runs_never_between_two_trials(
    tmp_path: Path,
) -> None:
    """Every trial reads the size of the store's main file: a checkpoint (the log copied
    into it and both synced: tens of ms, once up to half a second) changes it. Within a
    run it never changes; between runs it does, more than once. (Before, SQLite's
    automatic checkpoint came whenever a commit filled 1,000 pages of log: mid-run.)"""
    db = tmp_path / "s.db"
    lines = ["[experiment]", 'name = "checkpoints"', "runs = 120", "seed = 3"]
    for name in ("a", "b", "c", "d", "e"):
        lines += ["[[test]]", f'name = "{name}"', f'command = "stat -c %s {db}"']
    spec = tmp_path / "checkpoints.toml"
    spec.write_text("\n".join(lines) + "\n")
    washout("run", spec, "--db", db, "--quiet", timeout=300)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT t.run_id, t.stdout_tail FROM trial t WHERE t.status = 'ok' ORDER BY t.id"
        ).fetchall()
    assert len(rows) == 5 * 2 * 120
    sizes: dict[int, set[int]] = {}
    for run, out in rows:
        sizes.setdefault(run, set()).add(int(out))
    assert all(len(seen) == 1 for seen in sizes.values()), {
        run: seen for run, seen in sizes.items() if len(seen) > 1
    }
    assert len({seen.pop() for seen in sizes.values()}) > 1  # checkpoints did happen


def test_one_writer_whatever_name_reaches_the_store(tmp_path: Path) -> None:
    """The lock was the path string plus ``-lock``: ``resume link.db`` (a symlink to the
    live store) ran beside ``run c.db``, doubling slots, and ``status link.db`` said
    "stopped". A second name made by a hard link is refused a writer: SQLite, too, keeps
    one write-ahead log per name."""
    link, hard = tmp_path / "link.db", tmp_path / "hard.db"
    link.symlink_to("c.db")
    db, proc, go = waiting_run(tmp_path, "c")
    try:
        one_line_error(washout("resume", link, "--quiet", check=False), 6, f"pid {proc.pid}")
        assert f"running (pid {proc.pid} on host" in washout("status", link).stdout
        os.link(db, hard)
        one_line_error(washout("resume", hard, "--quiet", check=False), 2, "hard links")
        hard.unlink()
    finally:
        go.touch()
    assert proc.wait(timeout=120) == 0
    check_store_against_plan(db, 3, 2, 4)


@pytest.mark.parametrize(
    "signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["KILL", "TERM", "INT"]
)
def test_a_store_appears_only_whole(tmp_path: Path, signum: int) -> None:
    """Killed within milliseconds of the store's creation, ``run`` left a 0- or 4096-byte
    file that both ``run`` ("already exists") and ``resume`` ("not an SQLite database")
    refused. Now there is no store, or one that ``resume`` completes."""
    spec = write_spec(
        tmp_path / "n.toml",
        '[experiment]\nruns = 1\nseed = 5\n[[test]]\nname = "a"\ncommand = "true"\n',
    )
    for attempt in range(3):
        db = tmp_path / f"n{attempt}.db"
        proc = start("run", spec, "--db", db, "--quiet")
        while not os.path.lexists(db) and proc.poll() is None:
            pass  # the instant it appears
        proc.send_signal(signum)
        proc.wait(timeout=60)
        if db.exists():
            washout("resume", db, "--quiet")
        else:
            washout("run", spec, "--db", db, "--quiet")
        check_store_against_plan(db, 1, 1, 5)


def test_odd_store_targets_each_have_their_own_message(tmp_path: Path) -> None:
    """``--db`` naming a directory, ``""`` or ``/dev/null`` said "already exists; ...
    resume"; each odd target now says what it is, for every command that takes a store."""
    spec = write_spec(
        tmp_path / "o.toml", '[experiment]\nruns = 1\n[[test]]\nname = "a"\ncommand = "true"\n'
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    odd = {tmp_path: "a directory", Path("/dev/null"): "a character device", fifo: "a FIFO"}
    one_line_error(washout("run", spec, "--db", "", check=False), 2, "--db = '': empty")
    for target, kind in odd.items():
        err = one_line_error(washout("run", spec, "--db", target, check=False), 2, kind)
        assert "already exists" not in err
        for command in ("status", "resume", "export", "analyze", "report"):
            if command in ("analyze", "report") and kind == "a directory":
                continue  # a sweep's directory is what they take: "not a sweep directory"
            one_line_error(washout(command, target, check=False, timeout=30), 2, kind)


DAMAGE = {
    "metric value as text": "UPDATE metric SET value = 'fast' WHERE trial_id = 3",
    "metric value as a BLOB": "UPDATE metric SET value = x'00ff' WHERE trial_id = 3",
    "trial position as text": "UPDATE trial SET position = 'first' WHERE id = 2",
    "trial duration as a BLOB": "UPDATE trial SET duration = x'01' WHERE id = 2",
    "run index as text": "UPDATE run SET idx = 'one' WHERE id = 1",
    "no experiment row": "DELETE FROM experiment",
    "test metrics not JSON": "UPDATE test SET metrics = '[wall' WHERE spec_index = 0",
    "a trial of no run": "PRAGMA foreign_keys = OFF; DELETE FROM run WHERE id = 1",
    "trial context as text": "UPDATE trial SET context_env_bytes = 'big' WHERE id = 2;"
    " INSERT INTO meta VALUES ('context', '[\"env\"]'), ('context_levels', '4')",
    "trial ASLR neither on nor off": "UPDATE trial SET context_aslr = 2 WHERE id = 2;"
    " INSERT INTO meta VALUES ('context', '[\"aslr\"]'), ('context_levels', '2')",
    "meta context not a list": "INSERT INTO meta VALUES ('context', '\"env\"')",
    "a test's place past the tests": "UPDATE test SET spec_index = 5 WHERE spec_index = 0",
    "two tests in one place": "UPDATE test SET spec_index = 1 WHERE spec_index = 0",
}
"""Values edited by hand (the sqlite3 shell), each a valid SQLite file."""


@pytest.mark.parametrize("edit", DAMAGE.values(), ids=DAMAGE.keys())
def test_damaged_values_are_one_line_never_a_traceback(tmp_path: Path, edit: str) -> None:
    """A value edited to text or a BLOB, or a row taken away, gave ValueError and TypeError
    tracebacks from export, analyze, status and resume: now each command either works
    (it does not read that value) or says ``damaged:`` naming it, and resume writes
    nothing."""
    db = built_store(tmp_path)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executescript(edit)
    before = db.read_bytes()
    said = set()
    for command in ("status", "export", "analyze", "report", "resume"):
        proc = (
            washout(command, db, "-o", tmp_path / "r.html", check=False)
            if (command == "report")
            else washout(command, db, check=False)
        )
        if proc.returncode != 0:
            said.add(command)
            one_line_error(proc, 2, f"{db}: damaged: ")
    assert "resume" in said and db.read_bytes() == before
    assert said >= {"export", "analyze"} or "experiment" in edit or "duration" in edit
