"""Google Cloud DNS provider (google-cloud-dns): paged RRsets, one change, poll to `done`.

I/O shell. Cloud DNS has no upsert: one change carries the exact old RRset under
`deletions` and the new one under `additions`. A deletion that no longer matches the
zone answers HTTP 412; the caller re-reads and re-plans once (`replan_on_stale`).

Credentials: a service-account file named in the inventory (`credentials_file`), else
Application Default Credentials. An `endpoint` on plain http:// (a local emulator) gets
anonymous credentials: no token is ever sent in clear, nor fetched for it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import Field, StrictStr, field_validator, model_validator

from provision.dns import secret_keys
from provision.dns.offline import service_account_problem
from provision.dns.provider import ProviderError, StaleRead
from provision.dns.rrset import RRset, rrset
from provision.dns.zone_plan import ChangeSet
from provision.dnsdata import endpoint
from provision.dnsdata.provider_settings import Capabilities, Credential, FileKind, ProviderSettings
from provision.dnsdata.secrets import read_bound
from provision.dnsdata.visibility import Found, Wanted, choose
from provision.errors import UsageError
from provision.inventory.fields import FilePath, Url
from provision.localfile import read_regular
from provision.secretdata.fields import SecretName
from provision.text import printable

if TYPE_CHECKING:
    from provision.inventory.model import Inventory, Zone

MAX_RRSETS = 3_000_000
_NETWORK = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
_PROJECT = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
SCOPES = ("https://www.googleapis.com/auth/ndev.clouddns.readwrite",)


class Settings(ProviderSettings):
    project: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")] = Field(
        description="the Google Cloud project id")
    managed_zone: Annotated[StrictStr, Field(pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$")] = Field(
        description="the managed zone's name (not its DNS name)")
    endpoint: Url | None = Field(None, description="API endpoint override (e.g. a local fake)")
    credentials_file: FilePath | None = Field(
        None, description="service-account JSON key (default: Application Default Credentials)")
    credentials_secret: SecretName | None = Field(
        None, description="or: the service-account JSON key from the inventory's secret NAME, "
                          "decrypted only by the commands that talk to the API")
    networks: tuple[Annotated[StrictStr, Field(
        pattern=rf"^((https://(www|compute)\.googleapis\.com/compute/v1/)?projects/{_PROJECT}"
                rf"/global/networks/)?{_NETWORK}$")], ...] = Field(
        (), description="a private zone (visibility: private): the VPC networks that see it, "
                        "as in privateVisibilityConfig: a network's name (in the zone's "
                        "project), projects/P/global/networks/N, or its full URL")

    local_files: ClassVar[Mapping[str, FileKind]] = {"credentials_file": "service-account"}
    secret_fields: ClassVar[tuple[str, ...]] = ("credentials_secret",)
    networks_field: ClassVar[str] = "networks"
    pattern_words: ClassVar[Mapping[str, str]] = {
        "project": "a Google Cloud project id: 6 to 30 lowercase letters, digits and '-', "
                   "starting with a letter and not ending with '-', e.g. my-project-123",
        "managed_zone": "a Cloud DNS managed zone name: lowercase letters, digits and '-', "
                        "starting with a letter and not ending with '-', e.g. example-org",
        "networks": "a VPC network: its name (e.g. default), projects/PROJECT/global/"
                    "networks/NAME, or https://www.googleapis.com/compute/v1/projects/"
                    "PROJECT/global/networks/NAME"}

    @field_validator("endpoint")
    @classmethod
    def _no_clear_credentials(cls, url: str | None) -> str | None:
        why = token_problem(url) if url is not None else ""
        if why:
            raise ValueError(why)
        return endpoint.checked(url, "the endpoint")

    def credential(self, zone: str, env: Mapping[str, str],
                   aws_endpoint_url: str | None) -> Credential:
        url = self.endpoint or "https://dns.googleapis.com"
        if url.startswith("http://"):  # loopback only (checked at load): a local fake
            return Credential("clouddns", zone, "no credentials (anonymous requests to a "
                              "local fake)", "", f"sent to {url}")
        source = (self.credentials_file or (f"secret {self.credentials_secret}"
                                            if self.credentials_secret else None)
                  or "Application Default Credentials (gcloud)")
        return Credential("clouddns", zone, "a Google token", source, f"sent to {url}")

    @model_validator(mode="after")
    def _one_credential(self) -> Settings:
        if self.credentials_file is not None and self.credentials_secret is not None:
            raise ValueError("give the service-account key as one of credentials_file (a "
                             "file) and credentials_secret (a secret in `secrets:`), not both")
        return self

    @field_validator("networks", mode="before")
    @classmethod
    def _network_list(cls, value: object) -> object:
        # YAML gives a list; a tuple keeps the settings hashable like the zone holding them
        return tuple(value) if isinstance(value, list) else value

    def credentials_url(self, aws_endpoint_url: str | None) -> str | None:
        return self.endpoint

    def visible_to(self) -> frozenset[str]:
        return frozenset(network_label(n, self.project) for n in self.networks)


CAPABILITIES = Capabilities(
    record_types=frozenset({"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA"}), root_ns=False,
    conditional_write=True,     # a deletion that no longer matches answers HTTP 412
    replan_on_stale=True, change_ids=True, authoritative=False, private_zones=True,
    nameservers="the managed zone's name servers (names; addresses from dns.resolvers)",
    own_api_hosts=("dns.googleapis.com", "www.googleapis.com"))


def make(zone: Zone, inv: Inventory) -> CloudDnsProvider:
    s = zone.settings
    assert isinstance(s, Settings)  # the inventory validated the zone with these settings
    data = None
    if s.credentials_secret is not None:  # decrypted here, where the provider is made
        data = (s.credentials_secret, secret_keys.value(inv, s.credentials_secret))
    return CloudDnsProvider(zone.name, project=s.project, managed_zone=s.managed_zone,
                            endpoint=s.endpoint, credentials_file=s.credentials_file,
                            credentials_data=data,
                            want=Wanted(zone.visibility, s.visible_to()), tree=inv.tree)


GOOGLE_API = ("googleapis.com", ".googleapis.com")  # where a Cloud DNS token may go


def token_problem(url: str) -> str:
    """Why a bearer token must not be sent to the endpoint `url`, or "": it goes only to
    Google's API over https (an inventory could otherwise have `dns plan` hand the
    operator's token to any https site); plain http to loopback gets no token at all."""
    if url.startswith("http://") or endpoint.is_own(url, GOOGLE_API):
        return ""
    return (f"the endpoint {url} is not Google's API: a Cloud DNS request carries a bearer "
            "token (your credentials_file's or gcloud's), which goes only to "
            "https://….googleapis.com; a local fake is reached over plain http on a "
            "loopback address, with no token")


