"""The environment check before every run, read in-process on the local machine: the moment's
facts as a fresh read of their files gives them (while the files are held open, parsed
only when they change, the uptime taken from the boot-time clock and the boot id read once),
and the fingerprint and provenance comparison as the straightforward computation gives them
(while cached)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from washout.harness import environment
from washout.harness.environment import (
    MOMENT_FILES,
    _local_reader,
    _LocalMoment,
    capture,
    check_same,
    file_signature,
    fingerprint,
    fingerprint_items,
    mismatch,
    moment,
    noted_differences,
    read_moment,
)
from washout.harness.executors.base import CommandOptions
from washout.harness.executors.local import LocalExecutor
from washout.harness.spec import ProvenanceSpec


def fresh(key: str) -> str:
    """A moment fact read the plain way: its file opened now, its first line cut to the
    words it keeps ("" if it cannot be read)."""
    path, words = MOMENT_FILES[key]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            line = f.readline()
    except OSError:
        return ""
    return " ".join(line.split()[:words])


def uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def test_the_moment_is_what_a_fresh_read_of_its_files_gives() -> None:
    """Read again and again (files held open, values kept while their bytes stay the same,
    the boot id once, the uptime from CLOCK_BOOTTIME): every fact is what opening its
    file now gives, the load between a read just before and one just after, the uptime
    between /proc/uptime's just before and just after."""
    for _ in range(200):
        before = {key: fresh(key) for key in MOMENT_FILES}
        first = uptime()
        facts = read_moment(ProvenanceSpec(), None)
        last = uptime()
        after = {key: fresh(key) for key in MOMENT_FILES}
        assert set(facts) == set(MOMENT_FILES)
        for key in MOMENT_FILES:
            if key != "uptime_s":
                assert facts[key] in (before[key], after[key]), key
        assert first <= float(facts["uptime_s"]) <= last
        assert len(facts["uptime_s"].partition(".")[2]) == 2  # hundredths, as the file's


def moment_of(files: dict[str, Path]) -> _LocalMoment:
    """A reader of these files (by fact name) instead of the machine's."""
    return _LocalMoment(tuple((key, str(p), str(p.parent)) for key, p in files.items()))


def test_a_file_that_appears_or_changes_is_read_at_the_next_reading(tmp_path: Path) -> None:
    """Missing files read as "" and are looked for again at every reading (two in one
    missing directory, as a VM's cpufreq, one alone); one that appears is read from then
    on, and one changed in place gives its new value."""
    freq, governor = tmp_path / "cpufreq/freq", tmp_path / "cpufreq/governor"
    zone = tmp_path / "zone0/temp"
    reader = moment_of({"frequency_khz": freq, "governor": governor, "temperature_mc": zone})
    assert reader.facts() == {"frequency_khz": "", "governor": "", "temperature_mc": ""}
    governor.parent.mkdir()
    governor.write_text("powersave\n")
    assert reader.facts() == {"frequency_khz": "", "governor": "powersave", "temperature_mc": ""}
    with open(governor, "r+") as f:  # in place, as the kernel's files change
        f.write("performance\n")
    freq.write_text("2000000 extra words\n")
    zone.parent.mkdir()
    zone.write_text("41000\n")
    assert reader.facts() == {
        "frequency_khz": "2000000",  # the words the fact keeps
        "governor": "performance",
        "temperature_mc": "41000",
    }


def test_a_file_whose_read_fails_is_opened_again(tmp_path: Path) -> None:
    """A held file whose read fails (a driver gone, its file made anew) is opened again at
    once: here a directory (open succeeds, read fails) that becomes a file."""
    path = tmp_path / "governor"
    path.mkdir()
    reader = moment_of({"governor": path})
    assert reader.facts() == {"governor": ""}
    path.rmdir()
    path.write_text("schedutil\n")
    assert reader.facts() == {"governor": "schedutil"}


