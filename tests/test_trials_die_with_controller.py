"""A trial's processes die with washout: SIGKILL the controller mid-trial, locally and with
an SSH worker (a real sshd on loopback), and every process of the trial is gone."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import alive, wait_for, washout
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)


def start_and_kill(
    tmp_path: Path,
    command: str,
    worker: str,
    started: int,
    before_kill: Callable[[int], None] = lambda pid: None,
) -> list[int]:
    """Run a one-trial experiment of ``command`` (which appends pids to ``tmp_path/pids``),
    SIGKILL washout once ``started`` pids are written (after ``before_kill(washout's
    pid)``); returns the pids."""
    pids = tmp_path / "pids"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
runs = 1
orders = ["fixed"]
[[test]]
name = "long"
command = {json.dumps(command.format(pids=pids))}
"""
        + worker
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "run", str(spec), "--db", str(tmp_path / "k.db")]
        + ["--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: pids.exists() and len(pids.read_text().split()) == started,
            60,
            "the trial did not start",
        )
        before_kill(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return [int(p) for p in pids.read_text().split()]


def kill_controller_mid_trial(tmp_path: Path, worker: str = "") -> list[int]:
    """Start an experiment whose trial leaves a child and a grandchild running, SIGKILL
    washout while the trial runs; returns the trial's pids."""
    return start_and_kill(
        tmp_path,
        "sh -c 'sleep 300 & echo $! >> {pids}; wait' & echo $! >> {pids}; echo $$ >> {pids}; wait",
        worker,
        3,
    )


def test_sigkill_of_washout_kills_the_local_trial_group(tmp_path: Path) -> None:
    pids = kill_controller_mid_trial(tmp_path)
    wait_for(
        lambda: not any(alive(p) for p in pids),
        10,
        f"trial processes {[p for p in pids if alive(p)]} outlived washout",
    )


@pytest.mark.ssh
def test_sigkill_of_washout_kills_the_trial_group_on_an_ssh_worker(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    (server,) = sshd_farm.start(1)
    pids = kill_controller_mid_trial(tmp_path, server.worker_toml("w", sshd_farm.known_hosts))
    wait_for(
        lambda: not any(alive(p) for p in pids),
        15,
        f"trial processes {[p for p in pids if alive(p)]} outlived washout on the worker",
    )


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def kill_guard(controller: int) -> None:
    """SIGKILL washout's guard process (its child running the guard script)."""
    guards = [
        p for p in _children(controller) if b"while read" in Path(f"/proc/{p}/cmdline").read_bytes()
    ]
    assert len(guards) == 1, guards
    os.kill(guards[0], signal.SIGKILL)


def kill_controller_leaving_a_survivor(tmp_path: Path, worker: str, escape: bool) -> list[int]:
    """Start an experiment whose first trial leaves a process running and whose later
    attempts finish at once; SIGKILL washout mid-trial so that the process survives it:
    with ``escape`` the process left its trial's group (``setsid``), which no group kill
    reaches; without, washout's guard is SIGKILLed first, so nothing kills the group.
    Returns the surviving pids."""
    flag = tmp_path / "started"
    leave = "setsid sleep 300" if escape else "sleep 300"
    survivors = start_and_kill(
        tmp_path,
        f"[ -e {flag} ] && exit 0; touch {flag}; {leave} & echo $! >> {{pids}}; wait",
        worker,
        1,
        (lambda pid: None) if escape else kill_guard,
    )
    time.sleep(1.0)  # what washout's end kills would be dead by now
    assert all(alive(p) for p in survivors), "nothing survived: the test tests nothing"
    return survivors


def test_resume_kills_what_a_dead_session_left_running_locally(tmp_path: Path) -> None:
    survivors = kill_controller_leaving_a_survivor(tmp_path, "", escape=False)
    washout("resume", tmp_path / "k.db", "--quiet")
    wait_for(
        lambda: not any(alive(p) for p in survivors),
        5,
        f"resume left {[p for p in survivors if alive(p)]} of the dead session's trial running",
    )
    with sqlite3.connect(tmp_path / "k.db") as conn:
        (note,) = conn.execute("SELECT message FROM event WHERE message LIKE 'killed%'").fetchone()
    assert note.startswith("killed 2 process(es)")  # the trial's shell and its sleep


@pytest.mark.ssh
def test_resume_kills_what_a_dead_session_left_on_an_ssh_worker(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    (server,) = sshd_farm.start(1)
    worker = server.worker_toml("w", sshd_farm.known_hosts)
    survivors = kill_controller_leaving_a_survivor(tmp_path, worker, escape=True)
    washout("resume", tmp_path / "k.db", "--quiet")
    wait_for(
        lambda: not any(alive(p) for p in survivors),
        5,
        f"resume left {[p for p in survivors if alive(p)]} on the worker",
    )


ORPHANS = r"""
import ctypes, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
washout = subprocess.Popen([sys.executable, "-m", "washout", *sys.argv[1:]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
status = washout.wait()
# What washout left unreaped is now this process's child (a zombie too): name each.
names = []
for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        if parent == os.getpid():
            names.append(open(f"/proc/{pid}/comm").read().strip())
    except OSError:
        pass
print(status, *names)
"""


def console_quick_form(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``washout run true --runs 3 --quiet`` (into ``q.db``) by ``script``, which sets the
    console entry up as it wants and calls it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-c", script, "run", "true", "--runs", "3", "--quiet"]
        + ["--db", str(tmp_path / "q.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_no_process_of_washouts_outlives_a_clean_exit(tmp_path: Path) -> None:
    """The console script exits without the interpreter's teardown (and so without
    ``atexit``), yet reaps what it started: its launcher and group guard, which would
    otherwise be left to end on their own once washout had gone. Seen from a subreaper,
    which inherits whatever washout did not reap."""
    out = console_quick_form(ORPHANS, tmp_path)
    assert out.stdout.split() == ["0"], out.stdout + out.stderr
