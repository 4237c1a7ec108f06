#!/usr/bin/env python3
"""Generate a real git repository to bisect: a small C program whose history hides a slowdown.

    python3 examples/bisect/make_repo.py DIR [--commits 64] [--culprit I] [--broken J]
        [--slowdown 0.03] [--run-noise 0.05] [--trial-noise 0.01] [--carry 0.01]
        [--shape step|overshoot] [--seed S]

writes ``DIR/repo`` (the git repository, tags ``good`` and ``bad``), ``DIR/machine.sh``
(the reset) and ``DIR/machines`` (the machine states it hands out, seeded). Commit i
(1..COMMITS) edits ``prog.c``; commit CULPRIT makes
the program's work ``1 + SLOWDOWN`` times larger (``--shape overshoot``: ``1 + 2 SLOWDOWN``
from CULPRIT, back to ``1 + SLOWDOWN`` from CULPRIT + COMMITS/4: not monotone); commit
BROKEN does not compile (its next commit fixes it). Build each commit with
``cc -O2 -o prog prog.c -lm``.

The noise is real to the program, made by files under DIR:

- **run level** (``--run-noise``, a log-normal sd): ``machine.sh``, the spec's reset,
  writes the machine's state for the next run to DIR/machine: the next line of
  DIR/machines (a speed factor and a seed for the run, drawn here from ``--seed``);
  every trial of the run reads it (a slower machine slows every build of the run alike);
- **trial level** (``--trial-noise``): each trial draws its own factor from the run's seed
  and a counter it increments in DIR/trials;
- **order** (``--carry``): a trial that follows a trial of a slower build in the same run
  (DIR/last, which the reset removes) is that much slower (the slower build's larger
  working set evicted what the next one needed).

The program does that much work and prints it (``units``, the metric): the count, not the
shared machine's clock, so the noise is exactly what was asked for.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
from pathlib import Path

PROGRAM = r"""/* revision {revision} */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORK {work}
#define BASE_WORK 1000
#define TRIAL_NOISE {trial_noise}
#define CARRY {carry}
{broken}
static uint64_t next(uint64_t *s) {{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}}

static double gaussian(uint64_t *s) {{
    double u = ((next(s) >> 11) + 0.5) / 9007199254740992.0;
    double v = ((next(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}}

static FILE *at(const char *dir, const char *name, const char *mode) {{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return fopen(path, mode);
}}

int main(int argc, char **argv) {{
    const char *dir = argc > 1 ? argv[1] : ".";
    double factor = 1.0, previous = 0.0;
    unsigned long long seed = 1, count = 0;
    FILE *f = at(dir, "machine", "r");
    if (f) {{ if (fscanf(f, "%lf %llu", &factor, &seed) != 2) factor = 1.0; fclose(f); }}
    f = at(dir, "trials", "r");
    if (f) {{ if (fscanf(f, "%llu", &count) != 1) count = 0; fclose(f); }}
    f = at(dir, "trials", "w");
    if (f) {{ fprintf(f, "%llu\n", count + 1); fclose(f); }}
    f = at(dir, "last", "r");
    if (f) {{ if (fscanf(f, "%lf", &previous) != 1) previous = 0.0; fclose(f); }}
    f = at(dir, "last", "w");
    if (f) {{ fprintf(f, "%d\n", WORK); fclose(f); }}
    uint64_t state = seed ^ (count * 0xD1B54A32D192ED03ull);
    double units = WORK * factor * exp(TRIAL_NOISE * gaussian(&state));
    if (previous > WORK) units *= 1.0 + CARRY;
    volatile double sink = 0.0;
    for (long i = 0; i < (long)(units * 20.0); i++) sink += (double)i * 1e-9;
    printf("units %.4f\n", units);
    return 0;
}}
"""

MACHINE = r"""#!/bin/sh
# The reset of the generated bisect example: the machine's state for the next run, the next
# line of the seeded list make_repo.py wrote (a speed factor and a seed for the run's trials).
here=$(dirname "$0")
count=$(( $(cat "$here/resets" 2>/dev/null || echo 0) + 1 ))
echo "$count" > "$here/resets"
line=$(( (count - 1) % $(wc -l < "$here/machines") + 1 ))
sed -n "${line}p" "$here/machines" > "$here/machine"
rm -f "$here/last"
"""
STATES = 20000
"""Machine states written (a bisect takes a few hundred runs; the list wraps around)."""


def work_at(i: int, args: argparse.Namespace) -> int:
    """The program's work at commit i."""
    base = 1000
    if i < args.culprit:
        return base
    if args.shape == "overshoot" and i < args.culprit + max(args.commits // 4, 2):
        return round(base * (1 + 2 * args.slowdown))
    return round(base * (1 + args.slowdown))


def git(repo: Path, *argv: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=bisect",
            "-c",
            "user.email=bisect@example.org",
            *argv,
        ],
        check=True,
        capture_output=True,
        env=env,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--culprit", type=int)
    parser.add_argument("--broken", type=int)
    parser.add_argument("--slowdown", type=float, default=0.03)
    parser.add_argument("--run-noise", type=float, default=0.05)
    parser.add_argument("--trial-noise", type=float, default=0.01)
    parser.add_argument("--carry", type=float, default=0.01)
    parser.add_argument("--shape", choices=("step", "overshoot"), default="step")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    if args.culprit is None:
        args.culprit = rng.randint(2, args.commits - 1)
    if args.broken is None:  # neither the culprit nor its parent: either would hide it
        args.broken = rng.choice(
            [i for i in range(1, args.commits) if i not in (args.culprit - 1, args.culprit)]
        )
    if not (1 <= args.culprit <= args.commits and 0 <= args.broken < args.commits):
        parser.error("--culprit must be in 1..COMMITS, --broken in 0..COMMITS-1 (0: none)")
    repo = args.directory / "repo"
    repo.mkdir(parents=True)
    noise = random.Random(f"machines:{args.seed}")
    (args.directory / "machines").write_text(
        "".join(
            f"{math.exp(noise.gauss(0.0, args.run_noise)):.9f} {noise.getrandbits(63)}\n"
            for _ in range(STATES)
        )
    )
    (args.directory / "machine.sh").write_text(MACHINE)
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text("prog\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    for i in range(args.commits + 1):
        broken = "int broken = ;\n" if args.broken and i == args.broken else ""
        (repo / "prog.c").write_text(
            PROGRAM.format(
                revision=i,
                work=work_at(i, args),
                trial_noise=args.trial_noise,
                carry=args.carry,
                broken=broken,
            )
        )
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"revision {i}", env=env)
        if i == 0:
            git(repo, "tag", "good")
    git(repo, "tag", "bad")
    print(
        f"{repo}: {args.commits + 1} commits; culprit revision {args.culprit}, "
        f"broken revision {args.broken or 'none'}, shape {args.shape}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
