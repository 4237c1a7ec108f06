"""The HTML report in real headless Chromium: it loads offline with no console errors, every
figure has a size, it fits a laptop screen and prints; hostile names stay text.

Set WASHOUT_UPDATE_DOCS=1 to also refresh docs/report-memcached.png from the screenshot.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import matplotlib.image
import pytest
from browser import Chromium, chromium  # noqa: F401 (the fixture)
from conftest import MEMCACHED
from simulate_longformat import simulate
from test_health_filter import throttled  # noqa: F401 (the fixture)
from test_report_sweep import silo_sweep

from washout.analysis.compute import analyze, sweep_analysis
from washout.analysis.result import Options, Recorded, Worker
from washout.report.render import Settings, renderer

REPORT = Options(carryover=None, drift=None, describe=True)
"""What ``washout report`` asks of the analysis."""

pytestmark = pytest.mark.chromium

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "<script>alert(1)</script> \"double\" 'single' & $x$"
HOSTILE_METRIC = "p99 <b>ms</b>"

FIGURE_SIZES = """() => Array.from(document.querySelectorAll('figure svg')).map(s => {
  const r = s.getBoundingClientRect(); return [s.closest('figure').id, r.width, r.height]; })"""
WIDER_THAN_THE_WINDOW = """() => [document.documentElement.scrollWidth - window.innerWidth]
  .concat(Array.from(document.querySelectorAll('.table-wrap, table, figure, pre'))
    .map(e => e.scrollWidth - e.clientWidth)).filter(d => d > 1)"""
"""How far the page, or any table (a hidden column), figure or block, is wider than it
shows: nothing, when it fits the window."""
LABELS_OUTSIDE = """() => {
  const out = [];
  for (const svg of document.querySelectorAll('figure svg')) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.width && (r.left < box.left - 1 || r.right > box.right + 1
                      || r.top < box.top - 1 || r.bottom > box.bottom + 1))
        out.push([svg.closest('figure').id, t.textContent]);
    }
  }
  return out;
}"""
"""Every text of a figure (titles, axis labels, tick labels, legends) whose box reaches
outside the figure: a clipped label."""
TICKS_OVERLAPPING = """() => {
  const out = [];
  for (const svg of document.querySelectorAll('figure svg')) {
    for (const axis of svg.querySelectorAll('g[id*="matplotlib.axis_"]')) {
      const boxes = Array.from(axis.querySelectorAll('g[id*="tick_"] text'))
        .map(t => [t.textContent, t.getBoundingClientRect()]).filter(([, r]) => r.width);
      for (let i = 0; i < boxes.length; i++)
        for (let j = i + 1; j < boxes.length; j++) {
          const [a, r] = boxes[i], [b, q] = boxes[j];
          if (r.left < q.right - 1 && q.left < r.right - 1 && r.top < q.bottom - 1
              && q.top < r.bottom - 1) out.push([svg.closest('figure').id, a, b]);
        }
    }
  }
  return out;
}"""
"""Tick labels of one axis that overlap each other (unreadable)."""


def assert_fits_and_reads(page) -> None:  # noqa: ANN001 (a Playwright page)
    """The page fits the 1280-px window with nothing hidden, and every figure's labels are
    whole and apart."""
    assert page.evaluate("window.innerWidth") == 1280
    assert page.evaluate(WIDER_THAN_THE_WINDOW) == []
    assert page.evaluate(LABELS_OUTSIDE) == []
    assert page.evaluate(TICKS_OVERLAPPING) == []


def _report(tmp_path: Path, name: str, html: str) -> Path:
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def memcached_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The memcached case study's report (the paper's Table 3), rendered once."""
    analysis = analyze(MEMCACHED, REPORT)
    return _report(
        tmp_path_factory.mktemp("memcached"),
        "report.html",
        renderer("html")(analysis, Settings()).text,
    )


