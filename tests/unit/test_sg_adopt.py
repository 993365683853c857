"""`provision import sg`'s pure half (`provision.cloud.adopt`): names from AWS are outside
data, so the inventory names chosen for them must stay unique whatever AWS says."""

from __future__ import annotations

from provision.cloud.adopt import adopt, inventory_names
from provision.cloud.rules import LiveGroup


def _group(gid: str, name: str) -> LiveGroup:
    return LiveGroup(gid, name, "vpc-0123abcd", "d", False, ())


def test_a_group_named_like_anothers_suffixed_name_does_not_shadow_it() -> None:
    """Two groups share a long name; a third is named what the second's suffixed name
    would be. Each still gets its own inventory name, and the YAML declares all three."""
    long = "x" * 50
    groups = [_group("sg-aaaaaaaa", long), _group("sg-bbbbbbbb", long),
              _group("sg-cccccccc", "x" * 40 + "-bbbbbbbb")]
    names = inventory_names(groups)
    assert len(set(names.values())) == 3, names
    declared = adopt(groups, "us-east-1").doc["aws"]["security_groups"]
    assert sorted(e["id"] for e in declared.values()) == ["sg-aaaaaaaa", "sg-bbbbbbbb",
                                                          "sg-cccccccc"]


def test_hostile_names_and_descriptions_do_not_become_yaml_keys() -> None:
    import yaml

    g = LiveGroup("sg-dddddddd", "web\n  evil: {id: sg-eeeeeeee}", "vpc-0123abcd",
                  "ok: [1]\nid: sg-ffffffff", False, ())
    text = yaml.safe_dump(adopt([g], "us-east-1").doc, sort_keys=False, allow_unicode=False)
    doc = yaml.safe_load(text)
    assert set(doc) == {"version", "aws"} and set(doc["aws"]) == {"region", "security_groups"}
    ((name, entry),) = doc["aws"]["security_groups"].items()
    assert name.startswith("web-") and entry["id"] == "sg-dddddddd"
    assert set(entry) <= {"id", "vpc", "description", "ingress", "egress"}
    assert "sg-ffffffff" not in text
