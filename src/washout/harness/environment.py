"""Environment capture and build fingerprints (provenance, mismatch detection).

One shell script reads the system facts on any Linux worker, local or remote, so the same
code serves both executors. Items split in two: facts that identify *what ran* (kernel, CPU,
file hashes, the output of provenance commands) form the fingerprint, compared across
workers and over time; facts that describe the moment (boot id, uptime, load, frequency,
temperature) are recorded only.

The whole capture (the script, every provenance file hashed, every provenance command) runs
once per session and worker (:meth:`EnvironmentWatch.capture`). Before each run only what
can change is read again (:meth:`EnvironmentWatch.before_run`): the moment's facts and a
signature of each provenance file (size, inode, device, change and modification times),
as read at the end of the last command: by the local executor, or by an SSH worker's
runner without provenance files (else one shell script of builtins and ``stat`` per file;
:func:`moment`). A new boot id (a reboot reset) or a changed signature brings the whole
capture back, so a file rebuilt mid-experiment is still hashed and caught before the next
run, while a run without changes costs no read, no shell and no process locally (and no
command over SSH without provenance files): washout's work before a run stays small and
in front of the reset (bench/position_zero.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import shlex
import time
from pathlib import Path
from typing import Any

from washout.errors import WorkerError
from washout.harness.executors.base import CommandOptions, Executor
from washout.harness.executors.local import LocalExecutor
from washout.harness.machine import FILES, SYS_CPU, THERMAL, cpu_file
from washout.harness.secrets import redact, secret_values
from washout.harness.spec import ProvenanceSpec

MOMENT_FILES = {
    "governor": (cpu_file(0, "governor"), 1),
    "frequency_khz": (f"{SYS_CPU}/cpu0/cpufreq/scaling_cur_freq", 1),
    "boot_id": (FILES["boot_id"], 1),
    "uptime_s": (FILES["uptime"], 1),
    "load": (FILES["load"], 3),
    "temperature_mc": (f"{THERMAL}/thermal_zone0/temp", 1),
}
"""Facts of the moment, read again before every run: the file each is the first line of,
and how many of that line's words it keeps (the 1, 5 and 15 minute load averages). The
paths are the machine check's (washout.harness.machine), read the same way."""

FACT_FUNCTIONS = r"""fact() { printf '%s\t%s\n' "$1" "$2"; }
first() { v=""; read -r v < "$2" 2>/dev/null; fact "$1" "$v"; }
"""
"""Shell functions printing ``key<TAB>value`` lines: ``fact KEY VALUE`` and ``first KEY
FILE`` (the file's first line; empty when it cannot be read)."""
_SYSTEM = r"""fact hostname "$(uname -n)"
fact kernel "$(uname -sr)"
(. /etc/os-release 2>/dev/null; fact os "${PRETTY_NAME:-}")
cpu=""
while IFS=: read -r k v; do
  case "$k" in "model name"*) cpu="${v# }"; break;; esac
done < /proc/cpuinfo
fact cpu_model "$cpu"
fact cores "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
mem=""; while read -r k v rest; do [ "$k" = "MemTotal:" ] && mem="$v" && break; done < /proc/meminfo
fact memory_kb "$mem"
fact locale "LC_ALL=${LC_ALL-} LC_CTYPE=${LC_CTYPE-} LC_COLLATE=${LC_COLLATE-} LANG=${LANG-}"
"""
FINGERPRINTED = ("kernel", "cpu_model", "cores", "memory_kb")
"""System facts that must agree across workers (with every provenance file and command).
The ``locale`` commands run in is not among them but :data:`NOTED`: it is part of a
command's work (``sleep`` with ``LANG=C.UTF-8`` loads the locale, 0.2-0.25 ms here, and a
session over SSH often has no ``LANG``; bench/RESULTS.md), and a store made before it was
recorded must still resume."""
NOTED = ("locale",)
"""Recorded facts that may differ across workers or sessions without refusing the
experiment: a difference is said (:func:`noted_differences`), since it is part of what the
commands do differently on one side."""
_ROLE_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*@")
"""A worker group's facts are its roles' (``server@kernel``; washout.harness.roles)."""


