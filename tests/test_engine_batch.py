"""Runs as launcher batches (washout/harness/batch.py, the engine's ``_batch``), end to end
with real processes and real stores: a batch records what trials run one at a time record,
and every way a batch ends leaves the store as the plan says."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import washout
from test_trial_health import TREE_CPUS, health_tree

from washout.data.health import (
    CPUFREQ_MHZ,
    OTHER_CPU,
    SWAP_IN,
    SWAP_OUT,
    THROTTLES,
)
from washout.errors import ExitCode
from washout.harness.executors import local
from washout.harness.machine import SYS_CPU

pytestmark = pytest.mark.skipif(
    not (local.HAVE_PIDFD and local.launcher_program()[0] is not None),
    reason="no batches here: they need the launcher and pidfds",
)
NO_LAUNCHER = {**os.environ, "WASHOUT_LAUNCHER": "off"}


def batches(proc: subprocess.CompletedProcess[str]) -> int:
    """How many batches a ``washout -v`` run said it ran."""
    return proc.stderr.count(" as a batch")


def rows(db: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(query).fetchall()


def store_shape(db: Path) -> dict[str, object]:
    """What a store holds, times and measured values apart."""
    return {
        "runs": rows(
            db,
            "SELECT id, worker_id, idx, order_kind, permutation, reset_info, status"
            " FROM run ORDER BY id",
        ),
        "trials": rows(
            db,
            "SELECT id, run_id, position, test, attempt, status, reason, exit_code,"
            " stdout_tail, stderr_tail, cpus, superseded FROM trial ORDER BY id",
        ),
        # max_rss is recorded only where the launcher starts the trial (as here in batches)
        "metrics": rows(
            db, "SELECT trial_id, name FROM metric WHERE name != 'max_rss' ORDER BY 1, 2"
        ),
        "environments": [
            (worker, run, sorted(json.loads(data)), fp)
            for worker, run, data, fp in rows(
                db, "SELECT worker_id, run_index, data, fingerprint FROM environment ORDER BY id"
            )
        ],
    }


def bump_script(root: Path, tmp_path: Path) -> Path:
    """A trial that moves the tree's counters as a disturbed machine would, by the same
    amounts each time: CPU 0 busy 7 more ticks, 2 pages swapped in and 3 out, CPU 1
    throttled once more, every CPU's clock 2 or 3 GHz in turn."""
    script = tmp_path / "bump.sh"
    stat_line = " ".join(["cpu  $((100 * CPUS + 7 * n)) 0 0 $((1000 * CPUS)) 0 0 0 0 0 0"])
    script.write_text(
        f"""n=$(( $(cat {tmp_path}/count) + 1 ))
echo $n > {tmp_path}/count
CPUS={TREE_CPUS}
{{ echo "{stat_line}"
  echo "cpu0 $((100 + 7 * n)) 0 0 1000 0 0 0 0 0 0"
  i=1; while [ $i -lt $CPUS ]; do echo "cpu$i 100 0 0 1000 0 0 0 0 0 0"; i=$((i + 1)); done
  echo "intr 12345 0 0"; }} > {root}/proc/stat.new
mv {root}/proc/stat.new {root}/proc/stat
printf 'nr_free_pages 1000\\npswpin %d\\n' $((10 + 2 * n)) > {root}/proc/vmstat
printf 'pswpout %d\\n' $((20 + 3 * n)) >> {root}/proc/vmstat
echo $n > {root}{SYS_CPU}/cpu1/thermal_throttle/core_throttle_count
i=0; while [ $i -lt $CPUS ]; do
  echo $((2000000 + 1000000 * (n % 2))) > {root}{SYS_CPU}/cpu$i/cpufreq/scaling_cur_freq
  i=$((i + 1))
done
"""
    )
    (tmp_path / "count").write_text("0\n")
    return script


