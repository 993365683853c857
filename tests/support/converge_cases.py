"""Shared inventory and helpers for the diff tests."""

from __future__ import annotations

from pathlib import Path

from provision.facts import Facts, parse
from provision.inventory import load_inventory
from provision.inventory.model import Host, Inventory

ROOT = Path(__file__).parent.parent / "fixtures"


def inventory() -> tuple[Inventory, Host]:
    inv = load_inventory(ROOT / "converge" / "inventory.yml")
    return inv, inv.hosts[0]


def facts(name: str) -> Facts:
    return parse((ROOT / "facts" / name).read_text())
