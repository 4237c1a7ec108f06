"""Real headless Chromium for the report tests, driven through Playwright.

Playwright (PyPI) talks to the browser over the Chrome DevTools Protocol; it is pointed at
Debian's ``/usr/bin/chromium`` (installed by scripts/services/chromium.sh), so no browser is
downloaded. A :class:`Chromium` runs with a fresh profile directory; each test gets a new page.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """The Chromium executable: $WASHOUT_CHROMIUM, else chromium on PATH."""
    found = (
        os.environ.get("WASHOUT_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    if not found:
        pytest.fail(
            "chromium is not installed: run scripts/services/chromium.sh (scripts/test does)"
        )
    return found


@dataclass
class Page:
    """A loaded page, what it logged, and the requests it tried to make."""

    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions: a clean page has none."""
        return [text for kind, text in self.console if kind == "error"] + self.page_errors


class Chromium:
    """One headless Chromium with a fresh profile; :meth:`open` loads a file in a new page."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        from playwright.sync_api import sync_playwright

        self.profile = tempfile.mkdtemp(prefix="washout-chromium-")
        self.playwright = sync_playwright().start()
        self.context = self.playwright.chromium.launch_persistent_context(
            self.profile,
            executable_path=chromium_path(),
            headless=True,
            args=FLAGS,
            viewport={"width": width, "height": height},
        )

    @contextmanager
    def open(self, path: Path) -> Iterator[Page]:
        """Load a local HTML file in a new page (a 1280-px laptop window) and yield it once
        loaded; console messages, page errors and every request are recorded."""
        page = self.context.new_page()
        seen = Page(page)
        page.on("console", lambda m: seen.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
        page.on("request", lambda r: seen.requests.append(r.url))
        try:
            page.goto(path.resolve().as_uri(), wait_until="load")
            yield seen
        finally:
            page.close()

    def close(self) -> None:
        try:
            self.context.close()
            self.playwright.stop()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    """A Chromium shared by the tests of a module (import this fixture into the module),
    closed after them: Playwright's driver process keeps two threads in the test process
    while it runs, and a process with other threads never forks its report figures
    (tests/test_report_parallel.py)."""
    browser = Chromium()
    try:
        yield browser
    finally:
        browser.close()
