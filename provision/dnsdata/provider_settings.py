"""What a DNS provider module declares, as data the inventory is checked against: the
base of its zone `Settings`, its `Capabilities`, the `Credential` its settings describe,
and how `check` reads the local files a zone names (`FileKind`).

No I/O, and nothing of the provider code: the inventory (below the engines) validates a
zone with these; `provision.dns.provider` holds the interface a provider implements.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from provision.frozen import frozen

# How `provision check` reads a local file a zone names (`offline.py`): a TSIG key, a
# service-account JSON key, or a secret (an API key: one line of text).
FileKind = Literal["tsig", "service-account", "secret"]


class ProviderSettings(BaseModel):
    """The fields a provider adds to its zones (a subclass per provider)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # fields naming files on the operator's machine: `~` expanded and a relative path
    # taken from the inventory file's directory when loaded; read by `provision check`
    local_files: ClassVar[Mapping[str, FileKind]] = {}
    # fields naming a secret of the inventory's `secrets:` (provision.dns.secret_keys): the
    # name must be there (checked at load); decrypted only where a provider is made
    secret_fields: ClassVar[tuple[str, ...]] = ()
    # what a field's pattern allows, in words (the pattern stays in the JSON Schema for
    # editors; a user reading an error should not have to read a regular expression)
    pattern_words: ClassVar[Mapping[str, str]] = {}

    # fields no longer accepted -> why, in words (an old inventory gets the reason, not
    # only "unknown key")
    retired: ClassVar[Mapping[str, str]] = {}

    # the field listing the networks that see a private zone ('' : the provider has none)
    networks_field: ClassVar[str] = ""

    def visible_to(self) -> frozenset[str]:
        """Who sees a private zone, as labels compared with the provider's own answer."""
        return frozenset()

    def bound_names(self) -> Mapping[str, str]:
        """Local-file fields whose secret is sent to a server the inventory names -> the
        file name that binds it to that server (`provision.dnsdata.secrets.server_key_name`):
        the real file must be named so."""
        return {}

    def credential(self, zone: str, env: Mapping[str, str],
                   aws_endpoint_url: str | None) -> Credential | None:
        """Where this zone's credential comes from and where it goes, for `check` (pure:
        `env` is the environment to read names from; nothing is read or sent)."""
        return None

    def credentials_url(self, aws_endpoint_url: str | None) -> str | None:
        """The API URL credentials are sent to, when the inventory names one (None: the
        provider's own, or no HTTP API). `aws_endpoint_url`: the inventory's aws section."""
        return None


@frozen
class Credential:
    """One zone's credential, for `provision check`: where it comes from, where it goes."""

    provider: str
    zone: str
    what: str        # "API key", "TSIG key", ...
    source: str      # "$VAR", a file, "nowhere on this machine (...)"; "" for none
    goes: str        # "sent to https://h:8081", "signs requests to 10.0.0.53:53"

    def line(self) -> str:
        source = f" from {self.source}" if self.source else ""
        return f"{self.provider} zone {self.zone}: {self.what}{source}, {self.goes}"


@frozen
class Capabilities:
    """What a provider can do, as data: the rest of provision asks these, never its name."""

    record_types: frozenset[str]    # the types it can write (of provision.dnsdata.rdata.MANAGED_TYPES)
    root_ns: bool                   # may change the apex NS set (octoDNS SUPPORTS_ROOT_NS); no provider does
    conditional_write: bool         # the write itself refuses a stale read (prerequisites, If-Match)
    replan_on_stale: bool           # after StaleRead, re-read and re-plan once (Cloud DNS 412)
    change_ids: bool                # apply returns an id whose progress the provider reports
                                    # (wait follows it); else wait asks the servers themselves
    authoritative: bool             # the server it talks to answers DNS authoritatively itself
    nameservers: str                # how the servers to verify against are found, in words
    own_api_hosts: tuple[str, ...] = ()  # its public API's hosts ('.x' a suffix): not named in plans
    private_zones: bool = False     # may serve a zone only to some networks (visibility: private)

    def served(self) -> str:
        """What a finished apply means, for the user."""
        return ("in sync at the provider" if self.change_ids
                else "served by every authoritative server")
