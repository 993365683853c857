"""The door step (pure diff): HAProxy in front of every service with `https:` (docs/door.md).

Wants: the haproxy package; a key and certificate per name under /etc/provision/tls
(made on the host, self-signed until `provision certs` installs a CA's); the unit, the key
maps and the config as rendered; and, read back on loopback, every door port serving
this config's digest. Anything else is one DoorApply: written beside the live files,
checked by HAProxy, reloaded, read back. A converged door adds nothing to the probe's
one remote command.
"""

from __future__ import annotations

from provision.door import paths
from provision.door import render as R
from provision.facts import Facts, Request
from provision.facts import door as D
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory

from .actions import Action, InstallPackages, RetireUnit
from .door_script import DoorApply
from .files import sha256

PACKAGE = "haproxy"


@frozen
class DoorStep:
    inv: Inventory
    host: Host
    name: str = "door"

    @classmethod
    def build(cls, inv: Inventory, host: Host) -> DoorStep:
        return cls(inv, host)

    def request(self) -> Request:
        return Request(files=(paths.CONFIG, paths.UNIT_FILE), prefixes=(paths.DOOR_DIR + "/",),
                       units=(paths.UNIT,), packages=(PACKAGE,), facts=(D.SPEC.name,))

    def diff(self, facts: Facts) -> list[Action]:
        doors = R.doors(self.host)
        unit = facts.units.get(paths.UNIT)
        if not doors:
            # what `disable --now` can change: a static unit (no [Install]) stays "enabled"
            # to systemd once stopped, and would be retired again by every apply
            if (unit is not None and unit.load_state == "loaded"
                    and (unit.active or unit.unit_file_state in ("enabled", "enabled-runtime"))):
                return [RetireUnit(paths.UNIT, "no service of this host has a door")]
            return []
        door = facts.get(D.SPEC)
        config = R.config(self.host)
        digest = R.config_digest(config) or ""
        maps = {R.map_path(s): R.keys_map(s) for s in doors if s.https and s.https.keys}
        unit_text = R.unit()
        why: list[str] = []
        writes: list[tuple[str, str, int]] = []
        unit_file = facts.file(paths.UNIT_FILE)
        unit_changed = unit_file.sha256 != sha256(unit_text)
        if unit_changed:
            writes.append((paths.UNIT_FILE, unit_text, 0o644))
            why.append("unit file")
        for path, text in maps.items():
            if facts.file(path).sha256 != sha256(text):
                writes.append((path, text, 0o600))
                why.append(f"key map {path.rsplit('/', 1)[1]}")
        live = facts.file(paths.CONFIG)
        if live.sha256 != sha256(config):
            why.append("config")
        certs = tuple(s.https.name for s in doors if s.https and _missing(door.certs.get(s.https.name)))
        if certs:
            why.append("certificate files")
        ports = tuple(s.https.port for s in doors if s.https)
        off = [p for p in ports if (served := door.served.get(p)) is None or served.digest != digest]
        if not why and off:
            why.append(f"port {', '.join(map(str, off))} does not serve this config")
        if unit is None or not unit.active:
            why.append("door not running")
        if not why:
            return []
        writes.append((paths.CONFIG + ".new", config, 0o600))
        keep = set(maps) | {paths.CONFIG, paths.UNIT_FILE}
        stale = tuple(f.path for f in facts.prefixed(paths.DOOR_DIR + "/")
                      if f.path.endswith(".keys") and f.path not in keep)
        pkg = facts.packages.get(PACKAGE)
        install: list[Action] = [] if pkg is not None and pkg.installed else [
            InstallPackages((PACKAGE,), self.inv.apt_lock_timeout)]
        return [*install, DoorApply(digest, certs, tuple(writes), unit_changed, ports, stale,
                                    ", ".join(dict.fromkeys(why)))]


def _missing(cert: D.CertFact | None) -> bool:
    return cert is None or not (cert.has_key and cert.has_combined and cert.fingerprint)
