"""Reading a machine's settings on any worker, and a spec's ``require`` checked before a
run (the items are judged in :mod:`washout.harness.machine`).

One shell script reads every file the check needs, on the local machine and over SSH
alike, with the environment capture's own reader (``first``,
:data:`~washout.harness.environment.FACT_FUNCTIONS`) and the powercap reader of the
energy metrics (:func:`~washout.harness.metrics.powercap.powercap_script`), so no file is read two
ways. Every path is under a root, ``/`` on a real machine: pointed at a tree laid out as the
kernel lays out ``/sys`` and ``/proc``, the same script reads it (the tests do, as they do
for RAPL with ``powercap_root``). The processes' CPU use is sampled for
:data:`SAMPLE_SECONDS` (two readings of ``/proc/*/stat``) by ``washout check``, and before
a run only when the spec requires ``busy``.
"""

from __future__ import annotations

import asyncio
import shlex

from washout.errors import WorkerError
from washout.harness.environment import FACT_FUNCTIONS
from washout.harness.executors.base import CommandOptions, Executor
from washout.harness.machine import (
    FILES,
    PER_CPU,
    POWERCAP,
    SYS_CPU,
    THERMAL,
    CheckItem,
    Facts,
    judge,
    parse_facts,
    parse_requirement,
    under,
    unmet,
)
from washout.harness.metrics.powercap import parse_powercap, powercap_script

SAMPLE_SECONDS = 1.0
"""How long ``washout check`` watches the processes' CPU use."""
READ_TIMEOUT = 60.0
"""Seconds the reading script may take on a worker."""
OUTPUT_LIMIT = 16 << 20
"""Bytes of the script's output kept: two readings of every process's stat line fit."""


_SAMPLE = r"""fact sampled ""
fact self "$$ $PPID"
fact clk_tck "$(getconf CLK_TCK)"
first uptime0 "$r"@UPTIME@
seen=""
for f in "$r"/proc/[0-9]*/stat; do
  l=""; read -r l 2>/dev/null < "$f" && fact stat0 "$l" && seen=1
done
if [ -n "$seen" ]; then
  sleep @SECONDS@
  first uptime1 "$r"@UPTIME@
  for f in "$r"/proc/[0-9]*/stat; do l=""; read -r l 2>/dev/null < "$f" && fact stat1 "$l"; done
fi
"""
"""Two readings of every process's ``stat`` line, some seconds apart, with the uptime at
each (the time between them) and what the check itself is (its shell and that shell's
parent)."""
_PROBE = r"""have() { [ -e "$2" ] && first "$1" "$2"; }
r=@ROOT@
@SAMPLE@for d in "$r"@SYS_CPU@/cpu[0-9]*; do
  n=${d##*/cpu}
@PER_CPU@done
for z in "$r"@THERMAL@/thermal_zone[0-9]*; do
  n=${z##*/thermal_zone}
  have thermal_temp:$n "$z/temp"
  have thermal_type:$n "$z/type"
  for t in "$z"/trip_point_[0-9]*_type; do
    [ -e "$t" ] || continue
    k=""; read -r k 2>/dev/null < "$t"
    v=""; read -r v 2>/dev/null < "${t%_type}_temp"
    fact trip:$n "$k $v"
  done
done
if [ -e "$r"@SWAPS@ ]; then
  while IFS= read -r l; do fact swap "$l"; done < "$r"@SWAPS@
fi
for z in "$r"@POWERCAP@/intel-rapl:*; do
  [ -e "$z/energy_uj" ] && fact rapl_zone "${z##*/}"
done
( @RAPL@ ) | while IFS= read -r l; do fact rapl "$l"; done
fact uid "$(id -u)"
@SINGLE@fact end ""
"""
"""The check's script (``@NAME@`` filled in by :func:`probe_script`)."""


def _fill(template: str, **values: str) -> str:
    for name, value in values.items():
        template = template.replace(f"@{name}@", value)
    return template


def probe_script(root: str, sample: float) -> str:
    """The shell script printing ``key<TAB>value`` for every file the check reads under
    ``root`` (a missing file prints nothing; an unreadable one an empty value), ending
    with ``end``; with ``sample`` > 0 it first samples the processes for that long. The
    single files come last, so an output cut at its start loses processes, never
    settings."""
    sampling = _fill(_SAMPLE, UPTIME=FILES["uptime"], SECONDS=f"{sample:g}") if sample > 0 else ""
    return FACT_FUNCTIONS + _fill(
        _PROBE,
        ROOT=shlex.quote(root.rstrip("/")),
        SAMPLE=sampling,
        SYS_CPU=SYS_CPU,
        PER_CPU="".join(f'  have {key}:$n "$d/{path}"\n' for key, path in PER_CPU.items()),
        THERMAL=THERMAL,
        SWAPS=FILES["swaps"],
        POWERCAP=POWERCAP,
        RAPL=powercap_script(under(root, POWERCAP)),
        SINGLE="".join(f'have {key} "$r"{path}\n' for key, path in FILES.items() if key != "swaps"),
    )


async def read_facts(executor: Executor, root: str = "/", sample: float = 0.0) -> Facts:
    """The facts of one machine (:func:`probe_script`, run in the worker's workdir, which
    a relative ``root`` is under); RAPL's lines as ``zone name`` of each readable zone. A
    script that did not finish is the worker's one-line error."""
    result = await executor.run(
        probe_script(root, sample),
        CommandOptions(
            timeout=READ_TIMEOUT + sample, cwd=executor.workdir, output_tail=OUTPUT_LIMIT
        ),
    )
    facts = parse_facts(result.stdout.decode("utf-8", errors="replace"))
    if "end" not in facts:
        raise WorkerError(f"{executor.name}: cannot read the machine's settings: {result.reason}")
    zones = parse_powercap("\n".join(facts.pop("rapl", [])))
    if zones:
        facts["rapl"] = [f"{zone} {name}" for zone, (name, _, _) in zones.items()]
    return facts


def _sides(executor: Executor) -> list[Executor]:
    """The machines behind an executor: each role's of a worker group, else itself."""
    from washout.harness.roles import GroupExecutor

    if isinstance(executor, GroupExecutor):
        return [side.inner for side in executor.sides.values()]
    return [executor]


async def require_met(executors: list[Executor], require: list[str]) -> None:
    """Refuse a run in one line (a :class:`WorkerError` naming the worker, the item, the
    value wanted and the value found) when a connected worker does not meet the spec's
    ``require``; processes are sampled only when it names ``busy``."""
    if not require:
        return
    wanted = [parse_requirement(text) for text in require]
    names = sorted({req.item for req in wanted})
    sample = SAMPLE_SECONDS if "busy" in names else 0.0
    sides = [side for ex in executors for side in _sides(ex)]
    read = await asyncio.gather(*(read_facts(side, "/", sample) for side in sides))
    for side, facts in zip(sides, read):
        items: dict[str, CheckItem] = {item.name: item for item in judge(facts, "/", names)}
        problems = unmet(wanted, items)
        if problems:
            raise WorkerError(f"worker {side.name} does not meet [experiment] {problems[0]}")
