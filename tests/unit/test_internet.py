"""covers_internet: the whole internet, plainly or in disguise."""

from __future__ import annotations

import pytest

from provision.exposure.internet import covers_internet, public_share


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
