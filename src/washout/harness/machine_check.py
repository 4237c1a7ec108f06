"""``washout check`` and ``washout.check()``: this machine, or each ``[[worker]]`` of a
spec, read and judged at once (:mod:`washout.harness.machine`), after ``--tune`` or
``--reset`` (:mod:`washout.harness.machine_tune`) when asked.

Light to import (``import washout`` brings it): what it needs is imported when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from washout.harness.executors.base import Executor
    from washout.harness.machine import MachineCheck, WorkerCheck
    from washout.harness.spec import Spec

Action = Literal["check", "tune", "reset"]


async def check_worker(executor: Executor, root: str, action: Action) -> WorkerCheck:
    """Connect, read (and tune or reset, then read again) and judge one machine; a worker
    that cannot be reached or read is its ``error``."""
    from washout.errors import WashoutError
    from washout.harness.machine import TuneAction, WorkerCheck, judge
    from washout.harness.machine_read import SAMPLE_SECONDS, read_facts
    from washout.harness.machine_tune import reset, tune

    try:
        await executor.connect()
        facts = await read_facts(executor, root, SAMPLE_SECONDS if action == "check" else 0.0)
        actions: tuple[TuneAction, ...] = ()
        note = ""
        if action != "check":
            actions, note = await (tune if action == "tune" else reset)(executor, facts, root)
            facts = await read_facts(executor, root, SAMPLE_SECONDS)
        return WorkerCheck(executor.name, executor.host, judge(facts, root), actions, note)
    except WashoutError as err:
        return WorkerCheck(executor.name, executor.host, error=str(err))
    finally:
        await executor.close()


def machines(spec: Spec | None, source: str) -> list[Executor]:
    """Each machine to check: one per ``[[worker]]`` (each role's worker of a group on its
    own), else this one. Workers of ``[cluster]`` or ``[allocate]`` exist only once a run
    allocates them, and are refused here."""
    from washout.errors import SpecError
    from washout.harness.executors.local import LocalExecutor
    from washout.harness.executors.ssh import SSHExecutor

    if spec is not None and (spec.cluster or spec.allocate):
        table = "[cluster]" if spec.cluster else "[allocate]"
        raise SpecError(
            f"{source}: its workers come from {table} and exist only once allocated; "
            "`washout run` checks the spec's require on them then"
        )
    if spec is None or not spec.worker:
        return [LocalExecutor()]
    return [SSHExecutor(w) for w in spec.worker]


def check(
    spec: str | Path | None = None, *, tune: bool = False, reset: bool = False, root: str = "/"
) -> MachineCheck:
    """Is the machine set up to measure? ``washout check [SPEC.toml] [--tune | --reset]``:
    each item of this machine (``spec`` None) or of each ``[[worker]]`` of the spec file
    judged, with advice; ``tune`` first sets what root can set and records the values it
    replaces on each machine, ``reset`` writes them back. ``root``: where each machine's
    ``/sys``, ``/proc`` and ``/run`` are (relative: under each worker's workdir). Returns a frozen
    :class:`~washout.harness.machine.MachineCheck` (``to_dict()`` for JSON)."""
    import asyncio

    from washout.errors import WashoutError
    from washout.harness.machine import MachineCheck
    from washout.harness.spec import load_spec

    if tune and reset:
        raise WashoutError("tune and reset: give one (reset undoes what tune did)")
    action: Action = "tune" if tune else "reset" if reset else "check"
    parsed = None if spec is None else load_spec(spec)[0]
    executors = machines(parsed, str(spec))

    async def every() -> tuple[WorkerCheck, ...]:
        return tuple(await asyncio.gather(*(check_worker(ex, root, action) for ex in executors)))

    return MachineCheck(action, root, asyncio.run(every()))