def _moment_script() -> str:
    """Shell lines printing every MOMENT_FILES fact's first line (builtins only: no fork)."""
    return "".join(f"first {key} {path}\n" for key, (path, _) in MOMENT_FILES.items())


def capture_script(provenance: ProvenanceSpec) -> str:
    """The shell script printing ``key<TAB>value`` lines for every system fact and file hash
    (the moment's facts come from :func:`moment_script` or :func:`read_moment`)."""
    lines = [FACT_FUNCTIONS + _SYSTEM]
    for path in provenance.files:
        q = shlex.quote(path)
        lines.append(
            f"printf '%s\\t%s\\n' {shlex.quote('file:' + path)} "
            f"\"$(sha256sum -- {q} 2>/dev/null | cut -d' ' -f1 || true)\""
        )
    return "\n".join(lines)


def moment_script(provenance: ProvenanceSpec) -> str:
    """What an SSH worker runs before each run: the moment's facts and each provenance
    file's signature from ``stat`` (empty when the file is missing), nothing else."""
    lines = [FACT_FUNCTIONS + _moment_script()]
    for path in provenance.files:
        lines.append(
            f"printf '%s\\t%s\\n' {shlex.quote('stat:' + path)} "
            f"\"$(stat -L -c '%s %i %d %z %y' -- {shlex.quote(path)} 2>/dev/null)\""
        )
    return "\n".join(lines)


def parse_capture(text: str) -> dict[str, str]:
    """``key<TAB>value`` lines as a dict; each moment fact cut to the words it keeps."""
    facts: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            facts[key] = _keep(key, value)
    return facts


def _keep(key: str, value: str) -> str:
    """A fact's value as recorded: a moment fact cut to the words it keeps."""
    if key in MOMENT_FILES:
        return " ".join(value.split()[: MOMENT_FILES[key][1]])
    return value.strip()


_BOOT_ID, _UPTIME = FILES["boot_id"], FILES["uptime"]
_MOMENT_PATHS = tuple((key, path, os.path.dirname(path)) for key, (path, _) in MOMENT_FILES.items())
"""Each moment fact's file and that file's directory."""


class _LocalMoment:
    """The local machine's moment facts, read before every run with as little as gives
    what a fresh read of each file would.

    Each file is held open and read again with one ``pread`` at offset 0 (the kernel makes
    a ``/proc`` or ``/sys`` file anew at every read): one system call where opening it took
    three; one whose read fails (its driver gone) is opened again at once. A missing file
    is looked for again at every reading, so one that appears (a cpufreq driver loaded) is
    read from then on: its directory first, with ``access`` (no exception raised: half the
    cost of a failed ``open``), and a directory found missing is not looked into again in
    the same reading (a VM's cpufreq directory holds two of the files). A value is parsed
    only when its file's bytes differ from the last reading's. Two files need no read:
    the boot id cannot change while this process lives (read once), and the uptime is the
    boot-time clock, which ``clock_gettime`` reads without a system call (fs/proc/uptime.c
    prints ``CLOCK_BOOTTIME``, time namespace applied, as seconds and hundredths,
    truncated). Only for kernel files, which change in place: a regular file replaced by a
    rename would still be read from the old one."""

    def __init__(self, paths: tuple[tuple[str, str, str], ...] = _MOMENT_PATHS) -> None:
        self._paths = paths
        """Each fact's file and that file's directory (:data:`MOMENT_FILES`'s here)."""
        self._fds: dict[str, int] = {}
        self._seen: dict[str, tuple[bytes, str]] = {}
        """Per fact: the bytes last read and the value they gave."""

    def facts(self) -> dict[str, str]:
        """Every :data:`MOMENT_FILES` fact now."""
        facts = {}
        fds, seen, missing = self._fds, self._seen, ""
        for key, path, directory in self._paths:
            if path == _UPTIME:
                seconds, ns = divmod(time.clock_gettime_ns(time.CLOCK_BOOTTIME), 10**9)
                facts[key] = f"{seconds}.{ns // 10_000_000:02d}"
                continue
            last = seen.get(key)
            if path == _BOOT_ID and last and last[0]:
                facts[key] = last[1]
                continue
            fd, raw = fds.get(path), None
            if fd is not None:
                try:
                    raw = os.pread(fd, 4096, 0)
                except OSError:  # its driver gone: opened again, as a fresh read would
                    del fds[path]
                    os.close(fd)
            if raw is None:
                raw = b"" if directory == missing else self._open(path, directory)
                if raw is None:
                    missing, raw = directory, b""
            if last is None or raw != last[0]:
                line = raw.decode("utf-8", errors="replace").partition("\n")[0]
                last = seen[key] = (raw, _keep(key, line))
            facts[key] = last[1]
        return facts

    def _open(self, path: str, directory: str) -> bytes | None:
        """The first 4096 bytes of a file not held open, held from now on (empty if it
        cannot be read; None if its directory is missing)."""
        if not os.access(directory, os.F_OK):
            return None
        try:
            fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            return os.pread(fd, 4096, 0)
        except OSError:
            return b""


