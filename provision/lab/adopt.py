"""`provision lab adopt`: a user's own inventory mapped onto the lab, as data (pure).

The inventory's hosts become the lab's GPU hosts (in the order the file declares them),
its bastion the lab's bastion, its zones zones of the lab's BIND, its team people with
keys of the lab's. What changes in the copy is what ties the inventory to the real world:
addresses, the login (user, port, identity_file, known_hosts), who may SSH to the bastion
(the lab's operator segment), the DNS provider and its TSIG key, the ACME CA (the lab's
Pebble), where Python packages come from (the lab has no Internet: its own index,
`pyindex.py`) and `public_address` (dropped: the lab has no public address, and a public
zone's `from_hosts` would otherwise put the real one in the lab's zone). Everything else is
left as written. What the lab cannot stand for (a second bastion, a chain of bastions,
EC2 instances and security groups, a package the lab's index cannot serve) is reported,
never silently dropped.

`adopt` returns the changes as field paths and values; `provision/lab/adopt_write.py`
writes them into a copy of the file with ruamel.yaml (comments and order kept).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from provision.frozen import frozen
from provision.inventory.catalog import CATALOG

from . import plan as P
from . import pyindex as X

ADMIN = "admin"  # the lab's login user (passwordless sudo, the lab's key)
# fields every zone has; the rest belong to its provider and are replaced by rfc2136's
ZONE_COMMON = ("records", "cutover_above_ttl", "closed_migration_days", "visibility",
               "from_hosts")

Path_ = tuple[str | int, ...]


@frozen
class Change:
    path: Path_
    value: Any          # the new value; `DELETE` removes the field
    why: str


@frozen
class Unfit:
    path: Path_
    why: str


DELETE = object()


@frozen
class LabView:
    """What of the lab the mapping needs (made from a LabPlan and the adopt directory)."""

    gpus: tuple[tuple[str, str, str], ...]   # (lab host, ipv4, ipv6), gpu1..N
    bastion4: str
    bastion6: str
    bastion_prv4: str
    bastion_prv6: str
    operator_nets: tuple[str, ...]           # the operator's segment (v4, v6)
    ns1: str
    resolver: str
    identity: str
    known_hosts: str
    tsig_key: str                            # a copy in the adopt directory (the key rule)
    venv: str                                # the operator's venv, bound into every host
    acme_ca: str
    acme_bundle: str
    acme_caa: str
    team_keys: dict[str, tuple[str, str]]    # person -> (private key path, public key)
    index_url: str = ""                      # the lab's package index (`pyindex.py`)
    dists: tuple[X.Dist, ...] = field(default=())  # what it can serve: the venv's
    python: str = "3"                        # the version of the hosts' python3
    wheels: tuple[X.Dist, ...] = field(default=())  # --wheels DIR's, preferred to the venv's
    tags: frozenset[str] = frozenset()       # the wheel tags the hosts' python3 installs


def lab_view(plan: P.LabPlan, *, tsig_key: str, team_keys: dict[str, tuple[str, str]],
             dists: tuple[X.Dist, ...] = (), python: str = "3",
             wheels: tuple[X.Dist, ...] = (), tags: frozenset[str] = frozenset()) -> LabView:
    b = plan.node("bastion")
    prv = b.on("prv")
    assert prv is not None
    return LabView(
        gpus=tuple((n.name, n.primary.ipv4, n.primary.ipv6) for n in plan.gpu_hosts),
        bastion4=b.primary.ipv4, bastion6=b.primary.ipv6,
        bastion_prv4=prv.ipv4, bastion_prv6=prv.ipv6,
        operator_nets=(plan.subnet4("pub"), plan.subnet6("pub")),
        ns1=plan.address("ns1"), resolver=plan.address("resolver"),
        identity=plan.paths["identity"], known_hosts=plan.paths["known_hosts"],
        tsig_key=tsig_key, venv=plan.venv,
        acme_ca=P.pebble_directory(plan), acme_bundle=plan.paths["pebble_bundle"],
        acme_caa=P.PEBBLE_CAA_IDENTITY, team_keys=team_keys,
        index_url=X.index_url(plan.address("resolver", "prv")), dists=dists, python=python,
        wheels=wheels, tags=tags)


@frozen
class Adoption:
    hosts: dict[str, str]            # the inventory's host -> the lab's host
    bastion: str | None              # the inventory's bastion that is the lab's
    zones: tuple[str, ...]           # zones the lab's BIND must serve
    changes: tuple[Change, ...]
    unfit: tuple[Unfit, ...]
    packages: tuple[str, ...] = ()   # the distributions the lab's index must serve (names)
    served: tuple[X.Dist, ...] = ()  # which: a wheel of --wheels DIR, or the venv's to repack


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _via(entry: dict[str, Any]) -> list[str]:
    v = entry.get("via")
    return [] if v is None else [v] if isinstance(v, str) else list(v)


def placement(doc: dict[str, Any]) -> tuple[str | None, list[str], list[Unfit]]:
    """(the bastion the lab's stands for, the hosts the lab's GPU hosts stand for, in
    order, what cannot be placed). Independent of the lab's size: `lab up --gpus` takes
    len(hosts)."""
    bastions = _map(doc.get("bastions"))
    hosts = _map(doc.get("hosts"))
    unfit: list[Unfit] = []
    used = [b for h in hosts.values() for b in _via(_map(h))[:1]]
    chosen = next((b for b in [*used, *bastions] if b in bastions and not _via(_map(bastions[b]))),
                  None)
    for name, b in bastions.items():
        if _via(_map(b)):
            unfit.append(Unfit(("bastions", name), f"bastion {name} is reached through "
                               f"{', '.join(_via(_map(b)))}: the lab has one bastion, in front "
                               "of its GPU hosts; left as written"))
        elif name != chosen:
            unfit.append(Unfit(("bastions", name), f"bastion {name}: the lab has one bastion "
                               f"and {chosen} is it; left as written"))
    placed = []
    for name, h in hosts.items():
        via = _via(_map(h))
        if len(via) > 1:
            unfit.append(Unfit(("hosts", name, "via"), f"host {name} is reached through a chain "
                               f"of {len(via)} bastions ({', '.join(via)}): the lab has one; "
                               "left as written (unreachable in the lab)"))
        elif via and via[0] != chosen:
            unfit.append(Unfit(("hosts", name, "via"), f"host {name} is behind bastion {via[0]}, "
                               "which the lab does not stand for; left as written "
                               "(unreachable in the lab)"))
        elif not via and chosen is None:
            unfit.append(Unfit(("hosts", name), f"host {name}: the lab's GPU hosts are reached "
                               "through its bastion and the inventory declares none; left as "
                               "written (unreachable in the lab)"))
        else:
            placed.append(name)
    return chosen, placed, unfit


def _declared_envs(doc: dict[str, Any]) -> list[tuple[Path_, str, dict[str, Any]]]:
    out: list[tuple[Path_, str, dict[str, Any]]] = []
    for name, env in _map(doc.get("python_envs")).items():
        out.append((("python_envs", name), name, _map(env)))
    for section in ("roles", "hosts"):
        for owner, entry in _map(doc.get(section)).items():
            for name, env in _map(_map(entry).get("python_envs")).items():
                out.append(((section, owner, "python_envs", name), name, _map(env)))
    return out


def _services(doc: dict[str, Any]) -> list[tuple[Path_, str, Any]]:
    return [((section, owner, "services", name), name, svc)
            for section in ("roles", "hosts")
            for owner, entry in _map(doc.get(section)).items()
            for name, svc in _map(_map(entry).get("services")).items()]


PUBLIC_WHY = ("the lab has no public address (a public zone's from_hosts would put the real "
              "one in the lab's zone): its records hold the lab's address")


def _moved(entry: dict[str, Any], v4: str, v6: str) -> dict[str, str]:
    """The addresses an inventory's records may hold for a machine (`address`,
    `public_address`) -> the lab's, of the same family."""
    out = {}
    for key in ("address", "public_address"):
        old = entry.get(key)
        if isinstance(old, str) and old:
            out[old] = v6 if ":" in old else v4
    return out


