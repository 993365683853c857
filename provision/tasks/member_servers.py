"""Per-user servers against the host as it is (pure): who may have one, which GPUs exist,
which instances are left over from members who left."""

from __future__ import annotations

from fnmatch import fnmatchcase

from provision.facts import Facts
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
        if s.gpus and "nvidia-smi" in facts.has:
            count = len(facts.gpus)
            missing = sorted(g for g in s.gpus if g >= count)
            if missing:
                listed = f"0-{count - 1}" if count else "none"
                raise Refused(f"services: {s.member}'s gpus {missing} do not exist on this host "
                              f"(nvidia-smi lists {count} GPU(s): {listed})")


def gpu_warnings(host: Host, facts: Facts) -> list[str]:
    """What cannot be checked: `gpus` given on a host without nvidia-smi."""
    if "nvidia-smi" in facts.has:
        return []
    who = [s.member for s in host.services if s.member and s.gpus]
    return [f"gpus of {', '.join(who)} not checked: no nvidia-smi on this host"] if who else []


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
