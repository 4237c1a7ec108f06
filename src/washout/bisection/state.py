"""A bisect's durable state: one directory, one JSON file, one writer.

``DIR/bisect.json`` holds what the bisect was asked (the spec's text, repository, good and
bad commits, build command, options, seed), the first-parent history, every build's
record, and every step with its looks: each look's per-run log ratios, its level and its
decision. It is replaced atomically (written beside, flushed, renamed) after every build
and every look, so a bisect killed at any instant resumes from the last thing it
finished: each look's trials are in the look's own washout store
(``DIR/steps/step-NN/look-K.db``), which the engine's resume continues. One process works
on a bisect at a time (``DIR/bisect.lock``, an flock the kernel releases when the process
dies).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from washout.bisection.build import Build
from washout.bisection.git import Commit
from washout.errors import StoreBusyError, StoreWriteError, WashoutError
from washout.sweep.result import from_plain, to_plain

STATE = "bisect.json"
LOCK = "bisect.lock"
FORMAT = 1
"""The state file's format version."""


@dataclass(frozen=True)
class Config:
    """What a bisect was asked: fixed when it starts, read back when it resumes."""

    spec_text: str
    spec_source: str
    repo: str
    good: str
    bad: str
    build: str
    build_timeout: float | None
    test: str
    metric: str
    better: str
    threshold: float | None
    """The equivalence margin the user set, as a fraction (0.02 for 2%); None: derived."""
    alpha: float
    runs: int
    max_runs: int
    seed: int
    copies_builds: bool
    """Whether the builds are copied into each worker's workdir (SSH workers), or the
    workers read them where they are (this machine, Slurm nodes on a shared file system)."""


@dataclass(frozen=True)
class Look:
    """One batch of runs of a step and the decision after it (``runs`` per worker so far,
    at ``level``; ``store`` relative to the bisect's directory). ``x``, ``y``, ``d``: per run,
    log(candidate / good), log(candidate / bad), log(bad / good) (a check or effect step
    has ``d`` only, ``bad`` standing for its second build)."""

    index: int
    runs: int
    store: str
    level: float
    decision: str
    final: bool
    reason: str
    trials: int
    seconds: float
    apart: bool = False
    """The candidate differed from both good and bad (the metric is not monotone there)."""
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    d: tuple[float, ...] = ()


@dataclass(frozen=True)
class Step:
    """A step: ``check`` (are good and bad different?), ``candidate`` (is ``commit`` like
    good or like bad?) or ``effect`` (how much ``commit`` changed the metric against
    ``reference``); its share of the bisect's alpha, its margin (a log ratio; None when
    derived from each run's change) and looks."""

    index: int
    kind: str
    commit: str
    reference: str
    alpha: float
    margin: float | None
    looks: tuple[Look, ...] = ()

    @property
    def last(self) -> Look | None:
        return self.looks[-1] if self.looks else None

    def with_look(self, look: Look) -> Step:
        return replace(self, looks=(*self.looks, look))


@dataclass(frozen=True)
class State:
    """The whole state; every change makes a new one (:meth:`save` writes it)."""

    config: Config
    commits: tuple[Commit, ...]
    builds: dict[str, Build]
    steps: tuple[Step, ...] = ()
    seconds: float = 0.0
    """Time spent building and measuring, over every session."""
    format: int = FORMAT

    def with_build(self, build: Build) -> State:
        return replace(self, builds={**self.builds, build.commit: build})

    def with_step(self, step: Step) -> State:
        """This state with ``step`` added, or in place of the step of its index and kind."""
        key = (step.index, step.kind)
        if any((s.index, s.kind) == key for s in self.steps):
            steps = tuple(step if (s.index, s.kind) == key else s for s in self.steps)
        else:
            steps = (*self.steps, step)
        return replace(self, steps=steps)

    def step(self, kind: str, index: int | None = None) -> Step | None:
        found = [s for s in self.steps if s.kind == kind and (index is None or s.index == index)]
        return found[-1] if found else None

    def candidates(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "candidate"]

    def save(self, root: Path) -> None:
        """Replace ``root/bisect.json`` atomically (a reader or a crash sees the old or the
        new state whole)."""
        path = root / STATE
        partial = root / (STATE + ".partial")
        data = json.dumps(to_plain(self), indent=1).encode()
        try:
            with partial.open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, path)
        except OSError as err:
            raise StoreWriteError(
                f"{path}: cannot write the bisect's state: {err.strerror}"
            ) from None

    @classmethod
    def load(cls, root: Path) -> State:
        """The state of the bisect in ``root``, or a one-line error."""
        path = root / STATE
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise WashoutError(f"{root}: not a bisect directory (no {STATE})") from None
        except (OSError, ValueError) as err:
            raise WashoutError(f"{path}: cannot read the bisect's state: {err}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise WashoutError(
                f"{path}: format = {data.get('format') if isinstance(data, dict) else data!r}:"
                f" not a state this washout reads (format {FORMAT})"
            )
        state: State = from_plain(cls, data, str(path))
        return state


def is_bisect_dir(path: Path) -> bool:
    """Whether ``path`` is a directory holding a bisect's state."""
    return path.is_dir() and (path / STATE).is_file()


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Be the one process working on the bisect in ``root`` while the block runs."""
    path = root / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise StoreWriteError(f"{path}: cannot create the bisect's lock: {err.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise StoreBusyError(
                f"{root}: in use by washout pid {holder}: one washout works on a bisect at a time"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