def network_label(network: str, project: str) -> str:
    """A network as projects/P/global/networks/N (a bare name is in `project`), the
    form the inventory's and the API's spellings are compared in."""
    at = network.find("projects/")
    return network[at:] if at >= 0 else f"projects/{project}/global/networks/{network}"


class CloudDnsProvider:
    kind = "clouddns"
    capabilities = CAPABILITIES
    direct = None  # Cloud DNS's servers are asked by name, port 53

    def __init__(self, zone: str, *, project: str, managed_zone: str, endpoint: str | None = None,
                 credentials_file: str | None = None, poll_interval: float = 0.2,
                 want: Wanted | None = None, tree: str | None = None,
                 credentials_data: tuple[str, bytes] | None = None):
        self.zone = zone.rstrip(".").lower() + "."
        self.project = project
        self.managed_zone = managed_zone
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.credentials_file = credentials_file
        self.credentials_data = credentials_data  # (secret name, its value): the key, decrypted
        self.poll_interval = poll_interval
        self._zone: Any = None
        self.want = want   # None (made by hand): the managed zone is not checked
        # an inventory's tree: its credentials_file must lie there or in the config
        # directory (None: a file given directly, not by an inventory)
        self.tree = tree

    def _credentials(self) -> Any:
        if self.endpoint:
            why = (endpoint.problem(self.endpoint, "clouddns: the endpoint")
                   or token_problem(self.endpoint))
            if why:  # checked before a token is fetched or sent
                raise ProviderError(f"{why}; nothing was sent")
        plain = bool(self.endpoint and self.endpoint.startswith("http://"))
        if plain:
            # plain http only reaches loopback (checked above): a local fake gets no token
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials()
        if self.credentials_file or self.credentials_data:
            return self._service_account()
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            creds, _ = google.auth.default(scopes=list(SCOPES))
        except DefaultCredentialsError as e:
            raise ProviderError(f"clouddns: no Application Default Credentials ({e}); run "
                                "`gcloud auth application-default login` or set "
                                "credentials_file in the zone") from None
        return creds

    def _service_account(self) -> Any:
        """The service account of `credentials_file` (a regular file, `~` expanded). Its
        `token_uri` receives a signed assertion: it must be https:// (or loopback) too."""
        from google.auth import exceptions as aexc
        from google.oauth2 import service_account

        path = Path(self.credentials_file or "").expanduser()
        label = (f"credentials_secret {self.credentials_data[0]}" if self.credentials_data
                 else f"credentials_file {path}")
        try:
            # decoded as UTF-8 first: json.loads(bytes) would silently accept UTF-16/32
            data = (self.credentials_data[1] if self.credentials_data
                    else read_regular(path, 1024 * 1024, "credentials file", follow=True)
                    if self.tree is None
                    else read_bound(str(path), 1024 * 1024, "credentials file", self.tree))
            info = json.loads(data.decode("utf-8"))
        except OSError as e:
            raise UsageError(f"clouddns: cannot use {label}: "
                             f"{printable(e.strerror or str(e))}") from None
        except (ValueError, RecursionError):  # never quoted: a secret's value may be in it
            raise UsageError(f"clouddns: cannot use {label}: not JSON (a "
                             "service-account key, as the console writes it)") from None
        why = service_account_problem(info, label)
        if why:  # bad input, found before google-auth signs or sends anything
            raise UsageError(f"clouddns: {why}; nothing was sent")
        try:
            return service_account.Credentials.from_service_account_info(info, scopes=list(SCOPES))
        except (ValueError, KeyError, TypeError, aexc.GoogleAuthError) as e:
            # the file's content is wrong (e.g. a private key that is not a PEM key): bad input
            raise UsageError(f"clouddns: cannot use {label}: "
                                f"{printable(str(e))}") from None

    @property
    def mz(self) -> Any:
        if self._zone is None:
            from google.api_core import exceptions as gexc
            from google.cloud import dns as gdns

            options = {"api_endpoint": self.endpoint} if self.endpoint else None
            creds = self._credentials()
            try:
                client = gdns.Client(project=self.project, credentials=creds,
                                     client_options=options)
            except (ValueError, TypeError, gexc.GoogleAPIError) as e:
                raise ProviderError(f"clouddns: cannot make a client: {printable(str(e))}") from None
            self._zone = client.zone(self.managed_zone, dns_name=self.zone)
        return self._zone

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as aexc

        try:
            return fn(*args)
        except ProviderError:
            raise
        except gexc.PreconditionFailed as e:
            raise StaleRead(f"clouddns: {self.zone} changed since it was read (HTTP 412: "
                            f"{e.message}); nothing was applied") from None
        except gexc.Conflict as e:
            raise StaleRead(f"clouddns: a record to create already exists in {self.zone} "
                            f"(HTTP 409: {e.message}); nothing was applied") from None
        except gexc.NotFound as e:
            raise ProviderError(f"clouddns: {what}: not found (project {self.project}, managed "
                                f"zone {self.managed_zone}): {e.message}") from None
        except (gexc.Unauthorized, gexc.Forbidden) as e:
            raise ProviderError(f"clouddns: {what}: permission denied ({e.code}: {e.message}); "
                                "check the credentials and their role on the project") from None
        except gexc.GoogleAPIError as e:
            raise ProviderError(f"clouddns: {what} failed: {e}") from None
        except aexc.GoogleAuthError as e:
            raise ProviderError(f"clouddns: {what}: credentials failed: {e}") from None
        except OSError as e:
            raise ProviderError(f"clouddns: {what}: cannot reach the API: {e}") from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise ProviderError(f"clouddns: {what}: a malformed answer ({type(e).__name__}: "
                                f"{printable(str(e)[:200])})") from None

    def _check_zone(self) -> None:
        """The managed zone has the declared visibility and, private, is visible to
        every declared network (one GET of the zone, before the first read)."""
        if self.want is None:
            return
        self._call("reading the managed zone", self.mz.reload)
        want, self.want = self.want, None
        # the library keeps the whole resource but has no accessor for these two fields
        props: dict[str, Any] = self.mz._properties
        nets = (props.get("privateVisibilityConfig") or {}).get("networks") or []
        found = Found(self.managed_zone, props.get("visibility") == "private",
                      frozenset(printable(network_label(str(n.get("networkUrl", "")), self.project))
                                for n in nets))
        try:
            choose(self.zone, want, [found], kind="managed zone", by_id=True)
        except LookupError as e:  # one zone named by id: found, or a mismatch
            raise ProviderError(f"clouddns: {e.args[0]}") from None

    # --- read -----------------------------------------------------------------------
    def list_rrsets(self) -> list[RRset]:
        self._check_zone()

        def read() -> list[RRset]:
            out = []
            for i, r in enumerate(self.mz.list_resource_record_sets()):
                if i >= MAX_RRSETS:  # a server paging without end
                    raise ValueError(f"more than {MAX_RRSETS} RRsets")
                out.append(rrset(str(r.name), str(r.record_type), int(r.ttl),
                                 [str(v) for v in r.rrdatas]))
            return out

        return sorted(self._call("listing records", read))

    def get_rrset(self, name: str, rtype: str) -> RRset | None:
        return next((rr for rr in self.list_rrsets() if rr.key == (name.lower(), rtype)), None)

    # --- write ----------------------------------------------------------------------
    def change(self, changes: ChangeSet) -> Any:
        """The Cloud DNS change of `changes` (not sent)."""
        ch = self.mz.changes()
        for rr in changes.deletions:
            ch.delete_record_set(self.mz.resource_record_set(rr.name, rr.type, rr.ttl, list(rr.values)))
        for rr in changes.additions:
            ch.add_record_set(self.mz.resource_record_set(rr.name, rr.type, rr.ttl, list(rr.values)))
        return ch

    def apply(self, changes: ChangeSet) -> str:
        ch = self.change(changes)
        self._call("creating the change", ch.create)
        self._change = ch
        return str(ch.name)

    def wait(self, changes: ChangeSet, token: str, timeout: float) -> None:
        ch = getattr(self, "_change", None)
        if ch is None or str(ch.name) != token:
            ch = self.mz.changes()
            ch.name = token
        deadline = time.monotonic() + timeout
        delay = self.poll_interval
        while ch.status != "done":
            if time.monotonic() >= deadline:
                raise ProviderError(f"clouddns: change {token} still {ch.status} after {timeout:g} s")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
            self._call("polling the change", ch.reload)

    def nameservers(self) -> list[tuple[str, str | None]]:
        if self.want is not None:
            self._check_zone()  # reads the zone too
        else:
            self._call("reading the managed zone", self.mz.reload)
        return [(n.lower().rstrip(".") + ".", None) for n in (self.mz.name_servers or [])]
