"""Client/server trials on worker groups, through the real CLI: a real redis-server started
on the server role's loopback sshd worker, redis-benchmark on the client's, two groups at
once; metrics from both roles; the analysis per group. Plus what a trial does when its
background side fails, and the one-line errors of a spec whose roles do not fit."""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, gone, is_health, washout
from sshd import SshdFarm, free_port, sshd_farm  # noqa: F401 (fixture)

from washout.data.longformat import RESOURCE_METRICS
from washout.errors import WashoutError
from washout.harness.spec import parse_spec_text

pytestmark = pytest.mark.ssh

NEEDS_REDIS = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-benchmark") is None,
    reason="redis missing: run scripts/services/examples.sh",
)

SPEC = """
[experiment]
name = "cs"
runs = 2
seed = 5
timeout = "60s"

[reset]                        # the client's: the top-level one
command = "rm -f seen-by-client"

[role.server.reset]            # the server's own
command = "rm -f dump.rdb; echo reset >> resets"

[role.server.provenance]
commands = ["redis-server --version"]

[[test]]
name = "{op}"
role = "client"
command = '''echo server=$WASHOUT_HOST_SERVER;
  redis-benchmark -h $WASHOUT_HOST_SERVER -p $(cat port) -t {op} -n 2000 -c 4 --csv'''
params = { op = ["set", "get"] }
[[test.background]]
role = "server"
command = '''echo $WASHOUT_ROLE > started-here;
  exec redis-server --port $(cat port) --bind 127.0.0.1 --save '' --appendonly no'''
ready = "redis-cli -p $(cat port) ping | grep -q PONG"
ready_timeout = "20s"
[test.metrics.p50_ms]
regex = '^"[^"]+","[0-9.]+","[0-9.]+","[0-9.]+","(?P<value>[0-9.]+)"'
[test.metrics.server_cpu_s]
role = "server"
sample = { command = "redis-cli -p $(cat port) info cpu", aggregate = "delta" }
regex = 'used_cpu_user:(?P<value>[0-9.]+)'
[test.metrics.server_keys]
role = "server"
sample = { command = "redis-cli -p $(cat port) dbsize", interval = "0.2s", aggregate = "max" }
"""


GOOD = """
[[test]]
name = "t"
role = "client"
command = "true"
[[test.background]]
role = "server"
command = "sleep 100"
[test.metrics.cpu]
role = "server"
sample = { command = "cat /proc/loadavg", aggregate = "delta" }

[[worker]]
host = "h1"
role = "server"
group = "pair1"

[[worker]]
host = "h2"
role = "client"
group = "pair1"
"""


def _workdir(tmp_path: Path, name: str, port: int) -> Path:
    path = tmp_path / name
    path.mkdir()
    (path / "port").write_text(f"{port}\n")
    return path


def _groups(farm: SshdFarm, tmp_path: Path, pairs: int) -> tuple[str, list[Path], list[Path]]:
    """``pairs`` groups of a server and a client worker, each on its own sshd; a group's
    two workdirs name one free port (all servers share 127.0.0.1 here)."""
    servers = farm.start(2 * pairs)
    toml, server_dirs, client_dirs = "", [], []
    for k in range(pairs):
        port = free_port()
        sdir = _workdir(tmp_path, f"s{k}", port)
        cdir = _workdir(tmp_path, f"c{k}", port)
        server_dirs.append(sdir)
        client_dirs.append(cdir)
        group = f'group = "pair{k + 1}"\n'
        toml += servers[2 * k].worker_toml(
            f"server{k + 1}",
            farm.known_hosts,
            sdir,
            'role = "server"\n' + group + 'address = "localhost"',
        )
        toml += servers[2 * k + 1].worker_toml(
            f"client{k + 1}", farm.known_hosts, cdir, 'role = "client"\n' + group
        )
    return toml, server_dirs, client_dirs


