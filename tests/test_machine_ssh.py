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
    on the worker and leave it as found. The machines are trees laid out in each worker's
    workdir, which a relative --root names on every worker."""
    servers = sshd_farm.start(2)
    workers, trees = "", []
    for i, server in enumerate(servers, 1):
        workdir = tmp_path / f"w{i}"
        trees.append(lay_out(workdir / "machine", {f"{CPU}/smt/control": "forceoff"}))
        workers += server.worker_toml(f"w{i}", sshd_farm.known_hosts, workdir=workdir)
    spec = _spec(tmp_path, workers)
    before = [snapshot(tree) for tree in trees]
    shown = washout("check", spec, "--root", "machine").stdout
    for i, server in enumerate(servers, 1):
        assert f"w{i} (127.0.0.1:{server.port})" in shown
    assert shown.count("smt                  ok             off until the next boot") == 2

    tuned = json.loads(
        washout("check", spec, "--tune", "--root", "machine", "--format", "json").stdout
    )
    assert [w["worker"] for w in tuned["workers"]] == ["w1", "w2"] and not tuned["failed"]
    for worker in tuned["workers"]:
        outcomes = [a["outcome"] for a in worker["actions"]]
        assert outcomes == ["done"] * 10  # perf, 4 minimum frequencies, 4 governors, turbo
        assert {i["name"]: i["verdict"] for i in worker["items"]}["governor"] == "ok"
        assert worker["note"].startswith("the values replaced are recorded in machine/run/")
    assert all((tree / "run/washout/tune.json").exists() for tree in trees)
    washout("check", spec, "--reset", "--root", "machine")
    assert [snapshot(tree) for tree in trees] == before


def test_run_refuses_a_worker_that_misses_a_requirement(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """A plain worker, and each role's worker of a group, is read on its own and named."""
    first, second = sshd_farm.start(2)
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    other = "0" if aslr != "0" else "2"
    found = f"found '{aslr}' ({aslr}: {['no', 'conservative', 'full'][int(aslr)]} randomization)"
    plain = first.worker_toml("far", sshd_farm.known_hosts)
    group = first.worker_toml("srv", sshd_farm.known_hosts, extra='role = "server"')
    group += second.worker_toml("cli", sshd_farm.known_hosts, extra='role = "client"')
    for workers, named, tests in (
        (plain, "far", ""),
        (group, "srv", "role = 'client'\n"),
    ):
        spec = _spec(tmp_path, workers, f'require = ["load>=0", "aslr={other}"]')
        spec.write_text(
            spec.read_text().replace("command = 'true'\n", f"command = 'true'\n{tests}")
        )
        db = tmp_path / f"{named}.db"
        proc = washout("run", spec, "--db", db, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines()[-1] == (
            f"washout: error: worker {named} does not meet [experiment] require "
            f"aslr={other}: {found}"
        )
