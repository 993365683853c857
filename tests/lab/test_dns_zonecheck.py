"""`provision dns check --zone` against the lab's BIND and Unbound, and a second BIND
that stops hearing about changes: every record asked of every server, the one that
differs named, and a TTL left low without a migration found."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provision.dns import propagation as prop
from provision.lab import plan as P
from tests.support.netns_http import stop

from .conftest import Lab
from .test_dns import _inventory, restore  # noqa: F401  (restore: a fixture, used by name)

N = 500


def _secondary_conf(lab: Lab, d: Path, addr: str) -> str:
    """A BIND secondary of ns1 (zone transfers with the lab's TSIG key). ns1 sends no
    NOTIFY and the SOA's refresh is an hour: after its first transfer it keeps what it
    has, like a secondary whose notifies stopped arriving."""
    ns1 = lab.addr("ns1")
    return f"""include "{lab.tsig_key_file}";
options {{
  directory "{d}"; pid-file "{d}/named.pid"; session-keyfile "{d}/session.key";
  managed-keys-directory "{d}"; listen-on port 53 {{ {addr}; }}; listen-on-v6 {{ none; }};
  recursion no; allow-query {{ any; }}; notify no; dnssec-validation no;
}};
controls {{ }};
server {ns1} {{ keys {{ "{P.TSIG_KEY_NAME}"; }}; }};
zone "{P.ZONE}" {{ type secondary; primaries {{ {ns1}; }}; file "{d}/db.secondary"; }};
"""


def _serial(lab: Lab, server: str) -> int | None:
    with lab.operator_netns():
        a = prop.query(prop.Target(server, server, "authoritative"), f"{P.ZONE}.", "SOA",
                       timeout=0.5)
    return int(a.values[0].split()[2]) if a.status == "NOERROR" and a.values else None


@pytest.fixture
def secondary(lab: Lab, tmp_path: Path) -> Iterator[str]:
    """A second BIND in the operator's namespace, at its dns-segment address, holding a
    transfer of the zone as it is now; stopped at the end."""
    addr = lab.addr("operator", "dns")
    d = tmp_path / "ns2"
    d.mkdir()
    (d / "named.conf").write_text(_secondary_conf(lab, d, addr))
    proc = subprocess.Popen(["ip", "netns", "exec", lab.plan.operator.netns, "named", "-g",
                             "-c", str(d / "named.conf")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        want, deadline = _serial(lab, lab.addr("ns1")), time.monotonic() + 20
        while _serial(lab, addr) != want:
            assert time.monotonic() < deadline and proc.poll() is None, \
                "the second BIND did not transfer the zone"
            time.sleep(0.1)
        yield addr
    finally:
        stop(proc)


def _update(lab: Lab, ops: list[tuple[str, str, str, str | None, int]]) -> None:
    """One TSIG-signed RFC 2136 update to ns1: (add|delete, name, type, value, ttl)."""
    import dns.query
    import dns.rcode
    import dns.update

    upd = dns.update.Update(P.ZONE, keyring=lab.tsig_keyring())
    for op, name, rtype, value, ttl in ops:
        if op == "add":
            upd.add(name, ttl, rtype, value)
        elif value is not None:
            upd.delete(name, rtype, value)   # one record: the apex NS RRset never goes whole
        else:
            upd.delete(name, rtype)
    with lab.operator_netns():
        r = dns.query.tcp(upd, lab.addr("ns1"), timeout=10)
    assert r.rcode() == dns.rcode.NOERROR


def test_zone_check_names_the_one_record_a_stale_server_serves_and_a_low_ttl(
        lab: Lab, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The 500 records are written straight to ns1 (how they got there does not matter
    to a check, and it spares two applies of 1,000 RRsets); the inventory declares them."""
    tag = secrets.token_hex(2)      # fresh names: the resolver has cached none of them
    names = [f"zc{tag}-{i:03d}" for i in range(N)]
    stale, low = names[123], names[7]
    fq = {n: f"{n}.{P.ZONE}." for n in names}
    ns2_name = f"zc{tag}-ns2.{P.ZONE}."

    def value(i: int, moved: bool = False) -> str:
        return f"10.{lab.plan.octet}.{3 if moved else 2}.{i % 250 + 1}"

    _update(lab, [("add", fq[n], "A", value(i), 60 if n == low else 300)
                  for i, n in enumerate(names)])
    try:
        ns2 = request.getfixturevalue("secondary")   # holds the zone as it is now
        # one record changes on ns1 only (no NOTIFY reaches ns2), and ns2 joins the NS set
        _update(lab, [("delete", fq[stale], "A", None, 0),
                      ("add", fq[stale], "A", value(123, moved=True), 300),
                      ("add", ns2_name, "A", ns2, 300), ("add", f"{P.ZONE}.", "NS", ns2_name, 300)])

        def declare(rec: dict[str, Any]) -> None:   # 3600 s for the one served with 60 s
            rec.clear()                             # only these 500: the lab's own are theirs
            for i, n in enumerate(names):
                rec[n] = {"type": "A", "values": [value(i, n == stale)],
                          "ttl": 3600 if n == low else 300}

        inv = _inventory(lab, tmp_path, declare)
        code, data, err = lab.provision_json("dns", "check", "--zone", P.ZONE, "-i", str(inv))
        assert code == 1, (data, err)
        zone = data["zones"][0]
        roles = sorted((s["server"], s["role"]) for s in zone["servers"])
        assert roles == sorted([(f"ns1.{P.ZONE}.", "authoritative"), (ns2_name, "authoritative"),
                                (lab.addr("resolver"), "resolver")]), roles
        assert sorted(r["name"] for r in zone["records"]) == sorted(fq.values())
        differ = [(r["name"], r["type"], r["disagree"]) for r in zone["records"] if not r["ok"]]
        assert differ == [(fq[stale], "A", [ns2_name])], differ
        bad = next(r for r in zone["records"] if r["name"] == fq[stale])
        assert bad["answers"][ns2_name]["values"] == [value(123)]
        assert bad["answers"][f"ns1.{P.ZONE}."]["values"] == [value(123, moved=True)]
        assert bad["answers"][lab.addr("resolver")]["values"] == [value(123, moved=True)]
        assert zone["disagree"] == [ns2_name]
        assert [(f["kind"], f["name"], f["declared_ttl"], f["served_ttl"], sorted(f["servers"]))
                for f in zone["findings"]] == [
            ("low_ttl", fq[low], 3600, 60, sorted([f"ns1.{P.ZONE}.", ns2_name]))]
        # every record of each of 3 servers, each name's migration marker of the 2 authorities
        assert zone["queries"] == N * 3 + N * 2
        print(f"\nlab dns check --zone, {N} records, 2 BIND + 1 Unbound: "
              f"{zone['queries']} queries in {zone['seconds']} s")
        # plain `dns check NAME` finds the low TTL of that record too
        code, one, err = lab.provision_json("dns", "check", low, "-i", str(inv))
        assert code == 1 and [f["kind"] for f in one["findings"]] == ["low_ttl"], (one, err)
    finally:
        _update(lab, [("delete", f"{P.ZONE}.", "NS", ns2_name, 0), ("delete", ns2_name, "A", None, 0),
                      *(("delete", fq[n], "A", None, 0) for n in names)])


def test_apply_verify_asks_every_server_after_the_change(lab: Lab, tmp_path: Path,
                                                         restore: None) -> None:  # noqa: F811
    """A resolver that cached the old value: apply succeeds, --verify says who still
    serves what (exit 1); with nothing stale, --verify passes."""
    name = f"zv{secrets.token_hex(3)}"
    first, second = f"10.{lab.plan.octet}.1.234", f"10.{lab.plan.octet}.1.235"
    inv = _inventory(lab, tmp_path, lambda rec: rec.update({name: {"type": "A", "values": [first]}}))
    code, data, err = lab.provision_json("dns", "apply", "-i", str(inv), "--yes", "--verify")
    assert code == 0 and [v["ok"] for v in data["verify"]] == [True], (data, err)
    with lab.operator_netns():
        r = lab.addr("resolver")
        assert prop.query(prop.Target(r, r, "resolver"), f"{name}.{P.ZONE}.", "A").values == (first,)
    inv = _inventory(lab, tmp_path, lambda rec: rec.update({name: {"type": "A", "values": [second]}}))
    code, data, err = lab.provision_json("dns", "apply", "-i", str(inv), "--yes", "--verify")
    assert code == 1, (data, err)
    assert data["zones"][0]["applied"] is True
    v = data["verify"][0]
    differ = [(x["name"], x["disagree"]) for x in v["records"] if not x["ok"]]
    assert differ == [(f"{name}.{P.ZONE}.", [lab.addr("resolver")])], differ
    rec = next(x for x in v["records"] if not x["ok"])
    assert rec["answers"][f"ns1.{P.ZONE}."]["values"] == [second]
    assert any("remaining TTL" in n for n in rec["notes"]), rec
