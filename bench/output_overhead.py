"""What a command's output costs it under washout: stored wall and washout's peak memory for
a command that prints 2 GB (`yes | head -c 2G`).

Goal: the stored wall of a 2 GB-output command within 5% of the command alone,
and washout's memory bounded (before: 1.3 s alone stored as 21.7 s, 4.2 GB RSS).

Each variant is a real `washout run` of one trial, the variants interleaved round by round
(N rounds) so a change in the machine's load hits them alike; the figure is the median
stored wall (from `washout export`) and the largest peak RSS of the washout process:
- the command with its output read by washout (default `output_tail`, 1 MiB kept);
- the same with `output_tail = 0` (stdout is /dev/null, hyperfine's default);
- `... | cat > /dev/null`: the same bytes through a pipe read by cat (the best a reader of
  a pipe can do);
- `... > out.bin`: the same bytes written to a file (what keeping the output in a file on
  the worker, its tail read after the trial, would cost the command);
- `... > /dev/null`: the command alone.

Run: .venv/bin/python bench/output_overhead.py [--bytes 2G] [--rounds 5]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WASHOUT, header, load, median, run_child, verdict  # noqa: E402


def stored_wall(
    work: Path, name: str, command: str, output_tail: str | None = None
) -> tuple[float, float]:
    """Stored wall (s) of one trial and peak RSS (MB) of its `washout run`."""
    spec = work / f"{name}.toml"
    lines = ["[experiment]", f'name = "{name}"', "runs = 1", 'orders = ["fixed"]', "seed = 1"]
    if output_tail is not None:
        lines.append(f"output_tail = {json.dumps(output_tail)}")
    lines += ["[[test]]", 'name = "out"', f"command = {json.dumps(command)}"]
    spec.write_text("\n".join(lines) + "\n")
    db = work / f"{name}.db"
    db.unlink(missing_ok=True)
    child = run_child([WASHOUT, "run", str(spec), "--db", str(db), "--quiet"], cwd=work)
    exported = subprocess.run(
        [WASHOUT, "export", str(db)], capture_output=True, text=True, check=True
    ).stdout
    (wall,) = [
        float(row["value"])
        for row in csv.DictReader(io.StringIO(exported))
        if row["metric"] == "wall" and row["status"] == "ok"
    ]
    return wall, child.max_rss_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", default="2G", help="head -c argument")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    header(f"Output overhead: `yes | head -c {args.bytes}` (bench/output_overhead.py)")
    command = f"yes | head -c {args.bytes}"
    variants = [
        ("read", command, None),
        ("discarded", command, "0"),
        ("cat", f"{command} | cat > /dev/null", None),
        ("file", f"{command} > out.bin", None),
        ("alone", f"{command} > /dev/null", None),
    ]
    walls: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    rss: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    with tempfile.TemporaryDirectory(prefix="washout-bench-") as tmp:
        for _ in range(args.rounds):
            for name, cmd, tail in variants:
                wall, peak = stored_wall(Path(tmp), name, cmd, tail)
                (Path(tmp) / "out.bin").unlink(missing_ok=True)  # outside the timed trial
                walls[name].append(wall)
                rss[name].append(peak)
            print(
                "  round: "
                + ", ".join(f"{name} {w[-1]:.3f} s" for name, w in walls.items())
                + f"; load {load()}",
                flush=True,
            )
    results = {name: (median(walls[name]), max(rss[name])) for name in walls}
    alone = results["alone"][0]
    print()
    print(f"| variant | stored wall (median of {args.rounds}) | vs alone | washout peak RSS |")
    print("|---|---|---|---|")
    labels = {
        "read": f"`{command}`, output read (output_tail 1 MiB)",
        "discarded": f"`{command}`, `output_tail = 0`",
        "cat": f"`{command} | cat > /dev/null`",
        "file": f"`{command} > out.bin` (a file)",
        "alone": f"`{command} > /dev/null` (alone)",
    }
    for name, (wall, rss) in results.items():
        print(f"| {labels[name]} | {wall:.3f} s | {wall / alone:.2f}x | {rss:.0f} MB |")
    print()
    ratio = results["discarded"][0] / alone
    print(f"goal within 5% of alone, output_tail = 0: {ratio:.3f}x  {verdict(ratio <= 1.05)}")
    read = results["read"][0] / results["cat"][0]
    print(
        f"output read by washout vs read by cat: {read:.2f}x; vs alone: "
        f"{results['read'][0] / alone:.2f}x  {verdict(results['read'][0] / alone <= 1.05)}"
    )
    print(f"load average: {load()} (at end)")


if __name__ == "__main__":
    main()