_LOCAL = _LocalMoment()
"""This process's moment facts: one machine, so one set of descriptors for the process's
life, whatever the sessions and watches."""


def file_signature(path: Path | str) -> str:
    """Size, inode, device, change and modification time (ns) of a file, or ``""`` if it
    cannot be read: any write, replacement or ``touch`` changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f"{st.st_size} {st.st_ino} {st.st_dev} {st.st_ctime_ns} {st.st_mtime_ns}"


def read_moment(provenance: ProvenanceSpec, cwd: str | None) -> dict[str, str]:
    """:func:`moment_script`'s facts read in this process (the local machine): the
    moment's files held open (:class:`_LocalMoment`) and a ``stat`` per provenance file,
    no shell, no process."""
    return _local_reader(tuple(provenance.files), cwd)()


READ_AFTER_SECONDS = 100e-6
"""The longest the fastest local read of the moment may take for it to be read after every
command: the files are kernel files, read in microseconds here (21 us between two trials),
but a thermal zone backed by ACPI firmware can take milliseconds to half a second a read
(icewm pull request 634), which after every trial would stretch an experiment of short
trials many times over; such a machine's moment is read before each run instead."""


SSH_READ_AFTER_SECONDS = 1e-3
"""The same for an SSH worker's runner, on the worker's clock (bash's; a runner in a shell
without one reads after every command): bash reads a kernel file a byte at a time, 55 us
for the moment's files at the fastest here, and a trial over SSH costs milliseconds of
round trip anyway, so only a sensor that slow is read before each run instead."""


class _LocalRead:
    """:func:`read_moment` for some provenance files under a directory, timing itself:
    its fastest read so far (preemption can only make a read slower) says whether it is
    cheap enough to make after every command (:data:`READ_AFTER_SECONDS`)."""

    def __init__(self, files: tuple[str, ...], cwd: str | None) -> None:
        base = Path(cwd or ".")
        self._signed = tuple((f"stat:{path}", str(base / path)) for path in files)
        self.fastest = math.inf

    def __call__(self) -> dict[str, str]:
        began = time.perf_counter()
        facts = _LOCAL.facts()
        for key, path in self._signed:
            facts[key] = file_signature(path)
        self.fastest = min(self.fastest, time.perf_counter() - began)
        return facts


@functools.lru_cache(maxsize=64)
def _local_reader(files: tuple[str, ...], cwd: str | None) -> _LocalRead:
    """The one :class:`_LocalRead` of these files under ``cwd``, so that what a local
    executor read after a command is known to be this read
    (:meth:`~washout.harness.executors.local.LocalExecutor.take_read`)."""
    return _LocalRead(files, cwd)


