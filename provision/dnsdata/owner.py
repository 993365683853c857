"""Owner ids: which inventory an ownership marker belongs to. Pure, no I/O.

Several inventories (two teams, or provision beside other tooling) may share one zone.
Each ownership marker names the inventory that wrote it (``"provision owns A
owner=ml-team"``), and a plan never changes or deletes a record another owner's marker
claims. The owner id is ``dns.owner`` in the inventory; by default it is derived from
the inventory's *name* — the file name without ``.yml``/``.yaml``, or the directory's
name for a directory inventory — never from the absolute path, which differs between
laptops and CI while the inventory is the same.

An owner id is one DNS label of letters, digits and '-' (lowercase, 1-63 octets, no '-'
at either end): it must survive every provider's TXT handling unchanged, and a marker's
owner (anyone who can write the zone can write one) is checked to the same rule before
it decides anything.
"""

from __future__ import annotations

import re

from provision.text import printable

MAX_OWNER = 63
FALLBACK = "provision"      # an inventory name with no letter or digit in it
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_NOT_LDH = re.compile(r"[^a-z0-9]+")
RULE = ("one DNS label: lowercase letters, digits and '-', 1 to 63 characters, not "
        "starting or ending with '-'")


def problem(owner: object) -> str:
    """Why `owner` is not an owner id, or "" when it is (the rule in words)."""
    if not isinstance(owner, str):
        return f"{type(owner).__name__} where an owner id (text) was expected"
    if not owner:
        return f"empty; an owner id is {RULE}"
    if len(owner) > MAX_OWNER:
        return f"{len(owner)} characters long; an owner id is {RULE}"
    if not _LABEL.match(owner):
        return f"'{printable(owner[:80])}' is not {RULE}"
    return ""


def default_owner(inventory_name: str) -> str:
    """The owner id of an inventory that sets no ``dns.owner``: its name (a file's stem
    or a directory's name) as a DNS label (lowercased, every run of other characters
    one '-')."""
    slug = _NOT_LDH.sub("-", inventory_name.lower()).strip("-")
    slug = slug[:MAX_OWNER].rstrip("-")
    return slug or FALLBACK
