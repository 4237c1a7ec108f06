"""The local fast path (``CommandOptions.blocking``, taken by the engine's only worker for
a plain trial): the command started and waited for without the event loop, with real
processes: its run ends at its first step, output tails, a timeout, its launcher killed
mid-trial, and Ctrl-C at a slot boundary of a run of short trials."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import gone
from test_launcher import launcher_of
from test_robustness import start, wait_for_trials, write_spec
from test_trials_die_with_controller import console_quick_form

from washout.harness.executors import local
from washout.harness.executors.base import CommandOptions, CommandResult
from washout.harness.executors.local import LocalExecutor


@pytest.fixture(params=["launcher", "pidfd"])
def ending(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """What the fast path waits on for a command's end: its launcher's reply, or (without a
    launcher) its pidfd."""
    if request.param == "launcher" and local.launcher_program()[0] is None:
        pytest.skip(f"no launcher here: {local.launcher_program()[1]}")
    if request.param == "pidfd":
        if not local.HAVE_PIDFD:
            pytest.skip("no pidfds on this kernel")
        monkeypatch.setattr(local, "launcher_program", lambda: (None, "as if no compiler"))
    return request.param


def fast(command: str, **options: Any) -> tuple[CommandResult, bool]:
    """``command`` run once by a new local executor: its result, and whether the event loop
    had a turn meanwhile (a callback scheduled before it runs only once the run waits)."""

    async def go() -> tuple[CommandResult, bool]:
        executor = LocalExecutor()
        turned: list[bool] = []
        asyncio.get_running_loop().call_soon(turned.append, True)
        try:
            return await executor.run(command, CommandOptions(**options)), bool(turned)
        finally:
            await executor.close()

    return asyncio.run(go())


def test_a_plain_command_is_waited_for_without_the_event_loop(ending: str) -> None:
    result, turned = fast("echo out; echo err >&2; exit 3", timeout=30, blocking=True)
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        "failed",
        3,
        b"out\n",
        b"err\n",
    )
    assert not turned and result.duration > 0
    assert "user" in result.resources
    # the same command off the fast path waits in the loop
    assert fast("echo out; exit 3", timeout=30)[1]


def test_pipes_that_close_a_moment_after_the_end_are_read_without_the_event_loop(
    ending: str,
) -> None:
    """A command's pipes may close just after its end is seen: its launcher closes them
    after its reply (pidfd: a child of its holds them a moment longer). They are read to
    their end of file on the fast path, not handed to the loop (CI, loaded: the loop turned
    when the launcher was preempted between its reply and its close)."""
    result, turned = fast("echo out; (sleep 0.02) & exit 0", timeout=30, blocking=True)
    assert (result.status, result.stdout, turned) == ("ok", b"out\n", False)


def test_a_request_larger_than_the_sockets_buffer_reaches_the_launcher_whole(
    ending: str,
) -> None:
    """The start is one message (header, payload and descriptors together); an environment
    of 400 kB, above a unix socket's default buffer, still arrives whole."""
    env = {f"WASHOUT_BIG{i}": str(i) * 100_000 for i in range(4)}
    command = 'printf "%s %s" "${#WASHOUT_BIG0}" "${#WASHOUT_BIG3}"'
    result, _ = fast(command, timeout=30, blocking=True, env=env)
    assert (result.status, result.stdout) == ("ok", b"100000 100000")


def test_output_tails_on_the_fast_path(ending: str) -> None:
    result, _ = fast(
        "head -c 300000 /dev/zero; printf end; head -c 2000 /dev/zero >&2",
        timeout=30,
        blocking=True,
        output_tail=1000,
    )
    assert result.status == "ok"
    assert len(result.stdout) == 1000 and result.stdout.endswith(b"\0end")
    assert result.stdout_cut and len(result.stderr) == 2000 and not result.stderr_cut


