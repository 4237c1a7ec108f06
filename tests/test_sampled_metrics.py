"""Metrics read while a trial runs, through real runs of the CLI: a command or file sampled
every interval (mean, max, delta), and energy from a powercap tree laid out as the kernel
lays it out (sysfs here has none: a VM), with its counter wrapping around; and "not
available" where a machine has no powercap."""

from __future__ import annotations

import io
import sqlite3
import statistics
from pathlib import Path

import pandas as pd
import pytest
from conftest import washout
from hypothesis import given
from hypothesis import strategies as st

from washout.harness.measure import MetricError, MetricUnavailable
from washout.harness.metrics.powercap import (
    choose_zones,
    energy_delta_uj,
    energy_uj,
    parse_powercap,
)
from washout.harness.metrics.sample import aggregate

MAX_RANGE = 262_143_328_850  # a package's max_energy_range_uj on a Xeon


def _run(tmp_path: Path, body: str) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Run a one-test spec (1 fixed and 1 random run); its long format and each trial's
    status and reason."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[experiment]\nname = "s"\nruns = 1\nseed = 1\ncwd = "{tmp_path}"\n' + body)
    db = tmp_path / "s.db"
    washout("run", spec, "--db", db, "--quiet", check=False)
    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    with sqlite3.connect(db) as conn:
        trials = conn.execute("SELECT status, reason FROM trial ORDER BY id").fetchall()
    return frame, trials


def _value(frame: pd.DataFrame, metric: str) -> list[float]:
    return frame[frame.metric == metric]["value"].tolist()


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=20))
def test_aggregates_are_the_mean_max_and_last_minus_first(values: list[float]) -> None:
    assert aggregate(values, "mean") == pytest.approx(statistics.mean(values), abs=1e-6)
    assert aggregate(values, "max") == max(values)
    assert aggregate(values, "delta") == values[-1] - values[0]


def test_energy_counter_wraps_at_its_range() -> None:
    assert energy_delta_uj(100, 350, MAX_RANGE) == 250
    assert energy_delta_uj(MAX_RANGE - 100, 50, MAX_RANGE) == 150  # wrapped once
    # readings every interval catch each wrap: two wraps over three steps
    readings = [
        {"intel-rapl:0": ("package-0", v, MAX_RANGE)}
        for v in (MAX_RANGE - 10, 5, MAX_RANGE - 20, 30)
    ]
    assert energy_uj(readings, ["intel-rapl:0"]) == 15 + (MAX_RANGE - 25) + 50


def _zone(root: Path, path: str, name: str, energy: int) -> Path:
    """A powercap zone as the kernel lays it out: the zone's directory under the device,
    its name, energy_uj and max_energy_range_uj; every zone and sub-zone also a symbolic
    link in the class directory."""
    device = root / "devices" / "virtual" / "powercap" / "intel-rapl" / path
    device.mkdir(parents=True)
    (device / "name").write_text(name + "\n")
    (device / "energy_uj").write_text(f"{energy}\n")
    (device / "max_energy_range_uj").write_text(f"{MAX_RANGE}\n")
    (device / "enabled").write_text("1\n")
    link = root / "class" / "powercap" / Path(path).name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)
    return device / "energy_uj"


def _tree(root: Path) -> dict[str, Path]:
    (root / "class" / "powercap" / "intel-rapl").mkdir(parents=True)  # the control type
    return {
        "package-0": _zone(root, "intel-rapl:0", "package-0", MAX_RANGE - 500_000),
        "core": _zone(root, "intel-rapl:0/intel-rapl:0:0", "core", 1_000),
        "dram0": _zone(root, "intel-rapl:0/intel-rapl:0:1", "dram", 2_000),
        "package-1": _zone(root, "intel-rapl:1", "package-1", 10_000_000),
        "dram1": _zone(root, "intel-rapl:1/intel-rapl:1:0", "dram", 3_000),
        "psys": _zone(root, "intel-rapl:2", "psys", 7_000),
    }


def test_powercap_joules_and_watts_over_a_wrapping_counter(tmp_path: Path) -> None:
    """The trial moves the counters as the kernel would: package-0 wraps (1.5 J), package-1
    adds 2 J; sub-zones and psys are not summed by default; named zones sum by name."""
    files = _tree(tmp_path / "sys")
    root = tmp_path / "sys" / "class" / "powercap"
    moves = {
        "package-0": 1_000_000,  # wrapped: 500,000 before the range's end + 1,000,000
        "package-1": 12_000_000,
        "core": 900_001_000,
        "dram0": 2_002_000,
        "dram1": 3_003_000,
        "psys": 100_007_000,
    }
    command = "; ".join(f"echo {v} > {files[z]}" for z, v in moves.items()) + "; sleep 0.5"
    start = "; ".join(f"echo {f.read_text().strip()} > {f}" for f in files.values())
    frame, trials = _run(
        tmp_path,
        f"""
[reset]
command = "{start}"

[[test]]
name = "t"
command = "{command}"
[test.metrics.wall]
wall = true
[test.metrics.joules]
powercap = "joules"
powercap_root = "{root}"
[test.metrics.watts]
powercap = "watts"
powercap_root = "{root}"
[test.metrics.dram_joules]
powercap = "joules"
powercap_zones = ["dram"]
powercap_root = "{root}"
""",
    )
    assert {s for s, _ in trials} == {"ok"}, trials
    assert _value(frame, "joules") == [pytest.approx(3.5), pytest.approx(3.5)]
    assert _value(frame, "dram_joules") == [pytest.approx(5.0), pytest.approx(5.0)]
    for watts, wall in zip(_value(frame, "watts"), _value(frame, "wall")):
        # mean watts over the readings' span: it holds the command, and little more
        assert 3.5 / (wall + 1.0) < watts < 3.5 / wall


