"""DNS plan and apply timings (issue 12's performance goals), printed, never asserted.

  .venv/bin/python bench/dns.py [--records 5000] [--lab NAME]

* pure diff: 5,000 declared records against 5,000 served (50 of them changed);
* route53: one paged list pass over moto's server (127.0.0.1, 300 per page as AWS) + diff;
* clouddns: one paged list pass through google-cloud-dns against the local Cloud DNS v1
  server of the tests (127.0.0.1) + diff;
* rfc2136 (with --lab NAME, a running lab, root): a TSIG-signed AXFR of the lab's zone
  grown to 5,000 records + diff; then `apply` of one change until every authoritative
  server serves it (median of 5).

Traffic goes to 127.0.0.1 and to the lab's namespaces only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# this file is named dns.py: keep its folder off the path, or `import dns` finds it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))  # tests.support.clouddns_fake

from provision.dns.rrset import RRset, rrset  # noqa: E402
from provision.dns.zone_plan import plan_zone  # noqa: E402
from provision.inventory.model import Record, Zone  # noqa: E402


def _ip(i: int) -> str:
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255 or 1}"


def zone_model(name: str, n: int, changed: int = 50) -> Zone:
    recs = tuple(Record(f"h{i:05d}", "A", ((_ip(i + 7) if i < changed else _ip(i)),), 300) for i in range(n))
    return Zone(name=name, provider="rfc2136", records=recs)


def served(name: str, n: int) -> list[RRset]:
    return [rrset(f"h{i:05d}.{name}.", "A", 300, [_ip(i)]) for i in range(n)]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_pure(n: int) -> None:
    from provision.dns.rrset import desired

    z = zone_model("example.org", n)
    have = served("example.org", n)
    t_des, want = timed(lambda: desired(z))
    t_plan, plan = timed(lambda: plan_zone("example.org", want, have))
    print(f"pure: desired() {t_des * 1000:.1f} ms + plan_zone() {t_plan * 1000:.1f} ms for {n} records "
          f"({len(plan.changes)} changes)")


def bench_route53(n: int) -> None:
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    from provision.dns.rrset import desired
    from provision.dns.providers.route53 import Route53Provider

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null",
                      AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        c = boto3.client("route53", endpoint_url=url, region_name="us-east-1")
        zid = c.create_hosted_zone(Name="example.org.", CallerReference="bench")["HostedZone"]["Id"]
        have = served("example.org", n)
        for i in range(0, n, 1000):
            c.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
                {"Action": "CREATE", "ResourceRecordSet": {"Name": rr.name, "Type": "A", "TTL": 300,
                                                           "ResourceRecords": [{"Value": rr.values[0]}]}}
                for rr in have[i:i + 1000]]})
        p = Route53Provider("example.org", hosted_zone_id=zid, endpoint_url=url, page_size=300)
        pages = []
        p.client.meta.events.register("provide-client-params.route53.ListResourceRecordSets",
                                      lambda params, **_: pages.append(1))
        t_list, actual = timed(p.list_rrsets)
        t_plan, plan = timed(lambda: plan_zone("example.org", desired(zone_model("example.org", n)), actual))
        print(f"route53 (moto server): list {len(actual)} rrsets in {len(pages)} pages {t_list:.2f} s "
              f"+ desired+diff {t_plan * 1000:.1f} ms = {t_list + t_plan:.2f} s ({len(plan.changes)} changes)")
    finally:
        server.stop()


def bench_clouddns(n: int) -> None:
    from provision.dns.providers.clouddns import CloudDnsProvider
    from provision.dns.rrset import desired
    from tests.support.clouddns_fake import FakeCloudDns

    fake = FakeCloudDns(page_size=1000).start()
    try:
        fake.add_zone("bench-project", "example-org", "example.org.")
        for rr in served("example.org", n):
            fake.set_rrset("bench-project", "example-org", rr.name, "A", 300, list(rr.values))
        p = CloudDnsProvider("example.org", project="bench-project", managed_zone="example-org",
                             endpoint=fake.url)
        t_list, actual = timed(p.list_rrsets)
        t_plan, plan = timed(lambda: plan_zone("example.org", desired(zone_model("example.org", n)), actual))
        pages = len([1 for m, path in fake.requests if "/rrsets" in path])
        print(f"clouddns (local v1 server): list {len(actual)} rrsets in {pages} pages {t_list:.2f} s "
              f"+ desired+diff {t_plan * 1000:.1f} ms = {t_list + t_plan:.2f} s ({len(plan.changes)} changes)")
    finally:
        fake.stop()


def bench_lab(name: str, n: int) -> None:
    import dns.query
    import dns.update

    from provision.dns.provider import provider_for
    from provision.dns.rrset import desired
    from provision.dns.sync import apply_zone, plan_zones
    from provision.inventory import load_inventory
    from provision.lab import plan as P
    from provision.lab.netns import in_netns
    from provision.lab.state import read_state

    state = read_state(name)
    if state is None:
        print(f"rfc2136: lab {name} is not up; skipped")
        return
    lab = P.plan_from_state(state)
    inv = load_inventory(lab.paths["inventory"])
    assert inv.dns is not None
    zone = inv.dns.zones[0]
    provider: Any = provider_for(zone, inv)
    big = [rrset(f"b{i:05d}.{P.ZONE}.", "A", 300, [f"10.{lab.octet}.9.{i % 250 + 1}"]) for i in range(n)]
    with in_netns(lab.operator.netns):
        have = provider.list_rrsets()
        missing = [rr for rr in big if rr.key not in {h.key for h in have}]
        for i in range(0, len(missing), 500):
            upd = dns.update.Update(P.ZONE, keyring=provider.keyring, keyname=provider.key_name)
            for rr in missing[i:i + 500]:
                upd.add(rr.name, 300, "A", rr.values[0])
            dns.query.tcp(upd, zone.server or "", timeout=10)
        z = Zone(zone.name, "rfc2136", zone.records + tuple(
            Record(rr.name.split(".")[0], "A", rr.values, 300) for rr in big), server=zone.server,
            tsig_key_file=zone.tsig_key_file)
        t_list, actual = timed(provider.list_rrsets)
        t_plan, plan = timed(lambda: plan_zone(zone.name, desired(z), actual))
        print(f"rfc2136 (lab BIND, TSIG AXFR): list {len(actual)} rrsets {t_list:.2f} s + desired+diff "
              f"{t_plan * 1000:.1f} ms = {t_list + t_plan:.2f} s ({len(plan.changes)} changes)")
        for i in range(0, len(big), 500):
            upd = dns.update.Update(P.ZONE, keyring=provider.keyring, keyname=provider.key_name)
            for rr in big[i:i + 500]:
                upd.delete(rr.name, "A")
            dns.query.tcp(upd, zone.server or "", timeout=30)
        times = []
        base = next(r for r in zone.records if r.name == "app")
        for k in range(5):
            value = f"10.{lab.octet}.1.{240 + k}" if k < 4 else base.values[0]
            zk = Zone(zone.name, "rfc2136", tuple(
                Record(r.name, r.type, (value,) if r.name == "app" else r.values, r.ttl)
                for r in zone.records), server=zone.server, tsig_key_file=zone.tsig_key_file)
            run = plan_zones(inv, [zk], make_provider=lambda _z, _i: provider)[0]
            t0 = time.perf_counter()
            apply_zone(run, timeout=10)
            times.append(time.perf_counter() - t0)
        print(f"rfc2136 (lab BIND): apply of one change until every authoritative server serves it: "
              f"median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms (5 runs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--lab", default=None, help="a running lab to measure rfc2136 on (root)")
    ap.add_argument("--skip", action="append", default=[], choices=["route53", "clouddns"])
    a = ap.parse_args()
    bench_pure(a.records)
    if "route53" not in a.skip:
        bench_route53(a.records)
    if "clouddns" not in a.skip:
        bench_clouddns(a.records)
    if a.lab:
        bench_lab(a.lab, a.records)


if __name__ == "__main__":
    main()
