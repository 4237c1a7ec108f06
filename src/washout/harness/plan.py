"""Order designs and the seeded schedule: a pure function of (tests, runs, design, seed).

Order kinds (what order the tests take within one run):

- ``fixed``: the baseline, the order the tests are written in;
- ``random``: a fresh seeded permutation per run (Duplyakin et al., ATC 2023, Alg. 1);
- ``reverse``: the baseline reversed ("flip the order to rule out cache effects");
- ``williams``: successive rows of a Williams square, a Latin square balanced for first-order
  carryover: over a full cycle every test immediately precedes every other test equally
  often (Williams 1949, "Experimental designs balanced for the estimation of residual
  effects of treatments"; even n: n rows, odd n: the n rows and their reversals).

Designs (how runs of the kinds are interleaved): ``alternate`` (F R F R ..., Algorithm 1
of the ordering-trap paper), ``coin`` (a seeded fair coin per run, conditioned on equal
counts: a seeded shuffle of the runs), ``blocked`` (all runs of the first kind, then the
next).

Context levels (``[experiment] context``): the environment's size, the working directory's
path length and ASLR are a design factor (Mytkowicz et al., ASPLOS 2009): a few levels are
drawn per experiment (:func:`draw_levels`, :func:`context_levels`), and each test's trials,
run by run, take them in turn, in a fresh random order every ``len(levels)`` trials
(:func:`with_contexts`), apart from every other test's, so that under the null the levels
are exchangeable labels whatever the machine does (washout.stats.context).

Randomness comes only from :meth:`random.Random.random` on string seeds, the part of
Python's generator guaranteed stable across versions, with our own Fisher-Yates shuffle:
the same spec and seed give the same schedule, and the same context levels, on any machine
(numpy's ``Generator`` streams are not promised across numpy versions, NEP 19, so a
``resume`` after an upgrade could not repeat them). Each purpose has its own stream (the
orders', the design's, the contexts'), so adding context levels changes no order.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from washout.data.store.schema import CONTEXT_KINDS

DESIGNS = ("alternate", "coin", "blocked")
ENV_SPAN = 4096
"""Environment paddings are drawn in 0..ENV_SPAN-1 bytes (hyperfine's range)."""
CWD_SPAN = 1024
"""Working directories are drawn 0..CWD_SPAN-1 bytes longer than the shortest one."""
STACK_STEP, ALIGNMENT_CLASSES = 16, 4
"""The stack moves in 16-byte steps (the x86-64 and AArch64 ABIs align it so); a 64-byte
cache line holds 4 of them."""
DEFAULT_LEVELS = 4
"""Context levels by default: one per 64-byte alignment class of the stack (8 found less in
the calibration, bench/RESULTS.md "Context")."""
MIN_LEVELS, MAX_LEVELS = 2, 64
"""Context levels per experiment: at least 2 to compare; at most CWD_SPAN / STACK_STEP (each
a distinct stack step), and far more than an experiment has trials per level for."""


@dataclass(frozen=True)
class Context:
    """One context level: environment padding and working directory padding in bytes, and
    ASLR on or off; None where the experiment does not randomize that."""

    env_bytes: int | None = None
    cwd_bytes: int | None = None
    aslr: bool | None = None

    def to_dict(self) -> dict[str, int | bool | None]:
        return {"env_bytes": self.env_bytes, "cwd_bytes": self.cwd_bytes, "aslr": self.aslr}


@dataclass(frozen=True)
class PlannedRun:
    """One run: its index, its order kind and the tests (indices into the spec's tests);
    with context levels, each position's level (an index into :attr:`Plan.levels`)."""

    index: int
    order: str
    tests: tuple[int, ...]
    contexts: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plan:
    """The whole schedule of an experiment for one worker (every worker runs the same), and
    its context levels (none: the context is not randomized)."""

    seed: int
    design: str
    runs: tuple[PlannedRun, ...]
    levels: tuple[Context, ...] = ()

    @property
    def total_trials(self) -> int:
        return sum(len(r.tests) for r in self.runs)


def draw_seed() -> int:
    """A fresh seed for a spec without one (printed and stored so it can be replayed)."""
    return secrets.randbelow(2**31)


def _rng(seed: int, purpose: str) -> random.Random:
    return random.Random(f"washout:{seed}:{purpose}")


def _shuffle(items: list[int], rng: random.Random) -> list[int]:
    """Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm P) driven by ``rng.random()`` only."""
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        items[i], items[j] = items[j], items[i]
    return items


def williams_rows(n: int) -> list[tuple[int, ...]]:
    """The rows of a Williams square for ``n`` treatments (Williams 1949).

    First row 0, 1, n-1, 2, n-2, ...; row r adds r modulo n. For odd n the reversed rows
    are appended, so every ordered pair is adjacent equally often over all rows.
    """
    if n == 1:
        return [(0,)]
    first: list[int] = [0]
    low, high = 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [tuple((x + r) % n for x in first) for r in range(n)]
    if n % 2:
        rows += [tuple(reversed(row)) for row in rows]
    return rows


def _order_for(
    kind: str, k: int, n_tests: int, seed: int, run_index: int, williams: list[tuple[int, ...]]
) -> tuple[int, ...]:
    """The test order of the k-th run of ``kind`` (run_index: its index in the schedule)."""
    if kind == "fixed":
        return tuple(range(n_tests))
    if kind == "reverse":
        return tuple(reversed(range(n_tests)))
    if kind == "random":
        if n_tests == 1:  # a shuffle of one draws nothing: not seeded
            return (0,)
        return tuple(_shuffle(list(range(n_tests)), _rng(seed, f"run:{run_index}")))
    if kind == "williams":
        return williams[k % len(williams)]
    raise ValueError(f"unknown order kind {kind!r}")


def schedule(
    n_tests: int,
    runs: int,
    kinds: Sequence[str] = ("fixed", "random"),
    design: str = "alternate",
    seed: int = 0,
) -> Plan:
    """The schedule: ``runs`` runs of every order kind, interleaved by ``design``.

    For ``williams``, ``runs`` should be a multiple of the square's row count (n for even
    n, 2n for odd n) for exact balance; the rows cycle otherwise.
    """
    if n_tests < 1 or runs < 1:
        raise ValueError("need at least one test and one run")
    kinds = tuple(kinds)
    if design == "alternate":
        sequence = [kinds[i % len(kinds)] for i in range(runs * len(kinds))]
    elif design == "blocked":
        sequence = [kind for kind in kinds for _ in range(runs)]
    elif design == "coin":
        base = [i % len(kinds) for i in range(runs * len(kinds))]
        sequence = [kinds[i] for i in _shuffle(base, _rng(seed, "design"))]
    else:
        raise ValueError(f"unknown design {design!r}; expected one of {', '.join(DESIGNS)}")
    williams = williams_rows(n_tests) if "williams" in kinds else []
    seen: dict[str, int] = {}
    planned = []
    for index, kind in enumerate(sequence):
        k = seen.get(kind, 0)
        seen[kind] = k + 1
        planned.append(PlannedRun(index, kind, _order_for(kind, k, n_tests, seed, index, williams)))
    return Plan(seed=seed, design=design, runs=tuple(planned))


def draw_levels(rng: random.Random, count: int, span: int) -> list[int]:
    """``count`` distinct paddings in 0..span-1, spread over the stack's alignment classes:
    16 u_i + v, one offset v in 0..15 for all, the u_i distinct with u_i = i (mod 4), so every
    64-byte alignment class gets count / 4 levels (the first classes one more where 4 does
    not divide count), each at a random place in the span. A layout effect is periodic (a
    cache line every 64 bytes, a page every 4096) and aliased: levels in one class only could
    all miss it, and more levels per class buy less than more trials per level
    (bench/RESULTS.md, "Context")."""
    offset = int(rng.random() * STACK_STEP)
    steps = span // STACK_STEP
    chosen = []
    for c in range(ALIGNMENT_CLASSES):
        wanted = count // ALIGNMENT_CLASSES + (c < count % ALIGNMENT_CLASSES)
        chosen += _shuffle(list(range(c, steps, ALIGNMENT_CLASSES)), rng)[:wanted]
    return [STACK_STEP * u + offset for u in chosen]


def context_levels(kinds: Sequence[str], count: int, seed: int) -> tuple[Context, ...]:
    """The ``count`` context levels of an experiment randomizing ``kinds`` (of
    :data:`CONTEXT_KINDS`): environment paddings in 0..ENV_SPAN-1 and working directory
    paddings in 0..CWD_SPAN-1 (:func:`draw_levels`), paired at random; ASLR off in half the
    levels and on in the other half (2 levels when ASLR is all that varies). From its own
    stream of ``seed``."""
    unknown = [k for k in kinds if k not in CONTEXT_KINDS]
    if unknown or not kinds or not MIN_LEVELS <= count <= MAX_LEVELS:
        raise ValueError(f"context {list(kinds)} with {count} levels")
    rng = _rng(seed, "context")
    if list(kinds) == ["aslr"]:
        count = 2
    env = _shuffle(draw_levels(rng, count, ENV_SPAN), rng) if "env" in kinds else None
    cwd = _shuffle(draw_levels(rng, count, CWD_SPAN), rng) if "cwd" in kinds else None
    return tuple(
        Context(
            env_bytes=None if env is None else env[i],
            cwd_bytes=None if cwd is None else cwd[i],
            aslr=bool(i % 2) if "aslr" in kinds else None,
        )
        for i in range(count)
    )


def with_contexts(plan: Plan, n_tests: int, levels: Sequence[Context]) -> Plan:
    """``plan`` with each position's context level: each test's trials, in the order the
    plan runs them, take the levels in turn, in a fresh random permutation every
    ``len(levels)`` trials (each level equally often, its order random), drawn per test
    from its own stream of the plan's seed. A retried attempt keeps its slot's level."""
    k = len(levels)
    taken = [0] * n_tests
    drawn: list[list[int]] = [[] for _ in range(n_tests)]
    runs = []
    for run in plan.runs:
        contexts = []
        for test in run.tests:
            if taken[test] % k == 0:
                cycle = taken[test] // k
                drawn[test] = _shuffle(list(range(k)), _rng(plan.seed, f"context:{test}:{cycle}"))
            contexts.append(drawn[test][taken[test] % k])
            taken[test] += 1
        runs.append(PlannedRun(run.index, run.order, run.tests, tuple(contexts)))
    return Plan(plan.seed, plan.design, tuple(runs), tuple(levels))
