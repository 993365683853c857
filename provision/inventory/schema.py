"""The inventory file format as pydantic models: validation and the JSON Schema.

These mirror the YAML exactly (before roles and catalog defaults are applied); the
model in `model.py` is what the rest of the program uses.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Union, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    create_model,
    model_validator,
)

from provision.dnsdata import providers
from provision.dnsdata.visibility import Visibility
from provision.secretdata.fields import (
    Armored,
    EnvValue,
    EnvVar,
    RecipientKey,
    SecretName,
    SecretTarget,
)
from provision.text import printable, unsafe

from .acme import AcmeDoc
from .apt import AptUri, ArmoredKey, Components, Fingerprint, Suites
from .apt_policy_doc import PackageEntry, UpdatesDoc
from .cluster_doc import ClusterDoc, Ephemeral
from .culling import CullingDoc
from .fields import (
    IP,
    AbsPath,
    Address,
    Cidr,
    Command,
    DataDir,
    FilePath,
    KnownHostsPath,
    Name,
    NodeName,
    Port,
    PublicKey,
    RecordName,
    Seconds,
    Target,
    Ttl,
    Url,
    User,
    ZoneName,
)
from .https import HttpsDoc, Reason
from .kernel_doc import SYSCTL_DESCRIPTION, KernelDoc, Sysctl
from .login import DEFAULT as DEFAULT_BANNER
from .login import ROOT_SHELL_TIMEOUT, UMASK_DEFAULT, Banner, Umask
from .public_address import DESCRIPTION as PUBLIC_ADDRESS
from .public_address import PublicAddress
from .python_envs import EnvName, IndexUrl, PipRequirement, PythonCommand, Venv
from .sshd_options import BastionSshdDoc, SshdDoc


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DefaultsDoc(Strict):
    user: User = "root"
    port: Port = 22
    identity_file: FilePath | None = None
    known_hosts: KnownHostsPath | None = Field(
        None, description="known_hosts file used to verify host keys (default ~/.ssh/known_hosts)")
    confirm_timeout: Seconds = Field(
        30, description="seconds a firewall/sshd change waits for confirmation before the host rolls back")
    apt_lock_timeout: Seconds = Field(
        300, description="seconds the packages step waits for the dpkg lock (held by "
                         "unattended-upgrades or cloud-init on a fresh image) before it fails")
    login_banner: Banner | None = Field(
        DEFAULT_BANNER, description="the notice in /etc/issue and /etc/issue.net (a legal "
                                    "warning by default; null leaves the host's own)")
    umask: Umask | None = Field(
        UMASK_DEFAULT, description="the session umask of regular accounts' logins (uid >= 1000: "
                                   "the team), through pam_umask and login.defs UMASK; null "
                                   "leaves the host's own")
    root_shell_timeout: Annotated[StrictInt, Field(ge=60, le=86400)] | None = Field(
        ROOT_SHELL_TIMEOUT, description="seconds an idle root prompt stays open (TMOUT, root "
                                        "only; null: none)")


class PersonDoc(Strict):
    keys: list[PublicKey] = Field(min_length=1)
    sudo: StrictBool = False
    shell: AbsPath = "/bin/bash"
    identity_file: FilePath | None = Field(None, description="this person's private key on their own machine")


class ExposeFrom(Strict):
    from_: list[Cidr] = Field(alias="from", min_length=1)


Expose = Literal["tunnel", "none"] | ExposeFrom


# --- per-user Jupyter and team data directories (issue 24, items 2 and 3) ---------------

# systemd MemoryMax=: bytes with an optional K/M/G/T suffix, or a percentage of RAM
MemoryMax = Annotated[StrictStr, Field(pattern=r"^([1-9][0-9]{0,15}[KMGT]?|[1-9][0-9]?%|100%)$")]
GpuIndex = Annotated[StrictInt, Field(ge=0, le=63)]


_MEMORY_WORDS = ("systemd's MemoryMax: a number of bytes with an optional K, M, G or T "
                 "(no space), e.g. 32G, or a share of the RAM, e.g. 25%")


class MemberServiceDoc(Strict):
    """One team member's own instance of a per-user service."""

    pattern_words: ClassVar[Mapping[str, str]] = {"memory_max": _MEMORY_WORDS}

    port: Port | None = Field(
        None, description="pin this member's port on the host (default: derived from the "
                          "name inside per_user_ports; pin one when two names collide)")
    gpus: Annotated[list[GpuIndex], Field(max_length=64)] | None = Field(
        None, description="GPU indices (as `nvidia-smi -L` numbers them) this member's server "
                          "sees, as CUDA_VISIBLE_DEVICES; [] hides every GPU (default: all)")
    memory_max: MemoryMax | None = Field(
        None, description="systemd MemoryMax= of this member's server (e.g. 32G, 25%); "
                          "default: the service's memory_max")


