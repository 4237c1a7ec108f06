"""hyperfine's export files, told apart so that ``washout analyze`` can say what one is
rather than list its columns: hyperfine runs all of one command's runs before the next
command's, and its exports keep a summary (CSV, Markdown) or each command's times (JSON),
so none holds an order that varied, and none can be analysed for one.

The formats are hyperfine's ``--export-json``, ``--export-csv``, ``--export-markdown``,
``--export-asciidoc`` and ``--export-orgmode`` (hyperfine's src/export: ``{"results":
[...]}``; ``command,mean,stddev,median,user,system,min,max``; a table whose header starts
``| Command | Mean``; ``[cols="..."]`` then ``|===``; ``| Command  |  Mean``), which washout
also writes (:mod:`washout.report.hyperfine`).
"""

from __future__ import annotations

EXPORT_OPTIONS = {
    "JSON": "json",
    "CSV": "csv",
    "Markdown": "markdown",
    "AsciiDoc": "asciidoc",
    "Org": "orgmode",
}
"""Each format's name and the ``--export-NAME`` option that writes it."""
CSV_FIELDS = ("command", "mean", "stddev", "median", "user", "system", "min", "max")
"""hyperfine's CSV columns, before any ``parameter_NAME``."""


def export_kind(head: bytes, header: list[str]) -> str | None:
    """``JSON``, ``CSV``, ``Markdown``, ``AsciiDoc`` or ``Org`` for a file that starts as
    hyperfine's export of that format does (``head``: its first bytes; ``header``: its
    first line read as CSV), else None."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{") and text[1:].lstrip().startswith(b'"results"'):
        return "JSON"
    if text.startswith(b'[cols="') and b"|===" in text:
        return "AsciiDoc"
    if tuple(header[: len(CSV_FIELDS)]) == CSV_FIELDS:
        return "CSV"
    if header and header[0].startswith("| Command  |  Mean"):
        return "Org"
    if header and header[0].replace(" ", "").startswith("|Command|Mean"):
        return "Markdown"
    return None
