"""login.defs rewritten key by key (provision.steps.login.rewrite): the rest of the file as
it was, the first active line of a key set, later ones dropped, missing keys appended."""

from __future__ import annotations

from provision.steps.login import rewrite, settings


def test_keys_are_set_in_place_and_comments_stay() -> None:
    text = "# UMASK 077 in a comment stays\nUMASK\t\t022\nPASS_MIN_DAYS 0\n#HOME_MODE 0700\n"
    out = rewrite(text, [("UMASK", "027"), ("PASS_MIN_DAYS", "1")])
    assert out == "# UMASK 077 in a comment stays\nUMASK\t\t027\nPASS_MIN_DAYS 1\n#HOME_MODE 0700\n"


def test_a_later_line_of_the_same_key_is_dropped_it_would_win() -> None:
    out = rewrite("UMASK 027\nX 1\nUMASK 000\n", [("UMASK", "027")])
    assert out == "UMASK 027\nX 1\n"


def test_missing_keys_are_appended_once_and_a_second_rewrite_changes_nothing() -> None:
    first = rewrite("ENCRYPT_METHOD SHA512", settings("027"))
    assert first.splitlines()[0] == "ENCRYPT_METHOD SHA512"
    assert "HOME_MODE\t0750" in first and "SHA_CRYPT_MIN_ROUNDS\t65536" in first
    assert first.count("UMASK") == 1
    assert rewrite(first, settings("027")) == first


def test_without_a_umask_login_defs_keeps_its_own() -> None:
    assert rewrite("UMASK 022\n", settings(None)).splitlines()[0] == "UMASK 022"
    assert "PASS_MAX_DAYS" not in rewrite("", settings("027"))  # expiry never set