def _per_user_form(value: Any) -> str:
    # tags are capitalised: error locations drop them like other union branch names
    return "List" if isinstance(value, list) else "Map" if isinstance(value, dict) else "Bool"


# true (every member), a list of members, or member -> options; the discriminator keeps
# errors to the form the YAML is written in
PerUser = Annotated[
    Annotated[StrictBool, Tag("Bool")]
    | Annotated[list[User], Field(min_length=1), Tag("List")]
    | Annotated[dict[User, MemberServiceDoc | None], Tag("Map")],
    Discriminator(_per_user_form)]


class ServiceDoc(Strict):
    pattern_words: ClassVar[Mapping[str, str]] = {"memory_max": _MEMORY_WORDS}

    per_user: PerUser | None = Field(
        None, description="one server per team member (Jupyter only): true for every member "
                          "of `team`, a list of members, or member -> {port, gpus, memory_max}. "
                          "Each runs as that member from their home, on its own 127.0.0.1 port, "
                          "with its own token kept in their home (unit provision-NAME@MEMBER)")
    per_user_ports: Annotated[list[Port], Field(min_length=2, max_length=2)] | None = Field(
        None, description="[low, high]: the host ports per-user servers get, each derived from "
                          "the member's name (default [20000, 29999])")
    per_user_socket: StrictBool | None = Field(
        None, description="per_user servers listen on a Unix socket in a directory of the "
                          "member's own, forwarded over their own SSH login (default true); "
                          "false: on a port of the host's loopback, which any account can take "
                          "while the server is down (the tunnel then checks who listens)")
    memory_max: MemoryMax | None = Field(
        None, description="systemd MemoryMax= (e.g. 32G, 25%); for per_user, every member's "
                          "server (a member's own memory_max wins)")
    group: User | None = Field(
        None, description="a group that may write the service's logdir (TensorBoard's runs): "
                          "created on the host with every team member in it; the directory "
                          "becomes 2770 (setgid: new runs belong to the group; others see nothing)")
    port: Port | None = None
    bind: IP | None = None
    expose: Expose | None = None
    command: Command | None = None
    user: User | None = Field(
        None, description="the account it runs as; default its own, svc-NAME, a system account "
                          "provision creates (never a login user of the inventory: they have "
                          "passwordless sudo)")
    private_tmp: StrictBool | None = Field(
        None, description="a /tmp of its own (systemd PrivateTmp=; default true): a file another "
                          "account plants in the shared /tmp cannot redirect what it writes there")
    logdir: DataDir | None = None
    notebook_dir: DataDir | None = None
    culling: CullingDoc | None = Field(
        None, description="Jupyter only: when idle kernels are shut down, freeing the GPU "
                          "memory they hold (default: after an hour idle, connected or not)")
    venv: Venv | None = Field(
        None, description="the python env (a name in python_envs) or the virtualenv (an absolute "
                          "path) whose bin/ holds the service's program; jupyter and tensorboard "
                          "default to the envs jupyterlab and tensorboard")
    restart: StrictBool = True
    https: HttpsDoc | None = Field(
        None, description="serve it through the door: TLS for `name` on `port` (443), API keys "
                          "and rate limits; the service binds 127.0.0.1 behind it (docs/door.md)")
    plain_http: Reason | None = Field(
        None, description="why this public service is served as plain HTTP without the door "
                          "(the opt-out `check` asks for; e.g. a public mirror of open data)")
    environment: dict[EnvVar, EnvValue] = Field(
        default_factory=dict, description="plain environment variables (NAME -> value) written "
                                          "into the unit: nothing secret (see `secrets`)")
    secrets: dict[SecretName, SecretTarget] = Field(
        default_factory=dict, description="secrets (names in the top-level `secrets`) this "
        "service gets: secret -> ENV_VAR, or -> {file: NAME} (a file of $CREDENTIALS_DIRECTORY); "
        "kept root-only on the host, never in the unit (docs/secrets.md)")


