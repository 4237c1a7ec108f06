"""Figures drawn on several cores (washout.analysis.parallel): real forked processes, results in
the jobs' order, failures recovered by the parent, and an HTML report byte for byte the
same as the serial one."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import pytest
from conftest import ROOT
from simulate_longformat import simulate

from washout.analysis.compute import analyze
from washout.analysis.parallel import beside, run_jobs
from washout.analysis.result import Options
from washout.report.render import Settings, renderer

PARENT = os.getpid()


@pytest.fixture(autouse=True)
def no_other_threads() -> None:
    """These tests need a process that may fork (run_jobs stays serial while other threads
    run): what earlier tests left running must have ended, or the tests say which threads
    are in the way rather than pass serially."""
    deadline = time.monotonic() + 10
    while threading.active_count() > 1 and time.monotonic() < deadline:
        for thread in threading.enumerate():
            if thread is not threading.current_thread():
                thread.join(timeout=0.1)
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    assert not others, f"threads left running by earlier tests: {others}"


def _meet(folder: Path, index: int, others: int) -> None:
    """Leave a mark for job ``index`` and wait until ``others`` + 1 jobs have: a job that
    waits for another can finish only if another process runs that one at the same time."""
    (folder / f"{index}-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while len(list(folder.iterdir())) <= others and time.monotonic() < deadline:
        time.sleep(0.01)


def _pid_after_meeting(folder: Path, index: int) -> bytes:
    _meet(folder, index, 1)
    return f"{index}:{os.getpid()}".encode()


def _dies_in_a_child(folder: Path, index: int) -> bytes:
    _meet(folder, index, 1)
    if os.getpid() != PARENT:
        os._exit(3)
    return f"{index}:{os.getpid()}".encode()


def _fails_third(index: int) -> bytes:
    if index == 2:
        raise ValueError(f"job {index} failed")
    return b""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable core: always serial")
def test_jobs_run_in_a_forked_child_and_the_caller_in_order(tmp_path: Path) -> None:
    jobs = [partial(_pid_after_meeting, tmp_path, i) for i in range(2)]
    seen: list[tuple[int, int]] = []
    results = run_jobs(jobs, lambda done, total: seen.append((done, total)), workers=2)
    indices, pids = zip(*(r.decode().split(":") for r in results), strict=True)
    assert indices == ("0", "1")  # in the jobs' order, whoever ran them
    assert str(PARENT) in pids and len(set(pids)) == 2
    assert seen[-1] == (2, 2)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable core: always serial")
def test_a_job_whose_child_died_is_run_by_the_caller(tmp_path: Path) -> None:
    results = run_jobs([partial(_dies_in_a_child, tmp_path, i) for i in range(2)], workers=2)
    assert results == [f"{i}:{PARENT}".encode() for i in range(2)]
    marks = sorted(p.name.split("-")[0] for p in tmp_path.iterdir())
    assert len(marks) == 3  # the child started one job, then the caller ran it again


def test_a_jobs_error_reaches_the_caller() -> None:
    with pytest.raises(ValueError, match="job 2 failed"):
        run_jobs([partial(_fails_third, i) for i in range(4)], workers=2)


def test_serial_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        results = run_jobs([lambda: str(os.getpid()).encode()] * 3, workers=2)
    finally:
        stop.set()
        other.join()
    assert results == [str(PARENT).encode()] * 3


def _mark_and_report(folder: Path) -> tuple[int, dict[str, list[float]]]:
    (folder / "job").touch()
    return os.getpid(), {"values": [1.5, math.nan]}


def _wait_for_job(folder: Path, ran_in: list[int]) -> None:
    ran_in.append(os.getpid())
    deadline = time.monotonic() + 60
    while not (folder / "job").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable core: always serial")
def test_beside_runs_the_job_in_a_child_while_the_caller_works(tmp_path: Path) -> None:
    ran_in: list[int] = []
    pid, data = beside(
        partial(_mark_and_report, tmp_path), partial(_wait_for_job, tmp_path, ran_in)
    )
    assert ran_in == [PARENT] and pid != PARENT
    assert data["values"][0] == 1.5 and math.isnan(data["values"][1])  # pickled back


def test_html_report_is_the_same_drawn_on_two_cores_as_on_one() -> None:
    analysis = analyze(
        ROOT / "docs/examples/redis.csv", Options(carryover=None, drift=None, describe=True)
    )
    serial = renderer("html")(analysis, Settings(workers=1)).text
    assert serial.count("<svg ") == 13
    assert renderer("html")(analysis, Settings(workers=2)).text == serial


def test_markdown_figures_are_the_same_drawn_on_two_cores_as_on_one() -> None:
    trials = simulate(tests=("a", "b", "c"), runs=6, random_factor={"a": 1.3}, seed=4)
    analysis = analyze(trials)
    serial = renderer("md")(analysis, Settings(workers=1))
    assert len(serial.files) > 1
    assert renderer("md")(analysis, Settings(workers=2)) == serial


SLEEPY_JOBS = """
import time
from washout.analysis.parallel import beside, run_jobs
run_jobs([lambda: time.sleep(0.3) or b""] * 20, workers=2)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable core: always serial")
def test_a_child_exits_soon_after_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", SLEEPY_JOBS])
    children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
    deadline = time.monotonic() + 60
    while not (kids := children.read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert kids, "no child was forked"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    child = int(kids[0])
    # Its next result finds no reader (one job, 0.3 s), well before the 19 jobs left (5.7 s).
    deadline = time.monotonic() + 3
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped has exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
