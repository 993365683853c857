"""sshd's findings (pure): the live `sshd -T` against the rendered hardening baseline."""

from __future__ import annotations

from provision.facts import sshd_config as SC
from provision.facts import sshd_effective as SSHD
from provision.finding import Finding
from provision.inventory.model import Host, Inventory
from provision.render import SSHD_DROPIN, render_host
from provision.steps import sshd_effect as E


def sshd_baseline(inv: Inventory, host: Host) -> dict[str, str]:
    """The hardening baseline: the settings of the rendered sshd drop-in, lower-case keys."""
    (dropin,) = [a for a in render_host(inv, host) if a.kind == "sshd"]
    return E.hardened(dropin.content)


def sshd_findings(host: Host, baseline: dict[str, str], sshd: SSHD.SshdEffective,
                   cfg: SC.SshdConfig) -> list[Finding]:
    """A way in with a password that the hardening closes is an error, named with the file
    and line that opens it; any other difference from the baseline is a warning."""
    if sshd.status is None:
        return []
    if sshd.status != 0:
        return [Finding("warning", "sshd-unreadable", host.name,
                        f"sshd -T exited {sshd.status}: {sshd.error.strip()[:200]}",
                        "run `sshd -t` on the host")]
    out = []
    weak = E.weaknesses(sshd, cfg, baseline)
    for w in weak:
        out.append(Finding("error", "sshd-weak", host.name,
                           f"{w.describe()}; the hardening baseline says "
                           f"{w.key} {baseline.get(w.key, 'no')}",
                           "remove or change that line (provision never edits files it does not "
                           "own), then re-apply (`provision apply --playbook harden`)"))
    weak_keys = {w.key for w in weak}
    for m in E.compare(baseline, sshd, cfg, SSHD_DROPIN):
        if m.key in weak_keys:
            continue
        out.append(Finding("warning", "sshd-drift", host.name, m.describe(),
                           "re-apply (`provision apply --playbook harden`); where another file "
                           "or a Match block wins, change that line"))
    return out
