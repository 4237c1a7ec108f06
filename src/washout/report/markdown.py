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
from typing import TYPE_CHECKING

from washout.analysis.parallel import run_jobs
from washout.report import document, figures
from washout.report.render import Rendered, Settings
from washout.version import __version__

if TYPE_CHECKING:
    from washout.analysis.result import Analysis

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


def _figure_lines(item: document.FigureItem, folder: str) -> list[str]:
    return [
        f"![{md_text(item.title)}]({folder}/{item.key}.png)",
        "",
        f"*{md_text(item.title)}.* {md_text(item.caption)}",
        "",
    ]


def render(analysis: Analysis, settings: Settings) -> Rendered:
    """The ``md`` format: the report of ``analysis`` as Markdown, its figures as PNGs in
    the folder ``STEM-figures`` beside it (linked relatively, so the pair can be moved
    together), drawn on ``settings.workers`` processes."""
    report = document.build_report(analysis, settings.stem)
    folder = f"{settings.stem}-figures"
    items = report.all_figures()
    pngs = run_jobs([partial(_png, item) for item in items], settings.progress, settings.workers)
    files = {f"{folder}/{item.key}.png": png for item, png in zip(items, pngs, strict=True)}
    if report.tests_csv:
        files[report.tests_csv[0]] = report.tests_csv[1].encode()
    return Rendered(markdown_text(report, folder), files, (f"{folder}/*.png",))


def markdown_text(report: document.Report, folder: str) -> str:
    """The Markdown of ``report``, its figures linked in ``folder``."""
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
        lines += [md_text(report.comparison.caption) + ".", ""]
        if report.ranking_heading:
            lines += [md_text(report.ranking_heading) + ":", ""]
        lines += [f"- {md_text(line)}" for line in report.ranking] + (
            [""] if report.ranking else []
        )
    if report.tests is not None:
        lines += ["## Per-test results", ""]
        if report.tests_note:
            lines += [md_text(report.tests_note), ""]
        lines += (md_table(report.tests) if report.tests.rows else ["No test to show."]) + [""]
        if report.legend:
            lines += [md_text(report.legend), ""]
        if report.tests_csv:
            name = report.tests_csv[0]
            lines += [f"Every comparison, every field: [{md_text(name)}]({name}).", ""]
        if report.warnings:
            lines += ["### Warnings", ""]
            lines += [f"- **{md_text(t)}**: {md_text(w)}" for t, w in report.warnings] + [""]
    if report.findings:
        lines += ["## Why: carryover, drift and claims", ""]
        lines += [f"- {md_text(f)}" for f in report.findings] + [""]
    if report.context_findings:
        lines += ["## Context: environment size, working directory, ASLR", ""]
        if report.context is not None:
            lines += md_table(report.context) + ["", md_text(report.context.caption) + ".", ""]
        lines += [f"- {md_text(f)}" for f in report.context_findings] + [""]
    for section in report.sections:
        lines += [f"## {md_text(section.title)}", ""]
        if section.intro:
            lines += [md_text(section.intro), ""]
        for title, table in section.tables:
            lines += [f"### {md_text(title)}", ""] + md_table(table) + [""]
            if table.caption:
                lines += [md_text(table.caption) + ".", ""]
        for item in section.figures:
            lines += _figure_lines(item, folder)
    if report.sweep:
        lines += ["## Parameter space", "", md_text(report.sweep.summary), ""]
        for title, table in report.sweep.tables:
            lines += [f"### {md_text(title)}", ""]
            lines += (md_table(table) if table.rows else ["None."]) + [""]
        for item in report.sweep.figures:
            lines += _figure_lines(item, folder)
    lines += [f"<sub>Made by washout {__version__}.</sub>", ""]
    return "\n".join(lines)