def test_memcached_report_renders_in_chromium(
    chromium: Chromium, memcached_report: Path, tmp_path: Path
) -> None:
    path = memcached_report

    with chromium.open(path) as seen:
        page = seen.page
        assert seen.errors == []
        # Offline: the page asks for nothing but itself.
        assert seen.requests == [path.resolve().as_uri()]
        sizes = page.evaluate(FIGURE_SIZES)
        # Figures 1-4, the overview of every trial, and a trials figure for the one
        # flagged test, get_hits (one worker: no per-worker figures).
        assert [key for key, _, _ in sizes] == [
            "fig-ci-medians",
            "fig-kw-significance",
            "fig-delta-pct",
            "fig-ci-cases",
            "fig-overview-0",
            "fig-trials-0",
        ]
        assert "get_hits" in page.inner_text("#fig-trials-0 figcaption")
        assert all(w > 200 and h > 100 for _, w, h in sizes), sizes
        verdict = page.inner_text("#verdict")
        assert verdict.startswith("Order matters: 1 of 3")
        assert "./get_hits_test.sh" in verdict
        rows = page.locator("#tests tbody tr")
        assert rows.count() == 3
        assert "flag" in (rows.nth(2).get_attribute("class") or "")  # get_hits significant
        assert "no spec" in page.inner_text("#what-ran")
        assert_fits_and_reads(page)
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[1] == 1280 and pixels.shape[0] > 2000
    assert pixels.std() > 0.05  # not a blank page
    if os.environ.get("WASHOUT_UPDATE_DOCS"):
        (ROOT / "docs").mkdir(exist_ok=True)
        (ROOT / "docs" / "report-memcached.png").write_bytes(shot.read_bytes())


def test_report_prints(chromium: Chromium, memcached_report: Path) -> None:
    with chromium.open(memcached_report) as seen:
        page = seen.page
        page.emulate_media(media="print")
        assert page.evaluate("getComputedStyle(document.querySelector('nav')).display") == "none"
        assert all(w > 100 and h > 50 for _, w, h in page.evaluate(FIGURE_SIZES))
        pdf = page.pdf(format="A4")
    assert pdf.startswith(b"%PDF")
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert 3 <= pages <= 12


def test_hostile_names_stay_text(chromium: Chromium, tmp_path: Path) -> None:
    trials = simulate(
        tests=(HOSTILE, "plain"),
        runs=8,
        workers=("w1", "w2"),
        metrics=(HOSTILE_METRIC,),
        random_factor={HOSTILE: 1.2},
        seed=3,
    )
    analysis = analyze(trials, REPORT)
    assert analysis.verdict == "order-matters"
    recorded = Recorded(
        name=HOSTILE,
        spec_text=f'[[test]]\nname = "{HOSTILE}"\n',
        workers=(Worker(HOSTILE, "h", "f", False),),
    )
    html = renderer("html")(dataclasses.replace(analysis, recorded=recorded), Settings()).text

    # In the source: no script element anywhere, the name only in escaped form.
    assert "<script" not in html.lower()
    assert "alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>ms</b>" not in html

    path = _report(tmp_path, "hostile.html", html)
    with chromium.open(path) as seen:
        page = seen.page
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.reload(wait_until="load")
        assert seen.errors == []
        assert dialogs == []
        assert page.evaluate("document.scripts.length") == 0
        assert page.evaluate("document.querySelectorAll('b').length") == 0
        assert page.title() == f"washout report: {HOSTILE}"
        names = page.locator("#tests tbody th").all_inner_texts()
        assert names.count(HOSTILE) == 1
        assert HOSTILE in page.inner_text("#verdict")
        assert HOSTILE in page.inner_text("pre.spec")
        svg_text = page.evaluate(
            "Array.from(document.querySelectorAll('svg text')).map(t => t.textContent)"
        )
        assert any(HOSTILE in t for t in svg_text)  # titles, $x$ not read as math
        assert any(HOSTILE_METRIC in t for t in svg_text)  # axis labels
        assert_fits_and_reads(page)
        # Several workers: figure 6 is there, one per test.
        keys = [k for k, _, _ in page.evaluate(FIGURE_SIZES)]
        assert [k for k in keys if k.startswith("fig-workers")] == [
            "fig-workers-0",
            "fig-workers-1",
        ]


