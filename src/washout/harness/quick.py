"""The quick form's run count and parameters, as hyperfine chooses them.

``washout run 'cmd a' 'cmd b'`` takes hyperfine's options: without ``--runs`` each command
is measured for about :data:`BUDGET` seconds (hyperfine's default), at least ``--min-runs``
and at most ``--max-runs`` times; ``-P NAME MIN MAX [-D STEP]`` and ``-L NAME a,b,c`` make a
grid of ``{NAME}`` values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace

from washout.errors import SpecError, WashoutError
from washout.harness.executors.base import CommandOptions
from washout.harness.spec import MAX_TESTS, Scalar, Spec, Test, expand_tests

BUDGET = 3.0
"""hyperfine's measurement time per command when the run count is not given (seconds)."""
MIN_RUNS = 10
"""hyperfine's default ``--min-runs``."""


def runs_for_budget(pilot: list[float], min_runs: int, max_runs: int | None) -> int:
    """hyperfine's run count, floor(budget / a run's time), at least ``min_runs`` and at
    most ``max_runs`` (hyperfine 1.15, src/benchmark/mod.rs: ``runs_in_min_time``, the
    quotient cast to an integer); every run holds every command, so the slowest command's
    count (the smallest) is taken, and every command is measured for at least that long."""
    slowest = max(pilot, default=0.0)
    wanted = math.floor(BUDGET / slowest) if slowest > 0 else min_runs
    chosen = max(wanted, min_runs)
    return chosen if max_runs is None else min(chosen, max_runs)


