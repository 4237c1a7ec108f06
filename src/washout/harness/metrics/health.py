"""Per-trial health: what else happened on the machine while a trial ran, read just before
and just after every trial, outside its timing, and stored as the trial's ``health.*``
metrics: out of the analyses unless a user names one, as the resource metrics are
(:mod:`.resources`). Like them they are no source a spec chooses: every trial has them
unless ``[experiment] health = false``. A measure the machine cannot give is absent,
never 0.

=============================== =============================================================
``health.involuntary_switches`` involuntary context switches of the trial's process tree
                                (getrusage(2) ``ru_nivcsw`` from wait4 locally; GNU time's
                                ``%c`` over SSH)
``health.migrations``           CPU migrations of the measured process, its main thread
                                (``se.nr_migrations`` of ``/proc/PID/sched``, read when it
                                has exited and before it is reaped; locally only: over SSH
                                it is timeout(1)'s child, reaped by it)
``health.other_cpu``            CPU seconds the trial's CPUs spent on anything but the
                                trial: their busy time in ``/proc/stat`` (user, nice,
                                system, irq, softirq, steal; proc(5)) over the trial, less
                                the trial's own user and system time
``health.throttles``            increase of the trial's CPUs' thermal throttle counters
                                (``thermal_throttle/*_throttle_count``)
``health.swap_in``,             pages swapped in and out, machine-wide (``pswpin`` and
``health.swap_out``             ``pswpout`` of ``/proc/vmstat``)
``health.kernel_log``           kernel log records written while the trial ran
                                (``/dev/kmsg``, where washout may read it)
``health.aperf_mperf``          APERF/MPERF over the trial's CPUs: the mean ratio of their
                                actual to their nominal clock while busy (below 1: clocked
                                down; above 1: turbo); from ``/dev/cpu/N/msr``, locally
``health.cpufreq_mhz``          the trial's CPUs' frequency as cpufreq reports it
                                (``scaling_cur_freq``), the mean of the readings before and
                                after
=============================== =============================================================

The meanings are BenchExec's and Krun's: BenchExec reads the throttle counters of a run's
cores and ``pswpin``/``pswpout`` before and after every run, and warns of a run during
which either increased (benchexec/systeminfo.py: ``CPUThrottleCheck``, ``SwapCheck``);
Krun marks a process execution during which any new kernel log line appeared (not on its
whitelist) as errored, and records per-core APERF and MPERF counts whose ratio outside
configured bounds it reports as throttling or turbo (Barrett et al., "Virtual Machine
Warmup Blows Hot and Cold", OOPSLA 2017; krun/amperf.py). Which trials count as
unhealthy is decided later, from the stored values (:mod:`washout.stats.health`).

The trial's CPUs are its pinned ones (``cpus``), else every CPU it may run on. Every file
is read under a root (``[experiment] health_root``, ``/`` on a real machine), as the
machine check reads its files (:mod:`washout.harness.machine`), so a tree laid out as the
kernel lays out ``/proc``, ``/sys`` and ``/dev`` stands in where a machine lacks the
hardware (the tests do); the kernel log is read only under ``/`` (it is a character
device, never a file of a tree).
"""

from __future__ import annotations

import os
import select
import stat
from typing import NamedTuple

from washout.data.health import (
    BUSY_FIELDS,
    Reading,
    busy_in,
    counter,
    pair,
    reading_of,
    stat_needles,
    swap_pages,
)
from washout.harness.machine import PER_CPU, SYS_CPU, under

STAT = "/proc/stat"
VMSTAT = "/proc/vmstat"
SWAPS = "/proc/swaps"
KMSG = "/dev/kmsg"
THROTTLE_FILES = tuple(PER_CPU[key] for key in ("throttle_core", "throttle_package"))
"""Each CPU's throttle counters (paths under ``cpuN``), as the machine check reads them."""
CUR_FREQ = "cpufreq/scaling_cur_freq"
MSR = "/dev/cpu/{cpu}/msr"
IA32_MPERF, IA32_APERF = 0xE7, 0xE8
"""The MSRs counting at the nominal (TSC) rate and at the actual clock while the CPU is in
C0 (Intel SDM Vol. 4, "IA32_MPERF", "IA32_APERF"; AMD implements the same addresses);
``/dev/cpu/N/msr`` reads the 8-byte register whose address is the file offset (msr(4))."""
USER_HZ = 100
"""Clock ticks per second of ``/proc/stat`` on a worker over SSH (``sysconf(_SC_CLK_TCK)``,
the kernel's USER_HZ: 100 on every architecture Linux builds for but alpha); locally the
value is asked of the system."""
READ_LIMIT = 1 << 22
"""The most of a counters file read (``/proc/stat`` of the largest machines fits)."""


