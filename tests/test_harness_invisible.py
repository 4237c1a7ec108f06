"""washout makes no order effect of its own: what it does around a trial does not depend on
the trial's position in its run (the full-size benchmark is bench/position_zero.py).

Real runs of the CLI on this machine: a probe on PATH named ``true`` reads the controller's
on-CPU time (/proc/PPID/schedstat) when it starts and when it ends, so the controller's work
between the end of one process on the worker and the start of the next trial is measured
for every trial; and identical no-op tests must show the same wall at every position.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
from conftest import washout
from sshd import SshdFarm, run_async, sshd_farm  # noqa: F401 (fixture)

from washout.data.store import Store
from washout.harness.environment import MOMENT_FILES, moment_script, parse_capture, read_moment
from washout.harness.executors.base import CommandOptions
from washout.harness.executors.local import LocalExecutor
from washout.harness.spec import ProvenanceSpec

PROBE = """#!/bin/sh
read -r ns rest < /proc/$PPID/schedstat
echo "start $ns $1" >> "$PROBE_LOG"
read -r ns rest < /proc/$PPID/schedstat
echo "end $ns" >> "$PROBE_LOG"
"""
"""``true`` that logs the controller's on-CPU nanoseconds at its start (with its first
argument: the test's name) and at its end."""


def spec(path: Path, runs: int, command: str = "true {name}") -> Path:
    lines = ["[experiment]", 'name = "invisible"', f"runs = {runs}", "seed = 14"]
    for name in ("t0", "t1", "t2"):
        lines += ["[[test]]", f'name = "{name}"', f'command = "{command.format(name=name)}"']
    path.write_text("\n".join(lines) + "\n")
    return path


def by_run(db: Path) -> list[dict[int, float]]:
    """Per run, in the order the runs and trials ran, {position: value}; the value is each
    trial's wall (every trial ok)."""
    store = Store.open(db)
    try:
        frame = store.long_frame()
    finally:
        store.close()
    frame = frame[frame["metric"] == "wall"]  # one worker: run, position order = as they ran
    assert (frame["status"] == "ok").all()
    runs: dict[int, dict[int, float]] = {}
    for run, position, wall in zip(frame["run"], frame["position"], frame["value"]):
        runs.setdefault(int(run), {})[int(position)] = float(wall)
    return list(runs.values())


def realtime() -> dict[str, object]:
    """Run washout under SCHED_FIFO where this user may (root, CAP_SYS_NICE), so the other
    processes of a shared machine cannot preempt its trials; otherwise as it is."""
    probe = subprocess.run(["chrt", "-f", "1", "true"], capture_output=True)
    if probe.returncode != 0:
        return {}
    return {"preexec_fn": lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))}


def test_the_controller_does_the_same_work_before_every_position(tmp_path: Path) -> None:
    """The controller's CPU between the end of the last process on the worker and the start
    of a trial is the same at position 0 (after the run's environment check, records and
    reset) as between two trials: nothing washout does per run falls right before trial 0.
    (Before, the run's environment capture, a shell script, and four commits came between
    the previous run's last trial and trial 0: three times the CPU of a later gap.)"""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "true").write_text(PROBE)
    (bin_dir / "true").chmod(0o755)
    log = tmp_path / "probe.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PROBE_LOG": str(log)}
    db = tmp_path / "p.db"
    washout("run", spec(tmp_path / "p.toml", runs=15), "--db", db, "--quiet", env=env)

    gaps: list[float | None] = []  # per trial, in the order they ran
    last_end = None
    for kind, ns, *name in (line.split() for line in log.read_text().splitlines()):
        if kind == "end":
            last_end = int(ns)
        elif name:  # a trial
            gaps.append(None if last_end is None else int(ns) - last_end)
    positions = [p for run in by_run(db) for p in run]  # as the trials ran
    assert len(positions) == len(gaps)
    first = statistics.median(g for g, p in zip(gaps, positions) if p == 0 and g is not None)
    later = statistics.median(g for g, p in zip(gaps, positions) if p > 0 and g is not None)
    assert first <= 1.5 * later, (first, later)


def test_identical_no_op_tests_show_no_order_effect(tmp_path: Path) -> None:
    """Three identical `true` tests, 40 runs per order: position 0's wall within 5% of the
    later positions' in the same run (the median over runs of the ratio: trials of one run
    share the machine's moment, so other load cancels), and `washout analyze` finds no test
    significant. alpha = 0.01: with no effect at all the family still comes out significant
    in alpha of the experiments, and a guard must not fail one run in twenty."""
    db = tmp_path / "n.db"
    washout(
        "run",
        spec(tmp_path / "n.toml", runs=40, command="true"),
        "--db",
        db,
        "--quiet",
        **realtime(),
    )
    runs = by_run(db)
    ratio = statistics.median(run[0] / statistics.mean((run[1], run[2])) for run in runs)
    assert abs(ratio - 1) <= 0.05, runs
    result = json.loads(washout("analyze", db, "--format", "json", "--alpha", "0.01").stdout)[
        "order"
    ]
    assert [r["test"] for r in result["tests"] if r["significant"]] == []


WATCHED = """
[experiment]
name = "watched"
runs = 3
seed = 2
[provenance]
files = ["server"]
commands = ["echo once >> calls; cat version"]
[[test]]
name = "rebuild-midway"
command = "if [ $(wc -l < log) -eq 3 ]; then echo v2 > server; fi; echo x >> log"
[[test]]
name = "other"
command = "true"
"""


