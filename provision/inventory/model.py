"""The validated inventory as immutable typed data (pure). Everything downstream reads this."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import field
from typing import TYPE_CHECKING, Literal

from provision.dnsdata.names import canonical
from provision.dnsdata.visibility import Visibility
from provision.frozen import frozen

from .acme import Acme
from .apt_policy import PackagePin, Updates
from .culling import Culling
from .programs import Program, program
from .python_envs import PythonEnv

if TYPE_CHECKING:
    from provision.dnsdata.provider_settings import ProviderSettings
    from provision.secretdata.vault import Vault


@frozen
class SecretUse:
    """A secret a service gets: as the environment variable `env`, or as the file `file`
    of its $CREDENTIALS_DIRECTORY (docs/secrets.md)."""

    secret: str
    env: str | None = None
    file: str | None = None


@frozen
class Expose:
    """How a service is reached: through a tunnel only, not at all, or publicly from sources."""

    kind: Literal["tunnel", "none", "public"]
    sources: tuple[str, ...] = ()


@frozen
class Rate:
    """N requests per `seconds` (1 or 60)."""

    count: int
    seconds: int


@frozen
class Limits:
    """The door's limits (docs/door.md#limits)."""

    per_key: Rate
    per_address: Rate
    burst: int | None  # None: each rate's own count (its window is then its period)
    connections: int  # open at once per source address


@frozen
class ApiKey:
    client: str
    digest: str  # the SHA-256 of the key, 64 lower-case hex digits


@frozen
class Https:
    """A service's front door: TLS on `port` for `name`, keys and limits (provision.door)."""

    name: str  # an FQDN, lower case, no trailing dot
    zone: str  # the inventory's zone that holds it
    port: int
    keys: tuple[ApiKey, ...]
    limits: Limits


@frozen
class Service:
    name: str
    port: int
    bind: str
    expose: Expose
    command: str | None
    user: str
    logdir: str | None = None
    notebook_dir: str | None = None
    venv: str | None = None  # the virtualenv directory; a python env's content-addressed one
    restart: bool = True
    scheme: str = "http"
    # per-user servers (`per_user:`): one Service per member, named TEMPLATE@MEMBER, run by
    # the template unit provision-TEMPLATE@.service as the member (`user` is the member)
    member: str | None = None
    template: str | None = None
    gpus: tuple[int, ...] | None = None  # CUDA_VISIBLE_DEVICES; None: every GPU
    memory_max: str | None = None  # systemd MemoryMax=
    group: str | None = None  # the group that writes `logdir` (2770, setgid)
    local_port: int | None = None  # the tunnel's local port when not the remote one
    env: str | None = None  # the python env (python_envs) `venv` is, when it is one
    own_account: bool = False  # `user` is the service's own account, made by provision (svc-NAME)
    socket: str | None = None  # a member's server: the Unix socket it listens on (else `port`)
    private_tmp: bool = True  # systemd PrivateTmp=: a /tmp of its own
    https: Https | None = None  # served through the door (provision.door)
    plain_http: str | None = None  # why a public service has no door (the opt-out's reason)
    environment: tuple[tuple[str, str], ...] = ()  # plain values, written into the unit
    secrets: tuple[SecretUse, ...] = ()  # delivered root-only, never in the unit
    culling: Culling | None = None  # a Jupyter server's idle kernels (inventory/culling.py)

    @property
    def public_port(self) -> int:
        """The port the world reaches it on: the door's when it has one."""
        return self.https.port if self.https else self.port

    @property
    def unit_name(self) -> str:
        return f"provision-{self.name}.service"

    @property
    def template_unit(self) -> str | None:
        """provision-TEMPLATE@.service for a member's server, else None."""
        return f"provision-{self.template}@.service" if self.template else None

    def visible_to(self, user: str | None) -> bool:
        """Whether `user`'s tunnel forwards this service: a member's server only theirs."""
        return self.member is None or self.member == user

    @property
    def program(self) -> Program | None:
        """jupyter or tensorboard when the command starts one (whatever the service's name)."""
        return program(self.command)

    @property
    def is_jupyter(self) -> bool:
        """Gets a rendered jupyter_server_config.py and, in `tunnel`, its token fetched."""
        return self.program == "jupyter"

    @property
    def runs_code(self) -> bool:
        """Executes code for whoever reaches it: never for the open internet."""
        return self.program is not None

    @property
    def is_wildcard(self) -> bool:
        return ipaddress.ip_address(self.bind).is_unspecified

    @property
    def is_loopback(self) -> bool:
        return ipaddress.ip_address(self.bind).is_loopback


@frozen
class Person:
    name: str
    keys: tuple[str, ...]
    sudo: bool
    shell: str
    identity_file: str | None = None


