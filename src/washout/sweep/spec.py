"""The ``[sweep]`` section of a spec: the parameter space, the command template, the metric,
repeats, budget and sampling options; and the experiment spec that measures one batch.

```toml
[experiment]                # as for washout run: name, seed, timeout, env, cwd, cpus ...
name = "sort-sweep"
seed = 7
[reset]                     # before every run (each run measures every setting of a batch once)
command = "sync"

[sweep]
command = "python3 bench.py --n {n} --kind {kind}"   # {param} placeholders, shell-quoted
metric = "seconds"          # a key of [sweep.metrics] (absent: "wall")
repeats = 3                 # runs per batch: each setting measured 3 times, random orders
budget_settings = 40        # stop after this many settings ...
budget_hours = 0.5          # ... or before the next batch would pass this much time
constraints = ["not (kind == 'heapsort' and n > 1000000)"]
method = "ours"             # ours (default) or paper; each option below overrides one part
threshold = 0.9
splits = 10
sampler = "coverage"        # the method's choices, written out: start, step, growth,
model = "smooth"            # sampler, model, rule, conclude, coding, validation
rule = "settled"           # holdout (R^2 alone), stable, paper
validation = "folds"        # value-stratified 5-fold splits (paper: random 80/20 splits)
conclude = "predicted"      # ANOVA on measured values + predictions for the rest
[sweep.params]              # ordered levels
n = [10000, 100000, 1000000]
kind = ["quicksort", "mergesort", "heapsort"]
[sweep.metrics.seconds]     # metric sources as for [[test]]: wall, stdout, json, regex, file
json = "median_s"
```

The space is at most :data:`MAX_SETTINGS` settings (it is enumerated whole), and the
command's placeholders must stand bare, as for a ``[[test]]`` grid
(:func:`washout.harness.spec.unsafe_placeholder`).

A constraint is a Python-like boolean expression over the parameter names with numbers,
strings, comparisons, ``and``/``or``/``not``, + - * / % and parentheses (nothing else is
evaluated); a setting is valid when every constraint holds.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from washout.errors import SpecError, WashoutError
from washout.harness.spec import Spec, check_placeholders, spec_from_data, validation_error
from washout.harness.spec_toml import toml_text
from washout.sweep.incremental import LoopOptions, method_options, sample_sizes
from washout.sweep.space import Space

if TYPE_CHECKING:
    from washout.harness.engine import Experiment

Scalar = str | int | float | bool
MAX_SETTINGS = 1_000_000
"""Most settings in a space (every combination of levels, before constraints)."""


class SweepSection(BaseModel):
    """The ``[sweep]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    command: str = Field(min_length=1)
    params: dict[str, list[Scalar]] = Field(min_length=1)
    metrics: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"wall": {"wall": True}})
    metric: str = "wall"
    repeats: int = Field(default=3, gt=0)
    budget_settings: int | None = Field(default=None, gt=0)
    budget_hours: float | None = Field(default=None, gt=0)
    constraints: list[str] = Field(default_factory=list)
    method: str = "ours"
    start: float | None = Field(default=None, gt=0, le=1)
    step: float | None = Field(default=None, gt=0, le=1)
    growth: float | None = Field(default=None, ge=1, le=10)
    threshold: float = Field(default=0.9, gt=0, le=1)
    splits: int = Field(default=10, gt=0)
    sampler: str | None = None
    model: str | None = None
    rule: str | None = None
    conclude: str | None = None
    coding: str | None = None
    validation: str | None = None
    timeout: str | float | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cpus: str | None = None

    @field_validator("params")
    @classmethod
    def _levels(cls, value: dict[str, list[Scalar]]) -> dict[str, list[Scalar]]:
        for key, levels in value.items():
            if not levels:
                raise ValueError(f"parameter {key!r} has no levels")
            if len(set(map(str, levels))) != len(levels):
                raise ValueError(f"parameter {key!r} lists a level twice")
        return value


_OPS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.USub: operator.neg,
    ast.Not: operator.not_,
}


