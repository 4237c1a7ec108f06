"""The idle arm and energy net of it: the plan gets an ``idle:T`` test for every test with a
powercap metric (seeded like the rest), its trials sleep as long as T's median trial so
far, and on a RAPL counter laid out as the kernel lays it out and moved by a process at a
known idle power, locally and on a real SSH worker, the net energy is what each trial
added; the net's interval is Welch's (scipy's), "not available" where RAPL gave nothing,
and trials too short for RAPL are said."""

from __future__ import annotations

import json
import shlex
import sqlite3
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest
from conftest import washout
from machine_tree import lay_out
from scipy import stats
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)

from washout.data.store import Store, read_long
from washout.harness.engine import Experiment
from washout.harness.idle import IdleLengths, sleep_command
from washout.harness.spec import parse_spec_text
from washout.stats.energy import (
    net_energy,
    short_energy_note,
    short_energy_trials,
    welch_interval,
)

WATTS = 2.0
"""The idle power the simulated package draws."""
EXTRA_UJ = 300_000
"""What each trial of the working test adds to the counter (0.3 J)."""
SIMULATOR = """
import os, sys, time
zone, watts, extra = sys.argv[1], float(sys.argv[2]), sys.argv[3]
t0 = time.monotonic()
while True:
    try:
        with open(extra) as f:
            added = int(f.read() or 0)
    except (OSError, ValueError):
        added = 0
    with open(zone + "/energy_uj.tmp", "w") as f:
        f.write(f"{int((time.monotonic() - t0) * watts * 1e6) + added}\\n")
    os.replace(zone + "/energy_uj.tmp", zone + "/energy_uj")
    with open(extra + ".seen.tmp", "w") as f:
        f.write(f"{added}\\n")
    os.replace(extra + ".seen.tmp", extra + ".seen")
    time.sleep(0.001)
"""
"""A package's energy counter as RAPL moves it: ``watts`` of idle power, plus what the
trials add to the ``extra`` file, rewritten whole every millisecond; ``extra.seen`` says
what of the extra the counter holds."""


@pytest.fixture
def rapl(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A powercap tree whose package counter a process moves (its root, the extra file)."""
    root = lay_out(tmp_path / "tree")
    extra = tmp_path / "extra"
    extra.write_text("0\n")
    zone = root / "sys/class/powercap/intel-rapl:0"
    process = subprocess.Popen([sys.executable, "-c", SIMULATOR, str(zone), str(WATTS), str(extra)])
    try:
        yield root, extra
    finally:
        process.kill()
        process.wait()


def spec_text(root: Path, extra: Path, worker: str = "", warmup: int = 1, idle: bool = True) -> str:
    # the trial's energy is in the counter before it ends, as a real package's is: under
    # load the simulator can lag past the trial's end (CI, one hog: net 0.14 J of 0.3);
    # with no simulator (no counter) there is nothing to wait for
    path = shlex.quote(str(extra))
    work = (
        f"sleep 0.15; read x < {path}; n=$((x + {EXTRA_UJ})); echo $n > {path}.tmp; "
        f"mv {path}.tmp {path}; "
        f'until [ ! -e {path}.seen ] || [ "$(cat {path}.seen)" = "$n" ]; do sleep 0.001; done'
    )
    return f"""
[experiment]
name = "idle"
runs = 3
seed = 7
warmup = {warmup}
idle = {json.dumps(idle)}
health = false
[[test]]
name = "work"
command = {json.dumps(work)}
[test.metrics.energy]
powercap = "joules"
powercap_root = {json.dumps(str(root / "sys/class/powercap"))}
[test.metrics.wall]
wall = true
[[test]]
name = "plain"
command = "true"
{worker}"""


def test_the_plan_gets_an_idle_test_for_each_energy_test(tmp_path: Path) -> None:
    text = spec_text(tmp_path, tmp_path / "extra")
    experiment = Experiment.prepare(parse_spec_text(text, "spec"), text, "spec")
    names = [t.name for t in experiment.tests]
    assert names == ["work", "plain", "idle:work"]
    idle = experiment.tests[2]
    assert idle.command == "sleep" and list(idle.metrics) == ["energy"]  # energy only
    runs = [run.tests for run in experiment.plan.runs]
    assert all(sorted(tests) == [0, 1, 2] for tests in runs)  # interleaved like any test
    again = Experiment.prepare(parse_spec_text(text, "spec"), text, "spec")
    assert again.plan == experiment.plan  # seeded: resume re-plans the same


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        (("warmup = 1", "warmup = 0"), "experiment.warmup", "idle = true needs warmup >= 1"),
        (('powercap = "joules"', 'stdout = "last-number"'), "experiment.idle", "no test has one"),
        (('name = "plain"', 'name = "idle:plain"'), "test.name", "are the idle arm's"),
    ],
)
def test_an_idle_arm_it_cannot_have_is_one_line(
    tmp_path: Path, change: tuple[str, str], field: str, says: str
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(tmp_path, tmp_path / "extra").replace(*change))
    out = washout("validate", spec, check=False)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert field in out.stderr and says in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def expected_lengths(db: Path) -> list[tuple[float, float]]:
    """Each idle trial's wall beside the length the rule gives it: the median wall of
    ``work``'s ok trials stored before it (this session's warmups among them)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT t.id, t.test, t.status, t.reason, t.duration FROM trial t ORDER BY t.id"
        ).fetchall()
    pairs, walls = [], []
    for _, test, status, reason, duration in rows:
        if test == "work" and (status == "ok" or (status == "warmup" and not reason)):
            walls.append(duration)
        elif test == "idle:work" and status == "ok":
            pairs.append((duration, statistics.median(walls)))
    return pairs


