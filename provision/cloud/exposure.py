"""What an instance admits after an `sg apply` that stopped part-way, against the state
before and the declared one. Pure.

The apply orders its changes so that an instance never admits more than the state before
or the declared one (see `provision.cloud.apply`); this is the check of that promise from
what AWS holds once a Ctrl-C or a failure stopped it: each ingress rule an instance's
groups now hold that neither the groups it had (with their rules as they were) nor the
groups it is declared in (with their declared rules) hold; and each rule of any group
that now admits the instance by a group it is in (`from sg-…`) where neither state does.
Rules are compared as keys (protocol, ports, source): a source another rule of the state
covers is still named, never the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from provision.frozen import frozen

from .attach import AttachPlan, LiveInstance
from .rules import PENDING, GroupPlan, LiveGroup, RuleKey, rule_text


@frozen
class Wider:
    """One rule `machine` admits now that neither state admits; with `admitted_by`, a rule
    of that group that admits `machine` now, through a group it is in, where neither state
    does."""

    machine: str
    key: RuleKey
    admitted_by: str = ""

    def text(self, names: Mapping[str, str]) -> str:
        if self.admitted_by:
            return (f"{self.machine} is admitted by the members of "
                    f"{names.get(self.admitted_by, self.admitted_by)}: {rule_text(self.key, names)}")
        return f"{self.machine} admits {rule_text(self.key, names)}"


def _ingress(rules: Iterable[RuleKey]) -> set[RuleKey]:
    return {k for k in rules if not k.egress}


def _admitted_by(groups: Iterable[str], rules: Mapping[str, set[RuleKey]]) -> set[tuple[str, RuleKey]]:
    """(group, rule): each ingress rule of any group whose source is one of `groups`."""
    mine = set(groups)
    return {(gid, k) for gid, keys in rules.items() if not gid.startswith(PENDING)
            for k in keys if not k.egress and k.peer in mine}


def _group_id(group: str, ids: Mapping[str, str]) -> str:
    """A group created by this apply (sg:NAME) as its id; any other group as it is."""
    if group.startswith(PENDING):
        return ids.get(group[len(PENDING):], group)
    return group


def _resolved(key: RuleKey, ids: Mapping[str, str]) -> RuleKey:
    """A rule naming a group created by this apply (sg:NAME) with that group's id."""
    return RuleKey(key.egress, key.protocol, key.from_port, key.to_port, _group_id(key.peer, ids))


def wider(groups: Sequence[GroupPlan], attachments: Sequence[AttachPlan],
          before: Sequence[LiveGroup], now_groups: Sequence[LiveGroup],
          now_instances: Sequence[LiveInstance]) -> list[Wider]:
    """The ingress rules each planned instance admits now beyond both the state before
    (`before`, the attachments' `current`) and the declared one (`groups`, the
    attachments' `want`), then the rules of other groups that admit it now, through a
    group it is in, beyond both. A group whose rules are not known (not declared: kept as
    it is) counts as it was before in every state."""
    ids = {g.name: g.id for g in now_groups}
    was = {g.id: {r.key for r in g.rules} for g in before}
    declared: dict[str, set[RuleKey]] = {}
    for p in groups:
        gid = p.group_id or ids.get(p.name)
        if gid is None:
            continue
        gone = {r.key for r in p.revoke}
        declared[gid] = (was.get(gid, set()) - gone) | {_resolved(k, ids) for k, _ in p.authorize}
        declared[PENDING + p.name] = declared[gid]
    now = {g.id: {r.key for r in g.rules} for g in now_groups}
    live = {i.id: i for i in now_instances}
    every = now.keys() | was.keys()
    rules_now = {g: now.get(g, was.get(g, set())) for g in every}
    rules_declared = {g: declared.get(g, was.get(g, set())) for g in every}
    out = []
    for a in attachments:
        if a.error or a.instance not in live:
            continue
        old = _ingress(k for gid in a.current for k in was.get(gid, ()))
        new = _ingress(k for gid in a.want for k in declared.get(gid, was.get(gid, ())))
        holds = _ingress(k for gid in live[a.instance].groups for k in now.get(gid, was.get(gid, ())))
        out += [Wider(a.machine, k) for k in sorted(holds - old - new, key=RuleKey.order)]
        # what other groups admit from the groups the instance is in
        want = [_group_id(g, ids) for g in a.want]
        reach = (_admitted_by(live[a.instance].groups, rules_now) - _admitted_by(a.current, was)
                 - _admitted_by(want, rules_declared))
        out += [Wider(a.machine, k, gid) for gid, k in sorted(reach, key=lambda r: (r[0], r[1].order()))]
    return out
