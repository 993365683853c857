"""What a step is, and every step a playbook may name. Pure.

A step turns (inventory, host) into a fact request and a pure diff (facts -> planned
actions). A new step is one module under `provision/tasks/` with a `build(inv, host)`
factory, plus one line in `STEPS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from provision.errors import OperationError
from provision.facts import Facts, Request
from provision.inventory.model import Host, Inventory

from .actions import Action
from .commit import CommitConfirmed
from .pytask import RunTask

# What a diff may plan: plain actions (one batch), a commit-confirmed change, or a Python
# task (run on the operator's machine, provision.hosts.pytasks).
Planned = Action | CommitConfirmed | RunTask


class Refused(OperationError):
    """A step will not touch this host as it is (the recap says why); nothing is applied."""


class Step(Protocol):
    @property
    def name(self) -> str: ...

    def request(self) -> Request: ...

    def diff(self, facts: Facts) -> Sequence[Planned]: ...


def _users(inv: Inventory, host: Host) -> Step:
    from .users import UsersStep
    return UsersStep(inv, host)


def _packages(inv: Inventory, host: Host) -> Step:
    from .packages import PackagesStep
    return PackagesStep(inv, host)


def _services(inv: Inventory, host: Host) -> Step:
    from .services import ServicesStep
    return ServicesStep.build(inv, host)


def _sshd(inv: Inventory, host: Host) -> Step:
    from .sshd import SshdStep
    return SshdStep.build(inv, host)


def _firewall(inv: Inventory, host: Host) -> Step:
    from .firewall import FirewallStep
    return FirewallStep.build(inv, host)


STEPS: dict[str, Callable[[Inventory, Host], Step]] = {
    "users": _users,
    "packages": _packages,
    "services": _services,
    "sshd": _sshd,  # commit-confirmed (provision.hosts.confirm)
    "firewall": _firewall,  # commit-confirmed (provision.hosts.confirm)
}
