"""What a machine's settings mean for a measurement (pure): the items of ``washout check``,
each with a verdict and advice, and the ``[experiment] require`` of a spec.

The facts are the files the kernel lays out under ``/sys`` and ``/proc``, read on the
worker by :mod:`washout.harness.machine_read` and given here as ``key -> values``; every
path is under a root (``/`` on a real machine, a laid-out tree in the tests), so a message
names the file as read. An item whose files are not there (a VM has no cpufreq, no
thermal zone, no RAPL) is "not available" and says why, never a guess.

Meanings and advice follow pyperf's ``system show/tune/reset`` (pyperf/_system.py:
governor, turbo, ASLR, isolated CPUs with rcu_nocbs, nohz_full, the minimum frequency,
perf's sample rate), BenchExec's systeminfo.py (turbo through ``cpufreq/boost`` or
``intel_pstate/no_turbo``, the throttle counters, swap) and the Linux documentation
(Documentation/admin-guide/sysctl/kernel.rst for ``randomize_va_space`` and
``perf_event_paranoid``; Documentation/ABI/testing/sysfs-devices-system-cpu for
``smt/control``, ``isolated`` and ``nohz_full``).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from washout.harness.pinning import format_cpus, parse_cpus
from washout.stats.frames import FrameView

if TYPE_CHECKING:
    import pandas as pd

Facts = Mapping[str, list[str]]
"""What a worker's files held: fact name -> its values (most have one; per-CPU facts are
named ``governor:3``)."""
Verdict = Literal["ok", "advice", "not available"]

SYS_CPU = "/sys/devices/system/cpu"
FILES = {
    "online": f"{SYS_CPU}/online",
    "no_turbo": f"{SYS_CPU}/intel_pstate/no_turbo",
    "boost": f"{SYS_CPU}/cpufreq/boost",
    "smt": f"{SYS_CPU}/smt/control",
    "isolated": f"{SYS_CPU}/isolated",
    "nohz_full": f"{SYS_CPU}/nohz_full",
    "cmdline": "/proc/cmdline",
    "aslr": "/proc/sys/kernel/randomize_va_space",
    "load": "/proc/loadavg",
    "swaps": "/proc/swaps",
    "paranoid": "/proc/sys/kernel/perf_event_paranoid",
    "sample_rate": "/proc/sys/kernel/perf_event_max_sample_rate",
    "clocksource": "/sys/devices/system/clocksource/clocksource0/current_clocksource",
    "clocksources": "/sys/devices/system/clocksource/clocksource0/available_clocksource",
    "boot_id": "/proc/sys/kernel/random/boot_id",
    "uptime": "/proc/uptime",
    "record": "/run/washout/tune.json",
}
"""The single files the check reads, by fact name, as paths under the root (``record`` is
where ``--tune`` keeps the values it replaced)."""
PER_CPU = {
    "governor": "cpufreq/scaling_governor",
    "min_freq": "cpufreq/scaling_min_freq",
    "max_freq": "cpufreq/scaling_max_freq",
    "driver": "cpufreq/scaling_driver",
    "throttle_core": "thermal_throttle/core_throttle_count",
    "throttle_package": "thermal_throttle/package_throttle_count",
}
"""The files of each ``cpuN`` directory the check reads (fact ``governor:N``...)."""
THERMAL = "/sys/class/thermal"
POWERCAP = "/sys/class/powercap"

GOVERNORS = ("performance", "powersave", "userspace", "ondemand", "conservative", "schedutil")
"""The kernel's cpufreq governors (Documentation/admin-guide/pm/cpufreq.rst)."""
STEADY_CLOCKS = ("tsc", "kvm-clock", "arch_sys_counter", "hyperv_clocksource_tsc_page")
"""Clock sources the vDSO reads without a system call (x86 TSC, KVM's and Hyper-V's
paravirtual clocks, the arm64 architected timer)."""
LOAD_LIMIT = 1.0
"""A 1-minute load average from which the check advises: a machine at rest is near 0, and
1 is one task's worth of runnable work beside the trials."""
BUSY_LIMIT = 10.0
"""Percent of one CPU other processes may use during the check's sample before it advises."""
BUSY_SHOWN = 5.0
"""Percent of one CPU from which a process is named (the busiest ten at most)."""
THERMAL_MARGIN = 10.0
"""Degrees C below the lowest passive, hot or critical trip point from which the check
advises: past a passive trip point the kernel slows the CPU to cool it."""


