"""The apt sources of a node (`apt_sources`): a deb822 `.sources` file and its signing key
each, as artifacts (pure). Used by `render_host` (so `provision render` lays them out) and by
the packages step."""

from __future__ import annotations

from provision.inventory.apt import key_path, source_path
from provision.inventory.model import AptSource, Host

from .artifact import Artifact
from .env import render


def source_file(src: AptSource) -> str:
    """The deb822 `.sources` file of `src` (templates/apt.sources.j2)."""
    return render("apt.sources.j2", name=src.name, uri=src.uri, suites=src.suites,
                  components=src.components, key_path=key_path(src.name),
                  fingerprint=src.fingerprint)


def apt_artifacts(host: Host) -> list[Artifact]:
    """Per source: the key (kind apt-key) first, then the `.sources` file (apt-source)."""
    out = []
    for s in host.apt_sources:
        out += [Artifact(key_path(s.name), s.key, "apt-key"),
                Artifact(source_path(s.name), source_file(s), "apt-source")]
    return out
