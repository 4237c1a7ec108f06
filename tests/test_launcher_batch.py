"""The launcher's batch mode (launch.c, ``batch``): trials back to back from the launcher,
each one's record appended to a journal before the next starts, with real processes and
real files: the records and probes, every way a batch ends, a washout gone mid-trial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import gone, wait_for

from washout.harness.executors import local
from washout.harness.launcher.client import (
    AFTER,
    BEFORE,
    MEASURES,
    BatchTrial,
    Launcher,
    LauncherGone,
    Probe,
    Program,
    batch_request,
    environment_block,
    hole,
)

pytestmark = pytest.mark.skipif(
    local.launcher_program()[0] is None, reason=f"no launcher: {local.launcher_program()[1]}"
)

ENV = environment_block({"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
ALL = b",".join(hole("n", i) for i in range(len(MEASURES)))


def program(*argv: str) -> Program:
    return Program(argv[0], argv, ENV, None, None)


def trial(index: int, name: str, timeout: float | None = None) -> BatchTrial:
    """A trial whose record is ``["ran", [name, measures...]]`` and whose successor's start
    is ``["next", [now]]``, each a line."""
    finish = b'[["ran",["' + name.encode() + b'",' + ALL + b"]]]\n"
    return BatchTrial(index, timeout, finish, b'[["next",[' + hole("n", 9) + b"]]]\n")


def records(journal: Path) -> list[list[object]]:
    return [json.loads(line) for line in journal.read_bytes().splitlines()]


@pytest.fixture
def launcher():  # -> Iterator[Launcher]
    program_path = local.launcher_program()[0]
    assert program_path is not None
    started = Launcher(program_path)
    yield started
    started.close()


def outputs(tmp_path: Path) -> list[int]:
    """The journal, stdout and stderr files of a batch, opened to append."""
    names = ("journal", "stdout", "stderr")
    return [os.open(tmp_path / n, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) for n in names]


def run_batch(launcher: Launcher, tmp_path: Path, request: bytes):  # -> tuple[BatchEnd, Path]
    fds = outputs(tmp_path)
    journal = tmp_path / "journal"
    try:
        launcher.batch(request, *fds)
        return launcher.batch_end(), journal
    finally:
        for fd in fds:
            os.close(fd)


def test_each_trial_is_recorded_with_its_successors_start_before_that_starts(
    launcher: Launcher, tmp_path: Path
) -> None:
    """Five trials: five records of their measures, each followed by the next one's start
    but the last; the clocks in order (each record made after its trial ended, before the
    next began), the walls those of a no-op, the pids distinct."""
    request = batch_request(
        [], [program("/bin/true")], [trial(0, f"t{i}") for i in range(5)], health=True
    )
    end, journal = run_batch(launcher, tmp_path, request)
    assert (end.recorded, end.why, end.record) == (5, "done", b"")
    lines = records(journal)
    assert [r[0][0] for r in lines] == ["ran", "next"] * 4 + ["ran"]
    ran = [dict(zip(MEASURES, r[0][1][1:], strict=True)) for r in lines if r[0][0] == "ran"]
    assert [r[0][1][0] for r in lines if r[0][0] == "ran"] == [f"t{i}" for i in range(5)]
    nexts = [r[0][1][0] for r in lines if r[0][0] == "next"]
    for i, m in enumerate(ran):
        assert m["status"] == 0 and 0 < m["wall"] < 1e9 and m["max_rss"] > 0
        assert m["started"] < m["ended"] <= m["now"]
        if i < 4:
            assert nexts[i] == m["now"] <= ran[i + 1]["started"]
    assert len({m["pid"] for m in ran}) == 5
    assert end.measures == ran[-1]


def test_times_seconds_and_bytes_are_filled_in_as_the_store_writes_them(
    launcher: Launcher, tmp_path: Path
) -> None:
    """Each measure as an integer and as the store writes it: a real-time reading as
    ``datetime.isoformat`` makes it, nanoseconds as the float ``ns / 1e9`` reads back as,
    KiB as bytes."""
    pairs = [("n", i) for i in range(len(MEASURES))]
    pairs += [("t", MEASURES.index(m)) for m in ("started", "ended", "now")]
    pairs += [("s", MEASURES.index(m)) for m in ("wall", "user", "system")]
    pairs += [("k", MEASURES.index("max_rss"))]
    finish = b'[["m",[' + b",".join(hole(c, i) for c, i in pairs) + b"]]]\n"
    trials = [BatchTrial(0, None, finish, b"")] * 20
    end, journal = run_batch(
        launcher, tmp_path, batch_request([], [program("/bin/sh", "-c", "i=0")], trials, False)
    )
    assert end.why == "done"
    for record in records(journal):
        values = record[0][1]
        m = dict(zip(MEASURES, values[: len(MEASURES)], strict=True))
        started, ended, now, wall, user, system, rss = values[len(MEASURES) :]
        for text, ns in ((started, m["started"]), (ended, m["ended"]), (now, m["now"])):
            at = datetime.fromtimestamp(ns // 10**9, UTC).replace(microsecond=ns % 10**9 // 1000)
            assert text == at.isoformat(timespec="microseconds")
        assert (wall, user, system) == (m["wall"] / 1e9, m["user"] / 1e9, m["system"] / 1e9)
        assert rss == m["max_rss"] * 1024 and m["max_rss"] > 0


def test_probes_read_lines_registers_swap_and_the_kernel_log_as_json(
    launcher: Launcher, tmp_path: Path
) -> None:
    """Each kind of probe, on files laid out as the kernel's: a line by its start (JSON
    escapes kept), an 8-byte register at an offset, the swap lines read from vmstat, and
    null for what cannot be read (a missing file, a kernel log that is not a device)."""
    stat = tmp_path / "stat"
    stat.write_text('cpu  1 2 3\ncpu0 4 5 6\ncpu1 7 "8" \\9\nintr 0\n')
    msr = tmp_path / "msr"
    msr.write_bytes(bytes(8) + (123456789).to_bytes(8, "little"))
    swaps, vmstat = tmp_path / "swaps", tmp_path / "vmstat"
    swaps.write_text("Filename Type Size Used Priority\n/swap file 1 0 -2\n")
    vmstat.write_text("nr_free_pages 5\npswpin 11\npswpout 12\n")
    probes = [
        Probe("L", BEFORE | AFTER, str(stat), "cpu1 "),
        Probe("L", AFTER, str(stat), ""),
        Probe("M", BEFORE | AFTER, str(msr), "8"),
        Probe("W", BEFORE | AFTER, str(swaps), str(vmstat)),
        Probe("L", AFTER, str(tmp_path / "missing"), ""),
        Probe("K", AFTER, str(stat)),
        Probe("L", AFTER, str(stat), "cpu9 "),
    ]
    holes = [hole("b", 0), *(hole("a", i) for i in range(len(probes))), hole("b", 1)]
    finish = b'[["p",[' + b",".join(holes) + b"]]]\n"
    request = batch_request(
        probes, [program("/bin/true")], [BatchTrial(0, None, finish, b"")], health=False
    )
    end, journal = run_batch(launcher, tmp_path, request)
    assert end.why == "done"
    ((_, values),) = records(journal)[0]
    assert values == [
        'cpu1 7 "8" \\9',
        'cpu1 7 "8" \\9',
        "cpu  1 2 3",
        123456789,
        "pswpin 11\npswpout 12",
        None,
        None,
        None,
        None,  # a probe read only after the trial has no value before it
    ]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (("/bin/false",), "failed"),
        (("/bin/sh", "-c", "echo oops >&2"), "output"),
        (("/bin/echo", "out"), "output"),
        (("/nonexistent/program",), "unstarted"),
    ],
)
def test_a_trial_that_is_not_ok_ends_the_batch_unrecorded_and_comes_back_filled_in(
    launcher: Launcher, tmp_path: Path, argv: tuple[str, ...], why: str
) -> None:
    """Two good trials, then one that fails, writes output or cannot start: the batch ends
    there, the good ones recorded with their successors' starts (the third's too: it
    was begun), the third's record not written but sent back filled in, and the fourth
    never run."""
    trials = [trial(0, "a"), trial(0, "b"), trial(1, "c"), trial(0, "d")]
    request = batch_request([], [program("/bin/true"), program(*argv)], trials, health=False)
    end, journal = run_batch(launcher, tmp_path, request)
    assert (end.recorded, end.why) == (2, why)
    assert [r[0][0] for r in records(journal)] == ["ran", "next", "ran", "next"]
    if why == "unstarted":
        assert (end.step, end.error, end.record) == ("exec", 2, b"")
        return
    ((name, values),) = json.loads(end.record)
    assert name == "ran" and values[0] == "c"
    assert dict(zip(MEASURES, values[1:], strict=True)) == end.measures
    assert (end.measures["status"] != 0) == (why == "failed")


def test_a_trial_past_its_timeout_has_its_group_killed_and_ends_the_batch(
    launcher: Launcher, tmp_path: Path
) -> None:
    """A trial that would sleep 30 s with a 0.3 s timeout: killed (with the process it
    left in its group) within a fraction of a second of it."""
    left = tmp_path / "left"
    command = f"sleep 30 & echo $! > {left}; wait"
    request = batch_request(
        [], [program("/bin/sh", "-c", command)], [trial(0, "slow", timeout=0.3)], health=False
    )
    t0 = time.monotonic()
    end, _ = run_batch(launcher, tmp_path, request)
    assert end.why == "timeout" and 0.3 <= time.monotonic() - t0 < 5
    assert 0.3e9 <= end.measures["wall"] < 5e9
    assert os.WIFSIGNALED(end.measures["status"])
    assert gone(int(left.read_text()))


def test_a_stop_ends_the_batch_after_the_trial_in_flight_without_its_successors_start(
    launcher: Launcher, tmp_path: Path
) -> None:
    """``s`` during a batch of 0.05 s trials: the trial in flight is recorded, without the
    next one's start, and no other runs."""
    trials = [trial(0, f"t{i}") for i in range(100)]
    request = batch_request([], [program("/bin/sleep", "0.05")], trials, health=False)
    journal, fds = tmp_path / "journal", outputs(tmp_path)
    launcher.batch(request, *fds)
    # two trials recorded, each with its successor's start (a line each)
    wait_for(lambda: journal.read_bytes().count(b"\n") >= 4, 10, "two trials not recorded")
    launcher.tell(b"s")
    end = launcher.batch_end()
    assert end.why == "stopped" and 2 <= end.recorded < 100
    lines = [r[0][0] for r in records(journal)]
    assert lines == ["ran", "next"] * (end.recorded - 1) + ["ran"]