def energy_rows(terminal: str) -> list[str]:
    """The rows of the energy table ``washout analyze`` prints."""
    lines = terminal.split("Energy per trial, gross and net of the machine at rest:\n", 1)[1]
    rows = []
    for line in lines.splitlines()[2:]:  # under the header and its rule
        if "│" not in line:
            break
        rows.append(line)
    return rows


def check_net(db: Path) -> None:
    frame = read_long(db)
    (result,) = net_energy(frame)
    assert (result.test, result.metric, result.n, result.n_idle) == ("work", "energy", 6, 6)
    assert result.reason == ""
    assert result.gross is not None and result.idle is not None and result.net is not None
    assert result.net == pytest.approx(result.gross - result.idle)
    # Each trial added 0.3 J to an idle 2 W: the idle arm took the 2 W away.
    assert 0.15 <= result.net <= 0.45, result
    assert result.idle == pytest.approx(WATTS * 0.16, abs=0.2)
    assert result.net_low is not None and result.net_high is not None
    assert result.net_low <= result.net <= result.net_high
    for wall, length in expected_lengths(db):
        assert length <= wall <= length + 0.25  # sleep(1) sleeps at least that long


def test_net_energy_of_a_real_run(rapl: tuple[Path, Path], tmp_path: Path) -> None:
    root, extra = rapl
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(root, extra))
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    check_net(db)
    # Every output says it: the JSON is net_energy's, the terminal and the report its table.
    analysis = json.loads(washout("analyze", db, "--format", "json").stdout)
    (want,) = net_energy(read_long(db))
    assert analysis["energy"] == [json.loads(json.dumps(want.to_dict()))]
    (row,) = energy_rows(washout("analyze", db).stdout)
    assert row.split("│")[2].strip() == "6" and row.count("[") == 2  # gross, net with CIs
    washout("report", db, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert '<section id="energy">' in page and "Welch" in page
    # What a resumed session starts from: the ok trials of the store, none else.
    with Store.open(db, readonly=True) as store:
        experiment = Experiment.from_store(store)
        lengths = IdleLengths.from_store(experiment.tests, store, 1)
    with closing(sqlite3.connect(db)) as conn:
        walls = [
            d
            for (d,) in conn.execute(
                "SELECT duration FROM trial WHERE test = 'work' AND status = 'ok' ORDER BY id"
            )
        ]
    assert lengths.walls == {"work": walls}
    assert lengths.command(experiment.tests[2]) == sleep_command(statistics.median(walls))
    assert lengths.command(experiment.tests[0]) == experiment.tests[0].command


@pytest.mark.ssh
def test_net_energy_of_a_real_run_over_ssh(
    rapl: tuple[Path, Path], sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    root, extra = rapl
    (server,) = sshd_farm.start(1)
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(root, extra, server.worker_toml("w", sshd_farm.known_hosts)))
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet", timeout=300)
    check_net(db)


def test_idle_trials_wait_for_a_length_and_say_so(tmp_path: Path) -> None:
    """Every trial of the test fails (its warmup too): its idle arm has no length, and
    each of its trials fails saying why, the experiment going on."""
    root = lay_out(tmp_path / "tree")
    spec = tmp_path / "spec.toml"
    text = spec_text(root, tmp_path / "extra").replace(
        'name = "work"\ncommand = ', 'name = "work"\ncommand = "exit 3" # '
    )
    spec.write_text(text)
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet", check=False)
    with sqlite3.connect(db) as conn:
        idle = conn.execute(
            "SELECT status, reason FROM trial WHERE test = 'idle:work' AND status != 'warmup'"
        ).fetchall()
    assert len(idle) == 6
    assert set(idle) == {
        (
            "failed",
            "idle arm: test 'work' has no ok trial on this worker yet to take its length from",
        )
    }


def test_rapl_not_readable_is_not_available_never_estimated(tmp_path: Path) -> None:
    root = tmp_path / "vm"  # no powercap zone at all, as in a VM
    root.mkdir()
    extra = tmp_path / "extra"
    extra.write_text("0\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(root, extra).replace("runs = 3", "runs = 1"))
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    (result,) = net_energy(read_long(db))
    assert (result.gross, result.idle, result.net, result.net_low) == (None, None, None, None)
    assert result.reason == (
        "not available: test 'work' has no measured energy; "
        "its idle arm 'idle:work' has no measured energy"
    )
    (said,) = json.loads(washout("analyze", db, "--format", "json").stdout)["energy"]
    assert (said["gross"], said["net"], said["reason"]) == (None, None, result.reason)
    (row,) = energy_rows(washout("analyze", db).stdout)
    assert row.count("not available") == 3  # gross, idle and net: never a number


def test_welch_interval_is_scipys() -> None:
    a = [1.2, 0.9, 1.4, 1.1, 1.3, 0.8, 1.25]
    b = [0.5, 0.45, 0.7, 0.52]
    want = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.9)
    assert welch_interval(a, b, 0.9) == pytest.approx((want.low, want.high))
    one = stats.ttest_1samp(a, 0).confidence_interval(0.95)
    (result,) = net_energy(
        pd.DataFrame(
            {
                "test": ["t"] * len(a) + ["idle:t"] * len(b),
                "metric": "e",
                "value": a + b,
                "status": "ok",
            }
        )
    )
    assert (result.gross_low, result.gross_high) == pytest.approx((one.low, one.high))
    assert result.worker == "local"
    assert welch_interval([1.0, 1.0], [0.5, 0.5], 0.95) == (0.5, 0.5)


def test_short_energy_trials_are_said(rapl: tuple[Path, Path], tmp_path: Path) -> None:
    """``true`` takes a few ms: at run time an event says so once, and the analysis' warning
    counts the trials."""
    root, extra = rapl
    spec = tmp_path / "spec.toml"
    text = spec_text(root, extra, idle=False).replace("runs = 3", "runs = 2")
    spec.write_text(text.replace('command = "sleep 0.15;', 'command = "true #'))
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    with sqlite3.connect(db) as conn:
        events = conn.execute("SELECT message FROM event WHERE kind = 'energy'").fetchall()
    assert len(events) == 1 and events[0][0].startswith("test 'work': a trial lasted ")
    assert "under the 50 ms RAPL needs" in events[0][0]
    warnings = short_energy_trials(read_long(db), ["energy"])
    assert len(warnings) == 1
    assert warnings[0].startswith("test 'work' metric 'energy': 4 of 4 trial(s) lasted under 50 ms")
    assert short_energy_note("x", 0.012).startswith("test 'x': a trial lasted 12 ms")
