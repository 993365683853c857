"""`provision dns migrate` on the lab's real BIND (ns1) and Unbound (resolver), with TTLs
of a few seconds so that every migration here takes seconds.

Every new value is a lab address (ns1's, where TCP 53 answers a health check); nothing
is sent outside the lab's namespaces."""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from provision.lab import plan as P

from .conftest import Lab
from .test_dns import _ask, _inventory


class Zone:
    """A fresh record in lab.test for one test, removed again at the end."""

    def __init__(self, lab: Lab, tmp_path: Path, rtype: str = "A", ttl: int = 3,
                 value: str | None = None):
        self.lab = lab
        self.short = f"m{secrets.token_hex(3)}"
        self.fq = f"{self.short}.{P.ZONE}."
        self.rtype = rtype
        self.old = value or f"10.{lab.plan.octet}.1.{secrets.choice(range(150, 199))}"
        rec = {"type": rtype, "ttl": ttl, **({"value": self.old} if rtype == "CNAME" else {"values": [self.old]})}
        self.inv = _inventory(lab, tmp_path, lambda r: r.update({self.short: rec}))
        self.env = {"PROVISION_STATE_DIR": str(tmp_path / "state")}
        code, data, err = lab.provision_json("dns", "apply", "-i", str(self.inv), "--yes")
        assert code == 0, (data, err)

    def m(self, *args: str, faults: tuple[str, ...] = ()) -> tuple[int, Any, str]:
        return self.lab.provision_json("dns", "migrate", *args, "-i", str(self.inv), env=self.env,
                                       faults=faults)

    def ns1(self) -> tuple[str, list[str], bool, int | None]:
        """(rcode, values, AA, TTL) from ns1, RD off."""
        return _ask_ttl(self.lab, self.lab.addr("ns1"), self.short, self.rtype)

    def status(self) -> list[dict[str, Any]]:
        code, data, err = self.m("status", self.fq)
        assert code == 0, (data, err)
        assert isinstance(data, list), (data, err)
        return data

    def clean(self) -> None:
        self.m("rollback", self.fq)  # if one is still open
        code, data, err = self.lab.provision_json("dns", "apply", "-i", str(self.lab.inventory), "--yes")
        assert code == 0, (data, err)


def _ask_ttl(lab: Lab, server: str, short: str, rtype: str, rd: bool = False) -> tuple[str, list[str], bool, int | None]:
    import dns.flags
    import dns.message
    import dns.query
    import dns.rcode
    import dns.rdatatype

    q = dns.message.make_query(f"{short}.{P.ZONE}.", rtype)
    if not rd:
        q.flags &= ~dns.flags.RD
    with lab.operator_netns():
        r = dns.query.udp(q, server, timeout=2)
    want = dns.rdatatype.from_text(rtype)
    rrs = [rr for rr in r.answer if rr.rdtype == want]
    values = sorted(x.to_text() for rr in rrs for x in rr)
    return dns.rcode.to_text(r.rcode()), values, bool(r.flags & dns.flags.AA), rrs[0].ttl if rrs else None


@pytest.fixture
def rec(lab: Lab, tmp_path: Path) -> Any:
    made: list[Zone] = []

    def make(**kw: Any) -> Zone:
        z = Zone(lab, tmp_path, **kw)
        made.append(z)
        return z

    yield make
    for z in made:
        z.clean()


