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

import functools
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime

from washout.data.store.batch import ENVIRONMENT, HEALTH, LAYOUT, expand
from washout.data.store.journal import Statement
from washout.harness.environment import MOMENT_FILES
from washout.harness.executors.base import CommandResult, OutputTail
from washout.harness.executors.local import finished
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
"""A run's reset record where it has none (the only kind a batch runs)."""
_AROUND = BEFORE | AFTER


_NOW_ISO = hole("t", MEASURES.index("now"))
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def _json(value: object) -> bytes:
    return _ENCODE(value).encode()


@functools.lru_cache(maxsize=256)
def _name(text: str) -> bytes:
    """A name as JSON (a test's, a statement's): the same few in every record of a batch."""
    return _json(text)


_BEGUN = b",0," + _NOW_ISO + b"]]]\n"
"""The end of a trial's start: its attempt and the time it is recorded."""


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
        read), the files :class:`~washout.harness.metrics.health.LocalHealth` reads, those
        it cannot open left out as it leaves them (a value that needs one is absent); and
        the moment's files (:data:`~washout.harness.environment.MOMENT_FILES`), each read
        after every trial (null where it cannot be read: the fact is then empty)."""
        kinds: dict[str, list[Probe]] = {kind: [] for kind in LAYOUT}
        if health_root is not None:
            root, cpu_list = health_root, sorted(cpus)
            dirs = [under(root, f"{SYS_CPU}/cpu{n}") for n in cpu_list]
            stat = under(root, STAT)
            kinds["stat"] = [Probe("L", _AROUND, stat, f"cpu{n} ") for n in cpu_list]
            throttles = [f"{d}/{f}" for d in dirs for f in THROTTLE_FILES]
            kinds["throttle"] = [Probe("L", _AROUND, t) for t in throttles if _opens(t)]
            freqs = [f"{d}/{CUR_FREQ}" for d in dirs]
            if all(map(_opens, freqs)):
                kinds["freq"] = [Probe("L", _AROUND, f) for f in freqs]
            msrs = [under(root, MSR.format(cpu=n)) for n in cpu_list]
            if all(map(_opens, msrs)):
                registers = (str(IA32_APERF), str(IA32_MPERF))
                kinds["msr"] = [Probe("M", _AROUND, m, r) for m in msrs for r in registers]
            kinds["swap"] = [Probe("W", _AROUND, under(root, SWAPS), under(root, VMSTAT))]
            kinds["kmsg"] = [Probe("K", _AROUND, under(root, KMSG))]
        health = [probe for kind in LAYOUT for probe in kinds[kind]]
        moment = [Probe("L", AFTER, path, "") for path, _ in MOMENT_FILES.values()]
        layout = ",".join(str(len(kinds[kind])) for kind in LAYOUT)
        return cls(health + moment, len(health), layout)


def _opens(path: str) -> bool:
    """Whether a counter file opens for reading (as :class:`LocalHealth` opens it)."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError:
        return False
    return True


class Templates:
    """The templates of a batch's records, made from pieces encoded once per batch and per
    test: a trial's end and start as washout records them (the launcher fills in times,
    seconds and bytes as the store writes them), its health readings and the environment
    before a run as raw statements (:mod:`washout.data.store.batch`); the environment's
    facts, the same before every run of a batch, are the batch's one constant."""

    def __init__(
        self,
        probes: Probes,
        tick: float | None,
        worker: int,
        fingerprint: str,
        facts: dict[str, str],
    ) -> None:
        self.constants = (_json(json.dumps(facts, sort_keys=True)),)
        self._health = tick is not None
        readings = [hole(side, i) for i in range(probes.health) for side in "ba"]
        self._readings = b",".join(
            [
                _json(tick),
                _hole("s", "user"),
                _hole("s", "system"),
                _hole("n", "switches"),
                _hole("n", "migrations"),
                _json(probes.layout),
                *readings,
            ]
        )
        moment = [
            part
            for i, (key, (_, words)) in enumerate(MOMENT_FILES.items())
            for part in (_json(key), _json(words), hole("a", probes.health + i))
        ]
        environment = b",".join([_json(fingerprint), hole("c", 0), *moment])
        self._after_row = b"],[" + _json(ENVIRONMENT) + b",[%d," % worker
        """What follows a run's row up to its index: its environment's statement."""
        self._after_index = b"," + b",".join(
            [_NOW_ISO, environment + b']],["reset",[' + _NOW_ISO, _NOW_ISO, _json(NO_RESET)]
        )
        """What follows its index up to its id: the environment's rest, then its reset."""
        self._tests: dict[tuple[str | None, tuple[str, ...]], bytes] = {}

    def end(self, trial: int, cpus: str | None, walls: tuple[str, ...], run: int | None) -> bytes:
        """A trial's end, and its run's (``run``) after the run's last position: its row's
        fields and its metrics as the engine records a trial that ended ok (the resource
        metrics less those the test names)."""
        rest = self._tests.get((cpus, walls))
        if rest is None:
            times = [_hole("t", "started"), _hole("t", "ended"), _hole("s", "wall")]
            rest = b"," + b",".join([*times, b'""', b'""', _json(cpus), b"null,null,null"])
            rest += b",%d]]"
            resources = (("user", "s"), ("system", "s"), ("max_rss", "k"))
            metrics = [(name, _hole(code, name)) for name, code in resources if name not in walls]
            metrics += [(name, _hole("s", "wall")) for name in walls]
            for name, value in metrics:
                rest += b',["metric",[%d,' + _json(name) + b"," + value + b"]]"
            if self._health:
                rest += b",[" + _json(HEALTH) + b",[%d," + self._readings + b"]]"
            self._tests[(cpus, walls)] = rest
        done = b"" if run is None else b',["run_status",["done",%d]]' % run
        return (
            b'[["finish_trial",["ok","",0' + rest % ((trial,) * rest.count(b"%d")) + done + b"]\n"
        )

    def begin(
        self, trial: int, run: int, position: int, test: str, start: RunStart | None
    ) -> bytes:
        """What comes before a trial: its start, after its run's records when it is the
        run's first (its row, the environment before it, its reset: none)."""
        head = b"["
        if start is not None:
            row_name, row = start.row
            head += b"[" + _name(row_name) + b"," + _json(list(row)) + self._after_row
            head += b"%d" % start.index + self._after_index + b",%d]]," % run
        begin = b'["begin_trial",[%d,%d,%d,' % (trial, run, position) + _name(test)
        return head + begin + _BEGUN


def _hole(code: str, measure: str) -> bytes:
    return hole(code, MEASURES.index(measure))


@dataclass(frozen=True)
class RunStart:
    """A run whose first trial is in a batch, after another: its row's statement and its
    index (its environment is the batch's facts with the moment read after the trial
    before it, and its reset none)."""

    row: Statement
    index: int


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
        if name == HEALTH
        for _, params in expand(name, tuple(raw))
    }
    resources = {"user": m["user"] / 1e9, "system": m["system"] / 1e9}
    return finished(
        os.waitstatus_to_exitcode(m["status"]),
        timeout if end.why == "timeout" else None,
        (out, err),
        (started, datetime.fromtimestamp(m["ended"] / 1e9, UTC), m["wall"] / 1e9),
        cpus,
        resources | {"max_rss": m["max_rss"] * 1024.0},
        health,
    )
