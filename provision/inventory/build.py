"""From a positioned YAML document to the immutable model: schema, roles, catalog, cross-checks.

Pure: plain data and positions in, an Inventory or an InventoryError out. The sections are
resolved in `provision.inventory.resolve`, each reporting through the one `Context.fail`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from provision.dnsdata import providers
from provision.dnsdata.secrets import placement_problem
from provision.secretdata.check import inventory_problems

from . import acme as acme_section
from . import clusters as cl
from . import model as m
from . import salvage
from . import sshd_options as sshd
from .errors import InventoryError, Problem
from .resolve.accounts import Accounts
from .resolve.cloud import Cloud
from .resolve.context import Context, Section
from .resolve.envs import Envs
from .resolve.hosts import Hosts
from .resolve.schema_errors import clean_loc, model_at, problems_from_pydantic
from .resolve.services import Services
from .resolve.zones import Zones
from .schema import InventoryDoc, inventory_doc
from .source import SourceDoc, dotted


def build(doc: SourceDoc) -> m.Inventory:
    """Validate `doc` and return the model, or raise InventoryError listing every problem."""
    schema = inventory_doc(_named_providers(doc.data))
    try:
        parsed = schema.model_validate(doc.data)
    except ValidationError as e:
        raise InventoryError([*problems_from_pydantic(e, doc, schema),
                              *_beyond_schema(e, doc, schema)]) from None
    return _Resolver(parsed, doc).resolve()


def _beyond_schema(e: ValidationError, doc: SourceDoc, schema: type[InventoryDoc]) -> list[Problem]:
    """The cross-checks' problems in what the schema accepted (provision.inventory.salvage):
    every problem in one run, not one section's after another's."""
    def located(err: ValidationError, data: Any) -> list[salvage.SchemaError]:
        out = []
        for x in err.errors():
            path, is_key = clean_loc(x["loc"], data)
            out.append(salvage.SchemaError(path, x["type"], is_key))
        return out

    def validate(data: Any) -> list[salvage.SchemaError]:
        try:
            schema.model_validate(data)
        except ValidationError as again:
            return located(again, data)
        return []

    saved = salvage.salvage(doc.data, located(e, doc.data),
                            lambda path, data: model_at(path, schema, data), validate)
    if saved is None:
        return []
    try:
        _Resolver(schema.model_validate(saved.data), doc).resolve()
    except InventoryError as found:
        return [p for p in found.problems if salvage.kept(p.field, saved.shadowed)]
    return []


def _named_providers(data: Any) -> tuple[str, ...]:
    """The known providers the document's zones name (only their modules are loaded)."""
    dns = data.get("dns") if isinstance(data, dict) else None
    zones = dns.get("zones") if isinstance(dns, dict) else None
    named = [z.get("provider") for z in zones.values() if isinstance(z, dict)] \
        if isinstance(zones, dict) else []
    # a provider written as a list or mapping is the schema's error, not a crash here
    return tuple(sorted({p for p in named if isinstance(p, str) and p in providers.PROVIDERS}))


class _Resolver(Section):
    """The document's sections resolved in order, every problem collected in one run."""

    def __init__(self, doc: InventoryDoc, source: SourceDoc):
        super().__init__(Context(doc, source))
        self.envs = Envs(self.ctx)  # first: its problems come before the hosts'
        self.cloud = Cloud(self.ctx)
        self.services = Services(self.ctx, self.envs)
        self.hosts = Hosts(self.ctx, self.cloud, self.services, self.envs)
        self.accounts = Accounts(self.ctx)
        self.zones = Zones(self.ctx)

    def resolve(self) -> m.Inventory:
        d = self.doc
        clash = set(d.bastions) & set(d.hosts)
        for name in sorted(clash):
            self.fail(("hosts", name), f"'{name}' is both a bastion and a host; names must be unique")
        chains = {name: self.hosts.chain(("bastions", name), b) for name, b in d.bastions.items()}
        bastions = tuple(self.hosts.bastion(name, b, chains[name]) for name, b in d.bastions.items())
        hosts = tuple(self.hosts.host(name, h) for name, h in d.hosts.items())
        self.cloud.instances_have_groups(bastions, hosts)
        self.cloud.instances_claimed_once(bastions, hosts)
        self.accounts.reserved_team_names()
        self.accounts.selector_words()
        team = tuple(m.Person(name, tuple(p.keys), p.sudo, p.shell, p.identity_file)
                     for name, p in d.team.items())
        aws = self.cloud.resolve()
        clusters, hosts = cl.resolve(d.clusters, hosts, set(d.bastions),
                                     set(d.aws.security_groups) if d.aws else set(), self.fail,
                                     aws=d.aws is not None)
        for where, message in sshd.access_problems(
                (*bastions, *hosts), lambda n, k: sshd.merged(self.hosts.sshd_layers(n))[1][k]):
            self.fail(where, message)
        dns = self.zones.resolve()
        acme = self._acme()
        for where, message in inventory_problems(d.secrets, [(p.name, p.keys) for p in team],
                                                 d.recipients):
            self.fail(where, message)
        if self.ctx.problems:
            raise InventoryError(self.ctx.problems)
        positions = {dotted(k): (v.file, v.line, v.column) for k, v in self.source.positions.items()}
        return m.Inventory(
            source=",".join(self.source.files),
            default_user=d.defaults.user, default_port=d.defaults.port,
            identity_file=d.defaults.identity_file, known_hosts=d.defaults.known_hosts,
            confirm_timeout=d.defaults.confirm_timeout,
            apt_lock_timeout=d.defaults.apt_lock_timeout, login_banner=d.defaults.login_banner,
            umask=d.defaults.umask, root_shell_timeout=d.defaults.root_shell_timeout,
            team=team, bastions=bastions, hosts=hosts, aws=aws, dns=dns, clusters=clusters,
            positions=positions, tree=self.source.tree, acme=acme, secrets=tuple(d.secrets.items()),
            recipients=tuple(d.recipients.items()))

    def _acme(self) -> acme_section.Acme | None:
        if self.doc.acme is None:
            return None
        acme, problems = acme_section.resolve(
            self.doc.acme, lambda p, v: self.ctx.local_path(("acme", *p), v) or v,
            lambda path: placement_problem(path, self.source.tree), list(self.doc.secrets))
        for path, why in problems:
            self.fail(("acme", *path), why)
        return acme

