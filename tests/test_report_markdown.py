"""The Markdown report and the ``washout report`` command, on published data and on a real
experiment's store."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from conftest import MEMCACHED, NPBENCH, washout
from simulate_longformat import simulate

from washout.analysis.compute import analyze
from washout.analysis.result import Analysis, Options, Recorded
from washout.report.markdown import md_text
from washout.report.render import Progress, Settings, renderer, write

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPORT = Options(carryover=None, drift=None, describe=True)
"""What ``washout report`` asks of the analysis."""


def report(
    analysis: Analysis, out: Path, fmt: str = "md", progress: Progress | None = None
) -> Path:
    """``analysis`` rendered as ``washout report`` renders it, written to ``out``."""
    return write(renderer(fmt)(analysis, Settings(stem=out.stem, progress=progress)), out)


def _linked_images(md: Path) -> list[Path]:
    return [md.parent / link for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md.read_text())]


def test_markdown_report_of_npbench(tmp_path: Path) -> None:
    analysis = analyze(NPBENCH, REPORT)
    out = report(analysis, tmp_path / "npbench.md")
    text = out.read_text()
    assert text.startswith("# washout report\n")
    # Published Table 4: nothing significant after Bonferroni (softmax p = 0.03 > 0.05/3).
    assert "**No evidence that order matters" in text
    comparison, per_test = text.split("## Per-test results", 1)
    assert "## Comparison" in comparison and "| ./is.D.sh |" in comparison  # hyperfine's table
    table = [line for line in per_test.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 3
    softmax = next(line for line in table if "softmax" in line)
    [t] = [t for t in analysis.order.tests if "softmax" in t.test]  # type: ignore[union-attr]
    assert "| 3 inconclusive |" in softmax
    assert f"| {md_text(f'{t.delta_median_pct:+.2f}')} |" in softmax
    images = _linked_images(out)
    assert [p.name for p in images] == [
        "ci-medians.png",
        "kw-significance.png",
        "delta-pct.png",
        "ci-cases.png",
        "overview-0.png",
        "trials-0.png",  # softmax alone is flagged: not significant, yet CI case 3
    ]
    assert "![./npBench-softmax.sh: trials by position and time (inconclusive, CI case 3)]" in text
    for image in images:
        assert image.parent == tmp_path / "npbench-figures"
        assert image.read_bytes().startswith(PNG_MAGIC) and image.stat().st_size > 5000


def test_a_new_report_replaces_its_old_figures_only(tmp_path: Path) -> None:
    """The figures of an earlier report of the same name go (one it no longer draws would
    stay, linked to nothing), and nothing else in their folder: every file there was
    removed, a user's notes and a database among them."""
    trials = simulate(tests=("a", "b"), runs=6, seed=4)
    folder = tmp_path / "r-figures"
    folder.mkdir()
    (folder / "old.png").write_bytes(PNG_MAGIC)
    (folder / "notes.txt").write_text("mine")
    (folder / "kept.db").write_bytes(b"SQLite format 3\x00")
    out = report(analyze(trials, REPORT), tmp_path / "r.md")
    assert not (folder / "old.png").exists()
    assert (folder / "notes.txt").read_text() == "mine" and (folder / "kept.db").exists()
    assert {p.name for p in _linked_images(out)} == {p.name for p in folder.glob("*.png")}


def test_markdown_escapes_names(tmp_path: Path) -> None:
    hostile = "<img src=x onerror=alert(1)> | *bold* [link](http://x)"
    trials = simulate(tests=(hostile, "b"), runs=6, seed=4)
    analysis = analyze(trials, REPORT)
    recorded = Recorded(spec_text='name = "```"\n')
    out = report(dataclasses.replace(analysis, recorded=recorded), tmp_path / "r.md")
    text = out.read_text()
    assert "<img" not in text
    assert md_text(hostile) in text
    # The escaped pipe keeps the table to its columns.
    row = next(line for line in text.splitlines() if line.startswith("| &lt;img"))
    assert len(re.findall(r"(?<!\\)\|", row)) == len(
        re.findall(r"(?<!\\)\|", text.splitlines()[text.splitlines().index(row) - 2])
    )
    assert "````toml" in text  # the fence outgrows the backticks in the spec
    assert md_text("# x") == "\\# x" and md_text("1. x") == "1\\. x"


