"""``wall = true``: the seconds washout measured around the measured command's process, from
its start to its exit (hyperfine's wall-clock time); every test's metric by default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from washout.harness.executors.base import Executor
from washout.harness.fields import StrictModel
from washout.harness.metrics.base import OWN_OUTPUT, Parser, Source, Trial


class WallKeys(StrictModel):
    wall: bool = False
    """Seconds measured by washout around the process."""


@dataclass(frozen=True)
class Wall(Source):
    """The command's wall time, measured by its executor (``CommandResult.duration``)."""

    key: ClassVar[str] = "wall"
    takes: ClassVar[frozenset[str]] = frozenset()
    conflict: ClassVar[str] = "wall is measured by washout; it takes no other source"
    elsewhere: ClassVar[str | None] = OWN_OUTPUT

    @classmethod
    def of(cls, keys: WallKeys, parser: Parser) -> Wall:
        return cls()

    async def value(self, trial: Trial, side: Executor) -> float:
        return trial.finished().duration