async def moment(executor: Executor, provenance: ProvenanceSpec, cwd: str | None) -> dict[str, str]:
    """The moment's facts and the provenance files' signatures on a worker: in-process on
    the local machine, else one builtin-only script (plus ``stat`` per file).

    From the first call on, the local executor reads them after every command (while a
    read is cheap, :data:`READ_AFTER_SECONDS`), and an SSH worker's runner (without
    provenance files) reads the moment's files after every command
    (:meth:`~washout.harness.executors.ssh.SSHExecutor.read_after`, until one read took
    longer than :data:`SSH_READ_AFTER_SECONDS` at its fastest): before a run they
    come from the end of the last command, the previous run's last trial. So the
    check's own work before a run is only the comparison and the record, and the run's
    first trial follows a trial as every other trial does, with the same work in between
    (bench/position_zero.py). Over SSH only the files the script found are read (a VM may
    have no cpufreq or thermal zone); one that appears later is seen by the next session.
    """
    if isinstance(executor, LocalExecutor):
        reader = _local_reader(tuple(provenance.files), cwd)
        found = executor.take_read(reader)
        facts = reader() if found is None else found
        executor.read_after(reader if reader.fastest <= READ_AFTER_SECONDS else None)
        return facts
    from washout.harness.executors.ssh import SSHExecutor  # here: a local run needs no asyncssh

    reads = executor if isinstance(executor, SSHExecutor) and not provenance.files else None
    slow = reads is not None and (reads.fastest_read or 0.0) > SSH_READ_AFTER_SECONDS
    if reads is not None and slow:  # from the next command on, read before each run instead
        reads.read_after(())
    if reads is not None and (read := reads.take_read()) is not None:
        return {key: _keep(key, read.get(path, "")) for key, (path, _) in MOMENT_FILES.items()}
    result = await executor.run(moment_script(provenance), CommandOptions(timeout=60, cwd=cwd))
    if result.status != "ok":
        raise WorkerError(
            f"{executor.name}: cannot read the environment before a run: {result.reason}"
        )
    facts = parse_capture(result.stdout.decode("utf-8", errors="replace"))
    if reads is not None and not slow:
        found_paths = tuple(path for key, (path, _) in MOMENT_FILES.items() if facts.get(key))
        reads.read_after(found_paths)
    return facts


async def capture(
    executor: Executor, provenance: ProvenanceSpec, cwd: str | None
) -> dict[str, str]:
    """The worker's whole environment now: system and moment facts, provenance file
    signatures and hashes, provenance command outputs.

    The signatures are read before the hashes, so a file that changes in between shows
    as changed at the next check. A missing provenance file is recorded as ``missing``
    (and so mismatches a worker that has it). A provenance command's output is stored, so
    the secrets washout inherits are redacted from it before it is cut, as from a trial's.
    """
    facts = await moment(executor, provenance, cwd)
    script, options = capture_script(provenance), CommandOptions(timeout=60, cwd=cwd)
    result = await executor.run(script, options)
    if result.status == "lost":  # it only reads: once more (a local launcher was killed)
        result = await executor.run(script, options)
    if result.status != "ok":  # what it printed is part of the facts, not them
        raise WorkerError(f"{executor.name}: cannot capture the environment: {result.reason}")
    facts.update(parse_capture(result.stdout.decode("utf-8", errors="replace")))
    for path in provenance.files:
        if not facts.get("file:" + path):
            facts["file:" + path] = "missing"
    for command in provenance.commands:
        out = await executor.run(command, CommandOptions(timeout=60, cwd=cwd))
        text = redact(
            (out.stdout + out.stderr).decode("utf-8", errors="replace"), secret_values([])
        ).strip()
        facts["command:" + command] = text[:500] if out.status == "ok" else f"failed: {out.reason}"
    return facts