def test_a_batch_records_what_trials_run_one_at_a_time_record(tmp_path: Path) -> None:
    """The same spec (two tests, one of which moves the health counters of a laid-out
    machine tree) run in batches and without the launcher, so one trial at a time: the
    same runs, trials, metric names, environment facts and health values, the runs of the
    first beyond its first run all in batches."""
    shapes, health = [], []
    for label, env in (("batched", None), ("alone", NO_LAUNCHER)):
        work = tmp_path / label
        work.mkdir()
        root = health_tree(work / "tree", msr=False)
        (root / "proc" / "swaps").write_text("Filename Type\n/swapfile file\n")
        spec = work / "s.toml"
        spec.write_text(
            f"""[experiment]
runs = 30
seed = 3
health_root = {json.dumps(str(root))}
[[test]]
name = "bump"
command = "sh {bump_script(root, work)}"
[[test]]
name = "quiet"
command = "true"
"""
        )
        db = work / "r.db"
        proc = washout("-v", "run", spec, "--db", db, "--quiet", env=env)
        assert (batches(proc) > 0) == (env is None), proc.stderr[-2000:]
        shapes.append(store_shape(db))
        names = ",".join(repr(n) for n in (THROTTLES, SWAP_IN, SWAP_OUT, CPUFREQ_MHZ, OTHER_CPU))
        query = "SELECT trial_id, name, value FROM metric WHERE name IN ({}) ORDER BY 1, 2"
        health.append(rows(db, query.format(names)))
    assert shapes[0] == shapes[1]
    assert [row[:2] for row in health[0]] == [row[:2] for row in health[1]]
    for (_, name, batched), (_, _, alone) in zip(*health, strict=True):
        if name == OTHER_CPU:  # less the trial's own CPU time, which varies
            assert batched == pytest.approx(alone, abs=0.03)
        else:
            assert batched == alone
    bumped = {name: value for _, name, value in health[0][-5:]}
    assert (bumped[SWAP_IN], bumped[SWAP_OUT]) in ((2.0, 3.0), (0.0, 0.0))


def counted_spec(
    tmp_path: Path, runs: int, seed: int, test: str, then: str, extra: str = ""
) -> Path:
    """A spec of a test whose command counts its trials (``$n``, from 1) and then runs
    ``then``, and a quiet one; ``extra``: more of the test's keys (or, before the first
    ``[[test]]``, of ``[experiment]``: a line ending the table is not needed)."""
    count = tmp_path / "count"
    count.write_text("0\n")
    command = f"n=$(( $(cat {count}) + 1 )); echo $n > {count}; {then}"
    spec = tmp_path / "s.toml"
    experiment, _, keys = extra.partition("[test]\n")
    spec.write_text(
        f"[experiment]\nruns = {runs}\nseed = {seed}\n{experiment}"
        f'[[test]]\nname = "{test}"\n{keys}command = {json.dumps(command)}\n'
        '[[test]]\nname = "quiet"\ncommand = "true"\n'
    )
    return spec


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("record", ["failed"]),
        ("retry:1", ["failed", "ok"]),
    ],
)
def test_a_trial_that_fails_mid_batch_is_settled_by_the_failure_policy(
    tmp_path: Path, policy: str, expected: list[str]
) -> None:
    """The 40th trial of a test fails, inside a batch: it is recorded failed with its
    reason, the failure policy decides what follows (a retry in its slot, or the next
    position), and every planned slot ends done as without batches."""
    spec = counted_spec(
        tmp_path, 40, 1, "flaky", "[ $n -ne 40 ]", f'on_failure = "{policy}"\n[test]\n'
    )
    db = tmp_path / "r.db"
    proc = washout("-v", "run", spec, "--db", db, "--quiet", check=False)
    assert batches(proc) > 0
    trials = rows(db, "SELECT test, attempt, status, reason FROM trial ORDER BY id")
    failed = [i for i, t in enumerate(trials) if t[2] != "ok"]
    assert len(failed) == 1 and trials[failed[0]][3] == "exit code 1"
    flaky = [t for t in trials if t[0] == "flaky"]
    at = flaky.index(trials[failed[0]])
    assert [t[2] for t in flaky[at : at + len(expected)]] == expected
    assert len(flaky) == 80 + (policy == "retry:1")
    assert rows(db, "SELECT DISTINCT status FROM run") == [("done",)]
    assert rows(db, "SELECT count(*) FROM trial WHERE superseded = 1") == [(0,)]