def test_sweep_report_in_chromium(chromium: Chromium, tmp_path: Path) -> None:
    settings, sweep = silo_sweep()
    path = tmp_path / "sweep.html"
    analysis = sweep_analysis(sweep, settings, "silo-ycsb")
    path.write_text(renderer("html")(analysis, Settings()).text, encoding="utf-8")
    with chromium.open(path) as seen:
        assert seen.errors == []
        sizes = seen.page.evaluate("""() => Array.from(document.querySelectorAll('figure svg'))
            .map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; })""")
        assert len(sizes) == 3 and all(w > 200 and h > 100 for w, h in sizes)
        assert_fits_and_reads(seen.page)


@pytest.mark.parametrize("example", ["pagecache-keep", "numpy", "sysbench", "redis"])
def test_the_examples_reports_fit_and_read(
    chromium: Chromium, tmp_path: Path, example: str
) -> None:
    """The examples' trials (docs/examples): pagecache-keep has an effect a hundred times
    the others' (symmetric-log axes), redis 8 tests x 4 metrics (a wide table)."""
    analysis = analyze(ROOT / "docs" / "examples" / f"{example}.csv", REPORT)
    path = _report(tmp_path, f"{example}.html", renderer("html")(analysis, Settings()).text)
    with chromium.open(path) as seen:
        assert seen.errors == []
        assert_fits_and_reads(seen.page)


def test_a_report_with_unhealthy_trials_fits_and_reads(
    chromium: Chromium,
    throttled: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Its Trial health section: the unhealthy trials and the strata as tables, the
    affected test's trials with the unhealthy ones ringed."""
    analysis = analyze(throttled, REPORT)
    path = _report(tmp_path, "health.html", renderer("html")(analysis, Settings()).text)
    with chromium.open(path) as seen:
        assert seen.errors == []
        assert_fits_and_reads(seen.page)
        assert seen.page.locator("#trial-health table").count() == 2
        assert seen.page.locator("#trial-health figure svg").count() == 1


def test_many_tests_are_summarised_with_the_whole_table_as_csv(
    chromium: Chromium, tmp_path: Path
) -> None:
    """60 tests x 2 metrics: the report summarises across them (the share where order
    matters, the distributions of effects and p-values), details the 30 most affected, and
    links every comparison as CSV from the page itself."""
    import base64
    import csv
    import io

    names = tuple(f"t{i:02d}" for i in range(60))
    trials = simulate(
        tests=names,
        runs=6,
        metrics=("wall", "rps"),
        random_factor={n: 1.3 for n in names[:20]},
        seed=5,
    )
    analysis = analyze(trials, REPORT)
    path = _report(tmp_path, "many.html", renderer("html")(analysis, Settings()).text)
    with chromium.open(path) as seen:
        page = seen.page
        assert seen.errors == []
        keys = [k for k, _, _ in page.evaluate(FIGURE_SIZES)]
        assert keys[:5] == [
            "fig-effects",
            "fig-p-values",
            "fig-ci-cases",
            "fig-ci-medians",
            "fig-delta-pct",
        ]
        assert page.locator("#tests tbody tr").count() == 30
        assert "The 30 most affected of 120 comparisons" in page.inner_text("#tests")
        href = page.get_attribute("#tests a[download]", "href")
        assert href and href.startswith("data:text/csv;charset=utf-8;base64,")
        rows = list(csv.DictReader(io.StringIO(base64.b64decode(href.split(",", 1)[1]).decode())))
        assert len(rows) == 120 and {r["metric"] for r in rows} == {"wall", "rps"}
        assert_fits_and_reads(page)


def test_chromium_install_script_is_idempotent_and_quiet() -> None:
    import subprocess

    script = ROOT / "scripts" / "services" / "chromium.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
