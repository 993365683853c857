"""Per-user servers against the host as it is (pure): who may have one, which GPUs exist,
which instances are left over from members who left."""

from __future__ import annotations

from fnmatch import fnmatchcase

from provision.facts import Facts
from provision.facts.gpus import Gpus
from provision.inventory.model import Host

from .refused import Refused


def check_members(host: Host, facts: Facts) -> None:
    """Refuse (nothing applied) a member whose name is a system account on this host, or
    whose `gpus` name a GPU that `nvidia-smi` does not list."""
    for s in host.services:
        if s.member is None:
            continue
        u = facts.users.get(s.member)
        if u is not None and u.system:
            raise Refused(f"services: refusing {s.unit_name}: '{s.member}' is a system account "
                          f"on this host (uid {u.uid}); a member's server must run as the "
                          "member's own account: give the team member another name")
        if s.gpus:
            missing_gpus(s.member, s.gpus, facts.gpus)


def missing_gpus(member: str, wanted: tuple[int, ...], gpus: Gpus) -> None:
    """Refuse `member`'s `gpus` that name an index the host's nvidia-smi does not list
    (naming what it lists). Nothing to refuse when it listed nothing it could be sure of:
    no nvidia-smi, or one that failed (`gpu_warnings` says so; audit reports why)."""
    if gpus.smi != "ok" and not gpus.devices:
        return
    have = sorted(d.index for d in gpus.devices)
    missing = sorted(g for g in wanted if g not in have)
    if not missing:
        return
    listed = ", ".join(str(i) for i in have) or "none"
    names = ", ".join(dict.fromkeys(d.name for d in gpus.devices))
    lost = len(gpus.off_the_bus)
    raise Refused(f"services: {member}'s gpus {missing} do not exist on this host "
                  f"(nvidia-smi lists {len(have)} GPU(s): {listed}"
                  + (f"; {names}" if names else "")
                  + (f"; {lost} more off the bus" if lost else "") + ")")


def gpu_warnings(host: Host, facts: Facts) -> list[str]:
    """What cannot be checked: `gpus` given on a host without nvidia-smi, or where it
    failed."""
    who = [s.member for s in host.services if s.member and s.gpus]
    if not who:
        return []
    g = facts.gpus
    if not g.present:
        return [f"gpus of {', '.join(who)} not checked: no nvidia-smi on this host"]
    if g.smi != "ok" and not g.devices:
        why = g.summary.removeprefix("gpus: ")
        return [f"gpus of {', '.join(who)} not checked: nvidia-smi failed ({why})"]
    return []


def retired_instances(host: Host, facts: Facts) -> list[str]:
    """Instances of this host's template units that run or are enabled for nobody listed."""
    wanted = {s.unit_name for s in host.services}
    patterns = {f"{t.removesuffix('@.service')}@?*.service"
                for s in host.services if (t := s.template_unit)}
    out = []
    for name, unit in sorted(facts.units.items()):
        if name in wanted or not any(fnmatchcase(name, p) for p in patterns):
            continue
        if unit.active or unit.unit_file_state in ("enabled", "enabled-runtime"):
            out.append(name)
    return out