@pytest.mark.parametrize("slow", [1, 30])
def test_one_long_trial_does_not_keep_a_test_of_short_trials_out_of_batches(
    tmp_path: Path, slow: int
) -> None:
    """One trial of a test of short ones takes longer than a batch may (its first, as a
    cold start does, or one inside a batch, as a moment of load does): the trials after
    it run in batches again. Both kept them one at a time for the rest of the session."""
    spec = counted_spec(tmp_path, 40, 3, "cold", f"[ $n -ne {slow} ] || sleep 0.15")
    db = tmp_path / "r.db"
    proc = washout("-v", "run", spec, "--db", db, "--quiet")
    ((run,),) = rows(
        db, "SELECT r.idx FROM trial t JOIN run r ON r.id = t.run_id WHERE t.duration > 0.12"
    )
    starts = [int(m) for m in re.findall(r"runs (\d+)-\d+ as a batch", proc.stderr)]
    assert any(start > run for start in starts), (run, starts)
    assert rows(db, "SELECT DISTINCT status FROM trial") == [("ok",)]


def test_a_trial_that_prints_mid_batch_keeps_its_output_and_ends_batching_its_test(
    tmp_path: Path,
) -> None:
    """From its 30th trial on a test prints: that trial keeps its stdout and stderr tails
    as any trial does, and the test's later trials run one at a time (each printing)."""
    then = "if [ $n -ge 30 ]; then echo out $n; echo err $n >&2; fi"
    spec = counted_spec(tmp_path, 40, 2, "talks", then)
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    talks = rows(db, "SELECT stdout_tail, stderr_tail FROM trial WHERE test = 'talks' ORDER BY id")
    assert len(talks) == 80
    assert talks[:29] == [("", "")] * 29
    assert talks[29:] == [(f"out {n}\n", f"err {n}\n") for n in range(30, 81)]


def test_a_trial_past_its_timeout_mid_batch_is_recorded_as_one(tmp_path: Path) -> None:
    """The 25th trial of a test sleeps past its timeout inside a batch: it is recorded
    ``timeout``, its run goes on, and the rest is as planned."""
    extra = 'on_failure = "record"\n[test]\ntimeout = "0.5s"\n'
    spec = counted_spec(tmp_path, 20, 4, "hangs", "[ $n -ne 25 ] || sleep 5", extra)
    db = tmp_path / "r.db"
    t0 = time.monotonic()
    washout("run", spec, "--db", db, "--quiet", check=False)
    assert time.monotonic() - t0 < 30
    statuses = rows(db, "SELECT status, reason FROM trial WHERE test = 'hangs' ORDER BY id")
    assert statuses[24] == ("timeout", "timed out after 0.5 s; process group killed")
    assert {s for s, _ in statuses[:24] + statuses[25:]} == {"ok"} and len(statuses) == 40


def verbose_run(spec: Path, db: Path) -> subprocess.Popen[str]:
    """``washout -v run SPEC`` started, its log (which says each batch) on a pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "washout", "-v", "run", str(spec), "--db", str(db), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def launchers_of(pid: int) -> list[int]:
    """The launcher processes among ``pid``'s children."""
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            exe = os.readlink(f"/proc/{child}/exe")
        except OSError:
            continue
        if Path(exe).name.startswith("launch-"):
            found.append(int(child))
    return found


def killed_launchers(
    proc: subprocess.Popen[str], rng: random.Random, kills: int
) -> tuple[int, int, str]:
    """SIGKILL ``proc``'s launchers at random moments until it ends or ``kills`` reach 6:
    the kills so far, its exit status and its stderr."""
    while proc.poll() is None and kills < 6:
        time.sleep(rng.uniform(0.02, 0.2))
        for launcher in launchers_of(proc.pid):
            try:
                os.kill(launcher, signal.SIGKILL)
                kills += 1
            except ProcessLookupError:
                pass
    err = proc.communicate(timeout=120)[1]
    return kills, proc.returncode, err


