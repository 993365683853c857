"""Docker's findings (pure): published ports and who reaches them (from DOCKER-USER)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from provision.facts import docker as D
from provision.finding import Finding
from provision.firewall import parse as FP
from provision.firewall import verdict as FV
from provision.firewall.rules import Family
from provision.inventory.model import Host, Inventory

from .join import SgRule, reach_level, sg_space


def docker_findings(inv: Inventory, host: Host, published: Sequence[D.Published],
            lives: Mapping[int, FP.LiveFilter | None],
            sg_rules: Sequence[SgRule] | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    rows: list[dict[str, Any]] = []
    out: list[Finding] = []
    public = {s.port: s for s in host.services if s.expose.kind == "public"}
    for p in published:
        fam: Family = 6 if ":" in p.address else 4
        cidrs: tuple[str, ...] = ()
        if p.is_loopback:
            level = "host"
        else:
            live = lives.get(fam)
            if live is not None and live.chain("DOCKER-USER") is not None:
                space = FV.admitted(live, FV.Packet(p.proto, p.port, dnat=True), start="DOCKER-USER")
            else:
                space = FV.AddressSet.everything(fam)
            space = space & sg_space(sg_rules, p.proto, p.port, fam)
            svc = public.get(p.port)
            level = reach_level(space, True, FV.AddressSet(fam),
                           FV.AddressSet.of(fam, svc.expose.sources if svc else ()))
            cidrs = space.cidrs()
        rows.append({"container": p.container, "address": p.address, "port": p.port,
                     "proto": p.proto, "target": p.target, "reach": level, "sources": list(cidrs)})
        if level in ("undeclared", "internet"):
            out.append(Finding("error", "docker-published-exposed", f"{host.name}:{p.port}/{p.proto}",
                               f"container {p.container} publishes {p.address}:{p.port} -> {p.target}, "
                               f"reachable from {', '.join(cidrs[:4])} (Docker bypasses INPUT)",
                               "publish on 127.0.0.1 (-p 127.0.0.1:PORT:PORT), or declare a public "
                               "service on that port and re-apply (PROVISION-DOCKER restricts it)"))
        else:
            out.append(Finding("info", "docker-published", f"{host.name}:{p.port}/{p.proto}",
                               f"container {p.container} publishes {p.address}:{p.port} -> {p.target} "
                               f"(reach: {level})", ""))
    return rows, out
