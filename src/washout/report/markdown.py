"""The Markdown report: the verdict, what ran, the per-test table and the figures as PNG
files beside it, for papers and pull requests.

Text from the data is escaped twice over: HTML-escaped (GitHub renders inline HTML) and
with Markdown's punctuation backslash-escaped, so a test name can neither inject markup nor
break a table.
"""

from __future__ import annotations

import html
import re
from functools import partial
from pathlib import Path

from washout.data.outputs import write_output
from washout.report import document, figures
from washout.report.parallel import Progress, run_jobs
from washout.version import __version__

_MD_INLINE = re.compile(r"([\\`*_\[\]|~])")
_MD_LINE_START = re.compile(r"^(?:\d+[.)]|[#+=-])")


def md_text(text: object) -> str:
    """Literal text in Markdown (GFM): HTML-escaped first (``&<>`` become entities, so no
    inline HTML), then the punctuation that marks up inline text backslash-escaped, and a
    start that would open a heading or list escaped too; newlines become spaces."""
    s = html.escape(" ".join(str(text).split()), quote=False)
    s = _MD_INLINE.sub(r"\\\1", s)
    return _MD_LINE_START.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1], s)


def md_table(table: document.Table) -> list[str]:
    """A GitHub-flavoured Markdown table; significant rows in bold."""
    lines = [
        "| " + " | ".join(md_text(c) for c in table.columns) + " |",
        "|" + "|".join("---" for _ in table.columns) + "|",
    ]
    for i, row in enumerate(table.rows):
        bold = bool(table.highlight and table.highlight[i])
        cells = [f"**{md_text(c)}**" if bold and c else md_text(c) for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _code_block(text: str) -> list[str]:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "toml", text.rstrip("\n"), fence]


def _png(item: document.FigureItem) -> bytes:
    """One figure drawn as PNG: a job for run_jobs, in whichever process."""
    return figures.png(item.draw())


def _figure_lines(item: document.FigureItem, folder: Path, md_dir: Path) -> list[str]:
    rel = (folder / f"{item.key}.png").relative_to(md_dir).as_posix()
    return [
        f"![{md_text(item.title)}]({rel})",
        "",
        f"*{md_text(item.title)}.* {md_text(item.caption)}",
        "",
    ]


def markdown_text(
    report: document.Report,
    folder: Path,
    md_dir: Path,
    progress: Progress | None = None,
    workers: int | None = None,
) -> str:
    """The Markdown of ``report``; writes its figures as PNGs into ``folder``, drawn on
    ``workers`` processes (:func:`washout.report.parallel.run_jobs`: by default every
    usable core)."""
    items = report.all_figures()
    pngs = run_jobs([partial(_png, item) for item in items], progress, workers)
    for item, png in zip(items, pngs, strict=True):
        write_output(folder / f"{item.key}.png", png)
    lines = [f"# {md_text(report.title)}", ""]
    if report.verdict:
        lines += [f"**{md_text(report.verdict)}**", ""]
    lines += ["## What ran", ""]
    lines += [f"- {md_text(k)}: {md_text(v)}" for k, v in report.facts]
    lines += [""] + [f"> {md_text(n)}" for n in report.notes] + ([""] if report.notes else [])
    if report.workers:
        lines += ["### Workers and provenance", ""] + md_table(report.workers) + [""]
    if report.spec_text:
        lines += ["### Spec", ""] + _code_block(report.spec_text) + [""]
    if report.comparison is not None:
        lines += ["## Comparison", ""] + md_table(report.comparison) + [""]
        lines += [f"- {md_text(line)}" for line in report.ranking] + (
            [""] if report.ranking else []
        )
    if report.tests is not None:
        lines += ["## Per-test results", ""]
        lines += (md_table(report.tests) if report.tests.rows else ["No test to show."]) + [""]
        if report.warnings:
            lines += ["### Warnings", ""]
            lines += [f"- **{md_text(t)}**: {md_text(w)}" for t, w in report.warnings] + [""]
    if report.findings:
        lines += ["## Why: carryover, drift and claims", ""]
        lines += [f"- {md_text(f)}" for f in report.findings] + [""]
    for section in report.sections:
        lines += [f"## {md_text(section.title)}", ""]
        if section.intro:
            lines += [md_text(section.intro), ""]
        for item in section.figures:
            lines += _figure_lines(item, folder, md_dir)
    if report.sweep:
        lines += ["## Parameter space", "", md_text(report.sweep.summary), ""]
        for title, table in report.sweep.tables:
            lines += [f"### {md_text(title)}", ""]
            lines += (md_table(table) if table.rows else ["None."]) + [""]
        for item in report.sweep.figures:
            lines += _figure_lines(item, folder, md_dir)
    lines += [f"<sub>Made by washout {__version__}.</sub>", ""]
    return "\n".join(lines)


def write_markdown(
    path: str | Path, report: document.Report, progress: Progress | None = None
) -> Path:
    """Write the report (:func:`washout.report.document.build_report`) as Markdown to
    ``path`` and its figures as PNGs into the folder ``<stem>-figures`` beside it (linked
    relatively, so the pair can be moved together). Returns ``path``."""
    out = Path(path)
    folder = out.parent / f"{out.stem}-figures"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.png"):
        stale.unlink()
    write_output(out, markdown_text(report, folder, out.parent, progress))
    return out
