"""`split_rule`: a rule line's words are exactly shlex's, on the fast path and off it."""

from __future__ import annotations

import shlex

import pytest

from provision.firewall.parse import ParseError, split_rule

LINES = [
    "-A PROVISION-INPUT -s 10.0.0.0/8 -p tcp -m tcp --dport 22 -j ACCEPT",
    "-A PROVISION-INPUT\t-p icmp -m limit --limit 10/sec -j ACCEPT",
    "-A PROVISION-INPUT -m comment --comment \"provision: ssh from the bastion\" -j ACCEPT",
    "-A PROVISION-INPUT -m comment --comment 'single quoted' -j ACCEPT",
    "-A X -m comment --comment back\\ slash -j ACCEPT",
    "-A X ! -s 192.0.2.1/32 -j DROP",
    "-A X -m comment --comment a#b -j RETURN",
    "-A X  -j  DROP   ",
    "-A X -m comment --comment caf\u00e9\u00a0nbsp -j ACCEPT",  # not ASCII: shlex's way
    "-A X -m comment --comment form\x0cfeed -j ACCEPT",  # str.split would split here
]


@pytest.mark.parametrize("line", LINES)
def test_words_are_shlex_words(line: str) -> None:
    assert split_rule(line) == shlex.split(line)


def test_an_unclosed_quote_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="cannot split"):
        split_rule('-A X -m comment --comment "open -j ACCEPT')
