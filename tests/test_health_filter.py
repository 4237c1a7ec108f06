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
from conftest import washout
from machine_tree import CPU
from test_trial_health import health_tree

from washout.data.health import (
    APERF_MPERF,
    INVOLUNTARY_SWITCHES,
    KERNEL_LOG,
    OTHER_CPU,
    SWAP_IN,
    SWAP_OUT,
    THROTTLES,
)
from washout.data.store import read_long
from washout.stats.health import TICK_FLOOR, HealthLimits, split_by_health


def test_a_real_run_sets_aside_the_trials_that_throttled(tmp_path: Path) -> None:
    root = health_tree(tmp_path / "tree", msr=False)
    count = root / CPU / "cpu0" / "thermal_throttle" / "core_throttle_count"
    bump = f"read n < {shlex.quote(str(count))}; echo $((n + 1)) > {shlex.quote(str(count))}"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
runs = 3
warmup = 1
health_root = {json.dumps(str(root))}
[[test]]
name = "hot"
command = {json.dumps(bump)}
[[test]]
name = "cool"
command = "true"
"""
    )
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    trials = read_long(db, resources=True)  # as export writes it and washout.load gives it
    rows = trials[trials["metric"].astype(str).str.startswith("health.")]
    assert set(rows["test"]) == {"hot", "cool"}
    # 3 runs x 2 orders x 2 tests, and the warmups with their status
    assert len(rows[(rows["metric"] == THROTTLES) & (rows["status"] == "ok")]) == 12
    assert set(rows[rows["run"] == -1]["status"]) == {"warmup"}
    assert rows["value"].notna().all()  # a measure not taken has no row
    split = split_by_health(trials)
    assert {t.test for t in split.judgement.unhealthy} == {"hot"} and len(
        split.judgement.unhealthy
    ) == 6
    assert all(t.causes == ("throttled",) for t in split.judgement.unhealthy)
    assert all(
        "throttled 1 thermal throttle event(s)" in t.reasons[0] for t in split.judgement.unhealthy
    )
    healthy = split.healthy[(split.healthy["status"] == "ok") & (split.healthy["metric"] == "wall")]
    assert set(healthy["test"]) == {"cool"} and len(healthy) == 6
    assert set(split.healthy[split.healthy["run"] == -1]["status"]) == {"warmup"}  # untouched
    assert len(split.flagged) == 24 and set(split.flagged["metric"]) == {
        "wall",
        "user",
        "system",
        "max_rss",
    }
    assert (split.judgement.judged, split.judgement.unmeasured) == (12, 0)
    assert (
        split.summary()
        == "set aside 6 of 12 trial(s) with health measures as unhealthy (6 throttled)"
    )
    (stratum,) = split.judgement.strata  # hot's wall: every trial of it throttled
    assert (stratum.test, stratum.metric, stratum.healthy, stratum.unhealthy) == (
        "hot",
        "wall",
        0,
        6,
    )
    assert stratum.median_healthy is None and stratum.shift_pct is None


def test_strata_set_healthy_against_unhealthy_trials() -> None:
    trials = [
        {"position": i, "seconds": s, "health": {SWAP_IN: float(i >= 3)}}
        for i, s in enumerate([1, 2, 3, 6, 6])
    ]
    trials.append({"position": 9, "test": "other", "health": {SWAP_IN: 0.0}})
    judgement = split_by_health(frame(trials)).judgement
    (stratum,) = judgement.strata  # only the test with an unhealthy trial
    assert (stratum.test, stratum.metric) == ("t", "wall")
    assert (stratum.healthy, stratum.unhealthy) == (3, 2)
    assert (stratum.median_healthy, stratum.median_unhealthy) == (2.0, 6.0)
    assert stratum.shift_pct == pytest.approx(200.0)
    assert judgement.causes() == {"swapped": 2}
    assert judgement.to_dict()["strata"][0]["shift_pct"] == pytest.approx(200.0)


def test_a_frame_without_health_measures_is_kept_whole() -> None:
    split = split_by_health(frame([{"position": 0}, {"position": 1}]))
    assert len(split.healthy) == 2 and split.flagged.empty
    assert (split.judgement.judged, split.judgement.unmeasured) == (0, 2)


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
    assert "1 ok trial(s) had none and were kept" in split.summary()
    # A frame without a worker column is one machine's.
    assert len(split_by_health(frame(trials[:1]).drop(columns="worker")).judgement.unhealthy) == 1


def test_missing_columns_are_one_line() -> None:
    with pytest.raises(Exception, match="column\\(s\\) status missing"):
        split_by_health(frame([{}]).drop(columns="status"))
