"""Services' secrets on a host (pure): the unit names paths only, the diff compares keyed
fingerprints, a changed secret restarts only the service that uses it, a converged host
plans nothing, and no plan, --json or rendered text holds a value."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from provision.commands.converge_output import _change
from provision.errors import OperationError
from provision.facts import parse
from provision.inventory import load_inventory
from provision.inventory.model import Inventory
from provision.secretdata.vault import Sealed, Vault
from provision.secrets.delivery import SALT, deliveries, fingerprint
from provision.steps import script
from provision.steps.actions import Mkdir, RestartUnit, WriteSecret
from provision.steps.services import ServicesStep
from tests.support.probe_records import answer, file_rec, unit_block, user_rec

FIXTURE = Path(__file__).parent.parent / "fixtures" / "secrets" / "inventory.yml"
VALUES = {"hf_token": b"hf_FIXTURE_PLAINTEXT_1", "api_key": b"sk-FIXTURE-PLAINTEXT-2"}
SALT_HEX = "ab" * 32
UNITS = ("trainer", "web", "plain")


def _inv(values: dict[str, bytes] = VALUES) -> Inventory:
    inv = load_inventory(FIXTURE)
    return dataclasses.replace(inv, vault=Vault({n: Sealed(n, v) for n, v in values.items()}))


def _step(values: dict[str, bytes] = VALUES) -> ServicesStep:
    inv = _inv(values)
    return ServicesStep.build(inv, inv.hosts[0])


def _converged(salt: bool = True) -> list[str]:
    s = _step()
    recs = [file_rec(a.path, a.content, f"{a.mode:o}", a.owner, a.group, 1700000000)
            for a in s.artifacts]
    recs += [user_rec(f"svc-{n}", 990 + i, f"/var/lib/provision-services/svc-{n}",
                      "/usr/sbin/nologin", comment="provision service") for i, n in enumerate(UNITS)]
    recs += [r for n in UNITS for r in unit_block(f"provision-{n}.service", since=1700000100)]
    recs.append(f"credsalt\t{SALT_HEX if salt else 'absent'}")
    recs += ["creddir\t/etc/provision/credentials\t700\troot"]
    for svc in s.host.services:
        recs.append(f"creddir\t/etc/provision/credentials/{svc.name}\t700\troot")
        for d in deliveries(svc, s.inv.vault):
            recs.append(f"credfile\t{d.path}\t400\troot\t"
                        f"{fingerprint(SALT_HEX, d.content.reveal())}")
    return recs


def test_the_probe_fingerprint_is_the_hosts_salt_then_the_content() -> None:
    # templates/facts/credentials.sh: { printf %s "$salt"; cat FILE; } | sha256sum
    assert fingerprint("ab", b"x") == hashlib.sha256(b"abx").hexdigest()


def test_units_name_paths_only() -> None:
    s = _step()
    units = {a.service: a.content for a in s.artifacts if a.kind == "unit"}
    assert ("EnvironmentFile=/etc/provision/credentials/trainer/hf_token.env"
            in units["provision-trainer.service"])
    assert ("LoadCredential=api-key:/etc/provision/credentials/web/api_key.cred"
            in units["provision-web.service"])
    assert "Environment=NCCL_DEBUG=INFO" in units["provision-trainer.service"]
    assert not any(v.decode() in text for v in VALUES.values() for text in units.values())


def test_converged_host_plans_nothing() -> None:
    assert _step().diff(parse(answer(*_converged()))) == []


def test_a_changed_secret_restarts_only_the_service_that_uses_it() -> None:
    acts = _step({**VALUES, "hf_token": b"hf_ROTATED"}).diff(parse(answer(*_converged())))
    assert [type(a).__name__ for a in acts] == ["WriteSecret", "RestartUnit"]
    assert acts[1] == RestartUnit("provision-trainer.service", "secret hf_token changed", (9000,))
    described = " ".join(a.describe() for a in acts)
    assert "secret hf_token of trainer changed" in described and "ROTATED" not in described


def test_fresh_host_gets_root_only_directories_then_the_files() -> None:
    recs = [r for r in _converged(salt=False) if not r.startswith(("creddir", "credfile"))]
    acts = _step().diff(parse(answer(*recs)))
    dirs = [a for a in acts if isinstance(a, Mkdir) and a.path.startswith("/etc/provision/cred")]
    assert {(a.path, a.mode, a.owner) for a in dirs} == {
        ("/etc/provision/credentials", 0o700, "root"),
        ("/etc/provision/credentials/trainer", 0o700, "root"),
        ("/etc/provision/credentials/web", 0o700, "root")}
    writes = [a for a in acts if isinstance(a, WriteSecret)]
    assert {a.path for a in writes} == {"/etc/provision/credentials/trainer/hf_token.env",
                                        "/etc/provision/credentials/web/api_key.cred"}
    assert writes[0].content.reveal() == b'HF_TOKEN="hf_FIXTURE_PLAINTEXT_1"\n'
    batch = script.build(acts)
    assert f"[ -s {SALT} ]" in batch and "provision_write" in batch
    assert "0400" in batch
    # the plan's lines and --json: names only
    changes = [_change("services", a) for a in acts]
    text = json.dumps([c.to_json() for c in changes]) + repr(acts) + "".join(
        x for c in changes for x in (*c.diff, c.subject))
    assert not any(v.decode() in text for v in VALUES.values())
    assert "<secret hf_token>" in repr(acts)


def test_a_secret_a_service_no_longer_uses_is_removed_and_restarts_it() -> None:
    recs = [*_converged(), "credfile\t/etc/provision/credentials/plain/old.env\t400\troot\t" + "0" * 64]
    acts = _step().diff(parse(answer(*recs)))
    assert [a.describe() for a in acts] == [
        "remove /etc/provision/credentials/plain/old.env",
        "systemctl restart provision-plain.service (secret old changed)"]


def test_env_value_with_a_newline_is_refused_naming_the_way_out() -> None:
    with pytest.raises(OperationError, match="give it to the service as a file") as e:
        _step({**VALUES, "hf_token": b"line1\nline2"}).diff(parse(answer(*_converged())))
    assert "line1" not in str(e.value)


def test_quotes_and_dollars_are_escaped_for_environment_file() -> None:
    s = _step({**VALUES, "hf_token": b'a"b$c\\d`e'})
    d = deliveries(s.host.services[0], s.inv.vault)[0]
    assert d.content.reveal() == b'HF_TOKEN="a\\"b\\$c\\\\d\\`e"\n'


def test_without_a_vault_the_step_fails_saying_only_plan_and_apply_decrypt() -> None:
    inv = load_inventory(FIXTURE)
    with pytest.raises(OperationError, match="only plan and apply decrypt"):
        ServicesStep.build(inv, inv.hosts[0]).diff(parse(answer(*_converged())))