class Poller:
    """Asks ns1 (RD off) and the resolver every 50 ms from the operator namespace and
    keeps (time sent, time answered, who, values, ttl)."""

    def __init__(self, lab: Lab, short: str):
        self.lab, self.short = lab, short
        self.seen: list[tuple[float, float, str, list[str], int | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import dns.flags
        import dns.message
        import dns.query

        with self.lab.operator_netns():
            while not self._stop.is_set():
                for who, addr, rd in (("ns1", self.lab.addr("ns1"), False),
                                      ("resolver", self.lab.addr("resolver"), True)):
                    q = dns.message.make_query(f"{self.short}.{P.ZONE}.", "A")
                    if not rd:
                        q.flags &= ~dns.flags.RD
                    sent = time.monotonic()
                    try:
                        r = dns.query.udp(q, addr, timeout=1)
                    except Exception:
                        continue
                    vals = sorted(x.to_text() for rr in r.answer for x in rr)
                    ttl = r.answer[0].ttl if r.answer else None
                    self.seen.append((sent, time.monotonic(), who, vals, ttl))
                time.sleep(0.05)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def first(self, who: str, value: str) -> float:
        """When `who` was first seen answering `value` (time answered)."""
        return min(recv for _, recv, w, v, _ in self.seen if w == who and v == [value])


def test_run_primed_resolver_serves_old_until_the_lowered_ttl_then_new(lab: Lab, rec: Any) -> None:
    z = rec(ttl=6)
    new = lab.addr("ns1")  # TCP 53 answers there: the health check passes
    assert _ask(lab, lab.addr("resolver"), z.short, "A", rd=True)[1] == [z.old]  # primed, ttl 6
    with Poller(lab, z.short) as poll:
        t0 = time.monotonic()
        code, data, err = z.m("run", z.fq, "--to", new, "--lower-ttl", "2", "--health", "tcp:53")
        wall = time.monotonic() - t0
        time.sleep(0.3)
    assert code == 0, (data, err)
    assert data["closed"] == "finalized"
    ns1_new = poll.first("ns1", new)
    res_new = poll.first("resolver", new)
    res = [(sent, recv, v) for sent, recv, w, v, _ in poll.seen if w == "resolver"]
    # before ns1 served the new value, the resolver only ever had the old one
    assert all(v == [z.old] for sent, recv, v in res if recv < ns1_new)
    # the old value is never served once the lowered TTL has passed after the cutover
    # (+1 s: TTLs are whole seconds), and the new one is served from then on
    assert not [s for s, r, v in res if v == [z.old] and s > ns1_new + 2 + 1.0]
    assert all(v == [new] for s, r, v in res if s > res_new)
    old_after = [r - ns1_new for s, r, v in res if v == [z.old] and r > ns1_new]
    print(f"\nlab migrate run: ns1 new -> resolver new {res_new - ns1_new:.2f} s (lowered TTL 2 s; "
          f"old still served up to {max(old_after, default=0):.2f} s after the cutover); "
          f"whole run {wall:.1f} s (original TTL 6 s); timings {data['timings']}")
    assert z.ns1() == ("NOERROR", [new], True, 6)  # the original TTL is back
    assert z.status() == []
    # the marker gave way to the closed migration's record: who moved it, from what to what
    assert _ask(lab, lab.addr("ns1"), f"_provision-migration.{z.short}", "TXT")[0] == "NXDOMAIN"
    rcode, closed, _ = _ask(lab, lab.addr("ns1"), f"_provision-closed-a.{z.short}", "TXT")
    assert rcode == "NOERROR" and '"phase=closed"' in closed, closed
    assert f'"from={z.old}"' in closed and f'"to={new}"' in closed, closed


def flush(lab: Lab, fq: str, rtype: str = "A") -> None:
    """End the resolver's cache entry for `fq` now, as its TTL running out would: the test
    decides when, where waiting the TTL out would race a busy machine."""
    lab.host("resolver", "unbound-control", "-c", "/etc/unbound/unbound.conf", "flush_type",
             fq, rtype)


def test_forced_cutover_verify_names_the_stale_resolver_until_its_cache_entry_goes(
        lab: Lab, rec: Any) -> None:
    # a TTL no busy machine outlasts between priming and the checks: the stale answer is
    # there for as long as the test needs it, and gone when the test ends it (flush)
    ttl = 600
    z = rec(ttl=ttl)
    new = lab.addr("ns1")
    assert _ask(lab, lab.addr("resolver"), z.short, "A", rd=True)[1] == [z.old]
    code, data, err = z.m("start", z.fq, "--to", new, "--lower-ttl", "1")
    assert code == 0, (data, err)
    code, data, err = z.m("cutover", z.fq)
    assert code == 2 and "cutover refused" in err, (data, err)
    code, data, err = z.m("cutover", z.fq, "--force")
    assert code == 0, (data, err)
    assert "caches may still serve the old value" in data["warning"]
    assert data["migration"]["forced"] is True
    ttls = []
    for _ in range(2):
        code, data, err = z.m("verify", z.fq)
        assert code == 1, (data, err)
        assert data["authoritative_ok"] is True and data["phase"] != "verified"
        [stale] = data["stale"]
        assert stale["server"] == lab.addr("resolver") and stale["values"] == [z.old]
        assert 0 < stale["ttl"] <= ttl
        assert any("remaining TTL" in n for n in data["notes"])
        ttls.append(stale["ttl"])
    assert ttls == sorted(ttls, reverse=True), ttls  # the remaining TTL counts down
    flush(lab, z.fq)
    code, data, err = z.m("verify", z.fq)
    assert code == 0, (data, err)
    assert data["ok"] and data["phase"] == "verified" and not data["stale"]
    code, data, err = z.m("finalize", z.fq)
    assert code == 0, (data, err)
    assert z.ns1() == ("NOERROR", [new], True, ttl)


@pytest.mark.parametrize("phase", ["lowered", "switched", "verified"])
def test_rollback_from_each_phase_restores_the_record_byte_identical(
        lab: Lab, rec: Any, phase: str) -> None:
    z = rec(ttl=3)
    before = z.ns1()
    wire_before = _wire(lab, z.fq)
    code, data, err = z.m("start", z.fq, "--to", lab.addr("ns1"), "--lower-ttl", "1")
    assert code == 0, (data, err)
    assert z.ns1()[3] == 1
    if phase in ("switched", "verified"):
        code, data, err = z.m("cutover", z.fq, "--force")
        assert code == 0, (data, err)
        assert z.ns1()[1] == [lab.addr("ns1")]
    if phase == "verified":
        code, data, err = z.m("verify", z.fq)
        assert code == 0 and data["phase"] == "verified", (data, err)
    [s] = z.status()
    assert s["phase"] == phase
    code, data, err = z.m("rollback", z.fq)
    assert code == 0 and data["closed"] == "rolled back", (data, err)
    assert z.ns1() == before
    assert _wire(lab, z.fq) == wire_before
    assert z.status() == []


def _wire(lab: Lab, fq: str) -> list[str]:
    """The record as BIND holds it (zone transfer, TSIG), as text lines."""
    import dns.query

    with lab.operator_netns():
        msgs = list(dns.query.xfr(lab.addr("ns1"), P.ZONE, keyring=lab.tsig_keyring(),
                                  relativize=False, timeout=5))
    return sorted(rr.to_text() for m in msgs for rr in m.answer
                  if rr.name.to_text() in (fq, f"_provision-migration.{fq}"))


def test_a_second_start_is_refused_while_one_is_open(lab: Lab, rec: Any) -> None:
    z = rec()
    assert z.m("start", z.fq, "--to", lab.addr("ns1"), "--lower-ttl", "1")[0] == 0
    code, data, err = z.m("start", z.fq, "--to", lab.addr("resolver"), "--lower-ttl", "1")
    assert code == 2 and "already open" in err, (data, err)
    code, data, err = z.m("run", z.fq, "--to", lab.addr("resolver"))
    assert code == 2 and "goes to" in err, (data, err)
    [s] = z.status()
    assert s["target"]["values"] == [lab.addr("ns1")]


def test_a_failing_health_check_stops_the_cutover_and_leaves_the_record(lab: Lab, rec: Any) -> None:
    z = rec()
    assert z.m("start", z.fq, "--to", lab.addr("ns1"), "--lower-ttl", "1")[0] == 0
    code, data, err = z.m("cutover", z.fq, "--force", "--health", "tcp:9")  # nothing listens
    assert code == 1, (data, err)
    assert "health check failed" in err and "nothing switched" in err
    assert z.ns1() == ("NOERROR", [z.old], True, 1)
    [s] = z.status()
    assert s["phase"] == "lowered"


def test_health_from_the_bastion_reaches_what_the_operator_cannot(lab: Lab, rec: Any) -> None:
    """Issue 39: a new value only the private network reaches. From the operator's
    namespace the check fails (no route into the GPU segment); from the bastion, whose
    sshd makes the connection through the run's SSH link, it passes and the cutover goes."""
    z = rec()
    new = lab.addr("gpu1", "prv")  # sshd listens there; the operator has no route to it
    assert z.m("start", z.fq, "--to", new, "--lower-ttl", "1")[0] == 0
    code, data, err = z.m("cutover", z.fq, "--force", "--health", "tcp:22")
    assert code == 1, (data, err)
    assert "nothing switched" in err
    assert "unreachable" in err.lower() or "timed out" in err.lower(), err
    assert z.ns1()[1] == [z.old]
    # a name the inventory does not declare: exit 2 before anything is read or sent
    code, data, err = z.m("cutover", z.fq, "--force", "--health", "tcp:22",
                          "--health-from", "gpu99")
    assert code == 2, (data, err)
    assert "--health-from gpu99: no host or bastion of that name" in err
    # from gpu1 a closed port is refused by gpu1's own kernel, said as the sshd said it
    code, data, err = z.m("cutover", z.fq, "--force", "--health", "tcp:9",
                          "--health-from", "bastion")
    assert code == 1, (data, err)
    assert f"health tcp:9 {new}: FAILED ({new}:9: " in err and "(from bastion))" in err, err
    assert z.ns1()[1] == [z.old]
    code, data, err = z.m("cutover", z.fq, "--force", "--health", "tcp:22",
                          "--health-from", "bastion")
    assert code == 0, (data, err)
    assert f"health tcp:22 {new}: ok (connected to {new}:22 from bastion)" in err
    assert z.ns1()[1] == [new]
    [s] = z.status()
    assert s["phase"] == "switched"


def test_a_cname_target_change_works_like_an_a_change(lab: Lab, rec: Any) -> None:
    z = rec(rtype="CNAME", ttl=2, value=f"gpu1.{P.ZONE}.")
    code, data, err = z.m("run", z.fq, "--to", f"gpu2.{P.ZONE}", "--lower-ttl", "1")
    assert code == 0, (data, err)
    assert z.ns1() == ("NOERROR", [f"gpu2.{P.ZONE}."], True, 2)


def soa_minimum(lab: Lab, minimum: int) -> None:
    """Set the zone's SOA minimum (the negative-caching TTL, RFC 2308) on ns1, signed."""
    import dns.message
    import dns.query
    import dns.update

    with lab.operator_netns():
        q = dns.message.make_query(f"{P.ZONE}.", "SOA")
        [soa] = dns.query.tcp(q, lab.addr("ns1"), timeout=5).answer[0]
        up = dns.update.UpdateMessage(P.ZONE, keyring=lab.tsig_keyring())
        up.replace("@", 300, soa.replace(serial=soa.serial + 1, minimum=minimum))
        r = dns.query.tcp(up, lab.addr("ns1"), timeout=10)
    assert r.rcode() == 0, r


def test_status_explains_negative_caching_for_a_new_name(lab: Lab, rec: Any, tmp_path: Path) -> None:
    # a name whose NXDOMAIN the resolver still holds: asked while the zone's negative TTL is
    # 300 s (the lab's is 5 s, so that new names show up fast everywhere else), then created
    # and migrated at once; the resolver keeps its NXDOMAIN for as long as the test runs
    short2 = f"n{secrets.token_hex(3)}"
    fq = f"{short2}.{P.ZONE}."
    soa_minimum(lab, 300)
    try:
        assert _ask(lab, lab.addr("resolver"), short2, "A", rd=True)[0] == "NXDOMAIN"
    finally:
        soa_minimum(lab, 5)
    old = f"10.{lab.plan.octet}.1.{secrets.choice(range(150, 199))}"
    inv = _inventory(lab, tmp_path, lambda r: r.update({short2: {"type": "A", "values": [old], "ttl": 3}}))
    assert lab.provision_json("dns", "apply", "-i", str(inv), "--yes")[0] == 0
    env = {"PROVISION_STATE_DIR": str(tmp_path / "state2")}
    try:
        code, data, err = lab.provision_json("dns", "migrate", "start", fq, "--to", lab.addr("ns1"),
                                             "--lower-ttl", "1", "-i", str(inv), env=env)
        assert code == 0, (data, err)
        code, data, err = lab.provision_json("dns", "migrate", "status", fq, "-i", str(inv), env=env)
        assert code == 0, (data, err)
        [s] = data
        res = next(a for a in s["answers"] if a["role"] == "resolver")
        assert res["status"] == "NXDOMAIN", res
        assert any("negative caching" in n for n in s["notes"]), s["notes"]
    finally:
        lab.provision_json("dns", "migrate", "rollback", fq, "-i", str(inv), env=env)
        flush(lab, fq)


@pytest.mark.parametrize("fault, phase_after", [
    (("--kill-after-change", "2"), "switched"),   # switched in the zone, the journal says switching
    (("--kill-after-phase", "lowered"), "lowered"),
])
@pytest.mark.parametrize("then", ["run", "rollback"])
def test_killed_mid_run_status_tells_the_truth_then_complete_or_roll_back(
        lab: Lab, rec: Any, fault: tuple[str, ...], phase_after: str, then: str) -> None:
    z = rec(ttl=2)
    before, wire_before = z.ns1(), _wire(lab, z.fq)
    new = lab.addr("ns1")
    code, data, err = z.m("run", z.fq, "--to", new, "--lower-ttl", "1", faults=fault)
    assert code == -9, (code, data, err)
    [s] = z.status()
    assert s["phase"] == phase_after and not s["conflict"], s
    auth = next(a for a in s["answers"] if a["role"] == "authoritative")
    assert auth["serves"] == ("new" if phase_after == "switched" else "old") and auth["ttl"] == 1
    if then == "run":
        code, data, err = z.m("run", z.fq, "--to", new, "--lower-ttl", "1")
        assert code == 0, (data, err)
        assert z.ns1() == ("NOERROR", [new], True, 2)
    else:
        code, data, err = z.m("rollback", z.fq)
        assert code == 0, (data, err)
        assert z.ns1() == before and _wire(lab, z.fq) == wire_before
    assert z.status() == []


# --- the inventory drives the cutover; nothing reverts one silently ---------------------

def _edit(z: Zone, values: list[str], **zone_opts: Any) -> None:
    """Change the record's values (and zone options) in the test's inventory file."""
    import yaml

    doc = yaml.safe_load(z.inv.read_text())
    zone = doc["dns"]["zones"][P.ZONE]
    zone.update(zone_opts)
    zone["records"][z.short]["values"] = values
    z.inv.write_text(yaml.safe_dump(doc))


def _plan(lab: Lab, inv: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    return lab.provision_json("dns", "plan", "-i", str(inv), *args, env=env)


def test_inventory_driven_cutover_then_the_plan_is_empty(lab: Lab, rec: Any) -> None:
    z = rec(ttl=3)
    new = lab.addr("ns1")
    # the record's TTL (3 s) is above this zone's threshold (2 s): a cutover, not a change
    _edit(z, [new], cutover_above_ttl=2)
    code, data, err = _plan(lab, z.inv, "--detailed-exitcode")
    assert code == 3, (data, err)
    [cut] = data["zones"][0]["cutovers"]
    assert cut == {"name": z.fq, "type": "A", "old": [z.old], "new": [new], "ttl": 3}
    [change] = [c for sec in data["sections"] for c in sec["changes"] if c["type"] == "cutover"]
    assert f"a cutover: run `provision dns migrate run {z.short}`" in change["detail"][0]
    code, data, err = lab.provision_json("dns", "apply", "-i", str(z.inv), "--yes")
    assert code == 0, (data, err)
    assert z.ns1() == ("NOERROR", [z.old], True, 3)  # apply left it alone
    code, data, err = z.m("run", z.fq, "--lower-ttl", "1", "--health", "tcp:53")
    assert code == 0, (data, err)
    assert "the inventory declares" in err and data["closed"] == "finalized"
    assert data["inventory_written"] is None  # the inventory already said so
    assert z.ns1() == ("NOERROR", [new], True, 3)
    code, data, err = _plan(lab, z.inv, "--detailed-exitcode")
    assert code == 0, (data, err)
    assert data["summary"] == {"add": 0, "change": 0, "destroy": 0}
    # once more: the zone already holds what the inventory says
    code, data, err = z.m("run", z.fq)
    assert code == 0 and data["nothing_to_migrate"] is True, (data, err)
    assert "nothing to migrate" in err


def test_an_inventory_edited_to_a_third_value_mid_migration_is_refused(lab: Lab, rec: Any) -> None:
    z = rec(ttl=2)
    _edit(z, [lab.addr("ns1")])
    code, data, err = z.m("start", z.fq, "--lower-ttl", "1")
    assert code == 0, (data, err)
    _edit(z, [lab.addr("resolver")])
    code, data, err = z.m("cutover", z.fq, "--force")
    assert code == 2 and "the inventory now declares" in err and "refused" in err, (data, err)
    assert z.ns1()[1] == [z.old]  # nothing switched
    [s] = z.status()
    assert s["phase"] == "lowered"


def _commented(lab: Lab, tmp_path: Path, short: str, old: str) -> Path:
    """The lab's inventory as a person writes one: comments above and beside every line."""
    import yaml

    doc = yaml.safe_load(lab.inventory.read_text())
    doc["dns"]["zones"][P.ZONE]["records"][short] = {"type": "A", "values": [old], "ttl": 2}
    lines = yaml.safe_dump(doc, width=10**6, sort_keys=False).splitlines()
    out = ["# the lab, by hand", ""]
    for i, line in enumerate(lines):
        if not line.startswith((" ", "-")):
            out.append(f"# --- {line.split(':')[0]} ---")
        out.append(f"{line}   # note {i}" if i % 3 == 0 else line)
    # the same inventory (so the same default owner id, its file's name: docs/dns-records.md)
    p = tmp_path / lab.inventory.name
    p.write_text("\n".join(out) + "\n")
    return p


def test_an_ad_hoc_to_is_written_back_into_a_commented_inventory(lab: Lab, rec: Any,
                                                                 tmp_path: Path) -> None:
    z = rec(ttl=2)
    z.inv = _commented(lab, tmp_path, z.short, z.old)
    before = z.inv.read_text()
    new = lab.addr("ns1")
    code, data, err = z.m("run", z.fq, "--to", new, "--lower-ttl", "1")
    assert code == 0, (data, err)
    assert data["inventory_written"].startswith(f"{z.inv}:"), data
    after = z.inv.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(changed) == 1, changed
    assert changed[0][1] == changed[0][0].replace(z.old, new)
    code, data, err = _plan(lab, z.inv, "--detailed-exitcode")
    assert code == 0, (data, err)


def test_no_write_inventory_then_apply_refuses_the_revert_until_allowed(lab: Lab, rec: Any,
                                                                       tmp_path: Path) -> None:
    z = rec(ttl=2)
    new = lab.addr("ns1")
    before = z.inv.read_text()
    code, data, err = z.m("run", z.fq, "--to", new, "--lower-ttl", "1", "--no-write-inventory")
    assert code == 0, (data, err)
    assert z.inv.read_text() == before and "--no-write-inventory" in err
    moved = f"{z.fq.rstrip('.')} was moved {z.old} -> {new} by "
    code, data, err = _plan(lab, z.inv, env=z.env)
    assert code == 2 and moved in err, (data, err)
    code, data, err = lab.provision_json("check", "-i", str(z.inv), env=z.env)
    warned = [f for f in data["findings"] if f["code"] == "dns-migration-reverted"]
    assert warned and f"moved {z.old} -> {new}" in warned[0]["message"], data
    code, data, err = lab.provision_json("dns", "apply", "-i", str(z.inv), "--yes")
    assert code == 2 and moved in err and "ago" in err, (data, err)
    assert z.ns1()[1] == [new]  # not put back
    code, data, err = lab.provision_json("dns", "apply", "-i", str(z.inv), "--yes",
                                         "--allow-revert", z.short)
    assert code == 0, (data, err)
    assert z.ns1()[1] == [z.old]
    # the revert was on purpose: the closed record went with it, the plan is empty
    assert _ask(lab, lab.addr("ns1"), f"_provision-closed-a.{z.short}", "TXT")[0] == "NXDOMAIN"
    code, data, err = _plan(lab, z.inv, "--detailed-exitcode")
    assert code == 0, (data, err)