def test_cli_writes_html_and_markdown(tmp_path: Path) -> None:
    proc = washout("report", MEMCACHED, "-o", tmp_path / "m.html")
    assert proc.stdout.strip() == f"{tmp_path / 'm.html'}: order-matters"
    html = (tmp_path / "m.html").read_text()
    # Figures 1-4, the overview, and trials by position and time for get_hits alone.
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg ") == 6
    assert "all_exp_results.csv (OrderSage results CSV)" in html
    # Markdown from a long-format CSV (one test: a quick render, and no order analysis).
    simulate(tests=("only",), runs=6, seed=5).to_csv(tmp_path / "long.csv", index=False)
    washout("report", tmp_path / "long.csv", "--format", "md", "-o", tmp_path / "n.md")
    text = (tmp_path / "n.md").read_text()
    assert "- source: long.csv (long-format CSV)" in text
    assert "**No order analysis: one test, so every order is the same order" in text
    images = _linked_images(tmp_path / "n.md")
    assert len(images) == 1 and all(p.is_file() for p in images)  # every trial


def test_cli_bad_source_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    proc = washout("report", bad, "-o", tmp_path / "x.html", check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "bad.csv" in proc.stderr
    assert not (tmp_path / "x.html").exists()


def test_cli_report_of_a_store_shows_what_ran(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    washout(
        "run", "true", "false", "--runs", "12", "--seed", "5", "--db", db, "--quiet", check=False
    )  # each command 12 times: 6 runs per order kind
    washout("report", db, "-o", tmp_path / "s.html")
    html = (tmp_path / "s.html").read_text()
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", html))
    assert facts["seed"] == "5"
    assert facts["runs per order kind"] == "6"
    assert facts["runs"] == "6 fixed, 6 random"
    assert facts["unsuccessful trials"] == "12 failed"
    assert facts["unsuccessful trials in the store"] == "12"
    assert '<pre class="spec">' in html  # the stored spec
    assert "<h3>Workers and provenance</h3>" in html
    assert re.search(r"<th scope=\"row\">local</th>.*?<td>yes</td>", html, re.S)
    assert "no successful fixed and random-order trials" in html  # `false` never succeeds


def test_progress_hears_every_figure(tmp_path: Path) -> None:
    trials = simulate(tests=("a", "b"), runs=6, seed=9)
    analysis = analyze(trials, Options(describe=True))
    seen: list[tuple[int, int]] = []
    report(analysis, tmp_path / "r.html", "html", lambda d, n: seen.append((d, n)))
    assert seen == [(i, 5) for i in range(1, 6)]  # figures 1-4 and the overview
    seen.clear()
    report(analysis, tmp_path / "r.md", "md", lambda d, n: seen.append((d, n)))
    assert seen == [(i, 5) for i in range(1, 6)]


def test_trials_figures_only_for_flagged_tests(tmp_path: Path) -> None:
    """One overview per metric; a trials figure of its own for a test whose order matters
    and for one that drifts, none for the tests the analysis does not flag."""
    trials = simulate(
        tests=("a", "b", "c", "d", "e"),
        runs=12,
        metrics=("wall", "p99"),
        random_factor={"c": 1.3},
        drift_per_position={"e": 0.05},
        seed=11,
    )
    out = report(analyze(trials, REPORT), tmp_path / "r.md")
    text = out.read_text()
    images = [p.name for p in _linked_images(out)]
    assert images[:6] == [
        "ci-medians.png",
        "kw-significance.png",
        "delta-pct.png",
        "ci-cases.png",
        "overview-0.png",
        "overview-1.png",
    ]
    titles = re.findall(r"!\[([^\]]*): trials by position and time", text)
    assert sorted(titles) == ["c · p99", "c · wall", "e · p99", "e · wall"]
    assert images[6:] == [f"trials-{i}.png" for i in range(4)]
    assert "order matters" in text and "drift with its position in the run" in text
    assert "for the 4 flagged tests of 10" in text and "the other 6 are in the overviews" in text


def test_at_most_eight_trials_figures_the_most_significant_first() -> None:
    from washout.report.document import DETAIL_FIGURES, flagged_tests, order_sections

    tests = tuple("abcdefghij")
    factors = {t: 1.1 + 0.05 * i for i, t in enumerate(tests)}  # j differs the most
    trials = simulate(tests=tests, runs=10, random_factor=factors, seed=12)
    analysis = analyze(trials)
    flags = flagged_tests(analysis)
    assert len(flags) == 10 and [f.p for f in flags] == sorted(f.p for f in flags)
    trials_section = order_sections(analysis)[1]
    detail = [item for item in trials_section.figures if item.key.startswith("trials-")]
    assert [item.title.split(":")[0] for item in detail] == [f.test for f in flags[:DETAIL_FIGURES]]
    rest = ", ".join(f.test for f in flags[DETAIL_FIGURES:])
    assert f"2 more flagged ({rest}) are only in the overviews" in trials_section.intro
