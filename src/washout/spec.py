"""The experiment spec (TOML), validated with pydantic, and its expansion into tests.

``load_spec(path)`` returns a :class:`Spec` or raises a one-line
:class:`~washout.errors.WashoutError` naming the file, the field and the value. Parameter
grids expand to one test per combination; values substituted into a command are
shell-quoted (``shlex.quote``), never pasted raw.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from washout.durations import parse_duration
from washout.errors import WashoutError, located
from washout.execute.base import OUTPUT_TAIL
from washout.pinning import parse_cpus
from washout.sizes import parse_size

Duration = Annotated[float, BeforeValidator(parse_duration)]
ByteSize = Annotated[int, BeforeValidator(parse_size)]
Scalar = str | int | float | bool
ORDER_KINDS = ("fixed", "random", "reverse", "williams")
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_cpus(value: str | None) -> str | None:
    if value is not None:
        parse_cpus(value)
    return value


class MetricSpec(_Model):
    """Where a trial's metric comes from. Exactly one source; ``file`` changes the text read.

    - ``wall = true``: seconds measured by washout around the process (the default metric);
    - ``stdout = "last-number"``: the last number printed;
    - ``json = "dotted.path"``: stdout (or ``file``) is a JSON document;
    - ``regex = '...(?P<value>...)...'``: the named group ``value`` of the last match;
    - ``file = "path"``: read after the trial, parsed by ``json``/``regex`` or last number.
    """

    wall: bool = False
    stdout: Literal["last-number"] | None = None
    json_path: str | None = Field(default=None, alias="json")
    regex: str | None = None
    file: str | None = None
    better: Literal["lower", "higher"] = "lower"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            pattern = re.compile(value)
        except re.error as err:
            raise ValueError(f"not a valid regular expression: {err}") from None
        if "value" not in pattern.groupindex:
            raise ValueError("the regex needs a named group (?P<value>...)")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> MetricSpec:
        parsers = [p for p in (self.stdout, self.json_path, self.regex) if p is not None]
        if self.wall and (parsers or self.file):
            raise ValueError("wall is measured by washout; it takes no other source")
        if len(parsers) > 1:
            raise ValueError("give one of stdout, json, regex (with file to read a file)")
        if self.stdout and self.file:
            raise ValueError("stdout = 'last-number' reads stdout; for a file give file alone")
        if not self.wall and not parsers and not self.file:
            raise ValueError("give a source: wall, stdout, json, regex or file")
        return self


WALL = MetricSpec(wall=True)


class CommandSpec(_Model):
    """A command run once (setup, teardown) on each worker."""

    command: str
    timeout: Duration | None = None
    cwd: str | None = None


class ResetSpec(_Model):
    """The reset before every run: ``command`` (on the worker), ``local`` (on the
    controller, e.g. a cloud API call), ``reboot`` (SSH workers) or ``none``."""

    kind: Literal["command", "local", "reboot", "none"] = "command"
    command: str | None = None
    timeout: Duration = 120.0

    @model_validator(mode="after")
    def _command_given(self) -> ResetSpec:
        if self.kind in ("command", "local") and not self.command:
            raise ValueError(f"a reset of kind {self.kind!r} needs a command")
        return self


class TestSpec(_Model):
    """One test, or a grid of tests when ``params`` is given."""

    __test__ = False  # not a pytest test class

    name: str = Field(min_length=1)
    command: str = Field(min_length=1)
    timeout: Duration | None = None
    metrics: dict[str, MetricSpec] = Field(default_factory=lambda: {"wall": WALL})
    params: dict[str, list[Scalar]] = Field(default_factory=dict)
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cpus: Annotated[str | None, AfterValidator(_check_cpus)] = None

    @field_validator("metrics")
    @classmethod
    def _some_metric(cls, value: dict[str, MetricSpec]) -> dict[str, MetricSpec]:
        if not value:
            raise ValueError("a test needs at least one metric (or leave metrics out for wall)")
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

    host: str
    name: str | None = None
    port: int | None = None
    user: str | None = None
    key: str | None = None
    known_hosts: str | None = None
    workdir: str | None = None
    reboot_command: str | None = None
    """For ``[reset] kind = "reboot"``: this worker's reboot command (else the reset's
    ``command``, else ``reboot`` as root and ``sudo -n reboot`` otherwise)."""
    boot_id_command: str | None = None
    """Prints the boot id that must change across a reboot (default: the kernel's)."""

    @property
    def label(self) -> str:
        """The worker's name in the store: its ``name``, else ``host`` (``host:port``)."""
        if self.name:
            return self.name
        return f"{self.host}:{self.port}" if self.port else self.host


class ProvenanceSpec(_Model):
    """What identifies a build: file hashes (relative to the workdir) and command outputs."""

    files: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)


