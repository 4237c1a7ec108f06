"""The experiment spec (TOML), validated with pydantic, and its expansion into tests.

``load_spec(path)`` returns a :class:`Spec` or raises a one-line
:class:`~washout.errors.WashoutError` naming the file, the field and the value. Parameter
grids expand to one test per combination; values substituted into a command are
shell-quoted (``shlex.quote``), never pasted raw, so a ``{param}`` placeholder must stand
bare in the command: inside quotes, ``$(...)``, ``${...}``, backquotes or a here-document,
or right after ``$`` or a backslash, a quoted value could still be read as shell code, and
the spec is refused.

Everything is checked before anything runs (``washout validate`` and ``run`` alike): types
are strict (``runs = true`` is not 1), names and commands are not blank and hold no NUL
byte, env keys are variable names, ports are 1-65535, workers are distinct machines,
claims parse and name tests of the spec, and an experiment is at most
:data:`MAX_RUNS` runs per order kind and :data:`MAX_TRIALS` trials over all workers.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import json
import math
import os
import re
import shlex
import tomllib
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from washout.data.store.schema import CONTEXT_KINDS
from washout.errors import SpecError, WashoutError
from washout.harness.executors.base import OUTPUT_TAIL
from washout.harness.fields import Duration, NonBlank
from washout.harness.fields import StrictModel as _Model
from washout.harness.machine import parse_requirement
from washout.harness.metrics import MetricKeys, source_of
from washout.harness.metrics.base import MetricSource
from washout.harness.metrics.powercap import is_energy
from washout.harness.metrics.stdout import Stdout
from washout.harness.pinning import parse_cpus
from washout.harness.plan import DEFAULT_LEVELS, MAX_LEVELS, MIN_LEVELS
from washout.harness.sizes import parse_size

ByteSize = Annotated[int, BeforeValidator(parse_size)]
Scalar = str | int | float | bool
ORDER_KINDS = ("fixed", "random", "reverse", "williams")
OrderKind = Literal["fixed", "random", "reverse", "williams"]
ContextKind = Literal["env", "cwd", "aslr"]
_TEMPLATE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""The pieces of a grid's name or command, read left to right as ``str.format`` reads
them: ``{{`` and ``}}`` (literal braces) or a ``{param}`` placeholder (group 1)."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_RUNS = 1_000_000
"""Most runs per order kind: a schedule is planned whole, in memory, before it starts."""
MAX_TRIALS = 10_000_000
"""Most planned trials of an experiment, over all its workers (one store row each)."""
MAX_TESTS = 100_000
"""Most tests after grid expansion (each run orders every one of them)."""


OUTPUT_KINDS = ("null", "pipe", "inherit")
"""hyperfine's ``--output`` kinds; any other value is a file's path."""


def _output(value: str | None) -> str | None:
    """hyperfine's ``--output`` WHERE: a kind of :data:`OUTPUT_KINDS` or a file's path of two
    components at least (hyperfine's rule, so that a misspelt kind is not taken for a file
    of that name: src/options.rs, ``UnknownOutputPolicy``)."""
    if value is None or value in OUTPUT_KINDS:
        return value
    if value.endswith("/"):
        raise ValueError("a directory, not a file")
    if "/" not in value:
        raise ValueError(
            f"expected null, pipe, inherit or a file's path (write './{value}' for a file "
            f"named {value!r})"
        )
    return value


def _check_cpus(value: str | None) -> str | None:
    if value is not None:
        parse_cpus(value)
    return value


def _env_names(env: dict[str, str]) -> dict[str, str]:
    """Env keys must be variable names: they reach a shell (``export KEY=...``) and exec."""
    for key in env:
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(
                f"{key!r} is not a variable name (letters, digits, _; not starting with a digit)"
            )
    return env


Env = Annotated[dict[str, str], AfterValidator(_env_names)]


def _role_name(value: str) -> str:
    """A role becomes part of a variable name (``WASHOUT_HOST_SERVER``): letters, digits, _."""
    if not _ENV_NAME.fullmatch(value):
        raise ValueError("a role is a name of letters, digits and _ (not starting with a digit)")
    return value


RoleName = Annotated[str, AfterValidator(_role_name)]


def _requirement(value: str) -> str:
    """A ``require`` item as the machine check reads it (ValueError saying what is wrong)."""
    parse_requirement(value)
    return value


class BackgroundSpec(_Model):
    """A command started on another role before a trial and stopped after it (a server):
    ready once ``ready`` exits 0 (retried until ``ready_timeout``)."""

    role: RoleName | None = None
    """Where it runs (default: the test's own role)."""
    command: NonBlank
    ready: NonBlank | None = None
    ready_timeout: Duration = 30.0
    cwd: str | None = None


class MetricSpec(MetricKeys):
    """Where a trial's metric comes from: one ``[test.metrics.NAME]`` table, whose keys
    choose one source (``washout.harness.metrics``: ``wall``, ``stdout``, ``json``,
    ``regex``, ``file``, ``sample``, ``powercap``, ``perf``), taken on ``role``, with
    ``better`` the direction the analysis calls better."""

    better: Literal["lower", "higher"] = "lower"
    role: RoleName | None = None
    """Where the metric is taken (default: the test's own role); see washout.harness.roles."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)

    @functools.cached_property
    def source(self) -> MetricSource:
        """The source its keys choose (made once: the engine asks for it every trial)."""
        return source_of(self)

    @property
    def around_trial(self) -> bool:
        """Taken by washout around the trial (:mod:`washout.harness.roles`: on a role, sampled,
        powercap or perf), not read from the measured command's output afterwards."""
        return self.role is not None or self.source.around

    @model_validator(mode="after")
    def _one_source(self) -> MetricSpec:
        self.source  # noqa: B018 (its keys are checked as it is made)
        return self


WALL = MetricSpec(wall=True)


class CommandSpec(_Model):
    """A command run once (setup, teardown) on each worker."""

    command: NonBlank
    timeout: Duration | None = None
    cwd: str | None = None


class ResetSpec(_Model):
    """The reset before every run: ``command`` (on the worker), ``local`` (on the
    controller, e.g. a cloud API call), ``reboot`` (SSH workers) or ``none``."""

    kind: Literal["command", "local", "reboot", "none"] = "command"
    command: NonBlank | None = None
    timeout: Duration = 120.0

    @model_validator(mode="after")
    def _command_given(self) -> ResetSpec:
        if self.kind in ("command", "local") and not self.command:
            raise ValueError(f"a reset of kind {self.kind!r} needs a command")
        return self


class TestSpec(_Model):
    """One test, or a grid of tests when ``params`` is given."""

    __test__ = False  # not a pytest test class

    name: NonBlank
    command: NonBlank
    timeout: Duration | None = None
    metrics: dict[str, MetricSpec] = Field(default_factory=lambda: {"wall": WALL})
    params: dict[str, list[Scalar]] = Field(default_factory=dict)
    cwd: str | None = None
    env: Env = Field(default_factory=dict)
    cpus: Annotated[str | None, AfterValidator(_check_cpus)] = None
    role: RoleName | None = None
    """The role whose worker runs the command (workers with roles: see roles.py)."""
    background: list[BackgroundSpec] = Field(default_factory=list)
    prepare: NonBlank | None = None
    """Run before each of this test's trials in place of ``[prepare]``'s command (its
    timeout and cwd still apply): hyperfine's ``--prepare`` given once per command."""
    conclude: NonBlank | None = None
    """Run after each of this test's trials in place of ``[conclude]``'s command:
    hyperfine's ``--conclude`` given once per command."""
    output: Annotated[NonBlank | None, AfterValidator(_output)] = None
    """Where the command's stdout goes, hyperfine's ``--output``: ``null`` (/dev/null),
    ``pipe`` (read by washout, its last ``[experiment] output_tail`` bytes kept),
    ``inherit`` (washout's own stdout and stderr: nothing kept) or a file's path (made anew
    for each trial, as hyperfine makes it for each run; relative to washout's directory).
    Default: ``pipe``, or ``null`` where ``output_tail = 0``. Its stderr's tail is kept
    (a failure's reason) but with ``inherit``."""
    input: NonBlank | None = None
    """A file the command reads as its stdin, opened anew for each trial (hyperfine's
    ``--input``; relative to washout's directory); default: /dev/null."""

    @field_validator("metrics")
    @classmethod
    def _some_metric(cls, value: dict[str, MetricSpec]) -> dict[str, MetricSpec]:
        if not value:
            raise ValueError("a test needs at least one metric (or leave metrics out for wall)")
        for name in value:
            if not name.strip():
                raise ValueError(f"metric name {name!r} is blank")
        return value

    @field_validator("params")
    @classmethod
    def _levels(cls, value: dict[str, list[Scalar]]) -> dict[str, list[Scalar]]:
        for key, levels in value.items():
            if not levels:
                raise ValueError(f"parameter {key!r} has no values")
        return value


class WorkerSpec(_Model):
    """An SSH worker. ``host`` may be an alias from ~/.ssh/config."""

    host: NonBlank
    name: NonBlank | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = None
    key: str | None = None
    known_hosts: str | None = None
    workdir: str | None = None
    reboot_command: str | None = None
    """For ``[reset] kind = "reboot"``: this worker's reboot command (else the reset's
    ``command``, else ``reboot`` as root and ``sudo -n reboot`` otherwise)."""
    boot_id_command: str | None = None
    """Prints the boot id that must change across a reboot (default: the kernel's)."""
    role: RoleName | None = None
    """This worker's part in a client/server trial (``server``, ``client``...)."""
    group: NonBlank | None = None
    """The worker group (one worker per role) that runs one schedule; default ``main``."""
    address: NonBlank | None = None
    """How the group's other roles reach this worker (``WASHOUT_HOST_<ROLE>``; default host)."""

    @property
    def label(self) -> str:
        """The worker's name in the store: its ``name``, else ``host`` (``host:port``)."""
        if self.name:
            return self.name
        return f"{self.host}:{self.port}" if self.port else self.host


class ProvenanceSpec(_Model):
    """What identifies a build: file hashes (relative to the workdir) and command outputs."""

    files: list[str] = Field(default_factory=list)
    commands: list[NonBlank] = Field(default_factory=list)


SLURM_OWN_OPTIONS = (
    "-N",
    "--nodes",
    "-w",
    "--nodelist",
    "-J",
    "--job-name",
    "-p",
    "--partition",
    "-t",
    "--time",
    "--exclusive",
    "--no-shell",
    "--reboot",
)
"""salloc options washout sets itself from ``[cluster]`` (refused in its ``args``)."""


class ClusterSpec(_Model):
    """``[cluster]``: the workers are nodes a scheduler allocates (kind "slurm"), one
    allocation per node, released at the end (:mod:`washout.harness.allocation`)."""

    kind: Literal["slurm"]
    nodes: int = Field(default=1, ge=1, le=10_000)
    partition: NonBlank | None = None
    time_limit: Duration | None = None
    """The allocation's time limit (Slurm's ``--time``, rounded up to minutes): also what
    ends it if washout is killed before it can release it."""
    exclusive: bool = False
    args: list[NonBlank] = Field(default_factory=list)
    """More salloc arguments, as written (``["--account=perf", "--constraint=skylake"]``)."""
    workdir: str | None = None

    @field_validator("args")
    @classmethod
    def _not_ours(cls, value: list[str]) -> list[str]:
        for arg in value:
            if not arg.startswith("-"):
                raise ValueError(f"{arg!r} is not an option (options start with -)")
            option = arg.split("=", 1)[0]
            name = option if option.startswith("--") else option[:2]
            if name in SLURM_OWN_OPTIONS:
                raise ValueError(
                    f"{arg!r}: washout sets {name} itself "
                    "(from nodes, partition, time_limit and exclusive)"
                )
        return value


class AllocateSpec(_Model):
    """``[allocate]``: a command on the controller that obtains the workers (a cloud CLI,
    Terraform, a testbed's tool) and prints them, one host per line or as JSON: a list of
    host names or of ``[[worker]]`` tables (``{"host": ..., "port": ..., "name": ...}``).
    The fields below are the defaults of every host it prints."""

    command: NonBlank
    workers: int = Field(ge=1, le=10_000)
    """How many hosts the command must print (the plan's size is known before it runs)."""
    timeout: Duration = 1800.0
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    key: str | None = None
    known_hosts: str | None = None
    workdir: str | None = None


class ReleaseSpec(_Model):
    """``[release]``: the command on the controller that gives ``[allocate]``'s workers
    back; it runs at the end whatever happened, and if washout dies."""

    command: NonBlank
    timeout: Duration = 600.0


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{value!r}: give an absolute path")
    return value


def _default_orders() -> list[OrderKind]:
    return ["fixed", "random"]


class ExperimentSpec(_Model):
    """The ``[experiment]`` table."""

    name: NonBlank = "experiment"
    runs: int = Field(default=10, gt=0)
    warmup: int = Field(default=0, ge=0, le=10_000)
    """Trials of each test run before the first run of a session (hyperfine's
    ``--warmup``): stored with status ``warmup``, out of every analysis."""
    design: Literal["alternate", "coin", "blocked"] = "alternate"
    orders: list[OrderKind] = Field(default_factory=_default_orders, min_length=1)
    seed: int | None = Field(default=None, ge=0)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    correction: Literal["bonferroni", "holm"] = "bonferroni"
    on_failure: str = "record"
    timeout: Duration | None = None
    cwd: str | None = None
    env: Env = Field(default_factory=dict)
    cpus: Annotated[str | None, AfterValidator(_check_cpus)] = None
    sync: str | None = None
    claims: list[str] = Field(default_factory=list)
    reference: NonBlank | None = None
    """The test the comparison's ratios are to (hyperfine's ``--reference``); default: the
    fastest."""
    output_tail: ByteSize = OUTPUT_TAIL
    """Bytes of the end of each trial's stdout and stderr kept (what stdout metrics read)."""
    require: list[Annotated[str, AfterValidator(_requirement)]] = Field(default_factory=list)
    """Machine check items every worker must meet before a run starts (``governor=performance``;
    washout.harness.machine)."""
    health: bool = True
    """Read the machine's health counters around every trial (washout.harness.metrics.health),
    stored as its ``health.*`` metrics; ``false`` saves their cost (bench/RESULTS.md)."""
    health_root: Annotated[str, AfterValidator(_absolute)] = "/"
    """Where the health counters are read on each worker: ``/``, or a tree laid out as the
    kernel lays out /proc, /sys and /dev (the tests' stand-in for hardware a VM lacks)."""
    idle: bool = False
    """An idle arm: for every test with a powercap metric, a test ``idle:NAME`` of ``sleep``
    as long as that test's median trial, interleaved like any test, so energy is reported
    gross and net of the machine at rest (washout.harness.idle)."""
    context: list[ContextKind] = Field(default_factory=list)
    """What to randomize per trial, seeded, as a design factor: ``env`` (the environment's
    size), ``cwd`` (the working directory's path length), ``aslr`` (on or off);
    washout.harness.context."""
    context_levels: int = Field(default=DEFAULT_LEVELS, ge=MIN_LEVELS, le=MAX_LEVELS)
    """How many context levels each test's trials take in turn (ASLR alone: 2)."""

    @field_validator("orders", "context")
    @classmethod
    def _distinct(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if len(set(value)) != len(value):
            what = "order" if info.field_name == "orders" else "context"
            raise ValueError(f"each {what} kind may appear once")
        return value

    @field_validator("on_failure")
    @classmethod
    def _policy(cls, value: str) -> str:
        if value in ("record", "abort") or re.fullmatch(r"retry:[1-9][0-9]*", value):
            return value
        raise ValueError('expected "record", "abort" or "retry:N" (N >= 1)')

    @property
    def retries(self) -> int:
        """How many times a failed trial is re-run under ``retry:N``."""
        return int(self.on_failure.split(":")[1]) if self.on_failure.startswith("retry:") else 0


class RoleSpec(_Model):
    """``[role.NAME]``: what replaces ``[setup]``, ``[reset]``, ``[teardown]`` and
    ``[provenance]`` on the workers of one role."""

    setup: CommandSpec | None = None
    reset: ResetSpec | None = None
    teardown: CommandSpec | None = None
    provenance: ProvenanceSpec | None = None


class Spec(_Model):
    """A whole experiment spec, as written (before grid expansion)."""

    experiment: ExperimentSpec = Field(default_factory=ExperimentSpec)
    setup: CommandSpec | None = None
    reset: ResetSpec | None = None
    prepare: CommandSpec | None = None
    """Run before every trial, warmups too, outside its timing (hyperfine's
    ``--prepare``); the reset still runs once per run."""
    conclude: CommandSpec | None = None
    """Run after every trial, warmups too, outside its timing, once its metrics are read
    (hyperfine's ``--conclude``: to stop what a prepare started)."""
    teardown: CommandSpec | None = None
    test: list[TestSpec] = Field(min_length=1)
    worker: list[WorkerSpec] = Field(default_factory=list)
    provenance: ProvenanceSpec = Field(default_factory=ProvenanceSpec)
    role: dict[RoleName, RoleSpec] = Field(default_factory=dict)
    cluster: ClusterSpec | None = None
    allocate: AllocateSpec | None = None
    release: ReleaseSpec | None = None

    @property
    def schedules(self) -> int:
        """How many schedules run at once: one per worker group, else one per worker (the
        ``[[worker]]`` entries, the cluster's nodes, the hosts ``[allocate]`` prints), or 1
        (this machine)."""
        if self.cluster:
            return self.cluster.nodes
        if self.allocate:
            return self.allocate.workers
        groups = {w.group or "main" for w in self.worker if w.role}
        return len(groups) if groups else max(1, len(self.worker))


class Test(BaseModel):
    """One expanded test: a name, a shell command and its metrics, ready to run."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(frozen=True)

    name: str
    command: str
    timeout: float | None
    metrics: dict[str, MetricSpec]
    cwd: str | None
    env: dict[str, str]
    cpus: str | None
    params: dict[str, Scalar] = Field(default_factory=dict)
    role: str | None = None
    background: list[BackgroundSpec] = Field(default_factory=list)
    prepare: str | None = None
    conclude: str | None = None
    output: str | None = None
    input: str | None = None


def unsafe_placeholder(command: str) -> tuple[str, str] | None:
    """The first ``{param}`` of ``command`` where a shell-quoted value is not safe, and why.

    ``shlex.quote`` makes a value one literal word only where the shell reads a new word:
    bare, outside any quotes. Inside ``"..."`` or ``'...'`` the quotes it adds are literal
    and the value's ``$(...)`` runs; inside ``$(...)``, ``${...}``, backquotes or a
    here-document it is read again; after ``$`` or a backslash its first quote is taken
    literally; in a comment a newline in it ends the comment. A small POSIX shell lexer
    (quotes, escapes, substitutions, comments) finds the context of each placeholder; where
    it is not bare the spec is refused.
    """
    starts = {m.start(): m.group(0) for m in _placeholders(command)}
    stack: list[str] = []  # open contexts, innermost last: ' " ` $( ( ${
    heredoc = False
    i, n = 0, len(command) if starts else 0
    while i < n:
        c = command[i]
        top = stack[-1] if stack else ""
        if i in starts:
            if top in ("'", '"'):
                return starts[i], "inside quotes"
            if stack:
                return starts[i], "inside $(...), ${...} or backquotes"
            if heredoc:
                return starts[i], "in a here-document"
            i += len(starts[i])
            continue
        if c in "$\\" and i + 1 in starts and top != "'":
            return starts[i + 1], f"right after {c}"
        if top == "'":
            if c == "'":
                stack.pop()
        elif c == "\\":
            i += 1  # the escaped character is literal
        elif top in ('"', "`") and c == top:
            stack.pop()
        elif top == "${" and c == "}":
            stack.pop()
        elif command.startswith(("$(", "${"), i):
            stack.append(command[i : i + 2])
            i += 1
        elif c == "`" or (c in "'\"" and top != "`" and top != '"'):
            stack.append(c)
        elif top in ('"', "`", "${"):
            pass
        elif c == "(" and top in ("$(", "("):
            stack.append(c)
        elif c == ")" and top in ("$(", "("):
            stack.pop()
        elif command.startswith("<<", i):
            heredoc = True
        elif c == "#" and not heredoc and (i == 0 or command[i - 1] in " \t\n;&|()"):
            # (in a here-document's lines a # is text, and $(...) there runs)
            end = command.find("\n", i)
            stop = n if end < 0 else end
            inside = [p for p in starts if i < p < stop]
            if inside:  # a value's newline would end the comment, and its rest would run
                return starts[min(inside)], "in a comment"
            i = stop
            continue
        i += 1
    return None


def check_placeholders(command: str, source: str, field: str) -> None:
    """A one-line error at the first placeholder of ``command`` that is not bare."""
    unsafe = unsafe_placeholder(command)
    if unsafe:
        raise SpecError.at(
            source,
            field,
            command,
            f"placeholder {unsafe[0]} {unsafe[1]}: values are shell-quoted "
            f"already, so write {unsafe[0]} bare (e.g. --opt={unsafe[0]})",
        )


def _placeholders(template: str) -> list[re.Match[str]]:
    """The ``{param}`` placeholders of a template (not the ``{{``/``}}`` escapes)."""
    return [m for m in _TEMPLATE.finditer(template) if m.group(1)]


def _fill(template: str, values: dict[str, Scalar], quote: bool) -> str:
    """Substitute ``{param}`` placeholders and turn ``{{``/``}}`` into literal braces, in
    one pass over the template: a substituted value is never read again (``{"a":{"b":1}}``
    stays as it is)."""

    def sub(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)[0]
        text = str(values[match.group(1)])
        return shlex.quote(text) if quote else text

    return _TEMPLATE.sub(sub, template)


def _around(test: TestSpec) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    """A test's own commands around each of its trials: its ``prepare`` and ``conclude``."""
    return ("prepare", test.prepare), ("conclude", test.conclude)


def expand_tests(spec: Spec, source: str = "spec") -> list[Test]:
    """Expand every ``[[test]]`` (grids to one test per combination, in spec order).

    A test without ``params`` keeps its command (and ``prepare`` and ``conclude``) literally
    (shell braces need no escaping); with ``params`` every ``{name}`` must be a parameter,
    standing bare in the command, the ``prepare`` and the ``conclude``
    (:func:`unsafe_placeholder`), each filled in as hyperfine fills them. Names must be
    unique; the size of the experiment is checked (:func:`check_size`) before the grids
    are expanded.
    """
    exp = spec.experiment
    check_size(spec, source)
    tests: list[Test] = []
    for i, t in enumerate(spec.test):
        combos: list[dict[str, Scalar]] = [{}]
        if t.params:
            around = [(key, text) for key, text in _around(t) if text]
            templates = [("name", t.name), ("command", t.command), *around]
            for where, template in templates:
                unknown = {m.group(1) for m in _placeholders(template)} - set(t.params)
                if unknown:
                    raise SpecError.at(
                        source,
                        f"test[{i}].{where}",
                        template,
                        f"unknown placeholder {{{sorted(unknown)[0]}}}; "
                        f"parameters are {', '.join(sorted(t.params))} "
                        "(write {{ and }} for literal braces)",
                    )
            for key, text in templates[1:]:  # the name's values are not shell-quoted
                check_placeholders(text, source, f"test[{i}].{key}")
            keys = list(t.params)
            combos = [dict(zip(keys, vals)) for vals in itertools.product(*t.params.values())]
        for values in combos:
            if values:
                name = _fill(t.name, values, quote=False)
                if name == t.name:
                    name = t.name + "-" + "-".join(str(v) for v in values.values())
                command = _fill(t.command, values, quote=True)
            else:
                name, command = t.name, t.command
            prepare, conclude = (
                _fill(text, values, quote=True) if text and values else text
                for _, text in _around(t)
            )
            tests.append(
                Test(
                    name=name,
                    command=command,
                    timeout=t.timeout if t.timeout is not None else exp.timeout,
                    metrics=t.metrics,
                    cwd=t.cwd or exp.cwd,
                    env={**exp.env, **t.env},
                    cpus=t.cpus or exp.cpus,
                    params=values,
                    role=t.role,
                    background=t.background,
                    prepare=prepare,
                    conclude=conclude,
                    output=t.output,
                    input=t.input,
                )
            )
    seen: dict[str, int] = {}
    for index, test in enumerate(tests):
        if test.name in seen:
            raise SpecError.at(
                source,
                "test.name",
                test.name,
                f"duplicate test name (tests #{seen[test.name] + 1} and #{index + 1}); "
                "test names must be unique",
            )
        seen[test.name] = index
    return tests


def check_size(spec: Spec, source: str) -> None:
    """Refuse an experiment beyond :data:`MAX_RUNS`, :data:`MAX_TESTS` or :data:`MAX_TRIALS`
    (counted without expanding the grids): it would fill memory before the first trial."""
    exp = spec.experiment
    if exp.runs > MAX_RUNS:
        raise SpecError.at(
            source, "experiment.runs", exp.runs, f"at most {MAX_RUNS:,} runs per order kind"
        )
    n_tests = sum(
        math.prod(len(levels) for levels in t.params.values())
        * (2 if exp.idle and any(is_energy(m) for m in t.metrics.values()) else 1)
        for t in spec.test
    )  # with the idle arm (washout.harness.idle): a second test for each energy one
    if n_tests > MAX_TESTS:
        raise SpecError.at(
            source,
            "test",
            f"{n_tests:,} tests after expanding the params grids",
            f"at most {MAX_TESTS:,} tests",
        )
    workers = spec.schedules
    total = n_tests * exp.runs * len(exp.orders) * workers
    if total > MAX_TRIALS:
        raise SpecError.at(
            source,
            "experiment.runs",
            exp.runs,
            f"{n_tests:,} tests x {exp.runs:,} runs x {len(exp.orders)} order kinds x "
            f"{workers} worker(s) = {total:,} trials; at most {MAX_TRIALS:,}",
        )


def _field_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path or "(top level)"


def _nul_byte(data: Any, loc: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], str] | None:
    """Where the first string (value or key) holding a NUL byte is: no command, name or
    path can carry one (exec and the OS refuse it), so it is refused up front."""
    if isinstance(data, str):
        return (loc, data) if "\0" in data else None
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        if isinstance(key, str) and "\0" in key:
            return loc + (key,), key
        found = _nul_byte(value, loc + (key,))
        if found:
            return found
    return None


def _present(annotation: Any) -> Any:
    """``X`` of ``X | None``; any other annotation unchanged."""
    if get_origin(annotation) in (Union, types.UnionType):
        return next(a for a in get_args(annotation) if a is not type(None))
    return annotation


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class validating the table at ``loc`` (through lists, dicts, Optional)."""
    current: Any = root
    for part in loc:
        current = _present(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = {f.alias or name: f for name, f in current.model_fields.items()}
            if part not in fields:
                return None
            current = fields[part].annotation
        elif get_origin(current) in (list, dict):
            current = get_args(current)[-1]
        else:
            return None
    current = _present(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _table_name(loc: tuple[Any, ...]) -> str:
    """A TOML table as the user wrote it: ``[experiment]``, ``[[test]] 2``, or
    ``[test.metrics.rps] of [[test]] 1``."""
    words = [str(p) for p in loc if isinstance(p, str)]
    if not loc:
        return "the top-level table"
    last = max((k for k, p in enumerate(loc) if isinstance(p, int)), default=None)
    if last is None:
        return f"[{'.'.join(words)}]"
    array = ".".join(str(p) for p in loc[:last] if isinstance(p, str))
    entry = f"[[{array}]] {loc[last] + 1}"
    return entry if last == len(loc) - 1 else f"[{'.'.join(words)}] of {entry}"


def unknown_key_error(
    source: str, root: type[BaseModel], loc: tuple[Any, ...], prefix: tuple[Any, ...] = ()
) -> SpecError:
    """ "unknown key 'comand' in [[test]] 1 (did you mean 'command'?)": the key the user
    wrote, where, and the closest key that table knows (difflib), if any is close."""
    model = _model_at(root, loc[:-1])
    known = [f.alias or name for name, f in model.model_fields.items()] if model else []
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return SpecError(
        f"{source}: unknown key {str(loc[-1])!r} in {_table_name(prefix + loc[:-1])}{hint}"
    )


def validation_error(
    err: ValidationError, source: str, root: type[BaseModel], prefix: tuple[Any, ...] = ()
) -> SpecError:
    """The one-line error for a failed validation: an unknown key first (a typo'd key
    also makes the key it meant "missing"), else the first problem, with field and value."""
    errors = err.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    if first["type"] == "extra_forbidden":
        return unknown_key_error(source, root, loc, prefix)
    field = _field_path(prefix + loc)
    if first["type"] == "missing":
        return SpecError(f"{source}: {field}: required but missing")
    return SpecError.at(
        source, field, first.get("input"), first["msg"].removeprefix("Value error, ")
    )


def _check_workers(spec: Spec, source: str) -> None:
    """Two ``[[worker]]`` on one host and port would run two schedules on one machine at
    once, and two with one name would share one worker in the store: refused."""
    machines: dict[object, int] = {}
    names: dict[object, int] = {}
    for i, w in enumerate(spec.worker):
        for what, key, seen in (
            ("host and port", (w.host, w.port or 22), machines),
            ("name", w.label, names),
        ):
            if key in seen:
                raise SpecError.at(
                    source,
                    f"worker[{i}]",
                    w.label,
                    f"the same {what} as worker[{seen[key]}]; each [[worker]] is "
                    "a different machine",
                )
            seen[key] = i


def _check_workers_source(spec: Spec, source: str) -> None:
    """Workers come from one place: ``[[worker]]``, ``[cluster]`` or ``[allocate]``; and
    ``[release]`` only gives back what ``[allocate]`` obtained."""
    given = [
        name
        for name, present in (
            ("[[worker]]", spec.worker),
            ("[cluster]", spec.cluster),
            ("[allocate]", spec.allocate),
        )
        if present
    ]
    if len(given) > 1:
        raise SpecError(
            f"{source}: both {given[0]} and {given[1]}: give one; each says where the workers are"
        )
    if spec.release and not spec.allocate:
        raise SpecError(
            f"{source}: [release] without [allocate]: it gives back what [allocate] obtained"
        )


def _check_streams(spec: Spec, source: str) -> None:
    """A test's ``output`` keeps its stdout where one of its metrics reads it; it goes to
    washout's terminal or to a file, and its ``input`` comes from a file, only where
    washout runs the command (no worker)."""
    remote = spec.worker or spec.cluster or spec.allocate
    for i, t in enumerate(spec.test):
        if remote and t.input is not None:
            raise SpecError.at(
                source,
                f"test[{i}].input",
                t.input,
                "is a file here: for workers elsewhere, give the command its input itself",
            )
        if t.output in (None, "pipe"):
            continue
        reads = [name for name, m in t.metrics.items() if isinstance(m.source, Stdout)]
        if reads:
            raise SpecError.at(
                source,
                f"test[{i}].output",
                t.output,
                f"keeps no stdout, which metric {reads[0]!r} reads (use 'pipe')",
            )
        if remote and t.output != "null":
            raise SpecError.at(
                source,
                f"test[{i}].output",
                t.output,
                "is washout's own terminal or a file here: for workers elsewhere, use "
                "'null' or 'pipe'",
            )


def _check_claims(spec: Spec, tests: list[Test], source: str) -> None:
    """Claims are parsed and their tests looked up now, not after the whole run, as is the
    comparison's reference."""
    from washout.stats.claims import parse_claim

    names = {t.name for t in tests}
    shown = ", ".join(repr(t.name) for t in tests[:10]) + (", ..." if len(tests) > 10 else "")
    reference = spec.experiment.reference
    if reference is not None and reference not in names:
        raise SpecError.at(
            source, "experiment.reference", reference, f"no such test (tests: {shown})"
        )
    for i, text in enumerate(spec.experiment.claims):
        try:
            claim = parse_claim(text)
        except WashoutError as err:
            raise SpecError(f"{source}: experiment.claims[{i}]: {err}") from None
        for name in (claim.a, claim.b):
            if name not in names:
                raise SpecError.at(
                    source,
                    f"experiment.claims[{i}]",
                    text,
                    f"unknown test {name!r} (tests: {shown})",
                )


def spec_from_data(data: dict[str, Any], source: str) -> Spec:
    """Validate parsed TOML; the first problem becomes a one-line error."""
    if "sweep" in data:  # not a typo of another key: a spec for the other command
        raise SpecError(f"{source}: has a [sweep] table: run it with `washout sweep {source}`")
    nul = _nul_byte(data)
    if nul:
        raise SpecError.at(source, _field_path(nul[0]), nul[1], "contains a NUL byte")
    try:
        spec = Spec.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, source, Spec) from None
    _check_workers(spec, source)
    check_roles(spec, source)
    _check_workers_source(spec, source)
    _check_streams(spec, source)
    _check_claims(spec, expand_tests(spec, source), source)
    return spec


