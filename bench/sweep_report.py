"""Markdown tables for bench/RESULTS.md from bench/sweep_quality.py JSON outputs.

.venv/bin/python bench/sweep_report.py OUT1.json [OUT2.json ...]
"""

from __future__ import annotations

import json
import math
import sys


def main() -> None:
    part_a: dict = {}
    part_b: dict = {}
    roles: dict = {}
    for path in sys.argv[1:]:
        data = json.load(open(path))
        for space, rows in data.get("a", {}).items():
            part_a.setdefault(space, {}).update(rows)
        for space, rows in data.get("b", {}).items():
            part_b.setdefault(space, {}).update(rows)
        roles.update(data.get("roles", {}))
    if part_a:
        print("| space | method | first rate where p50 of worst-of-10 R^2 >= 0.9 |")
        print("|---|---|---|")
        for space, rows in part_a.items():
            for method, row in rows.items():
                first = row["first_ratio"]
                print(f"| {space} | {method} | {'never' if first is None else f'{first:.2f}'} |")
        print()
    if part_b:
        print(
            "| space | configuration | median rate | terminated | R^2 unmeasured min / median "
            "| terminations with R^2 unmeasured < 0.8 | terms changed | points mismatch (paper) "
            "| points moved (strict) | seeds with terms / points matching full |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for space, rows in part_b.items():
            order = sorted(rows, key=lambda c: (c.startswith("ours"), "MLP" in c))
            for config in order:
                q = rows[config]
                seeds = len(q["runs"])
                print(
                    f"| {space} | {config} | {q['median_rate']:.3f} | {q['terminated']} | "
                    f"{q['r2_unmeasured_min']:.3f} / {q['r2_unmeasured_median']:.3f} | "
                    f"{false_terminations(q)} | {q['terms_changed_median']:.2f} | "
                    f"{q['points_mismatch_median']:.2f} | {q['points_moved_median']:.2f} | "
                    f"{q.get('terms_match', '-')}/{seeds} / {q.get('points_match', '-')}/{seeds} |"
                )
        ratios = {
            space: _rate(rows, "ours") / _rate(rows, "paper (--method")
            for space, rows in part_b.items()
            if _rate(rows, "ours") and _rate(rows, "paper (--method")
        }
        if ratios:
            print()
            print("| space | ours / paper, median rate |")
            print("|---|---|")
            for space, ratio in ratios.items():
                print(f"| {space} | {ratio:.2f} |")
            print(f"| **mean** | **{sum(ratios.values()) / len(ratios):.2f}** |")
        uncertainty(part_b, roles)


def uncertainty(part_b: dict, roles: dict) -> None:
    """Part F: how far the shares are from the full data's, and how often their intervals
    cover it, per space and configuration (configurations without intervals left out)."""
    print()
    print(
        "| space | role | configuration | runs | median rate | share error max / mean | "
        "intervals covering the full share (± Monte-Carlo s.e.) | mean width | importance "
        "wrong / open | points covered |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals: dict[str, dict[str, list[int]]] = {}
    clusters: dict[str, list[tuple[int, int]]] = {}
    for space, rows in part_b.items():
        for config, q in rows.items():
            if "share_coverage" not in q:
                continue
            covered, scored = q["share_coverage"]
            inside, points = q["point_coverage"]
            widths = [r["width_mean"] for r in q["runs"] if r["width_mean"] is not None]
            width = f"{100 * sum(widths) / len(widths):.1f} pts" if widths else "-"
            runs = [(r["shares_covered"], r["shares_scored"]) for r in q["runs"]]
            print(
                f"| {space} | {roles.get(space, '-')} | {config} | {len(runs)} | "
                f"{q['median_rate']:.3f} | "
                f"{100 * q['share_error_max']:.1f} / {100 * q['share_error_mean']:.1f} pts | "
                f"{_share(covered, scored)}{_se(runs)} | {width} | "
                f"{q['importance_wrong']} / {q['importance_open']} | {_share(inside, points)} |"
            )
            key = f"{config} ({roles.get(space, '-')})"
            total = totals.setdefault(key, {"shares": [0, 0], "points": [0, 0]})
            total["shares"] = [a + b for a, b in zip(total["shares"], [covered, scored])]
            total["points"] = [a + b for a, b in zip(total["points"], [inside, points])]
            clusters.setdefault(key, []).extend(runs)
    print()
    print(
        "| configuration (role) | runs | intervals covering the full share (± Monte-Carlo "
        "s.e.) | points covered |"
    )
    print("|---|---|---|---|")
    for key, total in totals.items():
        print(
            f"| {key} | {len(clusters[key])} | {_share(*total['shares'])}{_se(clusters[key])} | "
            f"{_share(*total['points'])} |"
        )


def coverage_se(runs: list[tuple[int, int]]) -> float:
    """The Monte-Carlo standard error of a coverage pooled over seeded runs, (covered,
    scored) per run: the shares of one run share its sample, so runs are the independent
    units and the pooled coverage is a ratio estimate over them, with the ratio estimator's
    variance v = sum (c_r - p k_r)^2 / (R (R - 1) kbar^2) (Cochran, Sampling Techniques,
    3rd ed., 1977, ch. 6)."""
    scored = [k for _, k in runs if k]
    if len(scored) < 2:
        return math.nan
    p = sum(c for c, _ in runs) / sum(scored)
    mean = sum(scored) / len(runs)
    spread = sum((c - p * k) ** 2 for c, k in runs)
    return math.sqrt(spread / (len(runs) * (len(runs) - 1))) / mean


def _se(runs: list[tuple[int, int]]) -> str:
    se = coverage_se(runs)
    return "" if math.isnan(se) else f" ± {se:.0%}"


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "-"


def _rate(rows: dict, prefix: str) -> float | None:
    """The median rate (seeds that never terminated count with what they measured) of the
    configuration whose name starts with ``prefix``, if it terminated in some seed: a space
    no method reaches the threshold on is no comparison of cost."""
    for name, q in rows.items():
        done = int(q["terminated"].split("/")[0])
        if name.startswith(prefix) and done > 0:
            return float(q["median_rate"])
    return None


def false_terminations(q: dict) -> int:
    """Terminations with R^2 below 0.8 on the settings left unmeasured; a run that left
    fewer than 2 unmeasured (R^2 undefined) claimed nothing about them."""
    return sum(
        1
        for r in q["runs"]
        if r["terminated"] and math.isfinite(r["r2_unmeasured"]) and r["r2_unmeasured"] < 0.8
    )


if __name__ == "__main__":
    main()
