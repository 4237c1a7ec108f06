"""The schedule: designs, permutations, seeds, Williams balance (pure, no I/O)."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from washout.harness.plan import (
    CWD_SPAN,
    ENV_SPAN,
    Context,
    context_levels,
    schedule,
    williams_rows,
    with_contexts,
)


def test_alternate_starts_fixed_and_alternates() -> None:
    plan = schedule(4, 5, ("fixed", "random"), "alternate", seed=1)
    assert [r.order for r in plan.runs] == ["fixed", "random"] * 5
    assert [r.index for r in plan.runs] == list(range(10))


def test_fixed_runs_keep_spec_order_and_random_runs_are_permutations() -> None:
    plan = schedule(6, 20, ("fixed", "random"), "alternate", seed=3)
    for run in plan.runs:
        if run.order == "fixed":
            assert run.tests == tuple(range(6))
        else:
            assert sorted(run.tests) == list(range(6))
    randoms = {r.tests for r in plan.runs if r.order == "random"}
    assert len(randoms) > 15  # fresh permutations, not one reused


def test_blocked_puts_all_fixed_runs_first() -> None:
    plan = schedule(3, 4, ("fixed", "random"), "blocked", seed=0)
    assert [r.order for r in plan.runs] == ["fixed"] * 4 + ["random"] * 4


def test_coin_keeps_counts_equal_and_depends_on_seed() -> None:
    a = schedule(3, 10, ("fixed", "random"), "coin", seed=1)
    b = schedule(3, 10, ("fixed", "random"), "coin", seed=2)
    for plan in (a, b):
        assert Counter(r.order for r in plan.runs) == {"fixed": 10, "random": 10}
    assert [r.order for r in a.runs] != [r.order for r in b.runs]
    assert [r.order for r in a.runs] != ["fixed", "random"] * 10


def test_same_seed_same_schedule_different_seed_different_permutations() -> None:
    a = schedule(5, 10, ("fixed", "random"), "alternate", seed=42)
    assert a == schedule(5, 10, ("fixed", "random"), "alternate", seed=42)
    c = schedule(5, 10, ("fixed", "random"), "alternate", seed=43)
    assert [r.tests for r in a.runs] != [r.tests for r in c.runs]


def test_schedule_is_portable_golden_values() -> None:
    """Pinned output: the schedule must not change across machines or Python versions."""
    plan = schedule(5, 2, ("fixed", "random"), "alternate", seed=7)
    assert [r.tests for r in plan.runs] == [
        (0, 1, 2, 3, 4),
        (0, 1, 4, 3, 2),
        (0, 1, 2, 3, 4),
        (4, 0, 3, 1, 2),
    ]


def test_reverse_is_baseline_reversed() -> None:
    plan = schedule(4, 2, ("fixed", "reverse"), "alternate", seed=0)
    assert [r.tests for r in plan.runs] == [(0, 1, 2, 3), (3, 2, 1, 0)] * 2


@pytest.mark.parametrize("n", range(2, 10))
def test_williams_square_balances_adjacent_pairs(n: int) -> None:
    rows = williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for row in rows:
        assert sorted(row) == list(range(n))
    pairs = Counter(p for row in rows for p in pairwise(row))
    assert set(pairs) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert len(set(pairs.values())) == 1  # every ordered pair adjacent equally often


def test_williams_runs_in_schedule_cycle_the_square() -> None:
    plan = schedule(4, 8, ("fixed", "williams"), "alternate", seed=0)
    rows = [r.tests for r in plan.runs if r.order == "williams"]
    pairs = Counter(p for row in rows for p in pairwise(row))
    assert len(pairs) == 12 and set(pairs.values()) == {2}


@given(
    n=st.integers(1, 12),
    runs=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    design=st.sampled_from(["alternate", "coin", "blocked"]),
)
def test_every_run_has_each_test_once(n: int, runs: int, seed: int, design: str) -> None:
    plan = schedule(n, runs, ("fixed", "random", "reverse"), design, seed)
    assert len(plan.runs) == 3 * runs
    assert Counter(r.order for r in plan.runs) == {"fixed": runs, "random": runs, "reverse": runs}
    assert all(sorted(r.tests) == list(range(n)) for r in plan.runs)
    assert plan.total_trials == 3 * runs * n


def test_context_levels_spread_over_the_alignment_classes_and_repeat_by_seed() -> None:
    levels = context_levels(["env", "cwd", "aslr"], 8, seed=5)
    assert levels == context_levels(["env", "cwd", "aslr"], 8, seed=5)
    assert levels != context_levels(["env", "cwd", "aslr"], 8, seed=6)
    env = [c.env_bytes for c in levels]
    cwd = [c.cwd_bytes for c in levels]
    assert all(e is not None and 0 <= e < ENV_SPAN for e in env)
    assert all(c is not None and 0 <= c < CWD_SPAN for c in cwd)
    for paddings in (env, cwd):
        assert len(set(paddings)) == 8
        assert sorted((p // 16) % 4 for p in paddings) == [0, 0, 1, 1, 2, 2, 3, 3]
        assert len({p % 16 for p in paddings}) == 1  # one offset within the 16-byte step
    assert sorted(c.aslr for c in levels) == [False] * 4 + [True] * 4
    assert context_levels(["aslr"], 4, seed=1) == (Context(aslr=False), Context(aslr=True))
    three = context_levels(["env"], 6, seed=2)
    assert sorted(((c.env_bytes or 0) // 16) % 4 for c in three) == [0, 0, 1, 1, 2, 3]
    assert all(c.cwd_bytes is None and c.aslr is None for c in three)


def test_each_test_takes_every_level_once_per_cycle_and_the_orders_do_not_change() -> None:
    plain = schedule(5, 12, ("fixed", "random"), "alternate", seed=9)
    levels = context_levels(["env"], 4, seed=9)
    plan = with_contexts(plain, 5, levels)
    assert plan.levels == levels
    assert [(r.index, r.order, r.tests) for r in plan.runs] == [
        (r.index, r.order, r.tests) for r in plain.runs
    ]
    for test in range(5):
        taken = [r.contexts[r.tests.index(test)] for r in plan.runs]
        cycles = [sorted(taken[i : i + 4]) for i in range(0, len(taken), 4)]
        assert all(cycle == [0, 1, 2, 3] for cycle in cycles)
    firsts = {tuple(r.contexts[r.tests.index(t)] for r in plan.runs[:4]) for t in range(5)}
    assert len(firsts) > 1  # each test its own permutations
    assert plan == with_contexts(plain, 5, levels)
