"""A value of the wrong shape (a list where a mapping goes, a number where text does), said
in words: what the field takes, from its own type and description, and what was written
(issue 39: `values: [[10.0.0.5]]` on an A record answered "Input should be a valid
string"). Pure."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

# pydantic's error types for a value of another type than the field's
SHAPE_KINDS = frozenset({"string_type", "list_type", "dict_type", "model_type", "int_type",
                         "bool_type", "float_type", "model_attributes_type", "tuple_type"})

# A record's values by its type (RecordDoc's `values` holds any of them): one value, and
# an example of the list.
RECORD_VALUES = {
    "A": ("an IPv4 address", "[10.0.0.5]"),
    "AAAA": ("an IPv6 address", "['2001:db8::5']"),
    "TXT": ("a text", "['v=spf1 -all']"),
    "MX": ("a 'PREFERENCE HOST' text", "['10 mx1.example.org']"),
    "SRV": ("a 'PRIORITY WEIGHT PORT TARGET' text", "['10 5 5060 sip.example.org']"),
    "CAA": ("a 'FLAGS TAG \"VALUE\"' text", "['0 issue \"letsencrypt.org\"']"),
}

# What the inventory's checked text types hold (provision.inventory.fields), by validator:
# one, many.
_CHECKED = {
    "check_ip": ("an IP address (text, e.g. 10.0.0.5)", "IP addresses (text, e.g. 10.0.0.5)"),
    "check_cidr": ("a CIDR (text, e.g. 10.0.0.0/8)", "CIDRs (text, e.g. 10.0.0.0/8)"),
    "check_address": ("an address: an IP or a DNS name (text)", "addresses (text)"),
    "check_name": ("a name (text)", "names (text)"),
    "check_node_name": ("a name (text)", "names (text)"),
    "check_user": ("an account name (text)", "account names (text)"),
    "check_public_key": ("an SSH public key line (text, e.g. 'ssh-ed25519 AAAA... you@laptop')",
                         "SSH public key lines (text, e.g. 'ssh-ed25519 AAAA... you@laptop')"),
    "check_path": ("a path (text)", "paths (text)"),
    "check_abs_path": ("an absolute path (text)", "absolute paths (text)"),
    "check_data_dir": ("an absolute path (text)", "absolute paths (text)"),
    "check_package": ("a package name (text)", "package names (text)"),
    "check_command": ("a command line (text)", "command lines (text)"),
}
_MANY_KEYS = 6  # a nested mapping's keys listed, then '...'


def written(value: Any) -> str:
    """What `value` is, in the inventory's words."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {_short(value)}"
    if isinstance(value, list):
        return f"a list {_short(value)}"
    if isinstance(value, dict):
        return f"a mapping {_short(value)}"
    return "nothing (null)" if value is None else type(value).__name__


def takes(tp: Any) -> str:
    """What a value of type `tp` is, in words."""
    return _join(_one(t, many=False) for t in _forms(tp))


def _plural(tp: Any) -> str:
    return _join(_one(t, many=True) for t in _forms(tp)) or "values"


def _join(forms: Any) -> str:
    return " or ".join(dict.fromkeys(f for f in forms if f))


def _forms(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        checked = [m for m in getattr(tp, "__metadata__", ())
                   if getattr(getattr(m, "func", None), "__name__", "") in _CHECKED]
        return checked or _forms(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [x for a in typing.get_args(tp) for x in _forms(a) if x is not type(None)]
    return [tp]


def _one(tp: Any, many: bool) -> str:
    func = getattr(getattr(tp, "func", None), "__name__", "")
    if func in _CHECKED:
        return _CHECKED[func][many]
    origin = typing.get_origin(tp)
    if origin is list:
        return f"{'lists' if many else 'a list'} of {_plural(typing.get_args(tp)[0])}"
    if origin is dict:
        return (f"{'mappings' if many else 'a mapping'} of names to "
                f"{_plural(typing.get_args(tp)[1])}")
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        keys = sorted((f.alias or n) for n, f in tp.model_fields.items())
        shown = ", ".join(keys[:_MANY_KEYS]) + (", ..." if len(keys) > _MANY_KEYS else "")
        return f"{'mappings' if many else 'a mapping'} with the keys {shown}"
    words = {str: ("text", "texts"), int: ("a whole number", "whole numbers"),
             bool: ("true or false", "true/false values"), float: ("a number", "numbers")}
    return words[tp][many] if tp in words else ""


def shape_message(name: str, field: FieldInfo | None, item: bool, value: Any,
                  record_type: Any = None) -> str | None:
    """The message for a value of the wrong shape at field `name` (`item`: one item of its
    list), or None when the field's type is not known."""
    if name == "values" and record_type in RECORD_VALUES:
        one, example = RECORD_VALUES[record_type]
        if item:
            an = "an" if record_type in ("A", "AAAA", "MX", "SRV") else "a"
            return (f"each item of values is {one} ({an} {record_type} record's values: e.g. "
                    f"{example}); this one is {written(value)}")
        return (f"values is a list: each item {one} (e.g. values: {example}); got "
                f"{written(value)}")
    if field is None:
        return None
    annotation: Any = field.annotation
    if field.metadata:  # pydantic keeps a field's own Annotated[...] validators apart
        annotation = typing.Annotated[(annotation, *field.metadata)]
    if item:
        inner = [typing.get_args(t)[0] for t in _forms(annotation) if typing.get_origin(t) is list]
        if not inner:
            return None
        want = takes(inner[0])
        return f"each item of {name} is {want}; this one is {written(value)}" if want else None
    want = takes(annotation)
    if not want:
        return None
    about = f": {field.description}" if field.description else ""
    return f"{name} is {want}{about} (got {written(value)})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
