"""The idle arm (``[experiment] idle = true``): energy net of the machine at rest.

For every test with a powercap metric, the plan gets a test ``idle:NAME`` whose trials
run ``sleep`` for as long as NAME's trials take, taking NAME's powercap metrics (the same
zones, unit and role) and nothing else. The plan interleaves it like any test (its place
in every run is seeded with the rest), so the energy of the machine doing nothing of the
test's is read through the same readings, as long and under the same conditions;
:func:`washout.stats.energy.net_energy` subtracts it (codecarbon and the RAPL literature
report an idle baseline; a number that is not measured is never estimated).

How long each idle trial sleeps: the median wall time of NAME's trials that finished ok
on this worker so far: every earlier run's and the current run's before it, read from the
store when a session starts (so a resumed experiment takes up exactly the trials it had;
the superseded ones of an interrupted run do not count), and this session's warmup trials
of NAME. ``idle`` needs ``warmup >= 1``, so every session knows a length before its first
run; an idle trial whose test has no ok trial yet fails, saying so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from washout.data.store import Store
from washout.errors import SpecError
from washout.harness.metrics.powercap import is_energy
from washout.harness.spec import MetricSpec, Spec, Test
from washout.stats.energy import IDLE_PREFIX

SLEEP = "sleep"
"""An idle test's command as stored; each trial runs ``sleep SECONDS``."""


def energy_metrics(metrics: dict[str, MetricSpec]) -> dict[str, MetricSpec]:
    """The powercap (energy) metrics among ``metrics``."""
    return {name: m for name, m in metrics.items() if is_energy(m)}


def idle_test(test: Test) -> Test:
    """The idle test of ``test``: ``sleep`` on its role, pinned as it is, with its energy
    metrics only (no background command: the machine at rest)."""
    return Test(
        name=IDLE_PREFIX + test.name,
        command=SLEEP,
        timeout=test.timeout,
        metrics=energy_metrics(test.metrics),
        cwd=test.cwd,
        env=test.env,
        cpus=test.cpus,
        role=test.role,
    )


def with_idle_arm(spec: Spec, tests: list[Test], source: str) -> list[Test]:
    """``tests`` followed by the idle test of each one with a powercap metric when the spec
    asks for the idle arm (a one-line SpecError when it cannot have one), else ``tests``."""
    exp = spec.experiment
    if not exp.idle:
        return tests
    measured = [t for t in tests if energy_metrics(t.metrics)]
    if not measured:
        raise SpecError.at(
            source,
            "experiment.idle",
            True,
            "the idle arm sleeps as long as a test with a powercap metric; no test has one",
        )
    if exp.warmup < 1:
        raise SpecError.at(
            source,
            "experiment.warmup",
            exp.warmup,
            "idle = true needs warmup >= 1: an idle trial sleeps as long as its test's "
            "median trial, and each session's first length comes from the warmup",
        )
    for test in tests:
        if test.name.startswith(IDLE_PREFIX):
            raise SpecError.at(
                source,
                "test.name",
                test.name,
                f"with idle = true, names starting {IDLE_PREFIX!r} are the idle arm's",
            )
    return tests + [idle_test(t) for t in measured]


def sleep_command(seconds: float) -> str:
    """The command of an idle trial of ``seconds`` (``sleep`` takes a fraction: coreutils,
    BusyBox)."""
    return f"{SLEEP} {seconds:.6f}"


class IdleLengths:
    """How long one worker's idle trials sleep (module docstring): the wall times of each
    test's ok trials on that worker, gathered as they finish."""

    def __init__(self, tests: Iterable[Test]) -> None:
        """``tests``: an experiment's, its idle arm (:func:`with_idle_arm`) among them."""
        self.idle = {
            t.name: t.name.removeprefix(IDLE_PREFIX)
            for t in tests
            if t.name.startswith(IDLE_PREFIX)
        }
        """Each idle test's name -> its test's."""
        self.measured = set(self.idle.values())
        self.walls: dict[str, list[float]] = {}

    @classmethod
    def from_store(cls, tests: list[Test], store: Store, worker_id: int) -> IdleLengths:
        """The lengths a session starts from: the worker's ok trials in the store (none
        superseded; warmups are stored with their own status and are not among them)."""
        lengths = cls(tests)
        for test, wall in store.ok_durations(worker_id):
            lengths.add(test, wall)
        return lengths

    def add(self, test: str, wall: float) -> None:
        """An ok trial of ``test`` that lasted ``wall`` seconds."""
        if test in self.measured:
            self.walls.setdefault(test, []).append(wall)

    def command(self, test: Test) -> str | None:
        """What a trial of ``test`` runs: its command, or for an idle test ``sleep`` of its
        test's median so far (None when that test has no ok trial yet)."""
        of = self.idle.get(test.name)
        if of is None:
            return test.command
        walls = self.walls.get(of)
        return sleep_command(statistics.median(walls)) if walls else None

    def missing(self, test: Test) -> str:
        """Why an idle trial of ``test`` cannot run yet."""
        of = self.idle[test.name]
        return f"idle arm: test {of!r} has no ok trial on this worker yet to take its length from"