def test_a_timeout_on_the_fast_path_kills_the_whole_group(tmp_path: Path, ending: str) -> None:
    """Shorter than the blocking wait and longer: both end at the timeout, group and all."""
    pids = tmp_path / "pids"
    for timeout in (0.05, 0.5):
        t0 = time.monotonic()
        result, _ = fast(
            f"trap '' TERM; sleep 300 & echo $! > {pids}; wait", timeout=timeout, blocking=True
        )
        assert time.monotonic() - t0 < timeout + local.KILL_GRACE + 5
        assert result.status == "timeout" and "process group killed" in result.reason
        assert gone(int(pids.read_text()))
        pids.unlink()


@pytest.mark.skipif(local.launcher_program()[0] is None, reason="no launcher here")
def test_a_launcher_killed_during_a_blocking_wait_loses_the_command(tmp_path: Path) -> None:
    """The launcher SIGKILLed while washout waits for it outside the event loop (from
    another thread: the loop's own is blocked): the command is ``lost``, its group
    killed, and the next command gets a new launcher."""
    pid_file = tmp_path / "pid"
    killed: list[int] = []

    def kill_its_launcher() -> None:
        killed.append(launcher_of(pid_file))
        os.kill(killed[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_its_launcher, daemon=True)
    killer.start()
    command = f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 60"
    lost, _ = fast(command, timeout=60, blocking=True)
    killer.join(10)
    assert Path(f"/proc/{killed[0]}").exists() is False or gone(killed[0])
    assert lost.status == "lost" and "launcher ended" in lost.reason
    assert gone(int(pid_file.read_text()))
    again, turned = fast("echo again", timeout=30, blocking=True)
    assert (again.status, again.stdout, turned) == ("ok", b"again\n", False)


SHORT_TRIALS = '[experiment]\nname = "short"\nruns = 5000\nseed = 3\n' + "".join(
    f'[[test]]\nname = "{name}"\ncommand = "true"\n' for name in "ab"
)
"""Two tests of `true`, 20,000 trials of a few milliseconds each: more than a test waits for."""


def statuses(db: Path) -> list[str]:
    return [s for (s,) in sqlite3.connect(db).execute("SELECT status FROM trial")]


def test_ctrl_c_stops_a_run_of_short_trials_at_a_slot_boundary(tmp_path: Path) -> None:
    """Trials of a few milliseconds, all on the fast path: the event loop gets a turn at
    least every BLOCKING_SECONDS, so Ctrl-C still stops at the next slot boundary (every
    trial kept ok, none running), and two stop at once."""
    for presses, kept in ((1, {"ok"}), (2, {"ok", "interrupted"})):
        db = tmp_path / f"s{presses}.db"
        proc = start("run", write_spec(tmp_path / "s.toml", SHORT_TRIALS), "--db", db, "--quiet")
        try:
            wait_for_trials(db, "status = 'ok'")
            t0 = time.monotonic()
            for _ in range(presses):
                proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
        finally:
            proc.kill()
            proc.wait()
        assert time.monotonic() - t0 < 5
        assert proc.returncode == 130 and f"washout resume {db}" in out
        found = statuses(db)
        assert set(found) <= kept and found.count("interrupted") <= 1
        assert 0 < len(found) < 20000


def test_ctrl_c_once_the_run_has_stopped_keeps_the_summary(tmp_path: Path) -> None:
    """The second of two presses may arrive after the engine has stopped at the first and
    put its handler away (on a busy machine, presses 10-50 ms apart did): it must not cut
    short what ran and the 'Resume with' line. Pressed again once the stop is in the
    store, and again after that, the summary is whole and the status 130."""
    db = tmp_path / "s.db"
    proc = start("run", write_spec(tmp_path / "s.toml", SHORT_TRIALS), "--db", db, "--quiet")
    try:
        wait_for_trials(db, "status = 'ok'")
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30  # polled closely: the window is tens of ms
        while (
            not sqlite3.connect(db).execute("SELECT 1 FROM event WHERE kind = 'stopped'").fetchone()
        ):
            assert time.monotonic() < deadline, "no stop recorded"
            time.sleep(0.001)
        for _ in range(5):
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
            time.sleep(0.005)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130 and f"Resume with: washout resume {db}" in out, (out, err)
    assert set(statuses(db)) == {"ok"}


PRESS_WHILE_REAPING = """
import os, signal, sys
from washout import cli
from washout.harness.executors import local

reap = local.end_local_processes

def pressed_then_reaped():
    os.kill(os.getpid(), signal.SIGINT)  # delivered at once: the process signals itself
    reap()

local.end_local_processes = pressed_then_reaped
sys.argv = ["washout", *sys.argv[1:]]
cli.console()
"""


def test_a_press_while_the_console_reaps_its_processes_keeps_the_status(tmp_path: Path) -> None:
    """The window the test above reaches by chance, made certain: Ctrl-C pressed as the
    console script reaps its launchers and group guard (after the command's status is
    decided) ends neither in a traceback nor in death by SIGINT."""
    out = console_quick_form(PRESS_WHILE_REAPING, tmp_path)
    assert out.returncode == 0 and "KeyboardInterrupt" not in out.stderr, out.stderr
    assert set(statuses(tmp_path / "q.db")) == {"ok"}


PRESS_AS_THE_LOOP_LETS_GO = """
import os, signal, sys
from asyncio import unix_events
from washout import cli

remove = unix_events._UnixSelectorEventLoop.remove_signal_handler

def pressed_then(self, sig):
    removed = remove(self, sig)  # SIGINT has Python's default handler now
    if sig == signal.SIGINT and removed:
        os.kill(os.getpid(), signal.SIGINT)  # delivered at once: the process signals itself
    return removed

unix_events._UnixSelectorEventLoop.remove_signal_handler = pressed_then
sys.argv = ["washout", *sys.argv[1:]]
cli.console()
"""


def test_a_press_as_the_engine_gives_back_its_handler_keeps_what_ran(tmp_path: Path) -> None:
    """The other window CI's run reached (status 130, nothing printed): Ctrl-C pressed
    between the event loop giving up SIGINT (which leaves Python's default handler) and
    the engine putting the CLI's back. The run has ended: what ran is printed and stored,
    and the press stops nothing more."""
    out = console_quick_form(PRESS_AS_THE_LOOP_LETS_GO, tmp_path)
    assert out.returncode == 0 and "Data: " in out.stdout, out.stdout + out.stderr
    assert set(statuses(tmp_path / "q.db")) == {"ok"}


def test_the_press_guard_changes_nothing_outside_the_main_thread() -> None:
    """The CLI's guard for presses after a stop, entered from another thread (where no
    handler can be set): the body runs and SIGINT keeps its handler."""
    from washout.cli.commands_run import _presses_after_a_stop_ignored

    before = signal.getsignal(signal.SIGINT)
    seen: list[object] = []

    def body() -> None:
        with _presses_after_a_stop_ignored(lambda: True):
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(10)
    assert seen == [before] and signal.getsignal(signal.SIGINT) is before


ASLEEP = """while [ ! -s "$1" ]; do sleep 0.01; done
read -r washout < "$1"
sleep 0.05
before=$(grep ctxt_switches /proc/$washout/status)
sleep 0.3
after=$(grep ctxt_switches /proc/$washout/status)
[ "$before" = "$after" ] || { echo "$before -> $after" >&2; exit 1; }
"""
"""A command that fails if washout's main thread was scheduled between 0.05 s and 0.35 s
into it (its context switches changed); washout's pid is in the file "$1"."""


@pytest.mark.parametrize("launcher", ["on", "off"])
def test_washout_does_no_work_during_a_local_trial(tmp_path: Path, launcher: str) -> None:
    """Washout sleeps until its command ends: no wake-up of the blocking wait at a fixed
    time (0.1 s, before) and no fold of the trial journal during the trial (a fold before a
    trial shows it running instead), in the test's first trial and in its later ones."""
    (tmp_path / "asleep.sh").write_text(ASLEEP)
    spec = write_spec(
        tmp_path / "a.toml",
        '[experiment]\nruns = 3\norders = ["fixed"]\n'
        f'[[test]]\nname = "a"\ncommand = "sh {tmp_path}/asleep.sh {tmp_path}/pid"\n',
    )
    db = tmp_path / "a.db"
    proc = start(
        "run", spec, "--db", db, "--quiet", env={**os.environ, "WASHOUT_LAUNCHER": launcher}
    )
    (tmp_path / "pid").write_text(str(proc.pid))
    _, err = proc.communicate(timeout=60)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, stderr_tail FROM trial").fetchall()
    assert rows == [("ok", "")] * 3, (rows, err)


def test_a_long_trial_is_shown_running_though_nothing_folds_during_it(tmp_path: Path) -> None:
    """A trial of a test whose trials ran 0.1 s or longer is folded into the store before it
    starts (there is no fold during it any more), also right after a short trial, whose
    fold is not due: a reader sees it ``running`` while it runs."""
    go = tmp_path / "go"
    slow = (
        f"echo x >> {tmp_path}/log; [ $(wc -l < {tmp_path}/log) -lt 2 ] || "
        f"while [ ! -e {go} ]; do sleep 0.05; done; sleep 0.15"
    )
    spec = write_spec(
        tmp_path / "s.toml",
        '[experiment]\nruns = 2\norders = ["fixed"]\n[[test]]\nname = "quick"\n'
        f'command = "true"\n[[test]]\nname = "slow"\ncommand = "{slow}"\n',
    )
    db = tmp_path / "s.db"
    proc = start("run", spec, "--db", db, "--quiet")
    try:
        wait_for_trials(db, "status = 'running' AND test = 'slow' AND id = 4", timeout=30)
        assert statuses(db) == ["ok", "ok", "ok", "running"]
    finally:
        go.touch()
        proc.communicate(timeout=60)
    assert statuses(db) == ["ok"] * 4


def _signal_handled_after(send: Callable[[], None]) -> tuple[float, CommandResult]:
    """Seconds from just before a blocking trial of ``sleep 1.5`` until the loop's handler
    of SIGUSR1 ran (``send`` sends it), and the trial's result."""

    async def go() -> tuple[float, CommandResult]:
        loop = asyncio.get_running_loop()
        handled = loop.create_future()
        loop.add_signal_handler(signal.SIGUSR1, lambda: handled.set_result(time.monotonic()))
        executor = LocalExecutor()
        t0 = time.monotonic()
        send()
        try:
            result = await executor.run("sleep 1.5", CommandOptions(timeout=30, blocking=True))
            return await asyncio.wait_for(handled, 5) - t0, result
        finally:
            loop.remove_signal_handler(signal.SIGUSR1)
            await executor.close()

    return asyncio.run(go())


def test_a_signal_during_a_blocking_wait_reaches_the_loop_at_once() -> None:
    """The loop's signal handlers (Ctrl-C, SIGTERM) run as the signal comes, while the
    command goes on: the blocking wait hands the rest to the loop, and the signal on."""
    after, result = _signal_handled_after(
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start
    )
    assert after < 1.0 and result.status == "ok" and result.duration >= 1.5


def test_a_signal_that_came_between_two_trials_is_handled_during_the_next() -> None:
    """A signal that came while no blocking wait watched it (between two trials, before the
    loop turned again) is handled as the next trial starts, not after it: a Ctrl-C
    between two trials of 0.5 s was seen only after the second, and the run went on."""
    after, result = _signal_handled_after(lambda: os.kill(os.getpid(), signal.SIGUSR1))
    assert after < 1.0 and result.status == "ok" and result.duration >= 1.5
