"""The internet-coverage test (provision.exposure.internet), proven with exact figures:
the public space of each family, every non-public block, the 50 % line, families kept
apart, overlaps counted once. Pure."""

from __future__ import annotations

import ipaddress

import pytest

from provision.exposure import internet
from provision.exposure.internet import THRESHOLD, covers_internet, public_share, public_space

V4_PUBLIC = 3_702_258_432  # the figure the module's docstring promises
HOLES = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
         "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
         "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"]


def _size(version: int) -> int:
    return sum(n.num_addresses for n in public_space(version))


def test_public_space_sizes() -> None:
    assert _size(4) == V4_PUBLIC
    assert _size(6) == 2 ** 125
    assert [str(n) for n in public_space(6)] == ["2000::/3"]
    # disjoint and collapsed: no network inside another
    nets = public_space(4)
    assert list(ipaddress.collapse_addresses(nets)) == list(nets)


@pytest.mark.parametrize("hole", HOLES)
def test_every_non_public_block_counts_nothing(hole: str) -> None:
    assert public_share([hole], 4) == 0.0
    net = ipaddress.ip_network(hole)
    assert not any(n.overlaps(net) for n in public_space(4))
    # the address right after the block is public (unless the next block is a hole too)
    after = net.broadcast_address + 1 if int(net.broadcast_address) < 2 ** 32 - 1 else None
    if after is not None and not any(after in ipaddress.ip_network(h) for h in HOLES):
        assert public_share([f"{after}/32"], 4) == 1 / V4_PUBLIC


def test_exact_shares_of_the_halves() -> None:
    low = 2 ** 31 - 3 * 2 ** 24 - 2 ** 22  # 0/1 less 0/8, 10/8, 127/8 and 100.64/10
    assert public_share(["0.0.0.0/1"], 4) == low / V4_PUBLIC
    assert public_share(["128.0.0.0/1"], 4) == (V4_PUBLIC - low) / V4_PUBLIC
    assert public_share(["0.0.0.0/0"], 4) == 1.0
    assert public_share(["2000::/4"], 6) == 0.5
    assert public_share(["::/0"], 6) == 1.0
    assert public_share(["2000::/3", "3000::/4"], 6) == 1.0


def test_disjoint_sources_add_up() -> None:
    # two union members inside one public block each: both count
    assert public_share(["1.0.0.0/8", "2.0.0.0/8"], 4) == 2 * 2 ** 24 / V4_PUBLIC
    assert public_share(["1.0.0.0/8", "2.0.0.0/8", "10.0.0.0/8"], 4) == 2 * 2 ** 24 / V4_PUBLIC


def test_overlaps_are_counted_once_and_host_bits_are_tolerated() -> None:
    assert public_share(["0.0.0.0/1", "0.0.0.0/2", "64.0.0.0/2"], 4) == \
        public_share(["0.0.0.0/1"], 4)
    assert public_share(["0.0.0.1/1"], 4) == public_share(["0.0.0.0/1"], 4)
    assert public_share(["2000::/4", "2000::/4"], 6) == 0.5


def test_families_are_judged_apart() -> None:
    assert public_share(["::/0"], 4) == 0.0
    assert public_share(["0.0.0.0/0"], 6) == 0.0
    # half of each family is not "half the internet" of either
    assert not covers_internet(["128.0.0.0/1", "2000::/5"])
    assert covers_internet(["128.0.0.0/1", "2000::/4"])
    assert covers_internet(["0.0.0.0/1", "2000::/5"])


def test_the_line_is_half_inclusive() -> None:
    assert THRESHOLD == 0.5
    assert covers_internet(["2000::/4"])                 # exactly half: covers
    assert covers_internet(["3000::/4"])                 # the other half too
    assert not covers_internet(["2000::/5", "2800::/6", "2c00::/7"])  # 7/16
    assert not covers_internet(["128.0.0.0/1"])          # 43 %
    assert covers_internet(["0.0.0.0/1"])                # 56 %


def test_any_iterable_and_repeated_calls_agree() -> None:
    sources = ["0.0.0.0/1", "128.0.0.0/1"]
    assert covers_internet(iter(sources)) is True
    assert covers_internet(tuple(sources)) is True
    assert covers_internet(s for s in ["10.0.0.0/8"]) is False
    assert internet._covers(("10.0.0.0/8",)) is False