@frozen
class AptSource:
    """A third-party apt repository (`apt_sources`), signed by a key pinned by fingerprint."""

    name: str
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    key: str  # ASCII-armored
    fingerprint: str  # 40 upper-case hex digits


@frozen
class Instance:
    """The EC2 instance a machine is: by id, else found by its private address."""

    id: str | None
    private_address: str | None  # None when `id` is given
    keep_groups: tuple[str, ...] = ()  # ids of groups made elsewhere that stay attached


@frozen
class Host:
    """A machine we reach over SSH: a bastion or a managed host."""

    name: str
    address: str
    user: str
    port: int
    identity_file: str | None
    jump_chain: tuple[str, ...]  # bastion names, outermost first
    is_bastion: bool = False
    roles: tuple[str, ...] = ()
    ssh_from: tuple[str, ...] = ()
    services: tuple[Service, ...] = ()
    packages: tuple[str, ...] = ()
    package_pins: tuple[PackagePin, ...] = ()  # the packages given a version or a hold
    updates: Updates = Updates()  # unattended-upgrades (provision.steps.updates)
    apt_sources: tuple[AptSource, ...] = ()
    egress: tuple[str, ...] = ()  # bastions: where their connections come from
    security_groups: tuple[str, ...] = ()  # aws.security_groups names (roles merged)
    instance: Instance | None = None  # the EC2 instance `sg apply` attaches the groups to
    python_envs: tuple[PythonEnv, ...] = ()  # declared for it (top level, roles, host) or used by its services
    ephemeral_ports: tuple[int, int] | None = None  # net.ipv4.ip_local_port_range (host's or its clusters')
    sysctl: tuple[tuple[str, str | None], ...] = ()  # over the kernel baseline (None: dropped)
    core_dumps: bool = False  # `kernel.core_dumps`: the baseline's core dump limits left off
    kernel_modules: tuple[str, ...] = ()  # `kernel.modules`: kept loadable
    sshd: tuple[tuple[str, str], ...] = ()  # the inventory's sshd options (keyword, value)
    public_address: str | None = None  # where the internet reaches it (NAT, elastic IP)

    def service(self, name: str) -> Service | None:
        return next((s for s in self.services if s.name == name), None)

    @property
    def tunnel_services(self) -> tuple[Service, ...]:
        return tuple(s for s in self.services if s.expose.kind == "tunnel")

    def tunnel_services_for(self, user: str | None) -> tuple[Service, ...]:
        """The tunnel services `user` reaches: shared ones and their own per-user server."""
        return tuple(s for s in self.tunnel_services if s.visible_to(user))


@frozen
class IngressRule:
    """One declared security group rule (ingress, or egress when listed under `egress`).

    `protocol` is tcp, udp, icmp or all. Ports: tcp/udp a range (`from_port == to_port`
    for one port); icmp and all carry -1/-1 (every ICMP type, every port).
    `sources` are CIDRs or names of groups declared in the inventory (the peers: sources
    for ingress, destinations for egress).
    """

    protocol: str
    from_port: int
    to_port: int
    sources: tuple[str, ...]  # CIDRs or security group names
    description: str = ""

    def admits_tcp(self, port: int) -> bool:
        """Whether this rule lets TCP traffic to `port` through."""
        if self.protocol == "all":
            return True
        return self.protocol == "tcp" and self.from_port <= port <= self.to_port


@frozen
class SecurityGroup:
    name: str
    vpc: str | None  # None only for an existing group named by `id`
    description: str
    ingress: tuple[IngressRule, ...]
    id: str | None = None  # an existing group created elsewhere
    egress: tuple[IngressRule, ...] | None = None  # None: leave the AWS default alone


@frozen
class Aws:
    region: str
    endpoint_url: str | None
    security_groups: tuple[SecurityGroup, ...]


@frozen
class Record:
    name: str  # relative to the zone, '@' for the apex
    type: Literal["A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA"]
    values: tuple[str, ...]  # TXT, MX, SRV, CAA: canonical presentation (provision.dnsdata.rdata)
    ttl: int
    host: str | None = None  # generated from this host's address (the zone's `from_hosts`)

    def fqdn(self, zone: str) -> str:
        return canonical(self.name, zone).rstrip(".")  # the one normalisation (dns plan's)


@frozen
class Zone:
    name: str
    provider: str  # a name in provision.dns.providers.PROVIDERS
    records: tuple[Record, ...]
    settings: ProviderSettings  # the provider's own fields (its module's `Settings`)
    cutover_above_ttl: int = 300
    closed_migration_days: int = 7
    visibility: Visibility = "public"  # private: only the provider's listed networks see it


