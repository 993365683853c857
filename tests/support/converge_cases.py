"""The inventory of the converge diff tests (tests/fixtures/converge/inventory.yml); the
step fixtures in tests/steps name the same file."""

from __future__ import annotations

from pathlib import Path

from provision.inventory import load_inventory
from provision.inventory.model import Host, Inventory

ROOT = Path(__file__).parent.parent / "fixtures"


def inventory() -> tuple[Inventory, Host]:
    inv = load_inventory(ROOT / "converge" / "inventory.yml")
    return inv, inv.hosts[0]
