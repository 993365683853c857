"""Security-group plan cost: API calls and wall time for 20 groups x 30 rules, 50 instances.

Runs a moto server on 127.0.0.1 (a free port; dummy keys, instance metadata disabled:
nothing reaches AWS), launches `--instances` instances (half named by instance id, half
found by private address), converges 20 groups of 30 ingress rules each and attaches
them with `provision sg apply`'s own code, then times `sg plan`'s work (every describe +
the pure plan) and counts the EC2 API calls through botocore's `before-call` event hook.

The claim under test: a plan costs a fixed number of describe calls per page (VPCs,
groups by name, managed groups, rules, instances by id, instances by address; moto
answers each in one page), never one per group, rule or instance.

Usage: .venv/bin/python bench/sg.py [--groups 20] [--rules 30] [--instances 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml


def inventory(path: Path, vpc: str, groups: int, rules: int, instances: list[str]) -> Path:
    hosts = {f"node{i:02d}": {"address": f"10.0.1.{10 + i}",
                              "security_groups": [f"bench-{i % groups:02d}", f"bench-{(i + 1) % groups:02d}"],
                              "aws": {"instance_id": iid} if i % 2 else {}}
             for i, iid in enumerate(instances)}
    doc = {"version": 1, "hosts": hosts, "aws": {"region": "us-east-1", "security_groups": {
        f"bench-{g:02d}": {"vpc": vpc, "description": f"bench group {g}", "ingress": [
            {"port": 1000 + r, "from": [f"10.{g}.{r}.0/24"], "description": f"rule {r}"}
            for r in range(rules)]}
        for g in range(groups)}}}
    out = path / "bench-sg.yml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--rules", type=int, default=30)
    ap.add_argument("--instances", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(k, None)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                      AWS_EC2_METADATA_DISABLED="true", AWS_ENDPOINT_URL=url, AWS_ENDPOINT_URL_EC2=url)
    try:
        from provision.cloud import aws as shell
        from provision.cloud.apply import read_plan as _plan
        from provision.cloud.plan import build
        from provision.inventory import load_inventory

        calls: collections.Counter[str] = collections.Counter()

        spent: collections.Counter[str] = collections.Counter()  # seconds per operation
        started: dict[str, float] = {}

        def count(model: Any, **_: Any) -> None:
            calls[model.name] += 1
            started[model.name] = time.perf_counter()

        def done(model: Any, **_: Any) -> None:
            spent[model.name] += time.perf_counter() - started.pop(model.name, time.perf_counter())

        with tempfile.TemporaryDirectory() as tmp:
            import boto3

            boot = boto3.client("ec2", region_name="us-east-1")
            vpc = boot.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            subnet = boot.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
            ids = [boot.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet,
                                      PrivateIpAddress=f"10.0.1.{10 + i}")["Instances"][0]["InstanceId"]
                   for i in range(args.instances)]
            inv = load_inventory(inventory(Path(tmp), vpc, args.groups, args.rules, ids))
            assert inv.aws is not None
            ec2 = shell.client(inv.aws)
            ec2.meta.events.register("before-call.ec2", count)
            ec2.meta.events.register("after-call.ec2", done)

            t0 = time.perf_counter()
            plan = _plan(inv, ec2)
            shell.create_groups(ec2, plan.groups)
            plan = _plan(inv, ec2)
            for p in plan.groups:
                shell.execute(ec2, p)
            for a in plan.attachments:
                shell.attach(ec2, a)
            apply_s = time.perf_counter() - t0
            apply_calls = dict(calls)
            calls.clear()

            times, pure = [], []
            spent.clear()
            for _ in range(args.rounds):
                calls.clear()
                t0 = time.perf_counter()
                plan = _plan(inv, ec2)
                times.append(time.perf_counter() - t0)
                plan_calls = dict(calls)
            plan_spent = dict(spent)
            from provision.cloud.plan import Live

            live = Live(tuple(shell.fetch(ec2, inv.aws.security_groups, [vpc])),
                        tuple(shell.fetch_instances(ec2, [n for n in inv.hosts])))
            for _ in range(args.rounds):
                t1 = time.perf_counter()
                build(inv, live)
                pure.append(time.perf_counter() - t1)
            assert not plan.has_changes and not plan.failed, "converged state should plan nothing"
    finally:
        server.stop()

    n = args.groups * args.rules
    print(f"sg bench: {args.groups} groups x {args.rules} rules = {n} rules, {args.instances} attached "
          "instances, moto server on 127.0.0.1")
    print(f"  apply from nothing: {sum(apply_calls.values())} API calls {apply_calls}, {apply_s:.2f} s")
    per_call = {k: f"{v / args.rounds * 1000:.0f} ms" for k, v in sorted(plan_spent.items())}
    print(f"  plan (converged):   {sum(plan_calls.values())} API calls {plan_calls}, "
          f"median {statistics.median(times) * 1000:.0f} ms over {args.rounds} rounds "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); "
          f"of which the pure plan {statistics.median(pure) * 1000:.1f} ms; per round by call: {per_call}")
    # VPCs, groups by name, managed groups, rules, instances by id, instances by address
    if sum(plan_calls.values()) > 6 * (1 + (max(args.groups, args.instances) - 1) // 200):
        print("  FAIL: the plan made more than one call per page", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