def plain_fingerprint(facts: dict[str, object]) -> str:
    """The fingerprint computed from scratch: the fingerprinted items, sorted, as JSON,
    hashed."""
    blob = json.dumps(fingerprint_items(facts), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def test_fingerprint_and_mismatch_as_computed_from_scratch() -> None:
    """Cached by the items' values, the fingerprint is still the hash of today's items
    (whatever their type: compared as text); only the fingerprinted facts count (a moment
    fact does not), role-prefixed ones too; a changed or missing item is named."""
    facts: dict[str, object] = {
        "kernel": "Linux 6.1",
        "cores": 2,
        "server@memory_kb": "1000",
        "file:server": "abc",
        "command:git rev-parse HEAD": "1234",
        "uptime_s": "5.00",
        "stat:server": "1 2 3 4 5",
    }
    seen = set()
    changes = ({}, {"uptime_s": "6.00"}, {"file:server": "abd"}, {"cores": ["3"]}, {"cores": "3"})
    for change in changes:
        facts |= change
        assert fingerprint(facts) == plain_fingerprint(facts)
        seen.add(fingerprint(facts))
    assert len(seen) == 4  # the moment's uptime changes no fingerprint; any value is text
    base = {**facts, "cores": 3}
    assert mismatch("a", base, "b", dict(facts)) is None
    assert mismatch("a", base, "b", {**facts, "cores": "3", "load": "1 1 1"}) is None
    assert mismatch("a", base, "b", {**facts, "file:server": "new"}) == (
        "file:server differs: a has 'abd', b has 'new'"
    )
    del facts["command:git rev-parse HEAD"]
    assert mismatch("a", base, "b", facts) == (
        "command:git rev-parse HEAD differs: a has '1234', b has 'absent'"
    )


def test_no_moment_fact_is_fingerprinted() -> None:
    """The check before a run works the fingerprint and the comparison with the start out
    again only after a whole capture (washout.harness.engine): that holds only while the
    facts read between captures, the moment's and the files' signatures, are none of the
    fingerprinted ones."""
    between = {key: "changed" for key in MOMENT_FILES} | {"stat:server": "changed"}
    assert fingerprint_items(between) == {}


def test_the_local_moment_is_read_at_the_end_of_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a check has read the local moment, the executor reads it again after every
    command, outside its timing, as an SSH worker's runner does: the next check takes
    that read (the end of the previous run's last trial) and reads nothing itself, so the
    run's first trial follows the same work as every other. Each read serves one check;
    a command that ends without a start, or another reader, leaves none to take.

    The budget for a read is lifted: this is the mechanism, and on a busy machine the one
    cold first read can take longer than READ_AFTER_SECONDS (a CI run saw it), which the
    next test covers."""
    monkeypatch.setattr(environment, "READ_AFTER_SECONDS", 1.0)
    built = tmp_path / "server"
    built.write_text("v1")
    provenance = ProvenanceSpec(files=["server"])
    executor = LocalExecutor()

    async def session() -> list[dict[str, str]]:
        run = functools.partial(executor.run, options=CommandOptions(timeout=10))
        first = await moment(executor, provenance, str(tmp_path))  # read now, then after each
        assert (await run(f"echo v2 > {built}")).status == "ok"
        changed_by_the_command = file_signature(built)
        built.write_text("v3, after the command's end")
        taken = await moment(executor, provenance, str(tmp_path))
        assert taken["stat:server"] == changed_by_the_command
        again = await moment(executor, provenance, str(tmp_path))  # no command since
        assert again["stat:server"] == file_signature(built)
        unpinned = await executor.run("true", CommandOptions(timeout=10, cpus="4095"))
        assert unpinned.status != "ok"  # never started: nothing read after it
        assert executor.take_read(_local_reader(("server",), str(tmp_path))) is None
        await run("true")
        other = await moment(executor, ProvenanceSpec(), str(tmp_path))  # another reader
        assert "stat:server" not in other
        return [first, taken, again, other]

    facts = asyncio.run(session())
    assert facts[0]["stat:server"] != facts[1]["stat:server"] != facts[2]["stat:server"]
    assert all(set(MOMENT_FILES) <= set(f) for f in facts)


def test_a_moment_slow_to_read_is_read_before_each_run_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine whose moment takes longer to read than READ_AFTER_SECONDS at its fastest
    (an ACPI thermal zone) is not read after every command, which would lengthen every
    trial, but before each run as a fresh read; once its reads are fast again, after every
    command again. Here the budget is set below any read rather than the read slowed."""
    executor = LocalExecutor()
    provenance = ProvenanceSpec(files=["built"])
    (tmp_path / "built").write_text("v1")
    reader = _local_reader(("built",), str(tmp_path))

    async def check_then_command() -> dict[str, str] | None:
        await moment(executor, provenance, str(tmp_path))
        assert (await executor.run("true", CommandOptions(timeout=10))).status == "ok"
        return executor.take_read(reader)

    monkeypatch.setattr(environment, "READ_AFTER_SECONDS", 0.0)
    assert asyncio.run(check_then_command()) is None
    monkeypatch.setattr(environment, "READ_AFTER_SECONDS", 1.0)
    assert asyncio.run(check_then_command()) is not None
    assert 0 < reader.fastest < 1.0


def test_the_locale_commands_run_in_is_recorded_not_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker's capture records the locale its commands inherit (a command's own work
    depends on it), without making it a fact workers must agree on."""
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    facts = asyncio.run(capture(LocalExecutor(), ProvenanceSpec(), None))
    assert "LANG=C.UTF-8" in facts["locale"] and "LC_ALL= " in facts["locale"]
    assert "locale" not in fingerprint_items(facts)


def test_a_locale_that_differs_is_noted_never_refused() -> None:
    """A locale that differs between workers (a role's too) is said in one line naming both
    values; a capture without one (a store made before it was recorded) is not compared,
    and the fingerprinted facts decide alone whether the experiment may go on."""
    a = {"kernel": "Linux 6", "locale": "LC_ALL= LC_CTYPE= LC_COLLATE= LANG=C.UTF-8"}
    b = {"kernel": "Linux 6", "locale": "LC_ALL= LC_CTYPE= LC_COLLATE= LANG="}
    (line,) = noted_differences([("w1", a), ("w2", b)], "between workers")
    assert line.startswith("locale differs between workers: w1 has 'LC_ALL=")
    assert "LANG=C.UTF-8'" in line and "w2 has 'LC_ALL= LC_CTYPE= LC_COLLATE= LANG='" in line
    check_same([("w1", a), ("w2", b)], "between workers")  # not a mismatch
    older = {"kernel": "Linux 6"}
    assert noted_differences([("then", older), ("now", b)], "since it started") == []
    assert noted_differences([("w1", a), ("w2", dict(a))], "between workers") == []
    roles = [("g1", {"server@locale": "LANG=C"}), ("g2", {"server@locale": "LANG=C.UTF-8"})]
    (line,) = noted_differences(roles, "between workers")
    assert line.startswith("server@locale differs between workers: g1 has 'LANG=C'")


def test_a_resume_in_another_locale_says_so(tmp_path: Path) -> None:
    """An experiment stopped under LANG=C.UTF-8 and resumed without LANG: the resume's
    summary and the store's events say, once, that the locale differs since the experiment
    started, and the experiment completes."""
    from conftest import washout
    from test_robustness import start, wait_for_trials, write_spec

    spec = (
        '[experiment]\nname = "loc"\nruns = 400\nseed = 1\n[[test]]\nname = "a"\ncommand = "true"\n'
    )
    db = tmp_path / "loc.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k != "LANG"}
    proc = start(
        "run",
        write_spec(tmp_path / "s.toml", spec),
        "--db",
        db,
        "--quiet",
        env={**env, "LANG": "C.UTF-8"},
    )
    try:
        wait_for_trials(db, "status = 'ok'")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130
    done = washout("resume", db, "--quiet", env=env, timeout=300)
    # Without LANG, Python itself sets LC_CTYPE=C.UTF-8 for its children (PEP 538).
    note = (
        "locale differs since the experiment started: local when the experiment started has "
        "'LC_ALL= LC_CTYPE= LC_COLLATE= LANG=C.UTF-8', local now has 'LC_ALL= LC_CTYPE="
    )
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("Note: locale")]
    assert line.startswith(f"Note: {note}") and " LANG='; commands that load it" in line
    events = sqlite3.connect(db).execute("SELECT message FROM event WHERE kind = 'differs'")
    assert [m for (m,) in events] == [line.removeprefix("Note: ")]
