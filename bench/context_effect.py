"""Does a real program's speed on this machine depend on the size of its environment?

bench/context/layout.c (the mechanism is in its header) built with the system compiler six
ways, each run in many contexts:

- ``native``: the array sum, ``gcc -O3 -march=native`` (on an AVX-512 machine gcc 12 sums
  with 64-byte vectors);
- ``unroll``: the same, ``gcc -O3 -march=native -funroll-loops``;
- ``avx2``: the same, ``gcc -O3 -mavx2`` (32-byte vectors);
- ``O3``: the same, ``gcc -O3`` (x86-64's baseline, 16-byte vectors);
- ``O2``: the same, ``gcc -O2`` (scalar);
- ``alias``: the 4K-aliasing loop, ``gcc -O2``.

Three kinds of context, each with ``--levels`` levels drawn alike in every 64-byte alignment
class (:func:`washout.harness.plan.draw_levels`, as an experiment draws them), every
(kind, program, level) trial repeated ``--repeats`` times, all of them in one seeded random
order (so neither the machine's drift nor its load can pass for a context effect):

- ``env, ASLR off``: ``setarch -R``, the environment padded with WASHOUT_CONTEXT_PADDING of
  p bytes (p in 0..4095, as hyperfine pads);
- ``env, ASLR on``: the same paddings, ASLR as the machine has it;
- ``cwd, ASLR off``: ``setarch -R``, the program started by ``/bin/sh`` in a directory whose
  path is p bytes longer (p in 0..1023; the shell exports it as PWD).

Each trial's metric is the program's own: the fastest of 30 rounds, in ns per call. Per kind
and program, :func:`washout.stats.context.context_effect` says whether the metric depends on
the context (Kruskal-Wallis across levels, Bonferroni over the programs), its effect size and
the spread the context alone makes, with its simultaneous 95% interval; the medians by where
the array landed (its address mod 64, which the program prints) show the mechanism; and
:func:`washout.stats.context.against_context` judges the unrolled build against the native
one: over every context, and each measured in one context only (native in its fastest
level, unroll in its slowest: what two builds run from two shells, or from two build
directories of different lengths, could show).

Run: .venv/bin/python bench/context_effect.py [--repeats 24] [--levels 8] [--seed 1]
     (about two minutes; needs gcc and setarch)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import ROOT, header  # noqa: E402

from washout.harness.plan import draw_levels  # noqa: E402
from washout.stats.context import against_context, context_effect  # noqa: E402

SOURCE = ROOT / "bench" / "context" / "layout.c"
PROGRAMS: dict[str, tuple[tuple[str, ...], str]] = {
    "native": (("-O3", "-march=native"), "sum"),
    "unroll": (("-O3", "-march=native", "-funroll-loops"), "sum"),
    "avx2": (("-O3", "-mavx2"), "sum"),
    "O3": (("-O3",), "sum"),
    "O2": (("-O2",), "sum"),
    "alias": (("-O2",), "alias"),
}
PADDING = "WASHOUT_CONTEXT_PADDING"
BASE_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
KINDS = ("env, ASLR off", "env, ASLR on", "cwd, ASLR off")


def build(directory: Path) -> dict[str, Path]:
    """Each program compiled from SOURCE into ``directory``."""
    built = {}
    for name, (flags, _) in PROGRAMS.items():
        out = directory / name
        subprocess.run(["gcc", *flags, "-o", str(out), str(SOURCE)], check=True)
        built[name] = out
    return built


def cwd_of(root: Path, extra: int) -> Path:
    """A directory under ``root`` whose path is ``extra`` bytes longer than root's, made of
    components of at most 200 bytes (a name may not exceed 255)."""
    parts, left = [], extra
    while left > 0:
        take = min(left, 201)
        if left - take == 1:  # "/x" needs 2 bytes: leave at least 2 for the last part
            take -= 1
        parts.append("d" * (take - 1))
        left -= take
    path = root.joinpath(*parts) if parts else root
    path.mkdir(parents=True, exist_ok=True)
    assert len(str(path)) == len(str(root)) + extra
    return path


def trial(kind: str, program: Path, kernel: str, level: int, cwd_root: Path) -> dict[str, float]:
    """One run of ``program`` in context ``level`` of ``kind``: its printed figures."""
    env = dict(BASE_ENV)
    setarch = ["setarch", "-R"] if "ASLR off" in kind else []
    if kind.startswith("env"):
        env[PADDING] = "x" * level
        argv, cwd = [*setarch, str(program), kernel], None
    else:
        cwd = cwd_of(cwd_root, level)
        argv = [*setarch, "/bin/sh", "-c", 'exec "$0" "$1"', str(program), kernel]
    out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    words = out.stdout.split()
    figures = dict(zip(words[::2], words[1::2]))
    return {k: float(figures[k]) for k in ("ns", "array_mod_64", "counter_mod_4096")}


def measure(repeats: int, levels: int, seed: int, root: Path) -> pd.DataFrame:
    """Every (kind, program, level, repeat) trial, in one seeded random order."""
    rng = np.random.default_rng(seed)
    programs = build(root)
    draws = random.Random(seed)
    level_sets = {
        "env, ASLR off": draw_levels(draws, levels, 4096),
        "cwd, ASLR off": draw_levels(draws, levels, 1024),
    }
    level_sets["env, ASLR on"] = level_sets["env, ASLR off"]
    jobs = [
        (kind, name, level, r)
        for kind in KINDS
        for name in PROGRAMS
        for level in level_sets[kind]
        for r in range(repeats)
    ]
    rows = []
    started = time.perf_counter()
    for i in rng.permutation(len(jobs)):
        kind, name, level, r = jobs[i]
        figures = trial(kind, programs[name], PROGRAMS[name][1], level, root / "cwd")
        column = "context_env_bytes" if kind.startswith("env") else "context_cwd_bytes"
        rows.append(
            dict(
                run=r,
                order="random",
                position=0,
                test=name,
                metric="ns",
                value=figures["ns"],
                status="ok",
                worker=kind,
                **{column: level},
                array_mod_64=int(figures["array_mod_64"]),
                counter_mod_4096=int(figures["counter_mod_4096"]),
            )
        )
    print(f"{len(jobs)} trials in {time.perf_counter() - started:.0f} s\n")
    return pd.DataFrame(rows)


def report(frame: pd.DataFrame) -> None:
    """Per kind: the context analysis of every program, and medians by the array's place."""
    for kind in KINDS:
        trials = frame[frame["worker"] == kind].dropna(axis=1, how="all")
        # trials are started one at a time in random order: no runs to take a level out of
        result = context_effect(trials, adjust=False)
        print(f"## {kind}\n")
        print(
            "| program | trials | levels | p (KW) | significant | eta^2_H | spread "
            "| interval (>= 95%) |"
        )
        print("|---|---:|---:|---:|---|---:|---:|---|")
        for row in sorted(result.rows, key=lambda r: list(PROGRAMS).index(r.test)):
            lo, hi = row.spread_ci or (float("nan"), float("nan"))
            print(
                f"| {row.test} | {row.n} | {row.levels} | {row.kw_p:.2g} | "
                f"{'yes' if row.significant else 'no'} | {row.eta_squared:.2f} | "
                f"{row.spread:.1%} | {lo:.1%} .. {hi:.1%} |"
            )
        medians = trials.pivot_table(
            index="test", columns="array_mod_64", values="value", aggfunc="median"
        ).reindex(list(PROGRAMS))
        shares = trials.groupby("array_mod_64").size() / len(trials)
        print("\nmedian ns per call by the array's address mod 64 (share of trials):\n")
        print(
            "| program | "
            + " | ".join(f"{int(a)} ({shares[a]:.0%})" for a in medians.columns)
            + " |"
        )
        print("|---|" + "---:|" * len(medians.columns))
        for name, values in medians.iterrows():
            print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in values) + " |")
        print()


