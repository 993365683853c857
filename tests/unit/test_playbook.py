"""Playbook loading and validation (file:line:col errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.playbook import PlaybookError, load, parse
from tests.support.converge_cases import inventory


def test_shipped_bootstrap_playbook() -> None:
    pb = load("bootstrap-gpu-server")
    assert pb.steps == ("users", "banner", "login", "packages", "kernel", "updates", "python_envs", "services", "door", "cluster",
                        "sshd", "firewall")
    assert pb.hosts == ("bastions", "all")  # bastions carry the team's logins: they converge too
    inv, host = inventory()
    assert pb.select(inv) == (inv.node("jump"), host)
    assert [s.name for s in pb.build(inv, host)] == ["users", "banner", "login", "packages", "kernel", "updates", "python_envs", "services",
                                                 "door", "cluster", "sshd", "firewall"]


def test_select_narrows_to_patterns() -> None:
    inv, _ = inventory()
    pb = parse("hosts: role:gpu-server\nsteps: [users]\n", "x.yml")
    assert pb.select(inv) == ()
    with pytest.raises(KeyError):
        parse("hosts: all\nsteps: [users]\n", "x.yml").select(inv, ("nope",))


@pytest.mark.parametrize(("text", "message"), [
    ("hosts: all\nsteps: [users, firewal]\n", "x.yml:2:16: steps[1]: unknown step 'firewal'"),
    ("hosts: all\nstep: [users]\n", "x.yml:2:1: step: unknown key; did you mean 'steps'?"),
    ("hosts: all\n", "x.yml:1:1: steps: required field is missing"),
    ("hosts: all\nsteps: users\n", "x.yml:2:8: steps: a non-empty list of names"),
    ("hosts: [all, 'a b']\nsteps: [users]\n", "x.yml:1:14: hosts[1]: 'a b' is not a host selector"),
    ("hosts: all\nsteps: [users, users]\n", "steps: a step is listed twice"),
    ("hosts: all\nsteps: [users\n", "x.yml:3:1: not valid YAML"),
    ("- users\n", "x.yml:1:1: a playbook is a mapping"),
])
def test_bad_playbooks(text: str, message: str) -> None:
    with pytest.raises(PlaybookError) as e:
        parse(text, "x.yml")
    assert message in str(e.value)


def test_unknown_playbook_name_suggests(tmp_path: Path) -> None:
    with pytest.raises(PlaybookError, match="did you mean 'bootstrap-gpu-server'"):
        load("bootstrap-gpu")
    p = tmp_path / "mine.yml"
    p.write_text("hosts: gpu1\nsteps: [services]\n")
    assert load(str(p)).name == "mine"


def test_bastions_selector_and_apply_waves() -> None:
    from pathlib import Path

    from provision.inventory import load_inventory
    from provision.playbook import waves

    p = Path(__file__).parent / "_waves.yml"
    p.write_text("""version: 1
bastions:
  edge: {address: 203.0.113.1, allow_ssh_from: [203.0.113.0/24]}
  inner: {address: 10.0.0.1, via: edge, egress: [10.0.0.1/32]}
hosts:
  gpu1: {address: 10.0.1.5, via: inner}
  gpu2: {address: 10.0.1.6, via: edge, ssh_from: [10.0.0.0/8]}
""")
    try:
        inv = load_inventory(p)
    finally:
        p.unlink()
    pb = parse("hosts: [bastions, all]\nsteps: [users]\n", "x.yml")
    chosen = pb.select(inv)
    assert {h.name for h in chosen} == {"edge", "inner", "gpu1", "gpu2"}
    assert [[h.name for h in w] for w in waves(chosen, lambda h: h)] == [["edge"], ["inner"], ["gpu1", "gpu2"]]
    assert [h.name for h in inv.select(["bastions"])] == ["edge", "inner"]
    only_hosts = parse("hosts: all\nsteps: [users]\n", "x.yml").select(inv)
    assert [[h.name for h in w] for w in waves(only_hosts, lambda h: h)] == [["gpu1", "gpu2"]]