@NEEDS_REDIS
def test_two_client_server_pairs_metrics_from_both_roles_analysis_per_group(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    workers, server_dirs, client_dirs = _groups(sshd_farm, tmp_path, 2)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC + workers)
    db = tmp_path / "cs.db"
    washout("run", spec, "--db", db, "--quiet", timeout=240)

    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    frame = frame[~frame["metric"].isin(RESOURCE_METRICS) & ~frame["metric"].map(is_health)]
    assert set(frame["worker"]) == {"pair1", "pair2"}  # a group is the analysis' worker
    assert set(frame["status"]) == {"ok"}
    assert set(frame["metric"]) == {"p50_ms", "server_cpu_s", "server_keys"}
    for _, rows in frame.groupby("worker"):
        assert len(rows) == 2 * 2 * 2 * 3  # 2 tests x 2 runs x 2 orders x 3 metrics
        assert (rows[rows.metric == "p50_ms"]["value"] > 0).all()  # the client's latency
        cpu = rows[rows.metric == "server_cpu_s"]["value"]  # the server's CPU, in 10 ms ticks
        assert (cpu >= 0).all() and cpu.sum() > 0
        keys = rows[rows.metric == "server_keys"]
        # a fresh server per trial: SET stores keys, GET on an empty server none
        assert (keys[keys.test == "set"]["value"] > 0).all()
        assert (keys[keys.test == "get"]["value"] == 0).all()
    with sqlite3.connect(db) as conn:
        outputs = {o for (o,) in conn.execute("SELECT stdout_tail FROM trial")}
        hosts = dict(conn.execute("SELECT name, host FROM worker"))
        envs = [json.loads(d) for (d,) in conn.execute("SELECT data FROM environment")]
    # the server's address reached the client as a variable, never as command text
    assert all(o.startswith("server=localhost\n") for o in outputs)
    assert hosts["pair1"].startswith("server=127.0.0.1:") and ",client=" in hosts["pair1"]
    assert all(e["server@command:redis-server --version"].startswith("Redis") for e in envs)
    assert all("client@command:redis-server --version" not in e for e in envs)
    for sdir, cdir in zip(server_dirs, client_dirs):
        assert (sdir / "started-here").read_text() == "server\n"  # on the server's worker
        assert not (cdir / "started-here").exists()
        assert (sdir / "resets").read_text().count("reset") == 4  # its role's reset, per run
        port = int((sdir / "port").read_text())
        ping = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True)
        assert b"PONG" not in ping.stdout  # every background server was stopped

    by_group = json.loads(washout("analyze", db, "--by-worker", "--format", "json").stdout)["order"]
    assert {row["worker"] for row in by_group["tests"]} == {"pair1", "pair2"}


def test_background_that_never_gets_ready_or_dies_fails_the_trial_with_its_reason(
    tmp_path: Path,
) -> None:
    """Locally (a background on the test's own worker): not ready in time, ended before
    it was ready, ended during the trial; each a failed trial saying so, and nothing of
    it left running."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
name = "bg"
runs = 1
seed = 1

[[test]]
name = "never-ready"
command = "true"
[[test.background]]
command = "echo $$ > {tmp_path}/never.pid; exec sleep 600"
ready = "false"
ready_timeout = "0.5s"

[[test]]
name = "exits-at-once"
command = "true"
[[test.background]]
command = "echo broken >&2; exit 3"
ready = "sleep 0.2; false"

[[test]]
name = "dies-during"
command = "sleep 1"
[[test.background]]
command = "sleep 0.3"
"""
    )
    db = tmp_path / "bg.db"
    washout("run", spec, "--db", db, "--quiet", check=False)
    with sqlite3.connect(db) as conn:
        reasons = dict(conn.execute("SELECT test, reason FROM trial WHERE status = 'failed'"))
    assert set(reasons) == {"never-ready", "exits-at-once", "dies-during"}
    assert "not ready after 0.5 s: 'false' exit code 1" in reasons["never-ready"]
    assert "ended before it was ready: exit code 3: broken" in reasons["exits-at-once"]
    assert "ended during the trial: exit code 0" in reasons["dies-during"]
    pid = int((tmp_path / "never.pid").read_text())
    assert gone(pid)  # the background's group was killed


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s.replace('role = "client"\ngroup = "pair1"', 'group = "pair1"'),
            "worker[1].role: required: worker[0] has role 'server'",
        ),
        (
            lambda s: s.replace('role = "client"', 'role = "server"'),
            "worker[1].role = 'server': group 'pair1' already has it (worker[0])",
        ),
        (
            lambda s: s.replace('role = "client"\ncommand', "command"),
            "test[0].role: required: the workers have roles client, server",
        ),
        (
            lambda s: s.replace(
                '[[test.background]]\nrole = "server"', '[[test.background]]\nrole = "db"'
            ),
            "test[0].background[0].role = 'db': no [[worker]] has this role (client, server)",
        ),
        (
            lambda s: s + '[role.proxy.reset]\ncommand = "true"\n',
            "role.proxy = 'proxy': no [[worker]] has this role (client, server)",
        ),
        (
            lambda s: s.replace(
                'sample = { command = "cat /proc/loadavg", aggregate = "delta" }',
                'stdout = "last-number"',
            ),
            "test[0].metrics.cpu.role = 'server': a metric of another role reads a file",
        ),
        (
            lambda s: s.replace('role = "client"\ncommand', 'role = "client-1"\ncommand'),
            "test[0].role = 'client-1': a role is a name of letters, digits and _",
        ),
        (
            lambda s: s.replace('aggregate = "delta"', 'aggregate = "median"'),
            "test[0].metrics.cpu.sample.aggregate = 'median'",
        ),
        (
            lambda s: s.replace('aggregate = "delta"', 'aggregate = "delta", interval = "0s"'),
            "sample.interval = '0s': a duration must be a positive",
        ),
        (
            lambda s: s.replace(
                "[test.metrics.cpu]",
                '[test.metrics.e]\npowercap = "joules"\nfile = "x"\n[test.metrics.cpu]',
            ),
            "powercap is read by washout; it takes no other source",
        ),
        (
            lambda s: s.replace(
                '[[worker]]\nhost = "h2"',
                '[[worker]]\nhost = "h3"\nrole = "client"\ngroup = "pair2"\n'
                '[[worker]]\nhost = "h2"',
            ),
            "worker.group = 'pair2': has no worker of role 'server'",
        ),
    ],
)
def test_roles_that_do_not_fit_are_one_line_errors(edit, message: str) -> None:
    parse_spec_text(GOOD, "spec.toml")
    with pytest.raises(WashoutError) as err:
        parse_spec_text(edit(GOOD), "spec.toml")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_validate_names_the_role_problem_in_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(GOOD.replace('role = "client"\ncommand', "command"))
    proc = washout("validate", spec, check=False)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"washout: error: {spec}: test[0].role: required: the workers have roles client, server\n"
    )


