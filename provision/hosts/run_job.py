"""What a converge run works on and was asked: the data `hosts/run` (the entry points) and
`hosts/run_phases` (the rest of the run) share, in a module of its own so neither imports
the other for it."""

from __future__ import annotations

from provision.frozen import frozen
from provision.inventory.model import Host, Inventory
from provision.playbook import Playbook
from provision.pytasks.load import Imported


@frozen
class Run:
    """What a plan or apply works on: the inventory, the playbook, the hosts it selects,
    and the task files it imported."""

    inv: Inventory
    pb: Playbook
    selected: tuple[Host, ...]
    imported: tuple[Imported, ...] = ()


@frozen
class Request:
    """What the command was asked: the hosts (patterns), the run's options."""

    inv: Inventory
    pb: Playbook
    hosts: tuple[str, ...] = ()
    inventory_path: str | None = None
    shard_text: str | None = None
    task_paths: tuple[str, ...] = ()
    forks: int | None = None
    accept_new: bool = False


@frozen
class ApplyOptions:
    """`apply`'s own options (the confirmation window's override, the host lock's wait)."""

    confirm_timeout: int | None = None
    lock_timeout: int = 180