def under(root: str, path: str) -> str:
    """``path`` (absolute) under ``root``: ``/x`` + ``/proc/loadavg``."""
    return root.rstrip("/") + path


def cpu_file(cpu: int, key: str) -> str:
    """The path of one CPU's file (:data:`PER_CPU`), under no root."""
    return f"{SYS_CPU}/cpu{cpu}/{PER_CPU[key]}"


@dataclass(frozen=True)
class CheckItem:
    """One item of a machine check: its ``value`` (None when not available), the
    ``verdict``, what was found in words (``state``; or why it is not available), the
    ``advice`` when the verdict is "advice", and whether ``--tune`` sets it."""

    name: str
    verdict: Verdict
    value: str | None
    state: str
    advice: str = ""
    tunable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TuneAction:
    """One write of ``--tune`` or ``--reset``: the file, its value before and the value
    written; ``outcome`` is ``done``, ``unchanged`` (it already held it) or ``failed``
    (``reason`` says why: the shell's error, or what the file reads after the write)."""

    item: str
    path: str
    before: str
    after: str
    outcome: Literal["done", "unchanged", "failed"]
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WorkerCheck:
    """One machine's check: its items, what ``--tune``/``--reset`` wrote there and a note
    on it, or the ``error`` that kept it from being read."""

    worker: str
    host: str
    items: tuple[CheckItem, ...] = ()
    actions: tuple[TuneAction, ...] = ()
    note: str = ""
    error: str | None = None

    def item(self, name: str) -> CheckItem:
        """The item called ``name`` (KeyError if the check has none)."""
        for found in self.items:
            if found.name == name:
                return found
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "host": self.host,
            "items": [i.to_dict() for i in self.items],
            "actions": [a.to_dict() for a in self.actions],
            "note": self.note,
            "error": self.error,
        }


