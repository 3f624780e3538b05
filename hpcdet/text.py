"""Showing user-supplied text safely: which characters can change what a terminal or a script
line shows or does, and how to show them visibly instead. Standard library only."""

from __future__ import annotations

import unicodedata

# Characters that reorder or hide text on a terminal without being control characters (Cc).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def is_control(ch: str) -> bool:
    """Whether ``ch`` can change what a terminal or a script line shows or does."""
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in _BIDI


def escaped(ch: str) -> str:
    """A control character as a visible escape: ``\\n``, ``\\x1b``, ``\\u202e``."""
    shown = repr(ch)[1:-1]
    return shown if shown.startswith("\\") else f"\\u{ord(ch):04x}"
