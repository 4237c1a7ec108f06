"""Which trials are unhealthy and the frame without them (``washout.stats.health``): on a
real run whose trials throttle a laid-out tree's CPU, and on frames built to pass each
limit, what is set aside, why, and what is kept (failed trials untouched, trials without
health measures counted and kept)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pandas as pd
import pytest
from conftest import MEMCACHED, washout
from hypothesis import given, settings
from hypothesis import strategies as st
from machine_tree import CPU
from test_trial_health import health_tree

import washout as washout_api
from washout.data.health import (
    APERF_MPERF,
    INVOLUNTARY_SWITCHES,
    KERNEL_LOG,
    MIGRATIONS,
    OTHER_CPU,
    SWAP_IN,
    SWAP_OUT,
    THROTTLES,
)
from washout.data.store import read_long
from washout.stats.health import TICK_FLOOR, HealthLimits, flag_rows, split_by_health


@pytest.fixture(scope="module")
def throttled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real experiment whose test ``hot`` throttles the laid-out CPU 0 on every other
    trial (and then takes 0.2 s instead of 0.05 s), warmup included: its store. Of the 12
    ok trials (3 runs x 2 orders x 2 tests), 3 of ``hot``'s throttled."""
    tmp_path = tmp_path_factory.mktemp("throttled")
    root = health_tree(tmp_path / "tree", msr=False)
    count = shlex.quote(str(root / CPU / "cpu0" / "thermal_throttle" / "core_throttle_count"))
    state = tmp_path / "state"
    state.write_text("0\n")
    k = shlex.quote(str(state))
    hot = (
        f"read n < {count}; read k < {k}; k=$((k + 1)); echo $k > {k}; "
        f"if [ $((k % 2)) = 0 ]; then echo $((n + 1)) > {count}; sleep 0.2; else sleep 0.05; fi"
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
runs = 3
warmup = 1
health_root = {json.dumps(str(root))}
[[test]]
name = "hot"
command = {json.dumps(hot)}
[[test]]
name = "cool"
command = "sleep 0.05"
"""
    )
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    return db


def test_a_real_run_sets_aside_the_trials_that_throttled(throttled: Path) -> None:
    trials = read_long(throttled, resources=True)  # as export writes it, washout.load gives it
    rows = trials[trials["metric"].astype(str).str.startswith("health.")]
    assert set(rows["test"]) == {"hot", "cool"}
    # 3 runs x 2 orders x 2 tests, and the warmups with their status
    assert len(rows[(rows["metric"] == THROTTLES) & (rows["status"] == "ok")]) == 12
    assert set(rows[rows["run"] == -1]["status"]) == {"warmup"}
    assert rows["value"].notna().all()  # a measure not taken has no row
    split = split_by_health(trials)
    unhealthy = split.judgement.unhealthy
    assert [t.test for t in unhealthy] == ["hot"] * 3
    assert all(t.causes == ("throttled",) for t in unhealthy)
    assert all(t.reasons == ("throttled 1 thermal throttle event(s) (limit 0)",) for t in unhealthy)
    ok = split.healthy[(split.healthy["status"] == "ok") & (split.healthy["metric"] == "wall")]
    assert sorted(ok["test"]) == ["cool"] * 6 + ["hot"] * 3
    assert set(split.healthy[split.healthy["run"] == -1]["status"]) == {"warmup"}  # untouched
    assert len(split.flagged) == 3 * 4  # wall and the resource metrics; no health row
    assert set(split.flagged["metric"]) == {"wall", "user", "system", "max_rss"}
    assert (split.judgement.judged, split.judgement.unmeasured) == (12, 0)
    assert split.judgement.causes() == {"throttled": 3}
    # Each row of a flagged trial, health rows too, and no other (the report rings them).
    marked = trials.loc[flag_rows(trials, unhealthy)]
    assert {(r, p, t) for r, p, t in zip(marked["run"], marked["position"], marked["test"])} == {
        (t.run, t.position, t.test) for t in unhealthy
    }
    assert len(marked) == 3 * len(trials[trials["status"] == "ok"]["metric"].unique())
    (stratum,) = split.judgement.strata
    assert (stratum.test, stratum.metric, stratum.healthy, stratum.unhealthy) == (
        "hot",
        "wall",
        3,
        3,
    )
    assert stratum.median_unhealthy > stratum.median_healthy + 0.1  # slept 0.2 s, not 0.05


def test_analyze_and_report_show_unhealthy_trials_and_set_them_aside(
    throttled: Path, tmp_path: Path
) -> None:
    db = throttled
    # Without --healthy-only: said, and analysed with the others.
    shown = washout("analyze", db).stdout
    assert (
        "Health: 3 of 12 trials with health measures were unhealthy (3 throttled), analysed "
        "with the others: --healthy-only sets them aside." in shown
    )
    assert "hot · wall: median " in shown and "over 3 unhealthy trials" in shown
    whole = json.loads(washout("analyze", db, "--format", "json").stdout)
    assert len(whole["health"]["unhealthy"]) == 3 and whole["options"]["healthy_only"] is False
    runs = {s["test"]: s["runs"] for s in whole["comparison"]["summaries"]}
    assert runs == {"hot": 6, "cool": 6}
    # With it: set aside, counted, and the analyses (the comparison too) without them.
    out = washout("analyze", db, "--healthy-only").stdout
    assert (
        "Health: set aside 3 of 12 trials with health measures as unhealthy (3 throttled); "
        "the analyses use the other 9." in out
    )
    assert "Not analysed: 3 values of 3 unhealthy trials (--healthy-only: 3 throttled)" in out
    healthy = json.loads(washout("analyze", db, "--healthy-only", "--format", "json").stdout)
    assert healthy["options"]["healthy_only"] is True
    unhealthy = healthy["health"]["unhealthy"]
    assert [(t["test"], t["causes"]) for t in unhealthy] == [("hot", ["throttled"])] * 3
    assert {s["test"]: s["runs"] for s in healthy["comparison"]["summaries"]} == {
        "hot": 3,
        "cool": 6,
    }
    kept = {(t["test"], t["n_fixed"] + t["n_random"]) for t in healthy["order"]["tests"]}
    assert kept == {("hot", 3), ("cool", 6)}
    assert [s["test"] for s in healthy["health"]["strata"]] == ["hot"]
    # An export is judged as its store is; the API says the same.
    washout("export", db, "-o", tmp_path / "long.csv")
    again = json.loads(
        washout("analyze", tmp_path / "long.csv", "--healthy-only", "--format", "json").stdout
    )
    assert again["health"] == healthy["health"]
    api = washout_api.analyze(db, healthy_only=True)
    assert api.health is not None
    assert json.loads(json.dumps(api.health.to_dict())) == healthy["health"]
    assert washout_api.Analysis.from_dict(healthy).health == api.health
    # The CSV cannot say it: stderr does.
    csv_out = washout("analyze", db, "--healthy-only", "--format", "csv")
    assert csv_out.stderr.startswith("Health: set aside 3 of 12 trials")
    refused = washout("analyze", db, "--healthy-only", "--compat", "ordersage", check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().endswith("OrderSage's numbers are of every trial")
    # The report shows them beside the trials: which, why, and ringed in a figure.
    page = tmp_path / "r.html"
    washout("report", db, "-o", page)
    html = page.read_text()
    assert '<section id="trial-health">' in html and "<h3>Unhealthy trials</h3>" in html
    assert html.count("throttled 1 thermal throttle event(s) (limit 0)") == 3
    assert "unhealthy ones ringed" in html
    washout("report", db, "-f", "md", "-o", tmp_path / "r.md", "--healthy-only")
    md = (tmp_path / "r.md").read_text()
    assert "Health: set aside 3 of 12 trials" in md and "### Unhealthy trials" in md
    assert "unhealthy ones ringed" not in md  # set aside: not among the trials drawn


def frame(trials: list[dict[str, object]]) -> pd.DataFrame:
    """Long-format rows: each trial's ``wall`` and the health values it lists."""
    rows = []
    for i, trial in enumerate(trials):
        base = {
            "run": trial.get("run", 0),
            "order": "fixed",
            "position": trial.get("position", i),
            "test": trial.get("test", "t"),
            "status": trial.get("status", "ok"),
            "worker": trial.get("worker", "local"),
            "started": "2026-01-01T00:00:00+00:00",
            "ended": f"2026-01-01T00:00:{trial.get('seconds', 1):02}+00:00",
        }
        rows.append({**base, "metric": "wall", "value": float(trial.get("seconds", 1))})  # type: ignore[arg-type]
        for name, value in trial.get("health", {}).items():  # type: ignore[attr-defined]
            rows.append({**base, "metric": name, "value": value})
    return pd.DataFrame(rows)


def reasons(trials: list[dict[str, object]], limits: HealthLimits | None = None) -> list[str]:
    split = split_by_health(frame(trials), limits)
    return [r for t in split.judgement.unhealthy for r in t.reasons]


def test_each_default_limit() -> None:
    assert reasons([{"health": {THROTTLES: 0.0, SWAP_IN: 0.0, SWAP_OUT: 0.0}}]) == []
    assert reasons([{"health": {SWAP_OUT: 2.0}}]) == ["swapped 2 page(s) in or out (limit 0)"]
    assert reasons([{"health": {KERNEL_LOG: 1.0}}]) == [
        "kernel-log 1 new kernel log record(s) (limit 0)"
    ]
    # Other processes' CPU: a share of one CPU over the trial's 10 s.
    assert reasons([{"seconds": 10, "health": {OTHER_CPU: 0.9}}]) == []
    assert reasons([{"seconds": 10, "health": {OTHER_CPU: 1.5}}]) == [
        "busy: other processes used 0.15 CPU over the trial (1.5 s; limit 0.1)"
    ]
    # Unjudged by default: switches, migrations, APERF/MPERF.
    assert reasons([{"health": {INVOLUNTARY_SWITCHES: 1e6, APERF_MPERF: 0.5}}]) == []


def test_a_short_trial_is_not_flagged_for_tick_rounding() -> None:
    """/proc/stat counts 10 ms ticks: 0.01 s of other time in a 0.05 s trial is 20% of a
    CPU, or rounding."""
    started, ended = "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00.050000+00:00"
    rows = frame([{"health": {OTHER_CPU: TICK_FLOOR / 2}}]).assign(started=started, ended=ended)
    assert split_by_health(rows).judgement.unhealthy == ()
    rows.loc[rows["metric"] == OTHER_CPU, "value"] = TICK_FLOOR * 2
    assert len(split_by_health(rows).judgement.unhealthy) == 1


def test_limits_given_judge_the_other_measures() -> None:
    limits = HealthLimits(
        throttles=None, involuntary_switches=100, aperf_mperf=(0.93, 1.03), other_cpu=None
    )
    got = reasons(
        [
            {"health": {THROTTLES: 9.0, INVOLUNTARY_SWITCHES: 101.0}},
            {"health": {APERF_MPERF: 0.9}},
            {"health": {APERF_MPERF: 1.0, OTHER_CPU: 100.0}},
        ],
        limits,
    )
    assert got == [
        "switched 101 involuntary context switch(es) (limit 100)",
        "clocked APERF/MPERF 0.900 (bounds 0.93-1.03)",
    ]


def test_only_ok_trials_are_judged_and_unmeasured_ones_are_kept() -> None:
    trials = [
        {"position": 0, "health": {SWAP_IN: 5.0}},  # flagged
        {"position": 1, "status": "failed", "health": {SWAP_IN: 5.0}},  # not judged
        {"position": 1, "run": 0, "health": {SWAP_IN: 0.0}},  # its retry: healthy
        {"position": 2},  # no health measures: kept, counted
        {"position": 3, "worker": "w2", "health": {SWAP_IN: 1.0}},  # another worker
    ]
    split = split_by_health(frame(trials))
    assert [(t.worker, t.position) for t in split.judgement.unhealthy] == [("local", 0), ("w2", 3)]
    assert (split.judgement.judged, split.judgement.unmeasured) == (3, 1)
    kept = split.healthy
    assert sorted(zip(kept["position"], kept["status"])) == [(1, "failed"), (1, "ok"), (2, "ok")]
    assert set(kept["metric"]) == {"wall"}  # the health rows are not the analyses'
    # A frame without a worker column is one machine's.
    assert len(split_by_health(frame(trials[:1]).drop(columns="worker")).judgement.unhealthy) == 1


def test_missing_columns_are_one_line() -> None:
    with pytest.raises(Exception, match="column\\(s\\) status missing"):
        split_by_health(frame([{}]).drop(columns="status"))


def test_a_source_without_health_measures_sets_nothing_aside_and_says_so() -> None:
    source = MEMCACHED  # OrderSage's: no health measure
    out = washout("analyze", source, "--healthy-only").stdout
    assert (
        "Health: none of the 300 trials has a health measure (health off, or a source without "
        "them): none set aside." in out
    )
    assert "Health" not in washout("analyze", source).stdout  # nothing asked, nothing said


HEALTH_NAMES = (THROTTLES, KERNEL_LOG, INVOLUNTARY_SWITCHES, MIGRATIONS, SWAP_IN, SWAP_OUT)
HEALTH_NAMES += (OTHER_CPU, APERF_MPERF)


def one_by_one(
    rows: pd.DataFrame, limits: HealthLimits
) -> tuple[list[tuple[object, ...]], int, int, list[bool]]:
    """The module docstring's rules applied trial by trial in plain Python (the reference
    the column-wise judgement must equal): each flagged trial with its causes and
    reasons in order, how many ok trials were judged and unmeasured, and which of the
    rows that are not health rows belong to a flagged trial."""
    values: dict[tuple[str, int, int, str], dict[str, float]] = {}
    seconds: dict[tuple[str, int, int, str], float] = {}
    keys = []
    for row in rows.to_dict("records"):
        key = (str(row["worker"]), int(row["run"]), int(row["position"]), str(row["test"]))
        keys.append(key)
        metric = str(row["metric"])
        if (
            metric.startswith("health.")
            and str(row["status"]) == "ok"
            and row["value"] == row["value"]
        ):
            values.setdefault(key, {})[metric] = float(row["value"])
            if "started" in row:
                begun = pd.Timestamp(row["started"]) if row["started"] else pd.NaT
                end = pd.Timestamp(row["ended"]) if row["ended"] else pd.NaT
                seconds[key] = (end - begun).total_seconds() if begun and end else float("nan")
    flagged = []
    for key in sorted(values):
        got, found = values[key], []
        for kind, limit, name, what in (
            ("throttled", limits.throttles, THROTTLES, "thermal throttle event(s)"),
            ("kernel-log", limits.kernel_log, KERNEL_LOG, "new kernel log record(s)"),
            (
                "switched",
                limits.involuntary_switches,
                INVOLUNTARY_SWITCHES,
                "involuntary context switch(es)",
            ),
            ("migrated", limits.migrations, MIGRATIONS, "CPU migration(s)"),
        ):
            if limit is not None and name in got and got[name] > limit:
                found.append((kind, f"{kind} {got[name]:g} {what} (limit {limit:g})"))
        if limits.swapped is not None and (SWAP_IN in got or SWAP_OUT in got):
            pages = got.get(SWAP_IN, 0.0) + got.get(SWAP_OUT, 0.0)
            if pages > limits.swapped:
                found.append(
                    ("swapped", f"swapped {pages:g} page(s) in or out (limit {limits.swapped:g})")
                )
        s = seconds.get(key, float("nan"))
        if limits.other_cpu is not None and OTHER_CPU in got and s > 0:
            other = got[OTHER_CPU]
            if other > max(limits.other_cpu * s, TICK_FLOOR):
                found.append(
                    (
                        "busy",
                        f"busy: other processes used {other / s:.2f} CPU over the trial "
                        f"({other:.3g} s; limit {limits.other_cpu:g})",
                    )
                )
        if limits.aperf_mperf is not None and APERF_MPERF in got:
            low, high = limits.aperf_mperf
            if not low <= got[APERF_MPERF] <= high:
                found.append(
                    (
                        "clocked",
                        f"clocked APERF/MPERF {got[APERF_MPERF]:.3f} (bounds {low:g}-{high:g})",
                    )
                )
        if found:
            flagged.append((*key, tuple(c for c, _ in found), tuple(r for _, r in found)))
    marked = {f[:4] for f in flagged}
    rest = [
        (key, str(row["status"]) == "ok")
        for key, row in zip(keys, rows.to_dict("records"))
        if not str(row["metric"]).startswith("health.")
    ]
    ok_trials = {key for key, ok in rest if ok}
    judged, unmeasured = len(ok_trials & values.keys()), len(ok_trials - values.keys())
    return flagged, judged, unmeasured, [ok and key in marked for key, ok in rest]


measure_value = st.one_of(
    st.floats(min_value=0, max_value=50, allow_nan=False).map(lambda v: round(v, 2)),
    st.sampled_from([float("nan"), float("inf"), 0.0, 1.0, 0.02, 0.95, 1.1]),
)


@st.composite
def health_frames(draw: st.DrawFn) -> tuple[pd.DataFrame, HealthLimits]:
    """Long-format rows of a few workers, runs, positions and tests, each trial's wall and
    any of the health measures (some given twice, some NaN, some trials failed or without
    health), stamps present, missing or absent, as text or as categorical columns."""
    rows = []
    for _ in range(draw(st.integers(0, 12))):
        base = {
            "worker": draw(st.sampled_from(["local", "w2", "a"])),
            "run": draw(st.integers(-1, 2)),
            "position": draw(st.integers(0, 2)),
            "test": draw(st.sampled_from(["t", "u", "10"])),
            "status": draw(st.sampled_from(["ok", "ok", "failed", "warmup"])),
            "started": "2026-01-01T00:00:00+00:00",
            "ended": draw(
                st.sampled_from(
                    [
                        "2026-01-01T00:00:01+00:00",
                        "2026-01-01T00:00:00.050000+00:00",
                        "2026-01-01T00:00:00+00:00",
                        None,
                    ]
                )
            ),
        }
        rows.append({**base, "metric": "wall", "value": 1.0})
        for name in draw(st.lists(st.sampled_from(HEALTH_NAMES), max_size=5)):
            rows.append({**base, "metric": name, "value": draw(measure_value)})
    frame = pd.DataFrame(
        rows,
        columns=[
            "worker",
            "run",
            "position",
            "test",
            "status",
            "started",
            "ended",
            "metric",
            "value",
        ],
    )
    if draw(st.booleans()):
        frame = frame.astype({c: "category" for c in ("worker", "test", "status", "metric")})
    if draw(st.booleans()):
        frame = frame.drop(columns=["started", "ended"])
    optional = st.one_of(st.none(), st.sampled_from([0.0, 1.0, 5.0]))
    limits = HealthLimits(
        throttles=draw(optional),
        swapped=draw(optional),
        kernel_log=draw(optional),
        other_cpu=draw(st.one_of(st.none(), st.sampled_from([0.0, 0.1, 2.0]))),
        involuntary_switches=draw(optional),
        migrations=draw(optional),
        aperf_mperf=draw(st.one_of(st.none(), st.just((0.93, 1.03)))),
    )
    return frame, limits


@settings(max_examples=300, deadline=None)
@given(health_frames())
def test_column_wise_judgement_equals_the_rules_trial_by_trial(
    case: tuple[pd.DataFrame, HealthLimits],
) -> None:
    frame, limits = case
    split = split_by_health(frame, limits)
    flagged, judged, unmeasured, sick_rows = one_by_one(frame, limits)
    got = [
        (t.worker, t.run, t.position, t.test, t.causes, t.reasons)
        for t in split.judgement.unhealthy
    ]
    assert got == flagged
    assert (split.judgement.judged, split.judgement.unmeasured) == (judged, unmeasured)
    rest = frame[~frame["metric"].astype(str).str.startswith("health.")].reset_index(drop=True)
    sick = pd.Series(sick_rows, dtype=bool).to_numpy()
    pd.testing.assert_frame_equal(split.flagged, rest.loc[sick].reset_index(drop=True))
    pd.testing.assert_frame_equal(split.healthy, rest.loc[~sick].reset_index(drop=True))
