"""What a step is, and every step a playbook may name. Pure.

A step turns (inventory, host) into a fact request and a pure diff (facts -> planned
actions). A new step is one module under `provision/tasks/` with a `build(inv, host)`
factory, plus one line in `STEPS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from provision.facts import Facts, Request
from provision.inventory.model import Host, Inventory

from .actions import Action
from .commit import CommitConfirmed
from .firewall import FirewallStep
from .packages import PackagesStep
from .pytask import RunTask
from .python_envs import PythonEnvsStep
from .refused import Refused
from .services import ServicesStep
from .sshd import SshdStep
from .users import UsersStep

__all__ = ["STEPS", "Planned", "Refused", "Step"]

# What a diff may plan: plain actions (one batch), a commit-confirmed change, or a Python
# task (run on the operator's machine, provision.hosts.pytasks).
Planned = Action | CommitConfirmed | RunTask


class Step(Protocol):
    @property
    def name(self) -> str: ...

    def request(self) -> Request: ...

    def diff(self, facts: Facts) -> Sequence[Planned]: ...


def _users(inv: Inventory, host: Host) -> Step:
    return UsersStep(inv, host)


def _packages(inv: Inventory, host: Host) -> Step:
    return PackagesStep(inv, host)


def _python_envs(inv: Inventory, host: Host) -> Step:
    return PythonEnvsStep(inv, host)


def _services(inv: Inventory, host: Host) -> Step:
    return ServicesStep.build(inv, host)


def _sshd(inv: Inventory, host: Host) -> Step:
    return SshdStep.build(inv, host)


def _firewall(inv: Inventory, host: Host) -> Step:
    return FirewallStep.build(inv, host)


STEPS: dict[str, Callable[[Inventory, Host], Step]] = {
    "users": _users,
    "packages": _packages,
    "python_envs": _python_envs,
    "services": _services,
    "sshd": _sshd,  # commit-confirmed (provision.hosts.confirm)
    "firewall": _firewall,  # commit-confirmed (provision.hosts.confirm)
}
