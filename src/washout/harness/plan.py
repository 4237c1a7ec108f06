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

Randomness comes only from :meth:`random.Random.random` on string seeds, the part of
Python's generator guaranteed stable across versions, with our own Fisher-Yates shuffle:
the same spec and seed give the same schedule on any machine.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

DESIGNS = ("alternate", "coin", "blocked")


@dataclass(frozen=True)
class PlannedRun:
    """One run: its index, its order kind and the tests (indices into the spec's tests)."""

    index: int
    order: str
    tests: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """The whole schedule of an experiment for one worker (every worker runs the same)."""

    seed: int
    design: str
    runs: tuple[PlannedRun, ...]

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