def _evaluate(node: ast.AST, values: dict[str, Scalar]) -> Any:
    """Evaluate the small expression language of constraints (see the module docstring)."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise KeyError(node.id)
        return values[node.id]
    if isinstance(node, ast.BoolOp):
        results = [_evaluate(v, values) for v in node.values]
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand, values))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))
    if isinstance(node, ast.Compare) and all(type(op) in _OPS for op in node.ops):
        left = _evaluate(node.left, values)
        for op, comparator in zip(node.ops, node.comparators):
            right = _evaluate(comparator, values)
            if not _OPS[type(op)](left, right):
                return False
            left = right
        return True
    raise ValueError(f"{type(node).__name__} is not allowed in a constraint")


def compile_constraints(
    constraints: list[str], params: list[str], source: str
) -> list[ast.Expression]:
    """Parse each constraint once; unknown names and forbidden syntax are one-line errors."""
    compiled = []
    probe = {p: 1 for p in params}
    for i, text in enumerate(constraints):
        try:
            tree = ast.parse(text, mode="eval")
            _check_syntax(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and node.id not in probe:
                    raise KeyError(node.id)
        except SyntaxError:
            raise SpecError.at(
                source, f"sweep.constraints[{i}]", text, "not a valid expression"
            ) from None
        except KeyError as err:
            raise SpecError.at(
                source,
                f"sweep.constraints[{i}]",
                text,
                f"unknown name {err.args[0]!r} (parameters: {', '.join(params)})",
            ) from None
        except ValueError as err:
            raise SpecError.at(source, f"sweep.constraints[{i}]", text, str(err)) from None
        compiled.append(tree)
    return compiled


def _check_syntax(tree: ast.AST) -> None:
    allowed = (
        ast.Expression,
        ast.Constant,
        ast.Name,
        ast.Load,
        ast.BoolOp,
        ast.And,
        ast.Or,
        ast.UnaryOp,
        ast.BinOp,
        ast.Compare,
        *_OPS,
    )
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise ValueError(f"{type(node).__name__} is not allowed in a constraint")


def sweep_space(section: SweepSection, source: str) -> Space:
    """Every valid combination of levels (first parameter slowest), levels in spec order.

    Levels keep the order written: that order is the one the ANOVA's reference level and the
    knee/turning search use, so write numeric levels ascending.
    """
    import numpy as np

    names = list(section.params)
    levels = [list(section.params[n]) for n in names]
    total = math.prod(len(lv) for lv in levels)
    if total > MAX_SETTINGS:
        raise SpecError.at(
            source,
            "sweep.params",
            f"{total:,} settings",
            f"at most {MAX_SETTINGS:,} settings (every combination of levels)",
        )
    grids = np.meshgrid(*[np.arange(len(lv)) for lv in levels], indexing="ij")
    codes = np.column_stack([g.ravel() for g in grids]).astype(int)
    rules = compile_constraints(section.constraints, names, source)
    if rules:
        keep = []
        for row in codes:
            values = {n: levels[f][c] for f, (n, c) in enumerate(zip(names, row))}
            try:
                keep.append(all(_evaluate(rule, values) for rule in rules))
            except (TypeError, ZeroDivisionError) as err:
                raise SpecError.at(
                    source, "sweep.constraints", values, f"cannot evaluate: {err}"
                ) from None
        codes = codes[np.asarray(keep, dtype=bool)]
    if len(codes) == 0:
        raise SpecError.at(
            source, "sweep.constraints", section.constraints, "no setting satisfies them"
        )
    typed = [
        [
            float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
            for v in lv
        ]
        for lv in levels
    ]
    return Space(names, typed, codes, source=source)


def loop_options(section: SweepSection, seed: int) -> LoopOptions:
    """The incremental-sampling options of a sweep section: its method's, with the options
    it sets overriding them."""
    return method_options(
        section.method,
        "sweep.method",
        start=section.start,
        step=section.step,
        growth=section.growth,
        threshold=section.threshold,
        splits=section.splits,
        sampler=section.sampler,
        model=section.model,
        rule=section.rule,
        seed=seed,
        budget=section.budget_settings,
        conclude=section.conclude,
        coding=section.coding,
        validation=section.validation,
    )


def load_sweep(path: str | Path) -> tuple[SweepSection, dict[str, Any], str]:
    """Read a sweep spec: its ``[sweep]`` section, the rest of the spec (for the engine) and
    the text. Errors name the file, the field and the value."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"{source}: cannot read spec: {err.strerror or err}") from None
    try:
        data = tomllib.loads(text.removeprefix("\ufeff"))  # a BOM, as some editors write
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{source}: invalid TOML: {err}") from None
    if "sweep" not in data:
        raise SpecError(f"{source}: sweep: required but missing (a [sweep] table)")
    if "test" in data:
        raise SpecError.at(
            source, "test", "[[test]]", "a sweep spec has no [[test]]: its settings are the tests"
        )
    raw = data.pop("sweep")
    try:
        section = SweepSection.model_validate(raw)
    except ValidationError as err:
        raise validation_error(err, source, SweepSection, ("sweep",)) from None
    check_placeholders(section.command, source, "sweep.command")
    if section.metric not in section.metrics:
        raise SpecError.at(
            source,
            "sweep.metric",
            section.metric,
            f"not among sweep.metrics ({', '.join(section.metrics)})",
        )
    try:
        loop_options(section, 0).check("sweep")
    except WashoutError as err:  # name the spec field, not the command-line option
        field = str(err).replace("--", "sweep.").replace("sweep: ", "sweep.")
        raise SpecError(f"{source}: {field}") from None
    return section, data, text


