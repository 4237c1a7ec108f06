"""washout run commands."""

from __future__ import annotations

from washout.cli.app import app  # noqa: F401
