"""`provision dns` against the lab's real BIND (RFC 2136 + TSIG) and Unbound."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from .conftest import PROVISION, Lab


def _ask(lab: Lab, server: str, name: str, rtype: str, rd: bool = False) -> tuple[str, list[str], bool]:
    """(rcode, sorted values, AA) from `server`, asked from the operator namespace."""
    import dns.flags
    import dns.message
    import dns.query
    import dns.rcode
    import dns.rdatatype

    q = dns.message.make_query(f"{name}.{P.ZONE}.", rtype)
    if not rd:
        q.flags &= ~dns.flags.RD
    with lab.operator_netns():
        r = dns.query.udp(q, server, timeout=2)
    want = dns.rdatatype.from_text(rtype)
    values = sorted(x.to_text() for rr in r.answer if rr.rdtype == want for x in rr)
    return dns.rcode.to_text(r.rcode()), values, bool(r.flags & dns.flags.AA)


def _run(lab: Lab, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", lab.plan.operator.netns, *PROVISION, *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def _inventory(lab: Lab, tmp_path: Path, edit: Any = None, key_file: str | None = None) -> Path:
    doc = yaml.safe_load(lab.inventory.read_text())
    zone = doc["dns"]["zones"][P.ZONE]
    if edit:
        edit(zone["records"])
    if key_file:
        zone["tsig_key_file"] = key_file
    p = tmp_path / "inventory.yml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.fixture
def restore(lab: Lab) -> Iterator[None]:
    """Put the zone back as the lab's inventory says (records provision added go, since
    their ownership markers say provision created them)."""
    yield
    r = _run(lab, "dns", "apply", "-i", str(lab.inventory), "--yes")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_fresh_lab_plans_no_changes(lab: Lab) -> None:
    code, data, err = lab.provision_json("dns", "plan", "-i", str(lab.inventory), "--detailed-exitcode")
    assert code == 0, (data, err)
    assert data["summary"] == {"add": 0, "change": 0, "destroy": 0}
    assert data["zones"][0]["records_read"] > 5


def test_change_add_delete_then_no_op_and_unmanaged_untouched(lab: Lab, tmp_path: Path,
                                                              restore: None) -> None:
    ns1 = lab.addr("ns1")
    before_ns1 = _ask(lab, ns1, "ns1", "A")
    before_gpu1_v6 = _ask(lab, ns1, "gpu1", "AAAA")
    new_app = f"10.{lab.plan.octet}.1.201"

    def edit(records: dict[str, Any]) -> None:
        records["app"] = {"type": "A", "values": [new_app], "ttl": 60}
        records["www"] = {"type": "CNAME", "value": f"app.{P.ZONE}"}
        records["v6"] = {"type": "AAAA", "values": ["fd00:0:0::1"]}

    inv = _inventory(lab, tmp_path, edit)
    code, data, err = lab.provision_json("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert code == 3, (data, err)
    assert data["summary"] == {"add": 2, "change": 1, "destroy": 0}
    code, data, err = lab.provision_json("dns", "apply", "-i", str(inv), "--yes")
    assert code == 0, (data, err)
    assert data["zones"][0]["applied"] is True
    # served by ns1 at once (apply waited for it)
    assert _ask(lab, ns1, "app", "A") == ("NOERROR", [new_app], True)
    assert _ask(lab, ns1, "www", "CNAME") == ("NOERROR", [f"app.{P.ZONE}."], True)
    assert _ask(lab, ns1, "v6", "AAAA") == ("NOERROR", ["fd00::1"], True)
    code, data, err = lab.provision_json("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert code == 0 and data["summary"] == {"add": 0, "change": 0, "destroy": 0}, (data, err)

    # change the AAAA and the CNAME
    def edit2(records: dict[str, Any]) -> None:
        edit(records)
        records["www"]["value"] = f"gpu1.{P.ZONE}"
        records["v6"]["values"] = ["fd00::2"]

    inv = _inventory(lab, tmp_path, edit2)
    code, data, err = lab.provision_json("dns", "apply", "-i", str(inv), "--yes")
    assert code == 0 and data["summary"] == {"add": 0, "change": 2, "destroy": 0}, (data, err)
    assert _ask(lab, ns1, "www", "CNAME") == ("NOERROR", [f"gpu1.{P.ZONE}."], True)
    assert _ask(lab, ns1, "v6", "AAAA") == ("NOERROR", ["fd00::2"], True)

    # remove www and v6 from the inventory: provision created them, so they go
    def drop(records: dict[str, Any]) -> None:
        edit(records)
        del records["www"], records["v6"]

    inv = _inventory(lab, tmp_path, drop)
    code, data, err = lab.provision_json("dns", "apply", "-i", str(inv), "--yes")
    assert code == 0, (data, err)
    assert data["summary"] == {"add": 0, "change": 0, "destroy": 2}
    assert _ask(lab, ns1, "www", "CNAME")[0] == "NXDOMAIN"
    assert _ask(lab, ns1, "v6", "AAAA")[0] == "NXDOMAIN"
    assert _ask(lab, ns1, "_provision.www", "TXT")[0] == "NXDOMAIN"
    # records provision does not manage: exactly as BIND started with them
    assert _ask(lab, ns1, "ns1", "A") == before_ns1 and before_ns1[1] == [ns1]
    assert _ask(lab, ns1, "gpu1", "AAAA") == before_gpu1_v6 and before_gpu1_v6[1]


def test_a_record_dropped_from_the_inventory_that_provision_never_wrote_stays(
        lab: Lab, tmp_path: Path) -> None:
    inv = _inventory(lab, tmp_path, lambda records: records.pop("gpu1"))
    code, data, err = lab.provision_json("dns", "plan", "-i", str(inv), "--detailed-exitcode")
    assert code == 0, (data, err)


def test_a_wrong_tsig_key_is_a_clear_error(lab: Lab, tmp_path: Path) -> None:
    key = tmp_path / "wrong.key"
    key.write_text(f'key "{P.TSIG_KEY_NAME}" {{\n\talgorithm hmac-sha256;\n'
                   '\tsecret "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";\n};\n')
    inv = _inventory(lab, tmp_path, key_file=str(key))
    r = _run(lab, "dns", "plan", "-i", str(inv))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "TSIG key 'lab-tsig'" in r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    code, data, err = lab.provision_json("dns", "check", "app", "-i", str(inv))  # needs no key
    assert code in (0, 1) and "TSIG" not in err, (data, err)
    ns1 = next(a for a in data["answers"] if a["role"] == "authoritative")
    assert ns1["aa"] and ns1["values"], data


def test_a_record_changed_between_read_and_write_is_not_overwritten(
        lab: Lab, tmp_path: Path, restore: None) -> None:
    import dns.query
    import dns.rcode
    import dns.update

    from provision.dns.provider import StaleRead, provider_for
    from provision.dns.sync import apply_zone, plan_zones
    from provision.inventory import load_inventory

    theirs = f"10.{lab.plan.octet}.1.222"
    ours = f"10.{lab.plan.octet}.1.223"

    def someone_else() -> None:  # between our read and our write
        upd = dns.update.Update(P.ZONE, keyring=lab.tsig_keyring())
        upd.replace("app", 300, "A", theirs)
        r = dns.query.tcp(upd, lab.addr("ns1"), timeout=5)
        assert r.rcode() == dns.rcode.NOERROR

    inv = load_inventory(_inventory(lab, tmp_path, lambda rec: rec["app"].update(values=[ours])))
    zone = inv.dns.zones[0] if inv.dns else None
    assert zone is not None
    provider = provider_for(zone, inv)
    build_update = provider.update_message

    def update_message(changes: Any) -> Any:  # the update is built after our read...
        message = build_update(changes)
        someone_else()  # ...and someone else writes before it is sent
        return message

    provider.update_message = update_message  # type: ignore[method-assign]
    with lab.operator_netns():
        run = plan_zones(inv, [zone], make_provider=lambda z, i: provider)[0]
        assert run.plan is not None and [c.op for c in run.plan.changes] == ["update"]
        with pytest.raises(StaleRead, match="changed since it was read"):
            apply_zone(run, timeout=10)
    assert _ask(lab, lab.addr("ns1"), "app", "A")[1] == [theirs]


def test_apply_one_change_until_every_authoritative_server_serves_it(
        lab: Lab, tmp_path: Path, restore: None) -> None:
    value = f"10.{lab.plan.octet}.1.231"
    inv = _inventory(lab, tmp_path, lambda rec: rec["app"].update(values=[value]))
    t0 = time.perf_counter()
    code, data, err = lab.provision_json("dns", "apply", "-i", str(inv), "--yes")
    wall = time.perf_counter() - t0
    assert code == 0, (data, err)
    seconds = data["zones"][0]["apply_seconds"]
    print(f"\nlab apply of one change until served by every authoritative server: "
          f"{seconds * 1000:.0f} ms (process wall time {wall:.2f} s)")
    assert _ask(lab, lab.addr("ns1"), "app", "A") == ("NOERROR", [value], True)


def test_check_shows_each_server_and_explains_a_stale_resolver(lab: Lab, tmp_path: Path,
                                                               restore: None) -> None:
    import secrets

    resolver = lab.addr("resolver")
    name = f"stale{secrets.token_hex(3)}"
    first, second = f"10.{lab.plan.octet}.1.232", f"10.{lab.plan.octet}.1.233"
    inv = _inventory(lab, tmp_path, lambda rec: rec.update({name: {"type": "A", "values": [first]}}))
    assert lab.provision_json("dns", "apply", "-i", str(inv), "--yes")[0] == 0
    assert _ask(lab, resolver, name, "A", rd=True)[1] == [first]  # now cached for 300 s
    inv = _inventory(lab, tmp_path, lambda rec: rec.update({name: {"type": "A", "values": [second]}}))
    assert lab.provision_json("dns", "apply", "-i", str(inv), "--yes")[0] == 0
    code, data, err = lab.provision_json("dns", "check", name, "-i", str(inv))
    assert code == 1, (data, err)
    by_role = {a["role"]: a for a in data["answers"]}
    assert by_role["authoritative"]["values"] == [second] and by_role["authoritative"]["aa"]
    assert by_role["resolver"]["values"] == [first] and not by_role["resolver"]["aa"]
    assert data["disagree"] == [resolver]
    assert any("remaining TTL" in n for n in data["notes"]), data["notes"]


def test_check_explains_negative_caching_for_a_missing_name(lab: Lab) -> None:
    code, data, err = lab.provision_json("dns", "check", "nothere", "-i", str(lab.inventory))
    assert code == 0, (data, err)
    assert {a["status"] for a in data["answers"]} == {"NXDOMAIN"}
    assert any("SOA minimum" in n for n in data["notes"]), data["notes"]


def test_one_rrset_can_be_read_for_migrations(lab: Lab) -> None:
    from provision.dns.provider import provider_for
    from provision.inventory import load_inventory

    inv = load_inventory(lab.inventory)
    assert inv.dns is not None
    provider = provider_for(inv.dns.zones[0], inv)
    with lab.operator_netns():
        rr = provider.get_rrset(f"ns1.{P.ZONE}.", "A")
        assert provider.get_rrset(f"nothere.{P.ZONE}.", "A") is None
        servers = provider.nameservers()
    assert rr is not None and rr.values == (lab.addr("ns1"),) and rr.ttl == 300
    assert servers == [(f"ns1.{P.ZONE}.", lab.addr("ns1"))]


def test_hostile_txt_records_in_the_zone_are_refused_and_nothing_is_sent(
        lab: Lab, tmp_path: Path) -> None:
    """Someone with write access to the zone (here: the lab's TSIG key) plants an ownership
    marker at a second spelling of the wildcard's marker name and a migration marker
    claiming the NS RRset. Read back through a real zone transfer, both are refused by
    name, and the zone's SOA serial shows nothing was written."""
    import dns.query
    import dns.rcode
    import dns.update

    wild = f"10.{lab.plan.octet}.1.240"
    marker = ["provision-migration=1", "phase=lowered", "type=NS", "ttl=300", "lower=60",
              "started=2026-01-01T00:00:00Z", "at=2026-01-01T00:00:01Z",
              "from=ns9.evil.example.", "to=ns9.evil.example."]
    planted = [("*", "A", [wild]), ("_provision.*", "TXT", ['"provision owns A"']),
               ("_provision-migration", "TXT", [f'"{s}"' for s in marker])]

    def update(add: bool) -> None:
        upd = dns.update.Update(P.ZONE, keyring=lab.tsig_keyring())
        for name, rtype, values in planted:
            if add:
                upd.add(name, 300, rtype, *values)
            else:
                upd.delete(name, rtype)
        with lab.operator_netns():
            r = dns.query.tcp(upd, lab.addr("ns1"), timeout=5)
        assert r.rcode() == dns.rcode.NOERROR

    def serial() -> int:
        import dns.message

        with lab.operator_netns():
            r = dns.query.udp(dns.message.make_query(f"{P.ZONE}.", "SOA"), lab.addr("ns1"),
                              timeout=2)
        return int(r.answer[0][0].serial)

    update(True)
    try:
        before = serial()
        r = _run(lab, "dns", "apply", "-i", str(lab.inventory), "--yes")
        out = " ".join((r.stdout + r.stderr).split())
        # the refused ownership marker fails the zone's plan (1); the unreadable migration
        # marker at the apex is bad input from the zone (2), which wins
        assert r.returncode == 2, out
        assert f"the ownership marker _provision.*.{P.ZONE}. TXT is refused" in out, out
        assert "is a migration marker provision cannot read" in out, out
        r = _run(lab, "dns", "migrate", "rollback", f"{P.ZONE}.", "-i", str(lab.inventory))
        out = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2, out
        assert f"_provision-migration.{P.ZONE}. TXT is refused: it names type 'NS'" in out, out
        assert serial() == before                                    # nothing was written
        assert _ask(lab, lab.addr("ns1"), "*", "A")[1] == [wild]     # their wildcard stays
    finally:
        update(False)


def test_import_through_a_zone_transfer_then_plan_shows_no_changes(lab: Lab, tmp_path: Path) -> None:
    """`provision import dns` reads the BIND zone by AXFR (RFC 2136 provider): the YAML,
    adopted in place of the zone's records, plans no changes; records the lab's inventory
    does not declare (ns1's addresses) are imported too, SOA/NS are comments, nothing is
    written (the SOA serial stays). In-process, in the operator namespace (no start-up)."""
    import dns.message
    import dns.query
    from click.testing import CliRunner

    from provision.cli import main

    def serial() -> int:
        r = dns.query.udp(dns.message.make_query(f"{P.ZONE}.", "SOA"), lab.addr("ns1"), timeout=2)
        return int(r.answer[0][0].serial)

    out = tmp_path / "imported.yml"
    with lab.operator_netns():
        before = serial()
        r = CliRunner().invoke(main, ["import", "dns", "-i", str(lab.inventory), "--zone", P.ZONE,
                                      "-o", str(out)])
        assert r.exit_code == 0, r.output
        raw = out.read_bytes()
        assert all(b == 0x0A or 0x20 <= b < 0x7F for b in raw)
        assert b"#   @ SOA" in raw and b"#   @ NS" in raw
        records = yaml.safe_load(raw)["dns"]["zones"][P.ZONE]["records"]
        assert records["ns1"][0] == {"type": "A", "values": [lab.addr("ns1")], "ttl": 300}
        doc = yaml.safe_load(lab.inventory.read_text())
        declared = set(doc["dns"]["zones"][P.ZONE]["records"])
        assert declared < set(records)
        doc["dns"]["zones"][P.ZONE]["records"] = records
        adopted = tmp_path / "inventory.yml"
        adopted.write_text(yaml.safe_dump(doc))
        r = CliRunner().invoke(main, ["dns", "plan", "-i", str(adopted), "--detailed-exitcode"])
        assert r.exit_code == 0, r.output
        assert "no changes" in r.output
        assert serial() == before


def _plan_apply(lab: Lab, path: Path) -> tuple[tuple[int, int, int], bool]:
    """(creates, updates, deletes) of the zone's plan, applied; then whether the next
    plan is empty. In this process (in the operator namespace): no CLI start-up."""
    from provision.dns.sync import apply_zone, plan_zones
    from provision.inventory import load_inventory

    inv = load_inventory(path)
    assert inv.dns is not None
    with lab.operator_netns():
        [run] = plan_zones(inv, inv.dns.zones)
        assert run.plan is not None and not run.error and not run.plan.refused, run
        ops = [c.op for c in run.plan.changes]
        apply_zone(run, timeout=60)
        [again] = plan_zones(inv, inv.dns.zones)
    assert again.plan is not None
    return (ops.count("create"), ops.count("update"), ops.count("delete")), \
        not again.plan.changes and not again.plan.change_set


def test_txt_mx_srv_caa_and_records_from_hosts_round_trip_on_bind(lab: Lab, tmp_path: Path) -> None:
    """The four new types through RFC 2136 to the lab's BIND, served by it (AA), and no
    change on the next plan; the GPU hosts' A records come from `from_hosts` instead of
    being declared, and plan as the same records (no change, nothing created)."""
    doc = yaml.safe_load(lab.inventory.read_text())
    zone = doc["dns"]["zones"][P.ZONE]
    gpus = [n.name for n in lab.plan.gpu_hosts]
    for name in gpus:
        del zone["records"][name]
    zone["from_hosts"] = {"roles": ["gpu-server"], "ttl": 300}
    z = P.ZONE
    zone["records"].update({
        # BIND refuses an update whose in-zone MX target has no address record
        "mail": [{"type": "MX", "values": [f"10 {gpus[0]}.{z}", f"20 {gpus[1].upper()}.{z}."]},
                 {"type": "TXT", "values": ["v=spf1 mx -all", "k=" + "x" * 300]},
                 {"type": "CAA", "values": ['0 issue "letsencrypt.org"', f'0 iodef "mailto:sec@{z}"']}],
        "_sip._tcp": {"type": "SRV", "values": [f"10 60 5060 sip.{z}"], "ttl": 120}})
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc))
    try:
        assert _plan_apply(lab, inv) == ((4, 0, 0), True)
        ns1 = lab.addr("ns1")
        assert _ask(lab, ns1, "mail", "MX") == (
            "NOERROR", [f"10 {gpus[0]}.{z}.", f"20 {gpus[1]}.{z}."], True)
        assert _ask(lab, ns1, "mail", "TXT") == (
            "NOERROR", sorted(['"v=spf1 mx -all"', f'"k={"x" * 253}" "{"x" * 47}"']), True)
        assert _ask(lab, ns1, "mail", "CAA") == (
            "NOERROR", sorted(['0 issue "letsencrypt.org"', f'0 iodef "mailto:sec@{z}"']), True)
        assert _ask(lab, ns1, "_sip._tcp", "SRV") == ("NOERROR", [f"10 60 5060 sip.{z}."], True)
        assert _ask(lab, ns1, gpus[0], "A")[1] == [lab.addr(gpus[0])]
    finally:  # the lab's own inventory again: the records provision created (marked) go
        assert _plan_apply(lab, lab.inventory)[1]
    assert _ask(lab, lab.addr("ns1"), "mail", "MX")[0] == "NXDOMAIN"
