"""Per-trial health, read around real trials, locally (in washout's process) and on a real
SSH worker (by its runner): throttle counts, swap, other processes' CPU time, cpufreq and
APERF/MPERF from a tree laid out as the kernel lays out /proc, /sys and /dev (this VM has
none of that hardware), the kernel log from the real ``/dev/kmsg``, involuntary switches
and migrations of real processes; a measure that cannot be read is absent, never 0; and
the values are stored as the trial's ``health.*`` metrics, out of the long format."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import wait_for, washout
from machine_tree import CPU, lay_out
from sshd import SshdFarm, run_async, sshd_farm  # noqa: F401 (fixture)

from washout.data.health import (
    APERF_MPERF,
    BUSY_FIELDS,
    CPUFREQ_MHZ,
    HEALTH_METRICS,
    HEALTH_PREFIX,
    INVOLUNTARY_SWITCHES,
    KERNEL_LOG,
    MIGRATIONS,
    OTHER_CPU,
    SWAP_IN,
    SWAP_OUT,
    THROTTLES,
    Reading,
    busy_ticks,
    health_values,
    swap_pages,
)
from washout.harness.executors.base import CommandOptions, CommandResult, Executor
from washout.harness.executors.local import LocalExecutor
from washout.harness.executors.ssh import SSHExecutor
from washout.harness.metrics.health import (
    IA32_APERF,
    IA32_MPERF,
    LocalHealth,
    marker_reading,
)

TREE_CPUS = max(4, max(os.sched_getaffinity(0)) + 1)
"""CPUs of the laid-out tree: every CPU an unpinned trial here may use has its files."""
ROOT_USER = os.geteuid() == 0


def stat_text(busy: dict[int, int]) -> str:
    """A /proc/stat whose CPUs were busy ``busy[n]`` ticks (all user time), idle 1000."""
    total = sum(busy.values())
    lines = [f"cpu  {total} 0 0 {1000 * len(busy)} 0 0 0 0 0 0"]
    lines += [f"cpu{n} {ticks} 0 0 1000 0 0 0 0 0 0" for n, ticks in sorted(busy.items())]
    return "\n".join([*lines, "intr 12345 0 0", "ctxt 999", "btime 1700000000"])


def vmstat_text(swap_in: int, swap_out: int) -> str:
    return f"nr_free_pages 1000\npgpgin 5\npswpin {swap_in}\npswpout {swap_out}\npgfault 7"


def msr_file(path: Path, aperf: int, mperf_low: int) -> None:
    """A /dev/cpu/N/msr stand-in: the real device reads the 8-byte register whose number
    is the offset, but in a regular file the two registers' bytes overlap (IA32_MPERF is
    0xE7, IA32_APERF 0xE8), so the file holds APERF at 0xE8 and one more byte at 0xE7:
    read at 0xE7, MPERF is that byte plus 256 x APERF (:func:`mperf`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.seek(IA32_MPERF)
        f.write(bytes([mperf_low]))
        f.seek(IA32_APERF)
        f.write(aperf.to_bytes(8, "little"))


def mperf(aperf: int, mperf_low: int) -> int:
    """What a read of :func:`msr_file`'s file at IA32_MPERF gives."""
    return mperf_low + 256 * aperf


def health_tree(root: Path, msr: bool = True) -> Path:
    """The default machine tree with the counters health reads, at their "before" values."""
    lay_out(
        root,
        {
            "proc/stat": stat_text({n: 100 for n in range(TREE_CPUS)}),
            "proc/vmstat": vmstat_text(10, 20),
            **{f"{CPU}/cpu{n}/cpufreq/scaling_cur_freq": "2000000" for n in range(TREE_CPUS)},
        },
        TREE_CPUS,
    )
    if msr:
        for n in range(TREE_CPUS):
            msr_file(root / f"dev/cpu/{n}/msr", 1000, 0)
    return root


def disturbing(root: Path, staged: Path) -> str:
    """A trial that, while it runs, moves the tree's counters as a disturbed machine
    would: 150 ticks of CPU 0 and 50 of CPU 1 busy, CPU 1 throttled 3 times (core) and
    once (package), 4 pages swapped in and 6 out, every CPU at 3 GHz, and APERF of CPUs 0
    and 1 advanced by 900 (:data:`RATIO`)."""
    staged.mkdir()
    (staged / "stat").write_text(stat_text({n: 100 for n in range(TREE_CPUS)} | {0: 250, 1: 150}))
    (staged / "vmstat").write_text(vmstat_text(14, 26))
    for n in range(2):
        msr_file(staged / f"msr{n}", 1900, 100)
    copies = {
        staged / "stat": root / "proc/stat",
        staged / "vmstat": root / "proc/vmstat",
        staged / "msr0": root / "dev/cpu/0/msr",
        staged / "msr1": root / "dev/cpu/1/msr",
    }
    steps = [f"cp {shlex.quote(str(a))} {shlex.quote(str(b))}" for a, b in copies.items()]
    cpu1 = root / CPU / "cpu1" / "thermal_throttle"
    steps += [
        f"echo 3 > {shlex.quote(str(cpu1 / 'core_throttle_count'))}",
        f"echo 1 > {shlex.quote(str(cpu1 / 'package_throttle_count'))}",
    ]
    steps += [
        f"echo 3000000 > {shlex.quote(str(root / CPU / f'cpu{n}/cpufreq/scaling_cur_freq'))}"
        for n in range(TREE_CPUS)
    ]
    return " && ".join(steps)


async def _run(ex: Executor, command: str, options: CommandOptions) -> CommandResult:
    await ex.connect()
    try:
        return await ex.run(command, options)
    finally:
        await ex.close()


def ssh_executor(farm: SshdFarm) -> SSHExecutor:
    (server,) = farm.start(1)
    return SSHExecutor(server.worker_spec(farm.known_hosts))


def check_disturbed(result: CommandResult, local: bool) -> None:
    assert result.status == "ok", result.reason
    health = result.health
    assert health[THROTTLES] == 4.0
    assert (health[SWAP_IN], health[SWAP_OUT]) == (4.0, 6.0)
    assert health[CPUFREQ_MHZ] == 2500.0  # (2 GHz before + 3 GHz after) / 2
    own = result.resources["user"] + result.resources["system"]
    assert health[OTHER_CPU] == pytest.approx(2.0 - own, abs=1e-9)  # 200 ticks
    if local:  # the trial's CPUs' APERF/MPERF (those of CPUs other than 0 and 1 unchanged)
        assert health[APERF_MPERF] == pytest.approx(RATIO)
    else:  # a shell cannot read a binary register file without a process per CPU
        assert APERF_MPERF not in health
    assert KERNEL_LOG not in health  # a tree has no kernel log: absent, not 0


RATIO = (2 * 900) / (2 * (mperf(1900, 100) - mperf(1000, 0)))
"""APERF/MPERF over CPUs 0 and 1 of :func:`disturbing`'s trial."""


def test_local_trial_reads_the_tree_before_and_after(tmp_path: Path) -> None:
    root = health_tree(tmp_path / "tree")
    command = disturbing(root, tmp_path / "staged")
    result = run_async(_run(LocalExecutor(), command, CommandOptions(timeout=60, health=str(root))))
    check_disturbed(result, local=True)
    assert result.health[MIGRATIONS] >= 0  # the real process's, read before it was reaped
    assert result.health[INVOLUNTARY_SWITCHES] >= 0


@pytest.mark.ssh
def test_ssh_trial_reads_the_tree_before_and_after(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    root = health_tree(tmp_path / "tree")
    command = disturbing(root, tmp_path / "staged")
    ex = ssh_executor(sshd_farm)
    result = run_async(_run(ex, command, CommandOptions(timeout=60, health=str(root))))
    check_disturbed(result, local=False)
    assert MIGRATIONS not in result.health  # timeout(1)'s child, reaped by it
    assert result.health[INVOLUNTARY_SWITCHES] >= 0  # GNU time's %c


def test_pinned_trials_read_their_own_cpus(tmp_path: Path) -> None:
    """Pinned to CPU 1: CPU 0's 150 busy ticks and APERF/MPERF are not the trial's."""
    root = health_tree(tmp_path / "tree")
    command = disturbing(root, tmp_path / "staged")
    result = run_async(
        _run(LocalExecutor(), command, CommandOptions(timeout=60, cpus="1", health=str(root)))
    )
    assert result.status == "ok", result.reason
    own = result.resources["user"] + result.resources["system"]
    assert result.health[OTHER_CPU] == pytest.approx(max(0.0, 0.5 - own), abs=1e-9)
    assert result.health[THROTTLES] == 4.0
    assert result.health[APERF_MPERF] == pytest.approx(900 / (mperf(1900, 100) - mperf(1000, 0)))


@pytest.mark.parametrize("side", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_what_a_machine_lacks_is_absent_never_zero(
    side: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A tree without thermal_throttle, cpufreq, msr, /proc/stat or /proc/vmstat (a VM,
    or a kernel that hides them): each measure is left out."""
    root = tmp_path / "bare"
    (root / "proc").mkdir(parents=True)
    ex: Executor = (
        LocalExecutor() if side == "local" else ssh_executor(request.getfixturevalue("sshd_farm"))
    )
    result = run_async(_run(ex, "true", CommandOptions(timeout=60, health=str(root))))
    assert result.status == "ok", result.reason
    assert set(result.health) <= {INVOLUNTARY_SWITCHES, MIGRATIONS}
    if side == "local":  # wait4 always has them
        assert INVOLUNTARY_SWITCHES in result.health


@pytest.mark.skipif(not ROOT_USER, reason="writing the kernel log needs root")
@pytest.mark.parametrize("side", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_new_kernel_log_lines_are_counted_for_their_trial(
    side: str, request: pytest.FixtureRequest
) -> None:
    """Three trials on one executor: only the middle one writes two kernel log records;
    the line the trial before it wrote is not counted for it."""

    async def go(ex: Executor) -> list[CommandResult]:
        await ex.connect()
        options = CommandOptions(timeout=60, health="/")
        try:
            return [
                await ex.run("echo washout-health-test before > /dev/kmsg", options),
                await ex.run(
                    "echo washout-health-test one > /dev/kmsg; "
                    "echo washout-health-test two > /dev/kmsg",
                    options,
                ),
                await ex.run("true", options),
            ]
        finally:
            await ex.close()

    ex: Executor = (
        LocalExecutor() if side == "local" else ssh_executor(request.getfixturevalue("sshd_farm"))
    )
    results = run_async(go(ex))
    assert [r.health[KERNEL_LOG] for r in results[1:]] == [2.0, 0.0]


def test_a_competing_process_shows_as_other_cpu_time_and_involuntary_switches() -> None:
    """A busy loop outside the trial, pinned to the trial's CPU for the whole trial, takes
    about half of that CPU: its time is the CPU's "other" time, and the trial is switched
    out involuntarily."""
    trial = (
        f'{sys.executable} -c "import time; t = time.process_time(); '
        "exec('while time.process_time() - t < 0.4: pass')\""
    )
    burner = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, "-c", "while True: pass"], start_new_session=True
    )
    try:
        # spinning before the trial starts (a Python starting on a loaded machine may take
        # longer than the trial), in a session of its own as the trial is: the kernel's
        # autogroups share a CPU between sessions, and a pytest-xdist worker's session
        # gave the loop less than its half (other CPU time 0.17-0.20 s, 3 runs of 3)
        wait_for(lambda: psutil.Process(burner.pid).cpu_times().user > 0.1, 30)
        result = run_async(
            _run(LocalExecutor(), trial, CommandOptions(timeout=60, cpus="0", health="/"))
        )
    finally:
        burner.kill()
        burner.wait()
    assert result.status == "ok", result.reason
    assert result.health[OTHER_CPU] >= 0.25  # the loop's share (and any other load here)
    assert result.health[INVOLUNTARY_SWITCHES] >= 10


def test_health_values_from_readings() -> None:
    before = Reading(busy=1000, throttles=2, swap=(5, 6), cpufreq_khz=2e6, msr=(10, 20))
    after = Reading(busy=1100, throttles=2, swap=(5, 9), cpufreq_khz=3e6, msr=(60, 120))
    got = health_values(
        dataclasses.replace(before, kernel_log=7),
        dataclasses.replace(after, kernel_log=1),
        own_cpu=0.25,
        tick=0.01,
    )
    assert got == {
        OTHER_CPU: pytest.approx(0.75),
        THROTTLES: 0.0,
        SWAP_IN: 0.0,
        SWAP_OUT: 3.0,
        KERNEL_LOG: 1.0,  # the records since the reading before: the trial's
        APERF_MPERF: 0.5,
        CPUFREQ_MHZ: 2500.0,
    }
    # Unknown own time, a counter that went back (a reset), no MPERF progress: absent.
    odd = health_values(
        before, Reading(busy=1200, throttles=1, msr=(10, 20)), own_cpu=None, tick=0.01
    )
    assert odd == {}
    assert health_values(Reading(), Reading(), own_cpu=1.0, tick=0.01) == {}


def test_parsers_of_proc_files() -> None:
    text = stat_text({0: 7, 1: 9, 2: 100}).encode()
    assert busy_ticks(text, {0, 1}) == 16
    assert busy_ticks(text, {5}) is None  # a CPU without a line: unknown, not 0
    assert swap_pages(vmstat_text(3, 4).encode()) == (3, 4)
    assert swap_pages(b"pswpin 1\npswpout 2\n") == (1, 2)
    assert swap_pages(b"pswpin 1\npswpout 2") == (1, 2)
    assert swap_pages(b"nr_free_pages 1\n") is None
    assert marker_reading(b"10 - 1 2 6000 3 3 0".split()) == Reading(
        busy=10, throttles=None, swap=(1, 2), cpufreq_khz=2000.0, kernel_log=0
    )
    # cpufreq read on 2 of the 3 CPUs: no mean of some of them
    assert marker_reading(b"10 - - - 4000 2 3 -".split()) == Reading(busy=10)
    assert marker_reading(b"1 2 3".split()) is None


def plain_busy(text: str, cpus: set[int]) -> int | None:
    """``cpus``' busy ticks from ``/proc/stat`` the plain way: every line split, the CPUs'
    fields summed (proc(5))."""
    lines = {(words := line.split())[0]: words[1:] for line in text.splitlines() if line}
    if any(f"cpu{n}" not in lines for n in cpus):
        return None
    return sum(int(lines[f"cpu{n}"][i]) for n in cpus for i in BUSY_FIELDS)


def plain_reading(root: Path, cpus: set[int]) -> Reading:
    """What a reading of the tree under ``root`` holds, from each file read the plain way
    (whole, as text), for :func:`test_a_reading_is_what_a_plain_parse_of_its_files_gives`."""
    vmstat = dict(line.split() for line in (root / "proc/vmstat").read_text().splitlines())
    cpu_dirs = [root / CPU / f"cpu{n}" for n in sorted(cpus)]
    freqs = [int((d / "cpufreq/scaling_cur_freq").read_text()) for d in cpu_dirs]
    throttles = [
        int(f.read_text()) for d in cpu_dirs for f in sorted(d.glob("thermal_throttle/*_count"))
    ]
    msrs = [(root / f"dev/cpu/{n}/msr").read_bytes() for n in sorted(cpus)]
    return Reading(
        busy=plain_busy((root / "proc/stat").read_text(), cpus),
        throttles=sum(throttles) if throttles else None,
        swap=(int(vmstat["pswpin"]), int(vmstat["pswpout"])),
        cpufreq_khz=sum(freqs) / len(freqs),
        msr=(
            sum(int.from_bytes(m[IA32_APERF : IA32_APERF + 8], "little") for m in msrs),
            sum(int.from_bytes(m[IA32_MPERF : IA32_MPERF + 8], "little") for m in msrs),
        ),
    )


def test_a_reading_is_what_a_plain_parse_of_its_files_gives(tmp_path: Path) -> None:
    """A reading (each file held open and read again with pread, each CPU's line of
    /proc/stat found by its name and its busy ticks cached by the line's bytes) gives what
    reading every file whole and splitting it gives, before and after the files change
    (nothing stale), pinned or not; on this machine's own /proc/stat, a value between
    a plain parse just before and one just after."""
    root = health_tree(tmp_path / "tree")
    reader = LocalHealth(str(root))
    every = set(range(TREE_CPUS))
    try:
        for cpus in (every, {1}, {0, 2}):
            assert reader.reading(cpus) == plain_reading(root, cpus)
        subprocess.run(disturbing(root, tmp_path / "staged"), shell=True, check=True)
        for cpus in (every, {1}, {0, 2}):
            assert reader.reading(cpus) == plain_reading(root, cpus)
    finally:
        reader.close()
    here = LocalHealth("/")
    try:
        cpus = os.sched_getaffinity(0)
        for _ in range(50):
            before = plain_busy(Path("/proc/stat").read_text(), cpus)
            busy = here.reading(cpus).busy
            after = plain_busy(Path("/proc/stat").read_text(), cpus)
            assert before is not None and after is not None and busy is not None
            assert before <= busy <= after
    finally:
        here.close()


def test_busy_ticks_of_old_and_odd_lines() -> None:
    """A kernel before steal time (2.6.11) has fewer fields: those it has are summed; a
    line that is not numbers is unknown; a file starting with the CPU's line is read."""
    assert busy_ticks(b"cpu  9 9 9 9 9 9\ncpu0 1 2 3 4 5 6\n", {0}) == 1 + 2 + 3 + 6
    assert busy_ticks(b"cpu0 1 2 3 4 5 6 7 8 9 10", {0}) == 1 + 2 + 3 + 6 + 7 + 8
    assert busy_ticks(b"cpu0 1 x 3 4 5 6 7 8\n", {0}) is None
    assert busy_ticks(b"cpu10 1 1 1 1 1 1 1 1\n", {1}) is None  # cpu1 is not cpu10


def test_vmstat_is_read_only_where_a_swap_device_is_or_was_listed(tmp_path: Path) -> None:
    """/proc/vmstat costs half a reading: with /proc/swaps listing no device (now and at
    the last reading) the swap counters stand; a device listed, or one just gone (its
    swapoff swaps pages in), and they are read; without /proc/swaps, always."""
    root = health_tree(tmp_path / "m", msr=False)  # /proc/swaps lists a device
    swaps, vmstat = root / "proc/swaps", root / "proc/vmstat"
    header = swaps.read_text().splitlines(keepends=True)[0]
    device = swaps.read_text().splitlines(keepends=True)[1]
    reader = LocalHealth(str(root))
    seen = [reader.reading({0}).swap]  # a device: read
    for swap_in, listed in ((11, header), (12, header), (13, header + device), (14, header)):
        vmstat.write_text(vmstat_text(swap_in, swap_in + 10))
        swaps.write_text(listed)
        seen.append(reader.reading({0}).swap)
    reader.close()
    # none listed now nor at the last reading: the 12 is not read
    assert seen == [(10, 20), (11, 21), (11, 21), (13, 23), (14, 24)]
    swaps.unlink()
    reader = LocalHealth(str(root))
    for swap_in in (15, 16):
        vmstat.write_text(vmstat_text(swap_in, swap_in + 10))
        assert reader.reading({0}).swap == (swap_in, swap_in + 10)
    reader.close()


def spec_text(root: Path, command: str, health: bool = True) -> str:
    return f"""
[experiment]
runs = 1
orders = ["fixed"]
health = {json.dumps(health)}
health_root = {json.dumps(str(root))}
[[test]]
name = "disturbed"
command = {json.dumps(command)}
[[test]]
name = "quiet"
command = "true"
[[test]]
name = "own"
command = "echo 5"
[test.metrics."health.throttles"]
stdout = "last-number"
"""


def stored(db: Path) -> dict[tuple[str, str], float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT t.test, m.name, m.value FROM metric m JOIN trial t ON t.id = m.trial_id"
        ).fetchall()
    return {(test, name): value for test, name, value in rows}


def test_a_run_stores_health_metrics_out_of_the_long_format(tmp_path: Path) -> None:
    root = health_tree(tmp_path / "tree")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(root, disturbing(root, tmp_path / "staged")))
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    values = stored(db)
    assert values[("disturbed", THROTTLES)] == 4.0
    assert values[("disturbed", SWAP_OUT)] == 6.0
    assert values[("quiet", THROTTLES)] == 0.0  # read, and nothing happened
    assert ("quiet", KERNEL_LOG) not in values  # a tree: absent
    assert values[("own", THROTTLES)] == 5.0  # the test's own metric of that name wins
    assert {name for _, name in values} <= {"wall", "user", "system", "max_rss", *HEALTH_METRICS}
    washout("export", db, "-o", tmp_path / "long.csv")
    with open(tmp_path / "long.csv") as f:
        exported = [row for row in csv.DictReader(f) if row["metric"].startswith(HEALTH_PREFIX)]
    # Every measure taken is exported with its trial (so a CSV can be judged as a store),
    # none that was not: no empty value stands for an absent measure.
    assert {(r["test"], r["metric"]) for r in exported} == {
        key for key in values if key[1].startswith(HEALTH_PREFIX)
    }
    assert all(r["value"] != "" for r in exported)
    assert ("quiet", KERNEL_LOG) not in {(r["test"], r["metric"]) for r in exported}
    analysed = json.loads(washout("analyze", tmp_path / "long.csv", "--format", "json").stdout)
    assert analysed["comparison"]["metric"] == "wall"  # out of the analyses unless named
    assert "health." not in json.dumps(analysed["comparison"])
    named = washout("analyze", tmp_path / "long.csv", "--format", "json", "--metric", SWAP_OUT)
    assert json.loads(named.stdout)["comparison"]["metric"] == SWAP_OUT


def test_health_false_reads_nothing(tmp_path: Path) -> None:
    root = health_tree(tmp_path / "tree")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(root, "true", health=False))
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    health = {key for key in stored(db) if key[1].startswith(HEALTH_PREFIX)}
    assert health == {("own", THROTTLES)}  # the test's own metric, not a health reading


def test_a_relative_health_root_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text('[experiment]\nhealth_root = "tree"\n[[test]]\nname = "t"\ncommand = "true"\n')
    out = washout("validate", spec, check=False)
    assert out.returncode != 0
    assert "experiment.health_root" in out.stderr and "absolute path" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.ssh
def test_ssh_readings_are_outside_the_timed_window(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    """A /proc/stat that takes 0.4 s to answer each read (a FIFO fed late): the trial of
    `true` still measures milliseconds, the readings' time is the trial's overhead. The
    FIFO answers with the first line only: an unpinned trial's reading reads no more, and
    lines it left in the pipe would be the next reader's first line when the feeder's next
    open comes before that reader's close."""
    root = health_tree(tmp_path / "tree", msr=False)
    fifo = root / "proc" / "stat"
    fifo.unlink()
    os.mkfifo(fifo)
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            try:
                with open(fifo, "w") as f:  # until a reader opens it
                    time.sleep(0.4)
                    first = stat_text({n: 100 for n in range(TREE_CPUS)}).splitlines()[0]
                    f.write(first + "\n")
            except BrokenPipeError:  # a reader that took its first line and left
                pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    ex = ssh_executor(sshd_farm)
    try:
        began = time.monotonic()
        result = run_async(_run(ex, "true", CommandOptions(timeout=60, health=str(root))))
        took = time.monotonic() - began
    finally:
        stop.set()
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # a feeder waiting: let it go
        feeder.join(5)
    assert result.status == "ok", result.reason
    assert took >= 0.8  # the readings before and after it, each 0.4 s or more
    assert result.duration < 0.3
    assert result.health[OTHER_CPU] >= 0  # read, late


def test_a_fifo_where_a_counter_should_be_is_not_read(tmp_path: Path) -> None:
    """Locally a FIFO is opened without blocking and left out: nothing waits for it."""
    root = health_tree(tmp_path / "tree", msr=False)
    (root / "proc" / "stat").unlink()
    os.mkfifo(root / "proc" / "stat")
    result = run_async(_run(LocalExecutor(), "true", CommandOptions(timeout=60, health=str(root))))
    assert result.status == "ok", result.reason
    assert OTHER_CPU not in result.health and SWAP_IN in result.health
