"""Text from trials made safe to print on a terminal.

A trial's output, reason or error message is data: an escape sequence in it
(``\\033]52;...`` writes the clipboard, ``\\033[8m`` hides what follows, ``\\r`` and bidi
controls rewrite a line) must be shown, never obeyed by the terminal.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Every C0 and C1 control character but line feed and tab, DEL, and the Unicode
bidirectional controls (Unicode Standard Annex #9, "Explicit Directional Formatting")."""


def printable(text: str) -> str:
    """``text`` with each control character written as its Python escape (``\\x1b``,
    ``\\r``, ``\\u202e``), line feeds and tabs kept."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