def quick_runs(
    spec: Spec, runs: int | None, min_runs: int | None, max_runs: int | None
) -> int | None:
    """Runs per order kind for the quick form (None: the spec's): ``--runs`` counts each
    command's runs in total over the order kinds, hyperfine's meaning; ``--min-runs`` and
    ``--max-runs`` have the count chosen by the time budget from one pilot trial each."""
    if min_runs is not None or max_runs is not None:
        if runs is not None:
            raise WashoutError("--runs and --min-runs/--max-runs: give one or the other")
        if min_runs is not None and max_runs is not None and min_runs > max_runs:
            raise WashoutError(f"--min-runs {min_runs} is above --max-runs {max_runs}")
        pilot = pilot_seconds(
            expand_tests(spec, "command line"),
            spec.prepare.command if spec.prepare else None,
            spec.conclude.command if spec.conclude else None,
        )
        runs = runs_for_budget(pilot, min_runs or MIN_RUNS, max_runs)
    if runs is None:
        return None
    return -(-runs // len(spec.experiment.orders))


def pilot_seconds(tests: list[Test], prepare: str | None, conclude: str | None) -> list[float]:
    """A run's time for each command: one trial, timed and not stored, with the prepare
    before it and the conclude after it (its own or ``prepare`` and ``conclude``, as around
    every trial), as hyperfine times a command's first run, its prepare and its conclude to
    choose its run count (its time per run holds theirs: ``preparation_overhead`` and
    ``conclusion_overhead``, src/benchmark/mod.rs); a failing command counts 0 (its count
    is then ``--min-runs``)."""
    import asyncio

    from washout.harness.executors.local import LocalExecutor

    async def pilot() -> list[float]:
        ex = LocalExecutor()
        try:
            times = []
            for test in tests:
                options = CommandOptions(timeout=None, cwd=test.cwd, env=test.env)
                before, after = test.prepare or prepare, test.conclude or conclude
                took = (await ex.run(before, options)).duration if before else 0.0
                result = await ex.run(
                    test.command, replace(options, output=test.output, input=test.input)
                )
                took += (await ex.run(after, options)).duration if after else 0.0
                times.append(took + result.duration if result.status == "ok" else 0.0)
            return times
        finally:
            await ex.close()

    return asyncio.run(pilot())


def scan_count(name: str, low: float, high: float, step: float) -> int:
    """How many values ``-P NAME LOW HIGH -D STEP`` makes (LOW, LOW + STEP, ... up to HIGH,
    hyperfine's ``--parameter-scan``/``--parameter-step-size``), counted from the range
    before any is made; non-finite bounds, a step that is not positive and HIGH below LOW
    are one-line errors."""
    shown = f"--parameter-scan {name} {low:g} {high:g} -D {step:g}"
    if not all(math.isfinite(v) for v in (low, high, step)):
        raise SpecError(f"{shown}: MIN, MAX and the step must be finite numbers")
    if not step > 0 or high < low:
        raise SpecError(f"{shown}: needs MIN <= MAX and a positive step")
    steps = (high - low) / step  # finite unless it overflows (1e308 / 1e-308)
    if not steps < MAX_TESTS:
        many = f"{steps + 1:,.0f}" if math.isfinite(steps) else "uncountably many"
        raise SpecError(f"{shown}: {many} values; at most {MAX_TESTS:,} tests")
    return math.floor(steps + 1e-9) + 1


def parameter_grid(
    scan: tuple[str, float, float] | None,
    step: float | None,
    listed: Sequence[tuple[str, str]] = (),
) -> dict[str, list[Scalar]] | None:
    """hyperfine's ``-P NAME MIN MAX [-D STEP]`` and ``-L NAME a,b,c`` (repeatable) as a
    grid, every combination of the values: scan values MIN, MIN + STEP, ... up to MAX
    (integers when MIN, MAX and STEP are). A grid of more than :data:`MAX_TESTS`
    combinations is refused before its values are made."""
    if step is not None and scan is None:
        raise SpecError("--parameter-step-size goes with --parameter-scan")
    lists: dict[str, list[Scalar]] = {}
    for name, values_text in listed:
        if name in lists or (scan is not None and name == scan[0]):
            raise SpecError(f"--parameter-list {name}: parameter {name!r} is given twice")
        lists[name] = list(values_text.split(","))
    grid: dict[str, list[Scalar]] = {}
    if scan is not None:
        name, low, high = scan
        step = 1.0 if step is None else step
        count = scan_count(name, low, high, step)
        combinations = count * math.prod(len(values) for values in lists.values())
        if combinations > MAX_TESTS:
            raise SpecError(
                f"--parameter-scan {name} {low:g} {high:g} -D {step:g}: {count:,} values "
                f"make {combinations:,} tests; at most {MAX_TESTS:,}"
            )
        whole = all(float(v).is_integer() for v in (low, high, step))
        values = [low + i * step for i in range(count)]
        grid[name] = [int(v) for v in values] if whole else [round(v, 12) for v in values]
    grid.update(lists)
    for name in grid:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SpecError(f"parameter name {name!r}: expected letters, digits and _")
    return grid or None


def check_no_shell(tests: Sequence[Test], shell: str) -> None:
    """hyperfine's ``-N`` (``--shell=none``): every command started without a shell.

    washout already starts a command of plain words naming a program on PATH directly
    (:func:`~washout.harness.executors.local.argv_for`), exactly as ``-N`` does, and any
    other with ``/bin/sh -c``; with ``-N`` that other is refused in one line rather than run
    through a shell the user asked not to have (hyperfine would split its words and pass a
    ``|`` or a quote to the program). ``shell``: the ``--shell`` given, other than
    ``default`` (washout's own way, which needs no check); only ``none``."""
    import os
    import shutil

    from washout.harness.executors.local import plain_words

    if shell != "none":
        raise WashoutError(
            f"--shell = {shell!r}: washout starts a command with shell syntax with /bin/sh "
            "-c and any other without a shell; only 'none' (as -N) and 'default' are taken"
        )
    for test in tests:
        command = test.command or ""
        words = plain_words(command)
        if words is None:
            raise WashoutError(
                f"-N: command {command!r} needs a shell (quotes, variables, globs, "
                "redirections, operators or a shell builtin), which washout starts it with: "
                "drop -N, or give it as plain words"
            )
        if shutil.which(words[0], path=os.environ.get("PATH")) is None:
            raise WashoutError(f"-N: command {command!r}: {words[0]!r} not found on PATH")