def load_spec(path: str | Path) -> tuple[Spec, str]:
    """Read, parse and validate a spec file; returns the spec and its text (to store)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"{path}: cannot read spec: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: the spec is not UTF-8 text") from None
    return parse_spec_text(text, str(path)), text


def parse_spec_text(text: str, source: str) -> Spec:
    """Parse and validate spec text (the form the store keeps, for resume)."""
    try:
        data = tomllib.loads(text.removeprefix("\ufeff"))  # a BOM, as some editors write
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{source}: invalid TOML: {err}") from None
    return spec_from_data(data, source)


def spec_from_commands(
    commands: list[str],
    *,
    runs: int,
    seed: int | None,
    reset: str | None,
    setup: str | None,
    cleanup: str | None = None,
    name: str = "quick",
    warmup: int = 0,
    prepare: str | Sequence[str] | None = None,
    names: list[str] | None = None,
    params: dict[str, list[Scalar]] | None = None,
    context: tuple[list[str], int] | None = None,
    output: str | Sequence[str] | None = None,
    conclude: str | Sequence[str] | None = None,
    input: str | None = None,
    reference: str | None = None,
    reference_name: str | None = None,
) -> tuple[Spec, str]:
    """The hyperfine-like quick form: each command a test named after itself (or after
    ``names``, hyperfine's ``-n``), with hyperfine's ``--warmup``, ``--prepare`` and
    ``--conclude`` (one for every command, or one per command, each the test's own
    ``prepare`` or ``conclude``; one naming a parameter is each test's, filled), ``--setup``
    (``[setup]``, once before the first run) and ``--cleanup`` (``[teardown]``, once after
    the last: hyperfine runs both per command, washout's runs interleave them); with
    ``params`` (``-P``/``-L``) every command is a grid over them; ``context`` (kinds,
    levels) as ``[experiment] context`` and ``context_levels``; ``output`` (hyperfine's
    ``--output``, once or once per command) each test's ``output``, hyperfine's default
    ``null`` when not given, a file's path made absolute here (the stored spec then means
    the same file when resumed from elsewhere); ``input`` (hyperfine's ``--input``: ``null``
    or a file, which must exist) every test's ``input``, its path made absolute;
    ``reference`` (hyperfine's ``--reference``, named ``reference_name``) the comparison's
    reference, a command of its own before the others (as hyperfine benchmarks it first, so
    options given once per command start with it), outside any scan, unless it is one of
    them.

    Returns the spec and an equivalent TOML text, stored so ``resume`` works as for a file.
    """
    added = reference is not None and reference not in commands  # a test of its own
    commands, names, chosen = _with_reference(commands, names, reference, reference_name)
    if reference is not None and params and not added:
        raise WashoutError(
            f"--reference {reference!r} with -P/-L: it is one of the commands, which a scan "
            "makes a grid of tests; give a command of its own, or name one of the grid's "
            "tests in 'washout analyze --reference'"
        )
    if names and len(names) > len(commands):
        raise WashoutError(
            f"--command-name given {len(names)} times for {len(commands)} command(s)"
        )
    outputs = _once_or_each("--output", output, len(commands)) or ["null"]
    for option, value in (("--input", input), ("--reference", reference)):
        if value is not None and not value.strip():
            raise WashoutError(f"{option} {value!r}: empty")
    stdin = None if input in (None, "null") else os.path.abspath(input)
    if stdin is not None and not os.path.exists(stdin):  # hyperfine's check, as it starts
        raise WashoutError(f"--input {input!r}: no such file")
    if stdin is not None and os.path.isdir(stdin):
        raise WashoutError(f"--input {input!r}: a directory, not a file")
    lines = ["[experiment]", f"name = {json.dumps(name)}", f"runs = {runs}"]
    if chosen is not None:
        lines.append(f"reference = {json.dumps(chosen)}")
    if seed is not None:
        lines.append(f"seed = {seed}")
    if warmup:
        lines.append(f"warmup = {warmup}")
    if context:
        lines += [f"context = {json.dumps(context[0])}", f"context_levels = {context[1]}"]

    def grid_names(text: str | None) -> list[str]:  # the grid's parameters ``text`` uses
        return sorted({m.group(1) for m in _placeholders(text or "")} & set(params or {}))

    for option, text in (("--setup", setup), ("--reset", reset), ("--cleanup", cleanup)):
        if used := grid_names(text):
            raise WashoutError(
                f"{option} uses {{{used[0]}}}: it runs once for every test, so the parameter "
                "has no one value there (hyperfine runs it per command; washout's runs "
                "interleave the commands); use --prepare or --conclude, which take it"
            )
    shared: dict[str, str] = {}  # one for every test, in its table
    own: dict[str, list[str]] = {}  # each test's own
    for key, given in (("prepare", prepare), ("conclude", conclude)):
        values = _once_or_each(f"--{key}", given, len(commands))
        if len(values) > 1 or (values and grid_names(values[0])):
            own[key] = values if len(values) > 1 else values * len(commands)  # filled per test
        elif values:
            shared[key] = values[0]
    tables = (
        ("setup", setup),
        ("reset", reset),
        ("prepare", shared.get("prepare")),
        ("conclude", shared.get("conclude")),
        ("teardown", cleanup),
    )
    for table, command in tables:
        if command:
            lines += ["", f"[{table}]", f"command = {json.dumps(command)}"]
    pairs = ", ".join(f"{key} = {json.dumps(levels)}" for key, levels in (params or {}).items())
    grid = [f"params = {{{pairs}}}"] if params else []
    for i, command in enumerate(commands):
        lines += [
            "",
            "[[test]]",
            f"name = {json.dumps(names[i] if names and i < len(names) else command)}",
            f"command = {json.dumps(command)}",
            *(f"{key} = {json.dumps(values[i])}" for key, values in own.items()),
            f"output = {json.dumps(_output_where(outputs[i % len(outputs)]))}",
            *([f"input = {json.dumps(stdin)}"] if stdin else []),
            *(grid if not (added and i == 0) else []),  # a reference of its own: no scan
        ]
    text = "\n".join(lines) + "\n"
    return parse_spec_text(text, "command line"), text


def _with_reference(
    commands: list[str], names: list[str] | None, reference: str | None, name: str | None
) -> tuple[list[str], list[str] | None, str | None]:
    """The quick form's commands and names with hyperfine's ``--reference`` (and
    ``--reference-name``): the reference first, as a command of its own, unless it is one
    of the commands; and the reference's test name (None without one)."""
    if reference is None:
        if name is not None:
            raise WashoutError("--reference-name goes with --reference")
        return commands, names, None
    if reference in commands:
        if name is not None:
            raise WashoutError(
                f"--reference-name: the reference {reference!r} is one of the commands: "
                "name it with -n"
            )
        i = commands.index(reference)
        return commands, names, names[i] if names and i < len(names) else reference
    chosen = name or reference
    return [reference, *commands], [chosen, *(names or [])] if names or name else None, chosen


def _once_or_each(option: str, given: str | Sequence[str] | None, commands: int) -> list[str]:
    """A quick-form option hyperfine takes once for every command or once per command, in
    order (``--prepare``, ``--conclude``, ``--output``): its values; any other count is a
    one-line error."""
    values = [given] if isinstance(given, str) else list(given or [])
    if len(values) not in (0, 1, commands):
        raise WashoutError(
            f"{option} given {len(values)} times for {commands} command"
            f"{'' if commands == 1 else 's'}: give it once (for every command) or once per "
            "command, in order (hyperfine's)"
        )
    return values


def _output_where(value: str) -> str:
    """An ``--output`` value as the quick form stores it: checked as a test's ``output`` is
    (one line naming the option), a file's path made absolute."""
    try:
        if not value.strip():
            raise ValueError("empty")
        _output(value)
    except ValueError as err:
        raise WashoutError(f"--output {value!r}: {err}") from None
    if value in OUTPUT_KINDS:
        return value
    path = os.path.abspath(value)
    if not os.path.isdir(os.path.dirname(path)):
        raise WashoutError(f"--output {value!r}: no directory {os.path.dirname(path)!r}")
    if os.path.isdir(path):
        raise WashoutError(f"--output {value!r}: a directory, not a file")
    return path


def context_choice(
    kinds: str | Sequence[str] | None, levels: int | None, names: tuple[str, str]
) -> tuple[list[str], int] | None:
    """Context kinds (a list, or its names comma-separated) and levels given outside a spec
    (``run --context env,cwd --context-levels N``, ``washout.run(context=...)``; ``names``:
    how the two are called there), checked in one line each as ``[experiment] context`` is;
    None when not given."""
    if kinds is None:
        if levels is not None:
            raise WashoutError(f"{names[1]} without {names[0]}: {levels} levels of what?")
        return None
    chosen = [k.strip() for k in (kinds.split(",") if isinstance(kinds, str) else kinds)]
    if not chosen or any(k not in CONTEXT_KINDS for k in chosen) or len(set(chosen)) < len(chosen):
        raise WashoutError(
            f"{names[0]} = {','.join(chosen)!r}: expected distinct names from "
            f"{', '.join(CONTEXT_KINDS)}, comma-separated"
        )
    if levels is not None and not MIN_LEVELS <= levels <= MAX_LEVELS:
        raise WashoutError(f"{names[1]} = {levels}: expected {MIN_LEVELS} to {MAX_LEVELS}")
    return chosen, DEFAULT_LEVELS if levels is None else levels


def stored_claims(path: str | Path) -> list[str]:
    """The ``claims`` of the spec a washout store was made with."""
    from washout.data.store import Store

    with Store.open(path, readonly=True) as store:
        return list(parse_spec_text(store.experiment().spec_text, str(path)).experiment.claims)


# -- roles and worker groups (washout.harness.roles runs them) ---------------------------

DEFAULT_GROUP = "main"


def check_roles(spec: Spec, source: str) -> None:
    """Refuse, in one line naming the field and value, a spec whose roles do not fit:
    every worker has a role once one has, each group has one worker per role and all
    groups the same roles, and every role a test, background, metric or ``[role.X]``
    names is a role of the workers."""
    roles = _check_groups(spec, source)
    known = ", ".join(sorted(roles)) or "none"
    for name in spec.role:
        if name not in roles:
            raise _unknown_role(source, f"role.{name}", name, known)
    if roles and spec.experiment.sync:
        raise SpecError.at(
            source,
            "experiment.sync",
            spec.experiment.sync,
            "not supported with worker roles yet: sync each role's workdir in its [role.X] setup",
        )
    if roles and spec.experiment.context:
        raise SpecError.at(
            source,
            "experiment.context",
            spec.experiment.context,
            "not supported with worker roles yet (a trial's context is made on the worker "
            "that runs it)",
        )
    for i, t in enumerate(spec.test):
        where = f"test[{i}]"
        if t.role is not None and t.role not in roles:
            raise _unknown_role(source, f"{where}.role", t.role, known)
        if t.role is None and len(roles) > 1:
            raise SpecError(f"{source}: {where}.role: required: the workers have roles {known}")
        own = t.role or next(iter(roles), None)
        for j, bg in enumerate(t.background):
            if bg.role is not None and bg.role not in roles:
                raise _unknown_role(source, f"{where}.background[{j}].role", bg.role, known)
        for name, m in t.metrics.items():
            _check_metric(m, own, roles, known, source, f"{where}.metrics.{name}")


def _unknown_role(source: str, field: str, role: str, known: str) -> SpecError:
    return SpecError.at(source, field, role, f"no [[worker]] has this role ({known})")


def _check_groups(spec: Spec, source: str) -> set[str]:
    """The roles of the workers, once the groups are checked."""
    with_role = [i for i, w in enumerate(spec.worker) if w.role]
    if not with_role:
        for i, w in enumerate(spec.worker):
            if w.group is not None:
                raise SpecError.at(source, f"worker[{i}].group", w.group, "a group needs roles")
        return set()
    groups: dict[str, dict[str, int]] = {}
    for i, w in enumerate(spec.worker):
        if not w.role:
            first = spec.worker[with_role[0]]
            raise SpecError(
                f"{source}: worker[{i}].role: required: worker[{with_role[0]}] "
                f"has role {first.role!r}"
            )
        members = groups.setdefault(w.group or DEFAULT_GROUP, {})
        if w.role in members:
            raise SpecError.at(
                source,
                f"worker[{i}].role",
                w.role,
                f"group {w.group or DEFAULT_GROUP!r} already has it (worker[{members[w.role]}]);"
                " a group has one worker per role",
            )
        members[w.role] = i
    roles = {r for members in groups.values() for r in members}
    for group, members in groups.items():
        missing = sorted(roles - set(members))
        if missing:
            raise SpecError.at(
                source,
                "worker.group",
                group,
                f"has no worker of role {missing[0]!r}; every group needs every role "
                f"({', '.join(sorted(roles))})",
            )
    return roles


def _check_metric(
    m: MetricSpec, own: str | None, roles: set[str], known: str, source: str, field: str
) -> None:
    if m.role is not None and m.role not in roles:
        raise _unknown_role(source, f"{field}.role", m.role, known)
    why = m.source.elsewhere
    if m.role is not None and m.role != own and why:
        raise SpecError.at(source, f"{field}.role", m.role, why)
