"""Values as plain JSON data, so fixture files can hold what a parser or a step produced.

Dataclasses become objects of their fields (`typed=True` adds `"type": ClassName` first, for
lists of mixed actions; `properties=True` adds each public property after the fields, so what
a fact derives, like `Listener.is_loopback`, is pinned too), tuples lists, sets sorted lists, and a mapping with keys that are
not strings a list of `[key, value]` pairs. Enums are not used by facts or actions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]


def plain(value: object, *, typed: bool = False, properties: bool = False) -> JSON:
    """`value` as JSON data (see the module docstring); raises TypeError on other types."""
    def again(v: object) -> JSON:
        return plain(v, typed=typed, properties=properties)

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, JSON] = {"type": type(value).__name__} if typed else {}
        names = [f.name for f in dataclasses.fields(value)]
        for name in names + (_properties(type(value)) if properties else []):
            out[name] = again(getattr(value, name))
        return out
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: again(v) for k, v in value.items()}
        return sorted(([again(k), again(v)] for k, v in value.items()), key=repr)
    if isinstance(value, frozenset | set):
        return sorted((again(v) for v in value), key=repr)
    if isinstance(value, tuple | list):
        return [again(v) for v in value]
    raise TypeError(f"no plain form for {type(value).__name__}")


def _properties(cls: type) -> list[str]:
    names = {n for klass in cls.__mro__ for n, a in vars(klass).items()
             if isinstance(a, property) and not n.startswith("_")}
    return sorted(names)
