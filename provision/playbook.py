"""Playbooks: `playbooks/*.yml` name an ordered list of steps and the hosts they run on.
Pure apart from reading the playbook file.

    hosts: role:gpu-server        # all | a host name | role:NAME (or a list of them)
    steps: [users, packages, services]

Loading is strict (unknown keys and steps are errors that point at file:line:column).
Pure apart from reading the playbook file. The steps themselves: `provision.tasks.step`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

import yaml

from provision.errors import UsageError
from provision.inventory.model import Host, Inventory
from provision.tasks.step import STEPS, Step

DEFAULT_PLAYBOOK = "bootstrap-gpu-server"


KEYS = ("name", "description", "hosts", "steps")


class PlaybookError(UsageError):
    """A playbook that cannot be used; str() is `file:line:col: field: message`."""

    prefix = ""


@dataclass(frozen=True)
class Playbook:
    name: str
    source: str
    hosts: tuple[str, ...]
    steps: tuple[str, ...]
    description: str = ""

    def select(self, inv: Inventory, patterns: tuple[str, ...] = ()) -> tuple[Host, ...]:
        """The playbook's hosts, narrowed to `patterns` when given. KeyError on a bad pattern."""
        mine = tuple(h for h in (*inv.bastions, *inv.hosts)  # the order they are applied in
                     if any(_matches(p, h) for p in self.hosts))
        if not patterns:
            return mine
        return tuple(h for h in inv.select(list(patterns)) if h in mine)

    def build(self, inv: Inventory, host: Host) -> list[Step]:
        return [STEPS[s](inv, host) for s in self.steps]


def _matches(pattern: str, host: Host) -> bool:
    if pattern == "all":
        return not host.is_bastion
    if pattern == "bastions":
        return host.is_bastion
    if pattern.startswith("role:"):
        return pattern[5:] in host.roles
    return pattern == host.name


def find(name: str) -> tuple[str, str]:
    """(source label, text) of a playbook: a path to a .yml file, or a shipped playbook name."""
    p = Path(name)
    if p.suffix in (".yml", ".yaml") or "/" in name:
        if not p.is_file():
            raise PlaybookError(f"{name}: no such playbook file")
        return str(p), p.read_text()
    shipped = files("provision._playbooks")
    candidate = shipped / f"{name}.yml"
    if not candidate.is_file():
        known = sorted(str(f.name)[:-4] for f in shipped.iterdir() if str(f.name).endswith(".yml"))
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise PlaybookError(f"unknown playbook '{name}'{hint} (shipped: {', '.join(known)}; "
                            "or give a path to a .yml file)")
    return f"playbooks/{name}.yml", candidate.read_text()


def load(name: str) -> Playbook:
    source, text = find(name)
    return parse(text, source, default_name=Path(source).stem)


def parse(text: str, source: str, default_name: str = "playbook") -> Playbook:
    def err(node: Any, field: str, message: str) -> PlaybookError:
        m = node.start_mark if node is not None else None
        where = f"{source}:{m.line + 1}:{m.column + 1}" if m else f"{source}:1:1"
        return PlaybookError(f"{where}: {field}: {message}" if field else f"{where}: {message}")

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise PlaybookError(f"{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(root, yaml.MappingNode):
        raise err(root, "", "a playbook is a mapping with 'hosts' and 'steps'")
    fields: dict[str, tuple[Any, Any]] = {}
    for k, v in root.value:
        key = k.value if isinstance(k, yaml.ScalarNode) else None
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise err(k, str(key), f"unknown key{hint} (allowed: {', '.join(KEYS)})")
        if key in fields:
            raise err(k, key, "duplicate key")
        fields[key] = (k, v)

    def strings(key: str, allow_scalar: bool) -> list[tuple[str, Any]]:
        _, v = fields[key]
        if isinstance(v, yaml.ScalarNode) and allow_scalar and v.tag.endswith(":str"):
            return [(v.value, v)]
        if not isinstance(v, yaml.SequenceNode) or not v.value:
            raise err(v, key, "a non-empty list of names" + (" (or one name)" if allow_scalar else ""))
        out = []
        for i, item in enumerate(v.value):
            if not (isinstance(item, yaml.ScalarNode) and item.tag.endswith(":str")) or not item.value:
                raise err(item, f"{key}[{i}]", "must be a name")
            out.append((item.value, item))
        return out

    for required in ("hosts", "steps"):
        if required not in fields:
            raise err(root, required, "required field is missing")
    steps = strings("steps", allow_scalar=False)
    for i, (s, node) in enumerate(steps):
        if s not in STEPS:
            close = difflib.get_close_matches(s, list(STEPS), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise err(node, f"steps[{i}]", f"unknown step '{s}'{hint} (steps: {', '.join(STEPS)})")
    if len({s for s, _ in steps}) != len(steps):
        raise err(fields["steps"][1], "steps", "a step is listed twice")
    hosts = strings("hosts", allow_scalar=True)
    for i, (h, node) in enumerate(hosts):
        if h != "all" and not (h.startswith("role:") and len(h) > 5) and (
                any(c.isspace() for c in h) or ":" in h):
            raise err(node, f"hosts[{i}]", f"'{h}' is not a host selector "
                      "(all, bastions, a host name, or role:NAME)")
    name, description = default_name, ""
    for key in ("name", "description"):
        if key in fields:
            v = fields[key][1]
            if not (isinstance(v, yaml.ScalarNode) and v.tag.endswith(":str")):
                raise err(v, key, "must be a string")
            if key == "name":
                name = v.value
            else:
                description = v.value
    return Playbook(name=name, source=source, hosts=tuple(h for h, _ in hosts),
                    steps=tuple(s for s, _ in steps), description=description)


T = TypeVar("T")


def waves(items: Sequence[T], host_of: Callable[[T], Host]) -> list[list[T]]:
    """Apply order: bastions first, outermost before the ones behind them, then every host.

    A host's confirmation (and its team's logins) go through its bastions, so a bastion's
    sshd and firewall must have settled before the hosts behind it change.
    """
    bastions = sorted({len(host_of(i).jump_chain) for i in items if host_of(i).is_bastion})
    out = [[i for i in items if host_of(i).is_bastion and len(host_of(i).jump_chain) == depth]
           for depth in bastions]
    hosts = [i for i in items if not host_of(i).is_bastion]
    return [*out, hosts] if hosts else out
