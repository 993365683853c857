"""pydantic's validation errors, located and said in words: each a `Problem` at the field's
file:line:col, one per field (a union's branches merged), with what the field allows."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from .. import shapes
from ..errors import Problem
from ..source import FieldPath, SourceDoc, dotted


def clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[FieldPath, bool]:
    """Drop pydantic's union-branch tags from `loc`; report whether it ended on a dict key."""
    path: list[str | int] = []
    node = data
    is_key = False
    for part in loc:
        if part == "[key]":
            is_key = True
            continue
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and part == "from_" and "from" in node:
            path.append("from")
            node = node["from"]
        elif isinstance(part, str) and not (isinstance(node, dict) and part.isidentifier()
                                            and _looks_like_field(part)):
            continue  # a union branch tag such as 'function-after[...]' or 'list[...]'
        else:
            path.append(part)  # a missing field
            node = None
    return tuple(path), is_key


def _looks_like_field(part: str) -> bool:
    return part.islower() or "_" in part


def _unwrap(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [x for a in typing.get_args(tp) for x in _unwrap(a)]
    return [tp]


def model_at(path: FieldPath, schema: type[BaseModel], data: Any) -> type[BaseModel] | None:
    """The schema model that holds the fields at `path` (to suggest known keys); of a
    union (a zone's providers), the branch whose `provider` the data names."""
    current: list[Any] = [schema]
    node = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
        nxt: list[Any] = []
        for tp in current:
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                for name, f in tp.model_fields.items():
                    if (f.alias or name) == part:
                        nxt.extend(_unwrap(f.annotation))
            elif typing.get_origin(tp) is dict:
                nxt.extend(_unwrap(typing.get_args(tp)[1]))
            elif typing.get_origin(tp) is list and isinstance(part, int):
                nxt.extend(_unwrap(typing.get_args(tp)[0]))
        current = nxt
    models = [tp for tp in current if isinstance(tp, type) and issubclass(tp, BaseModel)]
    provider = node.get("provider") if isinstance(node, dict) else None
    chosen = [tp for tp in models if "provider" in tp.model_fields
              and typing.get_args(tp.model_fields["provider"].annotation) == (provider,)]
    return next(iter(chosen or models), None)


def _message(err: Any, path: FieldPath, is_key: bool, schema: type[BaseModel], data: Any) -> str:
    kind = err["type"]
    msg: str = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    if kind == "extra_forbidden":
        model = model_at(path[:-1], schema, data)
        retired = getattr(model, "retired", {}).get(str(path[-1])) if model else None
        if retired:
            return f"'{path[-1]}' is no longer accepted: {retired}"
        refused = getattr(model, "refused", {}).get(str(path[-1]).lower()) if model else None
        if refused:
            return f"'{path[-1]}' is refused: {refused}"
        known = sorted((f.alias or n) for n, f in model.model_fields.items()) if model else []
        close = difflib.get_close_matches(str(path[-1]), known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown key '{path[-1]}'{hint} (allowed: {', '.join(known)})"
    if path and path[-1] == "expose":
        return f"expose must be 'tunnel', 'none' or {{from: [CIDR, ...]}} (got {_short(value)})"
    if path and path[-1] in _FORMS and kind.endswith("_type"):
        # a value of none of a union's forms: say every form, not the first branch's type
        return f"{path[-1]} is {_FORMS[str(path[-1])]} (got {type(value).__name__} {_short(value)})"
    if kind == "missing":
        return "required field is missing"
    if kind == "string_pattern_mismatch" and path:
        # a list item (keep_groups[0]) is named by its list, and held by the list's holder
        item = isinstance(path[-1], int) and len(path) > 1
        key, holder_path = (path[-2], path[:-2]) if item else (path[-1], path[:-1])
        holder = model_at(holder_path, schema, data)
        words = {**_PATTERN_WORDS, **getattr(holder, "pattern_words", {})}.get(str(key))
        if words:
            return f"{_short(value)} is not {words}"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return f"{value!r} is out of range ({msg.lower()})"
    if kind in ("too_short", "too_long"):
        return msg
    if is_key:
        return f"invalid key {path[-1]!r}: {msg}" if path else msg
    if kind == "int_type" and isinstance(value, str) and value.strip().isdigit():
        # '８０００' or '٨٠٠٠' (other scripts' digits), or a quoted "8000": a number here is
        # written unquoted, with 0-9
        how = ("the digits 0-9 (this is written with other digits)" if not value.isascii()
               else "no quotes")
        return f"{_short(value)} is text, not a number: write it with {how}"
    if kind in shapes.SHAPE_KINDS and path:
        said = _shape(path, schema, data, value)
        if said:
            return said
    if kind == "model_type":  # "... or instance of MemberServiceDoc": the class is ours
        msg = "Input should be a mapping (key: value)"
    if kind.endswith("_type") and value is not None:
        return f"{msg} (got {type(value).__name__} {_short(value)})"
    return msg


def _shape(path: FieldPath, schema: type[BaseModel], data: Any, value: Any) -> str | None:
    """A value of the wrong shape, in words: what the field takes (provision.inventory.shapes)."""
    item = isinstance(path[-1], int)
    fpath = path[:-1] if item else path
    if not fpath or not isinstance(fpath[-1], str):
        return None
    holder = model_at(fpath[:-1], schema, data)
    if holder is None:  # an entry of a mapping of names: the entry's own model
        model = None if item else model_at(fpath, schema, data)
        return (f"'{fpath[-1]}' is {shapes.takes(model)} (got {shapes.written(value)})"
                if model is not None else None)
    field = next((f for n, f in holder.model_fields.items() if (f.alias or n) == fpath[-1]), None)
    node: Any = data
    for part in fpath[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    record_type = node.get("type") if isinstance(node, dict) and fpath[-1] == "values" else None
    return shapes.shape_message(str(fpath[-1]), field, item, value, record_type)


# Fields that take one of several forms (a discriminated union: the form written is the
# one checked), in words, for a value written in none of them.
_FORMS = {
    "from_hosts": "true, false, or a mapping {roles, name, ttl}",
    "per_user": "true, false, a list of team members, or a mapping member -> "
                "{port, gpus, memory_max}",
}


# What the schema's patterns allow, in words (the patterns stay in the JSON Schema for
# editors; a user reading an error should not have to read a regular expression). A DNS
# provider's own fields say it in their `Settings.pattern_words`.
_PATTERN_WORDS = {
    "region": "an AWS region name: lowercase words and a number joined by '-', e.g. us-east-1 "
              "or eu-central-2",
    "vpc": "a VPC id: 'vpc-' and 1 to 17 lowercase hex digits, e.g. vpc-0abc1234",
    "id": "a security group id: 'sg-' and 8 to 17 lowercase hex digits, e.g. sg-0123abcd",
    "keep_groups": "a security group id: 'sg-' and 8 to 17 lowercase hex digits, e.g. sg-0123abcd",
    "instance_id": "an EC2 instance id: 'i-' and 8 to 17 lowercase hex digits, e.g. i-0123abcd",
    "description": "an AWS rule description: at most 255 letters, digits, spaces and "
                   "._-:/()#,@[]+=&;{}!$* (no quotes, no control characters)",
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def problems_from_pydantic(e: ValidationError, doc: SourceDoc,
                           schema: type[BaseModel]) -> list[Problem]:
    by_path: dict[FieldPath, list[tuple[str, str]]] = {}
    for err in e.errors():
        path, is_key = clean_loc(err["loc"], doc.data)
        by_path.setdefault(path, []).append((err["type"], _message(err, path, is_key, schema,
                                                                    doc.data)))
    problems = []
    for path, errs in by_path.items():
        # A union reports one error per branch; keep the specific ones.
        specific = [msg for kind, msg in errs if not kind.endswith("_type") and kind != "literal_error"]
        chosen = specific or [msg for _, msg in errs]
        unique = list(dict.fromkeys(chosen))
        pos = doc.where(path)
        problems.append(Problem(pos.file, pos.line, pos.column, dotted(path), "; or ".join(unique)))
    return problems
