"""A bisect's result written out: the terminal text, and the HTML page with its figure (the
metric against the commits, each marked with its decision).

Everything here reads a :class:`~washout.bisection.result.BisectResult`; nothing is measured
or decided again.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from washout.bisection.result import BisectResult, CommitRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from washout.stats.equivalence import PairedEstimate

STATE_STYLE: dict[str, tuple[str, str, str]] = {  # state -> (colour, marker, legend)
    "good": ("#009E73", "s", "good (given)"),
    "bad": ("#D55E00", "s", "bad (given)"),
    "like-good": ("#009E73", "o", "like good"),
    "like-bad": ("#D55E00", "o", "like bad"),
    "unknown": ("#E69F00", "D", "unknown"),
    "testing": ("#999999", "o", "being measured"),
}
"""Okabe-Ito colours (as the other figures), distinguishable with colour-vision deficiencies."""


def _pct(ratio: float | None) -> str:
    return "" if ratio is None else f"{100 * (ratio - 1):+.2f}%"


def estimate_text(e: PairedEstimate | None) -> str:
    """``+3.01% [+2.60%, +3.40%]`` (or without an interval when the runs are too few)."""
    if e is None:
        return ""
    interval = f" [{_pct(e.low)}, {_pct(e.high)}]" if e.low is not None else ""
    return _pct(e.ratio) + interval


def text(result: BisectResult) -> str:
    """What ``washout bisect`` prints: the answer, the steps, the commits in the range, the
    cost, the notes."""
    r = result
    level = f"{100 * (1 - r.alpha):g}%"
    lines = [r.summary, ""]
    lines.append(
        f"Bisected {r.test} / {r.metric} ({r.better} is better) from good {r.good[:10]} to "
        f"bad {r.bad[:10]}; intervals below at {level}."
    )
    if r.change is not None:
        lines.append(f"bad against good: {estimate_text(r.change)} over {r.change.runs} runs")
    lines += [
        "",
        "step  kind       commit      decision   runs  vs good                    "
        "vs bad                     reason",
    ]
    for s in r.steps:
        lines.append(
            f"{s.index:>4}  {s.kind:<9}  {s.commit[:10]}  {s.decision:<9}  {s.runs:>4}  "
            f"{estimate_text(s.vs_good if s.kind == 'candidate' else s.change):<25}  "
            f"{estimate_text(s.vs_bad):<25}  {s.reason}"
        )
    if r.first is not None and r.last is not None:
        inside = [c for c in r.commits if _in_range(r, c)]
        if len(inside) > 1:
            lines += ["", "Commits in the range:"]
            lines += [f"  {c.commit[:10]}  {c.state:<9}  {c.subject[:60]}" for c in inside]
    cost = r.cost
    lines += [
        "",
        f"Cost: {cost.builds} builds ({cost.builds_failed} failed, {cost.build_seconds:.1f} s), "
        f"{cost.trials} trials in {cost.runs} paired runs, {cost.seconds:.1f} s in all.",
    ]
    lines += [f"Note: {n}" for n in r.notes]
    lines.append(f"Data: {r.directory}")
    return "\n".join(lines)


def _in_range(result: BisectResult, commit: CommitRow) -> bool:
    index = {c.commit: c.index for c in result.commits}
    assert result.first is not None and result.last is not None
    return index[result.first] <= commit.index <= index[result.last]


def figure(result: BisectResult) -> Figure:
    """The metric against the commits: each measured commit's ratio to good with its
    interval, coloured by its decision; bands for good, bad and the range."""
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from washout.report.figures import label

    fig = Figure(figsize=(9.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    n = len(result.commits)
    if result.first is not None and result.last is not None:
        index = {c.commit: c.index for c in result.commits}
        ax.axvspan(
            index[result.first] - 0.5, index[result.last] + 0.5, color="#F0E442", alpha=0.35, lw=0
        )
    ax.axhline(0.0, color="#009E73", lw=0.8, ls="--")
    if result.change is not None:
        ax.axhline(100 * (result.change.ratio - 1), color="#D55E00", lw=0.8, ls="--")
    seen = []
    for c in result.commits:
        e = c.vs_good
        if e is None or c.state not in STATE_STYLE:
            if c.state == "skipped":
                ax.plot(c.index, 0.0, marker="x", color="#666666", ms=6, ls="none")
            continue
        colour, marker, _ = STATE_STYLE[c.state]
        y = 100 * (e.ratio - 1)
        if e.low is not None and e.high is not None:
            ax.errorbar(
                c.index,
                y,
                yerr=[[y - 100 * (e.low - 1)], [100 * (e.high - 1) - y]],
                color=colour,
                marker=marker,
                ms=6,
                capsize=3,
                lw=1,
            )
        else:
            ax.plot(c.index, y, marker=marker, color=colour, ms=6, ls="none")
        seen.append(c.state)
    handles: list[Artist] = [
        Line2D(
            [],
            [],
            color=STATE_STYLE[s][0],
            marker=STATE_STYLE[s][1],
            ls="none",
            label=STATE_STYLE[s][2],
        )
        for s in STATE_STYLE
        if s in seen
    ]
    if result.first is not None:
        handles.append(Patch(color="#F0E442", alpha=0.35, label="where the change is"))
    if any(c.state == "skipped" for c in result.commits):
        handles.append(
            Line2D([], [], color="#666666", marker="x", ls="none", label="skipped (does not build)")
        )
    ax.legend(handles=handles, loc="best", fontsize=8, frameon=False)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_xlabel(f"commit (0 = good {result.good[:10]}, {n - 1} = bad {result.bad[:10]})")
    ax.set_ylabel(label(f"{result.metric}: % against good"))
    ax.set_title(label(f"{result.test}: the metric against the commits"), fontsize=10)
    return fig


def page(result: BisectResult) -> str:
    """A self-contained HTML page: the answer, the figure, every step, the builds."""
    from washout.report.figures import svg

    e = html.escape
    rows = "".join(
        f"<tr><td>{s.index}</td><td>{e(s.kind)}</td><td><code>{e(s.commit[:10])}</code></td>"
        f"<td>{e(s.subject)}</td><td>{e(s.decision)}</td><td>{s.runs}</td>"
        f"<td>{e(estimate_text(s.vs_good if s.kind == 'candidate' else s.change))}</td>"
        f"<td>{e(estimate_text(s.vs_bad))}</td><td>{s.spent:.2g} of {s.alpha:.2g}</td>"
        f"<td>{e(s.reason)}</td></tr>"
        for s in result.steps
    )
    builds = "".join(
        f"<tr><td><code>{e(b.commit[:10])}</code></td><td>{e(b.status)}</td>"
        f"<td>{b.seconds:.1f} s</td><td><code>{e(b.log_sha256[:16])}</code></td>"
        f"<td>{e(', '.join(f'{p} {h[:12]}' for p, h in b.artifacts.items()))}</td>"
        f"<td><pre>{e(b.log_tail[-400:]) if not b.ok else ''}</pre></td></tr>"
        for b in result.builds
    )
    notes = "".join(f"<li>{e(n)}</li>" for n in result.notes)
    cost = result.cost
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>washout bisect: {e(result.test)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:75rem;margin:2rem auto;padding:0 1rem}}
table{{border-collapse:collapse;font-size:.85rem}}td,th{{border-bottom:1px solid #ddd;
padding:.2rem .5rem;text-align:left;vertical-align:top}}pre{{margin:0;white-space:pre-wrap}}</style>
</head><body>
<h1>washout bisect</h1>
<p><strong>{e(result.summary)}</strong></p>
<p>{e(result.test)} / {e(result.metric)} ({e(result.better)} is better), good
<code>{e(result.good[:10])}</code>, bad <code>{e(result.bad[:10])}</code>; intervals at
{100 * (1 - result.alpha):g}%. Cost: {cost.builds} builds ({cost.builds_failed} failed),
{cost.trials} trials in {cost.runs} paired runs, {cost.seconds:.0f} s.</p>
{svg(figure(result), "bisect")}
<h2>Steps</h2>
<table><tr><th>step</th><th>kind</th><th>commit</th><th>subject</th><th>decision</th>
<th>runs</th><th>vs good</th><th>vs bad</th><th>alpha spent</th><th>why</th></tr>{rows}</table>
<h2>Builds</h2>
<table><tr><th>commit</th><th>status</th><th>time</th><th>log sha256</th><th>built files</th>
<th>log tail</th></tr>{builds}</table>
<h2>Notes</h2><ul>{notes}</ul>
<p>Data: <code>{e(result.directory)}</code></p>
</body></html>
"""
