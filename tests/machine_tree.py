"""A machine's /sys and /proc laid out as the kernel lays them out, in a directory, for the
machine check's tests on a machine that lacks them (a VM has no cpufreq, no thermal zone,
no RAPL): ``washout check --root DIR`` reads it as it reads ``/``.

The default tree is an untuned 4-CPU Intel machine under intel_pstate: the powersave
governor, turbo on, SMT on, a frequency range, no isolated CPU, a swap partition, perf's
default sample rate. Paths and formats follow Documentation/ABI/testing/
sysfs-devices-system-cpu, Documentation/admin-guide/sysctl/kernel.rst and proc(5).
"""

from __future__ import annotations

import uuid
from pathlib import Path

CPU = "sys/devices/system/cpu"
SWAPS_HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority"
TUNABLE = {
    "proc/sys/kernel/perf_event_max_sample_rate",
    "proc/sys/kernel/randomize_va_space",
    f"{CPU}/intel_pstate/no_turbo",
    *(
        f"{CPU}/cpu{n}/cpufreq/{name}"
        for n in range(4)
        for name in ("scaling_governor", "scaling_min_freq")
    ),
}
"""The files of the default tree that ``--tune`` writes."""


def default_files(cpus: int = 4) -> dict[str, str]:
    """Every file of the default tree (path under the root -> its first line)."""
    files = {
        f"{CPU}/online": f"0-{cpus - 1}",
        f"{CPU}/intel_pstate/no_turbo": "0",
        f"{CPU}/smt/control": "on",
        f"{CPU}/smt/active": "1",
        f"{CPU}/isolated": "",
        f"{CPU}/nohz_full": "(null)",
        "sys/devices/system/clocksource/clocksource0/current_clocksource": "tsc",
        "sys/devices/system/clocksource/clocksource0/available_clocksource": "tsc hpet acpi_pm",
        "sys/class/thermal/thermal_zone0/type": "x86_pkg_temp",
        "sys/class/thermal/thermal_zone0/temp": "45000",
        "sys/class/thermal/thermal_zone0/trip_point_0_type": "passive",
        "sys/class/thermal/thermal_zone0/trip_point_0_temp": "95000",
        "sys/class/thermal/thermal_zone0/trip_point_1_type": "critical",
        "sys/class/thermal/thermal_zone0/trip_point_1_temp": "105000",
        "sys/class/thermal/thermal_zone1/type": "acpitz",
        "sys/class/thermal/thermal_zone1/temp": "27800",
        "sys/class/powercap/intel-rapl:0/name": "package-0",
        "sys/class/powercap/intel-rapl:0/energy_uj": "12345678",
        "sys/class/powercap/intel-rapl:0/max_energy_range_uj": "262143328850",
        "sys/class/powercap/intel-rapl:0:0/name": "core",
        "sys/class/powercap/intel-rapl:0:0/energy_uj": "2345678",
        "sys/class/powercap/intel-rapl:0:0/max_energy_range_uj": "262143328850",
        "proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet",
        "proc/loadavg": "0.02 0.05 0.01 1/301 4242",
        "proc/swaps": f"{SWAPS_HEADER}\n/dev/sda2{' ' * 31}partition\t8388604\t\t0\t\t-2",
        "proc/uptime": "1000.00 3900.00",
        "proc/sys/kernel/randomize_va_space": "2",
        "proc/sys/kernel/perf_event_paranoid": "2",
        "proc/sys/kernel/perf_event_max_sample_rate": "100000",
        "proc/sys/kernel/random/boot_id": str(uuid.uuid4()),
    }
    for n in range(cpus):
        files |= {
            f"{CPU}/cpu{n}/cpufreq/scaling_governor": "powersave",
            f"{CPU}/cpu{n}/cpufreq/scaling_available_governors": "performance powersave",
            f"{CPU}/cpu{n}/cpufreq/scaling_driver": "intel_pstate",
            f"{CPU}/cpu{n}/cpufreq/scaling_min_freq": "800000",
            f"{CPU}/cpu{n}/cpufreq/scaling_max_freq": "4200000",
            f"{CPU}/cpu{n}/cpufreq/cpuinfo_max_freq": "4200000",
            f"{CPU}/cpu{n}/thermal_throttle/core_throttle_count": "0",
            f"{CPU}/cpu{n}/thermal_throttle/package_throttle_count": "0",
        }
    return files


def lay_out(root: Path, changes: dict[str, str | None] | None = None, cpus: int = 4) -> Path:
    """Write the default tree under ``root``, with ``changes`` (a path's new first line, or
    None to leave the file out); each file ends with a newline, as the kernel's do."""
    files: dict[str, str | None] = {**default_files(cpus), **(changes or {})}
    for path, text in files.items():
        if text is None:
            continue
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (but washout's record) by its path: what a round trip must
    give back byte for byte."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "run/washout" not in str(p)
    }