def test_launchers_killed_at_random_points_of_batches_lose_nothing(tmp_path: Path) -> None:
    """The launcher SIGKILLed again and again while it runs batches of no-op trials (in a
    trial, between two, or as it writes a record): each time its trial in flight is lost
    and its run superseded and run again, and the store ends holding every planned slot
    once, in its planned order, with nothing doubled and nothing left ``running``. A kill
    of the launcher of a command rather than a trial (the lost run's reconnect, or the
    environment's capture twice in a row) gives the local worker up, as any failed
    reconnect does (exit 3; before the first run: exit 2, nothing run): ``resume``, under
    the same killing, goes on from there, and only a clean end counts."""
    from test_robustness import check_store_against_plan

    runs, n_tests, seed = 400, 3, 11
    lines = ["[experiment]", f"runs = {runs}", f"seed = {seed}"]
    for i in range(n_tests):
        lines += ["[[test]]", f'name = "t{i}"', 'command = "true"']
    spec = tmp_path / "s.toml"
    spec.write_text("\n".join(lines) + "\n")
    db = tmp_path / "r.db"
    rng = random.Random(7)
    kills, code, err = killed_launchers(verbose_run(spec, db), rng, 0)
    batched = " as a batch" in err
    for _ in range(6):
        if code == ExitCode.DONE:
            break
        assert kills_ended_it(code, err), err[-3000:]
        resumed = subprocess.Popen(
            [sys.executable, "-m", "washout", "-v", "resume", str(db), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        kills, code, err = killed_launchers(resumed, rng, kills)
        batched = batched or " as a batch" in err
    assert code == ExitCode.DONE, err[-3000:]
    assert kills >= 3 and batched
    counts = check_store_against_plan(db, n_tests, runs, seed)
    assert set(counts) <= {"ok", "superseded"}
    assert rows(db, "SELECT count(*) FROM event WHERE kind = 'rerun'")[0][0] >= 1


def kills_ended_it(code: int, err: str) -> bool:
    """Whether a session ended as a kill of a command's launcher ends it: the worker given
    up (exit 3), or the capture before any run refused (exit 2, its one line)."""
    return code == ExitCode.WORKER_FAILED or (
        code == ExitCode.BAD_INPUT and "cannot capture the environment" in err
    )


@pytest.mark.parametrize(("presses", "runs", "trial"), [(1, 400, "0.005"), (2, 60, "0.05")])
def test_ctrl_c_in_a_batch_and_resume_lose_nothing(
    tmp_path: Path, presses: int, runs: int, trial: str
) -> None:
    """Ctrl-C once while batches run short trials: the batch stops after the trial in
    flight; twice: that trial is killed and kept ``interrupted``. Either way washout ends
    within two seconds, no trial is left ``running``, and ``resume`` completes the plan."""
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'[experiment]\nruns = {runs}\nseed = 5\n[[test]]\nname = "a"\n'
        f'command = "sleep {trial}"\n[[test]]\nname = "b"\ncommand = "true"\n'
    )
    db = tmp_path / "r.db"
    proc = verbose_run(spec, db)
    assert proc.stderr is not None
    for line in proc.stderr:  # the first batch has begun
        if " as a batch" in line:
            break
    time.sleep(0.2)
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.01)
    t0 = time.monotonic()
    proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 2
    assert rows(db, "SELECT count(*) FROM trial WHERE status = 'running'") == [(0,)]
    assert rows(db, "SELECT count(*) FROM trial WHERE status = 'interrupted'")[0][0] < presses
    planned = 4 * runs
    assert 0 < rows(db, "SELECT count(*) FROM trial WHERE status = 'ok'")[0][0] < planned
    washout("resume", db, "--quiet")
    done = rows(db, "SELECT count(*) FROM trial WHERE status = 'ok' AND superseded = 0")
    assert done == [(planned,)]
    assert rows(db, "SELECT DISTINCT status FROM run") == [("done",)]
