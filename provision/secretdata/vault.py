"""Decrypted secrets for one plan or apply, in values that never print themselves."""

from __future__ import annotations

from collections.abc import Mapping


class Sealed:
    """A secret's bytes. Its repr and str name only the secret: a traceback, a log line
    or a record's repr that holds one shows `<secret NAME>`, never the value."""

    __slots__ = ("_value", "name")

    def __init__(self, name: str, value: bytes) -> None:
        self.name = name
        self._value = value

    def reveal(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return f"<secret {self.name}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sealed) and (self.name, self._value) == (other.name, other._value)

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a secret is not pickled")


class Vault:
    """The decrypted secrets one run needs, by name."""

    def __init__(self, values: Mapping[str, Sealed]) -> None:
        self._values = dict(values)

    def get(self, name: str) -> Sealed | None:
        return self._values.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._values)

    def __repr__(self) -> str:
        return f"<vault of {len(self._values)} secret(s)>"
