"""`provision sg plan|apply`: AWS security groups reconciled with the inventory.

CLI only: load the inventory, read AWS through the boto3 shell (`provision.cloud.aws`, which
loads boto3 only once a client is made), build the pure plan (`provision.cloud.plan`: rules,
attachments, deletions), print through the shared plan output. Apply order: create groups,
reconcile rules (revoke before authorize), set each instance's groups, delete dropped
groups; a cluster's missing placement group is created first (members outside it are
reported, never stopped or moved). Exit codes: 0 ok (or no changes), 1 an AWS error or a
refused plan, 2 a bad inventory or usage, 3 `plan --detailed-exitcode` found changes.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from provision.cloud import aws as shell
from provision.cloud import placement_aws
from provision.cloud.admission import revert_attachment, revert_group, touched
from provision.cloud.attach import group_text, machines
from provision.cloud.placement import STRATEGY, wanted
from provision.cloud.plan import Live, build, vpcs
from provision.cloud.rules import operator_path, rule_text
from provision.errors import EXIT_FAILED, Exit, OperationError, UsageError
from provision.hosts import confirm as new_ssh  # as a module: tests stand in for its confirm
from provision.hosts.converge import HostRun

from .common import echo, emit_json, inventory_option, json_option, load
from .plan_output import Change, Section, exit_status, print_plan, to_json

if TYPE_CHECKING:
    from provision.cloud.plan import SgPlan
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


def _plan(inv: Inventory, ec2: Any) -> SgPlan:
    """Read what the plan needs (a fixed number of describe calls per page) and build it."""
    assert inv.aws is not None
    in_vpcs = vpcs(inv)
    missing = shell.vpcs_missing(ec2, in_vpcs)
    groups = tuple(shell.fetch(ec2, inv.aws.security_groups, [v for v in in_vpcs if v not in missing]))
    instances = tuple(shell.fetch_instances(ec2, machines(inv)))
    placements = tuple(placement_aws.fetch(ec2, list(wanted(inv))))
    first = build(inv, Live(groups, instances, tuple(missing), placements=placements))
    if not first.deletions:
        return first
    interfaces, referencing = shell.fetch_holders(ec2, [d.group.id for d in first.deletions])
    return build(inv, Live(groups, instances, tuple(missing), tuple(interfaces), tuple(referencing),
                           placements))


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
    plan = _plan(inv, shell.client(inv.aws, profile))
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
    plan = _plan(inv, ec2)
    secs = sections(plan, inv, force)
    print_plan(secs, title=f"security groups in {inv.aws.region}", noun="item")
    if plan.failed:
        raise Exit(EXIT_FAILED)
    if not plan.has_changes:
        return
    _refuse(plan, force)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to apply")
        if not click.confirm("Apply these changes?", default=False):
            raise OperationError("not applied")
    for pg in plan.placements:  # first: nothing else depends on it, nor it on anything
        if pg.has_changes:
            echo(placement_aws.create(ec2, pg))
    creating = [p for p in plan.groups if p.create]
    if creating:
        plan = _create_then_replan(inv, ec2, creating, force)  # checked whole there
    else:
        _fail_unless_whole(plan)
    for p in plan.groups:
        if p.revoke or p.authorize or p.redescribe:
            for line in shell.execute(ec2, p):
                echo(line)
    for a in plan.attachments:
        if a.has_changes:
            echo(shell.attach(ec2, a))
    _confirm_ssh(inv, ec2, plan, no_confirm)
    for d in plan.deletions:
        echo(shell.delete(ec2, d.group))
    echo("Applied.")


def _fail_unless_whole(plan: SgPlan) -> None:
    failed = [p for p in plan.groups if p.error or p.create]
    if failed or plan.failed:
        raise OperationError("; ".join(f"{p.name}: {p.error or 'was not created'}" for p in failed)
                             or "the plan changed while applying; run sg plan again")


def _create_then_replan(inv: Inventory, ec2: Any, creating: Sequence[GroupPlan],
                        force: bool) -> SgPlan:
    """Create the new groups, then plan again (their ids now known: references and
    attachments resolve). When that stops the apply (a creation AWS refuses midway, a
    re-plan that fails or is refused, Ctrl-C) before any rule or attachment is sent, the
    groups it created are deleted again: nothing is left half-applied."""
    created: dict[str, str] = {}
    try:
        shell.create_groups(ec2, creating, created)
        for name, gid in created.items():
            echo(f"{name}: created {gid}")  # the group id is AWS's answer
        plan = _plan(inv, ec2)
        _refuse(plan, force)
        _fail_unless_whole(plan)
        return plan
    except BaseException:
        _delete_again(ec2, created)
        raise


def _delete_again(ec2: Any, created: dict[str, str]) -> None:
    for name, gid in created.items():
        try:
            echo(f"rolled back: {shell.delete_created(ec2, name, gid)}")
        except OperationError as e:
            echo(f"rollback failed: {e.message}; delete {gid} by hand")


# what a new login runs: the answer `provision.hosts.confirm.confirm` counts as "got through"
_CONFIRM_SCRIPT = "printf '@commit\\tsg\\n@confirmed\\n'"


def _confirm_ssh(inv: Inventory, ec2: Any, plan: SgPlan, skip: bool) -> None:
    """After a change that touches SSH admission: a new SSH connection through the jump
    chain (host keys checked) to each touched machine within the window, or the change
    that touched it is reverted. The commit-confirmed hosts' own confirmation loop."""
    hit = touched(inv, plan.groups, plan.attachments)
    if not hit:
        return
    if skip:
        echo(f"SSH not confirmed (--no-confirm) for {', '.join(t.machine for t in hit)}")
        return
    window = inv.confirm_timeout
    failed = []
    for t in hit:
        conf = new_ssh.confirm(inv, HostRun(inv.node(t.machine)), False, _CONFIRM_SCRIPT, 1,
                       time.monotonic() + window)
        if conf.answers == [True]:
            echo(f"{t.machine}: a new SSH connection gets through after the change ({conf.seconds:.1f} s)")
        else:
            echo(f"{t.machine}: no new SSH connection within {window} s ({conf.cause}); reverting "
                 f"{t.why}")
            failed.append(t)
    if not failed:
        return
    names = {g for t in failed for g in t.groups}
    before = {g.id: g for g in plan.before}
    ids = {p.group_id: p.name for p in plan.groups if p.name in names and p.group_id in before}
    assert inv.aws is not None
    now = shell.fetch(ec2, [g for g in inv.aws.security_groups if g.name in ids.values()])
    # Each revert is tried even when one before it fails: a rule revert refused by AWS must
    # not leave the attachment (or another group) in the state that cut SSH off.
    undo: list[Callable[[], list[str]]] = [
        functools.partial(shell.execute, ec2, revert_group(before[g.id], g))
        for g in now if g.id in ids]
    undo += [functools.partial(_attach_lines, ec2, revert_attachment(a)) for a in plan.attachments
             if a.has_changes and a.machine in {t.machine for t in failed}]
    problems: list[str] = []
    for step in undo:
        try:
            for line in step():
                echo(f"reverted: {line}")
        except OperationError as e:
            echo(f"revert failed: {e.message}")
            problems.append(e.message)
    raise OperationError(
        f"SSH to {', '.join(t.machine for t in failed)} did not get through within {window} s "
        "after the change: "
        + (f"reverting failed too ({'; '.join(problems)}): fix it by hand" if problems
           else "reverted what touched it")
        + ("; the dropped groups were not deleted" if plan.deletions else ""))


def _attach_lines(ec2: Any, a: Any) -> list[str]:
    return [shell.attach(ec2, a)]


def _refuse(plan: SgPlan, force: bool) -> None:
    _refuse_lockout(plan.groups, force)
    if plan.guard and not force:
        raise OperationError(f"refusing: {plan.guard}")


def _refuse_lockout(plans: Sequence[GroupPlan], force: bool) -> None:
    lost = [p for p in plans if p.lost_operator_cidrs]
    if lost and not force:
        what = "; ".join(f"{p.name}: {', '.join(p.lost_operator_cidrs)}" for p in lost)
        raise OperationError(f"refusing to remove the rule admitting the operator's SSH path ({what}): "
                             "the operator would be locked out at the cloud layer. Declare a rule "
                             "that still admits them, or pass --force")
