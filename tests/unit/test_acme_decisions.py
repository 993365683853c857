"""The pure parts of provision.acme: renewal, CAA, the challenge record, CA errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from provision.acme import caa, challenge, problems, renewal
from provision.dns.rrset import rrset

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NINETY = renewal.Held(T0, T0 + timedelta(days=90), ("api.example.org",))


# --- renewal --------------------------------------------------------------------------

@pytest.mark.parametrize(("day", "renew"), [(0, False), (59, False), (60, True), (89, True),
                                             (91, True)])
def test_renews_in_the_last_third(day: int, renew: bool) -> None:
    d = renewal.decide(NINETY, "api.example.org", T0 + timedelta(days=day, seconds=1))
    assert d.renew is renew, d.reason


def test_not_due_says_when() -> None:
    d = renewal.decide(NINETY, "api.example.org", T0 + timedelta(days=10))
    assert d.due == T0 + timedelta(days=60) and "due from 2026-03-02" in d.reason


def test_ari_window_wins_over_the_third() -> None:
    ari = T0 + timedelta(days=20)
    assert renewal.decide(NINETY, "api.example.org", T0 + timedelta(days=21), ari).renew
    later = renewal.decide(NINETY, "api.example.org", T0 + timedelta(days=61),
                           T0 + timedelta(days=70))
    assert not later.renew and "renewal window" in later.reason


def test_missing_or_wrong_name_renews_at_once() -> None:
    assert renewal.decide(None, "api.example.org", T0).renew
    d = renewal.decide(NINETY, "www.example.org", T0)
    assert d.renew and "not www.example.org" in d.reason


def test_expired_renews_even_inside_an_ari_window_in_the_future() -> None:
    d = renewal.decide(NINETY, "api.example.org", T0 + timedelta(days=91),
                       T0 + timedelta(days=100))
    assert d.renew and "expired" in d.reason


# --- CAA ------------------------------------------------------------------------------

LE = ("letsencrypt.org",)


def _caa(records: dict[str, list[str]], name: str = "api.example.org",
         ids: tuple[str, ...] = LE) -> str:
    return caa.problem(name, records, ids, "example.org", "letsencrypt")


def test_no_caa_anywhere_allows() -> None:
    assert _caa({}) == ""


def test_apex_caa_for_another_ca_forbids() -> None:
    why = _caa({"example.org.": ['0 issue "digicert.com"']})
    assert "allow digicert.com" in why and "not letsencrypt" in why


def test_closest_set_wins_over_the_apex() -> None:
    recs = {"example.org.": ['0 issue "digicert.com"'],
            "api.example.org.": ['0 issue "letsencrypt.org; validationmethods=dns-01"']}
    assert _caa(recs) == ""
    recs2 = {"example.org.": ['0 issue "letsencrypt.org"'],
             "api.example.org.": ['0 issue ";"']}
    assert "no CA" in _caa(recs2)


def test_iodef_only_allows_and_critical_unknown_forbids() -> None:
    assert _caa({"example.org.": ['0 iodef "mailto:sec@example.org"']}) == ""
    assert "critical" in _caa({"example.org.": ['128 tbs "x"', '0 issue "letsencrypt.org"']})


def test_issuewild_for_wildcards() -> None:
    recs = {"example.org.": ['0 issue "letsencrypt.org"', '0 issuewild "digicert.com"']}
    assert _caa(recs, "*.example.org") != ""
    assert _caa(recs, "www.example.org") == ""


def test_unknown_identity_with_issue_tags_is_an_error() -> None:
    why = _caa({"example.org.": ['0 issue "letsencrypt.org"']}, ids=())
    assert "acme.caa_identities" in why


def test_ancestors_stop_at_the_apex() -> None:
    assert caa.ancestors("a.b.example.org", "example.org") == [
        "a.b.example.org.", "b.example.org.", "example.org."]


# --- the challenge record ---------------------------------------------------------------

ZONE = "example.org."
NAME = challenge.record_name("api.example.org")


def test_record_name_drops_a_wildcard() -> None:
    assert challenge.record_name("*.Example.org.") == "_acme-challenge.example.org."


def test_written_with_our_marker_in_one_change() -> None:
    cs, why = challenge.write(NAME, ZONE, ["tok"], [], "team")
    assert not why and not cs.deletions
    names = {(r.name, r.values) for r in cs.additions}
    assert (NAME, ('"tok"',)) in names
    assert ("_provision." + NAME, ('"provision owns TXT owner=team"',)) in names


def test_a_leftover_of_ours_is_replaced_and_removed() -> None:
    first, _ = challenge.write(NAME, ZONE, ["old"], [], "team")
    again, why = challenge.write(NAME, ZONE, ["new"], list(first.additions), "team")
    assert not why
    assert [r.values for r in again.deletions] == [('"old"',)]
    assert [r.values for r in again.additions] == [('"new"',)]
    gone, why = challenge.remove(NAME, ZONE, list(first.additions), "team")
    assert not why and set(gone.deletions) == set(first.additions) and not gone.additions


@pytest.mark.parametrize("owner", ["other", None])
def test_someone_elses_txt_is_refused(owner: str | None) -> None:
    theirs = [rrset(NAME, "TXT", 60, ['"x"'])]
    if owner == "other":
        first, _ = challenge.write(NAME, ZONE, ["x"], [], "other")
        theirs = list(first.additions)
    cs, why = challenge.write(NAME, ZONE, ["tok"], theirs, "team")
    assert not cs and "no ownership marker of this inventory" in why
    cs, why = challenge.remove(NAME, ZONE, theirs, "team")
    assert not cs and why


def test_remove_of_nothing_is_nothing() -> None:
    cs, why = challenge.remove(NAME, ZONE, [], "team")
    assert not cs and not why


# --- CA errors --------------------------------------------------------------------------

def test_rate_limit_named_and_escaped() -> None:
    text = problems.describe("urn:ietf:params:acme:error:rateLimited",
                             "too many certificates\x1b[31m", "Tue, 01 Jan 2026")
    assert text.startswith("the CA's rate limit was reached: too many certificates")
    assert "\x1b" not in text and "retry after Tue" in text


def test_unknown_error_type_is_shown() -> None:
    assert "custom" in problems.describe("urn:x:custom", None)
