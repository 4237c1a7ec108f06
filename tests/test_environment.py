"""The environment check before every run, read in-process on the local machine: the moment's
facts as a fresh read of their files gives them (while the files are held open, parsed
only when they change, the uptime taken from the boot-time clock and the boot id read once),
and the fingerprint and provenance comparison as the straightforward computation gives them
(while cached)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from washout.harness.environment import (
    MOMENT_FILES,
    _LocalMoment,
    fingerprint,
    fingerprint_items,
    mismatch,
    read_moment,
)
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
