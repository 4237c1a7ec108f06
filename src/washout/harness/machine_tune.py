"""``washout check --tune`` and ``--reset``: what tune writes (pure), the record of the
values it replaces, kept on the machine itself, and the scripts that write them.

Tune writes what pyperf's ``system tune`` writes, in its order (pyperf/_system.py,
``OPERATIONS``): perf's sample rate to 1, ASLR to full randomization (2), each CPU's
``scaling_min_freq`` up to its ``scaling_max_freq``, the ``performance`` governor, then
turbo off ("setting the CPU scaling governor resets no_turbo and so must be set before
Turbo Boost"). A setting that already holds its value, or that this machine does not have,
is not written. Boot parameters (isolcpus, nohz_full), SMT, swap, the clock source and
``perf_event_paranoid`` are left to the administrator: the check says how.

Before it writes anything, tune records every value it will replace in ``FILES["record"]``
under the root (``/run/washout/tune.json``): written whole to a temporary file and renamed
over the record, so a tune killed halfway leaves a whole record, and ``--reset``, from any
process and at any later time, restores what was replaced. A second tune keeps the first
one's values (the machine's own). A record from an earlier boot is dropped, not applied:
the kernel's settings went with that boot. ``--reset`` writes each recorded value back,
last first, and removes the record once every value is back; what could not be written
stays recorded for the next reset. pyperf's reset writes fixed defaults instead
(``powersave``, a sample rate of 100000); washout restores what was there.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from washout.errors import WorkerError
from washout.harness.environment import FACT_FUNCTIONS
from washout.harness.executors.base import CommandOptions, Executor
from washout.harness.machine import (
    FILES,
    Facts,
    TuneAction,
    cpu_file,
    numbered,
    one,
    parse_facts,
    under,
)

WRITE_TIMEOUT = 60.0
"""Seconds a tune or reset script may take on a worker."""

_PUT = r"""put() {
  cur=""; read -r cur 2>/dev/null < "$2"
  if [ "$cur" = "$3" ]; then fact "unchanged:$1" "$cur"
  elif err=$( { printf '%s\n' "$3" > "$2"; } 2>&1 ); then
    now=""; read -r now 2>/dev/null < "$2"
    if [ "$now" = "$3" ]; then fact "done:$1" "$cur"
    else fact "failed:$1" "$cur	reads ${now:-nothing} after the write"; fi
  else fact "failed:$1" "$cur	$err"; fi
}
"""
"""``put INDEX FILE VALUE``: write VALUE unless the file holds it, then read it back (the
kernel may refuse or clamp a value it accepted); prints ``OUTCOME:INDEX`` with the value
found before (and why, when it failed)."""


@dataclass(frozen=True)
class Write:
    """One file tune writes: the item, the path (under the root), the value it writes and
    the value it replaces."""

    item: str
    path: str
    value: str
    previous: str


def tune_writes(facts: Facts, root: str) -> list[Write]:
    """What tune writes on a machine with these facts, in pyperf's order."""
    writes = []
    rate, aslr = one(facts, "sample_rate"), one(facts, "aslr")
    if rate and rate != "1":
        writes.append(Write("perf_sample_rate", under(root, FILES["sample_rate"]), "1", rate))
    if aslr in ("0", "1"):
        writes.append(Write("aslr", under(root, FILES["aslr"]), "2", aslr))
    highs = numbered(facts, "max_freq")
    for cpu, low in numbered(facts, "min_freq").items():
        if highs.get(cpu) and low and low != highs[cpu]:
            path = under(root, cpu_file(cpu, "min_freq"))
            writes.append(Write("frequency", path, highs[cpu], low))
    for cpu, governor in numbered(facts, "governor").items():
        if governor and governor != "performance":
            path = under(root, cpu_file(cpu, "governor"))
            writes.append(Write("governor", path, "performance", governor))
    boost, no_turbo = one(facts, "boost"), one(facts, "no_turbo")
    if boost == "1":
        writes.append(Write("turbo", under(root, FILES["boost"]), "0", boost))
    elif boost is None and no_turbo == "0":
        writes.append(Write("turbo", under(root, FILES["no_turbo"]), "1", no_turbo))
    return writes


def _put_lines(targets: list[tuple[str, str]]) -> str:
    """``put`` of each (path, value), numbered in order."""
    return "".join(
        f"put {i} {shlex.quote(path)} {shlex.quote(value)}\n"
        for i, (path, value) in enumerate(targets)
    )


def _save_record(path: str, record: dict[str, Any]) -> str:
    """Shell lines writing ``record`` to ``path`` whole (a temporary file of this shell's
    own, renamed over it), printing ``unrecorded`` with the error and leaving the script if
    that fails."""
    text, q = json.dumps(record, separators=(",", ":")), shlex.quote(path)
    directory = shlex.quote(str(PurePosixPath(path).parent))
    return (
        f"if ! err=$( {{ mkdir -p {directory} && printf '%s\\n' {shlex.quote(text)} > {q}.$$ "
        f'&& mv -f {q}.$$ {q}; }} 2>&1 ); then fact unrecorded "$err"; exit 0; fi\n'
    )


