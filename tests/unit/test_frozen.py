"""`@frozen` behaves as `@dataclass(frozen=True)` does: each case is run on a class made
both ways and must give the same result."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from dataclasses import InitVar, field
from typing import Any

import pytest

from provision.frozen import frozen

MAKERS: dict[str, Callable[[type[Any]], type[Any]]] = {
    "dataclass": dataclasses.dataclass(frozen=True),
    "frozen": frozen,
}


def kinds(make: Callable[[type[Any]], type[Any]]) -> dict[str, type[Any]]:
    class Point:
        x: int
        y: int = 0

    class Tagged:
        name: str
        note: str = field(default="", compare=False)
        secret: str = field(default="", repr=False)
        items: tuple[int, ...] = field(default_factory=tuple)
        weight: int = field(default=1, hash=False)

    class One:
        only: str

    class Empty:
        pass

    class Derived:
        total: int = 0
        seed: InitVar[int] = 0

        def __post_init__(self, seed: int) -> None:
            object.__setattr__(self, "total", self.total + seed)

    class Own:
        v: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

    made = {k.__name__: make(k) for k in (Point, Tagged, One, Empty, Derived, Own)}

    class Point3(made["Point"]):  # type: ignore[misc,name-defined]
        z: int = 0

    made["Point3"] = make(Point3)
    return made


def behaviour(make: Callable[[type[Any]], type[Any]]) -> list[Any]:
    k = kinds(make)
    P, T, One, E, D, W, P3 = (k[n] for n in ("Point", "Tagged", "One", "Empty", "Derived", "Own", "Point3"))
    out: list[Any] = []
    p = P(1, 2)
    out += [repr(p).replace("kinds.<locals>.", ""), p == P(1, 2), p != P(1, 3), p == (1, 2),
            hash(p) == hash(P(1, 2)), P(1) == P(1, 0), p == P3(1, 2), P3(1, 2) == P3(1, 2, 0)]
    out += [dataclasses.replace(p, y=5) == P(1, 5), dataclasses.asdict(p),
            dataclasses.astuple(p), [f.name for f in dataclasses.fields(P3)]]
    t = T("a", note="x", secret="s", items=(1,), weight=2)
    out += [t == T("a", note="y", secret="s", items=(1,), weight=2),  # note: compare=False
            hash(t) == hash(T("a", note="y", secret="s", items=(1,), weight=9)),  # weight: hash=False
            "secret" in repr(t), "note='x'" in repr(t), T("a").items == ()]
    out += [One("v") == One("v"), hash(One("v")) == hash(One("v")), One("v") == One("w"), E() == E(),
            hash(E()) == hash(E()), repr(E()).endswith("Empty()")]
    out += [D(total=1, seed=2).total, repr(D(total=1)).endswith("Derived(total=1)")]
    out += [repr(W(1)), W(1) == W(2)]
    for attempt in (lambda: setattr(p, "x", 9), lambda: delattr(p, "x"),
                    lambda: setattr(p, "extra", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            attempt()
    out += [p.x, not hasattr(p, "extra"), P(1, 2) in {p: "v"}, len({P(1, 2), P(1, 2), P(2, 1)})]
    return out


def test_record_behaves_as_a_frozen_dataclass() -> None:
    assert behaviour(MAKERS["frozen"]) == behaviour(MAKERS["dataclass"])


def test_the_comparison_above_can_fail() -> None:
    """A decorator with other semantics (frozen, equal only to itself) is told apart."""
    assert behaviour(dataclasses.dataclass(frozen=True, eq=False)) != behaviour(frozen)


def test_an_explicit_hash_is_kept_as_dataclasses_keeps_it() -> None:
    def make_h() -> type[Any]:
        class H:
            v: int

            def __hash__(self) -> int:
                return 7

        return H

    for make in MAKERS.values():
        h = make(make_h())
        assert hash(h(1)) == 7 and h(1) == h(1)


def test_a_record_pickles_and_its_fields_stay_frozen_after() -> None:
    back = pickle.loads(pickle.dumps(Picklable(3, "x")))
    assert back == Picklable(3, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.n = 4  # type: ignore[misc]


def test_recursive_repr_does_not_recurse_forever() -> None:
    box = Box([])
    box.items.append(box)
    assert repr(box) == "Box(items=[...])"


@frozen
class Picklable:
    n: int
    s: str


@frozen
class Box:
    items: list[Any]
