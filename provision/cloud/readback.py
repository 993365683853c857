"""`import sg` checks its own output: the YAML, loaded back, declares what AWS answered. Pure.

The YAML is loaded with the inventory's own loader (`load_yaml_text` + `build`, exactly
as `sg plan` would read the file) and each group it declares is reconciled with the live
group it was made from by `rules.plan_groups`, the comparison `sg plan` makes. It reads
back as what AWS holds when the groups declared are exactly the groups answered (by id,
in their VPC, with their description), the plan of each is empty (nothing to create,
authorize, revoke or re-describe), its drift is exactly the rules `adopt` announced as
skipped, an egress left out is the AWS default, and no two live rules of a group read as
one (the reconcile would quietly keep one of them). Anything else is one line naming the
group and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provision.inventory.build import build
from provision.inventory.errors import InventoryError
from provision.inventory.model import Inventory
from provision.inventory.source import load_yaml_text

from .adopt import Adopted
from .rules import DEFAULT_EGRESS, LiveGroup, LiveRule, plan_groups, rule_text


def read_back(text: str, file: str, live: Sequence[LiveGroup], adopted: Adopted) -> list[str]:
    """What the YAML `text` (to be written to `file`) declares differently from `live`."""
    names = {g.id: g.name for g in live}
    twins = [f"group {g.name} ({g.id}): {m}" for g in live for m in _twins(g.rules, names)]
    try:
        inv = build(load_yaml_text(text, file))
    except InventoryError as e:
        return [*twins, f"it does not load as an inventory: {e.problems[0] if e.problems else e}"]
    return [*twins, *differences(inv, live, adopted)]


def differences(inv: Inventory, live: Sequence[LiveGroup], adopted: Adopted) -> list[str]:
    """Where `inv` declares the groups `live` otherwise than AWS holds them (but for two
    live rules that read as one: `read_back` finds those)."""
    out: list[str] = []
    names = {g.id: g.name for g in live}  # AWS names, for the messages
    declared = inv.aws.security_groups if inv.aws else ()
    by_id = {g.id: g for g in live}
    seen = {g.id for g in declared}
    for g in live:
        if g.id not in seen:
            out.append(f"group {g.name} ({g.id}) is not declared")
    for d in declared:
        if d.id is None or d.id not in by_id:
            out.append(f"group {d.name} is declared{f' as {d.id}' if d.id else ''}, which AWS did not answer")
            continue
        g = by_id[d.id]
        where = f"group {g.name} ({g.id})"
        if d.vpc != g.vpc:
            out.append(f"{where}: declared in VPC {d.vpc}, AWS has it in {g.vpc}")
        if d.description != g.description:
            out.append(f"{where}: declared with description {d.description!r}, AWS has {g.description!r}")
        if d.egress is None and [r.key for r in g.rules if r.key.egress] != [DEFAULT_EGRESS]:
            out.append(f"{where}: its egress is left out, and it is not the AWS default")
    skipped = {(s.group_id, s.rule.id) for s in adopted.skipped}
    for p in plan_groups(inv, live):
        if p.group_id not in by_id:
            continue  # reported above
        g = by_id[p.group_id]
        where = f"group {g.name} ({g.id})"
        if p.error:
            out.append(f"{where}: {p.error}")
        out += [f"{where}: declares {rule_text(k, names, d)}, which AWS does not hold"
                for k, d in p.authorize]
        out += [f"{where}: {_rule(r, names)} is not declared (sg apply would revoke it)"
                for r in p.revoke]
        out += [f"{where}: {_rule(r, names)} is declared with description {d!r}"
                for r, d in p.redescribe]
        out += [f"{where}: {_rule(r, names)} is not declared" for r in p.drift
                if (g.id, r.id) not in skipped]
        drift = {r.id for r in p.drift}
        out += [f"{where}: {_rule(s.rule, names)} was to be left out, and is declared"
                for s in adopted.skipped if s.group_id == g.id and s.rule.id not in drift]
    return out


def _rule(r: LiveRule, names: Mapping[str, str]) -> str:
    return f"{rule_text(r.key, names, r.description)} ({r.id})"


def _twins(rules: Sequence[LiveRule], names: Mapping[str, str]) -> list[str]:
    """Live rules that are one rule to the reconcile (the same rule answered twice is one)."""
    seen: dict[object, LiveRule] = {}
    out = []
    for r in rules:
        first = seen.setdefault(r.key, r)
        if first is not r and first != r:
            out.append(f"{_rule(first, names)} and {_rule(r, names)} read as one rule")
    return out