ViaDoc = Name | Annotated[list[Name], Field(min_length=1)]


# --- python_envs (provision.inventory.python_envs) ------------------------------------
class PythonEnvDoc(Strict):
    """A Python virtual environment built on the host under /opt/provision/envs/NAME."""

    packages: Annotated[list[PipRequirement], Field(min_length=1)] = Field(
        description="requirements, pinned or ranges (jupyterlab>=4.2, tensorboard==2.17.*)")
    python: PythonCommand | None = Field(
        None, description="the interpreter that creates it: python3 (default, the OS's), "
                          "python3.N or an absolute path")
    index_url: IndexUrl | None = Field(
        None, description="the package index (default https://pypi.org/simple): https://, or "
                          "http:// only to a loopback or private IP address")
    extra_index_urls: list[IndexUrl] = Field(default_factory=list, description="further indexes")


PythonEnvs = dict[EnvName, PythonEnvDoc]
_ENVS_DESCRIPTION = ("python environments (name -> requirements); one name has one "
                     "requirement set across the inventory")
# --------------------------------------------------------------------------------------


InstanceId = Annotated[StrictStr, Field(pattern=r"^i-[0-9a-f]{8,17}$")]
GroupId = Annotated[StrictStr, Field(pattern=r"^sg-[0-9a-f]{8,17}$")]


class InstanceDoc(Strict):
    """The EC2 instance a machine is: `sg apply` attaches its security_groups to it."""

    instance_id: InstanceId | None = Field(
        None, description="the instance (default: found by private_address in the VPC of its groups)")
    private_address: IP | None = Field(
        None, description="the instance's private IPv4 address, when no instance_id is given "
                          "(default: the machine's address)")
    keep_groups: list[GroupId] = Field(
        default_factory=list, description="ids of groups made elsewhere that stay attached "
                                          "to the instance beside the declared ones")


_SSHD_DESCRIPTION = ("sshd options that are the team's choice (AllowTcpForwarding, MaxSessions, "
                     "ClientAlive*, AllowUsers, ...); a host's win over its roles' "
                     "(docs/hardening.md#sshd-options-per-host-and-role)")


class BastionDoc(Strict):
    address: Address
    public_address: PublicAddress | None = Field(None, description=PUBLIC_ADDRESS)
    user: User | None = None
    port: Port | None = None
    identity_file: FilePath | None = None
    via: ViaDoc | None = None
    allow_ssh_from: list[Cidr] = Field(default_factory=list)
    egress: list[Cidr] = Field(
        default_factory=list,
        description="addresses this bastion's connections come from on the hosts' side "
                    "(default: its address when that is an IP)")
    security_groups: list[Name] = Field(
        default_factory=list, description="names of aws.security_groups this machine sits in")
    aws: InstanceDoc | None = Field(
        None, description="the EC2 instance this machine is; `sg apply` attaches its groups")
    sshd: BastionSshdDoc | None = Field(None, description=_SSHD_DESCRIPTION)


