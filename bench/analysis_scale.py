"""Analysis at the ordering-trap paper's scale: `washout analyze` on 2.3M trials rows.

Goal: a dataset shaped like the paper's long-term dataset (1,880 configurations,
about 610 trials per order each, 2.3M rows, about 100 MB of CSV) analyzed by
`washout analyze FILE --format json > /dev/null` in at most 3 s wall and 1.5 GB peak RSS,
at least 3x faster than a straightforward per-configuration loop over pandas groups and
scipy.stats (the way OrderSage analyzes: per group kruskal, shapiro, medians, CIs), and at
most 1.5x the time pandas alone takes to read the CSV; the same trials in a washout store
analysed in at most 1.5x the CSV's time; all measured here, in the same run.

"pandas alone" is timed two ways: a process that starts Python, imports pandas and reads
the CSV (what a user pays to read it with pandas, and what `washout analyze` is: both pay
the interpreter and the pandas import), and the `read_csv` call inside a process. The
1.5x goal is judged process against process; the ratio to the call alone is printed too.

The dataset is generated (seeded) into a temporary directory and deleted afterwards:
20 hardware types x 47 benchmarks = 940 tests, 2 metrics each (perf, wall) = 1,880
configurations; per hardware type 1,220 runs (610 fixed, 610 random, alternating), each run
on one of 4 nodes (the worker column), every benchmark once per run. Values are
log-normal around a per-configuration scale spanning 7 decades, with a heavy right tail
(2% of trials slowed by an exponential amount), a per-position drift, an order effect in 70%
of configurations, rounding to 3-4 significant digits (so ties are common; some
configurations are small integer counts), and 0.3% failed / 0.05% timed-out trials with an
empty value. The store is written straight into its schema (executemany), then its columnar
copy by ``StoreWriter.write_columns``, as a run's writer does when its session ends.

Run: .venv/bin/python bench/analysis_scale.py [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, WASHOUT, fmt_runs, header, load, median, run_child, verdict  # noqa: E402

HARDWARE = (
    "c220g1",
    "c220g2",
    "c220g5",
    "c240g5",
    "c6220",
    "c6320",
    "c6420",
    "c6525-25g",
    "c6525-100g",
    "c8220",
    "d430",
    "d710",
    "d820",
    "m400",
    "m510",
    "r320",
    "r6525",
    "xl170",
    "c4130",
    "dss7500",
)
NODES_PER_TYPE = 4
RUNS_PER_ORDER = 610
METRICS = ("perf", "wall")
SEED = 20230710  # USENIX ATC 2023


def benchmarks() -> list[str]:
    """47 benchmark names in the spirit of the paper's suite (memory, disk, network, CPU)."""
    names = [f"stream-{op}-s{s}" for op in ("copy", "scale", "add", "triad") for s in (0, 1)]
    names += [
        f"fio-{rw}-q{q}-{bs}"
        for rw in ("rd", "wr", "rrd", "rwr")
        for q in (1, 32)
        for bs in ("4k", "1m")
    ]
    names += [f"iperf-{p}-{n}" for p in ("tcp", "udp") for n in (1, 8)]
    names += [f"npb-{k}" for k in ("is", "ep", "cg", "mg", "ft", "lu", "bt", "sp")]
    names += [f"sysbench-{k}" for k in ("cpu", "mem", "threads", "mutex")]
    names += [f"redis-{k}" for k in ("get", "set", "lpush", "incr")]
    names += [f"memcached-{k}" for k in ("get", "set", "hits")]
    return names