class EnvironmentWatch:
    """One worker's environment over a session: the whole capture once, then before each
    run only what can change, and the whole capture again when that says something did.

    The whole capture comes back when the boot id changed (a reboot reset: the kernel may
    be another) or a provenance file's signature did (its hash, then compared with the
    experiment's start, is what catches a rebuild mid-experiment). Provenance commands run
    with every whole capture: at each ``run``/``resume`` and after those changes, not
    before every run (a build identity that must be checked before every run belongs in
    ``files``). A rewrite keeping size and inode within one tick of the file system's
    clock after the previous change would keep the signature; the next session's capture
    still hashes the file.
    """

    def __init__(self, executor: Executor, provenance: ProvenanceSpec, cwd: str | None) -> None:
        self.executor = executor
        self.provenance = provenance
        self.cwd = cwd
        self.latest: dict[str, str] = {}
        self.captures = 0
        """How many whole captures were made: only they change a fingerprinted fact (the
        moment's facts and the files' signatures are not fingerprinted)."""
        self._watched = ("boot_id", *(f"stat:{path}" for path in provenance.files))
        """The facts whose change brings the whole capture back."""

    async def capture(self) -> dict[str, str]:
        """The whole capture (:func:`capture`), remembered for the next checks."""
        self.latest = await capture(self.executor, self.provenance, self.cwd)
        self.captures += 1
        return dict(self.latest)

    async def before_run(self) -> dict[str, str]:
        """The environment before a run: the moment read again, the rest as last captured
        unless the boot id or a provenance file's signature changed (then captured again)."""
        now = await moment(self.executor, self.provenance, self.cwd)
        latest = self.latest
        if not latest:
            return await self.capture()
        for key in self._watched:
            if now.get(key) != latest.get(key):
                return await self.capture()
        latest.update(now)
        return latest.copy()


def fingerprint_items(facts: dict[str, Any]) -> dict[str, str]:
    """The items that identify what ran (system facts, files, commands)."""
    return {k: str(facts[k]) for k in _fingerprinted(frozenset(facts))}


@functools.lru_cache(maxsize=64)
def _fingerprinted(keys: frozenset[str]) -> tuple[str, ...]:
    """Which of these fact names are fingerprinted, sorted. Cached: a worker's names are
    the same before every run, and sorting and matching them was most of a run's check."""
    return tuple(
        sorted(
            k
            for k in keys
            if (fact := _ROLE_PREFIX.sub("", k, count=1)) in FINGERPRINTED
            or fact.startswith(("file:", "command:"))
        )
    )


def fingerprint(facts: dict[str, Any]) -> str:
    """A short stable hash of the fingerprinted items."""
    keys = _fingerprinted(frozenset(facts))
    return _digest(keys, tuple(map(str, map(facts.__getitem__, keys))))


@functools.lru_cache(maxsize=64)
def _digest(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    """:func:`fingerprint` of these items. Cached: they are the same before every run
    until a whole capture finds a change, and hashing them was a fifth of a run's check."""
    items = dict(zip(keys, values))
    return hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()[:16]


def mismatch(a_name: str, a: dict[str, Any], b_name: str, b: dict[str, Any]) -> str | None:
    """A one-line description of the first fingerprinted item that differs, or None."""
    keys = _fingerprinted(frozenset(a))
    if keys == _fingerprinted(frozenset(b)):  # the same names: compared without copies
        for key in keys:
            if a[key] != b[key] and str(a[key]) != str(b[key]):
                break
        else:
            return None
    fa, fb = fingerprint_items(a), fingerprint_items(b)
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, "absent"), fb.get(key, "absent")
        if va != vb:
            return f"{key} differs: {a_name} has {va!r}, {b_name} has {vb!r}"
    return None


def noted_differences(named: list[tuple[str, dict[str, Any]]], context: str) -> list[str]:
    """One line for each :data:`NOTED` fact (a role's too: ``server@locale``) that differs
    between the first of ``named`` and another; a capture without the fact (a store made
    before it was recorded) is not compared."""
    first_name, first = named[0]
    lines = []
    for key in sorted(k for k in first if _ROLE_PREFIX.sub("", k, count=1) in NOTED):
        for name, facts in named[1:]:
            if key in facts and str(first[key]) != str(facts[key]):
                lines.append(
                    f"{key} differs {context}: {first_name} has {str(first[key])!r}, {name} "
                    f"has {str(facts[key])!r}; commands that load it (sleep, sort, grep) pay "
                    "for it on one side only: set it in [experiment] env to compare like "
                    "with like"
                )
                break
    return lines


def check_same(named: list[tuple[str, dict[str, Any]]], context: str) -> None:
    """Raise a WorkerError naming the worker, item and both values if any two differ."""
    first_name, first = named[0]
    for name, facts in named[1:]:
        problem = mismatch(first_name, first, name, facts)
        if problem:
            raise WorkerError(
                f"provenance mismatch {context}: {problem} "
                "(use --allow-mismatch to record and proceed)"
            )
