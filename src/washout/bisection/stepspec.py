"""The experiment of one bisect step, written as an ordinary washout spec (pure).

A step measures two or three builds (good, candidate, bad; or the two builds of a check or
of the culprit's effect) with the user's spec: every ``[[test]]`` once per build, named
``COMMIT10:TEST`` and run in that build's directory (the test's own relative ``cwd``
under it) with ``WASHOUT_COMMIT`` set; the builds' executables join ``[provenance]
files``, so the engine hashes them on every worker, refuses workers that disagree and a
build that changes during the step. The runs are in seeded random orders only (each a
fresh permutation of every build's tests, after the spec's reset), ``runs`` of them; the
spec's claims name its own tests and are left out. Everything else (reset, setup,
prepare, teardown, workers, cluster, metrics, timeouts, warmup, failure policy) is the
user's, as written.

The text is TOML (inline tables), so every step's store is an ordinary washout store:
``washout status``, ``analyze``, ``report``, ``export`` and ``resume`` read it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from washout.errors import SpecError
from washout.harness.spec import Spec, expand_tests
from washout.harness.spec_toml import toml_text


@dataclass(frozen=True)
class Target:
    """The test and metric a bisect judges, which way is better, and where the test is among
    the spec's expanded tests (a step has them once per build, in that order)."""

    test: str
    metric: str
    better: str
    position: int
    tests: int


def copies_builds(spec: Spec) -> bool:
    """SSH workers (``[[worker]]``, ``[allocate]``) get a copy of the builds in their
    workdir; this machine and Slurm nodes (a file system they share) read them in place."""
    return bool(spec.worker or spec.allocate)


def check_spec(spec: Spec, source: str, test: str | None, metric: str | None) -> Target:
    """Refuse, in one line, a spec a bisect cannot run; return the test and metric judged
    (default: the first test and its first metric)."""
    exp = spec.experiment
    if exp.sync:
        raise SpecError.at(
            source, "experiment.sync", exp.sync, "a bisect copies each build to the workers itself"
        )
    if any(w.role for w in spec.worker):
        raise SpecError(f"{source}: [[worker]] role: a bisect does not run worker roles yet")
    for field, value in [("experiment.cwd", exp.cwd)] + [
        (f"test[{i}].cwd", t.cwd) for i, t in enumerate(spec.test)
    ]:
        if value and value.startswith("/"):
            raise SpecError.at(
                source, field, value, "a bisect runs tests in their build: give a relative cwd"
            )
    if spec.worker or spec.allocate:
        for i, w in enumerate(spec.worker):
            if not w.workdir:
                raise SpecError(
                    f"{source}: worker[{i}].workdir: required: a bisect copies the builds there"
                )
        if spec.allocate and not spec.allocate.workdir:
            raise SpecError(
                f"{source}: allocate.workdir: required: a bisect copies the builds there"
            )
    tests = expand_tests(spec, source)
    names = [t.name for t in tests]
    position = 0 if test is None else names.index(test) if test in names else -1
    if position < 0:
        shown = ", ".join(repr(t.name) for t in tests[:10])
        raise SpecError(f"--test = {test!r}: not a test of {source} (tests: {shown})")
    chosen = tests[position]
    name = metric or next(iter(chosen.metrics))
    if name not in chosen.metrics:
        raise SpecError(
            f"--metric = {metric!r}: test {chosen.name!r} of {source} has no such metric "
            f"(its metrics: {', '.join(chosen.metrics)})"
        )
    return Target(chosen.name, name, chosen.metrics[name].better, position, len(tests))


def step_name(name: str, commit: str) -> str:
    """A test's name in a step: ``COMMIT10:NAME`` (a grid's expansions follow from it)."""
    return f"{commit[:10]}:{name}"


def _under(build: str, cwd: str | None) -> str:
    return f"{build}/{cwd}" if cwd else build


def step_spec_text(
    data: dict[str, Any],
    builds: Sequence[tuple[str, str, Sequence[str]]],
    *,
    name: str,
    runs: int,
    seed: int,
) -> str:
    """The step's spec: ``data`` (the user's spec as parsed TOML) with every test once per
    build of ``builds`` (commit, its directory on the workers, its executables relative
    to that directory), ``runs`` random-order runs and ``seed``."""
    out = copy.deepcopy(data)
    exp = dict(out.get("experiment", {}))
    default_cwd = exp.pop("cwd", None)
    for key in ("claims", "sync", "design"):
        exp.pop(key, None)
    exp.update(name=name, runs=runs, seed=seed, orders=["random"])
    out["experiment"] = exp
    tests = []
    for commit, where, _ in builds:
        for test in data["test"]:
            entry = copy.deepcopy(test)
            entry["name"] = step_name(str(test["name"]), commit)
            entry["cwd"] = _under(where, test.get("cwd") or default_cwd)
            entry["env"] = {**test.get("env", {}), "WASHOUT_COMMIT": commit}
            tests.append(entry)
    out["test"] = tests
    provenance = dict(out.get("provenance", {}))
    provenance["files"] = list(provenance.get("files", [])) + [
        f"{where}/{path}" for _, where, binaries in builds for path in binaries
    ]
    out["provenance"] = provenance
    return toml_text(out)