@frozen
class Dns:
    resolvers: tuple[str, ...]
    zones: tuple[Zone, ...]
    owner: str | None = None  # the owner id in ownership markers (provision.dnsdata.owner)


# Words a host selection reads as more than a name (`Inventory.select`, playbooks'
# `hosts:`, `provision exec`, the Fabric API); refused as host, bastion and role names.
SELECTOR_WORDS = ("all", "bastions")
SELECTOR_PREFIX = "role:"
CLUSTER_PREFIX = "cluster:"


@frozen
class Cluster:
    """Hosts that train together (`clusters:`): open to each other, to nobody else."""

    name: str
    members: tuple[str, ...]  # host names in rank order (NODE_RANK)
    addresses: tuple[tuple[str, tuple[str, ...]], ...]  # member -> its training addresses
    protocols: tuple[str, ...]  # tcp, udp
    ports: tuple[tuple[int, int], ...]  # inclusive ranges; () = every port
    rendezvous: int
    master: str
    family: Literal[4, 6]
    ephemeral_ports: tuple[int, int] | None = None
    efa: bool = False
    security_group: str | None = None
    placement_group: str | None = None

    def addresses_of(self, member: str) -> tuple[str, ...]:
        return dict(self.addresses)[member]

    def address_of(self, member: str) -> str:
        """A member's first training address of the cluster's family."""
        return next(a for a in self.addresses_of(member)
                    if ipaddress.ip_address(a).version == self.family)

    def master_address(self) -> str:
        """MASTER_ADDR."""
        return self.address_of(self.master)

    def rank(self, member: str) -> int:
        return self.members.index(member)


@frozen
class Inventory:
    source: str
    default_user: str
    default_port: int
    identity_file: str | None
    known_hosts: str | None
    confirm_timeout: int
    team: tuple[Person, ...]
    bastions: tuple[Host, ...]
    hosts: tuple[Host, ...]
    aws: Aws | None = None
    dns: Dns | None = None
    clusters: tuple[Cluster, ...] = ()
    apt_lock_timeout: int = 300
    login_banner: str | None = None  # /etc/issue and /etc/issue.net (provision.steps.banner)
    umask: str | None = None  # the team's logins (provision.steps.login)
    root_shell_timeout: int | None = None  # TMOUT for root's login shells (provision.steps.login)
    acme: Acme | None = None  # the ACME CA (provision.inventory.acme)
    # the inventory's own directory tree, real path ("" for text not from a file): where
    # the key files it names may be (provision.dnsdata.secrets)
    tree: str = field(default="", compare=False)
    secrets: tuple[tuple[str, str], ...] = ()  # name -> armored age ciphertext
    recipients: tuple[tuple[str, str], ...] = ()  # label -> extra public key
    # the secrets decrypted for one plan or apply (None in check, render and the rest)
    vault: Vault | None = field(default=None, compare=False, repr=False)
    # where each field path was defined, for findings that point at the file
    positions: dict[str, tuple[str, int, int]] = field(default_factory=dict, compare=False, hash=False)

    @functools.cached_property
    def _nodes(self) -> dict[str, Host]:
        return {h.name: h for h in (*self.hosts, *self.bastions)}

    def node(self, name: str) -> Host:
        """A bastion or host by name (KeyError when there is none)."""
        return self._nodes[name]

    def cluster(self, name: str) -> Cluster | None:
        return next((c for c in self.clusters if c.name == name), None)

    def clusters_of(self, host: str) -> tuple[Cluster, ...]:
        """The clusters `host` is a member of."""
        return tuple(c for c in self.clusters if host in c.members)

    def chain(self, host: Host) -> tuple[Host, ...]:
        """The bastions to pass through to reach `host`, outermost first."""
        return tuple(self.node(n) for n in host.jump_chain)

    def select(self, patterns: list[str] | tuple[str, ...]) -> tuple[Host, ...]:
        """Hosts by name, `all` (every host), `bastions` (every bastion), `role:NAME` or
        `cluster:NAME` (its members, in rank order).
        Empty selection means all hosts."""
        if not patterns:
            return self.hosts
        out: list[Host] = []
        for pat in patterns:
            if pat == "all":
                matched = list(self.hosts)
            elif pat == "bastions":
                matched = list(self.bastions)
            elif pat.startswith(SELECTOR_PREFIX):
                matched = [h for h in self.hosts if pat[len(SELECTOR_PREFIX):] in h.roles]
            elif pat.startswith(CLUSTER_PREFIX):
                c = self.cluster(pat[len(CLUSTER_PREFIX):])
                matched = [self.node(n) for n in c.members] if c else []
            else:
                matched = [h for h in (*self.hosts, *self.bastions) if h.name == pat]
            if not matched:
                raise KeyError(pat)
            out.extend(h for h in matched if h not in out)
        return tuple(out)
