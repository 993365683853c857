"""`clusters:` resolved against the hosts (pure): members, their training addresses, the
ports they open to each other, the rendezvous and the ephemeral port range.

Every refusal names the field; `resolve` reports through the resolver's `fail` so the
errors join the rest of the inventory's (file:line, exit 2)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import replace

from provision.spans import Span
from provision.spans import merge as _merge

from . import model as m
from .cluster_doc import ClusterDoc
from .source import FieldPath

Fail = Callable[[FieldPath, str], None]


def _span(value: int | str) -> Span | str:
    """A port or "LOW-HIGH" as an inclusive span, or why it is not one."""
    if isinstance(value, int):
        return (value, value)
    lo, hi = (int(x) for x in value.split("-"))
    if not (1 <= lo <= 65535 and 1 <= hi <= 65535):
        return f"{value!r}: ports are 1-65535"
    if lo > hi:
        return f"{value!r} is empty (its low end is above its high end)"
    return (lo, hi)


def _inside(span: Span, spans: tuple[Span, ...]) -> bool:
    return any(lo <= span[0] and span[1] <= hi for lo, hi in spans)


def _members(path: FieldPath, doc: ClusterDoc, hosts: Mapping[str, m.Host],
             bastions: set[str], fail: Fail) -> list[str]:
    out: list[str] = []
    for i, ref in enumerate(doc.hosts):
        where = (*path, "hosts", i)
        if ref.startswith(m.SELECTOR_PREFIX):
            role = ref[len(m.SELECTOR_PREFIX):]
            found = [h.name for h in hosts.values() if role in h.roles]
            if not found:
                fail(where, f"no host has the role '{role}'")
            out += [n for n in found if n not in out]
        elif ref in bastions:
            fail(where, f"'{ref}' is a bastion: a cluster's members are hosts")
        elif ref not in hosts:
            fail(where, f"unknown host '{ref}' (hosts: {', '.join(sorted(hosts)) or 'none'})")
        elif ref in out:
            fail(where, f"'{ref}' is listed twice")
        else:
            out.append(ref)
    return out


def _addresses(path: FieldPath, doc: ClusterDoc, members: list[str],
               hosts: Mapping[str, m.Host], fail: Fail) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name in doc.addresses:
        if name not in members:
            fail((*path, "addresses", name), f"'{name}' is not a member of this cluster "
                 f"(members: {', '.join(members)})")
    for name in members:
        given = doc.addresses.get(name)
        if given is not None:
            out[name] = tuple(dict.fromkeys(given))
            continue
        address = hosts[name].address
        try:
            out[name] = (str(ipaddress.ip_address(address)),)
        except ValueError:
            fail((*path, "hosts"), f"member '{name}' has the address {address!r}, a name: give "
                 f"its training address in clusters.{path[-1]}.addresses.{name}")
            continue
        if not any(ipaddress.ip_address(a).version == doc.family for a in out[name]):
            fail((*path, "addresses", name) if given else (*path, "family"),
                 f"member '{name}' has no IPv{doc.family} address (the cluster's family: "
                 f"MASTER_ADDR and the peers' rules need one); add one to "
                 f"clusters.{path[-1]}.addresses.{name} or set `family`")
    return out


def _ports(path: FieldPath, doc: ClusterDoc, fail: Fail) -> tuple[Span, ...]:
    if doc.ports is None:
        return ()
    spans: list[Span] = []
    for i, value in enumerate(doc.ports):
        s = _span(value)
        if isinstance(s, str):
            fail((*path, "ports", i), s)
        else:
            spans.append(s)
    # the rendezvous is always open between members: a job cannot start without it
    return _merge([*spans, (doc.rendezvous, doc.rendezvous)])


def _service_ports(host: m.Host) -> dict[int, str]:
    out = {host.port: "sshd"}
    for s in host.services:
        if s.socket is None:
            out.setdefault(s.port, f"service {s.name}")
        if s.https is not None:
            out.setdefault(s.https.port, f"service {s.name}'s door")
    return out


def _clashes(path: FieldPath, doc: ClusterDoc, master: str, members: list[str],
             ports: tuple[Span, ...], hosts: Mapping[str, m.Host], fail: Fail) -> None:
    taken = _service_ports(hosts[master])
    if doc.rendezvous in taken:
        fail((*path, "rendezvous"), f"port {doc.rendezvous} is {taken[doc.rendezvous]}'s on "
             f"{master}, the master: choose another rendezvous port")
    if doc.ephemeral_ports is None:
        return
    lo, hi = doc.ephemeral_ports
    where = (*path, "ephemeral_ports")
    if lo > hi:
        fail(where, f"[{lo}, {hi}] is empty (its low end is above its high end)")
        return
    if lo <= doc.rendezvous <= hi:
        fail(where, f"[{lo}, {hi}] holds the rendezvous port {doc.rendezvous}: a job's own "
             "outgoing connection could take it")
    for member in members:
        for port, what in sorted(_service_ports(hosts[member]).items()):
            if lo <= port <= hi:
                fail(where, f"[{lo}, {hi}] holds port {port}, {what}'s on {member}: an "
                     "outgoing connection could take it while the service restarts")
    if ports and not _inside((lo, hi), ports):
        fail(where, f"[{lo}, {hi}] is not inside the cluster's ports: members would drop the "
             f"connections NCCL and Gloo open on them")


def _in_group(path: FieldPath, group: str, members: list[str], hosts: Mapping[str, m.Host],
              fail: Fail) -> None:
    """Every member is in the cluster's security group: the rule from itself admits only them."""
    for name in members:
        if group not in hosts[name].security_groups:
            fail((*path, "security_group"), f"member '{name}' is not in security group '{group}' "
                 f"(its security_groups: {', '.join(hosts[name].security_groups) or 'none'}): "
                 f"add '{group}' to hosts.{name}.security_groups")