@dataclass(frozen=True)
class MachineCheck(FrameView):
    """What ``washout check`` found (``action`` check), or did and then found (``tune``,
    ``reset``), on each machine: this one, or each ``[[worker]]`` of a spec."""

    action: Literal["check", "tune", "reset"]
    root: str
    workers: tuple[WorkerCheck, ...]

    @property
    def failed(self) -> bool:
        """Whether a machine could not be read or a write of tune or reset failed."""
        return any(
            w.error is not None or any(a.outcome == "failed" for a in w.actions)
            for w in self.workers
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per machine and item (``worker``, ``host``, then the item's fields),
        what ``washout check`` prints."""
        import pandas as pd

        return pd.DataFrame(
            [
                {"worker": w.worker, "host": w.host, **item.to_dict()}
                for w in self.workers
                for item in w.items
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "root": self.root,
            "failed": self.failed,
            "workers": [w.to_dict() for w in self.workers],
        }


def parse_facts(text: str) -> dict[str, list[str]]:
    """``key<TAB>value`` lines as key -> values (in order; a key may repeat)."""
    facts: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            facts.setdefault(key, []).append(value)
    return facts


def one(facts: Facts, key: str) -> str | None:
    """A fact's (first) value, stripped; None when the worker had no such file."""
    values = facts.get(key)
    return values[0].strip() if values else None


def numbered(facts: Facts, key: str) -> dict[int, str]:
    """``key:N`` facts by N (a CPU, a thermal zone)."""
    found = {}
    for name, values in facts.items():
        prefix, _, cpu = name.partition(":")
        if prefix == key and cpu.isdigit() and values:
            found[int(cpu)] = values[0].strip()
    return dict(sorted(found.items()))


def _by_value(per_cpu: dict[int, str]) -> str:
    """``performance on CPUs 0-3; powersave on CPU 4``."""
    groups: dict[str, set[int]] = {}
    for cpu, value in per_cpu.items():
        groups.setdefault(value, set()).add(cpu)
    return "; ".join(
        f"{value} on CPU{'s' if len(cpus) > 1 else ''} {format_cpus(cpus)}"
        for value, cpus in groups.items()
    )


def _judged(
    name: str, ok: bool, value: str, state: str, advice: str, tunable: bool = False
) -> CheckItem:
    """The item with its verdict: ``ok``, else ``advice`` (kept only then)."""
    return CheckItem(name, "ok" if ok else "advice", value, state, "" if ok else advice, tunable)


def _unavailable(name: str, why: str) -> CheckItem:
    return CheckItem(name, "not available", None, why)


def _no_cpufreq(name: str, root: str) -> CheckItem:
    return _unavailable(
        name,
        f"no cpufreq under {under(root, SYS_CPU)}/cpu*/cpufreq (a VM, or no cpufreq "
        "driver): the frequency can be neither read nor set here",
    )


def _cpus(facts: Facts) -> set[int] | None:
    """The online CPUs, or None when the list cannot be read."""
    try:
        return parse_cpus(one(facts, "online") or "")
    except ValueError:
        return None


def governor(facts: Facts, root: str) -> CheckItem:
    """pyperf's CPUGovernor: every CPU on ``performance``, else "Use CPU scaling governor
    'performance'"."""
    per_cpu = numbered(facts, "governor")
    if not per_cpu:
        return _no_cpufreq("governor", root)
    unread = [cpu for cpu, value in per_cpu.items() if not value]
    if unread:
        return _unavailable(
            "governor", f"cannot read {under(root, cpu_file(unread[0], 'governor'))}"
        )
    distinct = set(per_cpu.values())
    value = distinct.pop() if len(distinct) == 1 else "mixed"
    return _judged(
        "governor",
        value == "performance",
        value,
        _by_value(per_cpu),
        "use the performance governor on every CPU (pyperf's advice): the others move the "
        "frequency with the load, so a trial's speed depends on what ran just before it; "
        "`washout check --tune` sets it",
        tunable=True,
    )


def frequency(facts: Facts, root: str) -> CheckItem:
    """pyperf's CPUFrequency: ``scaling_min_freq`` against ``scaling_max_freq`` per CPU;
    its tune raises the minimum to the maximum, so the CPU does not slow down between
    bursts of work."""
    lows, highs = numbered(facts, "min_freq"), numbered(facts, "max_freq")
    if not lows or not highs:
        return _no_cpufreq("frequency", root)
    try:
        ranges = {cpu: (int(lows[cpu]) // 1000, int(highs[cpu]) // 1000) for cpu in lows}
    except (KeyError, ValueError):
        return _unavailable(
            "frequency",
            f"cannot read scaling_min_freq and scaling_max_freq of every CPU under "
            f"{under(root, SYS_CPU)}",
        )
    words = {
        cpu: f"min=max={hi} MHz" if lo == hi else f"{lo}-{hi} MHz"
        for cpu, (lo, hi) in ranges.items()
    }
    driver = one(facts, "driver:" + str(min(ranges)))
    state = _by_value(words) + (f" (driver {driver})" if driver else "")
    fixed = all(lo == hi for lo, hi in ranges.values())
    return _judged(
        "frequency",
        fixed,
        "fixed" if fixed else "scaling",
        state,
        "the frequency moves between its minimum and maximum, so a trial after an idle "
        "moment starts slower; raise scaling_min_freq to scaling_max_freq (pyperf's tune "
        "does the same with the hardware maximum); `washout check --tune` does",
        tunable=True,
    )


def turbo(facts: Facts, root: str) -> CheckItem:
    """BenchExec's is_turbo_boost_enabled: ``cpufreq/boost`` (1 = on; acpi-cpufreq,
    amd-pstate), else ``intel_pstate/no_turbo`` (0 = on); pyperf: "Disable Turbo Boost to
    get more reliable CPU frequency"."""
    for key, on in (("boost", "1"), ("no_turbo", "0")):
        raw = one(facts, key)
        if raw is None:
            continue
        if raw not in ("0", "1"):
            return _unavailable("turbo", f"{under(root, FILES[key])} holds {raw!r}, not 0 or 1")
        value = "on" if raw == on else "off"
        state = f"{value} ({under(root, FILES[key])} = {raw})"
        return _judged(
            "turbo",
            value == "off",
            value,
            state,
            "turn turbo off for a steadier frequency (pyperf's and BenchExec's advice): the "
            "boost a CPU gets depends on its temperature and on how many cores are busy, so "
            "it differs from trial to trial; `washout check --tune` turns it off",
            tunable=True,
        )
    return _unavailable(
        "turbo",
        f"neither {under(root, FILES['boost'])} nor {under(root, FILES['no_turbo'])} (no "
        "boost control here, as in a VM; pyperf also reads MSR 0x1a0, washout does not)",
    )


def smt(facts: Facts, root: str) -> CheckItem:
    """``smt/control`` (sysfs-devices-system-cpu): on, off, forceoff, notsupported,
    notimplemented. temci's disable_ht plugin turns it off for benchmarks."""
    value = one(facts, "smt")
    if value is None:
        return _unavailable("smt", f"no {under(root, FILES['smt'])} (a kernel without SMT control)")
    meanings = {
        "on": "on: sibling hardware threads share each core",
        "off": "off",
        "forceoff": "off until the next boot",
        "notsupported": "this CPU (or VM) has no SMT",
        "notimplemented": "the kernel cannot control SMT on this architecture",
    }
    state = meanings.get(value, value)
    return _judged(
        "smt",
        value != "on",
        value,
        state,
        "two hardware threads share one core's caches and execution units, so a trial's "
        f"speed depends on what its sibling runs: write off to {under(root, FILES['smt'])} "
        "(or turn SMT off in the firmware), or pin trials to one thread per core ([experiment] "
        "cpus). --tune leaves it: it takes half the CPUs offline",
    )


ASLR_STATES = {
    "0": "no randomization",
    "1": "conservative randomization",
    "2": "full randomization",
}
"""``randomize_va_space`` (Documentation/admin-guide/sysctl/kernel.rst), as pyperf names them."""


def aslr(facts: Facts, root: str) -> CheckItem:
    """pyperf's ASLR: full randomization (2) is tuned, "Enable full randomization"; so every
    process of a trial gets its own layout and runs sample layouts instead of all sharing
    one (layout alone moves timings: Mytkowicz et al., ASPLOS 2009)."""
    value = one(facts, "aslr")
    path = under(root, FILES["aslr"])
    if value is None or value not in ASLR_STATES:
        why = f"no {path}" if value is None else f"{path} holds {value!r}"
        return _unavailable("aslr", why)
    state = f"{value}: {ASLR_STATES[value]}"
    return _judged(
        "aslr",
        value == "2",
        value,
        state,
        f"write 2 to {path} (pyperf's advice): with full randomization each trial's process "
        "gets its own memory layout, so the runs sample layouts rather than all sharing one "
        "lucky or unlucky one; `washout check --tune` does",
        tunable=True,
    )


def _cmdline_cpus(facts: Facts, parameter: str) -> set[int]:
    """The CPU list of a kernel parameter on the command line (``isolcpus=2-3``), its
    leading flags skipped (``isolcpus=domain,managed_irq,2-3``)."""
    match = re.search(rf"(?:^|\s){parameter}=(\S+)", one(facts, "cmdline") or "")
    pieces = match.group(1).split(",") if match else []
    first = next((i for i, piece in enumerate(pieces) if piece[:1].isdigit()), len(pieces))
    try:
        return parse_cpus(",".join(pieces[first:])) if first < len(pieces) else set()
    except ValueError:
        return set()


def _isolated(facts: Facts) -> set[int]:
    """``cpu/isolated`` (Linux 4.2 and later), else ``isolcpus=`` (pyperf's get_isolated_cpus)."""
    text = one(facts, "isolated")
    if text:
        try:
            return parse_cpus(text)
        except ValueError:
            return set()
    return _cmdline_cpus(facts, "isolcpus")


def isolated(facts: Facts, root: str) -> CheckItem:
    """pyperf's LinuxScheduler: isolated CPUs (isolcpus) and rcu_nocbs on them, else "Use
    isolcpus=<cpu list> kernel parameter to isolate CPUs"."""
    cpus = _cpus(facts)
    found = _isolated(facts)
    rcu = _cmdline_cpus(facts, "rcu_nocbs")
    if found:
        state = f"CPUs {format_cpus(found)} isolated" + (
            f", RCU callbacks off CPUs {format_cpus(rcu)}" if rcu else ""
        )
        if not found <= rcu:
            return CheckItem(
                "isolated",
                "advice",
                format_cpus(found),
                state,
                f"add rcu_nocbs={format_cpus(found)} to the kernel command line, so RCU "
                "callbacks stay off the isolated CPUs too (pyperf's advice)",
            )
        return CheckItem("isolated", "ok", format_cpus(found), state)
    if cpus is not None and len(cpus) <= 1:
        return CheckItem("isolated", "ok", "none", "a single CPU: nothing to isolate")
    return CheckItem(
        "isolated",
        "advice",
        "none",
        "no CPU is isolated",
        "boot with isolcpus=<cpus> and rcu_nocbs=<cpus> (pyperf's advice) to keep the "
        "scheduler's other tasks and RCU callbacks off some CPUs, and pin the trials there "
        "([experiment] cpus); a boot parameter, so --tune cannot set it",
    )


def nohz_full(facts: Facts, root: str) -> CheckItem:
    """``cpu/nohz_full``: CPUs without the scheduler tick while they run one task, worth
    having on isolated CPUs; pyperf's CheckNOHZFullIntelPstate: "intel_pstate is
    incompatible with nohz_full" (Red Hat bug 1378529)."""
    text = one(facts, "nohz_full")
    if text is None:
        return _unavailable(
            "nohz_full", f"no {under(root, FILES['nohz_full'])} (a kernel without NO_HZ_FULL)"
        )
    try:
        tickless = set() if text in ("", "(null)") else parse_cpus(text)
    except ValueError:
        return _unavailable("nohz_full", f"{under(root, FILES['nohz_full'])} holds {text!r}")
    value = format_cpus(tickless) or "none"
    drivers = set(numbered(facts, "driver").values())
    if tickless and "intel_pstate" in drivers:
        return CheckItem(
            "nohz_full",
            "advice",
            value,
            f"CPUs {value} tickless, under the intel_pstate driver",
            "intel_pstate is incompatible with nohz_full (pyperf, after Red Hat bug "
            "1378529): boot with intel_pstate=disable, or without nohz_full",
        )
    missing = _isolated(facts) - tickless
    if missing:
        return CheckItem(
            "nohz_full",
            "advice",
            value,
            f"isolated CPUs {format_cpus(missing)} still have the scheduler tick",
            f"boot with nohz_full={format_cpus(_isolated(facts))}: a CPU that runs one task "
            "then takes no timer interrupt every few milliseconds; a boot parameter",
        )
    state = f"CPUs {value} tickless" if tickless else "none (it matters on isolated CPUs)"
    return CheckItem("nohz_full", "ok", value, state)


def load(facts: Facts, root: str) -> CheckItem:
    """The 1, 5 and 15 minute load averages (``/proc/loadavg``), against :data:`LOAD_LIMIT`."""
    words = (one(facts, "load") or "").split()
    try:
        averages = [float(w) for w in words[:3]]
    except ValueError:
        averages = []
    if len(averages) < 3:
        return _unavailable("load", f"cannot read {under(root, FILES['load'])}")
    cpus = _cpus(facts)
    on = f" on {len(cpus)} CPU{'s' if len(cpus) != 1 else ''}" if cpus else ""
    state = f"{words[0]} {words[1]} {words[2]} (1, 5, 15 minutes){on}"
    return _judged(
        "load",
        averages[0] < LOAD_LIMIT,
        words[0],
        state,
        "other work has been running: a machine at rest has a load near 0, and anything "
        "runnable competes with the trials for CPUs, caches and memory; see busy for what "
        "runs now, stop it or wait",
    )


def _ticks(lines: list[str]) -> dict[int, tuple[str, int, int]]:
    """pid -> (command name, parent pid, user + system clock ticks) from ``/proc/PID/stat``
    lines (proc(5): fields 4, 14 and 15; the name is between the first ``(`` and the last
    ``)``, since it may hold either)."""
    found = {}
    for line in lines:
        head, sep, tail = line.rpartition(")")
        pid, _, name = head.partition(" (")
        fields = tail.split()
        if sep and pid.strip().isdigit() and len(fields) >= 13:
            try:
                found[int(pid)] = (name, int(fields[1]), int(fields[11]) + int(fields[12]))
            except ValueError:
                continue
    return found


def busy(facts: Facts, root: str) -> CheckItem:
    """Processes that used CPU during the check's sample: the difference of each process's
    user and system ticks between two readings of ``/proc/*/stat`` over the sample's time
    (from ``/proc/uptime``), in percent of one CPU; the check's own shell and its parent
    and children are left out."""
    if "sampled" not in facts:
        return _unavailable(
            "busy", "not sampled (washout check samples processes; require only when it names busy)"
        )
    before, after = _ticks(facts.get("stat0", [])), _ticks(facts.get("stat1", []))
    if not before or not after:
        return _unavailable("busy", f"no process under {under(root, '/proc')}")
    try:
        seconds = float((one(facts, "uptime1") or "").split()[0]) - float(
            (one(facts, "uptime0") or "").split()[0]
        )
        hertz = int(one(facts, "clk_tck") or "")
    except (ValueError, IndexError):
        return _unavailable("busy", f"cannot read {under(root, FILES['uptime'])} or CLK_TCK")
    if seconds <= 0 or hertz <= 0:
        return _unavailable("busy", f"{under(root, FILES['uptime'])} did not move over the sample")
    mine = {int(p) for p in (one(facts, "self") or "").split() if p.isdigit()}
    shares = sorted(
        (
            ((ticks - before[pid][2]) / hertz / seconds * 100, name, pid)
            for pid, (name, parent, ticks) in after.items()
            if pid in before and pid not in mine and parent not in mine
        ),
        reverse=True,
    )
    total = sum(share for share, _, _ in shares)
    top = ", ".join(
        f"{name} (pid {pid}) {share:.0f}%"
        for share, name, pid in shares[:10]
        if share >= BUSY_SHOWN
    )
    state = f"other processes used {total:.0f}% of one CPU over {seconds:.1f} s" + (
        f": {top}" if top else ""
    )
    return _judged(
        "busy",
        total < BUSY_LIMIT,
        f"{total:.0f}",
        state,
        "stop them, or measure on a machine where nothing else runs: they take CPU time, "
        "caches and memory bandwidth from the trials, and differently from trial to trial",
    )


def swap(facts: Facts, root: str) -> CheckItem:
    """Active swap areas (``/proc/swaps``); BenchExec's has_swap, and its SwapCheck warns
    when the swap counters move during a run."""
    lines = facts.get("swap")
    if lines is None:
        return _unavailable("swap", f"cannot read {under(root, FILES['swaps'])}")
    sizes = []
    for line in lines[1:]:  # a header line, then one line per area: name type size used prio
        words = line.split()
        if len(words) >= 4 and words[2].isdigit() and words[3].isdigit():
            sizes.append((int(words[2]), int(words[3])))
    if not sizes:
        return CheckItem("swap", "ok", "off", "no swap area")
    total, used = (sum(s[i] for s in sizes) // 1024 for i in (0, 1))
    state = f"{len(sizes)} area{'s' if len(sizes) > 1 else ''}, {total} MiB, {used} MiB used"
    return CheckItem(
        "swap",
        "advice",
        "on",
        state,
        "a trial whose memory is swapped out waits for the disk (BenchExec warns when the "
        "swap counters move during a run): turn swap off while measuring (swapoff -a) or "
        "keep the trials well inside memory; --tune leaves it",
    )


def thermal(facts: Facts, root: str) -> CheckItem:
    """The hottest thermal zone (``/sys/class/thermal/thermal_zone*/temp``, millidegrees C)
    against its lowest passive, hot or critical trip point (Documentation/driver-api/
    thermal/sysfs-api.rst): past a passive trip the kernel slows the CPU down."""
    zones = numbered(facts, "thermal_temp")
    temps = {z: int(t) / 1000 for z, t in zones.items() if t.lstrip("-").isdigit()}
    if not temps:
        return _unavailable("thermal", f"no thermal zone under {under(root, THERMAL)} (as in a VM)")
    hottest = max(temps, key=lambda z: temps[z])
    kind = one(facts, f"thermal_type:{hottest}") or f"zone {hottest}"
    state = f"{temps[hottest]:.1f} C, the hottest zone ({kind})"
    trips = []
    for zone in temps:
        for trip in facts.get(f"trip:{zone}", []):
            words = trip.split()
            if (
                len(words) == 2
                and words[0] in ("passive", "hot", "critical")
                and words[1].isdigit()
            ):
                trips.append(
                    (int(words[1]) / 1000 - temps[zone], zone, words[0], int(words[1]) / 1000)
                )
    value = f"{temps[hottest]:.1f}"
    if not trips or min(trips)[0] > THERMAL_MARGIN:
        return CheckItem("thermal", "ok", value, state)
    margin, zone, trip_kind, at = min(trips)
    return CheckItem(
        "thermal",
        "advice",
        value,
        f"{state}; zone {zone} is {temps[zone]:.1f} C, its {trip_kind} trip point {at:.1f} C",
        "the machine is near the temperature at which the kernel slows its CPUs: let it cool "
        "before measuring, check its cooling, and watch throttling",
    )


def throttling(facts: Facts, root: str) -> CheckItem:
    """Intel's ``cpuN/thermal_throttle/{core,package}_throttle_count`` (events since boot);
    BenchExec's CPUThrottleCheck warns when they grow during a run."""
    counts = {
        (kind, cpu): int(v)
        for kind in ("throttle_core", "throttle_package")
        for cpu, v in numbered(facts, kind).items()
        if v.isdigit()
    }
    if not counts:
        return _unavailable(
            "throttling",
            f"no {under(root, SYS_CPU)}/cpu*/thermal_throttle (Intel CPUs only, not in a VM)",
        )
    worst = max(counts, key=lambda k: counts[k])
    most = counts[worst]
    if most == 0:
        return CheckItem("throttling", "ok", "0", "no CPU has throttled since boot")
    return CheckItem(
        "throttling",
        "advice",
        str(most),
        f"CPU {worst[1]}: {most} {worst[0].removeprefix('throttle_')} throttle events since boot",
        "this machine has slowed its CPUs for heat since boot, and a throttled trial is slower "
        "for heat, not code: check its cooling (BenchExec checks these counters around every "
        "run)",
    )


PARANOID_STATES = {
    -1: "users may use (almost) all events",
    0: "users may count CPU-wide events, without raw or ftrace tracepoints",
    1: "users may count their own processes, kernel included, not CPU-wide events",
    2: "users may count their own processes in user space only (the default since 4.6)",
}
"""``perf_event_paranoid`` (Documentation/admin-guide/sysctl/kernel.rst): each level adds
a restriction for users without CAP_PERFMON; 3 and above are distributions' patches (Debian,
Android) that refuse perf to users altogether."""


def perf_event_paranoid(facts: Facts, root: str) -> CheckItem:
    """What ``perf`` metrics can count for the user the trials run as: root (or
    CAP_PERFMON) is not limited; a user counts the kernel part of a process at 1 or less."""
    raw = one(facts, "paranoid")
    path = under(root, FILES["paranoid"])
    try:
        level = int(raw or "")
    except ValueError:
        return _unavailable("perf_event_paranoid", f"cannot read {path}")
    state = PARANOID_STATES.get(level, "users may not use perf at all (a distribution's patch)")
    root_user = one(facts, "uid") == "0"
    return _judged(
        "perf_event_paranoid",
        root_user or level <= 1,
        str(level),
        f"{level}: {state}" + ("; root is not limited by it" if root_user else ""),
        "a `perf` metric of a non-root user counts user space only (2) or nothing (3 and "
        f"above): write 1 to {path} to count the kernel part of a trial too, or run as root; "
        "--tune leaves it (a security setting)",
    )


def perf_sample_rate(facts: Facts, root: str) -> CheckItem:
    """pyperf's PerfEvent: ``perf_event_max_sample_rate`` 1 is tuned, "Minimise time spent
    by the Linux perf kernel profiler"."""
    raw = one(facts, "sample_rate")
    if raw is None or not raw.isdigit():
        return _unavailable("perf_sample_rate", f"cannot read {under(root, FILES['sample_rate'])}")
    state = f"perf samples at most {raw} per second"
    return _judged(
        "perf_sample_rate",
        raw == "1",
        raw,
        state,
        "set the perf profiler's sample rate to 1 per second (pyperf's tune), so profiling "
        "interrupts take no time from the trials; `washout check --tune` does",
        tunable=True,
    )


def rapl(facts: Facts, root: str) -> CheckItem:
    """Whether powercap's RAPL energy counters can be read by the user the trials run as
    (``intel-rapl:*/energy_uj``: readable by root only since Linux 5.10, CVE-2020-8694)."""
    zones = facts.get("rapl_zone", [])
    readable = facts.get("rapl", [])
    where = under(root, POWERCAP)
    if not zones:
        return _unavailable("rapl", f"no intel-rapl zone under {where} (no RAPL here, as in a VM)")
    if readable:
        names = ", ".join(line.split()[-1] for line in readable)
        return CheckItem("rapl", "ok", "readable", f"{len(readable)} zones readable: {names}")
    return CheckItem(
        "rapl",
        "advice",
        "unreadable",
        f"{len(zones)} zones under {where}, none readable by this user",
        "energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694): run the "
        "experiment as root for powercap metrics, or let its user read energy_uj (a udev "
        "rule or chmod)",
    )


def clocksource(facts: Facts, root: str) -> CheckItem:
    """The kernel's clock source (``clocksource0/current_clocksource``). With hpet, acpi_pm
    or xen, ``clock_gettime`` is a system call rather than a vDSO read (Packagecloud, "Two
    frequently used system calls are ~77% slower on AWS EC2", 2017), so a program that
    reads the clock often runs slower there, and unlike on a machine on tsc."""
    value = one(facts, "clocksource")
    if not value:
        return _unavailable("clocksource", f"cannot read {under(root, FILES['clocksource'])}")
    others = (one(facts, "clocksources") or "").split()
    state = value + (f" (available: {' '.join(others)})" if others else "")
    switch = (
        f"tsc is available: write it to {under(root, FILES['clocksource'])} once you know why "
        "the kernel left it (dmesg: 'clocksource tsc unstable')"
        if "tsc" in others
        else "tsc is not available here"
    )
    return _judged(
        "clocksource",
        value in STEADY_CLOCKS,
        value,
        state,
        f"reading the clock is a system call with {value}, so programs that read it often "
        f"run slower and timing costs more; {switch}; --tune leaves it",
    )


JUDGES: dict[str, Callable[[Facts, str], CheckItem]] = {
    judge.__name__: judge
    for judge in (
        governor,
        frequency,
        turbo,
        smt,
        aslr,
        isolated,
        nohz_full,
        load,
        busy,
        swap,
        thermal,
        throttling,
        perf_event_paranoid,
        perf_sample_rate,
        rapl,
        clocksource,
    )
}
"""Every item of the check, in the order it is shown."""


def judge(facts: Facts, root: str = "/", names: list[str] | None = None) -> tuple[CheckItem, ...]:
    """The items (all, or those named) judged from one worker's facts."""
    chosen = names if names is not None else list(JUDGES)
    return tuple(JUDGES[name](facts, root) for name in chosen)


# -- a spec's require ------------------------------------------------------------------

NUMBER, CPUS, WORD = "a number", "a CPU list or none", "a word"
VALUES: dict[str, tuple[str, ...] | str] = {
    "governor": GOVERNORS,
    "frequency": ("fixed", "scaling"),
    "turbo": ("on", "off"),
    "smt": ("on", "off", "forceoff", "notsupported", "notimplemented"),
    "aslr": NUMBER,
    "isolated": CPUS,
    "nohz_full": CPUS,
    "load": NUMBER,
    "busy": NUMBER,
    "swap": ("on", "off"),
    "thermal": NUMBER,
    "throttling": NUMBER,
    "perf_event_paranoid": NUMBER,
    "perf_sample_rate": NUMBER,
    "rapl": ("readable", "unreadable"),
    "clocksource": WORD,
}
"""What each item's value can be: its choices, or a kind."""
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "!=": operator.ne,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_REQUIREMENT = re.compile(r"\s*([a-z_]+)\s*(<=|>=|!=|=|<|>)\s*(\S+)\s*")


@dataclass(frozen=True)
class Requirement:
    """``item op value`` as a spec writes it: ``governor=performance``, ``load<0.5``."""

    item: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.item}{self.op}{self.value}"

    def met_by(self, found: CheckItem) -> bool:
        """Whether the item as found meets it (never when it is not available)."""
        if found.value is None:
            return False
        kind = VALUES[self.item]
        if kind == NUMBER:
            try:
                return _OPERATORS[self.op](float(found.value), float(self.value))
            except ValueError:
                return False
        if kind == CPUS:
            mine, theirs = (
                set() if v == "none" else parse_cpus(v) for v in (self.value, found.value)
            )
            return _OPERATORS[self.op](mine, theirs)
        return _OPERATORS[self.op](found.value, self.value)


def parse_requirement(text: str) -> Requirement:
    """A ``require`` string as a :class:`Requirement`; ValueError saying what is wrong (an
    unknown item, an operator its values do not take, a value it never has)."""
    match = _REQUIREMENT.fullmatch(text)
    if not match:
        raise ValueError("expected ITEM=VALUE, ITEM!=VALUE or ITEM<VALUE (also <=, >, >=)")
    item, op, value = match.groups()
    if item not in VALUES:
        raise ValueError(f"unknown item {item!r} (items: {', '.join(VALUES)})")
    kind = VALUES[item]
    if kind != NUMBER and op not in ("=", "!="):
        raise ValueError(f"{item} takes = or != ({op} compares numbers)")
    if kind == NUMBER:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ValueError(f"{item} is {kind}, not {value!r}")
    elif kind == CPUS and value != "none":
        try:
            parse_cpus(value)
        except ValueError as err:
            raise ValueError(f"{item} is {kind}: {err}") from None
    elif isinstance(kind, tuple) and value not in kind:
        raise ValueError(f"{item} is one of {', '.join(kind)}, not {value!r}")
    return Requirement(item, op, value)


def unmet(requirements: list[Requirement], items: dict[str, CheckItem]) -> list[str]:
    """Each requirement the judged items do not meet, as ``require governor=performance:
    found 'powersave' (powersave on CPUs 0-3)``."""
    problems = []
    for req in requirements:
        item = items[req.item]
        if not req.met_by(item):
            found = "not available" if item.value is None else repr(item.value)
            problems.append(f"require {req}: found {found} ({item.state})")
    return problems
