"""Runs as one launcher batch (docs/design.md, "The batch launcher"): the probes a batch
reads around its trials and the templates of the records the launcher writes for them.

A batch's trials run back to back from the launcher, with no washout Python between them,
so what washout records for a trial between it and the next is made beforehand: for each
trial the record of its end (and of its run's, after the run's last position), and the
record of what follows it in the batch (the next trial's start; before a run's first
trial, the run's row, its environment and its reset first), each a template whose holes
the launcher fills with what it measured and read (:mod:`washout.data.store.batch` says
what each raw statement holds, and turns it into the rows a trial run alone gets).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime

from washout.data.health import HEALTH_PREFIX
from washout.data.store.batch import BEGIN, END, ENVIRONMENT, LAYOUT, RESET, expand, template
from washout.harness.environment import MOMENT_FILES
from washout.harness.executors.base import CommandResult, OutputTail
from washout.harness.executors.local import ended_as
from washout.harness.launcher.client import (
    AFTER,
    BEFORE,
    MEASURES,
    BatchEnd,
    Probe,
    hole,
    start_error,
)
from washout.harness.machine import SYS_CPU, under
from washout.harness.metrics.health import (
    CUR_FREQ,
    IA32_APERF,
    IA32_MPERF,
    KMSG,
    MSR,
    STAT,
    SWAPS,
    THROTTLE_FILES,
    VMSTAT,
)

NO_RESET = "no reset configured"
"""A run's reset record where it has none (the engine's words: the only kind a batch runs)."""
_AROUND = BEFORE | AFTER


def _n(measure: str) -> bytes:
    return hole("n", MEASURES.index(measure))


@dataclass(frozen=True)
class Probes:
    """What a batch reads: each trial's health counters (before and after it) and the
    moment's facts (after it, for the environment before the next run)."""

    probes: list[Probe]
    health: int
    """How many of :attr:`probes` are the health readings' (they come first)."""
    layout: str
    """Their counts per kind (:data:`~washout.data.store.batch.LAYOUT`)."""

    @classmethod
    def make(cls, health_root: str | None, cpus: set[int]) -> Probes:
        """The probes of the health readings on ``cpus`` under ``health_root`` (None: not
        read), the same files :class:`~washout.harness.metrics.health.LocalHealth` reads;
        and the moment's files (:data:`~washout.harness.environment.MOMENT_FILES`). A
        file that cannot be read gives null, and a value that needs it is absent, as
        there."""
        kinds: dict[str, list[Probe]] = {kind: [] for kind in LAYOUT}
        if health_root is not None:
            root, cpu_list = health_root, sorted(cpus)
            dirs = [under(root, f"{SYS_CPU}/cpu{n}") for n in cpu_list]
            kinds["stat"] = [Probe("L", _AROUND, under(root, STAT), f"cpu{n} ") for n in cpu_list]
            kinds["throttle"] = [
                Probe("L", _AROUND, f"{d}/{f}") for d in dirs for f in THROTTLE_FILES
            ]
            kinds["freq"] = [Probe("L", _AROUND, f"{d}/{CUR_FREQ}") for d in dirs]
            kinds["msr"] = [
                Probe("M", _AROUND, under(root, MSR.format(cpu=n)), str(register))
                for n in cpu_list
                for register in (IA32_APERF, IA32_MPERF)
            ]
            kinds["swap"] = [Probe("W", _AROUND, under(root, SWAPS), under(root, VMSTAT))]
            kinds["kmsg"] = [Probe("K", _AROUND, under(root, KMSG))]
        health = [probe for kind in LAYOUT for probe in kinds[kind]]
        moment = [Probe("L", AFTER, path, "") for path, _ in MOMENT_FILES.values()]
        layout = ",".join(str(len(kinds[kind])) for kind in LAYOUT)
        return cls(health + moment, len(health), layout)

    def readings(self) -> list[bytes]:
        """The holes of the health readings, each probe's before then after."""
        return [hole(side, i) for i in range(self.health) for side in "ba"]

    def moment(self) -> list[bytes | str | int]:
        """The environment statement's moment part: each fact's key, its words kept, and
        the hole of its file's first line as read after the trial before the run."""
        found: list[bytes | str | int] = []
        for i, (key, (_, words)) in enumerate(MOMENT_FILES.items()):
            found += [key, words, hole("a", self.health + i)]
        return found