def _placed(path: FieldPath, group: str, members: list[str], hosts: Mapping[str, m.Host],
            aws: bool, fail: Fail) -> None:
    """A placement group is created in the inventory's AWS region, for EC2 instances."""
    if not aws:
        fail((*path, "placement_group"), f"placement group '{group}' needs the `aws:` section "
             "(its region is where sg apply creates it)")
        return
    for name in members:
        if hosts[name].instance is None:
            fail((*path, "placement_group"), f"member '{name}' has no `aws:` block: provision "
                 f"cannot tell whether its instance is in placement group '{group}'; give "
                 f"hosts.{name}.aws (instance_id, or {{}} to find it by its address)")


def resolve(docs: Mapping[str, ClusterDoc], hosts: tuple[m.Host, ...], bastions: set[str],
            groups: set[str], fail: Fail, aws: bool = True
            ) -> tuple[tuple[m.Cluster, ...], tuple[m.Host, ...]]:
    """The clusters, and the hosts with the ephemeral port range they get from them.
    `aws`: whether the inventory has an `aws:` section (`groups` are its security groups)."""
    by_name = {h.name: h for h in hosts}
    clusters: list[m.Cluster] = []
    for name, doc in docs.items():
        path: FieldPath = ("clusters", name)
        members = _members(path, doc, by_name, bastions, fail)
        if not members:
            continue
        master = doc.master or members[0]
        if master not in members:
            fail((*path, "master"), f"'{master}' is not a member (members: "
                 f"{', '.join(members)})")
            continue
        addresses = _addresses(path, doc, members, by_name, fail)
        ports = _ports(path, doc, fail)
        _clashes(path, doc, master, members, ports, by_name, fail)
        if doc.security_group is not None and doc.security_group not in groups:
            fail((*path, "security_group"), f"unknown security group '{doc.security_group}' "
                 f"(aws.security_groups: {', '.join(sorted(groups)) or 'none'})")
        elif doc.security_group is not None:
            _in_group(path, doc.security_group, members, by_name, fail)
        if doc.placement_group is not None:
            _placed(path, doc.placement_group, members, by_name, aws, fail)
        if doc.efa and doc.security_group is None:
            fail((*path, "efa"), "EFA's rules live in the members' shared security group: "
                 "name it in `security_group`")
        if len(addresses) != len(members):
            continue
        eph = tuple(doc.ephemeral_ports) if doc.ephemeral_ports else None
        clusters.append(m.Cluster(
            name=name, members=tuple(members), addresses=tuple(addresses.items()),
            protocols=tuple(dict.fromkeys(doc.protocols)), ports=ports,
            rendezvous=doc.rendezvous, master=master, family=doc.family,
            ephemeral_ports=(eph[0], eph[1]) if eph else None, efa=doc.efa,
            security_group=doc.security_group, placement_group=doc.placement_group))
    return tuple(clusters), _with_ranges(clusters, hosts, fail)


def _with_ranges(clusters: list[m.Cluster], hosts: tuple[m.Host, ...],
                 fail: Fail) -> tuple[m.Host, ...]:
    """Each host's ephemeral range: its own, else its clusters' (which must agree)."""
    out = []
    for h in hosts:
        wanted = {c.ephemeral_ports: c.name for c in clusters
                  if h.name in c.members and c.ephemeral_ports is not None}
        rng = h.ephemeral_ports
        if rng is not None and any(w != rng for w in wanted):
            fail(("hosts", h.name, "ephemeral_ports"), f"{list(rng)} differs from cluster "
                 f"{', '.join(n for w, n in wanted.items() if w != rng)}'s: one kernel has "
                 "one range")
        elif rng is None and len(wanted) > 1:
            fail(("clusters", sorted(wanted.values())[-1], "ephemeral_ports"),
                 f"{h.name} is in clusters {' and '.join(sorted(wanted.values()))} with "
                 "different ephemeral_ports: one kernel has one range")
        elif rng is None and wanted:
            rng = next(iter(wanted))
        if rng is not None:
            taken = [f"{p} ({what})" for p, what in sorted(_service_ports(h).items())
                     if rng[0] <= p <= rng[1]]
            if h.ephemeral_ports is not None and taken:
                fail(("hosts", h.name, "ephemeral_ports"), f"{list(rng)} holds "
                     f"{', '.join(taken)}: an outgoing connection could take the port")
        out.append(replace(h, ephemeral_ports=rng) if rng != h.ephemeral_ports else h)
    return tuple(out)
