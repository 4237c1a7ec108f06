"""A trial's context on its worker: the environment's size, the working directory's path
length and ASLR, as ``[experiment] context`` randomizes them (the levels, and which trial
takes which, are planned: :func:`washout.harness.plan.context_levels`).

- ``env``: the trial's environment gains ``WASHOUT_CONTEXT_PADDING`` holding ``x`` repeated
  the level's bytes (present at 0 bytes too, so only the padding's length differs between
  levels), as hyperfine pads with ``HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET``. The kernel
  copies the environment's strings to the top of the stack, so their size sets where every
  stack frame lands (Mytkowicz et al., ASPLOS 2009).
- ``cwd``: the trial runs in a symbolic link to its own working directory whose path is the
  level's bytes longer, made once per session under ``.washout/context/`` of the worker's
  default directory (its workdir; locally the directory washout runs in), with ``PWD`` set
  to it, as a shell sets it after ``cd``: the trial's files are where they were, and its
  environment (``PWD``) and whatever prints or builds paths from ``PWD`` see the longer
  path. ``getcwd(3)`` still gives the real directory (the kernel resolves links); the
  stored ``context_cwd_bytes`` is the length of ``PWD``.
- ``aslr``: the command runs under ``setarch ARCH -R`` (ASLR off for its process tree: the
  ``ADDR_NO_RANDOMIZE`` personality, inherited across fork and exec) or plain
  ``setarch ARCH`` (on), so both levels pay the same extra exec. Checked when the worker is
  prepared: ``setarch`` must set and clear the flag there (a container's seccomp policy may
  forbid ``personality(2)``) and ``kernel.randomize_va_space`` must not be 0 (ASLR would be
  off in every level).

Two things outside the levels also move the stack, and are handled here: ``SSH_CLIENT`` and
``SSH_CONNECTION`` hold the SSH client's port, whose length may differ from one connection to
the next, so they are set empty in every trial; and the environment a trial inherits (washout's
own locally, the SSH session's on a worker) differs with where washout is started from, so
its size is measured when the worker is prepared and recorded as an event, which says by how
much every level moved when it differs from the previous session's: resume from the same
shell, or the levels of one session are not the levels of the next.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import replace

from washout.data.store.schema import TrialContext
from washout.errors import WashoutError
from washout.harness.executors.base import CommandOptions, Executor
from washout.harness.plan import Context

PADDING_VARIABLE = "WASHOUT_CONTEXT_PADDING"
"""The environment variable whose length is a trial's environment padding."""
LINKS = ".washout/context"
"""Where the working directory's links are made, under the worker's default directory."""
NORMALIZED = {"SSH_CLIENT": "", "SSH_CONNECTION": ""}
"""Variables set empty in every trial of a context experiment: their length changes with the
SSH client's port from one connection to the next."""
NO_RANDOMIZE = 0x0040000
"""``ADDR_NO_RANDOMIZE``, the personality flag ``setarch -R`` sets (linux/personality.h)."""
NAME_MAX = 255
"""The longest name of one path component (Linux, every common file system)."""
SETUP_TIMEOUT = 60.0


def padding_path(length: int) -> str:
    """A relative path of exactly ``length`` >= 1 bytes: names of at most NAME_MAX bytes
    joined by ``/`` (a longer path needs more than one directory)."""
    parts = []
    while length > NAME_MAX:
        parts.append("c" * (NAME_MAX - 1))
        length -= NAME_MAX  # the name and its "/"
    return "/".join([*parts, "c" * length])


def link_path(root: str, cwd: str | None, level: int, padding: int) -> str:
    """The link standing for working directory ``cwd`` (None: the default one) at context
    ``level`` with ``padding`` bytes more: ``ROOT/.washout/context/H/LL/ccc...``, H naming the
    directory (so two experiments' links for different directories never meet), LL the level
    (so no level's path is a directory of another's); every part but the padding is the same
    length in every level."""
    h = hashlib.sha256((cwd or "").encode()).hexdigest()[:8]
    return f"{root.rstrip('/')}/{LINKS}/{h}/{level:02d}/{padding_path(padding + 1)}"


class WorkerContext:
    """A worker's context levels, ready: what each trial's command, options and stored
    context become at its level."""

    def __init__(
        self,
        levels: tuple[Context, ...],
        arch: str | None = None,
        links: dict[tuple[str | None, int], str] | None = None,
    ) -> None:
        self.levels = levels
        self.arch = arch
        self.links = links or {}

    def trial(
        self, level: int, command: str, options: CommandOptions
    ) -> tuple[str, CommandOptions, TrialContext]:
        """``command`` and ``options`` of a trial at context ``level``, and its context as
        stored."""
        context = self.levels[level]
        env = {**(options.env or {}), **NORMALIZED}
        if context.env_bytes is not None:
            env[PADDING_VARIABLE] = "x" * context.env_bytes
        cwd, cwd_bytes = options.cwd, None
        if context.cwd_bytes is not None:
            cwd = self.links[(options.cwd, level)]
            env["PWD"] = cwd
            cwd_bytes = len(cwd.encode())
        if context.aslr is not None:
            setarch = f"setarch {shlex.quote(self.arch or '')}{'' if context.aslr else ' -R'}"
            command = f"exec {setarch} /bin/sh -c {shlex.quote(command)}"
        stored = TrialContext(context.env_bytes, cwd_bytes, context.aslr)
        return command, replace(options, env=env, cwd=cwd), stored


