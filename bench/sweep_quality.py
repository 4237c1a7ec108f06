"""How well incremental sampling works on the four fully measured spaces in tests/data.

Part A, the paper's method reproduced (Hui et al., SIGMOD 2024; docs/sweep-method.md §3, §10): for
silo_ycsb (tput / threads, main + 2-way) and herd_ycsb (main effects only, as the paper's code
chooses), seeds 0-9, ratios 0.05..0.95: the paper's sample (train_test_split), 10 splits 80/20,
the ANOVA, R^2 on the 20%; the worst of the 10 splits per seed; p50 over seeds ("nearest");
the first ratio where p50 >= 0.9. A split whose validation part holds a level its fitting part
lacks is skipped, as patsy's ValueError made the paper's code skip it. The same figure is
given for our sampler + model.

Part B, conclusion quality (the paper's Figure 1 measures) on every space of
bench/sweep_spaces.py (the tuned ones, the held-out ones, the generated ones): each
configuration runs the loop to termination for every seed; at termination: the sampling rate,
whether the threshold was reached, R^2 on the unmeasured settings, the mismatch of important
terms and points with the full-data analysis, and how far each share of variance is from the
full data's and whether its interval covers it (:func:`share_scores`).

    .venv/bin/python bench/sweep_quality.py --seeds 10 --out bench/sweep_quality.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from washout.sweep.conclusions import Conclusions, compare, conclusions_of
from washout.sweep.explore import unmeasured
from washout.sweep.incremental import (
    LoopOptions,
    loop_conclusions,
    method_options,
    r2_score,
    run_loop,
)
from washout.sweep.models import get_model
from washout.sweep.space import Space
from washout.sweep.uncertainty import IMPORTANT_SHARE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_spaces import SPACES, SYNTHETIC, load, role  # noqa: E402

RATIOS = np.linspace(0.05, 1, 20)[:19]
SHARE_FLOOR = 0.01
"""Shares scored: those of at least 1% of the variance in the full data or in the sample's
conclusions (a term absent from one side counts as 0 there)."""


def paper_curve(space: Space, model: str, seeds: range, skip_unseen: bool) -> list[list[float]]:
    """min-over-10-splits R^2 per (seed, ratio) with the paper's samples and splits."""
    fit = get_model(model)
    rows = []
    for seed in seeds:
        per_ratio = []
        for r in RATIOS:
            sample, _ = train_test_split(np.arange(len(space)), test_size=1 - r, random_state=seed)
            scores = []
            for split in range(10):
                exp, unexp = train_test_split(sample, test_size=0.2, random_state=split)
                seen = all(
                    np.isin(space.codes[unexp, f], space.codes[exp, f]).all()
                    for f in range(len(space.parameters))
                )
                if skip_unseen and not seen:
                    continue
                try:
                    m = fit(space, space.codes[exp], space.y[exp], split)
                except (ValueError, np.linalg.LinAlgError):
                    continue
                scores.append(r2_score(space.y[unexp], m.predict(space.codes[unexp])))
            finite = [s for s in scores if np.isfinite(s)]
            per_ratio.append(min(finite) if finite else np.nan)
        rows.append(per_ratio)
    return rows


def loop_curve(space: Space, options: LoopOptions, seeds: range) -> list[list[float]]:
    """The same measure for our loop (its sampler and model), every ratio, no early stop."""
    rows = []
    for seed in seeds:
        opts = LoopOptions(
            **{
                **options.__dict__,
                "seed": seed,
                "threshold": 1.0,
                "budget": int(len(space) * 0.95) + 1,
            }
        )
        result = run_loop(space, lambda idx: space.y[idx], opts)
        rows.append(
            [min(s.r2_splits) if np.isfinite(s.r2_splits).all() else np.nan for s in result.steps][
                : len(RATIOS)
            ]
        )
    return rows


def first_reaching(curve: list[list[float]], threshold: float = 0.9) -> dict:
    """p20/p50/p80 ('nearest') over seeds per ratio; first ratio with p50 >= threshold."""
    arr = np.array(curve, dtype=float)
    arr = np.where(np.isnan(arr), -np.inf, arr)  # a seed with no usable split has not reached
    p50 = np.percentile(arr, 50, axis=0, method="nearest")
    hit = np.flatnonzero(p50 >= threshold)
    return {
        "first_ratio": float(RATIOS[hit[0]]) if len(hit) else None,
        "p50": [float(v) if np.isfinite(v) else None for v in p50],
    }


