"""Private zones, pure: which zone of a name the inventory means (`visibility.choose`),
which servers verify a private zone (`propagation.authoritative_targets`), and the
load-time errors of a zone's visibility."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from provision.cli import main
from provision.dns.propagation import Target, Unverifiable, authoritative_targets
from provision.dns.providers.clouddns import network_label
from provision.dnsdata.visibility import Found, Wanted, ZoneMismatch, choose
from provision.inventory.schema import json_schema

Z = "internal.example."
V1, V2 = "vpc-1 in eu-west-1", "vpc-2 in eu-west-1"
PUB = Found("ZPUB", False)
PRIV1 = Found("ZP1", True, frozenset({V1}))
PRIV2 = Found("ZP2", True, frozenset({V2}))
PRIV12 = Found("ZP12", True, frozenset({V1, V2}))
PUBLIC, ON_V1 = Wanted(), Wanted("private", frozenset({V1}))

# (wanted, found, by_id, the id chosen or the error's class and a part of its message)
CASES: list[tuple[str, Wanted, list[Found], bool, str | tuple[type[Exception], str]]] = [
    ("public beside a private of the same name", PUBLIC, [PRIV1, PUB], False, "ZPUB"),
    ("two public zones", PUBLIC, [PUB, Found("ZPUB2", False)], False,
     (LookupError, "more than one public hosted zone")),
    ("only a private one, declared public", PUBLIC, [PRIV1], False,
     (ZoneMismatch, "declares a public zone, but hosted zone ZP1 (attached to vpc-1")),
    ("none", PUBLIC, [], False, (LookupError, "no hosted zone named")),
    ("private beside a public of the same name", ON_V1, [PUB, PRIV1], False, "ZP1"),
    ("the private one attached to the declared VPC", ON_V1, [PRIV2, PRIV1], False, "ZP1"),
    ("two private zones attached to it", ON_V1, [PRIV1, PRIV12], False,
     (LookupError, "more than one private hosted zone")),
    ("a private one attached elsewhere", ON_V1, [PRIV2], False,
     (ZoneMismatch, "no private hosted zone of that name is attached to vpc-1 in eu-west-1")),
    ("attached to one declared VPC of two", Wanted("private", frozenset({V1, V2})), [PRIV1],
     False, (ZoneMismatch, "ZP1 (attached to vpc-1 in eu-west-1) is not attached to vpc-2")),
    ("only a public one, declared private", ON_V1, [PUB], False,
     (ZoneMismatch, "declares a private zone, but hosted zone ZPUB (public) is public")),
    ("no private zone", ON_V1, [], False, (LookupError, "no private hosted zone named")),
    ("by id: attached elsewhere", ON_V1, [PRIV2], True,
     (ZoneMismatch, "ZP2 (attached to vpc-2 in eu-west-1) is not attached to vpc-1")),
    ("by id: public, declared public", PUBLIC, [PUB], True, "ZPUB"),
    ("by id: private, declared public", PUBLIC, [PRIV1], True, (ZoneMismatch, "is private")),
]


@pytest.mark.parametrize(("want", "found", "by_id", "expect"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_choose(want: Wanted, found: list[Found], by_id: bool,
                expect: str | tuple[type[Exception], str]) -> None:
    if isinstance(expect, str):
        assert choose(Z, want, found, by_id=by_id) == expect
        return
    cls, words = expect
    with pytest.raises(cls) as e:
        choose(Z, want, found, by_id=by_id)
    assert type(e.value) is cls and words in str(e.value.args[0])
    if cls is ZoneMismatch:
        assert e.value.exit_code == 2


NS = [("ns-1.awsdns-01.org.", None), ("ns-2.example.", "192.0.2.53")]


def test_a_private_zone_is_verified_through_the_resolvers_only() -> None:
    # no name server is resolved or asked (this module may open no socket: it would fail)
    assert authoritative_targets(NS, None, ["10.0.0.2"], "private", Z) == ([], [])
    # public: the name servers, as before
    assert authoritative_targets(NS[1:], None, [], "public") == (
        [Target("ns-2.example.", "192.0.2.53", "authoritative")], [])


def test_a_private_zone_without_a_resolver_cannot_be_verified() -> None:
    with pytest.raises(Unverifiable, match=r"internal\.example\. is a private zone.*"
                                           "dns.resolvers lists none") as e:
        authoritative_targets(NS, None, [], "private", Z)
    assert e.value.exit_code == 1


@pytest.mark.parametrize("spelled", [
    "gpu-vpc", "projects/p-12345/global/networks/gpu-vpc",
    "https://www.googleapis.com/compute/v1/projects/p-12345/global/networks/gpu-vpc",
    "https://compute.googleapis.com/compute/v1/projects/p-12345/global/networks/gpu-vpc"])
def test_a_network_is_compared_in_one_spelling(spelled: str) -> None:
    assert network_label(spelled, "p-12345") == "projects/p-12345/global/networks/gpu-vpc"


BAD = Path(__file__).parent.parent / "fixtures" / "bad"


@pytest.mark.parametrize(("fixture", "words"), [
    ("62-dns-private-zone-without-vpc.yml", "a private zone needs 'vpcs': at least one"),
    ("63-dns-private-zone-on-powerdns.yml", "provider powerdns has no private zones"),
    ("64-dns-vpcs-on-a-public-zone.yml", "'vpcs' is for a private zone only"),
    ("66-dns-clouddns-private-without-networks.yml", "a private zone needs 'networks'"),
])
def test_visibility_errors_say_what_is_wrong(fixture: str, words: str) -> None:
    r = CliRunner().invoke(main, ["check", "-i", str(BAD / fixture)])
    assert r.exit_code == 2 and words in r.output, r.output


def test_the_schema_describes_the_private_zone_fields() -> None:
    defs = json_schema()["$defs"]
    props = {name: p for d in defs.values() for name, p in d.get("properties", {}).items()}
    for field in ("visibility", "vpcs", "networks"):
        assert props[field].get("description"), field


@pytest.mark.parametrize("resolvers", [[], ["10.0.0.2"]])
def test_a_public_zone_whose_provider_names_no_nameserver_cannot_be_verified(
        resolvers: list[str]) -> None:
    # a provider answer without a delegation set (Route53's DelegationSet missing) left
    # no authoritative server: the zone check asked nobody (or resolvers only, which
    # count down and carry no AA) and said every server serves every record
    with pytest.raises(Unverifiable, match="names no nameserver") as e:
        authoritative_targets([], None, resolvers, "public", Z)
    assert e.value.exit_code == 1
