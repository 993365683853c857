"""The services' secrets on a host (pure): facts (fingerprints) + the run's vault ->
the writes, removals and which units they touch. Part of the `services` step."""

from __future__ import annotations

from provision.facts import Facts
from provision.facts import credentials as cred_fact
from provision.inventory.model import Host, Service
from provision.secretdata.vault import Vault
from provision.secrets.delivery import DIR_MODE, MODE, ROOT, deliveries, directory, fingerprint

from .actions import Action, Mkdir, RemoveFile, WriteSecret


def managed(host: Host) -> tuple[Service, ...]:
    """The services whose secret directory is looked at (members' servers take none)."""
    return tuple(s for s in host.services if s.member is None)


def directories(host: Host, any_secrets: bool) -> tuple[str, ...]:
    """The directories the probe reports: every service's when the inventory has secrets
    at all (a secret taken away from a service is then removed), else none."""
    return tuple(directory(s) for s in managed(host)) if any_secrets else ()


def secret_actions(host: Host, vault: Vault | None, facts: Facts
                   ) -> tuple[list[Action], dict[str, list[str]]]:
    """(actions, unit -> the secrets that changed for it)."""
    have = facts.get(cred_fact.SPEC)
    acts: list[Action] = []
    changed: dict[str, list[str]] = {}
    services = managed(host)
    if any(s.secrets for s in services) and have.dirs.get(ROOT) != (DIR_MODE, "root"):
        acts.append(Mkdir(ROOT, DIR_MODE, "root", "root"))
    for s in services:
        wanted = deliveries(s, vault)
        where = directory(s)
        if wanted and have.dirs.get(where) != (DIR_MODE, "root"):
            acts.append(Mkdir(where, DIR_MODE, "root", "root"))
        for d in wanted:
            f = have.files.get(d.path)
            same = (f is not None and have.salt is not None and (f.mode, f.owner) == (MODE, "root")
                    and f.fingerprint == fingerprint(have.salt, d.content.reveal()))
            if not same:
                acts.append(WriteSecret(d.path, d.secret, s.name, d.content, new=f is None))
                changed.setdefault(s.unit_name, []).append(d.secret)
        paths = {d.path for d in wanted}
        for p in sorted(have.files):
            if p.startswith(where + "/") and p not in paths:
                acts.append(RemoveFile(p))
                changed.setdefault(s.unit_name, []).append(p.rsplit("/", 1)[1].rsplit(".", 1)[0])
    return acts, changed
