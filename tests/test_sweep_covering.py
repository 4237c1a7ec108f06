"""The covering condition of a sweep's stop: a sample with an empty cell may not stop, and the
next settings go to the empty cells first."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import CONFIGSPACES

from washout.sweep.covering import covering_picks, uncovered_cells
from washout.sweep.explore import unmeasured
from washout.sweep.incremental import LoopOptions, run_loop
from washout.sweep.space import Space, full_grid, space_from_frame


@pytest.fixture(autouse=True)
def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def test_an_empty_cell_is_counted_and_the_greedy_step_fills_it() -> None:
    space = full_grid(["a", "b", "c"], [[0.0, 1], [0.0, 1, 2], ["x", "y", "z"]])
    hole = (space.codes[:, 0] == 1) & (space.codes[:, 1] == 2)  # the cell a=1, b=2: 3 settings
    measured = np.flatnonzero(~hole)
    assert uncovered_cells(space, measured, 2, (0, 1, 2)) == 1
    assert uncovered_cells(space, measured, 2, (0, 2)) == 0  # a:c and nothing else
    assert uncovered_cells(space, measured, 3, (0, 1)) == 0  # fewer factors than the strength
    picks = covering_picks(space, measured, 2, (0, 1, 2), 5, seed=0, batch=1)
    assert len(picks) == 1 and hole[picks[0]]  # one setting fills it, and no more are proposed
    assert uncovered_cells(space, np.concatenate([measured, picks]), 2, (0, 1, 2)) == 0


def test_the_greedy_step_covers_with_few_settings() -> None:
    """Six binary factors have 60 pair cells; greedy picks from the whole grid cover them in
    far fewer than the 64 settings (a strength-2 covering array needs 6: Cohen et al. 1997)."""
    space = full_grid([f"p{i}" for i in range(6)], [[0.0, 1]] * 6)
    picks = covering_picks(space, np.empty(0, dtype=int), 2, tuple(range(6)), 64, 0, 0)
    assert uncovered_cells(space, picks, 2, tuple(range(6))) == 0
    assert len(picks) <= 8


def test_only_cells_a_random_sample_would_expect_to_hit_are_required() -> None:
    """With ``expect`` 2 a cell counts once a uniform sample of the measured size would hold 2
    of its settings on average: at 12 of 36 settings, a cell of 9 (expects 3) but not one of
    3 (expects 1)."""
    space = full_grid(["a", "b", "c"], [[0.0, 1, 2, 3], [0.0, 1, 2], [0.0, 1, 2]])
    measured = np.flatnonzero(space.codes[:, 0] != 3)[::2][:12]  # none with a=3
    assert uncovered_cells(space, measured, 1, (0,), expect=2) == 1  # a=3 is required
    assert uncovered_cells(space, measured, 2, (0, 1), expect=2) == 0  # 3-setting cells are not
    assert uncovered_cells(space, measured, 2, (0, 1)) > 0  # but every cell counts with 0


def _ss_o() -> Space:
    """SS-O (MySQL, 8 parameters; tests/data/README.md) with its flush method as one
    parameter, as a user would sweep it (bench/sweep_spaces.py reads it the same way)."""
    frame = pd.read_csv(CONFIGSPACES / "SS-O.csv").drop(columns=["innodbFlushMethod", "Cpu-"])
    flush = ["fsyncFlush", "dsyncFlush", "directFlush"]
    frame["flush_method"] = frame[flush].idxmax(axis=1)
    frame = frame.drop(columns=flush)
    frame["Performance-"] = frame.pop("Performance-")
    return space_from_frame(frame, "Performance-", None, "SS-O.csv")


def _sample_at(result, step) -> np.ndarray:
    """The settings measured when ``step`` was scored (the newest batch comes first)."""
    return result.measured[len(result.measured) - step.measured :]


def test_a_sample_with_an_empty_cell_does_not_stop_and_the_next_batch_fills_it() -> None:
    """SS-O seed 4 (bench/RESULTS.md, "Sweeps", parts G and H): without the covering rule it
    stops at 29 of 972 settings with every fold's R^2 >= 0.92 and R^2 0.25 on the rest; its
    sample has no setting with delayedInnodbLogFlush on, delayedInnodbLogWrite off and dsync
    flushing, a cell of 81 settings a random sample of 29 would hold 2.4 of. That sample may
    not stop under the rule, the greedy step's first proposal lies in an empty cell, and the
    loop with the rule stops only with every such cell measured, where R^2 on the rest holds."""
    space = _ss_o()
    assert space.y is not None
    y = space.y
    plain = LoopOptions(seed=4, cover=0)  # the default before the covering rule
    stopped = run_loop(space, lambda idx: y[idx], plain)
    assert stopped.terminated and len(stopped.measured) == 29
    assert unmeasured(space, stopped, plain) < 0.5
    everything = tuple(range(len(space.parameters)))
    empty = uncovered_cells(space, stopped.measured, 3, everything, expect=2)
    assert empty > 0  # what the rule refuses to stop on
    assert uncovered_cells(space, stopped.measured, 2, everything) == 0  # every 2-way cell
    first = covering_picks(space, stopped.measured, 3, everything, 10, seed=4, batch=2, expect=2)
    after = np.concatenate([stopped.measured, first[:1]])
    assert uncovered_cells(space, after, 3, everything, expect=2) < empty  # it fills a cell
    covering = LoopOptions(seed=4)  # the default: cover 3, cover_expect 2
    assert (covering.cover, covering.cover_expect) == (3, 2)
    held = run_loop(space, lambda idx: y[idx], covering)
    assert held.terminated and len(held.measured) > 29
    for step in held.steps:
        if step.passed:
            assert uncovered_cells(space, _sample_at(held, step), 3, everything, expect=2) == 0
    assert unmeasured(space, held, covering) >= 0.9


def test_the_loop_stops_only_with_every_cell_covered() -> None:
    """An additive metric the model predicts from a handful of settings: R^2 alone stops
    before every 3-way cell of its 6 factors is measured (three of 4 levels have 64); with
    ``cover`` 3 (every cell) no step with an empty cell passes, and the loop stops once none
    is left."""
    space = full_grid([f"p{i}" for i in range(6)], [[0.0, 1, 2, 3]] * 4 + [[0.0, 1]] * 2)
    rng = np.random.default_rng(5)
    effects = np.array([3.0, 2, 1.5, 1, 0.5, 2])
    y = 10 + space.codes @ effects + rng.normal(0, 0.05, len(space))
    everything = tuple(range(6))
    plain = run_loop(space, lambda idx: y[idx], LoopOptions(seed=1, cover=0))
    assert plain.terminated
    assert uncovered_cells(space, plain.measured, 3, everything) > 0
    every = LoopOptions(seed=1, cover=3, cover_expect=0)
    covering = run_loop(space, lambda idx: y[idx], every)
    assert covering.terminated and len(covering.measured) < len(space)
    for step in covering.steps:
        empty = uncovered_cells(space, _sample_at(covering, step), 3, everything)
        assert not (step.passed and empty)
    assert uncovered_cells(space, covering.measured, 3, everything) == 0
