"""What every metric source is: the :class:`MetricSource` protocol, the trial it takes a
metric of (:class:`Trial`), the text a parser reads (:class:`Text`), and the two ways a
metric has no value (:class:`MetricError`, :class:`MetricUnavailable`).

A trial's metric is taken in up to three steps, each a hook of the source (those it does
not need do nothing): ``before`` the trial (a ``file`` is removed, so its value comes from
this trial), ``start`` just before the measured command (a sampler's first reading, a
counter set up; it may return a :class:`Reading`, whose ``stop`` right after the command
gives the value), and ``value`` once the trial is over (wall, stdout, a file, counts).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from washout.harness.executors.base import CommandResult, Executor


class MetricError(Exception):
    """A metric could not be taken: its message is the reason a failed trial keeps."""


class MetricUnavailable(Exception):
    """This machine cannot give the metric (no powercap zone, a counter not supported):
    the trial stays ok and its reason says so."""


def finite(value: float, what: str) -> float:
    """``value``, or MetricError when it is nan or infinite."""
    if not math.isfinite(value):
        raise MetricError(f"{what} is {value}, not a finite number")
    return value


def to_float(value: Any, what: str) -> float:
    """A JSON value or a matched text as a finite float, or MetricError saying why not."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise MetricError(f"{what} is {type(value).__name__}, not a number")
    try:
        return finite(float(value), what)
    except ValueError:
        raise MetricError(f"{what} = {str(value)[:40]!r} is not a number") from None


@dataclass(frozen=True)
class Text:
    """What a parser reads: the text, where it came from (for reasons: ``stdout``, ``file
    out.json``...), and whether it was ``cut`` (longer than the tail kept of it, so it
    starts inside the output)."""

    text: str
    where: str
    cut: bool = False

    @classmethod
    def of(cls, data: bytes, where: str, cut: bool = False) -> Text:
        """Bytes read leniently (a stray byte is U+FFFD, never an error)."""
        return cls(data.decode("utf-8", errors="replace"), where, cut)


OWN_OUTPUT = (
    "a metric of another role reads a file, a sample or powercap there "
    "(the measured command's output is the test's own role's)"
)
"""Why a metric of the measured command's own output is not taken on another role."""


class Parser(Protocol):
    """How a text becomes a number (``stdout = "last-number"``, ``json``, ``regex``)."""

    def read(self, text: Text) -> float:
        """A finite number, or MetricError with the reason."""
        ...


class Reading(Protocol):
    """A metric being read while the command runs (a sampler)."""

    async def stop(self) -> float:
        """Its last reading, right after the command, then its value (MetricError)."""
        ...

    async def cancel(self) -> None:
        """Stop reading without a value (the trial failed or was stopped)."""
        ...


@dataclass(slots=True)
class Trial:
    """One trial as its metrics see it: the executor that runs the measured command, the
    command's directory, how much of its stdout is kept (``[experiment] output_tail``), the
    command's result once it is over, and what the trial's sources share (``wrappers``
    put around the command, ``cleanups`` run at its end, ``shared`` state such as perf's
    one ``perf stat``)."""

    own: Executor
    cwd: str | None
    output_tail: int
    result: CommandResult | None = None
    wrappers: list[Callable[[str], str]] = field(default_factory=list)
    cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)

    def command(self, command: str) -> str:
        """The measured command with every source's wrapper around it."""
        for wrap in self.wrappers:
            command = wrap(command)
        return command

    def finished(self) -> CommandResult:
        """The measured command's result (set once it is over)."""
        assert self.result is not None, "a metric's value is taken after the command"
        return self.result

    async def clean_up(self) -> None:
        """What the sources left on the workers (a counts file), removed."""
        for cleanup in self.cleanups:
            await cleanup()
        self.cleanups.clear()


class MetricSource(Protocol):
    """One way of taking a trial's metric, chosen by the keys of its ``[test.metrics.NAME]``
    table; one module each under ``washout.harness.metrics``, listed in its registry."""

    around: ClassVar[bool]
    """Taken while the command runs (its ``start`` does something: sampled, counted), so
    washout's work around the trial (``roles.TrialSide``) takes it, whatever the worker;
    otherwise the engine takes it, ``before`` and ``value`` only."""
    elsewhere: ClassVar[str | None]
    """Why it cannot be taken on another role than the test's own (None: it can)."""

    async def before(self, trial: Trial, side: Executor) -> None:
        """Before the trial (MetricError: the trial cannot run, with the reason)."""
        ...

    async def start(self, trial: Trial, side: Executor) -> Reading | None:
        """Just before the measured command (MetricError: the trial cannot run;
        MetricUnavailable: the machine cannot give it). A Reading gives the value."""
        ...

    async def value(self, trial: Trial, side: Executor) -> float:
        """Once the trial is over, for a source whose ``start`` gave no Reading."""
        ...


class KeyedSource(MetricSource, Protocol):
    """A source one key chooses (every one but stdout, the default), as the registry
    sees it."""

    key: ClassVar[str]
    """The spec key that chooses it (``wall``, ``file``, ``powercap``...)."""
    takes: ClassVar[frozenset[str]]
    """The other keys it goes with (its parser's)."""
    conflict: ClassVar[str]
    """What a metric that gives it with another source is told."""

    @classmethod
    def of(cls, keys: Any, parser: Parser) -> MetricSource:
        """The source of a metric's keys (its own among them), reading with ``parser``."""
        ...


class KeyedParser(Protocol):
    """A parser one key chooses, as the registry sees it."""

    key: ClassVar[str]

    @classmethod
    def of(cls, keys: Any) -> Parser:
        """The parser of a metric's keys (its own among them)."""
        ...


class Source:
    """The hooks a source does not need, as nothing: subclasses override what they use."""

    around: ClassVar[bool] = False
    elsewhere: ClassVar[str | None] = None

    async def before(self, trial: Trial, side: Executor) -> None:
        return None

    async def start(self, trial: Trial, side: Executor) -> Reading | None:
        return None

    async def value(self, trial: Trial, side: Executor) -> float:
        raise NotImplementedError(f"{type(self).__name__}: a source gives a value or a Reading")
