"""`provision sg plan|apply`: AWS security groups reconciled with the inventory.

CLI only: load the inventory, make the client (`provision.cloud.aws`, which loads boto3
only once a client is made), read the plan and apply it through the engine
(`provision.cloud.apply`: create groups, reconcile rules, set each instance's groups,
confirm SSH, delete dropped groups), print through the shared plan output. Ctrl-C during
`sg apply`: the change in flight finishes or rolls back, no other starts, the recap says
which (`sg_stop`), exit 130. Exit codes: 0 ok (or no changes), 1 an AWS error or a
refused plan, 2 a bad inventory or usage, 3 `plan --detailed-exitcode` found changes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from provision.cloud import apply as engine
from provision.cloud import aws as shell
from provision.cloud.attach import group_text
from provision.cloud.placement import STRATEGY
from provision.cloud.rules import operator_path, rule_text
from provision.errors import EXIT_FAILED, Exit, OperationError, UsageError
from provision.interrupt import EXIT_INTERRUPTED, Stop, asking, stopping

from . import sg_stop
from .common import echo, emit_json, inventory_option, json_option, load
from .plan_output import Change, Section, exit_status, print_plan, to_json

if TYPE_CHECKING:
    from provision.cloud.plan import SgPlan
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


def sections(plan: SgPlan, inv: Inventory, force: bool = False) -> list[Section]:
    """The plan as shared plan-output sections (pure)."""
    names = plan.names
    out = []
    for p in plan.groups:
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
    for a in plan.attachments:
        title = f"instance of {a.machine}" + (f" ({a.instance}, {a.eni})" if a.instance else "")
        if a.error:
            out.append(Section(title, error=a.error, status="failed"))
            continue
        out.append(Section(title, tuple(
            [Change("-", f"detach group {group_text(g, names)}", kind="attachment") for g in a.detach]
            + [Change("+", f"attach group {group_text(g, names)}", kind="attachment") for g in a.attach])))
    for d in plan.deletions:
        g = d.group
        title = f"security group {g.name} ({g.id})"
        if d.error:
            out.append(Section(title, error=d.error, status="failed"))
            continue
        out.append(Section(title, (Change(
            "-", f"group {g.name} in {g.vpc} with its {len(g.rules)} rule(s)",
            detail=("tagged managed-by: provision and no longer in the inventory",), kind="group"),)))
    for pg in plan.placements:
        title = f"placement group {pg.name} (cluster {', '.join(pg.clusters)})"
        if pg.error:
            out.append(Section(title, error=pg.error, status="failed"))
            continue
        create = (Change("+", f"create placement group {pg.name} ({STRATEGY})",
                         detail=("tagged managed-by: provision",), kind="placement group"),)
        out.append(Section(title, create if pg.create else (), notes=tuple(o.text for o in pg.outside)))
    for e in plan.errors:
        out.append(Section("security groups", error=e, status="failed"))
    if plan.guard:
        note = plan.guard + (" (--force given)" if force else ": sg apply refuses it without --force")
        out.append(Section("change guard", notes=(note,), aside=True))
    return out


@sg_group.command("plan")
@inventory_option
@click.option("--detailed-exitcode", is_flag=True,
              help="exit 0 when there is nothing to do, 3 when there are changes")
@json_option
@_profile_option
def plan_cmd(inventory_path: str | None, detailed_exitcode: bool, as_json: bool, profile: str | None) -> None:
    """Show what `sg apply` would change (reads AWS, writes nothing)."""
    inv = _inventory(inventory_path)
    assert inv.aws is not None
    plan = engine.read_plan(inv, shell.client(inv.aws, profile))
    secs = sections(plan, inv)
    if as_json:
        data = to_json(secs)
        data["lockout"] = {p.name: list(p.lost_operator_cidrs) for p in plan.groups if p.lost_operator_cidrs}
        data["guard"] = plan.guard
        emit_json(data)
    else:
        print_plan(secs, title=f"security groups in {inv.aws.region}", noun="item")
    status = exit_status(secs, detailed_exitcode)
    if status:
        raise Exit(status)


@sg_group.command("apply")
@inventory_option
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation")
@click.option("--force", is_flag=True, help="allow removing the rule that admits the operator's SSH path, "
              "deleting groups, and revoking more than 30 % of the managed rules")
@click.option("--no-confirm", is_flag=True, help="do not check that a new SSH connection still gets "
              "through after a change that touches SSH (and so never revert it)")
@_profile_option
def apply_cmd(inventory_path: str | None, yes: bool, force: bool, no_confirm: bool, profile: str | None) -> None:
    """Create groups, reconcile rules, attach groups to instances, delete dropped groups."""
    inv = _inventory(inventory_path)
    assert inv.aws is not None
    ec2 = shell.client(inv.aws, profile)
    plan = engine.read_plan(inv, ec2)
    secs = sections(plan, inv, force)
    print_plan(secs, title=f"security groups in {inv.aws.region}", noun="item")
    if plan.failed:
        raise Exit(EXIT_FAILED)
    if not plan.has_changes:
        return

    def ask() -> None:
        if yes:
            return
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to apply")
        with asking():
            if not click.confirm("Apply these changes?", default=False):
                raise OperationError("not applied")

    where = engine.Progress()
    stop = Stop(lambda line: echo(line, err=True), lambda: sg_stop.stopping_line(where), lambda: sg_stop.leaving_lines(where))
    try:
        with stopping(stop):  # Ctrl-C: the change in flight finishes (or rolls back), no other starts
            engine.apply(inv, ec2, plan, force=force, no_confirm=no_confirm, ask=ask, say=echo,
                         stop=stop, progress=where)
    except OperationError:
        if where.interrupted:  # a failure after Ctrl-C (the SSH confirmation): the recap too
            echo(sg_stop.interrupted_line(where), err=True)
        raise
    if where.interrupted:
        echo(sg_stop.interrupted_line(where), err=True)
        raise Exit(EXIT_INTERRUPTED)