CONFIGS: dict[str, dict] = {
    "paper (--method paper: random + ANOVA, paper rule, treatment coding)": dict(method="paper"),
    "paper: balanced + ANOVA": dict(method="paper", sampler="balanced"),
    "paper: stratified + ANOVA": dict(method="paper", sampler="stratified"),
    "paper: dist-aware + ANOVA": dict(method="paper", sampler="dist-aware"),
    "paper: random + MLP": dict(method="paper", model="mlp"),
    "ours (the default: coverage + smooth, stratified folds, settled rule, 3-way covering, "
    "predicted space, sum coding, adaptive batches)": dict(method="ours"),
    "ours, holdout rule (R^2 alone: the default before the settled rule)": dict(
        method="ours", rule="holdout"
    ),
    "ours, covering 2 (no stop before every 2-way cell of the kept factors is measured)": dict(
        method="ours", cover=2, cover_expect=0.0
    ),
    "ours, no covering (part G's default: R^2 and settled shares alone)": dict(
        method="ours", cover=0
    ),
}


def share_scores(sample: Conclusions, full: Conclusions) -> dict:
    """How well the sample's shares know the full data's: over the terms with a share of at
    least :data:`SHARE_FLOOR` on either side, the largest and mean |error|, how many of
    their intervals cover the full data's share (a term with no interval covers nothing),
    the mean interval width, importance decisions that are wrong (``important`` with the
    full share under 10%, ``not important`` with it at or above) or left open (``may be
    important``); and how many of the full data's points on its important terms lie in the
    interval of the sample's point on the same curve."""
    names = {full.name(t): s for t, s in full.shares.items()}
    mine = {sample.name(t): (s, sample.spreads.get(t)) for t, s in sample.shares.items()}
    errors, covered, widths, wrong, open_ = [], 0, [], 0, 0
    for name in names.keys() | mine.keys():
        truth = names.get(name, 0.0)
        estimate, spread = mine.get(name, (0.0, None))
        if max(truth, estimate) < SHARE_FLOOR:
            continue
        errors.append(abs(estimate - truth))
        if spread is None:
            continue
        covered += spread.low <= truth <= spread.high
        widths.append(spread.high - spread.low)
        importance = spread.importance
        wrong += (importance == "important" and truth < IMPORTANT_SHARE) or (
            importance == "not important" and truth >= IMPORTANT_SHARE
        )
        open_ += importance == "may be important"
    points = [(k, p) for k, p in full.curves.items() if p is not None and k[0] in full.important]
    inside = 0
    for key, point in points:
        spread = sample.point_spreads.get(key)
        inside += bool(
            spread is not None
            and spread.low is not None
            and spread.high is not None
            and spread.low <= point.value <= spread.high
        )
    return {
        "share_error_max": max(errors) if errors else 0.0,
        "share_error_mean": float(np.mean(errors)) if errors else 0.0,
        "shares_scored": len(errors),
        "shares_covered": covered,
        "width_mean": float(np.mean(widths)) if widths else None,
        "importance_wrong": wrong,
        "importance_open": open_,
        "points_scored": len(points),
        "points_covered": inside,
    }


