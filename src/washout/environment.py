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

_SCRIPT = r"""
fact() { printf '%s\t%s\n' "$1" "$2"; }
first() { v=""; read -r v < "$2" 2>/dev/null; fact "$1" "$v"; }
fact hostname "$(uname -n)"
fact kernel "$(uname -sr)"
(. /etc/os-release 2>/dev/null; fact os "${PRETTY_NAME:-}")
cpu=""; while IFS=: read -r k v; do case "$k" in "model name"*) cpu="${v# }"; break;; esac; done < /proc/cpuinfo
fact cpu_model "$cpu"
fact cores "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
first governor /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
first frequency_khz /sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq
mem=""; while read -r k v rest; do [ "$k" = "MemTotal:" ] && mem="$v" && break; done < /proc/meminfo
fact memory_kb "$mem"
first boot_id /proc/sys/kernel/random/boot_id
read -r up rest < /proc/uptime; fact uptime_s "$up"
read -r l1 l5 l15 rest < /proc/loadavg; fact load "$l1 $l5 $l15"
first temperature_mc /sys/class/thermal/thermal_zone0/temp
"""
FINGERPRINTED = ("kernel", "cpu_model", "cores", "memory_kb")
"""System facts that must agree across workers (with every provenance file and command)."""


def capture_script(provenance: ProvenanceSpec) -> str:
    """The shell script printing ``key<TAB>value`` lines for every fact and file hash."""
    lines = [_SCRIPT]
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
