"""Every trial records what its processes used: ``user`` and ``system`` CPU seconds of its
process tree and its peak RSS ``max_rss`` in bytes, locally (wait4) and on an SSH worker
(the launcher's wait4; without it the shell's ``times`` and GNU time), with a real CPU
burner and a real allocation."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import washout
from sshd import SshdFarm, run_async, sshd_farm  # noqa: F401 (fixture)

from washout.data.longformat import RESOURCE_METRICS
from washout.harness.executors import local, ssh_connection, ssh_wrapper
from washout.harness.executors.base import CommandOptions, CommandResult
from washout.harness.executors.local import LocalExecutor
from washout.harness.executors.ssh import SSHExecutor

MIB = 1 << 20


def tree(mib: int = 200) -> str:
    """A command whose process tree holds ``mib`` MiB and burns 0.3 s of CPU in a
    grandchild (under ``sh -c``, with ``&& true`` so the shell waits instead of exec'ing
    it)."""
    return (
        f"{sys.executable} -c \"import time; b = b'x' * ({mib} << 20); "
        "t = time.process_time(); exec('while time.process_time() - t < 0.3: pass')\" && true"
    )


def check_heavy(result: CommandResult, mib: int = 200, rss: bool = True) -> None:
    assert result.status == "ok", result.reason
    used = result.resources
    assert 0.25 <= used["user"] + used["system"] <= 5, used
    if rss:
        assert mib * MIB <= used["max_rss"] <= (mib + 500) * MIB, used
    else:
        assert "max_rss" not in used


@pytest.mark.parametrize("launcher", [True, False], ids=["launcher", "no-launcher"])
def test_local_trials_measure_their_process_tree(
    launcher: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Above this process's own peak (the test runner's), which a trial cannot be told from.
    with open("/proc/self/status") as status:
        own = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    mib = own // 1024 + 200
    if not launcher:  # as where there is no C compiler
        monkeypatch.setattr(local, "launcher_program", lambda: (None, "as if no compiler"))
    elif local.launcher_program()[0] is None:
        pytest.skip(f"no launcher here: {local.launcher_program()[1]}")

    async def go() -> tuple[CommandResult, CommandResult]:
        ex = LocalExecutor()
        return await ex.run(tree(mib), CommandOptions(timeout=60)), await ex.run(
            "true", CommandOptions(timeout=60)
        )

    heavy, light = run_async(go())
    check_heavy(heavy, mib)
    assert light.resources["user"] + light.resources["system"] < 0.1
    if launcher:  # started from the launcher (under a megabyte): `true`'s own peak
        assert 0 < light.resources["max_rss"] < 4 * MIB
    else:  # started by washout, `true` starts with washout's own peak RSS: absent
        assert "max_rss" not in light.resources


def test_every_trial_stores_its_resource_metrics(tmp_path: Path) -> None:
    """ok and failed trials alike; a metric of the test's own named like one wins."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
runs = 1
orders = ["fixed"]
[[test]]
name = "heavy"
command = {json.dumps(tree())}
[[test]]
name = "fails"
command = "exit 3"
[[test]]
name = "own"
command = "echo 7"
[test.metrics.user]
stdout = "last-number"
"""
    )
    db = tmp_path / "r.db"
    # washout started by a process of 400 MiB: getrusage would report that as washout's
    # own peak; the trial's 200 MiB is still its own and recorded.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; b = b'x' * (400 << 20); "
            "os.execv(sys.executable, [sys.executable, '-m', 'washout', *sys.argv[1:]])",
            *map(str, ("run", spec, "--db", db, "--quiet")),
        ],
        capture_output=True,
        timeout=120,
    )
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT t.test, t.status, m.name, m.value FROM metric m"
            " JOIN trial t ON t.id = m.trial_id"
        ).fetchall()
    stored = {(test, name): value for test, _, name, value in rows}
    statuses = {test: status for test, status, _, _ in rows}
    assert statuses == {"heavy": "ok", "fails": "failed", "own": "ok"}
    # (with the trial's health metrics: tests/test_trial_health.py)
    names = {name for t, name in stored if t == "heavy" and not name.startswith("health.")}
    assert names == {"wall", *RESOURCE_METRICS}
    assert {name for t, name in stored if t == "fails"} >= {"user", "system"}
    assert stored[("heavy", "user")] + stored[("heavy", "system")] >= 0.25
    assert stored[("heavy", "max_rss")] >= 200 * MIB
    assert stored[("own", "user")] == 7.0
    # The export gives them: every metric of every trial.
    frame = washout("export", db, "-o", tmp_path / "long.csv")
    assert frame.returncode == 0
    text = (tmp_path / "long.csv").read_text()
    assert all(f",{m}," in text for m in RESOURCE_METRICS)
    # ... and they reach the hyperfine-style summary of analyze: CPU time and peak RSS per test.
    shown = washout("analyze", db, "--format", "json").stdout
    summaries = {s["test"]: s for s in json.loads(shown)["comparison"]["summaries"]}
    assert summaries["heavy"]["max_rss"] >= 200 * MIB
    assert summaries["heavy"]["user"] + summaries["heavy"]["system"] >= 0.25


@pytest.mark.ssh
@pytest.mark.parametrize(
    "launcher, gnu_time",
    [(True, False), (False, True), (False, False)],
    ids=["launcher", "gnu-time", "no-gnu-time"],
)
def test_ssh_trials_measure_their_process_tree(
    sshd_farm: SshdFarm, launcher: bool, gnu_time: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the launcher on the worker, its wait4 measures the tree (GNU time unused);
    without it, GNU time's max_rss, and without GNU time either (its path made one that
    does not exist) max_rss is absent, never 0; CPU time still comes from the shell."""
    if not launcher:
        monkeypatch.setenv("WASHOUT_LAUNCHER", "off")
    if not gnu_time:
        for module in (ssh_wrapper, ssh_connection):
            monkeypatch.setattr(module, "GNU_TIME", "/nonexistent/time")
    (server,) = sshd_farm.start(1)
    worker = server.worker_spec(sshd_farm.known_hosts)

    async def go() -> tuple[CommandResult, CommandResult]:
        ex = SSHExecutor(worker)
        await ex.connect()
        try:
            return await ex.run(tree(), CommandOptions(timeout=60)), await ex.run(
                "echo out; echo err >&2", CommandOptions(timeout=60)
            )
        finally:
            await ex.close()

    heavy, light = run_async(go())
    check_heavy(heavy, rss=launcher or gnu_time)
    assert light.stdout == b"out\n" and light.stderr == b"err\n"  # markers stripped
    assert light.resources["user"] + light.resources["system"] < 0.2
