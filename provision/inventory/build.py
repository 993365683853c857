"""From a positioned YAML document to the immutable model: schema, roles, catalog, cross-checks.

Pure: plain data and positions in, an Inventory or an InventoryError out.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import types
import typing
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ValidationError

from provision.dnsdata import providers
from provision.dnsdata.endpoint import problem as endpoint_problem
from provision.dnsdata.names import BadName, canonical, check_record
from provision.dnsdata.owner import default_owner
from provision.dnsdata.owner import problem as owner_problem
from provision.dnsdata.provider_settings import ProviderSettings
from provision.dnsdata.rdata import DATA_TYPES, BadValue
from provision.dnsdata.rdata import declared as declared_value
from provision.dnsdata.secrets import placement_problem
from provision.secretdata.check import inventory_problems, service_problems

from . import acme as acme_section
from . import clusters as cl
from . import culling, salvage, shapes
from . import from_hosts as gen
from . import https as door
from . import model as m
from . import sshd_options as sshd
from .apt_policy_doc import PackageEntry, merge_packages, merge_updates
from .catalog import (
    ACCOUNT_MAX,
    CATALOG,
    DEFAULT_BIND,
    DEFAULT_ENVS,
    DEFAULT_LOGDIR,
    SERVICE_ACCOUNT_PREFIX,
    member_socket,
    service_account,
)
from .errors import InventoryError, Problem
from .fields import check_ip, is_cidr, is_ip
from .kernel_doc import merged_kernel, merged_sysctl
from .member_ports import DEFAULT_RANGE, allocate
from .programs import program
from .python_envs import PythonEnv, duplicate_package, summary
from .schema import (
    AptSourceDoc,
    BastionDoc,
    ExposeFrom,
    FromHostsDoc,
    HostDoc,
    InstanceDoc,
    InventoryDoc,
    MemberServiceDoc,
    RoleDoc,
    ServiceDoc,
    ZoneDoc,
    inventory_doc,
)
from .source import FieldPath, SourceDoc, dotted


def build(doc: SourceDoc) -> m.Inventory:
    """Validate `doc` and return the model, or raise InventoryError listing every problem."""
    schema = inventory_doc(_named_providers(doc.data))
    try:
        parsed = schema.model_validate(doc.data)
    except ValidationError as e:
        raise InventoryError([*_problems_from_pydantic(e, doc, schema),
                              *_beyond_schema(e, doc, schema)]) from None
    return _Resolver(parsed, doc).resolve()


def _beyond_schema(e: ValidationError, doc: SourceDoc, schema: type[InventoryDoc]) -> list[Problem]:
    """The cross-checks' problems in what the schema accepted (provision.inventory.salvage):
    every problem in one run, not one section's after another's."""
    def located(err: ValidationError, data: Any) -> list[salvage.SchemaError]:
        out = []
        for x in err.errors():
            path, is_key = _clean_loc(x["loc"], data)
            out.append(salvage.SchemaError(path, x["type"], is_key))
        return out

    def validate(data: Any) -> list[salvage.SchemaError]:
        try:
            schema.model_validate(data)
        except ValidationError as again:
            return located(again, data)
        return []

    saved = salvage.salvage(doc.data, located(e, doc.data),
                            lambda path, data: _model_at(path, schema, data), validate)
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


# --- pydantic errors -> located problems -------------------------------------------------

def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[FieldPath, bool]:
    """Drop pydantic's union-branch tags from `loc`; report whether it ended on a dict key."""
    path: list[str | int] = []
    node = data
    is_key = False
    for part in loc:
        if part == "[key]":
            is_key = True
            continue
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and part == "from_" and "from" in node:
            path.append("from")
            node = node["from"]
        elif isinstance(part, str) and not (isinstance(node, dict) and part.isidentifier()
                                            and _looks_like_field(part)):
            continue  # a union branch tag such as 'function-after[...]' or 'list[...]'
        else:
            path.append(part)  # a missing field
            node = None
    return tuple(path), is_key


def _looks_like_field(part: str) -> bool:
    return part.islower() or "_" in part