def test_powercap_zone_choice() -> None:
    text = (
        f"intel-rapl:0 package-0 5 {MAX_RANGE}\nintel-rapl:0:0 core 6 {MAX_RANGE}\n"
        f"intel-rapl:1 psys 7 {MAX_RANGE}\nnot a line\n"
    )
    zones = parse_powercap(text)
    assert sorted(zones) == ["intel-rapl:0", "intel-rapl:0:0", "intel-rapl:1"]
    assert choose_zones(zones, [], "/x") == ["intel-rapl:0"]  # packages, not psys
    assert choose_zones({"intel-rapl:1": zones["intel-rapl:1"]}, [], "/x") == ["intel-rapl:1"]
    assert choose_zones(zones, ["core"], "/x") == ["intel-rapl:0:0"]
    with pytest.raises(MetricError, match="zone 'dram' not under /x .zones: core, package-0"):
        choose_zones(zones, ["dram"], "/x")
    with pytest.raises(MetricUnavailable, match="no readable powercap zone under /x"):
        choose_zones({}, [], "/x")


def test_no_powercap_is_not_available_and_the_trial_stays_ok(tmp_path: Path) -> None:
    """A machine without powercap (a root that does not exist stands for it), and this
    machine as it is: the metric is left out and the trial's reason says why."""
    real = Path("/sys/class/powercap")
    here = sorted(real.glob("intel-rapl:*/energy_uj"))
    readable = any(p.is_file() and _readable(p) for p in here)
    frame, trials = _run(
        tmp_path,
        f"""
[[test]]
name = "t"
command = "sleep 0.1"
[test.metrics.absent]
powercap = "watts"
powercap_root = "{tmp_path / "no-such-dir"}"
[test.metrics.here]
powercap = "joules"
""",
    )
    assert len(trials) == 2 and trials[0] == trials[1]
    status, reason = trials[0]
    assert status == "ok"
    assert f"metric absent: not available: no readable powercap zone under {tmp_path}" in reason
    assert pd.isna(_value(frame, "absent")).all()
    if readable:
        assert (pd.Series(_value(frame, "here")) >= 0).all()
    else:
        assert "metric here: not available: no readable powercap zone under /sys" in reason
        assert pd.isna(_value(frame, "here")).all()


def _readable(path: Path) -> bool:
    try:
        path.read_text()
    except OSError:
        return False
    return True


def test_sampled_file_and_command_mean_max_delta(tmp_path: Path) -> None:
    """The trial counts 1..5 into a file (replaced whole, as a sysfs file reads whole),
    0.2 s apart; readings every 0.05 s see every step, the start (0) and the end (5)."""
    frame, trials = _run(
        tmp_path,
        f"""
[reset]
command = "echo 0 > {tmp_path}/level"

[[test]]
name = "t"
command = "for i in 1 2 3 4 5; do sleep 0.2; echo $i > next; mv next level; done"
[test.metrics.peak]
sample = {{ file = "level", interval = "0.05s", aggregate = "max" }}
[test.metrics.rise]
sample = {{ command = "cat level", interval = "0.05s", aggregate = "delta" }}
[test.metrics.mean]
sample = {{ command = "echo level=$(cat level)", interval = "0.05s" }}
regex = 'level=(?P<value>[0-9]+)'
[test.metrics.ends]
sample = {{ file = "level" }}
""",
    )
    assert {s for s, _ in trials} == {"ok"}, trials
    assert _value(frame, "peak") == [5, 5]
    assert _value(frame, "rise") == [5, 5]
    assert _value(frame, "ends") == [2.5, 2.5]  # no interval: the start and end readings
    assert all(1.5 < m < 4.0 for m in _value(frame, "mean"))  # many readings in between


def test_a_failing_sample_fails_the_trial_with_its_reason(tmp_path: Path) -> None:
    frame, trials = _run(
        tmp_path,
        f"""
[reset]
command = "echo 1 > {tmp_path}/value"

[[test]]
name = "t"
command = "sleep 0.3; rm value; sleep 0.3"
[test.metrics.x]
sample = {{ command = "cat value", interval = "0.05s" }}
""",
    )
    assert len(trials) == 2 and trials[0] == trials[1]
    status, reason = trials[0]
    assert status == "failed"
    assert reason == "metric x: sample command 'cat value' failed: exit code 1"
