"""Security group rules as normalised data, and the pure reconcile. No I/O.

Declared rules (the inventory) and described rules (`describe_security_groups` +
`describe_security_group_rules` output, as plain dicts) are both turned into `RuleKey`s,
spelled one way so a plan never shows a perpetual diff:

- one peer per rule (AWS's rule view already has one CIDR or group per rule; an inventory
  rule with three sources becomes three keys);
- CIDRs through `ipaddress` (IPv6 compressed and lower-case, `2001:DB8:0::/32` ->
  `2001:db8::/32`);
- protocols by name: `-1`/`all` -> `all` with ports -1/-1, `6` -> `tcp`, `17` -> `udp`,
  `1` -> `icmp`, `58` -> `icmpv6`; tcp/udp with no ports (or -1) -> 0-65535;
- group references by group id (a group not created yet is `sg:NAME` until it exists).

`reconcile()` diffs one declared group against what AWS has: revoke (by rule id, only in
groups tagged `managed-by: provision`), authorize, and description updates (never revoke
plus authorize for a description). Extra rules in foreign groups are reported as drift and
never removed. `lost_operator_access()` says which operator SSH sources a plan would stop
admitting, so the command can refuse it without `--force`. A group a cluster names gets the
rules the cluster implies (`cluster_rules.py`) beside its declared ones.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provision.frozen import frozen
from provision.inventory.fields import is_cidr
from provision.inventory.model import IngressRule, Inventory, SecurityGroup

from . import cluster_rules

TAG_KEY, TAG_VALUE = "managed-by", "provision"
PENDING = "sg:"  # peer prefix for a group that does not exist yet

_PROTOCOLS = {"-1": "all", "all": "all", "6": "tcp", "tcp": "tcp", "17": "udp", "udp": "udp",
              "1": "icmp", "icmp": "icmp", "58": "icmpv6", "icmpv6": "icmpv6"}
_API_PROTOCOL = {"all": "-1", "tcp": "tcp", "udp": "udp", "icmp": "icmp", "icmpv6": "58"}


@dataclass(frozen=True, order=True)
class RuleKey:
    """One rule, normalised: what AWS compares when it says "duplicate"."""

    egress: bool
    protocol: str  # tcp udp icmp icmpv6 all, or an IANA protocol number as AWS spells it
    from_port: int  # -1 with icmp (any type) and all
    to_port: int
    peer: str  # canonical CIDR, group id (sg-...), prefix list (pl-...), or sg:NAME (pending)

    @property
    def peer_kind(self) -> str:
        if self.peer.startswith(PENDING) or self.peer.startswith("sg-"):
            return "group"
        if self.peer.startswith("pl-"):
            return "prefix-list"
        return "cidr6" if ":" in self.peer else "cidr4"

    def order(self) -> tuple[Any, ...]:
        """Display order: ingress first, by protocol and port, IPv4 before IPv6 before groups."""
        rank = {"cidr4": 0, "cidr6": 1, "group": 2, "prefix-list": 3}[self.peer_kind]
        addr: Any = self.peer
        if rank < 2:
            net = ipaddress.ip_network(self.peer)
            addr = (int(net.network_address), net.prefixlen)
        return (self.egress, self.protocol, self.from_port, self.to_port, rank, addr)

    def admits_tcp(self, port: int) -> bool:
        if self.protocol == "all":
            return True
        return self.protocol == "tcp" and self.from_port <= port <= self.to_port


@frozen
class LiveRule:
    id: str  # sgr-...; "" for the default egress rule of a group not created yet
    key: RuleKey
    description: str = ""


@frozen
class LiveGroup:
    id: str
    name: str
    vpc: str
    description: str
    managed: bool  # carries managed-by: provision
    rules: tuple[LiveRule, ...] = ()


@frozen
class GroupPlan:
    """What to do to one declared group."""

    name: str
    group_id: str | None  # None: the group will be created
    vpc: str | None
    description: str
    managed: bool
    revoke: tuple[LiveRule, ...] = ()
    authorize: tuple[tuple[RuleKey, str], ...] = ()
    redescribe: tuple[tuple[LiveRule, str], ...] = ()
    drift: tuple[LiveRule, ...] = ()  # extras in a foreign group: reported, never removed
    lost_operator_cidrs: tuple[str, ...] = ()  # operator SSH sources this plan stops admitting
    error: str = ""

    @property
    def create(self) -> bool:
        return self.group_id is None and not self.error

    @property
    def has_changes(self) -> bool:
        return bool(self.create or self.revoke or self.authorize or self.redescribe)


# --- normalisation -----------------------------------------------------------------------

def canonical_cidr(text: str) -> str:
    return str(ipaddress.ip_network(text.strip(), strict=False))


def canonical_protocol(value: Any) -> str:
    text = str(value).strip().lower()
    return _PROTOCOLS.get(text, text)


def canonical_ports(protocol: str, from_port: Any, to_port: Any) -> tuple[int, int]:
    lo = -1 if from_port is None else int(from_port)
    hi = -1 if to_port is None else int(to_port)
    if protocol == "all":
        return -1, -1
    if protocol in ("tcp", "udp") and lo == -1 and hi == -1:
        return 0, 65535
    return lo, hi


def _key(egress: bool, protocol: Any, from_port: Any, to_port: Any, peer: str) -> RuleKey:
    proto = canonical_protocol(protocol)
    lo, hi = canonical_ports(proto, from_port, to_port)
    return RuleKey(egress, proto, lo, hi, peer)


def described_rule(rule: Mapping[str, Any], pair_descriptions: Mapping[tuple[Any, ...], str] | None = None
                   ) -> LiveRule:
    """One entry of describe_security_group_rules as a LiveRule. Raises ValueError, naming
    the rule, for a CIDR or port that is not one."""
    try:
        return _described_rule(rule, pair_descriptions)
    except ValueError as e:
        raise ValueError(f"rule {rule.get('SecurityGroupRuleId')} of group {rule.get('GroupId')}: {e}") from None


def _described_rule(rule: Mapping[str, Any], pair_descriptions: Mapping[tuple[Any, ...], str] | None
                    ) -> LiveRule:
    if rule.get("CidrIpv4"):
        peer = canonical_cidr(rule["CidrIpv4"])
    elif rule.get("CidrIpv6"):
        peer = canonical_cidr(rule["CidrIpv6"])
    elif rule.get("ReferencedGroupInfo", {}).get("GroupId"):
        peer = rule["ReferencedGroupInfo"]["GroupId"]
    elif rule.get("PrefixListId"):
        peer = rule["PrefixListId"]
    else:
        peer = "?"
    key = _key(bool(rule.get("IsEgress")), rule.get("IpProtocol", "-1"), rule.get("FromPort"),
               rule.get("ToPort"), peer)
    desc = rule.get("Description")
    if desc is None and key.peer_kind == "group" and pair_descriptions:
        # moto (and older views) leave group-pair descriptions out of the rule view; the
        # group view has them.
        desc = pair_descriptions.get((rule.get("GroupId"), key))
    return LiveRule(str(rule.get("SecurityGroupRuleId", "")), key, desc or "")


def _pair_descriptions(group: Mapping[str, Any]) -> dict[tuple[Any, ...], str]:
    out: dict[tuple[Any, ...], str] = {}
    for egress, perms in ((False, group.get("IpPermissions", [])), (True, group.get("IpPermissionsEgress", []))):
        for perm in perms:
            for pair in perm.get("UserIdGroupPairs", []):
                if pair.get("Description") and pair.get("GroupId"):
                    key = _key(egress, perm.get("IpProtocol", "-1"), perm.get("FromPort"),
                               perm.get("ToPort"), pair["GroupId"])
                    out[(group.get("GroupId"), key)] = pair["Description"]
    return out


def live_groups(groups: Iterable[Mapping[str, Any]], rules: Iterable[Mapping[str, Any]]) -> list[LiveGroup]:
    """Join describe_security_groups and describe_security_group_rules output (all pages)."""
    groups = list(groups)
    pairs: dict[tuple[Any, ...], str] = {}
    for g in groups:
        pairs.update(_pair_descriptions(g))
    by_group: dict[str, list[LiveRule]] = {}
    for r in rules:
        by_group.setdefault(str(r.get("GroupId")), []).append(described_rule(r, pairs))
    out = []
    for g in groups:
        tags = {t.get("Key"): t.get("Value") for t in g.get("Tags", [])}
        gid = str(g["GroupId"])
        found = sorted(by_group.get(gid, []), key=lambda x: (x.key.order(), x.id))
        out.append(LiveGroup(gid, str(g.get("GroupName", "")), str(g.get("VpcId", "")),
                             str(g.get("Description", "")), tags.get(TAG_KEY) == TAG_VALUE, tuple(found)))
    return out


def declared_keys(group: SecurityGroup, ids: Mapping[str, str]) -> dict[RuleKey, str]:
    """The declared rules of `group`, one key per peer, with their descriptions.

    `ids` maps group names to their ids where they exist; other referenced groups are
    `sg:NAME` until created. The first declaration of a key wins.
    """
    out: dict[RuleKey, str] = {}
    for egress, rules in ((False, group.ingress), (True, group.egress or ())):
        for rule in rules:
            for src in rule.sources:
                out.setdefault(declared_key(rule, src, egress, ids), rule.description)
    return out


def declared_key(rule: IngressRule, src: str, egress: bool, ids: Mapping[str, str]) -> RuleKey:
    if is_cidr(src):
        peer = canonical_cidr(src)
        proto = "icmpv6" if rule.protocol == "icmp" and ":" in peer else rule.protocol
    else:
        peer = ids.get(src) or PENDING + src
        proto = rule.protocol
    return _key(egress, proto, rule.from_port, rule.to_port, peer)


# --- reconcile -----------------------------------------------------------------------------

DEFAULT_EGRESS = RuleKey(True, "all", -1, -1, "0.0.0.0/0")


def find_live(group: SecurityGroup, live: Sequence[LiveGroup]) -> LiveGroup | None:
    """The live group a declared one stands for: by id, else by VPC and name."""
    for g in live:
        if group.id is not None and g.id == group.id:
            return g
        if group.id is None and g.vpc == group.vpc and g.name == group.name:
            return g
    return None


def reconcile(group: SecurityGroup, live: LiveGroup | None, ids: Mapping[str, str],
              operator: Sequence[str] = (), ssh_ports: Iterable[int] = (22,),
              implied: Sequence[tuple[bool, IngressRule]] = ()) -> GroupPlan:
    """Diff one declared group against its live state. Pure.

    `operator` are the CIDRs of the operator's SSH path in front of this group's machines;
    the plan records which of them it would stop admitting on `ssh_ports`. `implied` are
    (egress, rule) the inventory's clusters add (`cluster_rules.py`): wanted like declared
    rules; an implied egress rule in a group whose egress is not managed is compared alone.
    """
    if live is None and group.id is not None:
        return GroupPlan(group.name, group.id, group.vpc, group.description, False,
                         error=f"security group {group.id} does not exist (declared as an existing group)")
    if live is None:
        current: tuple[LiveRule, ...] = (LiveRule("", DEFAULT_EGRESS),)
        managed = True
    else:
        current, managed = live.rules, live.managed
    want = declared_keys(group, ids)
    for egress, rule in implied:
        for src in rule.sources:
            want.setdefault(declared_key(rule, src, egress, ids), rule.description)
    manage_egress = group.egress is not None
    relevant = [r for r in current if manage_egress or not r.key.egress or r.key in want]
    have: dict[RuleKey, LiveRule] = {}
    duplicates: list[LiveRule] = []
    for r in relevant:
        if r.key in have:
            duplicates.append(r)  # the same rule twice (e.g. described twice): keep one
        else:
            have[r.key] = r
    extra = sorted((r for k, r in have.items() if k not in want), key=lambda r: (r.key.order(), r.id))
    authorize = tuple(sorted(((k, d) for k, d in want.items() if k not in have), key=lambda x: x[0].order()))
    redescribe = tuple(sorted(((have[k], d) for k, d in want.items() if k in have and have[k].description != d),
                              key=lambda x: x[0].key.order()))
    revoke = tuple(extra) if managed else ()
    drift = () if managed else tuple(extra)
    lost = lost_operator_access(current, revoke, authorize, operator, ssh_ports)
    return GroupPlan(group.name, live.id if live else None, group.vpc or (live.vpc if live else None),
                     group.description, managed, revoke=revoke, authorize=authorize,
                     redescribe=redescribe, drift=drift, lost_operator_cidrs=lost)


def _covered(cidr: str, nets: Iterable[str]) -> bool:
    """Whether the union of `nets` covers all of `cidr`."""
    target = ipaddress.ip_network(cidr)
    same: list[Any] = [ipaddress.ip_network(n) for n in nets if ipaddress.ip_network(n).version == target.version]
    return any(target.subnet_of(n) for n in ipaddress.collapse_addresses(same))


def lost_operator_access(current: Sequence[LiveRule], revoke: Sequence[LiveRule],
                         authorize: Sequence[tuple[RuleKey, str]], operator: Sequence[str],
                         ssh_ports: Iterable[int] = (22,)) -> tuple[str, ...]:
    """Operator CIDRs admitted to an SSH port before the plan and not after it."""
    gone = {r.id for r in revoke}
    before = [r.key for r in current if not r.key.egress]
    after = [r.key for r in current if not r.key.egress and r.id not in gone]
    after += [k for k, _ in authorize if not k.egress]
    lost: list[str] = []
    for port in sorted(set(ssh_ports)):
        def cidrs(keys: list[RuleKey], port: int = port) -> list[str]:
            return [k.peer for k in keys if k.peer_kind.startswith("cidr") and k.admits_tcp(port)]
        for c in operator:
            if _covered(c, cidrs(before)) and not _covered(c, cidrs(after)) and c not in lost:
                lost.append(c)
    return tuple(lost)


@frozen
class OperatorPath:
    cidrs: tuple[str, ...]
    ports: tuple[int, ...]
    why: tuple[str, ...] = field(default=())


def operator_path(inv: Inventory, group: str) -> OperatorPath:
    """The operator's SSH path through `group`: allow_ssh_from of the bastions, and ssh_from
    of the hosts that have no bastion, among the machines attached to the group (all of them
    when nothing is attached to it)."""
    nodes = [n for n in (*inv.bastions, *inv.hosts) if group in n.security_groups]
    if not nodes:
        nodes = [*inv.bastions, *inv.hosts]
    cidrs: list[str] = []
    why: list[str] = []
    ports = {22}
    for n in nodes:
        if n.is_bastion or not n.jump_chain:
            new = [canonical_cidr(c) for c in n.ssh_from if canonical_cidr(c) not in cidrs]
            cidrs += new
            if n.ssh_from:
                ports.add(n.port)
                why.append(f"{'allow_ssh_from of bastion' if n.is_bastion else 'ssh_from of host'} {n.name}")
    return OperatorPath(tuple(cidrs), tuple(sorted(ports)), tuple(why))


def plan_groups(inv: Inventory, live: Sequence[LiveGroup]) -> list[GroupPlan]:
    """Reconcile every declared group. Pure."""
    assert inv.aws is not None
    matched = {g.name: find_live(g, live) for g in inv.aws.security_groups}
    ids = {name: g.id for name, g in matched.items() if g is not None}
    plans = []
    for g in inv.aws.security_groups:
        path = operator_path(inv, g.name)
        implied = [(i.egress, i.rule) for i in cluster_rules.extra(inv, g)]
        plans.append(reconcile(g, matched[g.name], ids, path.cidrs, path.ports, implied))
    return plans


# --- presentation and API shapes -------------------------------------------------------------

def ports_text(key: RuleKey) -> str:
    if key.protocol == "all":
        return "all traffic"
    if key.protocol in ("icmp", "icmpv6"):
        if key.from_port == -1:
            return f"{key.protocol} (all types)"
        return f"{key.protocol} type {key.from_port}" + (f" code {key.to_port}" if key.to_port != -1 else "")
    if (key.from_port, key.to_port) == (0, 65535):
        return f"{key.protocol} all ports"
    if key.from_port == key.to_port:
        return f"{key.protocol} {key.from_port}"
    return f"{key.protocol} {key.from_port}-{key.to_port}"


def peer_text(key: RuleKey, names: Mapping[str, str]) -> str:
    if key.peer.startswith(PENDING):
        return f"group {key.peer[len(PENDING):]} (to be created)"
    if key.peer.startswith("sg-"):
        name = names.get(key.peer)
        return f"group {name} ({key.peer})" if name else f"group {key.peer}"
    return key.peer


def rule_text(key: RuleKey, names: Mapping[str, str], description: str = "") -> str:
    direction = "egress" if key.egress else "ingress"
    word = "to" if key.egress else "from"
    text = f"{direction} {ports_text(key)} {word} {peer_text(key, names)}"
    return f"{text}  # {description}" if description else text


def ip_permission(key: RuleKey, description: str) -> dict[str, Any]:
    """The IpPermissions entry that authorizes exactly `key`."""
    perm: dict[str, Any] = {"IpProtocol": _API_PROTOCOL.get(key.protocol, key.protocol)}
    if key.protocol != "all":
        perm["FromPort"], perm["ToPort"] = key.from_port, key.to_port
    desc = {"Description": description} if description else {}
    kind = key.peer_kind
    if kind == "cidr4":
        perm["IpRanges"] = [{"CidrIp": key.peer, **desc}]
    elif kind == "cidr6":
        perm["Ipv6Ranges"] = [{"CidrIpv6": key.peer, **desc}]
    elif kind == "prefix-list":
        perm["PrefixListIds"] = [{"PrefixListId": key.peer, **desc}]
    else:
        if key.peer.startswith(PENDING):
            raise ValueError(f"group {key.peer[len(PENDING):]} has no id yet")
        perm["UserIdGroupPairs"] = [{"GroupId": key.peer, **desc}]
    return perm


def rule_request(key: RuleKey, description: str) -> dict[str, Any]:
    """The SecurityGroupRuleRequest for modify_security_group_rules (description changes)."""
    req: dict[str, Any] = {"IpProtocol": _API_PROTOCOL.get(key.protocol, key.protocol),
                           "FromPort": key.from_port, "ToPort": key.to_port, "Description": description}
    kind = key.peer_kind
    if kind == "cidr4":
        req["CidrIpv4"] = key.peer
    elif kind == "cidr6":
        req["CidrIpv6"] = key.peer
    elif kind == "prefix-list":
        req["PrefixListId"] = key.peer
    else:
        req["ReferencedGroupId"] = key.peer
    return req