def test_a_kill_ends_the_trial_in_flight_at_once(launcher: Launcher, tmp_path: Path) -> None:
    """``k`` during a 30 s trial: its group is killed and the batch ends in a moment, the
    trial not recorded."""
    request = batch_request([], [program("/bin/sleep", "30")], [trial(0, "long")], health=False)
    journal, fds = tmp_path / "journal", outputs(tmp_path)
    launcher.batch(request, *fds)
    time.sleep(0.2)
    t0 = time.monotonic()
    launcher.tell(b"k")
    end = launcher.batch_end()
    assert (end.why, end.recorded) == ("killed", 0) and time.monotonic() - t0 < 5
    assert journal.read_bytes() == b""
    assert gone(end.measures["pid"])


def test_a_full_disk_takes_the_record_back_and_ends_the_batch(
    launcher: Launcher, tmp_path: Path
) -> None:
    """The journal on /dev/full: the write fails with ENOSPC, the batch ends at the first
    trial, and its record comes back to be handled as washout handles its own."""
    _, stdout, stderr = outputs(tmp_path)
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        request = batch_request([], [program("/bin/true")], [trial(0, "a")] * 3, health=False)
        launcher.batch(request, full, stdout, stderr)
        end = launcher.batch_end()
    finally:
        for fd in (full, stdout, stderr):
            os.close(fd)
    assert (end.why, end.recorded, end.error) == ("journal", 0, 28)
    assert json.loads(end.record)[0][0] == "ran"


