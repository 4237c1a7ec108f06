"""Time one incremental-sampling iteration on a ~13,000-setting space.

One iteration = 10 splits 80/20, each fitting the paper's ANOVA (every parameter categorical,
main effects + all 2-way interactions, backward elimination at p > 0.05, Type-III tests) and
scoring R^2 on the validation part. Goal: <= 2 s on a 2-core machine.

The space has Lrzip's shape with 7 binary options: 7 x 2 levels, then 9, 4 and 3 levels,
13,824 settings, 178 design columns; its metric has strong main effects, a few real
interactions and noise, so elimination removes most of the 78 candidate terms (the costly
case). Also timed: the samplers choosing the next 5%.

    .venv/bin/python bench/sweep_iteration.py [--rates 0.05,0.1,0.25,0.5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from threadpoolctl import threadpool_limits

from washout.sweep.incremental import split_r2
from washout.sweep.samplers import get_sampler
from washout.sweep.space import full_grid


def space_13k(seed: int = 0):
    levels = [[0.0, 1.0]] * 7 + [list(map(float, range(1, 10))), [1.0, 2, 3, 4], [2.0, 6, 18]]
    space = full_grid([f"opt{i}" for i in range(7)] + ["level", "cpus", "ram"], levels)
    rng = np.random.default_rng(seed)
    c = space.codes.astype(float)
    y = (
        100
        + 30 * c[:, 0]
        - 20 * c[:, 1]
        + 8 * np.log1p(c[:, 7]) * (1 + c[:, 2])
        + 5 * c[:, 8]
        + 3 * c[:, 9] * c[:, 8]
        + rng.normal(0, 4, len(space))
    )
    space.y = y
    return space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0.05,0.1,0.25,0.5")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    space = space_13k()
    print(
        f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"space: {len(space)} settings, levels {space.n_levels}")
    print("times: wall (CPU of this process); on a busy machine wall >> CPU, idle they agree")
    with threadpool_limits(1):
        split_r2(space, np.arange(200), space.y[:200], "anova", 1)  # warm-up: imports, caches
        for rate in map(float, args.rates.split(",")):
            measured = np.random.default_rng(1).permutation(len(space))[: int(rate * len(space))]
            times, cpu = [], []
            for _ in range(args.repeat):
                start, start_cpu = time.perf_counter(), time.process_time()
                scores = split_r2(space, measured, space.y[measured], "anova", 10)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            print(
                f"rate {rate:.2f} ({len(measured)} settings): 10-split ANOVA iteration "
                f"median {np.median(times):.2f} s ({np.median(cpu):.2f} s CPU), best "
                f"{min(times):.2f} s ({min(cpu):.2f} s CPU); min R^2 {min(scores):.3f}; "
                f"load {os.getloadavg()[0]:.1f}"
            )
        measured = np.random.default_rng(1).permutation(len(space))[: int(0.1 * len(space))]
        k = int(0.05 * len(space))
        for name in ("random", "balanced", "stratified", "dist-aware", "coverage"):
            start, start_cpu = time.perf_counter(), time.process_time()
            get_sampler(name)(space, measured, space.y[measured], k, 0, 2)
            print(
                f"sampler {name}: next {k} settings in {time.perf_counter() - start:.2f} s "
                f"({time.process_time() - start_cpu:.2f} s CPU)"
            )


if __name__ == "__main__":
    main()
