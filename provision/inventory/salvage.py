"""After a schema error, the rest of the inventory still gets its cross-checks, so that
every problem shows in one run (issue 39: a `per_user` name typo used to appear only
after a `logdir` error was fixed, because the resolver ran only on a valid document).

Pure. `salvage` cuts what the schema refused out of a copy of the data (or renames a
misspelt key to the field it suggests) until the copy validates; the resolver then runs
on that copy, and its problems inside what was cut are left out (they would be about
the cut, not about the user's file). Nothing is cut that other parts refer to by name
(a host, a bastion, a role, a team member, a security group, a python env, a secret, a
zone): without it every reference would be a false error, so then only the schema's
problems are reported, as before.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from provision.frozen import frozen

from .source import FieldPath, dotted

# Named entries nothing else refers to: one of these may be cut whole.
_UNREFERENCED = frozenset({"services", "records", "apt_sources", "clusters"})
# Top-level sections (and their mappings) other parts refer to by name: never cut.
_REFERENCED: frozenset[FieldPath] = frozenset({
    (), ("team",), ("bastions",), ("hosts",), ("roles",), ("python_envs",), ("aws",),
    ("aws", "security_groups"), ("dns",), ("dns", "zones"), ("secrets",), ("recipients",),
    ("acme",), ("version",)})
ROUNDS = 8  # a cut can make its holder fail (a rule left with no port): cut again


@frozen
class SchemaError:
    """One pydantic error, located in the data (union branch tags removed)."""

    path: FieldPath
    kind: str       # pydantic's error type: missing, extra_forbidden, string_type, ...
    is_key: bool    # the error is about a mapping's key, not its value


@frozen
class Salvaged:
    data: Any                      # the copy that validates
    shadowed: tuple[FieldPath, ...]  # where things were cut: problems in these are dropped


ModelAt = Callable[[FieldPath, Any], "type[BaseModel] | None"]


def salvage(data: Any, errors: list[SchemaError], model_at: ModelAt,
            validate: Callable[[Any], list[SchemaError]]) -> Salvaged | None:
    """A copy of `data` without what `errors` are about, that `validate` accepts; None
    when something that cannot be cut would have to go. `model_at(path, data)`: the schema
    model holding the fields at `path` (None for a mapping of names or a list)."""
    work = copy.deepcopy(data)
    cut: list[FieldPath] = []
    for _ in range(ROUNDS):
        renames = _renames(errors, work, model_at)
        for holder, (old, new) in renames.items():
            node = _node(work, holder)
            node[new] = node.pop(old)
        renamed = {(*h, o) for h, (o, _) in renames.items()} | {(*h, n) for h, (_, n) in renames.items()}
        for e in errors:
            if e.path in renamed:
                continue
            where = _where_to_cut(e, work, model_at)
            if where is None:
                return None
            _remove(work, where[0])
            cut.append(where[1])
        errors = validate(work)
        if not errors:
            return Salvaged(work, tuple(dict.fromkeys(cut)))
    return None


def kept(field: str, shadowed: tuple[FieldPath, ...]) -> bool:
    """Whether a resolver problem at `field` (dotted) lies outside every shadowed part."""
    return not any(_under(field, dotted(s)) for s in shadowed)


def _under(field: str, top: str) -> bool:
    return field == top or field.startswith((top + ".", top + "["))


def _renames(errors: list[SchemaError], data: Any, model_at: ModelAt) -> dict[FieldPath, tuple[str, str]]:
    """A misspelt key beside a missing required field it is close to (`adress` and no
    `address`): the key is taken as that field, as the message's 'did you mean' says."""
    extra = {e.path[:-1]: str(e.path[-1]) for e in errors
             if e.kind == "extra_forbidden" and e.path and isinstance(e.path[-1], str)}
    out: dict[FieldPath, tuple[str, str]] = {}
    for e in errors:
        if e.kind != "missing" or not e.path or not isinstance(e.path[-1], str):
            continue
        holder = e.path[:-1]
        typo = extra.get(holder)
        node = _node(data, holder)
        if typo is None or not isinstance(node, dict) or typo not in node:
            continue
        if difflib.get_close_matches(typo, [e.path[-1]], n=1) and model_at(holder, data) is not None:
            out[holder] = (typo, str(e.path[-1]))
    return out


def _where_to_cut(e: SchemaError, data: Any, model_at: ModelAt) -> tuple[FieldPath, FieldPath] | None:
    """(the path to remove for error `e`, the part of the document problems are then
    dropped in), or None when what would go is something others refer to by name. An
    unknown key goes, and its holder is shadowed (it may be a misspelt optional field); a
    field that may be left out (it has a default) goes, its holder shadowed; else, walking
    up, the first that may go: a field, or an entry nothing refers to (itself shadowed)."""
    p = e.path
    if e.kind == "extra_forbidden" and not e.is_key:
        return p, p[:-1] or p
    while p and p not in _REFERENCED:
        part, holder = p[-1], p[:-1]
        if isinstance(part, int):
            p = holder
            continue
        model = model_at(holder, data)
        if model is None:  # an entry of a mapping of names (the key is `part`)
            if _entry_may_go(p):
                return p, p
        else:
            field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
            if field is not None and not field.is_required() and part != "python_envs":
                return p, holder or p
        p = holder
    return None


def _entry_may_go(path: FieldPath) -> bool:
    return len(path) >= 2 and path[-2] in _UNREFERENCED and path[:-1] not in _REFERENCED


def _node(data: Any, path: FieldPath) -> Any:
    for part in path:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


def _remove(data: Any, path: FieldPath) -> None:
    holder = _node(data, path[:-1])
    if isinstance(holder, dict) and path[-1] in holder:
        del holder[path[-1]]