class AptSourceDoc(Strict):
    """A third-party apt repository, written as a deb822 `.sources` file."""

    uri: AptUri = Field(description="the repository's base URL (http:// or https://)")
    suites: Suites = Field(description="suites (jammy, stable, ...), or '/' for a flat repository")
    components: Components = Field(
        default_factory=list, description="components (main, ...); none for a flat repository")
    key: ArmoredKey = Field(
        description="the signing key: an ASCII-armored public key block (`gpg --armor --export`), "
                    "installed as /etc/apt/keyrings/provision-NAME.asc and named by Signed-By")
    fingerprint: Fingerprint = Field(
        description="the key's primary fingerprint (40 hex digits); a key that does not match "
                    "is refused on the host before it is installed")

    @model_validator(mode="after")
    def flat_or_components(self) -> AptSourceDoc:
        flat = [s for s in self.suites if s.endswith("/")]
        if flat and self.components:
            raise ValueError(f"suite '{flat[0]}' names a flat repository (it ends with '/'), "
                             "which has no components; remove 'components'")
        if not flat and not self.components:
            raise ValueError("give 'components' (e.g. [main]), or a suite ending with '/' for "
                             "a flat repository")
        if flat and len(self.suites) > 1:
            raise ValueError("a flat repository (suite ending with '/') takes exactly one suite")
        return self


_PACKAGES_DESCRIPTION = ("apt packages: a name, or {name, version, hold} (version a Debian "
                         "version or glob, pinned; hold: apt-mark hold)")
_UPDATES_DESCRIPTION = ("unattended security upgrades: {security, never, reboot} "
                        "(docs/updates.md)")


class HostDoc(Strict):
    address: Address
    public_address: PublicAddress | None = Field(None, description=PUBLIC_ADDRESS)
    user: User | None = None
    port: Port | None = None
    identity_file: FilePath | None = None
    via: ViaDoc | None = None
    roles: list[Name] = Field(default_factory=list)
    ssh_from: list[Cidr] = Field(default_factory=list)
    services: dict[Name, ServiceDoc | None] = Field(default_factory=dict)
    packages: list[PackageEntry] = Field(default_factory=list, description=_PACKAGES_DESCRIPTION)
    updates: UpdatesDoc | None = Field(None, description=_UPDATES_DESCRIPTION)
    apt_sources: dict[Name, AptSourceDoc] = Field(
        default_factory=dict, description="apt repositories (name -> source), merged over the roles'")
    python_envs: PythonEnvs = Field(default_factory=dict, description=_ENVS_DESCRIPTION)
    security_groups: list[Name] = Field(
        default_factory=list, description="names of aws.security_groups this machine sits in")
    aws: InstanceDoc | None = Field(
        None, description="the EC2 instance this machine is; `sg apply` attaches its groups")
    ephemeral_ports: Ephemeral | None = Field(
        None, description="[low, high]: the kernel's net.ipv4.ip_local_port_range here "
                          "(default: its clusters', else the kernel's own)")
    sysctl: Sysctl = Field(default_factory=dict, description=SYSCTL_DESCRIPTION)
    kernel: KernelDoc | None = Field(None, description="core dumps and modules kept from the baseline")
    sshd: SshdDoc | None = Field(None, description=_SSHD_DESCRIPTION)


class RoleDoc(Strict):
    services: dict[Name, ServiceDoc | None] = Field(default_factory=dict)
    packages: list[PackageEntry] = Field(default_factory=list, description=_PACKAGES_DESCRIPTION)
    updates: UpdatesDoc | None = Field(None, description=_UPDATES_DESCRIPTION)
    apt_sources: dict[Name, AptSourceDoc] = Field(
        default_factory=dict, description="apt repositories (name -> source) of hosts in this role")
    python_envs: PythonEnvs = Field(default_factory=dict, description=_ENVS_DESCRIPTION)
    ssh_from: list[Cidr] = Field(default_factory=list)
    security_groups: list[Name] = Field(
        default_factory=list, description="names of aws.security_groups this machine sits in")
    sysctl: Sysctl = Field(default_factory=dict, description=SYSCTL_DESCRIPTION)
    kernel: KernelDoc | None = Field(None, description="core dumps and modules kept from the baseline")
    sshd: SshdDoc | None = Field(None, description=_SSHD_DESCRIPTION)