def quality(space: Space, paper_model: str, config: dict, seeds: range) -> dict:
    """Termination rate, R^2 on unmeasured settings and conclusion mismatch over seeds, each
    sample's conclusions compared with the full data's under the same coding."""
    runs = []
    for seed in seeds:
        paper = config["method"] == "paper"  # the paper's model per table (herd: main only)
        model = config.get("model") or (paper_model if paper else None)
        options = method_options(**{**config, "model": model}, seed=seed, analysis=paper_model)
        full = conclusions_of(space, np.arange(len(space)), space.y, paper_model, options.coding)
        start = time.perf_counter()
        result = run_loop(space, lambda idx: space.y[idx], options)
        elapsed = time.perf_counter() - start
        sample, data = loop_conclusions(space, result, options)
        left = np.setdiff1d(np.arange(len(space)), result.measured)
        runs.append(
            {
                "seed": seed,
                "rate": len(result.measured) / len(space),
                "terminated": result.terminated,
                "r2_unmeasured": unmeasured(space, result, options),
                # the values the conclusions' ANOVA saw for the unmeasured settings
                "r2_unmeasured_conclusions": r2_score(space.y[left], data.y[left])
                if len(left) > 1
                else np.nan,
                **compare(sample, full),
                **share_scores(sample, full),
                "seconds": elapsed,
            }
        )
    done = [r for r in runs if r["terminated"]]
    bad = [r for r in done if r["r2_unmeasured"] < 0.8]  # NaN: < 2 left, nothing claimed
    return {
        "runs": runs,
        "median_rate": float(np.median([r["rate"] for r in runs])),
        "terminated": f"{len(done)}/{len(runs)}",
        "false_terminations": len(bad),
        "r2_unmeasured_min": float(np.nanmin([r["r2_unmeasured"] for r in runs])),
        "r2_unmeasured_median": float(np.nanmedian([r["r2_unmeasured"] for r in runs])),
        "r2_unmeasured_conclusions_min": float(
            np.nanmin([r["r2_unmeasured_conclusions"] for r in runs])
        ),
        "terms_changed_median": float(np.median([r["terms_changed"] for r in runs])),
        "points_mismatch_median": float(np.median([r["points_mismatch"] for r in runs])),
        "points_moved_median": float(np.median([r["points_moved"] for r in runs])),
        "terms_match": sum(r["terms_changed"] == 0 for r in runs),
        "points_match": sum(r["points_mismatch"] == 0 for r in runs),
        "seconds_median": float(np.median([r["seconds"] for r in runs])),
        "share_error_max": float(max(r["share_error_max"] for r in runs)),
        "share_error_mean": float(np.mean([r["share_error_mean"] for r in runs])),
        "share_coverage": _ratio(runs, "shares_covered", "shares_scored"),
        "point_coverage": _ratio(runs, "points_covered", "points_scored"),
        "importance_wrong": sum(r["importance_wrong"] for r in runs),
        "importance_open": sum(r["importance_open"] for r in runs),
    }


def _ratio(runs: list[dict], part: str, whole: str) -> list[int]:
    """[sum of ``part``, sum of ``whole``] over the runs."""
    return [int(sum(r[part] for r in runs)), int(sum(r[whole] for r in runs))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--spaces", default=",".join([*SPACES, *SYNTHETIC]))
    parser.add_argument(
        "--configs", default="all", help="';'-separated name prefixes from CONFIGS, or all"
    )
    parser.add_argument("--part", choices=["a", "b", "ab"], default="ab")
    parser.add_argument("--out", type=Path, default=Path("bench/sweep_quality.json"))
    args = parser.parse_args()
    seeds = range(args.seeds)
    wanted = args.configs.split(";")
    configs = {
        k: v
        for k, v in CONFIGS.items()
        if args.configs == "all" or any(k.startswith(w) for w in wanted)
    }
    report: dict = {
        "machine": f"{platform.node()} {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(sys.argv),
        "a": {},
        "b": {},
        "roles": {},
    }
    ours = method_options("ours")
    with threadpool_limits(1):
        for name in args.spaces.split(","):
            space, paper_model = load(name)
            if "a" in args.part and name in ("silo_ycsb", "herd_ycsb"):
                report["a"][name] = {
                    "paper": first_reaching(paper_curve(space, paper_model, seeds, True)),
                    "paper, unseen levels predicted (no skip)": first_reaching(
                        paper_curve(space, paper_model, seeds, False)
                    ),
                    "ours (the default)": first_reaching(loop_curve(space, ours, seeds)),
                }
                print(
                    name,
                    json.dumps({k: v["first_ratio"] for k, v in report["a"][name].items()}),
                    flush=True,
                )
            if "b" in args.part:
                report["b"][name] = {}
                report["roles"][name] = role(name)
                for label, config in configs.items():
                    q = quality(space, paper_model, config, seeds)
                    report["b"][name][label] = q
                    print(
                        name,
                        label,
                        json.dumps({k: v for k, v in q.items() if k != "runs"}),
                        flush=True,
                    )
                    args.out.write_text(json.dumps(report, indent=1))
            args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