@pytest.mark.parametrize("where", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_whole_capture_once_per_session_and_again_when_a_file_changes(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Before each run only the moment and the provenance files' signatures are read: the
    provenance command runs at the session's start and again only after the file changed
    (its hash then refused, or recorded with --allow-mismatch), not before each of the six
    runs; every run still records its environment, with the new hash after the change."""
    workdir = tmp_path / "wd"
    workdir.mkdir()
    for name, text in (("server", "v1\n"), ("version", "1.0\n"), ("log", "")):
        (workdir / name).write_text(text)
    text = WATCHED
    if where == "ssh":
        farm = request.getfixturevalue("sshd_farm")
        (server,) = farm.start(1)
        text += server.worker_toml("w", farm.known_hosts, workdir)
    spec = tmp_path / "w.toml"
    spec.write_text(text)
    db = tmp_path / "w.db"
    washout("run", spec, "--db", db, "--quiet", "--allow-mismatch", cwd=workdir)

    assert (workdir / "calls").read_text() == "once\n" * 2
    store = Store.open(db)
    try:
        captures = store.environments()
        events = [message for _, _, kind, message in store.events() if kind == "mismatch"]
    finally:
        store.close()
    per_run = [c for c in captures if c["run_index"] is not None]
    assert [c["run_index"] for c in per_run] == list(range(6))
    new = hashlib.sha256(b"v2\n").hexdigest()
    changed = [c["run_index"] for c in per_run if c["data"]["file:server"] == new]
    assert changed and changed == list(range(changed[0], 6))
    assert len(events) == len(changed) and "file:server differs" in events[0]
    assert all(c["data"]["load"] and c["data"]["boot_id"] for c in per_run)
    assert all(c["data"]["command:echo once >> calls; cat version"] == "1.0" for c in per_run)


def test_the_moment_reads_the_same_facts_in_process_as_by_script(tmp_path: Path) -> None:
    """Locally the moment is read in-process; over SSH the same facts come from a shell
    script: both give the same keys and the same values for what cannot move meanwhile."""
    (tmp_path / "present").write_text("x")
    provenance = ProvenanceSpec(files=["present", "absent"])
    in_process = read_moment(provenance, str(tmp_path))
    result = run_async(
        LocalExecutor().run(
            moment_script(provenance), CommandOptions(timeout=30, cwd=str(tmp_path))
        )
    )
    by_script = parse_capture(result.stdout.decode())
    assert set(in_process) == set(by_script) == {*MOMENT_FILES, "stat:present", "stat:absent"}
    for key in ("boot_id", "governor"):
        assert in_process[key] == by_script[key]
    assert len(in_process["load"].split()) == len(by_script["load"].split()) == 3
    assert in_process["stat:absent"] == by_script["stat:absent"] == ""
    assert in_process["stat:present"] and by_script["stat:present"]


@pytest.mark.ssh
def test_over_ssh_the_check_before_a_run_runs_no_command_of_its_own(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """Without provenance files an SSH worker's check before a run takes the moment's facts
    the runner read after the last command (the previous run's last trial): the worker
    runs the connection's check of ``timeout``, the session's capture (two commands) and
    the trials, nothing else (each runs ``timeout``, here a wrapper that counts them), and
    every run records the same facts as read here, fresh (the uptime moves on from run to
    run: each run takes over 0.1 s)."""
    (server,) = sshd_farm.start(1)
    tools, log = tmp_path / "tools", tmp_path / "timeouts"
    tools.mkdir()
    wrapper = tools / "timeout"
    wrapper.write_text(f'#!/bin/sh\necho x >> {log}\nexec {shutil.which("timeout")} "$@"\n')
    wrapper.chmod(0o755)
    server.stop()
    server.config.write_text(
        server.config.read_text().replace(
            "SetEnv SHLVL=1", f"SetEnv SHLVL=1 PATH={tools}:{os.environ['PATH']}"
        )
    )
    server.start()
    spec = tmp_path / "m.toml"
    text = WATCHED.split("[provenance]")[0].replace("watched", "moment")
    for name in ("a", "b"):
        text += f'[[test]]\nname = "{name}"\ncommand = "sleep 0.06"\n'
    spec.write_text(text + server.worker_toml("w", sshd_farm.known_hosts))
    db = tmp_path / "m.db"
    washout("run", spec, "--db", db, "--quiet")
    store = Store.open(db)
    try:
        per_run = [c["data"] for c in store.environments() if c["run_index"] is not None]
        trials = len(store.long_frame())
    finally:
        store.close()
    assert (len(per_run), trials) == (6, 12)
    assert len(log.read_text().split()) == 1 + 2 + trials
    here = read_moment(ProvenanceSpec(), None)  # the worker is this machine
    static = ("boot_id", "governor")  # the files a VM lacks read as "" here and there
    assert all({k: c[k] for k in static} == {k: here[k] for k in static} for c in per_run)
    assert all(set(c) >= set(MOMENT_FILES) and len(c["load"].split()) == 3 for c in per_run)
    uptimes = [float(c["uptime_s"]) for c in per_run]
    assert uptimes == sorted(set(uptimes)), uptimes
