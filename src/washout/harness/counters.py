"""Hardware and software counters of a trial from ``perf stat`` (Linux perf).

The measured command runs under ``perf stat -x , -o FILE -e EVENT ...``, which counts the
chosen events over that command and its children and writes them as CSV (perf-stat(1),
"CSV FORMAT": counter value, unit, event name, run time, percentage of run time
measured, ...). An event the machine cannot count (a VM without a virtual PMU) has the
value ``<not supported>``, one that never ran ``<not counted>``: such a metric is
reported as not available, never as 0. perf itself adds a few milliseconds to the
measured command's wall time (its start and the counters' set-up), which
``bench/sampling_overhead.py`` measures.
"""

from __future__ import annotations

import shlex

from washout.harness.measure import MetricError

PERF = "perf"


def perf_command(command: str, events: list[str], output: str) -> str:
    """``command`` under ``perf stat``, its counts written as CSV to ``output``; the
    command itself is one quoted argument of ``/bin/sh -c``, so it runs as written."""
    chosen = " ".join(f"-e {shlex.quote(event)}" for event in dict.fromkeys(events))
    return (
        f"{PERF} stat -x , -o {shlex.quote(output)} {chosen} -- /bin/sh -c {shlex.quote(command)}"
    )


def perf_values(text: str, events: list[str]) -> dict[str, float | str]:
    """Each event's count from ``perf stat -x ,`` output, or why it has none
    (``not supported``, ``not counted``). An event missing from the output is an error
    naming the events perf did report."""
    found: dict[str, float | str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            continue
        value, event = fields[0].strip(), fields[2].strip()
        if value.startswith("<") and value.endswith(">"):
            found[event] = value.strip("<>")
            continue
        try:
            found[event] = float(value)
        except ValueError:
            found[event] = f"gave {value!r}, not a number"
    missing = [e for e in events if e not in found]
    if missing:
        shown = ", ".join(sorted(found)) or "none"
        raise MetricError(f"perf stat reported no event {missing[0]!r} (it reported: {shown})")
    return {e: found[e] for e in events}
