"""What the inventory's text alone shows wrong about its secrets (pure): called by the
inventory's build, each problem becomes a located error (exit 2)."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from provision.secretdata.armor import ArmorError, read
from provision.secretdata.recipients import recipients

Path = tuple[str | int, ...]

# While `provision secrets set` loads the inventory, services may name secrets not set
# yet: that is how one writes an inventory (the services first, then `secrets set` for
# each), and adding a secret cannot make it worse. Every other command refuses them.
_ADDING: ContextVar[bool] = ContextVar("adding_secrets", default=False)


@contextlib.contextmanager
def adding() -> Iterator[None]:
    """Within: a service naming a secret not declared yet is not an error."""
    token = _ADDING.set(True)
    try:
        yield
    finally:
        _ADDING.reset(token)


def service_problems(path: Path, environment: Mapping[str, str], uses: Mapping[str, Any],
                     known: Sequence[str], per_user: bool) -> Iterator[tuple[Path, str]]:
    """A service's `environment` and `secrets`: names a secret that is declared, gives
    each variable once, and no secret to a per-user server."""
    if uses and per_user:
        yield ((*path, "secrets"), "a per_user server runs as each member: a secret given "
               "to it would be every member's; give secrets to a shared service")
    envs: dict[str, str] = {k: "environment" for k in environment}
    files: set[str] = set()
    for name, target in uses.items():
        where: Path = (*path, "secrets", name)
        if name not in known and not _ADDING.get():
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            yield (where, f"unknown secret '{name}'{hint} (declared in the top-level "
                   f"'secrets': {', '.join(known) or 'none'}; add it with "
                   f"`provision secrets set {name}`)")
        if isinstance(target, str):
            other = envs.setdefault(target, f"secret '{name}'")
            if other != f"secret '{name}'":
                yield (where, f"{target} is already set by {other}; a variable is set once")
        else:
            file = getattr(target, "file", "")
            if file in files:
                yield (where, f"the credential file '{file}' is already given by another "
                       "secret; a file name is used once")
            files.add(file)


def inventory_problems(secrets: Mapping[str, str], team: Sequence[tuple[str, Sequence[str]]],
                       extra: Mapping[str, str]) -> Iterator[tuple[Path, str]]:
    """Each secret is encrypted to somebody the inventory still lists, as far as its header
    shows (SSH key tags; an X25519 stanza counts when `recipients` has an age1 key)."""
    keys, _unable = recipients(team, extra)
    tags = {r.tag for r in keys if r.tag is not None}
    has_age = any(r.tag is None for r in keys)
    for name, text in secrets.items():
        try:
            h = read(text)
        except ArmorError:
            continue  # reported by the schema
        if not (h.tags & tags) and not (has_age and any(s.type == "X25519" for s in h.stanzas)):
            yield (("secrets", name), f"secret '{name}' is encrypted to nobody in the team or "
                   "recipients (none of its recipients' key tags is a listed key's); re-encrypt "
                   "it: `provision secrets rekey` by someone who can still read it, or "
                   f"`provision secrets set {name}`")
