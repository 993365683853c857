"""AWS: the security groups and their rules, the groups a machine, bastion or role attaches,
and the EC2 instance each machine is (claimed once)."""

from __future__ import annotations

import difflib
import ipaddress
from typing import Any

from provision.dnsdata.endpoint import problem as endpoint_problem

from .. import model as m
from ..fields import is_cidr
from ..schema import InstanceDoc
from ..source import FieldPath, dotted
from .context import Section


class Cloud(Section):
    def _group_name(self, path: FieldPath, name: str, what: str) -> bool:
        """Whether `name` is a declared security group; reports it at `path` if not."""
        declared = list(self.doc.aws.security_groups) if self.doc.aws else []
        if name in declared:
            return True
        close = difflib.get_close_matches(name, declared, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        self.fail(path, f"{what} '{name}'{hint} (aws.security_groups: {', '.join(declared) or 'none defined'})")
        return False

    def attached(self, path: FieldPath, names: list[str]) -> tuple[str, ...]:
        """The security groups a host, bastion or role names, checked against aws.security_groups."""
        roles = self.doc.roles
        if path[0] == "roles" and (len(path) < 2 or path[1] not in roles):
            return ()
        ok = [g for i, g in enumerate(names)
              if self._group_name((*path, "security_groups", i), g, "unknown security group")]
        return tuple(dict.fromkeys(ok))

    def instances_have_groups(self, bastions: tuple[m.Host, ...], hosts: tuple[m.Host, ...]) -> None:
        """An instance always carries a group (AWS refuses none): an `aws:` block needs some."""
        for kind, nodes in (("bastions", bastions), ("hosts", hosts)):
            for n in nodes:
                if n.instance is not None and not n.security_groups and not n.instance.keep_groups:
                    self.fail((kind, n.name, "aws"), "an instance needs at least one group: list "
                              "security_groups (or aws.keep_groups) for it")

    def instances_claimed_once(self, bastions: tuple[m.Host, ...],
                                hosts: tuple[m.Host, ...]) -> None:
        """One EC2 instance is one machine. `sg apply` plans each machine's attachment on
        its own: two machines naming one instance (by id, or by one private address in one
        VPC) would each set its groups, the second undoing the first, and the lockout guard
        would judge each alone. The second claim is an error naming the first."""
        first_id: dict[str, FieldPath] = {}
        first_address: dict[str, list[tuple[str | None, FieldPath]]] = {}
        for kind, nodes in (("bastions", bastions), ("hosts", hosts)):
            for n in nodes:
                inst = n.instance
                if inst is None:
                    continue
                base: FieldPath = (kind, n.name, "aws")
                if inst.id is not None:
                    where = (*base, "instance_id")
                    if inst.id in first_id:
                        self.fail(where, f"instance {inst.id} is also claimed by "
                                  f"{self._claim(first_id[inst.id])}: one EC2 instance is one "
                                  "machine (each machine's groups would be set on it in turn, "
                                  "the second undoing the first)")
                    else:
                        first_id[inst.id] = where
                    continue
                if inst.private_address is None:
                    continue  # already an error: no address to find it by
                given = self.source.positions.get((*base, "private_address"))
                where = (*base, "private_address") if given else base
                vpc = self._vpc_of(n)
                seen = first_address.setdefault(inst.private_address, [])
                clash = next((w for v, w in seen if v is None or vpc is None or v == vpc), None)
                if clash is not None:
                    self.fail(where, f"the private address {inst.private_address} that finds "
                              f"this machine's instance is also claimed by {self._claim(clash)}"
                              f"{'' if vpc is None else ' in ' + vpc}: one EC2 instance is one "
                              "machine; give each its own aws.instance_id or private_address")
                else:
                    seen.append((vpc, where))

    def _claim(self, where: FieldPath) -> str:
        """`hosts.gpu1 (FILE:LINE)`: the machine of an `aws` claim, and where it is."""
        pos = self.source.where(where)
        return f"{where[0]}.{where[1]} ({pos.file}:{pos.line})"

    def _vpc_of(self, node: m.Host) -> str | None:
        """The one VPC a machine's groups are declared in, or None when unknown at load (a
        group given by id only, or groups in several VPCs, which `sg plan` refuses)."""
        declared = self.doc.aws.security_groups if self.doc.aws else {}
        vpcs = {declared[g].vpc if g in declared else None for g in node.security_groups}
        return next(iter(vpcs)) if len(vpcs) == 1 else None

    def instance(self, path: FieldPath, doc: InstanceDoc | None, address: str) -> m.Instance | None:
        """The EC2 instance of a machine; found by private address unless an id is given."""
        if doc is None:
            return None
        if doc.instance_id is not None and doc.private_address is not None:
            self.fail((*path, "aws", "private_address"),
                      "give instance_id or private_address, not both")
        private = doc.private_address
        if doc.instance_id is None and private is None:
            try:
                private = str(ipaddress.IPv4Address(address))
            except ValueError:
                self.fail((*path, "aws"), f"the address {address!r} is not an IPv4 address: give "
                          "aws.instance_id or aws.private_address to find the instance")
        return m.Instance(doc.instance_id, private, tuple(dict.fromkeys(doc.keep_groups)))

    def _rules(self, path: FieldPath, docs: list[Any], peers: str) -> tuple[m.IngressRule, ...]:
        rules = []
        seen: dict[tuple[Any, ...], int] = {}
        for i, r in enumerate(docs):
            sources = r.from_ if peers == "from" else r.to
            if r.protocol in ("icmp", "all"):
                lo, hi = -1, -1
            else:
                lo, hi = (r.port, r.port) if r.port is not None else (r.ports or [0, 0])
            for j, src in enumerate(sources):
                if not is_cidr(src):
                    self._group_name((*path, i, peers, j), src,
                                     "not a CIDR, and no security group named")
                same = (r.protocol, lo, hi, src)
                if same in seen and seen[same] != i:
                    self.fail((*path, i, peers, j), f"{src} is already admitted with the same protocol "
                              f"and ports by {dotted(path)}[{seen[same]}] (AWS keeps one rule, with one "
                              "description)")
                seen.setdefault(same, i)
            rules.append(m.IngressRule(r.protocol, lo, hi, tuple(dict.fromkeys(sources)), r.description))
        return tuple(rules)

    def resolve(self) -> m.Aws | None:
        a = self.doc.aws
        if a is None:
            return None
        groups = []
        ids: dict[str, str] = {}
        for gname, g in a.security_groups.items():
            gpath: FieldPath = ("aws", "security_groups", gname)
            if is_cidr(gname):  # a rule's source `10.0.0.5` is the address, never this group
                self.fail(gpath, f"a security group name must not read as an address or CIDR "
                          f"('{gname}' as a rule's source is {ipaddress.ip_network(gname)}); "
                          f"name it e.g. 'group-{gname}'")
            if g.id is not None:
                if g.id in ids:
                    self.fail((*gpath, "id"), f"group id {g.id} is also declared as '{ids[g.id]}'")
                ids[g.id] = gname
            ingress = self._rules((*gpath, "ingress"), list(g.ingress), "from")
            egress = None if g.egress is None else self._rules((*gpath, "egress"), list(g.egress), "to")
            groups.append(m.SecurityGroup(gname, g.vpc, g.description, ingress, id=g.id, egress=egress))
        if a.endpoint_url is not None:
            why = endpoint_problem(a.endpoint_url, "the endpoint_url")
            if why:
                self.fail(("aws", "endpoint_url"), why)
        return m.Aws(a.region, a.endpoint_url, tuple(groups))
