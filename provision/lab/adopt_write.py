"""The adopted copy's text: the inventory file with `adopt`'s changes, comments and key
order kept (ruamel.yaml's round trip, as `provision/inventory/writeback.py` does), checked
by loading it back with provision's own loader. Pure: text in, text out."""

from __future__ import annotations

import io
import json
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent

from provision.inventory.build import build
from provision.inventory.errors import InventoryError
from provision.inventory.source import load_yaml_text, tree_of

from .adopt import DELETE, Change, apply_changes


class AdoptError(Exception):
    """The copy could not be written (the message says why)."""


def rewrite(text: str, file: str, changes: tuple[Change, ...]) -> str:
    """`text` with every change made; the result must load as an inventory whose data is
    the original's with the changes, and nothing else, made."""
    try:
        _, ind, bsi = load_yaml_guess_indent(text)
        y = YAML(typ="rt")
        y.preserve_quotes = True
        y.width = 4096                  # never fold a line that was not folded
        y.indent(mapping=bsi or 2, sequence=ind or 2, offset=bsi or 0) if ind else y.indent(2, 2, 0)
        y.explicit_start = text.lstrip().startswith("---")
        doc = y.load(text)
    except YAMLError as e:
        raise AdoptError(f"{file}: ruamel.yaml cannot read it ({e})") from None
    apply_changes(doc, tuple(_styled(doc, c) for c in changes), new_map=CommentedMap)
    out = io.StringIO()
    y.dump(doc, out)
    new = out.getvalue()
    try:
        before = load_yaml_text(text, file).data
        after = load_yaml_text(new, file)
    except InventoryError as e:
        raise AdoptError(f"{file}: the copy does not load ({e})") from None
    expect: Any = json.loads(json.dumps(before))  # an alias's target becomes its own copy
    apply_changes(expect, tuple(c for c in changes if c.value is not DELETE) +
                  tuple(c for c in changes if c.value is DELETE))
    if json.loads(json.dumps(after.data)) != expect:
        raise AdoptError(f"{file}: rewritten, the copy would say more than the lab's addresses "
                         "and keys (a YAML alias shared by a changed field?): not written")
    after.tree = str(tree_of(file))  # the copy's own tree: where its TSIG key lies
    try:
        build(after)
    except InventoryError as e:
        first = e.problems[0] if e.problems else None
        why = f"{first.file}:{first.line}: {first.message}" if first else str(e)
        raise AdoptError(f"the adopted copy does not validate ({why})") from None
    return new


def _styled(doc: Any, change: Change) -> Change:
    """A new list written the way the list it replaces was (`[a, b]` stays a flow list)."""
    if not isinstance(change.value, list):
        return change
    old: Any = doc
    for key in change.path:
        try:
            old = old[key]
        except (KeyError, IndexError, TypeError):
            return change
    if not isinstance(old, CommentedSeq) or not old.fa.flow_style():
        return change
    seq = CommentedSeq(change.value)
    seq.fa.set_flow_style()
    return Change(change.path, seq, change.why)
