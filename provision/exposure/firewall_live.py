"""The live firewall's findings (pure): unreadable, bypassed, blocking a cluster, drifted."""

from __future__ import annotations

from provision.facts import iptables as IPT
from provision.finding import Finding
from provision.firewall import drift as FD
from provision.firewall import parse as FP
from provision.firewall.rules import Family, HostFirewall
from provision.inventory.model import Host
from provision.steps.verify import drops_peers, in_the_way


def firewall_findings(host: Host, fw: HostFirewall, ipt: IPT.IptablesSave,
              fam: Family) -> tuple[FP.LiveFilter | None, list[FD.Drift], list[Finding]]:
    status = ipt.status(fam)
    if status is None:
        return None, [], []
    if status != 0:
        d = FD.Drift(fam, "", "unreadable", f"ip{'6' if fam == 6 else ''}tables-save exited {status}")
        return None, [d], [Finding("warning", "firewall-unreadable", host.name, d.describe(),
                                   "install iptables; audit assumes no firewall")]
    try:
        live = FP.parse_save(ipt.text(fam), fam)
    except FP.ParseError as e:
        d = FD.Drift(fam, "", "unreadable", str(e))
        return None, [d], [Finding("warning", "firewall-unreadable", host.name, d.describe(),
                                   "report this output; audit assumes no firewall")]
    rs = fw.v4 if fam == 4 else fw.v6
    drifts = FD.drift(rs, live)
    drifts += FD.drift(fw.docker_v4 if fam == 4 else fw.docker_v6, live, hook_required=False)
    found = [Finding("error", "firewall-bypassed", host.name, f"IPv{fam}: {w}",
                     "remove that rule or disable the tool (`ufw disable`), then re-apply")
             for w in in_the_way(live, rs.chain, rs.hook)]
    found += [Finding("error", "cluster-blocked", host.name, f"IPv{fam}: {w}",
                      "remove that rule (or the tool that adds it): the cluster's members must "
                      "reach each other")
              for w in drops_peers(live, rs)]
    fix = "re-apply (`provision apply --playbook harden`), or run provision-firewall on the host"
    for d in drifts:
        severe = d.kind in ("missing-chain", "flushed", "unhooked")
        found.append(Finding("error" if severe else "warning", f"firewall-{d.kind}", host.name,
                             d.describe(), fix if severe else
                             "declare what it is for in the inventory and re-apply, or re-apply to remove it"))
    return live, drifts, found
