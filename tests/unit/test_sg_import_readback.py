"""`provision import sg` reads its own output back (issue 34, class 5).

The corpus `tests/fixtures/sg_import/` holds provider answers (its README says how a
case reads); each runs through the real CLI with AWS stubbed out. The comparison itself
(`provision.cloud.readback.differences`) is tested below on inventories that differ from
the answer in one way each.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.cloud import adopt as adopt_mod
from provision.cloud.readback import differences, read_back
from provision.cloud.rules import LiveGroup, live_groups, plan_groups
from provision.commands import import_sg
from provision.inventory.build import build
from provision.inventory.source import load_yaml_text
from provision.text import unsafe

CASES = sorted((Path(__file__).parent.parent / "fixtures" / "sg_import").glob("*.yml"))
PREVIOUS = "# the previous file\nversion: 1\n"


def _answer(path: Path) -> tuple[int, str, dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    m = re.match(r"# expect: (\d) (.*)\n", text)
    assert m, f"{path.name} lacks an '# expect: EXIT REGEX' header"
    return int(m[1]), m[2], yaml.safe_load(text)


class _Ec2:
    """The two describe calls `fetch_for_import` makes, answered from a case (one page)."""

    def __init__(self, answer: dict[str, Any]):
        self.answer = answer

    @staticmethod
    def _ids(filters: list[dict[str, Any]]) -> set[str] | None:
        return next((set(f["Values"]) for f in filters if f["Name"] == "group-id"), None)

    def describe_security_groups(self, Filters: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
        ids = self._ids(list(Filters))
        return {"SecurityGroups": [g for g in self.answer["SecurityGroups"] if ids is None or g["GroupId"] in ids]}

    def describe_security_group_rules(self, Filters: list[dict[str, Any]]) -> dict[str, Any]:
        ids = self._ids(Filters) or set()
        return {"SecurityGroupRules": [r for r in self.answer["SecurityGroupRules"] if r["GroupId"] in ids]}


def _run(monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any], out: Path | None) -> Any:
    monkeypatch.setattr(import_sg.shell, "client", lambda *a, **kw: _Ec2(answer))
    return CliRunner().invoke(main, ["import", "sg", "--region", "us-east-1",
                                     *(["-o", str(out)] if out else [])])


def test_corpus_is_there() -> None:
    assert len(CASES) >= 10


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_provider_answer(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, pattern, answer = _answer(path)
    out = tmp_path / "adopted.yml"
    out.write_text(PREVIOUS)
    result = _run(monkeypatch, answer, out)
    output = result.output
    assert result.exit_code == code, output
    assert "Traceback" not in output and not isinstance(result.exception, AssertionError | TypeError)
    assert unsafe(output.replace("\n", " ")) is None, repr(output)
    written = out.read_text()
    assert re.search(pattern, output + written), output + written
    if code != 0:
        assert written == PREVIOUS
        assert sorted(p.name for p in tmp_path.iterdir()) == ["adopted.yml"]
        return
    # written: `sg plan` on it (the loader, then the reconcile) proposes nothing, and its
    # drift is exactly what the warnings name
    inv = build(load_yaml_text(written, str(out)))
    live = live_groups(answer["SecurityGroups"], answer["SecurityGroupRules"])
    plans = plan_groups(inv, live)
    assert not [p for p in plans if p.has_changes or p.error], plans
    assert inv.aws is not None and {g.id for g in live} == {g.id for g in inv.aws.security_groups}
    drift = sorted(r.id for p in plans for r in p.drift)
    warned = sorted(re.findall(r"\((sgr-[0-9a-f]+)\): ", output))
    assert drift == warned, output
    comments = "".join(line for line in written.splitlines(keepends=True) if line.startswith("#"))
    assert sorted(re.findall(r"\((sgr-[0-9a-f]+)\): ", comments)) == warned, written  # the file says so too


# --- the comparison, one difference at a time ---------------------------------------------

A, B = "sg-0aaaaaaaaaaaaaaaa", "sg-0bbbbbbbbbbbbbbbb"


def _live(*rules: dict[str, Any], managed: bool = False, egress_default: bool = True) -> list[LiveGroup]:
    tags = [{"Key": "managed-by", "Value": "provision"}] if managed else []
    groups = [{"GroupId": A, "GroupName": "web", "VpcId": "vpc-0abc1234", "Description": "web", "Tags": tags},
              {"GroupId": B, "GroupName": "app", "VpcId": "vpc-0abc1234", "Description": "app", "Tags": []}]
    base = [{"SecurityGroupRuleId": "sgr-0000000000000000e", "GroupId": A, "IsEgress": True,
             "IpProtocol": "-1", "CidrIpv4": "0.0.0.0/0"},
            {"SecurityGroupRuleId": "sgr-0000000000000000f", "GroupId": B, "IsEgress": True,
             "IpProtocol": "-1", "CidrIpv4": "0.0.0.0/0"}] if egress_default else []
    return live_groups(groups, [*base, *rules])


SSH = {"SecurityGroupRuleId": "sgr-00000000000000001", "GroupId": A, "IsEgress": False,
       "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "CidrIpv4": "10.0.0.0/8", "Description": "ssh"}


def _inv(web: str, app: str = f"{{id: {B}, vpc: vpc-0abc1234, description: app}}") -> str:
    return f"version: 1\naws:\n  region: us-east-1\n  security_groups:\n    web: {web}\n    app: {app}\n"


def _diff(text: str, live: list[LiveGroup]) -> list[str]:
    return read_back(text, "<t>", live, adopt_mod.adopt(live, "us-east-1"))


def test_what_adopt_writes_reads_back() -> None:
    live = _live(SSH)
    assert _diff(adopt_mod.render(adopt_mod.adopt(live, "us-east-1")), live) == []


@pytest.mark.parametrize(("web", "expect"), [
    (f"{{id: {A}, vpc: vpc-0abc1234, description: web, ingress: []}}",
     "group web (sg-0aaaaaaaaaaaaaaaa): ingress tcp 22 from 10.0.0.0/8  # ssh (sgr-00000000000000001) is not declared"),
    (f"{{id: {A}, vpc: vpc-0abc1234, description: web, ingress: [{{port: 22, from: [10.0.0.0/8], description: sh}}]}}",
     "is declared with description 'sh'"),
    (f"{{id: {A}, vpc: vpc-0abc1234, description: web, ingress: [{{port: 22, from: [10.0.0.0/8], description: ssh}}, "
     "{port: 23, from: [app]}]}",
     "group web (sg-0aaaaaaaaaaaaaaaa): declares ingress tcp 23 from group app (sg-0bbbbbbbbbbbbbbbb), which AWS does not hold"),
    (f"{{id: {A}, vpc: vpc-0abc1234, description: web, ingress: [{{port: 22, from: [10.0.0.0/8], description: ssh}}], egress: []}}",
     "egress all traffic to 0.0.0.0/0 (sgr-0000000000000000e) is not declared"),
    (f"{{id: {A}, vpc: vpc-0abcdef0, description: web, ingress: [{{port: 22, from: [10.0.0.0/8], description: ssh}}]}}",
     "declared in VPC vpc-0abcdef0, AWS has it in vpc-0abc1234"),
    (f"{{id: {A}, vpc: vpc-0abc1234, ingress: [{{port: 22, from: [10.0.0.0/8], description: ssh}}]}}",
     "declared with description 'managed by provision', AWS has 'web'"),
    ("{id: sg-0cccccccccccccccc, vpc: vpc-0abc1234, description: web}",
     "group web is declared as sg-0cccccccccccccccc, which AWS did not answer"),
    ("{vpc: vpc-0abc1234, description: web}", "group web is declared, which AWS did not answer"),
])
def test_each_difference_is_named(web: str, expect: str) -> None:
    got = _diff(_inv(web), _live(SSH))
    assert any(expect in line for line in got), got


def test_a_group_left_out_and_a_file_that_does_not_load() -> None:
    live = _live(SSH)
    text = f"version: 1\naws:\n  region: us-east-1\n  security_groups:\n    app: {{id: {B}, vpc: vpc-0abc1234, description: app}}\n"
    assert "group web (sg-0aaaaaaaaaaaaaaaa) is not declared" in _diff(text, live)
    assert _diff("version: 1\naws: {region: us-east-1, security_groups: {web: {id: nope}}}\n", live)[0].startswith(
        "it does not load as an inventory: <t>:2:50: aws.security_groups.web.id")


def test_an_egress_left_out_must_be_the_default() -> None:
    live = _live(SSH, egress_default=False)
    web = f"{{id: {A}, vpc: vpc-0abc1234, description: web, ingress: [{{port: 22, from: [10.0.0.0/8], description: ssh}}]}}"
    app = f"{{id: {B}, vpc: vpc-0abc1234, description: app, egress: []}}"
    got = _diff(_inv(web, app), live)
    assert got == ["group web (sg-0aaaaaaaaaaaaaaaa): its egress is left out, and it is not the AWS default"], got


def test_a_managed_group_would_revoke_what_is_not_declared() -> None:
    got = _diff(_inv(f"{{id: {A}, vpc: vpc-0abc1234, description: web}}"), _live(SSH, managed=True))
    assert "(sgr-00000000000000001) is not declared (sg apply would revoke it)" in " ".join(got), got


def test_a_skipped_rule_must_stay_drift() -> None:
    icmp = {"SecurityGroupRuleId": "sgr-00000000000000002", "GroupId": A, "IsEgress": False,
            "IpProtocol": "icmp", "FromPort": 8, "ToPort": 0, "CidrIpv4": "192.0.2.0/24"}
    live = _live(SSH, icmp)
    adopted = adopt_mod.adopt(live, "us-east-1")
    assert [s.rule.id for s in adopted.skipped] == ["sgr-00000000000000002"]
    inv = build(load_yaml_text(adopt_mod.render(adopted), "<t>"))
    assert differences(inv, live, adopted) == []
    # announced as skipped, yet declared
    ssh = next(r for r in live[0].rules if r.id == "sgr-00000000000000001")
    other = adopt_mod.Adopted(adopted.doc, adopted.names,
                              (*adopted.skipped, adopt_mod.Skipped(A, "web", ssh, "test")), ())
    assert any("was to be left out, and is declared" in line for line in differences(inv, live, other))


def test_the_same_rule_answered_twice_is_one_rule() -> None:
    live = _live(SSH, SSH)
    assert _diff(adopt_mod.render(adopt_mod.adopt(live, "us-east-1")), live) == []


def test_the_command_refuses_yaml_that_does_not_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-back guards the command, whatever `adopt` gets wrong: YAML that lost a
    rule, or that names a group like an address (how the old import wrote it), is refused,
    the previous file kept, nothing printed to stdout."""
    _, _, answer = _answer(CASES[0].parent / "referenced-group-named-like-an-address.yml")
    out = tmp_path / "adopted.yml"
    out.write_text(PREVIOUS)
    real = adopt_mod.render

    def lossy(adopted: adopt_mod.Adopted) -> str:
        return "".join(line for line in real(adopted).splitlines(keepends=True)
                       if line.strip() != "- group-198.51.100.1")

    def old_names(adopted: adopt_mod.Adopted) -> str:
        return real(adopted).replace("group-203.0.113.7", "203.0.113.7")

    monkeypatch.setattr(import_sg, "render", lossy)
    result = _run(monkeypatch, answer, out)
    assert result.exit_code == 1 and out.read_text() == PREVIOUS, result.output
    assert ("import sg: the YAML, read back as an inventory, is not what AWS holds; nothing written:\n"
            "  group web (sg-0aaaaaaaaaaaaaaaa): ingress tcp 22 from group 198.51.100.1  "
            "(sg-0cccccccccccccccc) (sgr-000000000000000a2) is not declared\n") in result.output
    monkeypatch.setattr(import_sg, "render", old_names)
    result = _run(monkeypatch, answer, None)
    assert result.exit_code == 1 and result.stdout == "", result.output
    assert "it does not load as an inventory: <stdout>:" in result.output
    assert "a security group name must not read as an address or CIDR" in result.output


def test_the_file_is_replaced_keeping_its_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, answer = _answer(CASES[0].parent / "rule-description-with-newline.yml")
    out = tmp_path / "adopted.yml"
    out.write_text(PREVIOUS)
    out.chmod(0o640)
    link = tmp_path / "link.yml"
    link.symlink_to(out.name)
    result = _run(monkeypatch, answer, link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and out.stat().st_mode & 0o777 == 0o640
    assert out.read_text().startswith("# left out (AWS keeps them; sg plan shows them as drift):\n# web ingress: skipped ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adopted.yml", "link.yml"]