_AWS_TEXT = r"^[A-Za-z0-9 ._\-:/()#,@+=&;\[\]{}!$*]*$"
Description = Annotated[StrictStr, Field(max_length=255, pattern=_AWS_TEXT)]
Protocol = Literal["tcp", "udp", "icmp", "all"]


class _RuleDoc(Strict):
    protocol: Protocol = Field(
        "tcp", description="tcp or udp (need port or ports); icmp (every ICMP type; ICMPv6 for "
                           "IPv6 sources) and all (every protocol and port) take no port")
    port: Port | None = None
    ports: Annotated[list[Port], Field(min_length=2, max_length=2)] | None = Field(
        None, description="[from, to] port range")
    description: Description = ""

    @model_validator(mode="after")
    def one_of_port_or_ports(self) -> _RuleDoc:
        if self.protocol in ("icmp", "all"):
            if self.port is not None or self.ports is not None:
                raise ValueError(f"protocol '{self.protocol}' covers every "
                                 f"{'ICMP type' if self.protocol == 'icmp' else 'port'}; "
                                 "omit 'port' and 'ports'")
            return self
        if (self.port is None) == (self.ports is None):
            raise ValueError("give exactly one of 'port' or 'ports: [from, to]'")
        if self.ports and self.ports[0] > self.ports[1]:
            raise ValueError("'ports' range must be [low, high]")
        return self


class IngressDoc(_RuleDoc):
    from_: list[Cidr | Name] = Field(alias="from", min_length=1,
                                     description="IPv4/IPv6 CIDRs, or names of security groups declared here")


class EgressDoc(_RuleDoc):
    to: list[Cidr | Name] = Field(min_length=1,
                                  description="IPv4/IPv6 CIDRs, or names of security groups declared here")


class SecurityGroupDoc(Strict):
    id: GroupId | None = Field(
        None, description="an existing group created elsewhere (then 'vpc' is optional)")
    vpc: Annotated[StrictStr, Field(pattern=r"^vpc-[0-9a-f]{1,17}$")] | None = None
    description: Description = "managed by provision"
    ingress: list[IngressDoc] = Field(default_factory=list)
    egress: list[EgressDoc] | None = Field(
        None, description="outbound rules; when absent the AWS default (all traffic out) is left alone")

    @model_validator(mode="after")
    def vpc_or_id(self) -> SecurityGroupDoc:
        if self.id is None and self.vpc is None:
            raise ValueError("give 'vpc' (a group provision creates) or 'id' (an existing group)")
        return self


class AwsDoc(Strict):
    region: Annotated[StrictStr, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")]
    endpoint_url: Url | None = Field(None, description="API endpoint override (e.g. a local moto server)")
    security_groups: dict[Name, SecurityGroupDoc] = Field(default_factory=dict)


# --- records of TXT, MX, SRV and CAA data, and records generated from the hosts ----------
# (kept together; what a value may hold is checked when the inventory is built, with
# dnspython, see provision.dnsdata.rdata.declared)

def _record_text(value: str) -> str:
    bad = unsafe(value)
    if bad:
        raise ValueError(f"a record value must not contain control, format or invisible "
                         f"characters, nor a newline (found {printable(bad)!r})")
    if not value.strip():
        raise ValueError("a record value must not be empty")
    return value


RecordText = Annotated[StrictStr, Field(max_length=16384), AfterValidator(_record_text)]
HostNameTemplate = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_.{}-]{1,200}$")]


