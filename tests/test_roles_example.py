"""examples/client-server runs as its README says, shortened to one run per order kind: two
loopback SSH workers from its loopback.sh (real sshd), a real redis-server on the server
role and redis-benchmark on the client role; metrics from both roles in the export, the
analysis per group, and the server gone afterwards."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, washout

pytestmark = [pytest.mark.ssh, pytest.mark.redis]

EXAMPLE = ROOT / "examples" / "client-server"
TESTS = ["set", "get", "lpush", "lpop", "incr"]
REDIS_PORT = 6481


def _powercap_readable() -> bool:
    for path in Path("/sys/class/powercap").glob("intel-rapl:*/energy_uj"):
        try:
            path.read_text()
            return True
        except OSError:
            pass
    return False


@pytest.fixture
def loopback(tmp_path: Path):
    """The example's two loopback workers; the environment washout runs in (HOME)."""
    check = subprocess.run(
        ["bash", str(EXAMPLE / "install.sh"), "--check"], capture_output=True, text=True
    )
    if check.returncode != 0 or shutil.which("ssh-keygen") is None:
        pytest.skip(f"examples/client-server: {check.stderr.strip()}")
    env = {**os.environ, "CS_DIR": str(tmp_path / "cs")}
    started = subprocess.run(
        ["bash", str(EXAMPLE / "loopback.sh"), "start"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    home = started.stdout.strip().removeprefix("export HOME=")
    yield {**env, "HOME": home}
    subprocess.run(["bash", str(EXAMPLE / "loopback.sh"), "stop"], env=env, check=True)


def test_client_server_example(loopback: dict[str, str], tmp_path: Path) -> None:
    db = tmp_path / "cs.db"
    washout(
        "run",
        "examples/client-server/spec.toml",
        "--runs",
        "1",
        "--db",
        db,
        "--quiet",
        cwd=ROOT,
        env=loopback,
        timeout=280,
    )
    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    assert set(frame["worker"]) == {"main"}
    assert set(frame["status"]) == {"ok"}
    assert sorted(set(frame["test"])) == sorted(TESTS)
    client = frame[frame.metric.isin(["p50_ms", "p99_ms"])]["value"]
    server_cpu = frame[frame.metric == "server_cpu_s"]["value"]
    assert len(client) == 2 * 2 * len(TESTS) and (client > 0).all()
    assert len(server_cpu) == 2 * len(TESTS) and (server_cpu >= 0).all() and server_cpu.sum() > 0
    watts = frame[frame.metric == "server_watts"]["value"]
    with sqlite3.connect(db) as conn:
        reasons = [r for (r,) in conn.execute("SELECT reason FROM trial")]
        hosts = [h for (h,) in conn.execute("SELECT host FROM worker")]
    assert hosts == ["server=cs-server,client=cs-client"]
    if _powercap_readable():
        assert (watts > 0).all()
    else:
        assert watts.isna().all()
        assert all("metric server_watts: not available: no readable powercap" in r for r in reasons)

    analysis = json.loads(washout("analyze", db, "--by-worker", "--format", "json").stdout)["order"]
    assert {t["worker"] for t in analysis["tests"]} == {"main"}
    assert {t["metric"] for t in analysis["tests"]} >= {"p50_ms", "p99_ms", "server_cpu_s"}
    with socket.socket() as sock:  # the server role's teardown stopped redis
        assert sock.connect_ex(("127.0.0.1", REDIS_PORT)) != 0