def _recorded(facts: Facts, root: str, worker: str) -> list[dict[str, str]] | None:
    """The writes of this boot's record (None: no record, or one of an earlier boot);
    a record that is not one is the worker's one-line error."""
    text = one(facts, "record")
    if text is None:
        return None
    path = under(root, FILES["record"])
    try:
        record = json.loads(text)
        writes = [
            {key: str(w[key]) for key in ("item", "path", "previous")} for w in record["writes"]
        ]
    except (ValueError, TypeError, KeyError) as err:
        raise WorkerError(
            f"{worker}: {path} is not a record of washout check --tune ({err}); "
            "remove it once its settings are as you want them"
        ) from None
    return writes if record.get("boot_id") == one(facts, "boot_id") else None


async def _run(executor: Executor, script: str) -> Facts:
    """Run a tune or reset script on the worker (in its workdir, as the reading); what it
    printed."""
    options = CommandOptions(timeout=WRITE_TIMEOUT, cwd=executor.workdir)
    result = await executor.run(FACT_FUNCTIONS + script, options)
    if result.status != "ok":
        raise WorkerError(f"{executor.name}: the settings' script failed: {result.reason}")
    return parse_facts(result.stdout.decode("utf-8", errors="replace"))


def _actions(items: list[str], targets: list[tuple[str, str]], out: Facts) -> list[TuneAction]:
    """What each ``put`` did, from its printed outcome."""
    actions = []
    for i, (item, (path, value)) in enumerate(zip(items, targets)):
        for outcome in ("done", "unchanged", "failed"):
            if f"{outcome}:{i}" in out:
                before, _, reason = out[f"{outcome}:{i}"][0].partition("\t")
                actions.append(TuneAction(item, path, before, value, outcome, reason.strip()))
                break
        else:
            actions.append(TuneAction(item, path, "", value, "failed", "the script stopped"))
    return actions


async def tune(executor: Executor, facts: Facts, root: str) -> tuple[tuple[TuneAction, ...], str]:
    """Record what tune replaces on this machine, then write it; returns each write and a
    note. A record that cannot be written stops it before any write."""
    writes = tune_writes(facts, root)
    record_path = under(root, FILES["record"])
    if not writes:
        return (), "nothing to tune: each setting tune makes is made, or absent here"
    kept = _recorded(facts, root, executor.name) or []
    known = {w["path"] for w in kept}
    fresh = [{"item": w.item, "path": w.path, "previous": w.previous} for w in writes]
    record = {
        "boot_id": one(facts, "boot_id"),
        "writes": kept + [w for w in fresh if w["path"] not in known],
    }
    targets = [(w.path, w.value) for w in writes]
    out = await _run(executor, _PUT + _save_record(record_path, record) + _put_lines(targets))
    if "unrecorded" in out:
        raise WorkerError(
            f"{executor.name}: cannot record the values --tune would replace in {record_path}: "
            f"{out['unrecorded'][0].strip()}; nothing changed"
        )
    actions = _actions([w.item for w in writes], targets, out)
    return tuple(
        actions
    ), f"the values replaced are recorded in {record_path}; --reset restores them"


async def reset(executor: Executor, facts: Facts, root: str) -> tuple[tuple[TuneAction, ...], str]:
    """Write back what this boot's tune record holds, last first; remove the record when
    every value is back, else keep what failed in it."""
    record_path = under(root, FILES["record"])
    writes = _recorded(facts, root, executor.name)
    if writes is None:
        if one(facts, "record") is None:
            return (), f"nothing to reset: no record of --tune in {record_path}"
        await _run(executor, f"rm -f {shlex.quote(record_path)}\n")
        return (), (
            f"the machine has booted since --tune, so its settings are the boot's own: "
            f"{record_path} removed, nothing written"
        )
    writes.reverse()
    targets = [(w["path"], w["previous"]) for w in writes]
    out = await _run(executor, _PUT + _put_lines(targets))
    actions = _actions([w["item"] for w in writes], targets, out)
    failed = [w for w, a in zip(writes, actions) if a.outcome == "failed"]
    if failed:
        record = {"boot_id": one(facts, "boot_id"), "writes": failed[::-1]}
        kept = "unrecorded" not in await _run(executor, _save_record(record_path, record))
        where = f"kept in {record_path}" if kept else f"and {record_path} could not be rewritten"
        return tuple(actions), f"{len(failed)} value(s) could not be restored, {where}"
    await _run(executor, f"rm -f {shlex.quote(record_path)}\n")
    return tuple(actions), f"every value --tune replaced is back; {record_path} removed"