class FromHostsDoc(Strict):
    """Records generated from the hosts' addresses (an A or AAAA record each)."""

    roles: list[Name] | None = Field(
        None, min_length=1, description="only the hosts with one of these roles (default: every host)")
    name: HostNameTemplate = Field(
        "{host}", description="the record's name, relative to the zone; '{host}' is the "
                              "host's name (e.g. '{host}.gpu'); it must appear once")
    ttl: Ttl = 300


def _bool_or_map(value: Any) -> str:
    # a mapping is checked as the mapping it is written as (its own key's error), never
    # reported first as "not a valid boolean"; tags are capitalised like per_user's
    return "Map" if isinstance(value, dict) else "Bool"


FromHosts = Annotated[
    Annotated[StrictBool, Tag("Bool")] | Annotated[FromHostsDoc, Tag("Map")],
    Discriminator(_bool_or_map), Field(
    description="give every host (or the hosts of `roles`) an A or AAAA record from its "
                "`address`: true for '<host>.<zone>' of every host, or {roles, name, ttl}")]


class RecordDoc(Strict):
    type: Literal["A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA"] = Field(
        description="A/AAAA take 'values' (IP addresses), CNAME 'value' (a host name); TXT "
                    "'values' of text (plain text is split into 255-octet strings; a value "
                    "starting with '\"' is zone-file quoted strings), MX 'PREFERENCE HOST', "
                    "SRV 'PRIORITY WEIGHT PORT TARGET', CAA 'FLAGS TAG \"VALUE\"'")
    values: list[IP | RecordText] | None = Field(None, min_length=1)
    value: Target | IP | None = None
    ttl: Ttl = 300


def _one_or_many(value: Any) -> str:
    # tags are capitalised: error locations drop them like other union branch names
    return "RecordList" if isinstance(value, list) else "Record"


# one record, or a list of records of different types at the same name (A and AAAA); the
# discriminator keeps errors to the branch the YAML is written in
RecordEntry = Annotated[
    Annotated[RecordDoc, Tag("Record")] | Annotated[list[RecordDoc], Field(min_length=1), Tag("RecordList")],
    Discriminator(_one_or_many)]


class ZoneDoc(Strict):
    """The fields every zone has. `provider` picks the rest: each provider's own fields
    (its `Settings`, see provision.dns.provider) are added to this in `zone_doc`."""

    # ZoneDoc, DnsDoc and InventoryDoc are only bases of the models `zone_doc` and
    # `inventory_doc` make: no validator of their own (built at import, ~5 ms of start-up)
    model_config = ConfigDict(defer_build=True)

    provider: StrictStr
    records: dict[RecordName, RecordEntry] = Field(
        default_factory=dict,
        description="name -> a record, or a list of records of different types (A and AAAA)")
    # dns migrate: a values change above this TTL is a cutover, left to `dns migrate run`
    cutover_above_ttl: Ttl = Field(300, description="a record whose TTL in the zone is above "
                                   "this moves by `provision dns migrate run`, not `dns apply`")
    closed_migration_days: Annotated[StrictInt, Field(ge=0, le=366)] = Field(
        7, description="how long a finished migration is remembered in the zone (dns apply "
        "refuses to put the old value back meanwhile); 0: not at all")
    visibility: Visibility = Field(
        "public", description="public: the internet sees the zone; private: only the networks "
        "the provider's field names (Route53 vpcs, Cloud DNS networks), verified through "
        "dns.resolvers inside them")
    from_hosts: FromHosts = False


@functools.cache
def zone_doc(provider: str) -> type[ZoneDoc]:
    """A zone of `provider`: the common fields and the provider's own."""
    bases: tuple[type[BaseModel], ...] = (ZoneDoc, providers.settings_model(provider))
    tag: Any = Literal[provider]  # a type made at run time
    model = create_model(f"Zone{provider.capitalize()}", __base__=bases,
                         provider=(tag, Field(description=f"provider {provider}")))
    return cast(type[ZoneDoc], model)