def generate(seed: int = SEED):  # -> (pd.DataFrame, tests)
    """The long-format frame of the synthetic long-term study (see the module doc)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    bench = benchmarks()
    n_h, n_b, n_m = len(HARDWARE), len(bench), len(METRICS)
    n_runs = 2 * RUNS_PER_ORDER
    # Per configuration (h, b, m): scale, spread, order effect, drift, integer-valued or not.
    shape = (n_h, n_b, n_m)
    scale = 10.0 ** rng.uniform(-2, 5, shape)
    sigma = 10.0 ** rng.uniform(np.log10(0.003), np.log10(0.12), shape)
    effect = np.where(rng.random(shape) < 0.7, rng.normal(0, 0.06, shape), 0.0)
    drift = rng.normal(0, 0.01, shape)
    counts = rng.random(shape) < 0.05  # small integer counts: heavy ties
    scale[counts] = rng.integers(3, 40, counts.sum())

    # Trials: hardware type x run x position; fixed runs in benchmark order, random permuted.
    runs = np.tile(np.arange(n_runs), n_h)
    hw = np.repeat(np.arange(n_h), n_runs)
    perms = np.tile(np.arange(n_b), (n_h * n_runs, 1))
    is_random = runs % 2 == 1
    perms[is_random] = rng.permuted(perms[is_random], axis=1)
    node = rng.integers(0, NODES_PER_TYPE, n_h * n_runs)
    t_hw = np.repeat(hw, n_b)
    t_run = np.repeat(runs, n_b)
    t_random = np.repeat(is_random, n_b)
    t_pos = np.tile(np.arange(n_b), n_h * n_runs)
    t_bench = perms.ravel()
    t_node = np.repeat(node, n_b)
    n_trials = t_hw.size
    u = rng.random(n_trials)
    t_status = np.where(u < 0.003, 1, np.where(u < 0.0035, 2, 0))  # ok, failed, timeout

    # Rows: trial x metric.
    r_hw, r_bench = np.repeat(t_hw, n_m), np.repeat(t_bench, n_m)
    r_metric = np.tile(np.arange(n_m), n_trials)
    r_random = np.repeat(t_random, n_m)
    r_pos = np.repeat(t_pos, n_m)
    cfg = (r_hw, r_bench, r_metric)
    noise = np.exp(sigma[cfg] * rng.standard_normal(r_hw.size))
    tail = np.where(rng.random(r_hw.size) < 0.02, 1.0 + rng.exponential(4 * sigma[cfg]), 1.0)
    value = (
        scale[cfg]
        * noise
        * tail
        * (1 + drift[cfg] * r_pos / n_b)
        * np.where(r_random, 1 + effect[cfg], 1.0)
    )
    is_count = counts[cfg]
    digits = np.where(rng.random(shape) < 0.5, 3, 4)[cfg]
    mag = np.floor(np.log10(value))
    step = 10.0 ** (mag - digits + 1)
    value = np.where(is_count, np.round(value), np.round(value / step) * step)
    # Round-trip the decimal rounding so the CSV holds short numbers (1234.0, 0.0123).
    value = np.array([float(f"{v:.6g}") for v in value.tolist()])
    r_status = np.repeat(t_status, n_m)
    value[r_status != 0] = np.nan

    tests = [f"{h}/{b}" for h in HARDWARE for b in bench]
    nodes = [f"{h}-n{k}" for h in HARDWARE for k in range(NODES_PER_TYPE)]
    frame = pd.DataFrame(
        {
            "run": np.repeat(t_run, n_m),
            "order": pd.Categorical.from_codes(r_random.astype(np.int8), ["fixed", "random"]),
            "position": r_pos,
            "test": pd.Categorical.from_codes(r_hw * n_b + r_bench, tests),
            "metric": pd.Categorical.from_codes(r_metric.astype(np.int8), list(METRICS)),
            "value": value,
            "status": pd.Categorical.from_codes(
                r_status.astype(np.int8), ["ok", "failed", "timeout"]
            ),
            "worker": pd.Categorical.from_codes(
                np.repeat(t_hw * NODES_PER_TYPE + t_node, n_m), nodes
            ),
        }
    )
    return frame, tests


def write_csv(frame, path: Path) -> None:
    frame.to_csv(path, index=False)


def write_store(frame, tests: list[str], path: Path) -> None:
    """A washout database of the same trials, written straight into the store's schema,
    then its columnar copy written by ``StoreWriter.write_columns``, as the engine's writer
    does when its session ends (``StoreWriter.close``)."""
    from datetime import UTC, datetime, timedelta

    import numpy as np

    from washout.data.store import ExperimentRecord
    from washout.data.store.writer import StoreWriter

    spec_text = "\n".join(
        [
            "# synthetic: bench/analysis_scale.py",
            "[experiment]",
            'name = "long-term-synthetic"',
            f"runs = {RUNS_PER_ORDER}",
            f"seed = {SEED}",
            "",
        ]
        + [
            f'[[test]]\nname = "{t}"\ncommand = "run {t}"\n'
            + "".join(f'[test.metrics.{m}]\nstdout = "last-number"\n' for m in METRICS)
            for t in tests
        ]
    )
    record = ExperimentRecord(
        name="long-term-synthetic",
        spec_text=spec_text,
        spec_source="bench/analysis_scale.py",
        seed=SEED,
        design="alternate",
        runs_per_kind=RUNS_PER_ORDER,
        planned_trials=len(frame) // len(METRICS),
        created=datetime.now(UTC).isoformat(),
        tool_version="bench",
    )
    StoreWriter.create(path, record, [(t, f"run {t}", list(METRICS)) for t in tests]).close()
    conn = sqlite3.connect(path, isolation_level=None)
    trials = frame.iloc[:: len(METRICS)]
    workers = list(frame["worker"].cat.categories)
    epoch = datetime(2021, 1, 1, tzinfo=UTC)
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO worker (id, name, host) VALUES (?, ?, ?)",
        [(i + 1, w, w) for i, w in enumerate(workers)],
    )
    # One run row per (worker, run index); permutation as the run's test names.
    w_code = trials["worker"].cat.codes.to_numpy() + 1
    run_idx = trials["run"].to_numpy()
    key = w_code.astype(np.int64) * 1_000_000 + run_idx
    run_keys, first, run_of_trial = np.unique(key, return_index=True, return_inverse=True)
    test_names = trials["test"].astype(str).to_numpy()
    order = trials["order"].astype(str).to_numpy()
    per_run = len(benchmarks())
    conn.executemany(
        "INSERT INTO run (id, worker_id, idx, order_kind, permutation, reset_started,"
        " reset_ended, reset_info, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'done')",
        [
            (
                i + 1,
                int(k // 1_000_000),
                int(k % 1_000_000),
                order[f],
                json.dumps(test_names[f : f + per_run].tolist()),
                (epoch + timedelta(hours=int(f // per_run))).isoformat(),
                (epoch + timedelta(hours=int(f // per_run), seconds=5)).isoformat(),
                "bench",
            )
            for i, (k, f) in enumerate(zip(run_keys.tolist(), first.tolist()))
        ],
    )
    status = trials["status"].astype(str).to_numpy()
    pos = trials["position"].to_numpy()
    started = [(epoch + timedelta(seconds=10 * i)).isoformat() for i in range(len(trials))]
    conn.executemany(
        "INSERT INTO trial (id, run_id, position, test, attempt, status, reason, exit_code,"
        " started, ended, duration, stdout_tail, stderr_tail, cpus)"
        " VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, '', '', NULL)",
        zip(
            range(1, len(trials) + 1),
            (run_of_trial + 1).tolist(),
            pos.tolist(),
            test_names.tolist(),
            status.tolist(),
            ("" if s == "ok" else "exit code 1" for s in status),
            (0 if s == "ok" else 1 for s in status),
            started,
            started,
            (5.0 for _ in started),
        ),
    )
    values = frame["value"].to_numpy()
    metric_names = frame["metric"].astype(str).to_numpy()
    trial_ids = np.arange(len(frame)) // len(METRICS) + 1
    ok = ~np.isnan(values)
    conn.executemany(
        "INSERT INTO metric (trial_id, name, value) VALUES (?, ?, ?)",
        zip(trial_ids[ok].tolist(), metric_names[ok].tolist(), values[ok].tolist()),
    )
    conn.execute("COMMIT")
    conn.close()
    StoreWriter.reopen(path).close()  # the columnar copy, as a session's end writes it


def generate_into(work: Path, with_db: bool) -> None:
    """Write longterm.csv (and longterm.db) into ``work`` unless already there."""
    csv_path, db_path = work / "longterm.csv", work / "longterm.db"
    t0 = time.perf_counter()
    frame, tests = generate()
    n_conf = frame.groupby(["test", "metric"], observed=True).ngroups
    print(
        f"generated {len(frame):,} rows, {n_conf:,} configurations in "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    if not csv_path.exists():
        write_csv(frame, csv_path)
    if with_db and not db_path.exists():
        t0 = time.perf_counter()
        write_store(frame, tests, db_path)
        print(f"wrote the database in {time.perf_counter() - t0:.1f} s", flush=True)


# -- the comparisons, each run in its own process ------------------------------------------
def pandas_read(path: str) -> None:
    """Time pandas.read_csv alone (default engine), inside the process."""
    import pandas as pd

    t0, c0 = time.perf_counter(), time.process_time()
    frame = pd.read_csv(path)
    print(
        json.dumps(
            {
                "read_s": time.perf_counter() - t0,
                "read_cpu": time.process_time() - c0,
                "rows": len(frame),
            }
        )
    )


def baseline_loop(path: str, out: str | None) -> None:
    """The straightforward analysis: per configuration, a pandas group and scipy.stats calls
    (kruskal, shapiro per order, means, medians, CV, exact median CIs), then Bonferroni."""
    import numpy as np
    import pandas as pd
    from scipy import stats

    t0 = time.perf_counter()
    df = pd.read_csv(path)
    t_read = time.perf_counter() - t0
    df = df[df["order"].isin(["fixed", "random"])]
    rows = []
    for (test, metric), g in df.groupby(["test", "metric"], sort=False):
        ok = g[(g["status"] == "ok") & g["value"].notna()]
        f = ok.loc[ok["order"] == "fixed", "value"].to_numpy()
        r = ok.loc[ok["order"] == "random", "value"].to_numpy()
        h, p = stats.kruskal(f, r)
        if np.all(f == f[0]) and np.all(r == f[0]):  # all equal: H is 0/0 (docs/design.md)
            h = p = None
        row = {
            "test": test,
            "metric": metric,
            "n_fixed": len(f),
            "n_random": len(r),
            "kw_h": None if h is None else float(h),
            "kw_p": None if p is None else float(p),
        }
        for side, x in (("fixed", f), ("random", r)):
            n = len(x)
            xs = np.sort(x)
            row[f"mean_{side}"] = float(np.mean(x))
            row[f"median_{side}"] = float(np.median(x))
            row[f"cv_{side}"] = float(np.std(x) / np.mean(x))
            constant = n == 0 or xs[0] == xs[-1]  # W undefined: no p, as docs/design.md says
            row[f"shapiro_p_{side}"] = None if n < 3 or constant else float(stats.shapiro(x).pvalue)
            ks = np.arange(n // 2)
            achieved = 1 - 2 * stats.binom.cdf(ks, n, 0.5)
            j = int(np.nonzero(achieved >= 0.95)[0][-1]) + 1
            row[f"ci_{side}"] = [float(xs[j - 1]), float(xs[n - j])]
        row["delta_pct"] = (row["mean_fixed"] - row["mean_random"]) / row["mean_fixed"] * 100
        row["eta_squared"] = (
            None if h is None else max(0.0, (row["kw_h"] - 1) / (len(f) + len(r) - 2))
        )
        rows.append(row)
    m = len(rows)
    for row in rows:
        row["significant"] = row["kw_p"] is not None and row["kw_p"] < 0.05 / m
    text = json.dumps({"tests": rows})
    if out:
        Path(out).write_text(text)
    print(json.dumps({"read_s": t_read, "total_s": time.perf_counter() - t0, "configurations": m}))


def stages(path: str) -> None:
    """Where washout's time goes: the analyze pipeline in-process, CPU and wall per stage."""
    marks = [("interpreter start-up", time.process_time(), time.perf_counter())]

    def mark(name: str) -> None:
        marks.append((name, time.process_time(), time.perf_counter()))

    import pandas  # noqa: F401

    mark("import pandas (+numpy)")
    from washout.analysis.result import Analysis, Options, Source
    from washout.data.sources import load_trials
    from washout.report.json_format import document
    from washout.stats.order import COLUMNS, analyze_order

    mark("import washout")
    # what `washout analyze` reads for the order analysis; it checks the rows in a forked
    # child while it analyses (here one after the other, to time each)
    frame, info = load_trials(path, COLUMNS, defer_checks=True)
    mark("load_trials (read, label columns, values)")
    assert info.check is not None
    info.check()
    mark("row checks (beside the analysis in `washout analyze`)")
    analysis = analyze_order(frame)
    mark("analyze_order (1,880 comparisons)")
    document(Analysis(Source("long-csv", path), Options(), order=analysis).to_dict())
    mark("JSON")
    if "scipy.stats" in sys.modules:
        print("note: scipy.stats was imported on the analysis path", file=sys.stderr)
    rows = [("interpreter start-up", marks[0][1], 0.0)]
    rows += [(name, c1 - c0, w1 - w0) for (_, c0, w0), (name, c1, w1) in zip(marks, marks[1:])]
    print(json.dumps(rows))


