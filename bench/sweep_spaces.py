"""The fully measured spaces the sweep benchmarks run on (tests/data/configspaces; sources in
tests/data/README.md), preprocessed as their publications describe them, and two generated
ones.

Every space has a role:
- ``tuned``: the four spaces the default method was developed on (silo, herd, rs, Lrzip)
  and two more Storm spaces the uncertainty intervals and the stability rule were tuned on
  (SS-I, wc);
- ``held-out``: spaces no choice of the method was made on (hsmgp, x264, sol, SS-O): run
  only to check that what was tuned carries over;
- ``generated``: see :data:`SYNTHETIC`.

Options that are alternatives of one choice are stored as one 0/1 column each (hsmgp's
smoother, x264's lookahead and reference frames, SS-O's flush method); they are read back
as one categorical parameter, as a user would sweep them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from washout.sweep.space import Space, full_grid, space_from_frame

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "configspaces"


@dataclass(frozen=True)
class Fixture:
    """A measured space: its file, metric, the paper's ANOVA for it, its role."""

    file: str
    metric: str
    paper_model: str = "anova"
    role: str = "tuned"
    per: str | None = None
    """A parameter the metric is divided by (the paper's per-thread throughput for silo)."""
    choices: dict[str, list[str]] = field(default_factory=dict)
    """One parameter from several 0/1 columns, exactly one of which is 1 in every row."""
    drop: tuple[str, ...] = ()
    """Columns that are neither parameters nor the metric (constant parents, other metrics)."""


SPACES: dict[str, Fixture] = {
    "silo_ycsb": Fixture("silo_ycsb.csv", "tput", per="threads"),
    "herd_ycsb": Fixture("herd_ycsb.csv", "tput", paper_model="anova-main"),
    "rs-6d-c3_obj1": Fixture("rs-6d-c3_obj1.csv", "Throughput-"),
    "Lrzip": Fixture("Lrzip.csv", "<$performance"),
    "SS-I": Fixture("SS-I.csv", "Throughput+", drop=("Latency-",)),
    "wc-6d-c1-obj1": Fixture("wc-6d-c1-obj1.csv", "Throughput-"),
    "hsmgp": Fixture(
        "hsmgp_AllNumeric.csv",
        "performance",
        role="held-out",
        choices={
            "smoother": [
                "Smoother_GS",
                "Smoother_JAC",
                "Smoother_GSRB",
                "Smoother_GSRBAC",
                "Smoother_GSACBE",
                "Smoother_GSAC",
            ],
            "coarse_solver": ["CGS_IP_CG", "CGS_IP_AMG", "CGS_RED_AMG"],
        },
        drop=("CGS", "Smoother"),
    ),
    "x264": Fixture(
        "x264_AllNumeric.csv",
        "PERF",
        role="held-out",
        choices={
            "rc_lookahead": ["rc_lookahead_20", "rc_lookahead_40", "rc_lookahead_60"],
            "ref": ["ref_1", "ref_5", "ref_9"],
        },
    ),
    "sol-6d-c2-obj1": Fixture("sol-6d-c2-obj1.csv", "Throughput-", role="held-out"),
    "SS-O": Fixture(
        "SS-O.csv",
        "Performance-",
        role="held-out",
        choices={"flush_method": ["fsyncFlush", "dsyncFlush", "directFlush"]},
        drop=("innodbFlushMethod", "Cpu-"),
    ),
}
SYNTHETIC = ("synthetic-3way", "synthetic-unfittable")
"""Spaces the project never tuned on, generated with a fixed seed: one with a real 3-way
interaction (threads x cache x workload, the kind of structure gzip and sort sweeps have),
and one no model can fit (independent noise: a correct method never terminates)."""


def synthetic(name: str) -> Space:
    """A generated space (see :data:`SYNTHETIC`)."""
    rng = np.random.default_rng(20261122)
    if name == "synthetic-3way":
        space = full_grid(
            ["threads", "cache_mb", "workload", "batch"],
            [
                [1.0, 2, 4, 8, 16, 32],
                [1.0, 4, 16, 64, 256],
                ["read", "mixed", "write"],
                [1.0, 8, 64],
            ],
        )
        t, c, w, b = (space.codes[:, f] for f in range(4))
        scale = np.minimum(2.0**t, 2.0 ** np.where(w == 2, 2, 4))  # writes saturate early
        hit = 1 - np.exp(-(2.0 ** (2 * c)) / np.where(w == 0, 64.0, 16.0))
        y = (
            1000
            * scale
            * (0.3 + 0.7 * hit)
            * (1 + 0.1 * b)
            * np.exp(rng.normal(0, 0.03, len(space)))
        )
    else:
        space = full_grid(
            ["a", "b", "c"],
            [list(map(float, range(8))), list(map(float, range(6))), list(map(float, range(5)))],
        )
        y = np.exp(rng.normal(0, 0.5, len(space)))
    space.y, space.metric, space.source = y, "y", name
    return space


def role(name: str) -> str:
    return "generated" if name in SYNTHETIC else SPACES[name].role


def load(name: str) -> tuple[Space, str]:
    """A space, preprocessed (see the module docstring), and the paper's ANOVA for it."""
    if name in SYNTHETIC:
        return synthetic(name), "anova"
    fixture = SPACES[name]
    frame = pd.read_csv(FIXTURES / fixture.file).drop(columns=list(fixture.drop))
    for parameter, columns in fixture.choices.items():
        chosen = frame[columns].to_numpy()
        if not (chosen.sum(axis=1) == 1).all():
            raise ValueError(f"{fixture.file}: {columns}: not exactly one set per row")
        prefix = os.path.commonprefix(columns).rpartition("_")[0]
        names = [c.removeprefix(f"{prefix}_") if prefix else c for c in columns]
        frame = frame.drop(columns=columns).assign(
            **{parameter: [names[i] for i in chosen.argmax(axis=1)]}
        )
    metric = frame.pop(fixture.metric)
    frame[fixture.metric] = metric  # the metric last, as the paper's tables have it
    space = space_from_frame(frame, fixture.metric, None, fixture.file)
    if fixture.per is not None:
        f = space.parameters.index(fixture.per)
        assert space.y is not None
        space.y = space.y / space.numeric_levels(f)[space.codes[:, f]]
    return space, fixture.paper_model