def batch_spec_data(
    section: SweepSection,
    rest: dict[str, Any],
    space: Space,
    rows: list[int],
    batch: int,
    seed: int,
) -> dict[str, Any]:
    """The experiment spec (as data) measuring the settings ``rows``: one test per setting
    (its command the template filled and shell-quoted by the engine's grid expansion),
    ``repeats`` runs in random orders, a reset before every run."""
    experiment = dict(rest.get("experiment", {}))
    name = experiment.get("name", "sweep")
    experiment.update(
        name=f"{name}-batch{batch:03d}", runs=section.repeats, orders=["random"], seed=seed + batch
    )
    tests = []
    for row in rows:
        values = {
            p: space.level(f, int(space.codes[row, f])) for f, p in enumerate(space.parameters)
        }
        test: dict[str, Any] = {
            "name": "setting-" + "-".join(f"{{{p}}}" for p in space.parameters),
            "command": section.command,
            "params": {p: [v] for p, v in values.items()},
            "metrics": section.metrics,
        }
        for key in ("timeout", "cwd", "cpus"):
            if getattr(section, key) is not None:
                test[key] = getattr(section, key)
        if section.env:
            test["env"] = section.env
        tests.append(test)
    return {**rest, "experiment": experiment, "test": tests}


def batch_spec(data: dict[str, Any], source: str) -> Spec:
    """The validated experiment spec of a batch's data (:func:`batch_spec_data`). A
    problem in what a batch's tests take from the ``[sweep]`` table (command, metrics,
    timeout ...) is named as that field of ``sweep``, where the user wrote it."""
    try:
        return spec_from_data(data, source)
    except SpecError as err:
        raise SpecError(re.sub(r"\btest\[\d+\]\.", "sweep.", str(err))) from None


def first_batch(
    section: SweepSection, rest: dict[str, Any], space: Space, seed: int, source: str
) -> Experiment:
    """The experiment of the sweep's first batch, built as a run builds it (any settings of
    its size): every field a batch needs checked before anything is measured."""
    from washout.harness.engine import Experiment

    options = loop_options(section, seed)
    least = 1 + sum(k - 1 for k in space.n_levels)
    size = min(
        sample_sizes(len(space), options.start, options.step, options.growth, least)[0],
        options.budget or len(space),
    )
    data = batch_spec_data(section, rest, space, list(range(size)), 0, seed)
    spec = batch_spec(data, source)
    return Experiment.prepare(spec, toml_text(data), source, seed=seed)


def validate_sweep(path: str | Path) -> str | None:
    """``washout validate`` on a sweep spec: what the sweep will do, or a one-line error
    naming the file, field and value; None when ``path`` holds no ``[sweep]`` table (or
    cannot be read as TOML: the ordinary spec check says why)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8").removeprefix("\ufeff"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if "sweep" not in data:
        return None
    source = str(path)
    section, rest, _ = load_sweep(path)
    space = sweep_space(section, source)
    seed = int(rest.get("experiment", {}).get("seed", 0))
    experiment = first_batch(section, rest, space, seed, source)
    options = loop_options(section, seed)
    total = math.prod(len(v) for v in section.params.values())
    levels = ", ".join(f"{p}: {len(v)} levels" for p, v in section.params.items())
    excluded = f"; {total - len(space)} excluded by constraints" if total > len(space) else ""
    return (
        f"{source}: valid. Sweep of {len(space)} settings ({levels}{excluded}), metric "
        f"{section.metric!r}, {section.repeats} repeats per setting; method {options.method} "
        f"({options.sampler} sampler, model {options.model}, rule {options.rule}, threshold "
        f"{options.threshold}); first batch: {len(experiment.tests)} settings, "
        f"{experiment.planned_trials} trials."
    )
