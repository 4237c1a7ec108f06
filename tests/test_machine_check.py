"""``washout check`` on real processes: the real CLI reading a machine laid out as the kernel
lays it out (tests/machine_tree.py, through ``--root``) and this machine as it is;
``--tune``/``--reset`` round trips across processes, a tune killed halfway, a reboot in
between and a record that cannot be written; and a spec's ``require`` refusing ``run``
and ``resume``."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for, washout
from machine_tree import CPU, SWAPS_HEADER, TUNABLE, lay_out, snapshot

import washout as api
from washout.harness.machine import FILES, JUDGES

VERDICTS = ("ok", "advice", "not available")


def check(*args: str | Path, code: int = 0) -> dict[str, Any]:
    """``washout check --format json ARGS`` (exiting ``code``) as a dict."""
    proc = washout("check", "--format", "json", *args, check=False)
    assert proc.returncode == code, proc.stderr
    return json.loads(proc.stdout)


def items(document: dict[str, Any], worker: int = 0) -> dict[str, dict[str, Any]]:
    return {i["name"]: i for i in document["workers"][worker]["items"]}


def test_an_untuned_machine_gets_each_items_advice(tmp_path: Path) -> None:
    """Every item of a tree with something to say says it, with the value as laid out and
    the file it read; processes are not laid out, so busy is not available and says why."""
    root = lay_out(
        tmp_path,
        {
            f"{CPU}/cpu3/cpufreq/scaling_governor": "performance",
            "proc/sys/kernel/randomize_va_space": "0",
            "proc/loadavg": "2.50 1.20 0.80 3/301 4242",
            "sys/class/thermal/thermal_zone0/temp": "89000",
            f"{CPU}/cpu2/thermal_throttle/package_throttle_count": "17",
            "sys/devices/system/clocksource/clocksource0/current_clocksource": "hpet",
        },
    )
    found = items(check("--root", root))
    assert list(found) == list(JUDGES)
    expected = {
        "governor": ("advice", "mixed"),
        "frequency": ("advice", "scaling"),
        "turbo": ("advice", "on"),
        "smt": ("advice", "on"),
        "aslr": ("advice", "0"),
        "isolated": ("advice", "none"),
        "nohz_full": ("ok", "none"),
        "load": ("advice", "2.50"),
        "busy": ("not available", None),
        "swap": ("advice", "on"),
        "thermal": ("advice", "89.0"),
        "throttling": ("advice", "17"),
        "perf_sample_rate": ("advice", "100000"),
        "rapl": ("ok", "readable"),
        "clocksource": ("advice", "hpet"),
    }
    for name, (verdict, value) in expected.items():
        assert (found[name]["verdict"], found[name]["value"]) == (verdict, value), found[name]
        assert bool(found[name]["advice"]) == (verdict == "advice"), found[name]
    assert found["governor"]["state"] == "powersave on CPUs 0-2; performance on CPU 3"
    assert found["frequency"]["state"] == "800-4200 MHz on CPUs 0-3 (driver intel_pstate)"
    assert found["turbo"]["state"] == f"on ({root}/{CPU}/intel_pstate/no_turbo = 0)"
    assert "CPU 2: 17 package throttle events" in found["throttling"]["state"]
    assert "zone 0 is 89.0 C, its passive trip point 95.0 C" in found["thermal"]["state"]
    assert found["swap"]["state"] == "1 area, 8191 MiB, 0 MiB used"
    assert found["rapl"]["state"] == "2 zones readable: package-0, core"
    assert f"write it to {root}/sys/devices/system/clocksource" in found["clocksource"]["advice"]
    assert found["busy"]["state"] == f"no process under {root}/proc"
    assert {i: found[i]["tunable"] for i in found if found[i]["tunable"]} == {
        "governor": True,
        "frequency": True,
        "turbo": True,
        "aslr": True,
        "perf_sample_rate": True,
    }


def test_a_tuned_machine_is_ok_and_missing_files_are_not_available(tmp_path: Path) -> None:
    """A tree as --tune and the administrator leave it is ok item by item; a tree without
    cpufreq, boost control, thermal zones or RAPL (a VM's) says each is not available and
    names the path it looked for, never a guess."""
    tuned = {f"{CPU}/cpu{n}/cpufreq/scaling_governor": "performance" for n in range(4)}
    tuned |= {f"{CPU}/cpu{n}/cpufreq/scaling_min_freq": "4200000" for n in range(4)}
    tuned |= {
        f"{CPU}/intel_pstate/no_turbo": "1",
        f"{CPU}/smt/control": "off",
        f"{CPU}/isolated": "2-3",
        f"{CPU}/nohz_full": "2-3",
        f"{CPU}/cpu0/cpufreq/scaling_driver": "acpi-cpufreq",
        **{f"{CPU}/cpu{n}/cpufreq/scaling_driver": "acpi-cpufreq" for n in range(1, 4)},
        "proc/cmdline": "ro isolcpus=domain,2-3 nohz_full=2-3 rcu_nocbs=2-3",
        "proc/swaps": SWAPS_HEADER,
        "proc/sys/kernel/perf_event_max_sample_rate": "1",
    }
    found = items(check("--root", lay_out(tmp_path / "tuned", tuned)))
    assert {n: i["verdict"] for n, i in found.items() if n != "busy"} == {
        n: "ok" for n in JUDGES if n != "busy"
    }
    assert found["isolated"]["value"] == "2-3" and found["nohz_full"]["value"] == "2-3"
    assert found["frequency"]["state"] == "min=max=4200 MHz on CPUs 0-3 (driver acpi-cpufreq)"
    assert found["perf_sample_rate"]["state"] == "perf samples at most 1 per second"

    gone: dict[str, str | None] = {p: None for p in (f"{CPU}/intel_pstate/no_turbo",)}
    vm = lay_out(tmp_path / "vm", gone, cpus=0)
    for path in ("sys/class/thermal", "sys/class/powercap"):
        subprocess.run(["rm", "-r", str(vm / path)], check=True)
    found = items(check("--root", vm))
    for name in ("governor", "frequency", "turbo", "thermal", "throttling", "rapl"):
        assert found[name]["verdict"] == "not available" and found[name]["value"] is None
    assert found["governor"]["state"].startswith(f"no cpufreq under {vm}/{CPU}/cpu*/cpufreq")
    assert found["rapl"]["state"] == f"no intel-rapl zone under {vm}/sys/class/powercap " + (
        "(no RAPL here, as in a VM)"
    )


def test_tune_then_reset_in_another_process_gives_every_file_back(tmp_path: Path) -> None:
    """--tune writes what pyperf's tune writes and records what it replaced on the machine;
    a second tune keeps the machine's own values; --reset, another process, writes them back
    byte for byte and removes the record; a reset without a record says so."""
    root = lay_out(tmp_path, {"proc/sys/kernel/randomize_va_space": "1"})
    before = snapshot(root)
    tuned = check("--tune", "--root", root)
    worker = tuned["workers"][0]
    assert tuned["action"] == "tune" and not tuned["failed"]
    assert {a["path"].removeprefix(f"{root}/") for a in worker["actions"]} == TUNABLE
    assert all(a["outcome"] == "done" for a in worker["actions"])
    assert [a["item"] for a in worker["actions"]][:2] == ["perf_sample_rate", "aslr"]
    assert worker["actions"][-1]["item"] == "turbo"  # after the governor, as pyperf orders it
    after = items(tuned)
    assert {n: after[n]["verdict"] for n in ("governor", "frequency", "turbo", "aslr")} == {
        "governor": "ok",
        "frequency": "ok",
        "turbo": "ok",
        "aslr": "ok",
    }
    record = root / FILES["record"].lstrip("/")
    assert f"recorded in {record}" in worker["note"]
    first = json.loads(record.read_text())
    assert {w["previous"] for w in first["writes"] if w["item"] == "aslr"} == {"1"}

    (root / "proc/sys/kernel/randomize_va_space").write_text("0\n")  # changed since: tuned again
    again = check("--tune", "--root", root)["workers"][0]["actions"]
    assert [(a["item"], a["before"]) for a in again] == [("aslr", "0")]
    assert json.loads(record.read_text()) == first  # the machine's own value kept

    reset = check("--reset", "--root", root)
    assert {a["outcome"] for a in reset["workers"][0]["actions"]} == {"done"}
    assert "removed" in reset["workers"][0]["note"]
    assert snapshot(root) == before
    assert not record.exists()
    nothing = check("--reset", "--root", root)["workers"][0]
    assert nothing["actions"] == [] and nothing["note"].startswith("nothing to reset")


def test_a_tune_killed_halfway_is_reset_by_a_later_process(tmp_path: Path) -> None:
    """The record is whole before the first write: a tune SIGKILLed while it writes leaves
    a record from which a new process restores every value written. The turbo file, written
    last, is a FIFO that answers the check's read once, so tune blocks on it."""
    root = lay_out(tmp_path)
    before = snapshot(root)
    turbo = root / CPU / "intel_pstate/no_turbo"
    turbo.unlink()
    os.mkfifo(turbo)
    answer = threading.Thread(target=turbo.write_text, args=("0\n",), daemon=True)
    answer.start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "check", "--tune", "--root", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    governor = root / CPU / "cpu3/cpufreq/scaling_governor"
    wait_for(lambda: governor.read_text() == "performance\n", 30, "tune never wrote the governor")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    turbo.unlink()
    turbo.write_text("0\n")  # the file as it was: turbo was never written
    reset = check("--reset", "--root", root)["workers"][0]["actions"]
    assert {(a["item"], a["outcome"]) for a in reset} >= {
        ("governor", "done"),
        ("turbo", "unchanged"),
    }
    assert snapshot(root) == before


def test_a_value_reset_cannot_write_stays_recorded_for_the_next_reset(tmp_path: Path) -> None:
    root = lay_out(tmp_path)
    before = snapshot(root)
    check("--tune", "--root", root)
    governor = root / CPU / "cpu0/cpufreq/scaling_governor"
    governor.unlink()
    governor.mkdir()  # a write there fails, as a sysfs file the kernel refuses would
    failed = check("--reset", "--root", root, code=3)["workers"][0]
    (bad,) = [a for a in failed["actions"] if a["outcome"] == "failed"]
    assert bad["path"] == str(governor) and "Is a directory" in bad["reason"]
    assert "1 value(s) could not be restored, kept in" in failed["note"]
    record = json.loads((root / FILES["record"].lstrip("/")).read_text())
    assert record["writes"] == [
        {"item": "governor", "path": str(governor), "previous": "powersave"}
    ]
    governor.rmdir()
    governor.write_text("performance\n")
    again = check("--reset", "--root", root)["workers"][0]["actions"]
    assert [(a["item"], a["outcome"]) for a in again] == [("governor", "done")]
    assert snapshot(root) == before


def test_a_reboot_since_tune_drops_the_record_and_an_unwritable_record_stops_tune(
    tmp_path: Path,
) -> None:
    root = lay_out(tmp_path / "rebooted")
    check("--tune", "--root", root)
    tuned = snapshot(root)
    (root / FILES["boot_id"].lstrip("/")).write_text("another-boot\n")
    reset = check("--reset", "--root", root)["workers"][0]
    assert reset["actions"] == [] and "booted since --tune" in reset["note"]
    assert snapshot(root) == {**tuned, FILES["boot_id"].lstrip("/"): b"another-boot\n"}
    assert not (root / FILES["record"].lstrip("/")).exists()

    root = lay_out(tmp_path / "unrecorded")
    (root / "run").write_text("a file, not a directory\n")
    before = snapshot(root)
    failed = check("--tune", "--root", root, code=3)
    error = failed["workers"][0]["error"]
    assert error.startswith(f"local: cannot record the values --tune would replace in {root}/run/")
    assert error.endswith("nothing changed")
    assert snapshot(root) == before


def test_this_machine_gets_a_verdict_per_item() -> None:
    """What CI prints: ``washout check`` on this machine, as it is, a line per item with one
    of the three verdicts, and exit 0; --format json has the same items."""
    proc = washout("check")
    lines = proc.stdout.splitlines()
    assert lines[0] == "local (localhost)"
    for name in JUDGES:
        line = next(line for line in lines if line.split()[:1] == [name])
        verdict = line.split(maxsplit=1)[1]
        assert verdict.startswith(VERDICTS), line
    assert lines[-1].endswith("not available") and " ok, " in lines[-1]
    result = api.check()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.root = "/elsewhere"  # type: ignore[misc]
    document = result.to_dict()
    assert [i["name"] for i in document["workers"][0]["items"]] == list(JUDGES)
    assert all(i["verdict"] in VERDICTS for i in document["workers"][0]["items"])
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    assert items(document)["aslr"]["value"] == aslr
    assert isinstance(result, api.MachineCheck)  # exported, a table (issue 30, point 7)
    table = result.to_frame()
    assert list(table["name"]) == list(JUDGES) and set(table["worker"]) == {"local"}
    assert "<table" in result._repr_html_()


def test_busy_names_a_process_that_spins_on_this_machine() -> None:
    spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        busy = items(check())["busy"]
    finally:
        spinner.kill()
        spinner.wait()
    assert busy["verdict"] == "advice" and float(busy["value"]) >= 20
    assert f"sh (pid {spinner.pid})" in busy["state"]


@pytest.mark.skipif(os.geteuid() != 0, reason="writing /proc/sys needs root")
def test_tune_and_reset_on_this_machine_leave_it_as_found() -> None:
    """Where root can write (here: perf's sample rate; ASLR when not already full), tune
    writes and records, reset puts back what was there and removes the record."""
    record = Path(FILES["record"])
    if record.exists():
        pytest.skip(f"{record} exists: a tune of this machine is in force")
    paths = [Path(FILES[k]) for k in ("sample_rate", "aslr")]
    found = [p.read_text() for p in paths]
    try:
        tuned = api.check(tune=True).workers[0]
        assert tuned.error is None and all(a.outcome == "done" for a in tuned.actions)
        assert {a.path for a in tuned.actions} <= {str(p) for p in paths}
        assert tuned.item("perf_sample_rate").value == "1"
        assert record.exists() == bool(tuned.actions)
    finally:
        reset = api.check(reset=True).workers[0]
    assert reset.error is None and all(a.outcome != "failed" for a in reset.actions)
    assert [p.read_text() for p in paths] == found
    assert not record.exists()


def test_bad_options_and_specs_are_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.toml"
    spec.write_text('[cluster]\nkind = "slurm"\n[[test]]\nname = "a"\ncommand = "true"\n')
    for args, message in (
        (["--tune", "--reset"], "tune and reset: give one"),
        (["--format", "xml"], "--format = 'xml': unknown format"),
        ([str(spec)], f"{spec}: its workers come from [cluster] and exist only once allocated"),
        ([str(tmp_path / "none.toml")], "none.toml: cannot read spec"),
    ):
        proc = washout("check", *args, check=False)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr


def _spec(tmp_path: Path, require: list[str]) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(
        f"[experiment]\nruns = 1\nrequire = {json.dumps(require)}\n"
        '[[test]]\nname = "a"\ncommand = "true"\n'
    )
    return path


def test_run_and_resume_refuse_a_machine_that_misses_a_requirement(tmp_path: Path) -> None:
    """One line naming the worker, the item, the value wanted and the value found; the
    store keeps the refusal and no trial, and resume refuses the same way; a spec this
    machine meets runs."""
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    other = "0" if aslr != "0" else "2"
    db = tmp_path / "refused.db"
    proc = washout("run", _spec(tmp_path, ["load>=0", f"aslr={other}"]), "--db", db, check=False)
    line = (
        f"washout: error: worker local does not meet [experiment] require aslr={other}: "
        f"found '{aslr}'"
    )
    assert proc.returncode == 2 and proc.stderr.splitlines()[-1].startswith(line), proc.stderr
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM trial").fetchone() == (0,)
        events = c.execute("SELECT kind, message FROM event WHERE kind = 'refused'").fetchall()
    assert len(events) == 1 and f"require aslr={other}" in events[0][1]
    again = washout("resume", db, check=False)
    assert again.returncode == 2 and again.stderr.splitlines()[-1].startswith(line)

    met = washout(
        "run", _spec(tmp_path, [f"aslr={aslr}", "clocksource!=nosuch"]), "--db", tmp_path / "met.db"
    )
    assert "2 trials" in met.stdout + met.stderr


def test_validate_names_the_file_field_and_value_of_a_bad_requirement(tmp_path: Path) -> None:
    for require, problem in (
        ("governor=performace", "governor is one of performance, powersave"),
        ("turbo<1", "turbo takes = or != (< compares numbers)"),
        ("load<x", "load is a number, not 'x'"),
        ("isolated=2-", "isolated is a CPU list or none"),
        ("temperature<70", "unknown item 'temperature' (items: governor, frequency"),
        ("governor", "expected ITEM=VALUE"),
    ):
        spec = _spec(tmp_path, ["aslr=2", require])
        proc = washout("validate", spec, check=False)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert f"{spec}: experiment.require[1] = {require!r}: {problem}" in proc.stderr
