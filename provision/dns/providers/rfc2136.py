"""RFC 2136 provider (dnspython): TSIG-signed AXFR to read, TSIG-signed UPDATE to write.

This module is what the inventory loader imports for a zone with `provider: rfc2136` (its
settings and capabilities) and stays free of dnspython (~80 ms of `check` and `plan`);
the client that talks to the server is `rfc2136_client`, imported by `make`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field, model_validator

from provision.dns import secret_keys
from provision.dnsdata.provider_settings import Capabilities, Credential, FileKind, ProviderSettings
from provision.inventory.fields import Address, FilePath, Port
from provision.secretdata.fields import SecretName

if TYPE_CHECKING:
    from provision.inventory.model import Inventory, Zone

    from .rfc2136_client import Rfc2136Provider


class Settings(ProviderSettings):
    server: Address = Field(description="the primary: where updates and zone transfers go")
    port: Port = Field(53, description="the primary's DNS port")
    tsig_key_file: FilePath | None = Field(
        None, description="the TSIG key (a BIND key file, as tsig-keygen writes it, or "
                          "algorithm:name:secret), in the inventory's directory tree or "
                          "~/.config/provision; or tsig_key_secret")
    tsig_key_secret: SecretName | None = Field(
        None, description="the TSIG key from the inventory's secret NAME (its value as in a "
                          "key file), instead of tsig_key_file; decrypted only by the commands "
                          "that talk to the primary")

    local_files: ClassVar[Mapping[str, FileKind]] = {"tsig_key_file": "tsig"}
    secret_fields: ClassVar[tuple[str, ...]] = ("tsig_key_secret",)

    @model_validator(mode="after")
    def _one_key(self) -> Settings:
        if (self.tsig_key_file is None) == (self.tsig_key_secret is None):
            raise ValueError("give the TSIG key as exactly one of tsig_key_file (a file) and "
                             "tsig_key_secret (the name of a secret in `secrets:`)")
        return self

    def credential(self, zone: str, env: Mapping[str, str],
                   aws_endpoint_url: str | None) -> Credential:
        # the secret never leaves: it signs (HMAC) what is sent to the primary
        source = self.tsig_key_file or f"secret {self.tsig_key_secret}"
        return Credential("rfc2136", zone, "TSIG key", source,
                          f"signs the requests sent to {self.server} port {self.port}")


CAPABILITIES = Capabilities(
    record_types=frozenset({"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA"}), root_ns=False,
    conditional_write=True,     # UPDATE prerequisites: NXRRSET/YXRRSET otherwise
    replan_on_stale=False, change_ids=False, authoritative=True,
    nameservers="the zone's NS set, asked of the primary (in-zone names' addresses from "
                "the primary, others from dns.resolvers); the primary itself when it has none")


def make(zone: Zone, inv: Inventory) -> Rfc2136Provider:
    from .rfc2136_client import Rfc2136Provider

    s = zone.settings
    assert isinstance(s, Settings)  # the inventory validated the zone with these settings
    key = None
    if s.tsig_key_secret is not None:
        key = secret_keys.tsig_key(s.tsig_key_secret, secret_keys.value(inv, s.tsig_key_secret))
    return Rfc2136Provider(zone.name, s.server, s.port, s.tsig_key_file, key=key,
                           resolvers=inv.dns.resolvers if inv.dns else (), tree=inv.tree,
                           capabilities=CAPABILITIES)
