"""Environment capture and build fingerprints (provenance, mismatch detection).

One shell script reads the facts on any Linux worker, local or remote, so the same code
serves both executors. Items split in two: facts that identify *what ran* (kernel, CPU,
file hashes, the output of provenance commands) form the fingerprint, compared across
workers and over time; facts that describe the moment (boot id, uptime, load, frequency,
temperature) are recorded only.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from washout.errors import WashoutError
from washout.execute.base import Executor
from washout.spec import ProvenanceSpec

_FACTS = {
    "hostname": "hostname 2>/dev/null || cat /proc/sys/kernel/hostname",
    "kernel": "uname -sr",
    "os": ". /etc/os-release 2>/dev/null && echo \"$PRETTY_NAME\"",
    "cpu_model": "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'",
    "cores": "nproc",
    "governor": "cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
    "frequency_khz": "cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
    "memory_kb": "awk '/^MemTotal/ {print $2}' /proc/meminfo",
    "boot_id": "cat /proc/sys/kernel/random/boot_id",
    "uptime_s": "cut -d' ' -f1 /proc/uptime",
    "load": "cut -d' ' -f1-3 /proc/loadavg",
    "temperature_mc": "cat /sys/class/thermal/thermal_zone0/temp",
}
FINGERPRINTED = ("kernel", "cpu_model", "cores", "memory_kb")
"""System facts that must agree across workers (with every provenance file and command)."""


def capture_script(provenance: ProvenanceSpec) -> str:
    """The shell script printing ``key<TAB>value`` lines for every fact and file hash."""
    lines = [f"printf '%s\\t%s\\n' {key} \"$( ({cmd}) 2>/dev/null | head -c 300 | tr '\\n\\t' '  ')\""
             for key, cmd in _FACTS.items()]
    for path in provenance.files:
        q = shlex.quote(path)
        lines.append(f"printf '%s\\t%s\\n' {shlex.quote('file:' + path)} "
                     f"\"$(sha256sum -- {q} 2>/dev/null | cut -d' ' -f1 || true)\"")
    return "\n".join(lines)


def parse_capture(text: str) -> dict[str, str]:
    facts: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            facts[key] = value.strip()
    return facts


async def capture(executor: Executor, provenance: ProvenanceSpec, cwd: str | None) -> dict[str, str]:
    """The worker's environment now: system facts, file hashes, provenance command outputs.

    A missing provenance file is recorded as ``missing`` (and so mismatches a worker
    that has it).
    """
    result = await executor.run(capture_script(provenance), timeout=60, cwd=cwd)
    facts = parse_capture(result.stdout.decode("utf-8", errors="replace"))
    for path in provenance.files:
        if not facts.get("file:" + path):
            facts["file:" + path] = "missing"
    for command in provenance.commands:
        out = await executor.run(command, timeout=60, cwd=cwd)
        text = (out.stdout + out.stderr).decode("utf-8", errors="replace").strip()
        facts["command:" + command] = text[:500] if out.status == "ok" else f"failed: {out.reason}"
    return facts


def fingerprint_items(facts: dict[str, Any]) -> dict[str, str]:
    """The items that identify what ran (system facts, files, commands)."""
    return {k: str(v) for k, v in sorted(facts.items())
            if k in FINGERPRINTED or k.startswith(("file:", "command:"))}


def fingerprint(facts: dict[str, Any]) -> str:
    """A short stable hash of the fingerprinted items."""
    blob = json.dumps(fingerprint_items(facts), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def mismatch(a_name: str, a: dict[str, Any], b_name: str, b: dict[str, Any]) -> str | None:
    """A one-line description of the first fingerprinted item that differs, or None."""
    fa, fb = fingerprint_items(a), fingerprint_items(b)
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, "absent"), fb.get(key, "absent")
        if va != vb:
            return f"{key} differs: {a_name} has {va!r}, {b_name} has {vb!r}"
    return None


def check_same(named: list[tuple[str, dict[str, Any]]], context: str) -> None:
    """Raise a WashoutError naming the worker, item and both values if any two differ."""
    first_name, first = named[0]
    for name, facts in named[1:]:
        problem = mismatch(first_name, first, name, facts)
        if problem:
            raise WashoutError(f"provenance mismatch {context}: {problem} "
                               "(use --allow-mismatch to record and proceed)")