def end_record(
    trial: int,
    cpus: str | None,
    wall_names: list[str],
    tick: float | None,
    probes: Probes,
    run_done: int | None,
) -> bytes:
    """The template of a trial's end (with ``run_done``, that run's end with it)."""
    params = [
        trial,
        cpus,
        ",".join(wall_names),
        tick is not None,
        tick,
        *map(_n, ("wall", "user", "system", "max_rss", "switches", "migrations")),
        *map(_n, ("started", "ended")),
        probes.layout if tick is not None else ",".join("0" * len(LAYOUT)),
        *(probes.readings() if tick is not None else []),
    ]
    record: list[tuple[str, list[bytes | str | int | float | None]]] = [(END, params)]
    if run_done is not None:
        record.append(("run_status", ["done", run_done]))
    return template(record)


@dataclass(frozen=True)
class RunStart:
    """What a run's first trial follows in a batch: the run's row, the environment before
    it (the facts as last captured, the moment's read after the trial before) and its
    reset (none)."""

    row: tuple[str, tuple[int | str, ...]]
    worker: int
    index: int
    fingerprint: str
    facts: dict[str, str]


def begin_record(
    trial: int, run: int, position: int, test: str, start: RunStart | None, probes: Probes
) -> bytes:
    """The template of what comes before a trial in a batch: its start, after its run's
    records when it is the run's first."""
    record: list[tuple[str, list[bytes | str | int | float | None]]] = []
    if start is not None:
        record.append((start.row[0], list(start.row[1])))
        facts = json.dumps(start.facts, sort_keys=True)
        record.append(
            (
                ENVIRONMENT,
                [start.worker, start.index, _n("now"), start.fingerprint, facts, *probes.moment()],
            )
        )
        record.append((RESET, [_n("now"), NO_RESET, run]))
    record.append((BEGIN, [trial, run, position, test, 0, _n("now")]))
    return template(record)


def trial_cpus(cpus: set[int] | None) -> set[int]:
    """The CPUs a trial's health is read on: its own, else every CPU washout may use."""
    return cpus or os.sched_getaffinity(0)


def last_result(
    end: BatchEnd,
    out: OutputTail,
    err: OutputTail,
    timeout: float | None,
    cpus: str | None,
    start: tuple[str, str | None],
) -> CommandResult:
    """The result of the trial a batch ended at without recording it (it was not ok, wrote
    output, or its record could not be written), as the local executor would have given
    it; ``start``: its executable and directory, named when it could not start."""
    m = end.measures
    started = datetime.fromtimestamp(m["started"] / 1e9, UTC)
    if end.why == "unstarted":
        error = start_error(end.error, end.step, *start)
        return CommandResult.unstarted(f"could not start: {error}", started, 0.0, cpus)
    health = {  # the readings' values as a fold makes them
        str(params[1]): float(params[2] or 0)
        for name, raw in json.loads(end.record)
        for kind, params in expand(name, tuple(raw))
        if kind == "metric" and str(params[1]).startswith(HEALTH_PREFIX)
    }
    resources = {"user": m["user"] / 1e9, "system": m["system"] / 1e9}
    code = os.waitstatus_to_exitcode(m["status"])
    status, why = ended_as(code, timeout if end.why == "timeout" else None)
    return CommandResult(
        status,
        code,
        out.value(),
        err.value(),
        started,
        datetime.fromtimestamp(m["ended"] / 1e9, UTC),
        m["wall"] / 1e9,
        why,
        cpus,
        resources=resources | {"max_rss": m["max_rss"] * 1024.0},
        health=health,
        stdout_cut=out.cut,
        stderr_cut=err.cut,
    )
