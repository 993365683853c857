"""The one escaping path: text from outside (inventory, journals, zone data, provider
answers, host output, playbooks) made safe to show, and the test of what is refused. Pure.

What is unsafe is decided by Unicode category, not by a list of code points, so a
character added to a category by a later Unicode version is covered too:

- Cc (C0 and C1 controls, DEL: ESC, BEL, CR, the CSI/OSC introducers),
- Cf (format characters: bidi overrides and isolates, zero-width space and joiners, word
  joiner, soft hyphen, Arabic letter mark, interlinear annotation, tag characters, BOM),
- Zl and Zp (line and paragraph separators), Zs other than the plain space (no-break and
  other-width spaces: a name that looks like another name),
- Cs (lone surrogates: undecodable bytes kept by `surrogateescape`), Cn (unassigned: a
  later Unicode may make them format characters),
- and the few other characters Unicode marks Default_Ignorable (invisible when shown)
  that sit in letter or mark categories: Hangul fillers, the combining grapheme joiner,
  Khmer inherent vowels, Mongolian and other variation selectors.

`printable` is the function every printed external string goes through (the consoles of
`provision.commands.common` apply it to every segment again, as a last guard);
`unsafe` is what the inventory, the state files and host output are refused by.
"""

from __future__ import annotations

import re
import unicodedata

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"})
# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties) outside Cc/Cf/Cn: these
# render as nothing although their category says letter or mark.
_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164"
                        "\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]")
# The ASCII fast path: most text is ASCII and needs one regex scan, no per-character lookup.
_ASCII_UNSAFE = re.compile("[\x00-\x1f\x7f]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def is_unsafe(c: str) -> bool:
    """Whether the character `c` is refused in input and escaped in output."""
    if c < "\x80":
        return c < " " or c == "\x7f"
    cat = unicodedata.category(c)
    return cat in _UNSAFE_CATEGORIES or (cat == "Zs" and c != " ") or bool(_IGNORABLE.match(c))


def unsafe(text: str) -> str | None:
    """The first character `printable` would escape, or None."""
    if text.isascii():
        m = _ASCII_UNSAFE.search(text)
        return m.group() if m else None
    return next((c for c in text if is_unsafe(c)), None)


def _escape(c: str) -> str:
    o = ord(c)
    return _NAMED.get(c) or (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000
                             else f"\\U{o:08x}")


def printable(text: str) -> str:
    """`text` with every unsafe character written as an escape (\\n, \\x1b, \\u202e,
    \\U000e0041). Idempotent: an escape is plain ASCII."""
    if text.isascii():
        return _ASCII_UNSAFE.sub(lambda m: _escape(m.group()), text)
    return "".join(_escape(c) if is_unsafe(c) else c for c in text)


def printable_lines(text: str) -> str:
    """Like `printable`, but newlines stay line breaks (messages of several lines)."""
    return "\n".join(printable(line) for line in text.split("\n"))



class PrintableStream:
    """`printable_lines` for text shown as it arrives in pieces (a host's output, chunk by
    chunk): line breaks stay, a CR LF is one line break (a pty's lines), every other unsafe
    character is escaped, a lone CR too (it would let later text overwrite the line). A CR
    that ends a piece waits for the next one; `end` gives it at the end of the stream."""

    def __init__(self) -> None:
        self._cr = False

    def feed(self, text: str) -> str:
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            text, self._cr = text[:-1], True
        return printable_lines(text.replace("\r\n", "\n"))

    def end(self) -> str:
        held, self._cr = self._cr, False
        return printable("\r") if held else ""
