"""DNS zones: records declared (names, types, values), the provider's settings and what it
supports, visibility, records generated from the hosts, and the owner id."""

from __future__ import annotations

import ipaddress
import os
from typing import Any

from provision.dnsdata import providers
from provision.dnsdata.names import BadName, canonical, check_record
from provision.dnsdata.owner import default_owner
from provision.dnsdata.owner import problem as owner_problem
from provision.dnsdata.provider_settings import ProviderSettings
from provision.dnsdata.rdata import DATA_TYPES, BadValue
from provision.dnsdata.rdata import declared as declared_value
from provision.dnsdata.secrets import placement_problem

from .. import from_hosts as gen
from .. import model as m
from ..fields import check_ip, is_ip
from ..schema import FromHostsDoc, ZoneDoc
from ..source import FieldPath
from .context import Section


def check_zone_key(key: str) -> str:
    """A zone key as the model spells it (the schema lowercases and strips the dot)."""
    return key.strip().rstrip(".").lower()


_DATA_WORDS = {
    "TXT": "texts; plain text is split into strings of 255 octets, or quoted strings "
           "\"...\" \"...\" as in a zone file",
    "MX": "'PREFERENCE HOST', e.g. '10 mx1.example.org'",
    "SRV": "'PRIORITY WEIGHT PORT TARGET', e.g. '10 5 5060 sip.example.org'",
    "CAA": "'FLAGS TAG \"VALUE\"', e.g. '0 issue \"letsencrypt.org\"'",
}


class Zones(Section):
    def resolve(self) -> m.Dns | None:
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
            records += self._from_hosts(zpath, zname, z.from_hosts, records, z.visibility)
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
                    declared: list[m.Record], visibility: str = "public") -> list[m.Record]:
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
        hosts = [gen.HostIn(n, gen.record_address(h.address, h.public_address, visibility),
                            tuple(h.roles)) for n, h in self.doc.hosts.items()]
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
            values[f] = self.ctx.local_path((*zpath, f), values[f])
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
