"""Who can read each secret, from its header alone (pure): `secrets check` and `rekey`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provision.frozen import frozen
from provision.secretdata.armor import ArmorError, read
from provision.secretdata.recipients import Recipient, recipients


@frozen
class SecretStatus:
    name: str
    missing: tuple[str, ...]  # current members/recipients none of whose keys it is for
    stale: tuple[str, ...]  # key tags in it that are no current key's (someone removed)
    partial: tuple[str, ...]  # members with some of their keys left out (a key added since)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.partial)


def owners(keys: Sequence[Recipient]) -> dict[str, str]:
    """key tag -> owner."""
    return {r.tag: r.owner for r in keys if r.tag is not None}


def status(secrets: Mapping[str, str], team: Sequence[tuple[str, Sequence[str]]],
           extra: Mapping[str, str]) -> tuple[tuple[SecretStatus, ...], tuple[str, ...]]:
    """(each secret's status, the members age cannot encrypt to at all)."""
    keys, unable = recipients(team, extra)
    by_owner: dict[str, set[str | None]] = {}
    for r in keys:
        by_owner.setdefault(r.owner, set()).add(r.tag)
    out = []
    for name, text in secrets.items():
        try:
            h = read(text)
        except ArmorError:
            continue
        x25519 = sum(1 for s in h.stanzas if s.type == "X25519")
        # an age1 recipient shows no tag: counted as present while the header has as many
        # X25519 stanzas as there are age1 keys (whose they are, the header does not say)
        ages = sorted(o for o, tags in by_owner.items() if None in tags)
        missing = [o for o, tags in by_owner.items()
                   if not (tags - {None}) & h.tags and not (None in tags and x25519 >= len(ages))]
        partial = [o for o, tags in by_owner.items()
                   if o not in missing and (tags - {None}) - h.tags and (tags - {None}) & h.tags]
        known = {t for tags in by_owner.values() for t in tags if t is not None}
        stale = sorted(h.tags - known)
        out.append(SecretStatus(name, tuple(missing), tuple(stale), tuple(partial)))
    return tuple(out), unable