def margins(frame: pd.DataFrame) -> None:
    """The unrolled build against the native one, set against the spread the context makes
    (ASLR off, env): over every context, and each build in one context only."""
    trials = frame[frame["worker"] == "env, ASLR off"].dropna(axis=1, how="all")
    result = context_effect(trials, adjust=False)
    builds = ["unroll", "native"]
    overall = trials.groupby("test")["value"].median()
    levels = trials.groupby(["test", "context_env_bytes"])["value"].median()
    fast, slow = int(levels["native"].idxmin()), int(levels["unroll"].idxmax())
    print("## two builds set against the context (env, ASLR off)\n")
    for what, ratio in (
        ("over every context", overall["unroll"] / overall["native"]),
        (
            f"unroll at padding {slow}, native at padding {fast}",
            levels["unroll"][slow] / levels["native"][fast],
        ),
    ):
        margin = against_context(result, ratio, builds, "ns")
        print(f"- {what}: unroll / native = {ratio:.3f}; {margin.sentence()} [{margin.verdict}]")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=24)
    parser.add_argument("--levels", type=int, default=8, help="a multiple of 4")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    missing = [tool for tool in ("gcc", "setarch") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"needs {', '.join(missing)}")
    header("Context: a real program's speed against its environment's size")
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True, check=True)
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    print(f"compiler:     {gcc.stdout.splitlines()[0]}")
    print(f"ASLR:         randomize_va_space = {aslr}\n")
    with tempfile.TemporaryDirectory(prefix="context-") as tmp:
        frame = measure(args.repeats, args.levels, args.seed, Path(tmp))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    report(frame)
    margins(frame)


if __name__ == "__main__":
    main()
