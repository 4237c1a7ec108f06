"""The machine check's judgements where a laid-out tree cannot reach them (the tests run as
root, so a user's limits need the uid fact), the process sample's arithmetic, and the
``require`` grammar."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from washout.harness.machine import (
    CheckItem,
    busy,
    clocksource,
    isolated,
    judge,
    nohz_full,
    parse_facts,
    parse_requirement,
    perf_event_paranoid,
    rapl,
    unmet,
)
from washout.harness.pinning import format_cpus, parse_cpus


def test_a_user_limited_by_perf_event_paranoid_is_told_what_perf_counts() -> None:
    user = {"uid": ["1000"], "paranoid": ["2"]}
    item = perf_event_paranoid(user, "/")
    assert (item.verdict, item.value) == ("advice", "2")
    assert "user space only (2)" in item.advice and "write 1 to /proc/sys/kernel" in item.advice
    assert perf_event_paranoid({**user, "paranoid": ["4"]}, "/").state == (
        "4: users may not use perf at all (a distribution's patch)"
    )
    assert perf_event_paranoid({**user, "paranoid": ["1"]}, "/").verdict == "ok"
    assert perf_event_paranoid({**user, "uid": ["0"]}, "/").verdict == "ok"
    assert perf_event_paranoid({"uid": ["0"]}, "/x").state == (
        "cannot read /x/proc/sys/kernel/perf_event_paranoid"
    )


def test_rapl_zones_a_user_cannot_read_are_advice_not_absence() -> None:
    item = rapl({"rapl_zone": ["intel-rapl:0", "intel-rapl:1"]}, "/")
    assert (item.verdict, item.value) == ("advice", "unreadable")
    assert "CVE-2020-8694" in item.advice


def test_nohz_full_and_isolation_advice() -> None:
    base = {"nohz_full": ["2-3"], "isolated": ["2-3"], "cmdline": ["rcu_nocbs=2-3"]}
    pstate = nohz_full({**base, "driver:0": ["intel_pstate"]}, "/")
    assert pstate.verdict == "advice" and "Red Hat bug 1378529" in pstate.advice
    assert nohz_full({**base, "driver:0": ["acpi-cpufreq"]}, "/").verdict == "ok"
    ticking = nohz_full({**base, "nohz_full": ["(null)"]}, "/")
    assert ticking.verdict == "advice" and ticking.advice.startswith("boot with nohz_full=2-3")
    no_rcu = isolated({"isolated": [""], "cmdline": ["ro isolcpus=managed_irq,domain,1,3-5"]}, "/")
    assert (no_rcu.verdict, no_rcu.value) == ("advice", "1,3-5")
    assert "rcu_nocbs=1,3-5" in no_rcu.advice
    assert isolated({"online": ["0"]}, "/").state == "a single CPU: nothing to isolate"


def test_a_clock_source_without_tsc_says_so() -> None:
    item = clocksource({"clocksource": ["acpi_pm"], "clocksources": ["hpet acpi_pm"]}, "/")
    assert item.verdict == "advice" and "tsc is not available here" in item.advice


def test_busy_shares_come_from_two_readings_of_each_process() -> None:
    """proc(5): utime and stime are fields 14 and 15, counted after the name's last ``)``;
    the check's shell (pid 10), its parent (9) and its children are left out."""

    def stat(pid: int, name: str, parent: int, ticks: int) -> str:
        return f"{pid} ({name}) R {parent} 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 5 0 0"

    facts = {
        "sampled": [""],
        "self": ["10 9"],
        "clk_tck": ["100"],
        "uptime0": ["100.00 1.0"],
        "uptime1": ["102.00 1.0"],
        "stat0": [stat(42, "a (b) c", 1, 1000), stat(10, "sh", 9, 0), stat(11, "sleep", 10, 0)],
        "stat1": [stat(42, "a (b) c", 1, 1150), stat(10, "sh", 9, 500), stat(11, "sleep", 10, 90)],
    }
    item = busy(facts, "/")
    assert (item.verdict, item.value) == ("advice", "75")  # 150 ticks at 100 Hz over 2 s
    assert item.state == "other processes used 75% of one CPU over 2.0 s: a (b) c (pid 42) 75%"
    assert busy({"stat0": facts["stat0"]}, "/").state.startswith("not sampled")


def test_the_probe_output_keeps_repeated_keys_and_tabs_in_values() -> None:
    facts = parse_facts(
        "swap\tFilename\t\tType\nswap\t/dev/sda2\tpartition\nload\t0.1 0.2\nstray\n"
    )
    assert facts == {"swap": ["Filename\t\tType", "/dev/sda2\tpartition"], "load": ["0.1 0.2"]}
    assert all(
        item.verdict == "not available" for item in judge({}, "/") if item.name != "isolated"
    )


@pytest.mark.parametrize(
    ("text", "value", "met"),
    [
        ("governor=performance", "performance", True),
        ("governor=performance", "mixed", False),
        ("governor!=powersave", "performance", True),
        ("load<0.5", "0.41", True),
        ("load < 0.5", "0.5", False),
        ("thermal<=70", "70.0", True),
        ("perf_event_paranoid>=-1", "2", True),
        ("isolated=2-3", "2,3", True),
        ("isolated=none", "none", True),
        ("isolated!=none", "none", False),
        ("clocksource=tsc", "tsc", True),
    ],
)
def test_a_requirement_is_met_by_the_value_found(text: str, value: str, met: bool) -> None:
    req = parse_requirement(text)
    item = CheckItem(req.item, "ok", value, "as found")
    assert req.met_by(item) is met
    assert not req.met_by(CheckItem(req.item, "not available", None, "no file"))


def test_unmet_requirements_name_item_wanted_and_found() -> None:
    items = {"aslr": CheckItem("aslr", "advice", "0", "0: no randomization")}
    assert unmet([parse_requirement("aslr=2")], items) == [
        "require aslr=2: found '0' (0: no randomization)"
    ]
    gone = {"rapl": CheckItem("rapl", "not available", None, "no intel-rapl zone")}
    assert unmet([parse_requirement("rapl=readable")], gone) == [
        "require rapl=readable: found not available (no intel-rapl zone)"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("aslr=nan", "aslr is a number, not 'nan'"),
        ("load<inf", "load is a number, not 'inf'"),
        ("swap=maybe", "swap is one of on, off, not 'maybe'"),
        ("smt>on", "smt takes = or != (> compares numbers)"),
        ("=2", "expected ITEM=VALUE"),
        ("load<1 extra", "expected ITEM=VALUE"),
    ],
)
def test_a_bad_requirement_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_requirement(text)


@given(st.sets(st.integers(0, 300), max_size=40))
def test_a_cpu_list_is_written_as_the_kernel_writes_it(cpus: set[int]) -> None:
    text = format_cpus(cpus)
    assert (parse_cpus(text) if text else set()) == cpus
    assert format_cpus({0, 1, 2, 3, 6, 8, 9}) == "0-3,6,8-9"