def test_a_launcher_killed_with_words_unread_is_gone_not_a_traceback(
    launcher: Launcher, tmp_path: Path
) -> None:
    """A launcher killed while washout's word (a batch's stop) waits unread in its socket
    resets the connection: recv raises ECONNRESET where a launcher's plain end reads as
    the socket's end. Both are the launcher gone (a kill/resume test once ended in that
    traceback instead), and its trial is killed with it."""
    request = batch_request([], [program("/bin/sleep", "60")], [trial(0, "t")], health=False)
    fds = outputs(tmp_path)
    try:
        launcher.batch(request, *fds)
        pid = launcher.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children")
        wait_for(lambda: children.read_text().split(), 10, "the trial did not start")
        os.kill(pid, signal.SIGSTOP)
        trials = children.read_text().split()
        launcher.tell(b"s")  # unread: the launcher is stopped
        os.kill(pid, signal.SIGKILL)
        launcher.process.wait(timeout=10)
        with pytest.raises(LauncherGone, match="ended"):
            launcher.batch_end()
        assert trials and all(gone(int(child)) for child in trials)  # killed with it
    finally:
        for fd in fds:
            os.close(fd)


def test_a_washout_killed_mid_batch_leaves_no_trial_running(tmp_path: Path) -> None:
    """The process that started a batch of 30 s trials is SIGKILLed: the launcher sees its
    socket's end, kills the trial's group and exits, leaving the records it wrote whole."""
    script = tmp_path / "controller.py"
    script.write_text(
        f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_launcher_batch import program, trial
from washout.harness.executors import local
from washout.harness.launcher.client import Launcher, batch_request
launcher = Launcher(local.launcher_program()[0])
fds = [os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) for p in sys.argv[1:4]]
command = "echo $$ > " + sys.argv[4] + ".tmp; mv " + sys.argv[4] + ".tmp " + sys.argv[4]
command += "; exec sleep 30"
programs = [program("/bin/true"), program("/bin/sh", "-c", command)]
request = batch_request([], programs, [trial(0, "quick"), trial(1, "long")], False)
launcher.batch(request, *fds)
print(launcher.process.pid, flush=True)
launcher.batch_end()
"""
    )
    journal, pid_file = tmp_path / "journal", tmp_path / "pid"
    controller = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(journal),
            *(str(tmp_path / n) for n in ("o", "e")),
            str(pid_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert controller.stdout is not None
    launcher_pid = int(controller.stdout.readline())
    deadline = time.monotonic() + 10
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    sleeper = int(pid_file.read_text())
    controller.send_signal(signal.SIGKILL)
    controller.wait()
    assert gone(sleeper) and gone(launcher_pid)
    assert [r[0][0] for r in records(journal)] == ["ran", "next"]