def adopt(doc: dict[str, Any], lab: LabView) -> Adoption:
    """The changes that make `doc` (the inventory's data, as loaded) converge in the lab."""
    bastion, placed, unfit = placement(doc)
    changes: list[Change] = []

    def set_(path: Path_, value: Any, why: str) -> None:
        changes.append(Change(path, value, why))

    if len(placed) > len(lab.gpus):
        for name in placed[len(lab.gpus):]:
            unfit.append(Unfit(("hosts", name), f"host {name}: the running lab has "
                               f"{len(lab.gpus)} GPU hosts (`provision lab down`, then adopt "
                               f"again for a lab of {len(placed)}); left as written"))
        placed = placed[:len(lab.gpus)]
    hosts = {name: lab.gpus[i][0] for i, name in enumerate(placed)}
    addr = {name: (lab.gpus[i][1], lab.gpus[i][2]) for i, name in enumerate(placed)}
    # a record that holds a host's address (or its public one) follows the host
    old_addresses: dict[str, str] = {}
    for n in placed:
        h = _map(_map(doc.get("hosts")).get(n))
        old_addresses.update(_moved(h, *addr[n]))
    if bastion is not None:
        old_addresses.update(_moved(_map(_map(doc.get("bastions")).get(bastion)),
                                    lab.bastion4, lab.bastion6))

    d = _map(doc.get("defaults"))
    set_(("defaults", "user"), ADMIN, "the lab's login user")
    set_(("defaults", "identity_file"), lab.identity, "the lab's key")
    set_(("defaults", "known_hosts"), lab.known_hosts, "the lab's host keys")
    if "port" in d:
        set_(("defaults", "port"), 22, "the lab's sshd")

    def login(path: Path_, entry: dict[str, Any]) -> None:
        if "user" in entry:
            set_((*path, "user"), ADMIN, "the lab's login user")
        if "port" in entry:
            set_((*path, "port"), 22, "the lab's sshd")
        if "identity_file" in entry:
            set_((*path, "identity_file"), lab.identity, "the lab's key")

    if bastion is not None:
        b = _map(_map(doc.get("bastions")).get(bastion))
        set_(("bastions", bastion, "address"), lab.bastion4, "the lab's bastion")
        login(("bastions", bastion), b)
        if "public_address" in b:
            set_(("bastions", bastion, "public_address"), DELETE, PUBLIC_WHY)
        if "allow_ssh_from" in b:
            set_(("bastions", bastion, "allow_ssh_from"), list(lab.operator_nets),
                 "the lab's operator segment (else the bastion's firewall shuts the operator out)")
        if "egress" in b:
            set_(("bastions", bastion, "egress"), [f"{lab.bastion_prv4}/32", f"{lab.bastion_prv6}/128"],
                 "the bastion's address on the lab's private segment")
        if "aws" in b:
            unfit.append(Unfit(("bastions", bastion, "aws"), f"bastion {bastion}: the lab has no "
                               "EC2 instance; `sg` commands reach no cloud from the lab"))
    for name in placed:
        h = _map(_map(doc.get("hosts")).get(name))
        set_(("hosts", name, "address"), addr[name][0], f"the lab's {hosts[name]}")
        login(("hosts", name), h)
        if "public_address" in h:
            set_(("hosts", name, "public_address"), DELETE, PUBLIC_WHY)
        if not _via(h) and bastion is not None:
            set_(("hosts", name, "via"), bastion, "the lab's GPU hosts are behind its bastion")
        if "aws" in h:
            unfit.append(Unfit(("hosts", name, "aws"), f"host {name}: the lab has no EC2 "
                               "instance; `sg` commands reach no cloud from the lab"))
    if "aws" in doc:
        unfit.append(Unfit(("aws",), "security groups: the lab has no cloud; `provision sg` "
                           "is not for the lab (left as written)"))

    for person in _map(doc.get("team")):
        if person in lab.team_keys:
            private, public = lab.team_keys[person]
            keys = list(_map(_map(doc.get("team")).get(person)).get("keys") or [])
            if public not in keys:
                set_(("team", person, "keys"), [*keys, public],
                     f"a key of the lab's for {person} (theirs kept)")
            set_(("team", person, "identity_file"), private, f"{person}'s lab key")

    for cname, cluster in _map(doc.get("clusters")).items():
        for hname in _map(_map(cluster).get("addresses")):
            if hname in addr:
                set_(("clusters", cname, "addresses", hname), list(addr[hname]),
                     f"the lab's {hosts[hname]}")

    zones: list[str] = []
    dns = _map(doc.get("dns"))
    if "resolvers" in dns or _map(dns.get("zones")):
        # also when none are declared: the zones' nameserver is ns1.lab.test, found through it
        set_(("dns", "resolvers"), [lab.resolver], "the lab's resolver")
    for zname, zone in _map(dns.get("zones")).items():
        z = _map(zone)
        bare = str(zname).rstrip(".").lower()
        if bare == P.ZONE or bare.endswith("." + P.ZONE) or P.ZONE.endswith("." + bare):
            unfit.append(Unfit(("dns", "zones", zname), f"zone {zname} overlaps the lab's own "
                               f"{P.ZONE}; left as written"))
            continue
        zones.append(bare)
        for key in z:
            if key not in ZONE_COMMON and key != "provider":
                set_(("dns", "zones", zname, key), DELETE, f"{z.get('provider')}'s field")
        set_(("dns", "zones", zname, "provider"), P.DNS_PROVIDER, "the lab's BIND on ns1")
        set_(("dns", "zones", zname, "server"), lab.ns1, "the lab's BIND on ns1")
        set_(("dns", "zones", zname, "tsig_key_file"), lab.tsig_key, "the lab's TSIG key")
        if z.get("visibility") == "private":
            set_(("dns", "zones", zname, "visibility"), "public",
                 "the lab's BIND answers every lab host")
        for rname, rec in _map(z.get("records")).items():
            for i, r in enumerate(rec if isinstance(rec, list) else [rec]):
                vals = _map(r).get("values")
                if isinstance(vals, list) and any(str(v) in old_addresses for v in vals):
                    path: Path_ = ("dns", "zones", zname, "records", rname,
                                   *((i,) if isinstance(rec, list) else ()), "values")
                    set_(path, [old_addresses.get(str(v), v) for v in vals],
                         "a host's address, now the lab's")

    doors = any(isinstance(s, dict) and s.get("https") for _, _, s in _services(doc))
    if "acme" in doc or doors:
        acme = _map(doc.get("acme"))
        if not acme:
            set_(("acme",), {"ca": lab.acme_ca, "ca_bundle": lab.acme_bundle,
                             "caa_identities": [lab.acme_caa]}, "the lab's CA (Pebble)")
        else:
            set_(("acme", "ca"), lab.acme_ca, "the lab's CA (Pebble)")
            set_(("acme", "ca_bundle"), lab.acme_bundle, "the lab's CA's certificate")
            set_(("acme", "caa_identities"), [lab.acme_caa], "the lab's CA's CAA name")
            if "eab" in acme:
                set_(("acme", "eab"), DELETE, "Pebble takes no external account binding")

    declared = set()
    dists = {d.name: d for d in lab.dists}
    wheels = {d.name: d for d in lab.wheels}
    served: dict[tuple[str, str], X.Dist] = {}
    for path, name, env in _declared_envs(doc):
        declared.add(name)
        set_((*path, "index_url"), lab.index_url, f"the lab's package index, not "
             f"{env.get('index_url') or 'PyPI'} (the lab has no Internet): the venv that ran "
             "`lab up`, its distributions as wheels")
        if "extra_index_urls" in env:
            set_((*path, "extra_index_urls"), DELETE, "the lab's index serves them all")
        reqs = [str(r) for r in env.get("packages") or [] if isinstance(r, str)]
        need, missing = X.closure(reqs, dists, lab.python, wheels, lab.tags)
        served.update({(d.name, d.wheel): d for d in need})
        if missing:
            source = (f"the wheels of --wheels and the venv that ran `lab up` ({lab.venv}), "
                      "which lack" if wheels else
                      f"the venv that ran `lab up` ({lab.venv}), which lacks")
            unfit.append(Unfit((*path, "packages"), f"python env {name}: the lab's index serves "
                               f"{source} {'; '.join(missing)}: pip will fail for this env in "
                               "the lab (download it with the hosts' Python into a --wheels "
                               "DIR, or install it into that venv, and adopt again)"))
    for path, name, svc in _services(doc):
        entry = CATALOG.get(name)
        if entry is None or entry.env is None or entry.env in declared:
            continue
        if isinstance(svc, dict) and "venv" in svc:
            continue  # a path of this machine's (the lab hosts see its files) or an env's
        set_((*path, "venv"), lab.venv, f"{entry.env} from the venv bound into every lab host "
             "(`pip install provision[lab]`), not from PyPI")
    return Adoption(hosts=hosts, bastion=bastion, zones=tuple(zones),
                    changes=tuple(changes), unfit=tuple(unfit),
                    packages=tuple(dict.fromkeys(d.name for d in served.values())),
                    served=tuple(served.values()))


def apply_changes(data: Any, changes: tuple[Change, ...], new_map: Any = dict) -> None:
    """Set every change in `data` (a plain or a ruamel.yaml mapping), making the mappings
    a path needs (`new_map`: their type) and replacing a null service with a mapping."""
    for c in changes:
        node = data
        for key in c.path[:-1]:
            nxt = node[key] if isinstance(key, int) else node.get(key)
            if not isinstance(nxt, dict):
                nxt = new_map()
                node[key] = nxt
            node = nxt
        last = c.path[-1]
        if c.value is DELETE:
            if isinstance(node, dict):
                node.pop(last, None)
        else:
            node[last] = c.value
