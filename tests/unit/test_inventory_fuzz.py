"""Arbitrary YAML never escapes the loader as anything but our validation error."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provision.inventory import InventoryError
from provision.inventory.build import build
from provision.inventory.source import load_yaml_text

KEYS = ["version", "defaults", "team", "bastions", "hosts", "roles", "aws", "dns", "user", "port",
        "address", "via", "services", "jupyter", "expose", "from", "bind", "keys", "zones", "records",
        "type", "values", "value", "ttl", "provider", "ssh_from", "logdir", "command", "egress"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["10.0.0.1", "::/0", "0.0.0.0/0", "tunnel",
                                                           "route53", "A", "CNAME", "@", "ssh-ed25519 AAAA"]))
values: Any = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=5)),
    max_leaves=30)
docs = st.dictionaries(st.sampled_from(KEYS), values, max_size=6).map(lambda d: {"version": 1, **d})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs)
def test_structured_documents_raise_only_inventory_error(doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc, allow_unicode=True)
    try:
        build(load_yaml_text(text, "fuzz.yml"))
    except InventoryError as e:
        assert e.problems
        assert all(p.file == "fuzz.yml" for p in e.problems)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_inventory_error(text: str) -> None:
    try:
        build(load_yaml_text(text, "fuzz.yml"))
    except InventoryError as e:
        assert e.problems
