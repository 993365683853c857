"""The rendered rules loaded into a real kernel table and read back with `iptables-save`
compare equal to what was rendered, for every spelling `iptables-save` changes: the whole
address space (no `-s` at all), implicit matches (`-m tcp`), quoted comments, and the new
spellings: port ranges, UDP. Before: a service open to `0.0.0.0/0` never read back equal, and
every apply of it was rolled back ("rule missing ... rule added by hand").

Each case runs in a network namespace of its own (`unshare --net`): nothing of this
machine's tables is touched. Needs root; skipped without it, failed under CI=true."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from provision.firewall import drift as FD
from provision.firewall import parse as FP
from provision.firewall import verdict as FV
from provision.firewall.rules import HOOKS, INPUT_CHAIN, Family, Rule, Ruleset
from provision.render.env import render


def _require_root() -> None:
    why = ("not root" if os.geteuid() != 0 else
           "unshare/iptables-restore not found" if not (shutil.which("unshare") and
                                                        shutil.which("iptables-restore")) else "")
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why} (CI=true: a missing prerequisite is a failure)", pytrace=False)
        pytest.skip(f"needs a network namespace of its own: {why}")


CASES: dict[Family, list[Rule]] = {
    4: [Rule("ACCEPT", "the world", source="0.0.0.0/0", proto="tcp", dport=443,
             ctstate=("NEW",)),
        Rule("ACCEPT", "one address", source="10.0.1.22/32", proto="tcp", dport=8000,
             ctstate=("NEW",)),
        Rule("ACCEPT", "a network", source="10.0.0.0/16", proto="udp", dport=53),
        Rule("ACCEPT", "a range", source="192.0.2.0/24", proto="tcp", dport=40000,
             dport_to=40999, ctstate=("NEW",)),
        Rule("ACCEPT", "udp, every port", source="10.0.1.21/32", proto="udp", ctstate=("NEW",)),
        Rule("ACCEPT", "a comment: with words, and (signs)", proto="tcp", dport=22),
        Rule("DROP", "everything else")],
    6: [Rule("ACCEPT", "the world", source="::/0", proto="tcp", dport=443, ctstate=("NEW",)),
        Rule("ACCEPT", "one address", source="2001:db8::21/128", proto="tcp", dport=8000),
        Rule("ACCEPT", "a network", source="2001:db8::/64", proto="udp", dport=40000,
             dport_to=40999),
        Rule("DROP", "everything else")],
}


@pytest.mark.parametrize("family", [4, 6])
def test_rendered_rules_read_back_equal_from_a_real_table(family: Family) -> None:
    _require_root()
    rs = Ruleset(family, INPUT_CHAIN, HOOKS[INPUT_CHAIN], tuple(CASES[family]))
    text = render("iptables.rules.j2", host="gpu1", ruleset=rs, path="/etc/iptables/x")
    tool = "ip6tables" if family == 6 else "iptables"
    script = (f"{tool}-restore --noflush <<'EOF'\n{text}EOF\n"
              f"{tool} -I INPUT 1 -j {INPUT_CHAIN} && {tool}-save -t filter")
    r = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "-s 0.0.0.0/0" not in r.stdout and "-s ::/0" not in r.stdout  # what it omits
    live = FP.parse_save(r.stdout, family)
    assert FD.drift(rs, live) == [], r.stdout
    # and what it means: the world may reach 443; only the range's network reaches 40000+
    world = FV.admitted(live, FV.Packet("tcp", 443))
    assert world == FV.AddressSet.everything(family)
    ranged = FV.admitted(live, FV.Packet("udp" if family == 6 else "tcp", 40500))
    assert ranged == FV.AddressSet.of(family, ["192.0.2.0/24" if family == 4
                                               else "2001:db8::/64"])
    assert not FV.admitted(live, FV.Packet("tcp", 41000))
