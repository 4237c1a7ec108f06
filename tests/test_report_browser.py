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
        # Readable on a 1366-px laptop screen: nothing wider than the window.
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[1] == 1366 and pixels.shape[0] > 2000
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


def test_chromium_install_script_is_idempotent_and_quiet() -> None:
    import subprocess

    script = ROOT / "scripts" / "services" / "chromium.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
