"""covers_internet: the whole internet, plainly or in disguise."""

from __future__ import annotations

import ipaddress

import pytest

from provision.exposure.internet import _V4_NOT_PUBLIC, covers_internet, public_share, public_space


@pytest.mark.parametrize("cidrs", [
    ["0.0.0.0/0"],
    ["::/0"],
    ["0.0.0.0/1", "128.0.0.0/1"],
    ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"],
    ["0.0.0.0/1"],
    ["2000::/3"],
    ["2000::/4"],
    ["::/1"],
    ["10.0.0.0/8", "0.0.0.0/1"],
])
def test_internet_in_disguise(cidrs: list[str]) -> None:
    assert covers_internet(cidrs)


@pytest.mark.parametrize("cidrs", [
    [],
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"],  # all private
    ["128.0.0.0/1"],  # ~43 % of public IPv4
    ["203.0.113.0/24", "2001:db8::/32"],
    ["3.0.0.0/8", "52.0.0.0/8"],
    ["2000::/5"],  # a quarter of global unicast
    ["fc00::/7", "fe80::/10"],  # not public IPv6
    ["224.0.0.0/3"],  # multicast and reserved
])
def test_not_the_internet(cidrs: list[str]) -> None:
    assert not covers_internet(cidrs)


def test_shares() -> None:
    assert public_share(["0.0.0.0/0"], 4) == 1.0
    assert public_share(["::/0"], 4) == 0.0
    assert 0.55 < public_share(["0.0.0.0/1"], 4) < 0.57
    assert public_share(["2000::/4"], 6) == 0.5
    assert public_share(["2000::/4", "2000::/5"], 6) == 0.5  # overlaps are counted once



def _share_by_exclusion(cidrs: list[str], version: int) -> float:
    """Counted against the space split into disjoint networks, the way the module first did."""
    space = public_space(version)
    nets = [n for n in (ipaddress.ip_network(c, strict=False) for c in cidrs) if n.version == version]
    covered = sum(u.num_addresses if u.subnet_of(p) else p.num_addresses if p.subnet_of(u) else 0
                  for u in ipaddress.collapse_addresses(nets) for p in space)
    return covered / sum(p.num_addresses for p in space)


def test_the_holes_are_disjoint_blocks_of_the_base() -> None:
    # what counting by subtraction relies on
    holes = [ipaddress.ip_network(h) for h in _V4_NOT_PUBLIC]
    assert all(not a.overlaps(b) for i, a in enumerate(holes) for b in holes[i + 1:])


@pytest.mark.parametrize("cidrs", [
    ["0.0.0.0/0"], ["0.0.0.0/1"], ["128.0.0.0/1"], ["10.0.0.0/8", "0.0.0.0/1"],
    ["192.0.0.0/16", "198.0.0.0/7", "224.0.0.0/3"], ["10.0.0.0/9", "172.0.0.0/8", "1.2.3.4/32"],
    ["100.0.0.0/8", "127.0.0.1/32", "192.88.99.0/25"], ["0.0.0.0/4", "0.0.0.0/8"],
    ["::/0"], ["2000::/4", "2000::/5"], ["::/1", "2001:db8::/32"], ["fc00::/7", "2400::/6"],
])
def test_share_counts_the_same_addresses_as_splitting_the_space(cidrs: list[str]) -> None:
    for version in (4, 6):
        assert public_share(cidrs, version) == _share_by_exclusion(cidrs, version)