class LocalHealth:
    """Readings of this machine's counters under ``root``, in washout's own process (no
    process started): each file opened once and read again with ``pread`` (a file that
    cannot be opened is remembered as such), the kernel log through one descriptor kept at
    its end and polled, so a reading costs a few system calls per CPU and little Python:
    what a set of CPUs reads is found at its first reading, and a CPU's busy ticks are
    parsed only when its line of ``/proc/stat`` changed."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.tick = 1.0 / os.sysconf("SC_CLK_TCK")
        self._fds: dict[str, int | None] = {}
        self._sizes: dict[str, int] = {}
        self._kmsg: int | None = None
        self._kmsg_ready = select.poll()
        """Polls the kernel log's descriptor: whether a record is there to read."""
        self._kmsg_tried = False
        self._cpu_files: dict[frozenset[int], _CpuFiles] = {}
        """Per set of CPUs: what a reading of them reads (found at their first reading)."""
        self._swap: tuple[int, int] | None = None
        """``pswpin`` and ``pswpout`` as last read from ``/proc/vmstat``."""
        self._swapless = False
        """Whether ``/proc/swaps`` listed no swap device at the last reading."""

    def _fd(self, path: str) -> int | None:
        """A descriptor of ``path`` under the root, opened once; None for anything but a
        regular file or a device (opened without blocking: a FIFO where a counter should
        be never holds the event loop)."""
        if path not in self._fds:
            try:
                fd = os.open(under(self.root, path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                self._fds[path] = None
                return None
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
                os.close(fd)
                fd = -1
            self._fds[path] = fd if fd >= 0 else None
        return self._fds[path]

    def _bytes(self, path: str, size: int | None = None) -> bytes | None:
        """The first ``size`` bytes of ``path``; without a size the whole file, read at
        once into a buffer a little larger than it was last time (a ``/proc`` file is
        made anew at every read: read in pieces it could change between them)."""
        fd = self._fd(path)
        if fd is None:
            return None
        try:
            if size is not None:
                return os.pread(fd, size, 0)
            room = self._sizes.get(path, 4096)
            while len(data := os.pread(fd, room, 0)) >= room and room < READ_LIMIT:
                room *= 2
            self._sizes[path] = len(data) + 4096
            return data
        except OSError:
            return None

    def _files(self, cpus: frozenset[int]) -> _CpuFiles:
        """What a reading of ``cpus`` reads, found once per set (each file opened once: a
        file that cannot be opened stays missing, so a value needing it, as a VM's MSRs
        and cpufreq do, is not looked for again: a dozen lookups per reading saved)."""
        dirs = [f"{SYS_CPU}/cpu{n}" for n in sorted(cpus)]

        def every(paths: list[str]) -> tuple[int, ...] | None:
            fds = [self._fd(path) for path in paths]
            return None if None in fds else tuple(fd for fd in fds if fd is not None)

        throttles = (self._fd(f"{d}/{f}") for d in dirs for f in THROTTLE_FILES)
        files = _CpuFiles(
            stat_needles(cpus),
            every([f"{d}/{CUR_FREQ}" for d in dirs]),
            every([MSR.format(cpu=n) for n in sorted(cpus)]),
            tuple(fd for fd in throttles if fd is not None),
        )
        self._cpu_files[cpus] = files
        return files

    def _kernel_log(self) -> int | None:
        """Records written to the kernel log since the last call (None: unreadable here).
        The first call opens ``/dev/kmsg`` at its end (its ``SEEK_END``: Documentation/
        ABI/testing/dev-kmsg), so no earlier record counts."""
        if not self._kmsg_tried:
            self._kmsg_tried = True
            path = under(self.root, KMSG)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return None
            if not stat.S_ISCHR(os.fstat(fd).st_mode):
                os.close(fd)
                return None
            os.lseek(fd, 0, os.SEEK_END)
            self._kmsg = fd
            self._kmsg_ready.register(fd, select.POLLIN)
        if self._kmsg is None:
            return None
        if not self._kmsg_ready.poll(0):  # no record since (dev-kmsg: poll as read sees it)
            return 0
        records = 0
        while True:
            try:
                if not os.read(self._kmsg, 8192):  # one record per read
                    return records
            except BlockingIOError:
                return records
            except BrokenPipeError:  # records overwritten before they were read: go on
                pass
            except OSError:
                return None
            records += 1

    def _swap_pages(self) -> tuple[int, int] | None:
        """``pswpin`` and ``pswpout``: read from ``/proc/vmstat`` (whose every read sums
        the kernel's per-CPU counters, 12 us here) only where ``/proc/swaps`` lists a swap
        device now or did at the last reading; without one they cannot move, and the
        last values stand."""
        swaps = self._bytes(SWAPS, 4096)
        swapless = swaps is not None and swaps.count(b"\n") <= 1  # its header alone
        if not (swapless and self._swapless and self._swap is not None):
            vmstat = self._bytes(VMSTAT)
            self._swap = swap_pages(vmstat) if vmstat is not None else None
        self._swapless = swapless
        return self._swap

    def reading(self, cpus: set[int]) -> Reading:
        """The counters now, for ``cpus``."""
        key = frozenset(cpus)
        files = self._cpu_files.get(key) or self._files(key)
        stat_text = self._bytes(STAT)
        msrs = files.msrs or ()
        return reading_of(
            busy_in(stat_text, files.stat_lines) if stat_text is not None else None,
            list(map(_number, files.throttles)),
            list(map(_number, files.freqs or ())),
            [_msr(fd, IA32_APERF) for fd in msrs],
            [_msr(fd, IA32_MPERF) for fd in msrs],
            self._swap_pages(),
            self._kernel_log(),
        )

    def close(self) -> None:
        if self._kmsg is not None:
            self._kmsg_ready.unregister(self._kmsg)
        for fd in [*self._fds.values(), self._kmsg]:
            if fd is not None:
                os.close(fd)
        self._fds.clear()
        self._cpu_files.clear()
        self._kmsg, self._kmsg_tried = None, False


class _CpuFiles(NamedTuple):
    """What a reading of one set of CPUs reads (:meth:`LocalHealth._files`)."""

    stat_lines: tuple[bytes, ...]
    """How their lines of ``/proc/stat`` start (:func:`stat_needles`)."""
    freqs: tuple[int, ...] | None
    """Their ``scaling_cur_freq`` descriptors; None when one of them has none."""
    msrs: tuple[int, ...] | None
    """Their MSR devices' descriptors; None when one of them has none."""
    throttles: tuple[int, ...]
    """The descriptors of those of their throttle counters that could be opened."""


def _number(fd: int) -> int | None:
    """The number a small counter file holds (None: unreadable, or not a number)."""
    try:
        return counter(os.pread(fd, 64, 0))
    except OSError:
        return None


def _msr(fd: int, register: int) -> int | None:
    """An MSR's 8-byte value from a ``/dev/cpu/N/msr`` descriptor (msr(4))."""
    try:
        data = os.pread(fd, 8, register)
    except OSError:
        return None
    return int.from_bytes(data, "little") if len(data) == 8 else None


def trial_cpus(cpus: set[int] | None) -> set[int]:
    """The CPUs a trial's health is read on: its own, else every CPU washout may use."""
    return cpus or os.sched_getaffinity(0)


def sched_migrations(pid: int) -> float | None:
    """``se.nr_migrations`` of a process's main thread from ``/proc/PID/sched`` (kernels
    built with CONFIG_SCHED_DEBUG), readable until it is reaped; None otherwise."""
    try:
        with open(f"/proc/{pid}/sched", "rb") as f:
            text = f.read(16384)
    except OSError:
        return None
    at = text.find(b"\nse.nr_migrations")
    if at < 0:
        return None
    value = text[at:].split(b"\n", 2)[1].rpartition(b":")[2].strip()
    return float(value) if value.isdigit() else None


RUNNER_READING = r"""hl() {
local hw=$1 hv= hk= hd= hb= ht= hi= ho= hs=0 hf=0 hm=- hp= hn=0
if [ "${hvr-/}" != "$hr" ]; then
  hvr=$hr hvi=-1 hall= hth= hfq=
  { mapfile -t hv < "$hr@VMSTAT@"; } 2>/dev/null
  for hk in "${!hv[@]}"; do case ${hv[hk]} in "pswpin "*) hvi=$hk; break ;; esac; done
  { mapfile -t hv < "$hr@STAT@"; } 2>/dev/null
  for hk in "${hv[@]}"; do
    case $hk in cpu[0-9]*) hk=${hk%% *} hall="$hall ${hk#cpu}" ;; cpu*) ;; *) break ;; esac
  done
  set -- $hall
  [ -d "$hr@SYS_CPU@/cpu${1-}/@THROTTLE_DIR@" ] && hth=1
  [ -r "$hr@SYS_CPU@/cpu${1-}/@CUR_FREQ@" ] && hfq=1
fi
if [ -z "$hc" ]; then
  { read -r hk hv < "$hr@STAT@"; } 2>/dev/null
  set -f; set -- $hv; set +f
  [ "$hk" = cpu ] && [ $# -ge 10 ] && hb=$((@BUSY@))
  set -- $hall
else
  { hv=$(<"$hr@STAT@"); } 2>/dev/null
  set -f; set -- ${hv%%$'\n'intr*}; set +f
  while [ $# -ge 11 ]; do
    case $1 in
      cpu[0-9]*)
        case " $hc " in
          *" ${1#cpu} "*) hn=$((hn + 1)) hb=$((${hb:-0} + @BUSY_AFTER_NAME@)) ;;
        esac ;;
      cpu) ;;
      *) break ;;
    esac
    shift 11
  done
  set -- $hc
  [ "$hn" -eq $# ] || hb=
fi
if [ "$hvi" -ge 0 ]; then
  { mapfile -t -s "$hvi" -n 2 hv < "$hr@VMSTAT@"; } 2>/dev/null
  case ${hv[0]-}/${hv[1]-} in
    "pswpin "*"/pswpout "*) hi=${hv[0]#* } ho=${hv[1]#* } ;;
    *) hvr=- ;;
  esac
fi
if [ -n "$hth$hfq" ]; then
  for hk; do
    hd="$hr@SYS_CPU@/cpu$hk"
    if [ -n "$hth" ]; then
      for hp in @THROTTLE@; do read -r hv < "$hd/$hp" && ht=$((${ht:-0} + hv)); done
    fi
    [ -n "$hfq" ] && read -r hv < "$hd/@CUR_FREQ@" && hs=$((hs + hv)) hf=$((hf + 1))
  done 2>/dev/null
fi
if [ -z "$hr" ] && [ -z "${hko-}" ]; then
  hko=1; { exec 4<@KMSG@; } 2>/dev/null || hko=-
fi
if [ -z "$hr" ] && [ "$hko" = 1 ]; then
  hm=0
  while read -t 0 -u 4; do
    mapfile -t -n 1 -u 4 hv
    case ${hv[0]-} in " "*) ;; *) hm=$((hm + 1)) ;; esac
  done 2>/dev/null
fi
printf '%s%s %s %s %s %s %s %s %s %s\n' "$m" "$hw" "${hb:--}" "${ht:--}" "${hi:--}" \
  "${ho:--}" "$hs" "$hf" "$#" "$hm" >&2
}
"""
"""The health reading of an SSH worker's runner (bash: ``$(<file)``, ``mapfile`` and
``read -t 0`` read ``/proc`` and the kernel log without a process): ``hl h0`` before the
command and ``hl h1`` after it print one marker line each, ``busy throttles pswpin pswpout
freq_sum freq_count cpus kernel_log`` for the CPUs in ``$hc`` (blank: all) under the root
``$hr`` (``-`` where a counter cannot be read). What the machine has is found once per
runner and root (its CPUs, whether they have throttle counters and cpufreq, which line of
``/proc/vmstat`` is ``pswpin``: then read alone); an unpinned trial's busy time is the
first line of ``/proc/stat`` alone. The kernel log (under root ``/`` only) is
``/dev/kmsg`` held open on descriptor 4 from the runner's first reading (the records
already there are read then): each reading takes the records written since the last, one
``read`` each while ``read -t 0`` (poll(2): no waiting for a reader to be woken) says
there is one, counting the records, not their key/value lines (those start with a blank:
Documentation/ABI/testing/dev-kmsg); where the log cannot be opened (a user under
``kernel.dmesg_restrict``) the count is absent."""


def runner_reading() -> str:
    """:data:`RUNNER_READING` with this module's paths and busy fields filled in."""
    after_name = " + ".join(f"${i + 2}" for i in BUSY_FIELDS)  # $1 is the line's name
    throttle_dir = {path.split("/")[0] for path in THROTTLE_FILES}
    assert len(throttle_dir) == 1
    values = {
        "STAT": STAT,
        "VMSTAT": VMSTAT,
        "BUSY": " + ".join(f"${i + 1}" for i in BUSY_FIELDS),  # the cpu line's, name apart
        "BUSY_AFTER_NAME": after_name,
        "SYS_CPU": SYS_CPU,
        "THROTTLE_DIR": throttle_dir.pop(),
        "THROTTLE": " ".join(THROTTLE_FILES),
        "CUR_FREQ": CUR_FREQ,
        "KMSG": KMSG,
    }
    text = RUNNER_READING
    for name, value in values.items():
        text = text.replace(f"@{name}@", value)
    return text


def marker_reading(fields: list[bytes]) -> Reading | None:
    """A :data:`RUNNER_READING` marker's fields (after ``h0``/``h1``) as a Reading; None
    when they are not in its form."""
    if len(fields) != 8:
        return None
    numbers = [int(f) if f.isdigit() else None for f in fields]
    busy, throttles, swap_in, swap_out, freq_sum, freq_count, cpus, kernel_log = numbers
    return Reading(
        busy=busy,
        throttles=throttles,
        swap=pair(swap_in, swap_out),
        cpufreq_khz=freq_sum / freq_count
        if freq_sum is not None and freq_count and freq_count == cpus
        else None,
        kernel_log=kernel_log,
    )
