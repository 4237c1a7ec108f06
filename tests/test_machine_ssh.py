"""``washout check`` of a spec's SSH workers, and ``require`` refusing a run over SSH,
against real sshd servers on loopback (tests/sshd.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import washout
from machine_tree import CPU, lay_out, snapshot
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)

pytestmark = pytest.mark.ssh


def _spec(tmp_path: Path, workers: str, require: str = "") -> Path:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"[experiment]\nruns = 1\n{require}\n[[test]]\nname = 'a'\ncommand = 'true'\n\n{workers}"
    )
    return spec


def test_check_tune_and_reset_each_worker_of_a_spec(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    """Each [[worker]] is read over its own connection and named; --tune and --reset write
    on the worker (here a laid-out tree through --root) and leave it as found."""
    first, second = sshd_farm.start(2)
    workers = first.worker_toml("w1", sshd_farm.known_hosts) + second.worker_toml(
        "w2", sshd_farm.known_hosts
    )
    spec = _spec(tmp_path, workers)
    root = lay_out(tmp_path / "machine", {f"{CPU}/smt/control": "forceoff"})
    before = snapshot(root)
    shown = washout("check", spec, "--root", root).stdout
    assert f"w1 (127.0.0.1:{first.port})" in shown and f"w2 (127.0.0.1:{second.port})" in shown
    assert shown.count("smt                  ok             off until the next boot") == 2

    tuned = json.loads(washout("check", spec, "--tune", "--root", root, "--format", "json").stdout)
    w1, w2 = tuned["workers"]
    # both workers are this machine, so they tune one tree at once: each writes or finds
    # written what tune writes, and the record holds the tree's own values
    assert [w["worker"] for w in tuned["workers"]] == ["w1", "w2"] and not tuned["failed"]
    for worker in (w1, w2):
        assert {a["outcome"] for a in worker["actions"]} <= {"done", "unchanged"}
        assert {i["name"]: i["verdict"] for i in worker["items"]}["governor"] == "ok"
    washout("check", spec, "--reset", "--root", root)
    assert snapshot(root) == before


def test_run_refuses_a_worker_that_misses_a_requirement(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    (server,) = sshd_farm.start(1)
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    other = "0" if aslr != "0" else "2"
    spec = _spec(
        tmp_path,
        server.worker_toml("far", sshd_farm.known_hosts),
        f'require = ["aslr={other}"]',
    )
    proc = washout("run", spec, "--db", tmp_path / "x.db", check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        f"washout: error: worker far does not meet [experiment] require aslr={other}: "
        f"found '{aslr}' ({aslr}: {['no', 'conservative', 'full'][int(aslr)]} randomization)"
    )