def _unknown_provider() -> type[BaseModel]:
    """A zone whose provider is in no table: only that is said (its other fields cannot
    be checked against a provider that does not exist)."""
    known: Any = Literal[providers.names()]  # a type made at run time
    return create_model("ZoneUnknownProvider", __config__=ConfigDict(extra="allow"),
                        provider=(known, ...))


def _zones(names: tuple[str, ...], validating: bool) -> Any:
    """dict of zone name -> the zone of its provider (a union tagged by `provider`; the
    tags have a space so that error locations drop them like other union branches).
    `validating`: with the branch that refuses an unknown provider (not in the JSON
    Schema, where every zone would match it too)."""
    def tag(value: Any) -> str:
        p = value.get("provider") if isinstance(value, dict) else getattr(value, "provider", None)
        return f"provider {p}" if isinstance(p, str) and p in names else "provider ?"

    branches: list[Any] = [Annotated[zone_doc(n), Tag(f"provider {n}")] for n in names]
    if validating:
        branches.append(Annotated[_unknown_provider(), Tag("provider ?")])
    union: Any = Union[tuple(branches)]  # noqa: UP007  (a union made at run time)
    return dict[ZoneName, Annotated[union, Discriminator(tag)]]


class DnsDoc(Strict):
    model_config = ConfigDict(defer_build=True)  # a base only, see ZoneDoc
    resolvers: list[IP] = Field(default_factory=list, description="resolvers checked for propagation")
    owner: StrictStr | None = Field(
        None, description="owner id written into ownership markers (one DNS label); default: "
        "the inventory's file name without .yml, or its directory's name")
    zones: dict[ZoneName, ZoneDoc] = Field(default_factory=dict)  # see `inventory_doc`


class InventoryDoc(Strict):
    """A provision inventory (version 1)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True,
                              title="provision inventory",
                              json_schema_extra={"$id": "https://provision.invalid/inventory-v1.json"})

    version: Literal[1]
    defaults: DefaultsDoc = Field(default_factory=DefaultsDoc)
    team: dict[User, PersonDoc] = Field(default_factory=dict)
    bastions: dict[NodeName, BastionDoc] = Field(default_factory=dict)
    hosts: dict[NodeName, HostDoc] = Field(default_factory=dict)
    roles: dict[Name, RoleDoc] = Field(default_factory=dict)
    python_envs: PythonEnvs = Field(default_factory=dict,
                                    description=_ENVS_DESCRIPTION + ", built on every host")
    clusters: dict[Name, ClusterDoc] = Field(
        default_factory=dict, description="hosts that train together (NCCL, Gloo): open to "
                                          "each other on their addresses, to nobody else")
    aws: AwsDoc | None = None
    dns: DnsDoc | None = None
    acme: AcmeDoc | None = Field(None, description="the ACME CA that issues certificates "
                                 "(DNS-01 through the inventory's zones)")
    secrets: dict[SecretName, Armored] = Field(
        default_factory=dict, description="secret name -> its value encrypted with age to the "
        "team's SSH keys and `recipients`, ASCII-armored (`provision secrets set NAME`)")
    recipients: dict[SecretName, RecipientKey] = Field(
        default_factory=dict, description="further keys every secret is encrypted to (a deploy "
        "key, CI, a member's age1 key): label -> ssh-ed25519, ssh-rsa or age1... public key")


@functools.cache
def inventory_doc(names: tuple[str, ...], validating: bool = True) -> type[InventoryDoc]:
    """The inventory schema whose zones may use the providers `names` (sorted): only the
    modules of those are imported (an inventory without a Cloud DNS zone never loads its
    code); `json_schema` describes every provider."""
    dns = create_model("DnsDoc", __base__=DnsDoc,
                       zones=(_zones(names, validating), Field(default_factory=dict)))
    return create_model("InventoryDoc", __base__=InventoryDoc, dns=(dns | None, None))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the inventory, every provider's zone fields included."""
    return inventory_doc(providers.names(), validating=False).model_json_schema(by_alias=True)
