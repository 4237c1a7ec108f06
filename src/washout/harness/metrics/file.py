"""``file = "path"``: a file the trial writes, read on the worker after it (a regular file
of at most METRIC_FILE_LIMIT bytes), parsed by the metric's ``json``, ``regex`` or as its
last number. The file is removed before the trial, so its value comes from this trial."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from washout.harness.executors.base import Executor
from washout.harness.fields import StrictModel
from washout.harness.metrics.base import MetricError, Parser, Source, Text, Trial


class FileKeys(StrictModel):
    file: str | None = None
    """A file the trial writes (relative to its working directory on the worker)."""


@dataclass(frozen=True)
class File(Source):
    """``path`` on the metric's side, read after the trial by ``parser``."""

    path: str
    parser: Parser
    key: ClassVar[str] = "file"
    takes: ClassVar[frozenset[str]] = frozenset({"json", "regex"})
    conflict: ClassVar[str] = "stdout = 'last-number' reads stdout; for a file give file alone"

    @classmethod
    def of(cls, keys: FileKeys, parser: Parser) -> File:
        return cls(str(keys.file), parser)

    async def before(self, trial: Trial, side: Executor) -> None:
        try:
            await side.remove_file(self.path, trial.cwd)
        except OSError as err:
            raise MetricError(
                f"file {self.path} cannot be removed before the trial (a value must come "
                f"from this trial): {err}"
            ) from None

    async def value(self, trial: Trial, side: Executor) -> float:
        try:
            content = await side.read_file(self.path, trial.cwd)
        except OSError as err:
            on = "" if side is trial.own else f" on {side.name}"
            raise MetricError(
                f"file {self.path}{on} could not be read: {err.strerror or err}"
            ) from None
        return self.parser.read(Text.of(content, f"file {self.path}"))

    def removes_outside(self, workdir: Path) -> Path | None:
        """The existing file of this machine outside ``workdir`` (resolved) that this
        metric removes before every trial, if it names one."""
        path = (workdir / self.path).resolve()
        return path if os.path.lexists(path) and not path.is_relative_to(workdir) else None
