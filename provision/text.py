"""Text from the inventory made safe to show: control characters escaped. Pure."""

from __future__ import annotations

import re

# C0 controls (newline and tab included), DEL, C1 controls, and the bidi/format characters
# that reorder or hide text on a terminal.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def unsafe(text: str) -> str | None:
    """The first character `printable` would escape, or None."""
    m = _UNSAFE.search(text)
    return m.group() if m else None


def printable(text: str) -> str:
    """`text` with every control character written as an escape (\\n, \\x1b, \\u202e)."""
    def esc(m: re.Match[str]) -> str:
        c = m.group()
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c) or (
            f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
    return _UNSAFE.sub(esc, text)


def printable_lines(text: str) -> str:
    """Like `printable`, but newlines stay line breaks (messages of several lines)."""
    return "\n".join(printable(line) for line in text.split("\n"))