async def _output(executor: Executor, what: str, script: str, options: CommandOptions) -> str:
    """What ``script`` prints on the worker; a one-line error naming ``what`` if it fails."""
    result = await executor.run(script, options)
    if result.status != "ok":
        said = result.stderr.decode(errors="replace").strip().replace("\n", " | ")[-300:]
        raise WashoutError(
            f"{executor.name}: experiment.context = {what}: {result.reason}"
            f"{': ' + said if said else ''}"
        )
    return result.stdout.decode(errors="replace").strip()


ASLR_CHECK = (
    'a=$(uname -m) && off=$(setarch "$a" -R cat /proc/self/personality)'
    ' && on=$(setarch "$a" cat /proc/self/personality)'
    ' && echo "$a $off $on $(cat /proc/sys/kernel/randomize_va_space)"'
)
"""Prints the machine's architecture, the personality under ``setarch -R`` and plain
``setarch`` (hex), and ``kernel.randomize_va_space``."""


async def _aslr_arch(executor: Executor) -> str:
    """The architecture name ``setarch`` takes on the worker, once ``setarch -R`` is known to
    turn ASLR off there and plain ``setarch`` to leave it on."""
    words = (await _output(executor, "aslr", ASLR_CHECK, CommandOptions(SETUP_TIMEOUT))).split()
    try:
        arch, off, on, randomize = words[0], int(words[1], 16), int(words[2], 16), words[3]
    except (IndexError, ValueError):
        raise WashoutError(
            f"{executor.name}: experiment.context = aslr: cannot read what setarch does "
            f"there (it printed {' '.join(words)[:100]!r})"
        ) from None
    if not off & NO_RANDOMIZE or on & NO_RANDOMIZE:
        raise WashoutError(
            f"{executor.name}: experiment.context = aslr: setarch {arch} -R does not turn "
            f"ASLR off there (personality {off:#x} with -R, {on:#x} without)"
        )
    if randomize == "0":
        raise WashoutError(
            f"{executor.name}: experiment.context = aslr: kernel.randomize_va_space = 0, so "
            "ASLR is off in every level (sysctl kernel.randomize_va_space=2 to compare)"
        )
    return arch


async def _links(
    executor: Executor, levels: tuple[Context, ...], cwds: list[str | None]
) -> dict[tuple[str | None, int], str]:
    """The links of every working directory in ``cwds`` at every level, made on the worker."""
    root = await _output(executor, "cwd", "pwd -P", CommandOptions(SETUP_TIMEOUT))
    made = {}
    for cwd in dict.fromkeys(cwds):
        lines = ["t=$(pwd -P) || exit 1"]
        for i, level in enumerate(levels):
            assert level.cwd_bytes is not None
            link = made[(cwd, i)] = link_path(root, cwd, i, level.cwd_bytes)
            parent = shlex.quote(link.rsplit("/", 1)[0])
            lines.append(f'mkdir -p -- {parent} && ln -sfn -- "$t" {shlex.quote(link)} || exit 1')
        await _output(executor, "cwd", "\n".join(lines), CommandOptions(SETUP_TIMEOUT, cwd=cwd))
    return made


ENV_SIZE = "wc -c < /proc/self/environ"
"""Prints the size of the environment the shell that runs it was given."""
INHERITED = re.compile(r"context: trials inherit (\d+) bytes")
"""How a worker's ``context`` event begins (:func:`prepare_context`), its size in group 1."""


async def prepare_context(
    executor: Executor,
    levels: tuple[Context, ...],
    cwds: list[str | None],
    env: dict[str, str],
    earlier: list[str],
) -> tuple[WorkerContext, str, bool]:
    """Make a worker ready for the context ``levels``: ASLR checked, the working directories'
    links (``cwds``, as the trials give them) made. Also: the note (an event) saying how
    large the environment is that its trials inherit (``env`` added: the trial's own
    variables), and whether that differs from the last of the ``earlier`` sessions' notes
    (the note then says so)."""
    arch = await _aslr_arch(executor) if levels[0].aslr is not None else None
    links = await _links(executor, levels, cwds) if levels[0].cwd_bytes is not None else {}
    size = int(
        await _output(
            executor, "env", ENV_SIZE, CommandOptions(SETUP_TIMEOUT, env={**env, **NORMALIZED})
        )
    )
    where = "washout's own environment" if executor.local else "the SSH session's environment"
    note = (
        f"context: trials inherit {size} bytes of environment before the padding ({where} "
        "and the test's variables)"
    )
    before = [int(m.group(1)) for m in map(INHERITED.match, earlier) if m]
    moved = bool(before) and before[-1] != size
    if moved:
        note += (
            f"; {before[-1]} bytes in the previous session, so each padding now puts the stack "
            f"{size - before[-1]:+d} bytes from where it did: the levels of the two sessions "
            "differ (resume from the environment the experiment started in)"
        )
    return WorkerContext(levels, arch, links), note, moved