def test_the_readmes_client_server_spec_is_valid() -> None:
    """The README's roles example parses as a whole spec (docs stay true)."""
    readme = (ROOT / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```toml\n(.*?)```", readme, re.S) if "role =" in b]
    spec = parse_spec_text(block, "README.md")
    assert spec.schedules == 1
    assert [b.role for t in spec.test for b in t.background] == ["server"]
    assert {m.role for t in spec.test for m in t.metrics.values()} == {"server", None}


def test_a_server_lost_mid_trial_makes_the_run_rerun_whole(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """The server role's connection drops during a trial (its sshd drops every session and
    comes back, as after a crash): the background's outcome is unknown, so the trial is
    kept as interrupted and its run re-run whole, as for a plain worker lost mid-trial."""
    server, client = sshd_farm.start(2)
    drop = server.reboot_script(down=0.5)
    once = tmp_path / "dropped-once"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
name = "lost"
runs = 1
seed = 3

[[test]]
name = "t"
role = "client"
command = "if [ ! -e {once} ]; then touch {once}; {drop}; sleep 3; fi; echo ok"
[[test.background]]
role = "server"
command = "sleep 600"
"""
        + server.worker_toml("s", sshd_farm.known_hosts, extra='role = "server"')
        + client.worker_toml("c", sshd_farm.known_hosts, extra='role = "client"')
    )
    db = tmp_path / "lost.db"
    washout("run", spec, "--db", db, "--quiet", timeout=120)
    with sqlite3.connect(db) as conn:
        trials = conn.execute("SELECT status, superseded FROM trial ORDER BY id").fetchall()
        events = [m for (k, m) in conn.execute("SELECT kind, message FROM event") if k == "rerun"]
    assert trials == [("interrupted", 1), ("ok", 0), ("ok", 0)]
    assert len(events) == 1 and "lost its worker" in events[0]


def test_provenance_is_per_role_and_groups_are_compared_role_by_role(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """The server role's provenance file must agree between groups; the clients' differ,
    but no client provenance is asked for, so that is no mismatch."""
    hosts = sshd_farm.start(4)
    toml = ""
    for k in range(2):
        for j, role in enumerate(("server", "client")):
            workdir = tmp_path / f"{role}{k}"
            workdir.mkdir()
            (workdir / "build.txt").write_text(f"{role} build {k if role == 'client' else 7}\n")
            toml += hosts[2 * k + j].worker_toml(
                f"{role}{k}", sshd_farm.known_hosts, workdir, f'role = "{role}"\ngroup = "g{k}"'
            )
    spec = tmp_path / "spec.toml"
    body = """
[experiment]
name = "prov"
runs = 1
seed = 1

[role.server.provenance]
files = ["build.txt"]

[[test]]
name = "t"
role = "client"
command = "true"
"""
    spec.write_text(body + toml)
    washout("run", spec, "--db", tmp_path / "a.db", "--quiet")

    (tmp_path / "server1" / "build.txt").write_text("server build 8\n")
    proc = washout("run", spec, "--db", tmp_path / "b.db", "--quiet", check=False)
    assert proc.returncode != 0
    assert (
        "provenance mismatch between workers: server@file:build.txt differs: g0 has" in proc.stderr
    ), proc.stderr
