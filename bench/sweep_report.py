"""Markdown tables for bench/RESULTS.md from bench/sweep_quality.py JSON outputs.

.venv/bin/python bench/sweep_report.py OUT1.json [OUT2.json ...]
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    part_a: dict = {}
    part_b: dict = {}
    for path in sys.argv[1:]:
        data = json.load(open(path))
        for space, rows in data.get("a", {}).items():
            part_a.setdefault(space, {}).update(rows)
        for space, rows in data.get("b", {}).items():
            part_b.setdefault(space, {}).update(rows)
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
            "| points moved (strict) |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for space, rows in part_b.items():
            order = sorted(rows, key=lambda c: (c.startswith("ours"), "MLP" in c))
            for config in order:
                q = rows[config]
                print(
                    f"| {space} | {config} | {q['median_rate']:.3f} | {q['terminated']} | "
                    f"{q['r2_unmeasured_min']:.3f} / {q['r2_unmeasured_median']:.3f} | "
                    f"{q['false_terminations']} | {q['terms_changed_median']:.2f} | "
                    f"{q['points_mismatch_median']:.2f} | {q['points_moved_median']:.2f} |"
                )


if __name__ == "__main__":
    main()