class ExperimentSpec(_Model):
    """The ``[experiment]`` table."""

    name: str = Field(default="experiment", min_length=1)
    runs: int = Field(default=10, gt=0)
    design: Literal["alternate", "coin", "blocked"] = "alternate"
    orders: list[Literal["fixed", "random", "reverse", "williams"]] = Field(
        default_factory=lambda: ["fixed", "random"], min_length=1
    )
    seed: int | None = Field(default=None, ge=0)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    correction: Literal["bonferroni", "holm"] = "bonferroni"
    on_failure: str = "record"
    timeout: Duration | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cpus: Annotated[str | None, AfterValidator(_check_cpus)] = None
    sync: str | None = None
    claims: list[str] = Field(default_factory=list)
    output_tail: ByteSize = OUTPUT_TAIL
    """Bytes of the end of each trial's stdout and stderr kept (what stdout metrics read)."""

    @field_validator("orders")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each order kind may appear once")
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


class Spec(_Model):
    """A whole experiment spec, as written (before grid expansion)."""

    experiment: ExperimentSpec = Field(default_factory=ExperimentSpec)
    setup: CommandSpec | None = None
    reset: ResetSpec | None = None
    teardown: CommandSpec | None = None
    test: list[TestSpec] = Field(min_length=1)
    worker: list[WorkerSpec] = Field(default_factory=list)
    provenance: ProvenanceSpec = Field(default_factory=ProvenanceSpec)


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


def _fill(template: str, values: dict[str, Scalar], quote: bool) -> str:
    """Substitute ``{param}`` placeholders (``{{``/``}}`` stay literal braces)."""

    def sub(match: re.Match[str]) -> str:
        text = str(values[match.group(1)])
        return shlex.quote(text) if quote else text

    return _PLACEHOLDER.sub(sub, template).replace("{{", "{").replace("}}", "}")


def expand_tests(spec: Spec, source: str = "spec") -> list[Test]:
    """Expand every ``[[test]]`` (grids to one test per combination, in spec order).

    A test without ``params`` keeps its command literally (shell braces need no escaping);
    with ``params`` every ``{name}`` must be a parameter. Names must be unique.
    """
    exp = spec.experiment
    tests: list[Test] = []
    for i, t in enumerate(spec.test):
        combos: list[dict[str, Scalar]] = [{}]
        if t.params:
            for where, template in (("name", t.name), ("command", t.command)):
                unknown = set(_PLACEHOLDER.findall(template)) - set(t.params)
                if unknown:
                    raise located(source, f"test[{i}].{where}", template,
                                  f"unknown placeholder {{{sorted(unknown)[0]}}}; "
                                  f"parameters are {', '.join(sorted(t.params))} "
                                  "(write {{ and }} for literal braces)")
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
            tests.append(Test(
                name=name, command=command,
                timeout=t.timeout if t.timeout is not None else exp.timeout,
                metrics=t.metrics, cwd=t.cwd or exp.cwd, env={**exp.env, **t.env},
                cpus=t.cpus or exp.cpus, params=values,
            ))
    seen: dict[str, int] = {}
    for index, test in enumerate(tests):
        if test.name in seen:
            raise located(source, "test.name", test.name,
                          f"duplicate test name (tests #{seen[test.name] + 1} and #{index + 1}); "
                          "test names must be unique")
        seen[test.name] = index
    return tests


def _field_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path or "(top level)"


def _lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def spec_from_data(data: dict[str, Any], source: str) -> Spec:
    """Validate parsed TOML; the first problem becomes a one-line error."""
    try:
        spec = Spec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            return_msg = "unknown key"
            raise located(source, _field_path(loc), _lookup(data, loc), return_msg) from None
        if first["type"] == "missing":
            raise WashoutError(f"{source}: {_field_path(loc)}: required but missing") from None
        raise located(source, _field_path(loc), first.get("input"), message) from None
    expand_tests(spec, source)
    return spec


def load_spec(path: str | Path) -> tuple[Spec, str]:
    """Read, parse and validate a spec file; returns the spec and its text (to store)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise WashoutError(f"{path}: cannot read spec: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise WashoutError(f"{path}: the spec is not UTF-8 text") from None
    return parse_spec_text(text, str(path)), text


def parse_spec_text(text: str, source: str) -> Spec:
    """Parse and validate spec text (the form the store keeps, for resume)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise WashoutError(f"{source}: invalid TOML: {err}") from None
    return spec_from_data(data, source)


def spec_from_commands(
    commands: list[str], *, runs: int, seed: int | None, reset: str | None,
    setup: str | None, name: str = "quick",
) -> tuple[Spec, str]:
    """The hyperfine-like quick form: each command a test named after itself.

    Returns the spec and an equivalent TOML text, stored so ``resume`` works as for a file.
    """
    lines = ["[experiment]", f"name = {json.dumps(name)}", f"runs = {runs}"]
    if seed is not None:
        lines.append(f"seed = {seed}")
    if setup:
        lines += ["", "[setup]", f"command = {json.dumps(setup)}"]
    if reset:
        lines += ["", "[reset]", f"command = {json.dumps(reset)}"]
    for command in commands:
        lines += ["", "[[test]]", f"name = {json.dumps(command)}", f"command = {json.dumps(command)}"]
    text = "\n".join(lines) + "\n"
    return parse_spec_text(text, "command line"), text