def _unwrap(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [x for a in typing.get_args(tp) for x in _unwrap(a)]
    return [tp]


def _model_at(path: FieldPath, schema: type[BaseModel], data: Any) -> type[BaseModel] | None:
    """The schema model that holds the fields at `path` (to suggest known keys); of a
    union (a zone's providers), the branch whose `provider` the data names."""
    current: list[Any] = [schema]
    node = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
        nxt: list[Any] = []
        for tp in current:
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                for name, f in tp.model_fields.items():
                    if (f.alias or name) == part:
                        nxt.extend(_unwrap(f.annotation))
            elif typing.get_origin(tp) is dict:
                nxt.extend(_unwrap(typing.get_args(tp)[1]))
            elif typing.get_origin(tp) is list and isinstance(part, int):
                nxt.extend(_unwrap(typing.get_args(tp)[0]))
        current = nxt
    models = [tp for tp in current if isinstance(tp, type) and issubclass(tp, BaseModel)]
    provider = node.get("provider") if isinstance(node, dict) else None
    chosen = [tp for tp in models if "provider" in tp.model_fields
              and typing.get_args(tp.model_fields["provider"].annotation) == (provider,)]
    return next(iter(chosen or models), None)


def _message(err: Any, path: FieldPath, is_key: bool, schema: type[BaseModel], data: Any) -> str:
    kind = err["type"]
    msg: str = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    if kind == "extra_forbidden":
        model = _model_at(path[:-1], schema, data)
        retired = getattr(model, "retired", {}).get(str(path[-1])) if model else None
        if retired:
            return f"'{path[-1]}' is no longer accepted: {retired}"
        refused = getattr(model, "refused", {}).get(str(path[-1]).lower()) if model else None
        if refused:
            return f"'{path[-1]}' is refused: {refused}"
        known = sorted((f.alias or n) for n, f in model.model_fields.items()) if model else []
        close = difflib.get_close_matches(str(path[-1]), known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown key '{path[-1]}'{hint} (allowed: {', '.join(known)})"
    if path and path[-1] == "expose":
        return f"expose must be 'tunnel', 'none' or {{from: [CIDR, ...]}} (got {_short(value)})"
    if path and path[-1] in _FORMS and kind.endswith("_type"):
        # a value of none of a union's forms: say every form, not the first branch's type
        return f"{path[-1]} is {_FORMS[str(path[-1])]} (got {type(value).__name__} {_short(value)})"
    if kind == "missing":
        return "required field is missing"
    if kind == "string_pattern_mismatch" and path:
        # a list item (keep_groups[0]) is named by its list, and held by the list's holder
        item = isinstance(path[-1], int) and len(path) > 1
        key, holder_path = (path[-2], path[:-2]) if item else (path[-1], path[:-1])
        holder = _model_at(holder_path, schema, data)
        words = {**_PATTERN_WORDS, **getattr(holder, "pattern_words", {})}.get(str(key))
        if words:
            return f"{_short(value)} is not {words}"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return f"{value!r} is out of range ({msg.lower()})"
    if kind in ("too_short", "too_long"):
        return msg
    if is_key:
        return f"invalid key {path[-1]!r}: {msg}" if path else msg
    if kind == "int_type" and isinstance(value, str) and value.strip().isdigit():
        # '８０００' or '٨٠٠٠' (other scripts' digits), or a quoted "8000": a number here is
        # written unquoted, with 0-9
        how = ("the digits 0-9 (this is written with other digits)" if not value.isascii()
               else "no quotes")
        return f"{_short(value)} is text, not a number: write it with {how}"
    if kind in shapes.SHAPE_KINDS and path:
        said = _shape(path, schema, data, value)
        if said:
            return said
    if kind == "model_type":  # "... or instance of MemberServiceDoc": the class is ours
        msg = "Input should be a mapping (key: value)"
    if kind.endswith("_type") and value is not None:
        return f"{msg} (got {type(value).__name__} {_short(value)})"
    return msg


def _shape(path: FieldPath, schema: type[BaseModel], data: Any, value: Any) -> str | None:
    """A value of the wrong shape, in words: what the field takes (provision.inventory.shapes)."""
    item = isinstance(path[-1], int)
    fpath = path[:-1] if item else path
    if not fpath or not isinstance(fpath[-1], str):
        return None
    holder = _model_at(fpath[:-1], schema, data)
    if holder is None:  # an entry of a mapping of names: the entry's own model
        model = None if item else _model_at(fpath, schema, data)
        return (f"'{fpath[-1]}' is {shapes.takes(model)} (got {shapes.written(value)})"
                if model is not None else None)
    field = next((f for n, f in holder.model_fields.items() if (f.alias or n) == fpath[-1]), None)
    node: Any = data
    for part in fpath[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    record_type = node.get("type") if isinstance(node, dict) and fpath[-1] == "values" else None
    return shapes.shape_message(str(fpath[-1]), field, item, value, record_type)


# Fields that take one of several forms (a discriminated union: the form written is the
# one checked), in words, for a value written in none of them.
_FORMS = {
    "from_hosts": "true, false, or a mapping {roles, name, ttl}",
    "per_user": "true, false, a list of team members, or a mapping member -> "
                "{port, gpus, memory_max}",
}


def check_zone_key(key: str) -> str:
    """A zone key as the model spells it (the schema lowercases and strips the dot)."""
    return key.strip().rstrip(".").lower()


# What the schema's patterns allow, in words (the patterns stay in the JSON Schema for
# editors; a user reading an error should not have to read a regular expression). A DNS
# provider's own fields say it in their `Settings.pattern_words`.
_PATTERN_WORDS = {
    "region": "an AWS region name: lowercase words and a number joined by '-', e.g. us-east-1 "
              "or eu-central-2",
    "vpc": "a VPC id: 'vpc-' and 1 to 17 lowercase hex digits, e.g. vpc-0abc1234",
    "id": "a security group id: 'sg-' and 8 to 17 lowercase hex digits, e.g. sg-0123abcd",
    "keep_groups": "a security group id: 'sg-' and 8 to 17 lowercase hex digits, e.g. sg-0123abcd",
    "instance_id": "an EC2 instance id: 'i-' and 8 to 17 lowercase hex digits, e.g. i-0123abcd",
    "description": "an AWS rule description: at most 255 letters, digits, spaces and "
                   "._-:/()#,@[]+=&;{}!$* (no quotes, no control characters)",
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _problems_from_pydantic(e: ValidationError, doc: SourceDoc,
                            schema: type[BaseModel]) -> list[Problem]:
    by_path: dict[FieldPath, list[tuple[str, str]]] = {}
    for err in e.errors():
        path, is_key = _clean_loc(err["loc"], doc.data)
        by_path.setdefault(path, []).append((err["type"], _message(err, path, is_key, schema,
                                                                    doc.data)))
    problems = []
    for path, errs in by_path.items():
        # A union reports one error per branch; keep the specific ones.
        specific = [msg for kind, msg in errs if not kind.endswith("_type") and kind != "literal_error"]
        chosen = specific or [msg for _, msg in errs]
        unique = list(dict.fromkeys(chosen))
        pos = doc.where(path)
        problems.append(Problem(pos.file, pos.line, pos.column, dotted(path), "; or ".join(unique)))
    return problems


# --- resolution --------------------------------------------------------------------------

class _Resolver:
    def __init__(self, doc: InventoryDoc, source: SourceDoc):
        self.doc = doc
        self.source = source
        self.problems: list[Problem] = []
        # Each distinct list of roles is merged, and its services validated, once: hosts
        # that only name roles share the result (errors point into `roles:`, reported once).
        self._merged: dict[tuple[str, ...], tuple[dict[str, tuple[FieldPath, ServiceDoc]],
                                                  list[PackageEntry], list[str], list[str]]] = {}
        self._resolved: dict[tuple[str, ...], tuple[m.Service, ...]] = {}
        self._envs = self._env_table()

    def fail(self, path: FieldPath, message: str) -> None:
        pos = self.source.where(path)
        self.problems.append(Problem(pos.file, pos.line, pos.column, dotted(path), message))

    def resolve(self) -> m.Inventory:
        d = self.doc
        clash = set(d.bastions) & set(d.hosts)
        for name in sorted(clash):
            self.fail(("hosts", name), f"'{name}' is both a bastion and a host; names must be unique")
        chains = {name: self._chain(("bastions", name), b) for name, b in d.bastions.items()}
        bastions = tuple(self._bastion(name, b, chains[name]) for name, b in d.bastions.items())
        hosts = tuple(self._host(name, h) for name, h in d.hosts.items())
        self._instances_have_groups(bastions, hosts)
        self._instances_claimed_once(bastions, hosts)
        self._reserved_team_names()
        self._selector_words()
        team = tuple(m.Person(name, tuple(p.keys), p.sudo, p.shell, p.identity_file)
                     for name, p in d.team.items())
        aws = self._aws()
        clusters, hosts = cl.resolve(d.clusters, hosts, set(d.bastions),
                                     set(d.aws.security_groups) if d.aws else set(), self.fail,
                                     aws=d.aws is not None)
        for where, message in sshd.access_problems(
                (*bastions, *hosts), lambda n, k: sshd.merged(self._sshd_layers(n))[1][k]):
            self.fail(where, message)
        dns = self._dns()
        acme = self._acme()
        for where, message in inventory_problems(d.secrets, [(p.name, p.keys) for p in team],
                                                 d.recipients):
            self.fail(where, message)
        if self.problems:
            raise InventoryError(self.problems)
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

    def _logins(self) -> set[str]:
        """Every account the operator logs in as (passwordless sudo on the hosts)."""
        d = self.doc
        return ({d.defaults.user} | {h.user for h in d.hosts.values() if h.user}
                | {b.user for b in d.bastions.values() if b.user})

    def _reserved_team_names(self) -> None:
        """Team accounts get their keys replaced and their shell set: never a system account
        or a login user (the operator's own keys would be overwritten)."""
        logins = self._logins()
        for name in self.doc.team:
            if name in logins:
                self.fail(("team", name), f"'{name}' is a login user of this inventory; a team "
                          "member of that name would get its authorized_keys replaced (pick "
                          "another name for the person)")
            elif name in RESERVED_ACCOUNTS or name.startswith(("systemd-", "_", SERVICE_ACCOUNT_PREFIX)):
                self.fail(("team", name), f"'{name}' is a system account name; team members "
                          "need their own accounts (reserved: root, daemon, bin, sys, nobody, "
                          f"sshd, www-data, systemd-*, _*, {SERVICE_ACCOUNT_PREFIX}* (services' "
                          "own accounts) ...)")

    def _selector_words(self) -> None:
        """A host selection reads `all`, `bastions` and `role:NAME` as more than a name, so a
        node or role named so would make one selection mean two things (`exec all` running
        on one host, or on every host)."""
        d = self.doc
        words = ", ".join(m.SELECTOR_WORDS)
        for section, names in (("bastions", d.bastions), ("hosts", d.hosts)):
            for name in names:
                if name.lower() in m.SELECTOR_WORDS:
                    kind = section[:-1]
                    self.fail((section, name), f"'{name}' is a host selector word: `provision "
                              f"exec {name.lower()}`, `apply {name.lower()}` and a playbook's "
                              f"`hosts: {name.lower()}` mean "
                              f"{'every host' if name.lower() == 'all' else 'every bastion'}, so "
                              f"a {kind} named so could never be selected alone (reserved: "
                              f"{words}, in any case); rename the {kind}")
        for name in d.roles:
            if name.lower() in m.SELECTOR_WORDS:
                self.fail(("roles", name), f"'{name}' is a host selector word: "
                          f"`{m.SELECTOR_PREFIX}{name}` would read as "
                          f"{'every host' if name.lower() == 'all' else 'every bastion'} "
                          f"(reserved: {words}, in any case); rename the role")

    # jump chains ----------------------------------------------------------------
    def _chain(self, path: FieldPath, node: HostDoc | BastionDoc) -> tuple[str, ...]:
        """Full ProxyJump chain, outermost first: the chain to reach via[0], then via."""
        if node.via is None:
            return ()
        direct = [node.via] if isinstance(node.via, str) else list(node.via)
        for i, name in enumerate(direct):
            if name not in self.doc.bastions:
                where = (*path, "via") if isinstance(node.via, str) else (*path, "via", i)
                close = difflib.get_close_matches(name, list(self.doc.bastions), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                known = ", ".join(self.doc.bastions) or "none defined"
                self.fail(where, f"unknown bastion '{name}'{hint} (bastions: {known})")
                return ()
        visiting = [str(path[-1])] if path[0] == "bastions" else []
        prefix = self._prefix(direct[0], visiting, (*path, "via"))
        if prefix is None:
            return ()
        chain = [*prefix, *direct]
        if len(set(chain)) != len(chain) or (visiting and visiting[0] in chain):
            self.fail((*path, "via"), f"jump chain visits a bastion twice: {' -> '.join(chain)}")
            return ()
        return tuple(chain)

    def _prefix(self, name: str, visiting: list[str], where: FieldPath) -> list[str] | None:
        """Bastions in front of bastion `name`; None after reporting a cycle."""
        if name in visiting:
            self.fail(where, f"jump chain forms a cycle: {' -> '.join([*visiting, name])}")
            return None
        via = self.doc.bastions[name].via
        if via is None:
            return []
        direct = [via] if isinstance(via, str) else list(via)
        if any(n not in self.doc.bastions for n in direct):
            return []  # reported where that bastion itself is resolved
        prefix = self._prefix(direct[0], [*visiting, name], where)
        return None if prefix is None else [*prefix, *direct]

    # hosts ----------------------------------------------------------------------
    def _bastion(self, name: str, b: BastionDoc, chain: tuple[str, ...]) -> m.Host:
        d = self.doc.defaults
        egress = tuple(b.egress)
        if not egress:
            try:
                ip = ipaddress.ip_address(b.address)
                egress = (str(ipaddress.ip_network(ip)),)
            except ValueError:
                egress = ()
        return m.Host(name=name, address=b.address, user=b.user or d.user, port=b.port or d.port,
                      identity_file=b.identity_file or d.identity_file, jump_chain=chain,
                      is_bastion=True, ssh_from=tuple(b.allow_ssh_from), egress=egress,
                      security_groups=self._attached(("bastions", name), b.security_groups),
                      instance=self._instance(("bastions", name), b.aws, b.address),
                      sshd=sshd.merged(self._sshd_layers(name))[0])

    def _roles(self, path: FieldPath, roles: tuple[str, ...]) -> tuple[
            dict[str, tuple[FieldPath, ServiceDoc]], list[PackageEntry], list[str], list[str]]:
        """The roles' services, packages, ssh_from and security groups, merged in order;
        computed once per distinct list of (known) roles."""
        cached = self._merged.get(roles)
        if cached is not None:
            return cached
        services: dict[str, tuple[FieldPath, ServiceDoc]] = {}
        packages: list[PackageEntry] = []
        ssh_from: list[str] = []
        groups: list[str] = []
        known = True
        for i, role in enumerate(roles):
            r = self.doc.roles.get(role)
            if r is None:
                close = difflib.get_close_matches(role, list(self.doc.roles), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                self.fail((*path, "roles", i), f"unknown role '{role}'{hint} "
                          f"(roles: {', '.join(self.doc.roles) or 'none defined'})")
                known = False
                continue
            for sname, sdoc in r.services.items():
                base = services.get(sname, (("roles", role, "services", sname), ServiceDoc()))[1]
                services[sname] = (("roles", role, "services", sname), _overlay(base, sdoc))
            packages += [p for p in r.packages if p not in packages]
            ssh_from += [c for c in r.ssh_from if c not in ssh_from]
            groups += [g for g in self._attached(("roles", role), r.security_groups) if g not in groups]
        merged = (services, packages, ssh_from, groups)
        if known:  # an unknown role is this host's error: reported at each host that names it
            self._merged[roles] = merged
        return merged

    def _host(self, name: str, h: HostDoc) -> m.Host:
        d = self.doc.defaults
        path: FieldPath = ("hosts", name)
        roles = tuple(h.roles)
        role_services, role_packages, role_ssh_from, role_groups = self._roles(path, roles)
        services = dict(role_services)
        packages = list(role_packages)
        ssh_from = list(role_ssh_from)
        groups = list(role_groups)
        for sname, sdoc in h.services.items():
            base = services.get(sname, (path, ServiceDoc()))[1]
            services[sname] = ((*path, "services", sname), _overlay(base, sdoc))
        packages += [p for p in h.packages if p not in packages]
        names, pins = merge_packages(packages)
        updates = merge_updates([*(self.doc.roles[r].updates for r in roles if r in self.doc.roles),
                                 h.updates])
        ssh_from += [c for c in h.ssh_from if c not in ssh_from]
        groups += [g for g in self._attached(path, h.security_groups) if g not in groups]
        if not h.services and roles in self._merged:  # services from the roles alone: once
            resolved = self._resolved.get(roles)
            if resolved is None:
                resolved = self._resolved[roles] = tuple(
                    x for sname, (sp, sd) in services.items()
                    for x in self._per_user(sp, sd, self._service(sp, sname, sd)))
        else:
            resolved = tuple(x for sname, (sp, sd) in services.items()
                             for x in self._per_user(sp, sd, self._service(sp, sname, sd)))
        self._accounts_apart(path, resolved)
        for sname, why in door.host_problems(resolved, h.port or d.port).items():
            where = services[sname][0] if sname in services else path
            self.fail((*where, "https", "port"), why)
        return m.Host(name=name, address=h.address, user=h.user or d.user, port=h.port or d.port,
                      identity_file=h.identity_file or d.identity_file,
                      jump_chain=self._chain(path, h), roles=roles,
                      ssh_from=tuple(ssh_from), services=resolved, packages=names,
                      package_pins=pins, updates=updates,
                      apt_sources=self._apt_sources(path, roles, h),
                      security_groups=tuple(groups), instance=self._instance(path, h.aws, h.address),
                      python_envs=self._host_envs(roles, h, resolved),
                      ephemeral_ports=(h.ephemeral_ports[0], h.ephemeral_ports[1])
                      if h.ephemeral_ports else None, sshd=sshd.merged(self._sshd_layers(name))[0],
                      **self._kernel(roles, h))

    def _kernel(self, roles: tuple[str, ...], h: HostDoc) -> dict[str, Any]:
        """`sysctl:` and `kernel:` merged: the roles in order, then the host."""
        layers = [r for r in (self.doc.roles.get(n) for n in roles) if r is not None]
        cores, modules = merged_kernel([*(r.kernel for r in layers), h.kernel])
        docs: list[RoleDoc | HostDoc] = [*layers, h]
        sysctl = merged_sysctl({k: None if v is None else str(v) for k, v in x.sysctl.items()}
                               for x in docs)
        return {"sysctl": sysctl, "core_dumps": cores, "kernel_modules": modules}

    def _sshd_layers(self, name: str) -> list[tuple[FieldPath, sshd.SshdDoc | None]]:
        """A node's `sshd:` docs, lowest first: its roles' in order, then its own."""
        d = self.doc
        if name in d.bastions:
            return [(("bastions", name), d.bastions[name].sshd)]
        h = d.hosts[name]
        return [*((("roles", r), d.roles[r].sshd) for r in h.roles if r in d.roles),
                (("hosts", name), h.sshd)]

    def _accounts_apart(self, path: FieldPath, services: tuple[m.Service, ...]) -> None:
        """Two services of one host never share an own account (`My.Board` and `my-board`
        would both be svc-my-board): each keeps what it writes from the other."""
        seen: dict[str, str] = {}
        for s in services:
            if s.own_account and seen.setdefault(s.user, s.name) != s.name:
                self.fail((*path, "services", s.name), f"services '{seen[s.user]}' and '{s.name}' "
                          f"would both run as {s.user}; rename one or give it a 'user'")

    # python envs ----------------------------------------------------------------
    def _env_table(self) -> dict[str, tuple[FieldPath, PythonEnv]]:
        """Every declared python env by name (top level, roles, hosts). A name has one
        requirement set in the whole inventory: a second one is an error naming both places."""
        d = self.doc
        places: list[tuple[FieldPath, dict[str, Any]]] = [
            (("python_envs",), d.python_envs),
            *((("roles", r, "python_envs"), rd.python_envs) for r, rd in d.roles.items()),
            *((("hosts", h, "python_envs"), hd.python_envs) for h, hd in d.hosts.items())]
        table: dict[str, tuple[FieldPath, PythonEnv]] = {}
        for base, envs in places:
            for name, e in envs.items():
                where: FieldPath = (*base, name)
                dup = duplicate_package(e.packages)
                if dup is not None:
                    self.fail((*where, "packages", dup[1]), f"{e.packages[dup[1]]} is about the "
                              f"same package as packages[{dup[0]}] ({e.packages[dup[0]]}); give "
                              "each package once, with every condition in one requirement")
                    continue
                env = PythonEnv.of(name, e.packages, e.python, e.index_url, e.extra_index_urls)
                first = table.get(name)
                if first is None:
                    table[name] = (where, env)
                elif first[1] != env:
                    pos = self.source.where(first[0])
                    self.fail(where, f"python env '{name}' is also declared at {pos.file}:"
                              f"{pos.line} with another requirement set ({summary(first[1])}; "
                              f"here: {summary(env)}); an env name has one requirement set "
                              "in the whole inventory: rename one of them")
        return table

    def _env(self, name: str) -> PythonEnv | None:
        """The declared env `name`, else the catalog's default of that name, else None."""
        if name in self._envs:
            return self._envs[name][1]
        packages = DEFAULT_ENVS.get(name)
        return PythonEnv.of(name, packages) if packages else None

    def _host_envs(self, roles: tuple[str, ...], h: HostDoc,
                   services: tuple[m.Service, ...]) -> tuple[PythonEnv, ...]:
        """The envs a host gets: the top level's, its roles', its own, then those its
        services name (a catalog default included)."""
        names = [*self.doc.python_envs,
                 *(n for r in roles if r in self.doc.roles for n in self.doc.roles[r].python_envs),
                 *h.python_envs, *(s.env for s in services if s.env)]
        envs = (self._env(n) for n in dict.fromkeys(names))
        return tuple(e for e in envs if e is not None)

    def _service_venv(self, path: FieldPath, name: str, s: ServiceDoc,
                      command: str | None) -> tuple[str | None, str | None]:
        """(the virtualenv directory, the python env's name) of a service: `venv:` as a path
        or an env name; none given, the catalog's default env when the command uses {venv}."""
        entry = CATALOG.get(name)
        env = None
        if s.venv is None and entry and entry.env and command and "{venv}" in command:
            env = entry.env
        elif s.venv is not None and not s.venv.startswith("/"):
            env = s.venv
        if env is None:
            return s.venv, None
        found = self._env(env)
        if found is None:
            known = ", ".join(sorted({*self._envs, *DEFAULT_ENVS}))
            self.fail((*path, "venv"), f"unknown python env '{env}' (declared in python_envs "
                      f"or a catalog default: {known}); or give the absolute path of a virtualenv")
            return None, None
        return found.path, env

    def _apt_sources(self, path: FieldPath, roles: tuple[str, ...], h: HostDoc) -> tuple[m.AptSource, ...]:
        """The roles' apt sources in order, then the host's; a later one of the same name
        wins. Two names for one repository (URI and suite) are refused: apt fails on the host
        when their Signed-By differ ("Conflicting values set for option Signed-By")."""
        merged: dict[str, tuple[FieldPath, AptSourceDoc]] = {}
        for role in roles:
            r = self.doc.roles.get(role)
            if r is not None:  # an unknown role is reported where the host names it
                merged.update({n: (("roles", role, "apt_sources", n), d) for n, d in r.apt_sources.items()})
        merged.update({n: ((*path, "apt_sources", n), d) for n, d in h.apt_sources.items()})
        seen: dict[tuple[str, str], str] = {}
        for name, (where, d) in merged.items():
            for suite in d.suites:
                other = seen.setdefault((d.uri.rstrip("/"), suite), name)
                if other != name:
                    self.fail(where, f"apt source '{name}' repeats '{other}' ({d.uri} {suite}) "
                              f"for host '{path[-1]}'; apt refuses one repository under two keys")
        return tuple(m.AptSource(name, d.uri, tuple(d.suites), tuple(d.components), d.key,
                                 d.fingerprint) for name, (_, d) in merged.items())

    def _service(self, path: FieldPath, name: str, s: ServiceDoc) -> m.Service:
        entry = CATALOG.get(name)
        port = s.port or (entry.port if entry else None)
        if port is None:
            self.fail(path, f"service '{name}' is not in the catalog, so it needs a 'port' "
                      f"(catalog: {', '.join(CATALOG)})")
            port = 1
        command = s.command or (entry.command if entry else None)
        if command is None:
            self.fail(path, f"service '{name}' needs a 'command' (no catalog default for it)")
        logdir = s.logdir or (DEFAULT_LOGDIR if name == "tensorboard" else None)
        if command and "{logdir}" in command and logdir is None:
            self.fail((*path, "command"), "the command uses {logdir} but the service has no 'logdir'")
        if command and "{config}" in command and program(command) != "jupyter":
            self.fail((*path, "command"), "{config} is the rendered Jupyter config; only Jupyter "
                      "services can use it")
        if name == "firewall":
            self.fail(path, "the service name 'firewall' is reserved (provision-firewall.service "
                      "loads the host firewall)")
        user = s.user or service_account(name)
        if s.user is not None and s.user in self._logins():
            self.fail((*path, "user"), f"'{s.user}' is a login user of this inventory (it has "
                      "passwordless sudo: whoever reaches the service would be root); leave "
                      f"'user' out and it runs as its own account, {service_account(name)}")
        elif s.user is None and len(user) > ACCOUNT_MAX:
            self.fail(path, f"the service's own account would be '{user}', longer than "
                      f"{ACCOUNT_MAX} characters; give it a shorter name or a 'user'")
        for field, value in (("logdir", logdir), ("notebook_dir", s.notebook_dir)):
            parts = (value or "").split("/")
            if value and parts[1] == "home" and parts[2] != user:
                self.fail((*path, field), f"{value} is in /home/{parts[2]}, but the service runs "
                          f"as {user}: a data directory under /home must be its user's own")
        if command and "{notebook_dir}" in command and s.notebook_dir is None:
            self.fail((*path, "command"), "the command uses {notebook_dir} but the service has no 'notebook_dir'")
        if isinstance(s.expose, ExposeFrom):
            expose = m.Expose("public", tuple(s.expose.from_))
        else:
            expose = m.Expose(s.expose or "tunnel")
        group = s.group
        if group is not None and logdir is None:
            self.fail((*path, "group"), "'group' names who may write the service's logdir, "
                      "and the service has none")
        if group is not None and group in self.doc.team:
            self.fail((*path, "group"), f"'{group}' is a team member's name (each member has "
                      "a group of that name already); pick another group name")
        elif group is not None and (group in PRIVILEGED_GROUPS or group in RESERVED_ACCOUNTS):
            self.fail((*path, "group"), f"'{group}' is a group of the system (every team member "
                      "is added to a team directory's group, and this one grants more than the "
                      "directory); name a group of the team's own, e.g. 'ml'")
        venv, env = self._service_venv(path, name, s, command)
        https = None
        if s.https is not None:
            zones = self.doc.dns.zones if self.doc.dns else {}
            https, problems = door.build(s.https, zones)
            for where, why in problems:
                self.fail((*path, "https", *where), why)
        is_jupyter = bool(command) and program(command) == "jupyter"
        if s.culling is not None and not is_jupyter:
            self.fail((*path, "culling"), "'culling' is for Jupyter servers (their idle kernels); "
                      "this service's command starts no jupyter")
        for spot, message in service_problems(path, s.environment, s.secrets, list(self.doc.secrets),
                                              s.per_user not in (None, False)):
            self.fail(spot, message)
        service = m.Service(name=name, port=port, bind=s.bind or DEFAULT_BIND, expose=expose,
                            command=command, user=user, logdir=logdir,
                            notebook_dir=s.notebook_dir, venv=venv, restart=s.restart,
                            scheme=entry.scheme if entry else "http", env=env,
                            memory_max=s.memory_max, group=group, own_account=s.user is None,
                            private_tmp=s.private_tmp is not False, https=https,
                            plain_http=s.plain_http,
                            culling=culling.resolve(s.culling) if is_jupyter else None,
                            environment=tuple(s.environment.items()),
                            secrets=tuple(m.SecretUse(k, v, None) if isinstance(v, str)
                                          else m.SecretUse(k, None, v.file)
                                          for k, v in s.secrets.items()))
        for where, why in door.service_problems(service, s.bind is not None):
            self.fail((*path, *where), why)
        return service

    def _per_user(self, path: FieldPath, s: ServiceDoc, base: m.Service) -> tuple[m.Service, ...]:
        """The service itself, or with `per_user` one server per member (docs/tunnels.md)."""
        if s.per_user is None or s.per_user is False:
            if s.per_user_ports is not None:
                self.fail((*path, "per_user_ports"), "'per_user_ports' is for per_user servers; "
                          "add per_user")
            if s.per_user_socket is not None:
                self.fail((*path, "per_user_socket"), "'per_user_socket' is for per_user "
                          "servers; add per_user")
            return (base,)
        where: FieldPath = (*path, "per_user")
        if base.program != "jupyter":
            self.fail(where, "per_user is for Jupyter servers (the command must start jupyter)")
            return ()
        bad = {
            "user": s.user is not None and "each member's server runs as that member",
            "notebook_dir": s.notebook_dir is not None and "each member's notebooks are their home",
            "logdir": s.logdir is not None and "a per-user server has no logdir",
            "bind": not base.is_loopback and "a per-user server binds 127.0.0.1 (reached "
                                             "through the member's tunnel)",
            "expose": base.expose.kind != "tunnel" and "a per-user server is tunnel-only",
        }
        for f, why in bad.items():
            if why:
                self.fail((*path, f), f"'{f}' does not go with per_user: {why}")
        if any(bad.values()):
            return ()
        team = list(self.doc.team)
        per = s.per_user
        options: dict[str, MemberServiceDoc] = {}
        if per is True:
            members = team
            if not members:
                self.fail(where, "per_user: true gives every team member a server, but `team` "
                          "is empty")
        elif isinstance(per, list):
            members = list(dict.fromkeys(per))
        else:
            members = list(per)
            options = {k: v for k, v in per.items() if v is not None}
        for mem in members if not isinstance(per, bool) else ():
            if mem not in self.doc.team:
                key: str | int = per.index(mem) if isinstance(per, list) else mem
                close = difflib.get_close_matches(mem, team, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                self.fail((*where, key), f"'{mem}' is not a team member{hint} (team: "
                          f"{', '.join(team) or 'none'})")
        members = [mem for mem in members if mem in self.doc.team]
        low, high = s.per_user_ports or DEFAULT_RANGE
        if low > high:
            self.fail((*path, "per_user_ports"), "per_user_ports must be [low, high]")
            return ()
        pins = {mem: o.port for mem, o in options.items() if o.port is not None}
        ports, clashes = allocate(members, pins, low, high)
        for c in clashes:
            self.fail((*where, c.member) if isinstance(per, dict) and c.member in per else where,
                      c.message)
        if clashes:
            return ()
        out = []
        for mem in members:
            o = options.get(mem) or MemberServiceDoc()
            if o.gpus is not None and len(set(o.gpus)) != len(o.gpus):
                self.fail((*where, mem, "gpus"), "a GPU is listed twice")
            out.append(replace(
                base, name=f"{base.name}@{mem}", member=mem, template=base.name, user=mem,
                own_account=False,
                socket=None if s.per_user_socket is False else member_socket(base.name, mem),
                port=ports[mem], local_port=base.port, notebook_dir=None,
                gpus=None if o.gpus is None else tuple(o.gpus),
                memory_max=o.memory_max or s.memory_max))
        return tuple(out)

    # cloud ----------------------------------------------------------------------
    def _group_name(self, path: FieldPath, name: str, what: str) -> bool:
        """Whether `name` is a declared security group; reports it at `path` if not."""
        declared = list(self.doc.aws.security_groups) if self.doc.aws else []
        if name in declared:
            return True
        close = difflib.get_close_matches(name, declared, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        self.fail(path, f"{what} '{name}'{hint} (aws.security_groups: {', '.join(declared) or 'none defined'})")
        return False

    def _attached(self, path: FieldPath, names: list[str]) -> tuple[str, ...]:
        """The security groups a host, bastion or role names, checked against aws.security_groups."""
        roles = self.doc.roles
        if path[0] == "roles" and (len(path) < 2 or path[1] not in roles):
            return ()
        ok = [g for i, g in enumerate(names)
              if self._group_name((*path, "security_groups", i), g, "unknown security group")]
        return tuple(dict.fromkeys(ok))

    def _instances_have_groups(self, bastions: tuple[m.Host, ...], hosts: tuple[m.Host, ...]) -> None:
        """An instance always carries a group (AWS refuses none): an `aws:` block needs some."""
        for kind, nodes in (("bastions", bastions), ("hosts", hosts)):
            for n in nodes:
                if n.instance is not None and not n.security_groups and not n.instance.keep_groups:
                    self.fail((kind, n.name, "aws"), "an instance needs at least one group: list "
                              "security_groups (or aws.keep_groups) for it")

    def _instances_claimed_once(self, bastions: tuple[m.Host, ...],
                                hosts: tuple[m.Host, ...]) -> None:
        """One EC2 instance is one machine. `sg apply` plans each machine's attachment on
        its own: two machines naming one instance (by id, or by one private address in one
        VPC) would each set its groups, the second undoing the first, and the lockout guard
        would judge each alone. The second claim is an error naming the first."""
        first_id: dict[str, FieldPath] = {}
        first_address: dict[str, list[tuple[str | None, FieldPath]]] = {}
        for kind, nodes in (("bastions", bastions), ("hosts", hosts)):
            for n in nodes:
                inst = n.instance
                if inst is None:
                    continue
                base: FieldPath = (kind, n.name, "aws")
                if inst.id is not None:
                    where = (*base, "instance_id")
                    if inst.id in first_id:
                        self.fail(where, f"instance {inst.id} is also claimed by "
                                  f"{self._claim(first_id[inst.id])}: one EC2 instance is one "
                                  "machine (each machine's groups would be set on it in turn, "
                                  "the second undoing the first)")
                    else:
                        first_id[inst.id] = where
                    continue
                if inst.private_address is None:
                    continue  # already an error: no address to find it by
                given = self.source.positions.get((*base, "private_address"))
                where = (*base, "private_address") if given else base
                vpc = self._vpc_of(n)
                seen = first_address.setdefault(inst.private_address, [])
                clash = next((w for v, w in seen if v is None or vpc is None or v == vpc), None)
                if clash is not None:
                    self.fail(where, f"the private address {inst.private_address} that finds "
                              f"this machine's instance is also claimed by {self._claim(clash)}"
                              f"{'' if vpc is None else ' in ' + vpc}: one EC2 instance is one "
                              "machine; give each its own aws.instance_id or private_address")
                else:
                    seen.append((vpc, where))

    def _claim(self, where: FieldPath) -> str:
        """`hosts.gpu1 (FILE:LINE)`: the machine of an `aws` claim, and where it is."""
        pos = self.source.where(where)
        return f"{where[0]}.{where[1]} ({pos.file}:{pos.line})"

    def _vpc_of(self, node: m.Host) -> str | None:
        """The one VPC a machine's groups are declared in, or None when unknown at load (a
        group given by id only, or groups in several VPCs, which `sg plan` refuses)."""
        declared = self.doc.aws.security_groups if self.doc.aws else {}
        vpcs = {declared[g].vpc if g in declared else None for g in node.security_groups}
        return next(iter(vpcs)) if len(vpcs) == 1 else None

    def _instance(self, path: FieldPath, doc: InstanceDoc | None, address: str) -> m.Instance | None:
        """The EC2 instance of a machine; found by private address unless an id is given."""
        if doc is None:
            return None
        if doc.instance_id is not None and doc.private_address is not None:
            self.fail((*path, "aws", "private_address"),
                      "give instance_id or private_address, not both")
        private = doc.private_address
        if doc.instance_id is None and private is None:
            try:
                private = str(ipaddress.IPv4Address(address))
            except ValueError:
                self.fail((*path, "aws"), f"the address {address!r} is not an IPv4 address: give "
                          "aws.instance_id or aws.private_address to find the instance")
        return m.Instance(doc.instance_id, private, tuple(dict.fromkeys(doc.keep_groups)))

    def _rules(self, path: FieldPath, docs: list[Any], peers: str) -> tuple[m.IngressRule, ...]:
        rules = []
        seen: dict[tuple[Any, ...], int] = {}
        for i, r in enumerate(docs):
            sources = r.from_ if peers == "from" else r.to
            if r.protocol in ("icmp", "all"):
                lo, hi = -1, -1
            else:
                lo, hi = (r.port, r.port) if r.port is not None else (r.ports or [0, 0])
            for j, src in enumerate(sources):
                if not is_cidr(src):
                    self._group_name((*path, i, peers, j), src,
                                     "not a CIDR, and no security group named")
                same = (r.protocol, lo, hi, src)
                if same in seen and seen[same] != i:
                    self.fail((*path, i, peers, j), f"{src} is already admitted with the same protocol "
                              f"and ports by {dotted(path)}[{seen[same]}] (AWS keeps one rule, with one "
                              "description)")
                seen.setdefault(same, i)
            rules.append(m.IngressRule(r.protocol, lo, hi, tuple(dict.fromkeys(sources)), r.description))
        return tuple(rules)

    def _aws(self) -> m.Aws | None:
        a = self.doc.aws
        if a is None:
            return None
        groups = []
        ids: dict[str, str] = {}
        for gname, g in a.security_groups.items():
            gpath: FieldPath = ("aws", "security_groups", gname)
            if is_cidr(gname):  # a rule's source `10.0.0.5` is the address, never this group
                self.fail(gpath, f"a security group name must not read as an address or CIDR "
                          f"('{gname}' as a rule's source is {ipaddress.ip_network(gname)}); "
                          f"name it e.g. 'group-{gname}'")
            if g.id is not None:
                if g.id in ids:
                    self.fail((*gpath, "id"), f"group id {g.id} is also declared as '{ids[g.id]}'")
                ids[g.id] = gname
            ingress = self._rules((*gpath, "ingress"), list(g.ingress), "from")
            egress = None if g.egress is None else self._rules((*gpath, "egress"), list(g.egress), "to")
            groups.append(m.SecurityGroup(gname, g.vpc, g.description, ingress, id=g.id, egress=egress))
        if a.endpoint_url is not None:
            why = endpoint_problem(a.endpoint_url, "the endpoint_url")
            if why:
                self.fail(("aws", "endpoint_url"), why)
        return m.Aws(a.region, a.endpoint_url, tuple(groups))

    def _acme(self) -> acme_section.Acme | None:
        if self.doc.acme is None:
            return None
        acme, problems = acme_section.resolve(
            self.doc.acme, lambda p, v: self._local_path(("acme", *p), v) or v,
            lambda path: placement_problem(path, self.source.tree), list(self.doc.secrets))
        for path, why in problems:
            self.fail(("acme", *path), why)
        return acme

    def _dns(self) -> m.Dns | None:
        dd = self.doc.dns
        if dd is None:
            return None
        self._dns_names()
        zones = []
        for zname, z in dd.zones.items():
            zpath: FieldPath = ("dns", "zones", self._raw_zone_key(zname))
            records = []
            for rname, entry in z.records.items():
                rpath = (*zpath, "records", self._raw_record_key(str(zpath[2]), rname))
                if not isinstance(entry, list):
                    records.append(self._record(rpath, rname, entry, zname))
                    continue
                types = [r.type for r in entry]
                for i, r in enumerate(entry):
                    if r.type in types[:i]:
                        self.fail((*rpath, i), f"a second {r.type} record for '{rname}' (put every "
                                  "value in one record's 'values')")
                    elif r.type == "CNAME" and len(entry) > 1:
                        self.fail((*rpath, i), "a CNAME must be alone at its name")
                    records.append(self._record((*rpath, i), rname, r, zname))
            settings = self._settings(zpath, z)
            self._visibility(zpath, z, settings)
            self._supported(zpath, z.provider, records)
            records += self._from_hosts(zpath, zname, z.from_hosts, records)
            zones.append(m.Zone(name=zname, provider=z.provider, records=tuple(records),
                                settings=settings,
                                cutover_above_ttl=z.cutover_above_ttl,
                                closed_migration_days=z.closed_migration_days,
                                visibility=z.visibility))
        self._generated_across_zones(zones)
        return m.Dns(tuple(dd.resolvers), tuple(zones), self._owner(dd.owner))

    def _generated_across_zones(self, zones: list[m.Zone]) -> None:
        """A name from_hosts makes in one zone that a record of another of the
        inventory's zones declares (e.g. `gpu1.lab` in example.org beside from_hosts in
        lab.example.org): two zones would serve one name, one of them unseen."""
        made: dict[tuple[str, str], tuple[str, m.Record]] = {}
        for z in zones:
            for r in z.records:
                if r.host is not None:
                    made[(canonical(r.name, z.name), r.type)] = (z.name, r)
        if not made:
            return
        for z in zones:
            for r in z.records:
                if r.host is not None:
                    continue
                fq = canonical(r.name, z.name)
                hits = ([made[(fq, r.type)]] if (fq, r.type) in made else []) + (
                    [v for t in ("A", "AAAA") if (v := made.get((fq, t)))]
                    if r.type == "CNAME" else [])
                for gzone, g in hits[:1]:
                    if gzone == z.name:
                        continue
                    zkey = self._raw_zone_key(z.name)
                    at = self.source.where(("dns", "zones", self._raw_zone_key(gzone),
                                            "from_hosts"))
                    self.fail(("dns", "zones", zkey, "records",
                               self._raw_record_key(zkey, r.name)),
                              f"record '{r.name}' ({fq} {r.type}) of zone {z.name} is also "
                              f"the {g.type} record from_hosts of zone {gzone} (at {at.file}:"
                              f"{at.line}) makes for host '{g.host}': one name in two zones "
                              "(remove the record, or leave the host out with "
                              "from_hosts.roles)")

    def _owner(self, given: str | None) -> str:
        """dns.owner, or the owner id derived from the inventory's name."""
        if given is not None:
            why = owner_problem(given)
            if why:
                self.fail(("dns", "owner"), f"not an owner id: {why}")
            return given
        src = self.source
        name = src.name or (os.path.basename(os.path.dirname(src.files[0])) if len(src.files) > 1
                            else os.path.splitext(os.path.basename(src.files[0]))[0]
                            if src.files else "")
        return default_owner(name)

    def _visibility(self, zpath: FieldPath, z: ZoneDoc, settings: ProviderSettings) -> None:
        """A private zone needs a provider that has them and the networks that see it; a
        public zone names none."""
        field = settings.networks_field
        if z.visibility == "private":
            if not providers.capabilities(z.provider).private_zones or not field:
                self.fail((*zpath, "visibility"), f"provider {z.provider} has no private "
                          "zones: visibility must be 'public' (the default)")
            elif not settings.visible_to():
                self.fail((*zpath, "visibility"), f"a private zone needs '{field}': at least "
                          "one network that sees it")
        elif field and settings.visible_to():
            self.fail((*zpath, field), f"'{field}' is for a private zone only (add "
                      "'visibility: private', or remove it)")

    def _supported(self, zpath: FieldPath, provider: str, records: list[m.Record]) -> None:
        """A record type the zone's provider cannot write is refused where it is declared."""
        types = providers.capabilities(provider).record_types
        for r in records:
            if r.type not in types:
                path = (*zpath, "records", self._raw_record_key(str(zpath[2]), r.name))
                self.fail(path, f"provider {provider} does not support {r.type} records (it "
                          f"writes {', '.join(sorted(types))})")

    def _from_hosts(self, zpath: FieldPath, zone: str, spec_doc: bool | FromHostsDoc,
                    declared: list[m.Record]) -> list[m.Record]:
        """The zone's records generated from the hosts' addresses; a generated name that a
        declared record of the zone has (same type, or a CNAME), that two hosts generate,
        or that lies in another of the inventory's zones, is an error naming both places."""
        if spec_doc is False:
            return []
        where = (*zpath, "from_hosts")
        doc = FromHostsDoc() if spec_doc is True else spec_doc
        assert isinstance(doc, FromHostsDoc)
        why = gen.template_problem(doc.name)
        if why:
            self.fail((*where, "name"), why)
            return []
        for i, role in enumerate(doc.roles or ()):
            if role not in self.doc.roles:
                self.fail((*where, "roles", i), f"unknown role '{role}' (roles: "
                          f"{', '.join(self.doc.roles) or 'none defined'})")
        spec = gen.Spec(tuple(doc.roles) if doc.roles is not None else None, doc.name, doc.ttl)
        hosts = [gen.HostIn(n, h.address, tuple(h.roles)) for n, h in self.doc.hosts.items()]
        made, problems = gen.generate(zone, spec, hosts)
        for host, why in problems:
            self.fail(("hosts", host, "address"), f"from_hosts of zone {zone}: {why}")
        at = self.source.where(where)
        declared_at: dict[tuple[str, str], m.Record] = {
            (canonical(r.name, zone), r.type): r for r in declared}
        cnames = {canonical(r.name, zone): r for r in declared if r.type == "CNAME"}
        others = [z for z in self._raw_zones() if isinstance(z, str) and check_zone_key(z) != zone]
        first: dict[str, str] = {}
        out = []
        for g in made:
            # the same name and type, or a CNAME (alone at its name): an A/AAAA beside a
            # declared TXT or MX of that name is no clash
            clash = declared_at.get((g.fqdn, g.type)) or cnames.get(g.fqdn)
            if clash is not None:
                self.fail((*zpath, "records", self._raw_record_key(str(zpath[2]), clash.name)),
                          f"record '{clash.name}' ({g.fqdn} {clash.type}) is also the {g.type} "
                          f"record from_hosts (at {at.file}:{at.line}) makes for host "
                          f"'{g.host}': rename the record, or leave the host out with "
                          "from_hosts.roles")
                continue
            if g.fqdn in first:
                self.fail(("hosts", g.host), f"from_hosts of zone {zone} (at {at.file}:"
                          f"{at.line}) makes {g.fqdn} for host '{g.host}' and for host "
                          f"'{first[g.fqdn]}': names are compared without case")
                continue
            first[g.fqdn] = g.host
            inner = next((z for z in others if g.fqdn.endswith("." + check_zone_key(z) + ".")
                          and len(check_zone_key(z)) > len(zone)), None)
            if inner is not None:
                self.fail(where, f"the name {g.fqdn} from_hosts makes for host '{g.host}' is "
                          f"in the inventory's zone '{inner}', not in {zone}")
                continue
            out.append(m.Record(name=g.name, type=g.type, values=(g.value,), ttl=g.ttl,
                                host=g.host))
        return out

    def _settings(self, zpath: FieldPath, z: ZoneDoc) -> ProviderSettings:
        """The provider's own fields of zone `z` (validated with the zone), the files they
        name resolved like every local path."""
        model = providers.settings_model(z.provider)
        values = {f: getattr(z, f) for f in model.model_fields}
        for f in model.local_files:
            values[f] = self._local_path((*zpath, f), values[f])
        settings = model.model_validate(values)
        for f in model.secret_fields:
            if values[f] is not None and values[f] not in self.doc.secrets:
                self.fail((*zpath, f), f"no secret '{values[f]}' in the inventory's `secrets:` "
                          f"(secrets: {', '.join(self.doc.secrets) or 'none'})")
        bound = settings.bound_names()
        for f in model.local_files:
            path = values[f]
            if not isinstance(path, str):
                continue
            # which local file becomes a credential is not the inventory's to choose
            # (docs/trust-model.md#a-providers-secret-comes-from-where-you-put-it)
            why = placement_problem(path, self.source.tree)
            real = os.path.realpath(path)
            if why is None and f in bound and os.path.basename(real) != bound[f]:
                named = "" if real == os.path.abspath(path) else f" (its real path is {real})"
                why = (f"{path}{named} is not named {bound[f]}: a key file is named for the "
                       "server it is sent to, so that changing the server in the inventory "
                       "alone never sends an existing key elsewhere")
            if why is not None:
                self.fail((*zpath, f), why)
        return settings

    def _raw_record_key(self, zkey: str, rname: str) -> str:
        zone = self._raw_zones().get(zkey)
        records = zone.get("records") if isinstance(zone, dict) else None
        if not isinstance(records, dict) or rname in records:
            return rname  # as written: no scan (one scan per record made 5,000 records quadratic)
        return next((k for k in records if isinstance(k, str) and k.lower() == rname), rname)

    def _raw_zone_key(self, zname: str) -> str:
        """The zone's key as written in the YAML (positions are keyed by it)."""
        raw = self._raw_zones()
        return next((k for k in raw if isinstance(k, str) and check_zone_key(k) == zname), zname)

    def _raw_zones(self) -> dict[Any, Any]:
        data = self.source.data if isinstance(self.source.data, dict) else {}
        dns = data.get("dns") if isinstance(data.get("dns"), dict) else {}
        zones = dns.get("zones") if isinstance(dns, dict) else None
        return zones if isinstance(zones, dict) else {}

    def _dns_names(self) -> None:
        """Zone and record names are compared after normalisation (case, trailing dot,
        relative versus absolute): two spellings of one name are an error naming both
        places. Record names in provision's reserved marker spaces, or too long for their
        markers, are refused."""
        raw = self._raw_zones()
        first_zone: dict[str, str] = {}
        anywhere: dict[str, FieldPath] = {}   # absolute name -> where first declared
        for zkey in raw:
            if not isinstance(zkey, str):
                continue
            zname = check_zone_key(zkey)
            if zname in first_zone:
                self._twice(("dns", "zones", first_zone[zname]), ("dns", "zones", zkey),
                            f"zone '{zkey}' is the zone '{first_zone[zname]}'")
                continue
            first_zone[zname] = zkey
            records = raw[zkey].get("records") if isinstance(raw[zkey], dict) else None
            if not isinstance(records, dict):
                continue
            first: dict[str, str] = {}
            for rkey in records:
                if not isinstance(rkey, str):
                    continue
                rpath: FieldPath = ("dns", "zones", zkey, "records", rkey)
                try:
                    fq = check_record(rkey, zname)
                except BadName as e:
                    self.fail(rpath, f"record name '{rkey}' ({canonical(rkey, zname)}): {e}")
                    continue
                if fq in first:
                    self._twice(("dns", "zones", zkey, "records", first[fq]), rpath,
                                f"record '{rkey}' is the name '{first[fq]}' ({fq})")
                    continue
                first[fq] = rkey
                if fq in anywhere:  # a parent zone naming a record inside its child zone
                    self._twice(anywhere[fq], rpath, f"record '{rkey}' ({fq}) is also a "
                                f"record of zone '{anywhere[fq][2]}'")
                    continue
                anywhere[fq] = rpath

    def _twice(self, earlier: FieldPath, later: FieldPath, what: str) -> None:
        pos = self.source.where(earlier)
        self.fail(later, f"{what}, declared at {pos.file}:{pos.line}: names are compared "
                  "without case, trailing dot or the zone suffix; declare it once")

    def _local_path(self, path: FieldPath, value: str | None) -> str | None:
        """A key or credentials path on the operator's machine: `~` expanded, and a
        relative path taken from the directory of the inventory file that names it."""
        if value is None:
            return None
        p = os.path.expanduser(value)
        if not os.path.isabs(p):
            base = os.path.dirname(self.source.where(path).file)
            p = os.path.join(base, p) if base else p
        return p

    def _record(self, path: FieldPath, name: str, r: Any, zone: str) -> m.Record:
        values: tuple[str, ...] = ()
        if r.type == "CNAME":
            if canonical(name, zone) == canonical("@", zone):  # '@', or the zone's own name
                self.fail(path, f"a CNAME is not allowed at the zone apex ('{name}' is "
                          f"{canonical('@', zone)}; use A/AAAA records, or an ALIAS at "
                          "your provider)")
            if r.values is not None or r.value is None:
                self.fail(path, "a CNAME takes exactly one 'value' (a DNS name), not 'values'")
            elif is_ip(r.value):
                self.fail((*path, "value"), "a CNAME points at a DNS name, not an IP address (use type A)")
            elif "." not in r.value.rstrip("."):
                # a bare label is taken as absolute, so it would be a top-level domain
                self.fail((*path, "value"), f"'{r.value}' is a single label: a CNAME target is "
                          f"an absolute name (write '{r.value}.{zone}' for a name in this zone)")
            else:
                values = (r.value,)
        elif r.type in DATA_TYPES:
            if r.value is not None or r.values is None:
                self.fail(path, f"a{'n' if r.type in ('MX', 'SRV') else ''} {r.type} record "
                          f"takes 'values': a list ({_DATA_WORDS[r.type]})")
            else:
                canon: dict[str, int] = {}
                for i, v in enumerate(r.values):
                    try:
                        c = declared_value(r.type, v)
                    except BadValue as e:
                        self.fail((*path, "values", i), str(e))
                        continue
                    if c in canon:
                        self.fail((*path, "values", i), f"the same value as values[{canon[c]}] "
                                  f"({c}): each value once")
                    canon.setdefault(c, i)
                values = tuple(canon)
        else:
            if r.value is not None or r.values is None:
                self.fail(path, f"an {r.type} record takes 'values': a list of IP addresses")
            else:
                want = 4 if r.type == "A" else 6
                for i, v in enumerate(r.values):
                    try:
                        check_ip(v)
                    except ValueError as e:
                        self.fail((*path, "values", i), f"{e} (type {r.type})")
                        continue
                    if ipaddress.ip_address(v).version != want:
                        self.fail((*path, "values", i), f"{v} is not an IPv{want} address (type {r.type})")
                values = tuple(r.values)
        return m.Record(name=name, type=r.type, values=values, ttl=r.ttl)


_DATA_WORDS = {
    "TXT": "texts; plain text is split into strings of 255 octets, or quoted strings "
           "\"...\" \"...\" as in a zone file",
    "MX": "'PREFERENCE HOST', e.g. '10 mx1.example.org'",
    "SRV": "'PRIORITY WEIGHT PORT TARGET', e.g. '10 5 5060 sip.example.org'",
    "CAA": "'FLAGS TAG \"VALUE\"', e.g. '0 issue \"letsencrypt.org\"'",
}


# Debian's system accounts and other names a person must never be given.
RESERVED_ACCOUNTS = frozenset({
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp",
    "proxy", "www-data", "backup", "list", "irc", "gnats", "nobody", "nogroup", "sshd",
    "messagebus", "syslog", "bind", "unbound", "polkitd", "dnsmasq", "ntp", "postfix",
    "postgres", "mysql", "docker", "admin", "ubuntu", "debian", "ec2-user", "centos", "operator",
    "halt", "shutdown", "tss", "uuidd", "tcpdump", "landscape", "lxd", "pollinate", "usbmux",
})


# Groups that grant more than a directory (root, logs, devices, containers, sudo) or are a
# system's: never a team directory's group, which every team member is added to. The host
# refuses any other system group (gid below 1000) and any account's own group too.
PRIVILEGED_GROUPS = frozenset({
    "root", "sudo", "wheel", "adm", "admin", "staff", "shadow", "disk", "kmem", "tty", "docker",
    "lxd", "libvirt", "kvm", "systemd-journal", "systemd-network", "video", "render", "audio",
    "input", "dialout", "cdrom", "floppy", "tape", "plugdev", "netdev", "lpadmin", "sambashare",
    "ssh", "ssl-cert", "utmp", "operator", "users", "nogroup", "crontab", "mail", "www-data",
    "bluetooth", "scanner", "i2c", "gpio", "podman", "incus", "incus-admin", "_ssh",
})


def _overlay(base: ServiceDoc, top: ServiceDoc | None) -> ServiceDoc:
    """Fields set on `top` win over `base` (host over role)."""
    if top is None:
        return base
    # warnings off: a service's secret target ({file: ...}) is a tagged union pydantic's
    # serializer warns about, and dumps right
    merged = base.model_dump(by_alias=True, exclude_unset=True, warnings=False)
    merged.update(top.model_dump(by_alias=True, exclude_unset=True, warnings=False))
    return ServiceDoc.model_validate(merged, strict=False)

