"""Packages from the inventory (`host.packages`, apt): install only what is missing. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from provision.facts import Facts, Request
from provision.inventory.model import Host, Inventory

from .actions import Action, InstallPackages


@dataclass(frozen=True)
class PackagesStep:
    inv: Inventory
    host: Host
    name: str = "packages"

    def request(self) -> Request:
        return Request(packages=self.host.packages)

    def diff(self, facts: Facts) -> list[Action]:
        missing = tuple(p for p in self.host.packages
                        if not (p in facts.packages and facts.packages[p].installed))
        return [InstallPackages(missing)] if missing else []
