"""Pure tests of the sshd and firewall steps: facts in, commit-confirmed actions out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from provision.facts import Facts, FileFact, UnitFact
from provision.firewall.rules import RenderError
from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from provision.playbook import load as load_playbook
from provision.render import render_host
from provision.steps.commit import CommitConfirmed
from provision.steps.files import sha256
from provision.steps.firewall import FirewallStep
from provision.steps.sshd import SshdStep

FIXTURE = Path(__file__).parent.parent / "fixtures" / "example.yml"
UNIT = "provision-firewall.service"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIXTURE)


def facts_for(artifacts: tuple[object, ...] = (), *, docker: bool = False,
              unit: tuple[str, str] | None = None, content: dict[str, str] | None = None) -> Facts:
    files = {}
    for a in artifacts:
        text = (content or {}).get(a.path, a.content)  # type: ignore[attr-defined]
        files[a.path] = FileFact(a.path, "file", sha256(text), a.mode,  # type: ignore[attr-defined]
                                 a.owner, a.group, 0, text)  # type: ignore[attr-defined]
    units = {}
    if unit is not None:
        units[UNIT] = UnitFact(UNIT, "loaded", unit[0], unit[1], False, None)
    return Facts.of(uid=0, files=files, units=units, docker=docker)


def test_sshd_in_place_is_no_change(inv: Inventory) -> None:
    step = SshdStep.build(inv, inv.node("gpu1"))
    assert step.diff(facts_for((step.artifact,))) == []


def test_fault_injected_sshd_lines_reach_the_commit(inv: Inventory) -> None:
    """tests/support/faults.py (the lab's lockout tests) changes what the step installs."""
    from tests.support.faults import sshd_with_extra

    plain = SshdStep.build(inv, inv.node("gpu1"))
    hooked = sshd_with_extra(plain, ["AllowUsers nobody"])
    assert hooked.content.startswith(plain.content)
    assert hooked.content.endswith("AllowUsers nobody\n")
    (a,) = hooked.diff(facts_for((plain.artifact,)))
    assert isinstance(a, CommitConfirmed) and a.files[0].write.old == plain.content


def test_firewall_converged_is_no_change(inv: Inventory) -> None:
    step = FirewallStep.build(inv, inv.node("gpu1"))
    arts = step.selected(facts_for())
    assert step.diff(facts_for(arts, unit=("enabled", "active"))) == []


@pytest.mark.parametrize("unit", [None, ("disabled", "active"), ("enabled", "inactive")])
def test_firewall_unit_not_running_means_rules_reloaded(inv: Inventory,
                                                        unit: tuple[str, str] | None) -> None:
    step = FirewallStep.build(inv, inv.node("gpu1"))
    arts = step.selected(facts_for())
    (a,) = step.diff(facts_for(arts, unit=unit))
    assert isinstance(a, CommitConfirmed)
    assert not any(s.changed for s in a.files)


def test_firewall_one_changed_file_stages_all_marks_one(inv: Inventory) -> None:
    step = FirewallStep.build(inv, inv.node("gpu1"))
    arts = step.selected(facts_for())
    v4 = next(x for x in arts if x.kind == "iptables-v4")
    (a,) = step.diff(facts_for(arts, unit=("enabled", "active"), content={v4.path: "old\n"}))
    assert isinstance(a, CommitConfirmed)
    assert [s.write.path for s in a.files if s.changed] == [v4.path]
    assert a.writes[0].old == "old\n"


def _locked_out(inv: Inventory) -> Inventory:
    """gpu2 has no ssh_from and its bastion no egress: SSH from nowhere."""
    jump = replace(inv.node("jump"), egress=())
    return replace(inv, bastions=(jump,))


def test_render_refuses_a_firewall_without_operator_ssh(inv: Inventory) -> None:
    bad = _locked_out(inv)
    gpu2 = bad.node("gpu2")
    with pytest.raises(RenderError, match="lock the operator out"):
        render_host(bad, gpu2)
    with pytest.raises(RenderError, match="lock the operator out"):
        FirewallStep.build(bad, gpu2)
    # the test-only override renders it (and the rules then accept SSH from nowhere)
    step = FirewallStep.build(bad, gpu2, allow_lockout=True)
    v4 = next(a for a in step.artifacts if a.kind == "iptables-v4")
    assert "--dport 22" not in v4.content


def test_playbooks_have_the_hardening_steps() -> None:
    harden = load_playbook("harden")
    assert harden.steps == ("sshd", "firewall")
    boot = load_playbook("bootstrap-gpu-server")
    assert boot.steps[-2:] == ("sshd", "firewall")
