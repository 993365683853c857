"""`provision sg plan|apply`: AWS security groups reconciled with the inventory.

CLI only: load the inventory, call the boto3 shell (`provision.cloud.aws`, imported
lazily) and the pure reconcile (`provision.cloud.rules`), print through the shared plan
output. Exit codes: 0 ok (or no changes), 1 an AWS error or a refused plan, 2 a bad
inventory or usage, 3 `plan --detailed-exitcode` found changes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from provision.errors import EXIT_FAILED, Exit, OperationError, UsageError

from .common import echo, emit_json, inventory_option, json_option, load
from .plan_output import Change, Section, exit_status, print_plan, to_json

if TYPE_CHECKING:
    from provision.cloud.rules import GroupPlan
    from provision.inventory.model import Inventory


def _profile_option(f: Any) -> Any:
    return click.option("--profile", default=None, metavar="NAME",
                        help="AWS profile (default: the standard boto3 chain, e.g. $AWS_PROFILE)")(f)


@click.group("sg")
def sg_group() -> None:
    """AWS security groups: plan and apply the inventory's aws.security_groups."""


def _inventory(path: str | None) -> Inventory:
    inv = load(path)
    if inv.aws is None or not inv.aws.security_groups:
        raise UsageError(f"{inv.source}: no aws.security_groups in the inventory")
    return inv


def _plan(inv: Inventory, ec2: Any) -> list[GroupPlan]:
    from provision.cloud import aws as shell
    from provision.cloud.rules import plan_groups

    assert inv.aws is not None
    return plan_groups(inv, shell.fetch(ec2, inv.aws.security_groups))


def sections(plans: Sequence[GroupPlan], inv: Inventory) -> list[Section]:
    """The plan as shared plan-output sections (pure)."""
    from provision.cloud.rules import operator_path, rule_text

    names = {p.group_id: p.name for p in plans if p.group_id}
    out = []
    for p in plans:
        title = f"security group {p.name}" + (f" ({p.group_id})" if p.group_id else f" (new, {p.vpc})")
        if p.error:
            out.append(Section(title, error=p.error, status="failed"))
            continue
        changes: list[Change] = []
        if p.create:
            changes.append(Change("+", f"group {p.name} in {p.vpc}, tagged managed-by: provision",
                                  detail=(f"description: {p.description}",), kind="group"))
        changes += [Change("-", rule_text(r.key, names, r.description), kind="rule") for r in p.revoke]
        changes += [Change("~", rule_text(r.key, names),
                           detail=(f"description: {r.description!r} -> {d!r}",), kind="rule")
                    for r, d in p.redescribe]
        changes += [Change("+", rule_text(k, names, d), kind="rule") for k, d in p.authorize]
        notes: list[str] = []
        if p.drift:
            notes.append("not tagged managed-by: provision, so these extra rules are reported, "
                         "never removed:")
            notes += [f"  drift: {rule_text(r.key, names, r.description)} ({r.id})" for r in p.drift]
        if p.lost_operator_cidrs:
            why = "; ".join(operator_path(inv, p.name).why) or "the operator's SSH sources"
            notes.append(f"removes the operator's SSH path from {', '.join(p.lost_operator_cidrs)} "
                         f"({why}): sg apply refuses this without --force")
        out.append(Section(title, tuple(changes), notes=tuple(notes)))
    return out


@sg_group.command("plan")
@inventory_option
@click.option("--detailed-exitcode", is_flag=True,
              help="exit 0 when there is nothing to do, 3 when there are changes")
@json_option
@_profile_option
def plan_cmd(inventory_path: str | None, detailed_exitcode: bool, as_json: bool, profile: str | None) -> None:
    """Show what `sg apply` would change (reads AWS, writes nothing)."""
    from provision.cloud import aws as shell

    inv = _inventory(inventory_path)
    assert inv.aws is not None
    plans = _plan(inv, shell.client(inv.aws, profile))
    secs = sections(plans, inv)
    if as_json:
        data = to_json(secs)
        data["lockout"] = {p.name: list(p.lost_operator_cidrs) for p in plans if p.lost_operator_cidrs}
        emit_json(data)
    else:
        print_plan(secs, title=f"security groups in {inv.aws.region}")
    status = exit_status(secs, detailed_exitcode)
    if status:
        raise Exit(status)


@sg_group.command("apply")
@inventory_option
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation")
@click.option("--force", is_flag=True, help="allow removing the rule that admits the operator's SSH path")
@_profile_option
def apply_cmd(inventory_path: str | None, yes: bool, force: bool, profile: str | None) -> None:
    """Revoke, authorize and re-describe rules until AWS matches the inventory."""
    from provision.cloud import aws as shell

    inv = _inventory(inventory_path)
    assert inv.aws is not None
    ec2 = shell.client(inv.aws, profile)
    plans = _plan(inv, ec2)
    secs = sections(plans, inv)
    print_plan(secs, title=f"security groups in {inv.aws.region}")
    if any(s.failed for s in secs):
        raise Exit(EXIT_FAILED)
    if not any(p.has_changes for p in plans):
        return
    _refuse_lockout(plans, force)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to apply")
        if not click.confirm("Apply these changes?", default=False):
            raise OperationError("not applied")
    creating = [p for p in plans if p.create]
    if creating:
        shell.check_vpcs(ec2, sorted({p.vpc for p in creating if p.vpc}))
        for name, gid in shell.create_groups(ec2, creating).items():
            echo(f"{name}: created {gid}")  # the group id is AWS's answer
        plans = _plan(inv, ec2)  # group ids now known: references resolve
        _refuse_lockout(plans, force)
    failed = [p for p in plans if p.error or p.create]
    if failed:
        raise OperationError("; ".join(f"{p.name}: {p.error or 'was not created'}" for p in failed))
    for p in plans:
        if p.revoke or p.authorize or p.redescribe:
            for line in shell.execute(ec2, p):
                echo(line)
    echo("Applied.")


def _refuse_lockout(plans: Sequence[GroupPlan], force: bool) -> None:
    lost = [p for p in plans if p.lost_operator_cidrs]
    if lost and not force:
        what = "; ".join(f"{p.name}: {', '.join(p.lost_operator_cidrs)}" for p in lost)
        raise OperationError(f"refusing to remove the rule admitting the operator's SSH path ({what}): "
                             "the operator would be locked out at the cloud layer. Declare a rule "
                             "that still admits them, or pass --force")
