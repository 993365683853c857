"""Every built-in step a playbook may name: the name, and where its factory lives. Pure.

A new step is one module under `provision/steps/` with a factory `(inventory, host) ->
Step` (see `provision.steps.step`), plus one line in `STEPS`. The table names modules
instead of importing them, so a playbook is checked against it without loading the steps,
their templates and Jinja (~0.2 s): `plan` and `apply` open the hosts' connections first
and import the steps while those are under way (`preload`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provision.inventory.model import Host, Inventory

    from .step import Step

Factory = Callable[["Inventory", "Host"], "Step"]


class Lazy:
    """A step factory named `module:attribute[.attribute]`, imported on first use."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self._factory: Factory | None = None

    def load(self) -> Factory:
        if self._factory is None:
            module, attrs = self.ref.split(":")
            found: object = importlib.import_module(module)
            for attr in attrs.split("."):
                found = getattr(found, attr)
            assert callable(found), self.ref
            self._factory = found  # a step factory, per the table
        assert self._factory is not None
        return self._factory

    def __call__(self, inv: Inventory, host: Host) -> Step:
        return self.load()(inv, host)


STEPS: dict[str, Callable[[Inventory, Host], Step]] = {
    "users": Lazy("provision.steps.users:UsersStep"),
    "banner": Lazy("provision.steps.banner:BannerStep"),  # /etc/issue, /etc/issue.net
    "login": Lazy("provision.steps.login:LoginStep"),  # the team's umask, login.defs
    "packages": Lazy("provision.steps.packages:PackagesStep"),
    "updates": Lazy("provision.steps.updates:UpdatesStep.build"),  # unattended-upgrades policy
    "python_envs": Lazy("provision.steps.python_envs:PythonEnvsStep"),
    "services": Lazy("provision.steps.services:ServicesStep.build"),
    "kernel": Lazy("provision.steps.kernel:KernelStep.build"),  # sysctl baseline, cores, modules, time
    "cluster": Lazy("provision.steps.cluster:ClusterStep.build"),  # sysctl, job environment
    "sshd": Lazy("provision.steps.sshd:SshdStep.build"),  # commit-confirmed (provision.hosts.confirm)
    "firewall": Lazy("provision.steps.firewall:FirewallStep.build"),  # commit-confirmed
    "door": Lazy("provision.steps.door:DoorStep.build"),  # TLS, API keys, rate limits (provision.door)
}


def preload(names: Iterable[str]) -> None:
    """Import the steps `names` now, in this thread (the hosts' threads then find them
    imported: two threads importing one module for the first time can see it half made)."""
    for name in names:
        factory = STEPS.get(name)
        if isinstance(factory, Lazy):
            factory.load()
