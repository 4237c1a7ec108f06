"""A trial's processes die with washout: SIGKILL the controller mid-trial, locally and with
an SSH worker (a real sshd on loopback), and every process of the trial is gone."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import alive, wait_for
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)


def kill_controller_mid_trial(tmp_path: Path, worker: str = "") -> list[int]:
    """Start an experiment whose trial leaves a child and a grandchild running, SIGKILL
    washout while the trial runs; returns the trial's pids."""
    pids = tmp_path / "pids"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
runs = 1
orders = ["fixed"]
[[test]]
name = "long"
command = "sh -c 'sleep 300 & echo $! >> {pids}; wait' & echo $! >> {pids}; echo $$ >> {pids}; wait"
"""
        + worker
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "washout",
            "run",
            str(spec),
            "--db",
            str(tmp_path / "k.db"),
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: pids.exists() and len(pids.read_text().split()) == 3,
            60,
            "the trial did not start",
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return [int(p) for p in pids.read_text().split()]


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