def check_agreement(washout_json: Path, baseline_json: Path) -> str:
    """Do washout and the loop agree on every configuration (H, p, medians, CIs, Shapiro)?"""
    ours = {
        (t["test"], t["metric"]): t for t in json.loads(washout_json.read_text())["order"]["tests"]
    }
    theirs = {(t["test"], t["metric"]): t for t in json.loads(baseline_json.read_text())["tests"]}
    if ours.keys() != theirs.keys():
        return f"DISAGREE: {len(ours)} vs {len(theirs)} configurations"
    worst = 0.0
    for key, a in ours.items():
        b = theirs[key]
        for name in (
            "kw_h",
            "kw_p",
            "median_fixed",
            "median_random",
            "shapiro_p_fixed",
            "shapiro_p_random",
            "mean_fixed",
        ):
            x, y = a[name], b[name]
            if x is None or y is None or (isinstance(y, float) and math.isnan(y)):
                if not (x is None and (y is None or math.isnan(y))):
                    return f"DISAGREE at {key} {name}: {x} vs {y}"
                continue
            worst = max(worst, abs(x - y) / max(abs(y), 1e-300))
        for name in ("ci_fixed", "ci_random"):
            if a[name] != b[name]:
                return f"DISAGREE at {key} {name}: {a[name]} vs {b[name]}"
        if (a["n_fixed"], a["n_random"]) != (b["n_fixed"], b["n_random"]):
            return f"DISAGREE at {key}: n"
    return f"agree on all {len(ours)} configurations (max relative difference {worst:.1e})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side")
    parser.add_argument("--keep", type=Path, help="generate into (or reuse) this directory")
    parser.add_argument("--no-db", action="store_true", help="skip the database variant")
    parser.add_argument("--_pandas-read", dest="pandas_read", help=argparse.SUPPRESS)
    parser.add_argument("--_baseline", dest="baseline", help=argparse.SUPPRESS)
    parser.add_argument("--_out", dest="out", help=argparse.SUPPRESS)
    parser.add_argument("--_generate", dest="generate", help=argparse.SUPPRESS)
    parser.add_argument("--_stages", dest="stages", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pandas_read:
        return pandas_read(args.pandas_read)
    if args.baseline:
        return baseline_loop(args.baseline, args.out)
    if args.generate:
        return generate_into(Path(args.generate), not args.no_db)
    if args.stages:
        return stages(args.stages)

    header("Analysis at paper scale (bench/analysis_scale.py)")
    tmp = None
    if args.keep:
        work = args.keep
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="washout-bench-")
        work = Path(tmp.name)
    csv_path, db_path = work / "longterm.csv", work / "longterm.db"
    try:
        if not csv_path.exists() or (not args.no_db and not db_path.exists()):
            # In a child: this process stays small, so the children timed below do not
            # inherit a large RSS at fork (ru_maxrss counts the pre-exec image too).
            argv = [PYTHON, __file__, "--_generate", str(work)] + (
                ["--no-db"] if args.no_db else []
            )
            subprocess.run(argv, check=True)
        print(
            f"dataset:      {csv_path} ({csv_path.stat().st_size / 1e6:.0f} MB CSV)"
            + ("" if args.no_db else f", {db_path.stat().st_size / 1e6:.0f} MB database")
        )
        sys.stdout.flush()

        # 95% median CIs, as the scipy loop computes them (analyze's default is 1 - alpha/m)
        same_ci = ["--ci-confidence", "0.95"]
        analyze = [WASHOUT, "analyze", str(csv_path), "--format", "json", *same_ci]
        # One untimed run to warm the page cache and to check agreement with the loop.
        ours_json = work / "washout.json"
        with ours_json.open("w") as handle:
            run_child(analyze, stdout=handle.fileno())
        base_json = work / "baseline.json"

        db_cmd = [WASHOUT, "analyze", str(db_path), "--format", "json", *same_ci]
        if not args.no_db:
            run_child(db_cmd)  # warm
        w_runs, r_runs, r_inproc, r_incpu, b_runs, b_inproc = [], [], [], [], [], []
        d_runs = []
        for i in range(args.repeat):  # interleaved: every side sees the same load
            w = run_child(analyze)
            w_runs.append(w)
            if not args.no_db:
                d_runs.append(run_child(db_cmd))
            rd = _json_child([PYTHON, __file__, "--_pandas-read", str(csv_path)])
            r_runs.append(rd[0])
            r_inproc.append(rd[1]["read_s"])
            r_incpu.append(rd[1]["read_cpu"])
            if i < max(1, args.repeat - 1):  # the slow loop: fewer repeats
                extra = ["--_out", str(base_json)] if i == 0 else []
                bl = _json_child([PYTHON, __file__, "--_baseline", str(csv_path), *extra])
                b_runs.append(bl[0])
                b_inproc.append(bl[1]["total_s"])
        agreement = check_agreement(ours_json, base_json)

        w_wall = [x.wall for x in w_runs]
        w_rss = max(x.max_rss_mb for x in w_runs)
        r_wall = [x.wall for x in r_runs]
        b_wall = [x.wall for x in b_runs]
        print()
        w_cpu = median([x.cpu for x in w_runs])
        print("| side | wall (median of runs) | CPU user+sys (median) | peak RSS |")
        print("|---|---|---|---|")
        print(
            f"| `washout analyze longterm.csv --format json` | {fmt_runs(w_wall)} | "
            f"{w_cpu:.2f} s | {w_rss:.0f} MB |"
        )
        print(
            f"| per-configuration loop (pandas groupby + scipy.stats), process | "
            f"{fmt_runs(b_wall)} | {median([x.cpu for x in b_runs]):.2f} s | "
            f"{max(x.max_rss_mb for x in b_runs):.0f} MB |"
        )
        print(
            f"| `pandas.read_csv` alone, process (python + import + read) | {fmt_runs(r_wall)} | "
            f"{median([x.cpu for x in r_runs]):.2f} s | "
            f"{max(x.max_rss_mb for x in r_runs):.0f} MB |"
        )
        print(
            f"| `pandas.read_csv` alone, the read call only | {fmt_runs(r_inproc)} | "
            f"{median(r_incpu):.2f} s | |"
        )
        print()
        speedup = median(b_wall) / median(w_wall)
        vs_read = median(w_wall) / median(r_inproc)
        vs_read_proc = median(w_wall) / median(r_wall)
        print(f"agreement with the loop: {agreement}")
        print(
            f"goal wall <= 3 s:                 {median(w_wall):.2f} s  "
            f"{verdict(median(w_wall) <= 3.0)}"
        )
        print(f"goal peak RSS <= 1.5 GB:          {w_rss:.0f} MB  {verdict(w_rss <= 1536)}")
        print(f"goal >= 3x faster than the loop:  {speedup:.1f}x  {verdict(speedup >= 3)}")
        print(
            f"goal <= 1.5x pandas read alone:   {vs_read_proc:.2f}x the read process "
            f"({vs_read:.2f}x the read call)  {verdict(vs_read_proc <= 1.5)}"
        )
        print(
            f"  in CPU time (less sensitive to other load): washout {w_cpu:.2f} s = "
            f"{median([x.cpu for x in b_runs]) / w_cpu:.1f}x less than the loop, "
            f"{w_cpu / median(r_incpu):.2f}x the read call, "
            f"{w_cpu / median([x.cpu for x in r_runs]):.2f}x the read process"
        )

        _, stage_rows = _json_child([PYTHON, __file__, "--_stages", str(csv_path)])
        print()
        print("where washout's time goes (in-process, one run; CPU is the stable figure):")
        print("| stage | CPU | wall |")
        print("|---|---|---|")
        for name, cpu, wall in stage_rows:
            print(
                f"| {name} | {cpu:.2f} s | {wall:.2f} s |"
                if wall
                else f"| {name} | {cpu:.2f} s | |"
            )
        print()
        if not args.no_db:
            d_wall = [x.wall for x in d_runs]
            d_rss = max(x.max_rss_mb for x in d_runs)
            vs_csv = median(d_wall) / median(w_wall)
            print(
                f"from the database (`washout analyze longterm.db --format json`): "
                f"{fmt_runs(d_wall)}, CPU {median([x.cpu for x in d_runs]):.2f} s, "
                f"peak RSS {d_rss:.0f} MB  "
                f"(wall {verdict(median(d_wall) <= 3.0)}, RSS {verdict(d_rss <= 1536)})"
            )
            print(
                f"goal store <= 1.5x its CSV:       {vs_csv:.2f}x "
                f"(CPU {median([x.cpu for x in d_runs]) / w_cpu:.2f}x)  {verdict(vs_csv <= 1.5)}"
            )
        print(f"load average: {load()} (at end)")
    finally:
        if tmp is not None:
            tmp.cleanup()


def _json_child(argv: list[str]):  # -> (ChildRun, dict)
    """Run a helper mode of this script; its last stdout line is JSON."""

    out = tempfile.TemporaryFile()
    child = run_child(argv, stdout=out.fileno())
    out.seek(0)
    lines = out.read().decode().strip().splitlines()
    return child, json.loads(lines[-1])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
