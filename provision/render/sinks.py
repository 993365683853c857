"""Quoting at every sink: what a value may look like where it lands (pure).

The inventory is validated field by field when it loads; these filters check again, at
the place each value is written, with the rules of that file format. A value that
slipped past validation (a new field, a new template) fails the render instead of
changing what the file means. Used as Jinja filters by `provision.render.env`.
"""

from __future__ import annotations

import ipaddress
import re

from provision.errors import RenderError
from provision.text import printable

# ssh_config: a token is split on whitespace, quotes change it, % expands tokens.
_SSH = re.compile(r"^[A-Za-z0-9._~/@:+,=\[\]-]+$")
# iptables-restore: one rule per line, words split on whitespace, quotes group words.
_IPT = re.compile(r"^[A-Za-z0-9.:/+_-]+$")
# systemd unit values: % specifiers and $ variables expand, a trailing backslash continues
# the line, quotes group words in Exec lines; a leading + ! @ - : changes privileges.
_UNIT_PREFIX = re.compile(r"^[+!@:-]")


# deb822 (apt .sources): a field's value is split on whitespace; '#' starts a comment and a
# line starting with whitespace continues the field.
_DEB822 = re.compile(r"^[A-Za-z0-9._~/:+=@\[\]-]+$")


def deb822_word(value: object) -> str:
    """One word of a deb822 field (a URI, a suite, a component, a path)."""
    text = str(value)
    if not _DEB822.match(text):
        raise RenderError(f"refusing to write {printable(text)!r} into an apt .sources file "
                          "(only letters, digits and . _ ~ / : + = @ [ ] - are safe there)")
    return text


_APT_VERSION = re.compile(r"^[0-9*][A-Za-z0-9.+~:*-]{0,127}$")


def apt_version(value: object) -> str:
    """A Debian version or glob in an apt preferences file's `Pin: version` line."""
    text = str(value)
    if not _APT_VERSION.match(text):
        raise RenderError(f"refusing to write {printable(text)!r} into an apt preferences file "
                          "(only a Debian version: letters, digits and . + ~ : - *)")
    return text


def comment(value: object) -> str:
    """Text for a `#` comment line: one line, control characters escaped."""
    return printable(str(value))


def ssh_token(value: object) -> str:
    """One ssh_config argument (a name, an address, a path, a user)."""
    text = str(value)
    if not _SSH.match(text):
        raise RenderError(f"refusing to write {printable(text)!r} into ssh_config "
                          "(only letters, digits and . _ ~ / @ : + , = [ ] - are safe there)")
    return text


def ipt_source(value: object) -> str:
    """An iptables `-s` argument: a network in CIDR notation, nothing else."""
    text = str(value)
    if not _IPT.match(text):
        raise RenderError(f"refusing to write {printable(text)!r} as an iptables source")
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError:
        raise RenderError(f"refusing to write {printable(text)!r} as an iptables source "
                          "(not a network)") from None
    if str(net) != text:
        raise RenderError(f"refusing to write {text!r} as an iptables source (not canonical: {net})")
    return text


def ipt_comment(value: object) -> str:
    """An iptables `--comment "..."` text: one line inside double quotes, at most 256
    characters (the kernel's limit); no quote, backslash or control character, which would
    end the word early or start another rule."""
    text = str(value)
    if len(text) > 256 or any(c in '"\\' or not c.isprintable() for c in text):
        raise RenderError(f"refusing to write {printable(text)!r} as an iptables comment "
                          "(at most 256 printable characters, no quote or backslash)")
    return text


def unit_value(value: object) -> str:
    """A systemd unit setting's value: one line, no specifier, variable, quote, escape or
    privilege prefix that would change its meaning."""
    text = str(value)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise RenderError(f"refusing to write {printable(text)!r} into a unit (control characters)")
    for bad in ("%", "$", "\\", '"', "'"):
        if bad in text:
            raise RenderError(f"refusing to write {text!r} into a unit ({bad!r} changes its meaning)")
    if _UNIT_PREFIX.match(text):
        raise RenderError(f"refusing to write {text!r} into a unit (a leading {text[0]!r} "
                          "changes how systemd runs it)")
    if any(w == ";" for w in text.split()):
        raise RenderError(f"refusing to write {text!r} into a unit (a lone ';' starts another command)")
    return text


def unit_text(value: object) -> str:
    """Free text in a unit (Description=): specifiers escaped, one line."""
    return printable(str(value)).replace("%", "%%").replace("\\", "\\\\")
