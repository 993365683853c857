"""The security-group apply engine behind `provision sg apply` (one entry point, `apply`;
the command parses, asks through `ask`, prints what `say` is given and the recap).

Order: placement groups first; new groups created, then the plan made again (their ids now
known), rolled back when that stops the run; each group's rules (revoke before
authorize); each instance's groups; a new SSH connection to every machine whose admission
changed, or the change that touched it is reverted; dropped groups deleted last.

When instances change groups, the rules are split around the attachments: every group's
revokes first, then each instance's groups, then every group's authorizes. An instance
then only ever sits in groups whose rules are a subset of what it admitted before (the
groups it leaves, while it is still in them) or of what it is declared to admit (the
groups it joins, once it is in them): stopped anywhere (Ctrl-C, an AWS refusal), it
admits no more than the state before or the declared one. Whole rules units, the old
order, would leave an instance moving out of a widened group in it, widened.

Ctrl-C (`stop`, `provision.interrupt`): no change starts after it; the one in flight
finishes (groups being created are deleted again, since no rule uses them yet); what was
sent and touched SSH is still confirmed, or reverted; `Progress` says what was changed,
rolled back and not applied, and, read back from AWS, any rule an instance admits that
neither the state before nor the declared one admits (`exposure.py`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provision.errors import OperationError
from provision.frozen import frozen
from provision.hosts import confirm as new_ssh  # as a module: tests stand in for its confirm
from provision.hosts.converge import HostRun
from provision.interrupt import Stop

from . import aws as shell
from . import placement_aws
from .admission import revert_attachment, revert_group, touched
from .attach import AttachPlan, machines
from .exposure import wider
from .placement import wanted
from .plan import Live, build, vpcs

if TYPE_CHECKING:
    from provision.inventory.model import Inventory

    from .plan import SgPlan
    from .rules import GroupPlan

def read_plan(inv: Inventory, ec2: Any) -> SgPlan:
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


@frozen
class Unit:
    """One change of the apply, as Ctrl-C names it: `kind` (placement, create, revoke,
    rules, attach, confirm, delete) and what it is about."""

    kind: str
    name: str

    @property
    def text(self) -> str:
        return {"placement": f"placement group {self.name}", "create": f"create groups {self.name}",
                "revoke": f"revokes in group {self.name}", "rules": f"rules of group {self.name}", "attach": f"groups of instance {self.name}",
                "confirm": f"SSH confirmation of {self.name}",
                "delete": f"delete group {self.name}"}[self.kind]


@dataclass
class Progress:
    """Where the apply stands: the change in flight, those to come, those done, those
    rolled back, and those not applied because of Ctrl-C; `left`: groups created whose
    rollback failed (a change, named); `wider`: what an instance admits beyond both the
    state before and the declared one, read back after a Ctrl-C."""

    current: Unit | None = None
    waiting: list[Unit] = field(default_factory=list)
    done: list[Unit] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    not_applied: list[Unit] = field(default_factory=list)
    interrupted: bool = False
    left: list[str] = field(default_factory=list)
    wider: list[str] = field(default_factory=list)


class _Stopped(Exception):
    """Ctrl-C came while the groups were being created: they are deleted again."""


def begin(unit: Unit) -> None:
    """Called as each change starts (a hook for tests: tests/support/faults.py holds here)."""


def _changes(plan: SgPlan) -> list[tuple[Unit, GroupPlan | AttachPlan]]:
    """The rule and attachment changes in the order they are made (the module's
    docstring): whole rules units when no instance changes groups; otherwise all revokes,
    then the attachments, then all authorizes and descriptions."""
    groups = [g for g in plan.groups if g.create or g.revoke or g.authorize or g.redescribe]
    moves = [(Unit("attach", a.machine), a) for a in plan.attachments if a.has_changes]
    if not moves:
        return [(Unit("rules", g.name), g) for g in groups]
    narrow: list[tuple[Unit, GroupPlan | AttachPlan]] = [
        (Unit("revoke", g.name), dataclasses.replace(g, authorize=(), redescribe=()))
        for g in groups if g.revoke]
    widen: list[tuple[Unit, GroupPlan | AttachPlan]] = [
        (Unit("rules", g.name), dataclasses.replace(g, revoke=()))
        for g in groups if g.create or g.authorize or g.redescribe]
    return [*narrow, *moves, *widen]


def _units(plan: SgPlan) -> list[Unit]:
    out = [Unit("placement", pg.name) for pg in plan.placements if pg.has_changes]
    creating = [p.name for p in plan.groups if p.create]
    if creating:
        out.append(Unit("create", ", ".join(creating)))
    out += [u for u, _ in _changes(plan)]
    out += [Unit("delete", d.group.name) for d in plan.deletions]
    return out


def _merged(before: GroupPlan | None, part: GroupPlan) -> GroupPlan:
    """What was sent of one group so far: its revokes, then its authorizes."""
    if before is None:
        return part
    return dataclasses.replace(part, revoke=before.revoke + part.revoke,
                               authorize=before.authorize + part.authorize,
                               redescribe=before.redescribe + part.redescribe)


def apply(inv: Inventory, ec2: Any, plan: SgPlan, *, force: bool, no_confirm: bool,
          ask: Callable[[], None], say: Callable[[str], None], stop: Stop | None = None,
          progress: Progress | None = None) -> Progress:
    """Refuse what needs --force, `ask` (it raises to end the command), then apply `plan`
    (see the module's docstring); the returned `Progress` says what was done."""
    _refuse(plan, force)
    ask()
    p = progress if progress is not None else Progress()
    p.waiting = _units(plan)
    now = [plan]  # the plan being applied (made again once the groups are created)

    def stopped() -> bool:
        return stop is not None and stop.requested

    try:
        return _apply(inv, ec2, now, no_confirm, force, say, stopped, p)
    except OperationError as e:
        if stopped():
            _stop_here(p)
        if not _changed(p):
            raise
        p.wider = _read_wider(inv, ec2, now[0])
        if not p.wider or p.interrupted:
            raise
        raise OperationError(f"{e.message}; stopped part-way, {_wider_text(p.wider)}") from e


def _changed(p: Progress) -> bool:
    """Whether a rule or an attachment was sent (or was being sent): what can widen."""
    kinds = ("revoke", "rules", "attach")
    return any(u.kind in kinds for u in p.done) or (p.current is not None and p.current.kind in kinds)


def _wider_text(lines: list[str]) -> str:
    return f"now admitting more than before and than declared: {'; '.join(lines)}"


def _stop_here(p: Progress) -> None:
    p.interrupted = True
    p.not_applied = list(p.waiting)
    p.waiting = []


def _read_wider(inv: Inventory, ec2: Any, plan: SgPlan) -> list[str]:
    """Read back each planned instance's groups and their rules: what it admits beyond
    both the state before and the declared one (`exposure.wider`)."""
    assert inv.aws is not None
    try:
        groups = shell.fetch(ec2, inv.aws.security_groups)
        instances = shell.fetch_instances(ec2, machines(inv))
    except OperationError as e:
        return [f"not known: reading back what the instances admit failed ({e.message})"]
    names = {**plan.names, **{g.id: g.name for g in groups}}
    return [w.text(names) for w in wider(plan.groups, plan.attachments, plan.before, groups, instances)]


def _apply(inv: Inventory, ec2: Any, now: list[SgPlan], no_confirm: bool, force: bool,
           say: Callable[[str], None], stopped: Callable[[], bool], p: Progress) -> Progress:
    plan = now[0]

    def run(unit: Unit, fn: Callable[[], None]) -> bool:
        """Run one change unless Ctrl-C came first; False: stopped."""
        if stopped():
            return False
        if unit in p.waiting:
            p.waiting.remove(unit)
        p.current = unit
        begin(unit)
        fn()
        p.done.append(unit)
        p.current = None
        return True

    sent_groups: dict[str, GroupPlan] = {}
    sent_attach: list[AttachPlan] = []
    go = True
    for pg in plan.placements:  # first: nothing else depends on it, nor it on anything
        if go and pg.has_changes:
            go = run(Unit("placement", pg.name), functools.partial(_say_one, say, placement_aws.create, ec2, pg))
    creating = [g for g in plan.groups if g.create]
    if go and creating:
        unit = Unit("create", ", ".join(g.name for g in creating))
        replanned: list[SgPlan] = []
        try:
            go = run(unit, lambda: replanned.append(
                _create_then_replan(inv, ec2, creating, force, say, stopped, p)))
        except _Stopped:
            p.current = None
            go = False
        if replanned:
            plan = now[0] = replanned[0]  # checked whole there
            p.waiting = _units(plan)  # the created groups' rules, now that their ids are known
    elif go:
        _fail_unless_whole(plan)
    for unit, item in _changes(plan):
        if not go:
            break
        if isinstance(item, AttachPlan):
            go = run(unit, functools.partial(_say_one, say, shell.attach, ec2, item))
            if go:
                sent_attach.append(item)
        elif item.revoke or item.authorize or item.redescribe:  # a created group may have none
            go = run(unit, functools.partial(_lines, say, shell.execute, ec2, item))
            if go:
                sent_groups[item.name] = _merged(sent_groups.get(item.name), item)
    # what was sent and touched SSH is confirmed (or reverted) even after Ctrl-C: it is the
    # end of the changes already made
    sent = dataclasses.replace(plan, groups=tuple(sent_groups.values()), attachments=tuple(sent_attach))
    _confirm_ssh(inv, ec2, sent, no_confirm, say, p, {a.machine: a.current for a in plan.attachments})
    for d in plan.deletions:
        if go:
            go = run(Unit("delete", d.group.name), functools.partial(_say_one, say, shell.delete, ec2, d.group))
    if not go or stopped():
        _stop_here(p)
        if _changed(p):
            p.wider = _read_wider(inv, ec2, plan)
        return p
    say("Applied.")
    return p


def _say_one(say: Callable[[str], None], fn: Callable[..., str], *args: Any) -> None:
    say(fn(*args))


def _lines(say: Callable[[str], None], fn: Callable[..., list[str]], *args: Any) -> None:
    for line in fn(*args):
        say(line)


def _fail_unless_whole(plan: SgPlan) -> None:
    failed = [p for p in plan.groups if p.error or p.create]
    if failed or plan.failed:
        raise OperationError("; ".join(f"{p.name}: {p.error or 'was not created'}" for p in failed)
                             or "the plan changed while applying; run sg plan again")


def _create_then_replan(inv: Inventory, ec2: Any, creating: Sequence[GroupPlan], force: bool,
                        say: Callable[[str], None], stopped: Callable[[], bool],
                        p: Progress) -> SgPlan:
    """Create the new groups, then plan again (their ids now known: references and
    attachments resolve). When that stops the apply (a creation AWS refuses midway, a
    re-plan that fails or is refused, Ctrl-C) before any rule or attachment is sent, the
    groups it created are deleted again: nothing is left half-applied."""
    created: dict[str, str] = {}
    try:
        shell.create_groups(ec2, creating, created)
        for name, gid in created.items():
            say(f"{name}: created {gid}")  # the group id is AWS's answer
        plan = read_plan(inv, ec2)
        _refuse(plan, force)
        _fail_unless_whole(plan)
        if stopped():
            raise _Stopped
        return plan
    except BaseException:
        _delete_again(ec2, created, say, p)
        raise


def _delete_again(ec2: Any, created: dict[str, str], say: Callable[[str], None], p: Progress) -> None:
    for name, gid in created.items():
        try:
            say(f"rolled back: {shell.delete_created(ec2, name, gid)}")
            p.rolled_back.append(f"group {name} ({gid}) created and deleted again")
        except OperationError as e:
            say(f"rollback failed: {e.message}; delete {gid} by hand")
            # a change the recap names: the group stays, empty
            p.left.append(f"group {name} ({gid}) created, not deleted again (delete it by hand)")


# what a new login runs: the answer `provision.hosts.confirm.confirm` counts as "got through"
_CONFIRM_SCRIPT = "printf '@commit\\tsg\\n@confirmed\\n'"


def _confirm_ssh(inv: Inventory, ec2: Any, plan: SgPlan, skip: bool, say: Callable[[str], None],
                 p: Progress, held: Mapping[str, Sequence[str]]) -> None:
    """After a change that touches SSH admission: a new SSH connection through the jump
    chain (host keys checked) to each touched machine within the window, or the change
    that touched it is reverted. The commit-confirmed hosts' own confirmation loop. `held`:
    the groups each instance had before (it still has them when its attachment was not
    sent), whose rule changes touch it too."""
    hit = touched(inv, plan.groups, plan.attachments, held)
    if not hit:
        return
    if skip:
        say(f"SSH not confirmed (--no-confirm) for {', '.join(t.machine for t in hit)}")
        return
    window = inv.confirm_timeout
    failed = []
    p.current = Unit("confirm", ", ".join(t.machine for t in hit))
    begin(p.current)
    for t in hit:
        conf = new_ssh.confirm(inv, HostRun(inv.node(t.machine)), False, _CONFIRM_SCRIPT, 1,
                               time.monotonic() + window)
        if conf.answers == [True]:
            say(f"{t.machine}: a new SSH connection gets through after the change ({conf.seconds:.1f} s)")
        else:
            say(f"{t.machine}: no new SSH connection within {window} s ({conf.cause}); reverting "
                f"{t.why}")
            failed.append(t)
    p.current = None
    if not failed:
        return
    names = {g for t in failed for g in t.groups}
    before = {g.id: g for g in plan.before}
    ids = {g.group_id: g.name for g in plan.groups if g.name in names and g.group_id in before}
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
                say(f"reverted: {line}")
        except OperationError as e:
            say(f"revert failed: {e.message}")
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
    refuse_lockout(plan.groups, force)
    if plan.guard and not force:
        raise OperationError(f"refusing: {plan.guard}")


def refuse_lockout(plans: Sequence[GroupPlan], force: bool) -> None:
    lost = [p for p in plans if p.lost_operator_cidrs]
    if lost and not force:
        what = "; ".join(f"{p.name}: {', '.join(p.lost_operator_cidrs)}" for p in lost)
        raise OperationError(f"refusing to remove the rule admitting the operator's SSH path ({what}): "
                             "the operator would be locked out at the cloud layer. Declare a rule "
                             "that still admits them, or pass --force")
