"""The inventory's field checks (provision.inventory.fields) at their edges: each check
accepts what docs/inventory.md allows and refuses, with its own words, what would change the
meaning of a file or command it lands in. Pure: strings in, a value or ValueError out."""

from __future__ import annotations

import base64

import pytest

from provision.inventory import fields as F


def refused(fn: object, value: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fn(value)  # type: ignore[operator]


@pytest.mark.parametrize("ok", ["gpu1", "a", "A-b_c.d", "9lives", "x" * 63])
def test_names_ok(ok: str) -> None:
    assert F.check_name(ok) == ok


@pytest.mark.parametrize(("bad", "match"), [
    ("", "must not be empty"), ("a b", "whitespace or control"), ("a\tb", "whitespace"),
    ("a\x1bb", "control"), ("-a", "invalid name"), (".a", "invalid name"), ("_a", "invalid name"),
    ("x" * 64, "at most 63 characters"), ("a/b", "invalid name"), ("a*", "invalid name"),
    ("a\u202eb", "control"),
])
def test_names_refused(bad: str, match: str) -> None:
    refused(F.check_name, bad, match)


def test_no_control_names_what_it_found() -> None:
    with pytest.raises(ValueError) as e:
        F.check_name("a\nb")
    assert str(e.value) == ("a name must not contain whitespace or control characters "
                            "(found '\\\\n')")


@pytest.mark.parametrize("ok", ["ubuntu", "_svc", "a", "svc-model_2", "a" * 32])
def test_users_ok(ok: str) -> None:
    assert F.check_user(ok) == ok


@pytest.mark.parametrize("bad", ["Root", "1a", "-a", "a" * 33, "a.b", "a$", "a b", ""])
def test_users_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="user name"):
        F.check_user(bad)


@pytest.mark.parametrize("ok", ["10.0.0.1", "::1", "2001:db8::1", "host.example.org",
                                "jump", "a-b.c", "example.org.", "x" * 63])
def test_addresses_ok(ok: str) -> None:
    assert F.check_address(ok) == ok


@pytest.mark.parametrize(("bad", "match"), [
    ("fe80::1%eth0", "scope ids"), ("10.0.0.300", "invalid address"), ("1.2.3", "invalid address"),
    ("-a.example", "invalid address"), ("a..b", "invalid address"), ("a_b.c" + "x" * 250, "invalid"),
    ("a b", "whitespace"), ("x" * 64, "invalid address"), ("a;b", "invalid address"), ("", "empty"),
    ("$(id)", "invalid address"),
])
def test_addresses_refused(bad: str, match: str) -> None:
    refused(F.check_address, bad, match)


def test_hostnames() -> None:
    assert F.is_hostname("a.b.") and F.is_hostname("a" * 63)
    assert not F.is_hostname("") and not F.is_hostname(".")
    assert not F.is_hostname("a" * 64) and not F.is_hostname("a-.b") and not F.is_hostname("a.-b")
    long = ".".join(["a" * 63] * 4)  # 255 characters
    assert not F.is_hostname(long) and F.is_hostname(long[:253]) and not F.is_hostname(long[:254])
    assert F.is_hostname(long[:253] + ".")


def test_ip_and_cidr_predicates() -> None:
    assert F.is_ip("10.0.0.1") and F.is_ip("::") and not F.is_ip("10.0.0.1/32")
    assert not F.is_ip("fe80::1%x") and not F.is_ip("g::1") and not F.is_ip("1.2.3")
    assert F.is_cidr("10.0.0.0/8") and F.is_cidr("10.0.0.1") and F.is_cidr("::/0")
    assert not F.is_cidr("10.0.0.1/8") and not F.is_cidr("10.0.0.0/8 x") and not F.is_cidr("a/8")
    assert not F.is_cidr("10.0.0.0/1234")


@pytest.mark.parametrize(("value", "want"), [
    ("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "0.0.0.0"), ("::1", "::1"),
    ("2001:DB8:0::1", "2001:db8::1"),
])
def test_ips_are_canonical(value: str, want: str) -> None:
    assert F.check_ip(value) == want


@pytest.mark.parametrize(("bad", "match"), [
    ("fe80::1%eth0", "scope ids"), ("localhost", r"digits, hex letters, '\.', ':' only\)$"),
    ("10.0.0.1/32", "only"), ("300.0.0.1", r"e\.g\. 127\.0\.0\.1"), ("", "empty"),
])
def test_ips_refused(bad: str, match: str) -> None:
    refused(F.check_ip, bad, match)


@pytest.mark.parametrize(("value", "want"), [
    ("10.0.0.0/8", "10.0.0.0/8"), ("10.0.0.1", "10.0.0.1/32"), ("::/0", "::/0"),
    ("2001:DB8::/32", "2001:db8::/32"),
])
def test_cidrs_are_canonical(value: str, want: str) -> None:
    assert F.check_cidr(value) == want


def test_cidrs_refused_with_a_hint() -> None:
    with pytest.raises(ValueError) as e:
        F.check_cidr("10.0.0.1/8")
    assert str(e.value) == ("invalid CIDR '10.0.0.1/8' (10.0.0.1/8 has host bits set; did you "
                            "mean 10.0.0.0/8?)")
    with pytest.raises(ValueError) as e:
        F.check_cidr("10.0.0.0/33")
    assert "did you mean" not in str(e.value) and str(e.value).startswith("invalid CIDR")
    refused(F.check_cidr, "10.0.0.0/8,0.0.0.0/0", r"and one '/prefix' only\)$")
    refused(F.check_cidr, "fe80::%1/64", "scope ids")


@pytest.mark.parametrize("ok", ["~/.ssh/id_ed25519", "/etc/x", "rel/a.b", "a+b@c:d,e=f-g"])
def test_paths_ok(ok: str) -> None:
    assert F.check_path(ok) == ok


@pytest.mark.parametrize("bad", ["a b", "a'b", 'a"b', "a$b", "a;b", "a*b", "a\\b", "a`b", "a%b"])
def test_paths_refused(bad: str) -> None:
    refused(F.check_path, bad, "path")


@pytest.mark.parametrize(("value", "ok"), [
    ("/srv/x", True), ("/srv", True), ("srv/x", False), ("/srv/../etc", False),
    ("/srv/./x", False), ("/srv//x", False), ("/srv/x/", True),
])
def test_abs_paths(value: str, ok: bool) -> None:
    if ok:
        assert F.check_abs_path(value) == value
    else:
        refused(F.check_abs_path, value, "absolute path on the host")


@pytest.mark.parametrize(("value", "ok"), [
    ("/srv/runs", True), ("/data/a", True), ("/mnt/a", True), ("/scratch/a", True),
    ("/home/alice/runs", True), ("/opt/jupyter/nb", True),
    ("/srv", False), ("/srv/", False), ("/home/alice", False), ("/home/alice/", False),
    ("/opt/jupyter", False), ("/etc/x", False), ("/srvx/a", False), ("/var/lib/x", False),
])
def test_data_dirs(value: str, ok: bool) -> None:
    if ok:
        assert F.check_data_dir(value) == value
    else:
        refused(F.check_data_dir, value, "must be below /srv")


def _key(kind: str, embedded: str | None = None, tail: bytes = b"\x00" * 8) -> str:
    inner = (embedded or kind).encode()
    blob = len(inner).to_bytes(4, "big") + inner + tail
    return f"{kind} {base64.b64encode(blob).decode()}"


@pytest.mark.parametrize("kind", sorted(F.KEY_TYPES))
def test_every_allowed_key_type(kind: str) -> None:
    assert F.check_public_key(_key(kind)) == _key(kind)
    assert F.check_public_key("  " + _key(kind) + "  a@b c ") == _key(kind) + " a@b c"


@pytest.mark.parametrize(("value", "match"), [
    (_key("ssh-dss"), "never ssh-dss"),
    (_key("ssh-ed25519", "ssh-rsa"), "does not hold a ssh-ed25519 key"),
    ("ssh-ed25519 AAA", "not valid base64"),
    ("ssh-ed25519 " + base64.b64encode(b"\x00\x00").decode(), "does not hold"),
    ("ssh-ed25519", "expected 'TYPE BASE64"),
    (_key("ssh-ed25519") + "\nssh-rsa x", "single line"),
    (_key("ssh-ed25519") + "\rx", "single line"),
    (_key("ssh-ed25519") + "\x00", "single line"),
    (_key("ssh-ed25519") + " caf\u00e9", "printable ASCII"),
    (_key("ssh-ed25519") + " a\x1bb", "printable ASCII"),
    ('command="x" ' + _key("ssh-ed25519"), "no options"),
])
def test_public_keys_refused(value: str, match: str) -> None:
    refused(F.check_public_key, value, match)


@pytest.mark.parametrize(("value", "ok"), [
    ("nvidia-driver-550", True), ("g++", True), ("python3.11", True), ("ab", True),
    ("a", False), ("-a", False), ("A", False), ("a b", False), ("a_b", False), ("a" * 129, False),
    ("a" * 128, True),
])
def test_packages(value: str, ok: bool) -> None:
    if ok:
        assert F.check_package(value) == value
    else:
        refused(F.check_package, value, "package name")


@pytest.mark.parametrize("ok", [
    "/opt/venv/bin/uvicorn app:api --host {bind} --port {port}",
    "{venv}jupyter lab --config {config}", "{venv}{venv}python -m x", "a;b", "x --a=-1",
])
def test_commands_ok(ok: str) -> None:
    assert F.check_command(ok) == ok


@pytest.mark.parametrize(("bad", "match"), [
    ("", "must not be empty"), ("   ", "must not be empty"),
    ("a\nb", "one line"), ("a\u202eb", "direction-changing"),
    ("x {nope}", r"unknown placeholder \{nope\}"),
    ("x {}", r"unknown placeholder \{\}"),
    ("x %h", "'%' is not allowed"), ("x $HOME", r"'\$' is not allowed"),
    ("x \\n", "backslash"), ('x "a"', "quoted"), ("x 'a'", "quoted"),
    ("+x", "must not start with '\\+'"), ("!x", "'!'"), ("@x", "'@'"), ("-x", "'-'"),
    (":x", "':'"), ("  -x", "'-'"), ("{venv}-x", "'-'"), ("{venv}{venv}+x", "'\\+'"),
    ("a ; b", "lone ';'"),
])
def test_commands_refused(bad: str, match: str) -> None:
    refused(F.check_command, bad, match)


def test_command_messages() -> None:
    with pytest.raises(ValueError) as e:
        F.check_command("x {nope}")
    assert str(e.value) == ("unknown placeholder {nope} in command (allowed: {bind}, {config}, "
                            "{logdir}, {notebook_dir}, {port}, {user}, {venv})")
    with pytest.raises(ValueError) as e:
        F.check_command("x %h")
    assert str(e.value) == ("'%' is not allowed in a command (systemd expands %-specifiers in "
                            "unit files; put complex command lines in a script and run that)")


@pytest.mark.parametrize(("value", "want"), [("Example.Org", "example.org"),
                                             ("example.org.", "example.org")])
def test_zones(value: str, want: str) -> None:
    assert F.check_zone(value) == want


@pytest.mark.parametrize("bad", ["a b", "-x.org", "", "a..b"])
def test_zones_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        F.check_zone(bad)


@pytest.mark.parametrize(("value", "want"), [
    ("@", "@"), ("API", "api"), ("a.b", "a.b"), ("*.x", "*.x"), ("*.X.y", "*.x.y"),
])
def test_record_names(value: str, want: str) -> None:
    assert F.check_record_name(value) == want


@pytest.mark.parametrize("bad", ["api.", "*.", "*.x.", "a*", "*x", "a b", "", "-a"])
def test_record_names_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        F.check_record_name(bad)


def test_cname_targets() -> None:
    assert F.check_hostname_target("LB-1.example.net.") == "lb-1.example.net"
    refused(F.check_hostname_target, "a b", "whitespace")
    refused(F.check_hostname_target, "a..b", "invalid CNAME target")


@pytest.mark.parametrize(("value", "ok"), [
    ("http://127.0.0.1:8080", True), ("https://dns.example.org/v1", True),
    ("http://[::1]:9/", True), ("ftp://x", False), ("http://a b", False),
    ("http://x/?q=1", False), ("http://x@y", False), ("https://", False),
])
def test_urls(value: str, ok: bool) -> None:
    if ok:
        assert F.check_url(value) == value
    else:
        with pytest.raises(ValueError):
            F.check_url(value)


# Each refusal in the words the user reads (docs/inventory.md: what is wrong, what is allowed).
@pytest.mark.parametrize(("fn", "value", "message"), [
    ('check_name', 'a b', "a name must not contain whitespace or control characters (found ' ')"),
    ('check_name', '', 'a name must not be empty'),
    ('check_name', '-a', "invalid name '-a' (letters, digits, '.', '_', '-'; starting with a letter or digit; at most 63 characters)"),
    ('check_user', 'Root', "invalid user name 'Root' (lowercase letters, digits, '_', '-'; starting with a letter or '_'; at most 32 characters)"),
    ('check_user', 'a b', "a user name must not contain whitespace or control characters (found ' ')"),
    ('check_address', 'a b', "an address must not contain whitespace or control characters (found ' ')"),
    ('check_address', 'fe80::1%eth0', "invalid address 'fe80::1%eth0' (IPv6 scope ids like %eth0 are not allowed)"),
    ('check_address', 'a..b', "invalid address 'a..b' (an IPv4 or IPv6 address, or a DNS name of letters, digits and '-')"),
    ('check_ip', 'a b', "an IP address must not contain whitespace or control characters (found ' ')"),
    ('check_ip', 'fe80::1%eth0', "invalid IP address 'fe80::1%eth0' (IPv6 scope ids like %eth0 are not allowed)"),
    ('check_ip', 'localhost', "invalid IP address 'localhost' (digits, hex letters, '.', ':' only)"),
    ('check_ip', '300.0.0.1', "invalid IP address '300.0.0.1' (e.g. 127.0.0.1, 0.0.0.0, ::1, ::)"),
    ('check_cidr', 'a b', "a CIDR must not contain whitespace or control characters (found ' ')"),
    ('check_cidr', 'fe80::%1/64', "invalid CIDR 'fe80::%1/64' (IPv6 scope ids like %eth0 are not allowed)"),
    ('check_cidr', '10.0.0.0/8,x', "invalid CIDR '10.0.0.0/8,x' (digits, hex letters, '.', ':' and one '/prefix' only)"),
    ('check_cidr', '10.0.0.0/33', "invalid CIDR '10.0.0.0/33' ('10.0.0.0/33' does not appear to be an IPv4 or IPv6 network)"),
    ('check_path', 'a b', "a path must not contain whitespace or control characters (found ' ')"),
    ('check_path', 'a$b', "invalid path 'a$b' (letters, digits and . _ / ~ + @ : , = - only)"),
    ('check_abs_path', 'srv/x', "invalid path 'srv/x' (an absolute path on the host, without '.', '..' or '//')"),
    ('check_data_dir', '/etc/x', "data directory '/etc/x' must be below /srv, /data, /mnt, /scratch, /home/<user> or /opt/<name> (it is created for the service's user; anywhere else it could hand them a system directory)"),
    ('check_public_key', 'ssh-ed25519', "not an OpenSSH public key (expected 'TYPE BASE64 [comment]', TYPE one of ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa, sk-ssh-ed25519@openssh.com)"),
    ('check_public_key', _key("ssh-dss"), "key type 'ssh-dss' is not allowed (ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa, sk-ssh-ed25519@openssh.com; never ssh-dss, no options)"),
    ('check_public_key', 'ssh-ed25519 AAA', 'key data is not valid base64'),
    ('check_public_key', _key("ssh-ed25519", "ssh-rsa"), 'key data does not hold a ssh-ed25519 key (corrupted or mismatched type)'),
    ('check_public_key', _key("ssh-ed25519") + " café", 'key comment must be printable ASCII'),
    ('check_public_key', 'a\nb', 'a public key must be a single line'),
    ('check_package', 'a b', "a package name must not contain whitespace or control characters (found ' ')"),
    ('check_package', 'A', "invalid package name 'A' (Debian package names: lowercase letters, digits, '+', '-', '.')"),
    ('check_command', '', 'a command must not be empty'),
    ('check_command', 'a\nb', "a command must be one line without control or direction-changing characters (found '\\\\n')"),
    ('check_command', 'x $HOME', "'$' is not allowed in a command (systemd expands $VARIABLES in unit files; put complex command lines in a script and run that)"),
    ('check_command', 'x \\n', "'\\' is not allowed in a command (systemd interprets backslash escapes in unit files; put complex command lines in a script and run that)"),
    ('check_command', 'x "a"', '\'"\' is not allowed in a command (systemd groups quoted words in unit files; put complex command lines in a script and run that)'),
    ('check_command', "x 'a'", "''' is not allowed in a command (systemd groups quoted words in unit files; put complex command lines in a script and run that)"),
    ('check_command', '-x', "a command must not start with '-' (systemd reads + ! !! @ - : as prefixes that change privileges or how it runs the command)"),
    ('check_command', 'a ; b', "a lone ';' is not allowed in a command (systemd starts another command there)"),
    ('check_url', 'a b', "a URL must not contain whitespace or control characters (found ' ')"),
    ('check_url', 'ftp://x', "invalid URL 'ftp://x' (http:// or https:// followed by a host[:port])"),
])
def test_refusals_in_words(fn: str, value: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        getattr(F, fn)(value)
    assert str(e.value) == message


def test_field_edges_found_by_mutation() -> None:
    assert not F.is_hostname("a-.")
    assert F.check_data_dir("/home/alice/X") == "/home/alice/X"
    k = _key("ssh-ed25519")
    assert F.check_public_key(k + " a  b") == k + " a  b"        # the comment kept as written
    refused(F.check_public_key, k + " a b caf\u00e9", "printable ASCII")
    blob = k.split()[1]
    refused(F.check_public_key, f"ssh-ed25519 {blob[:8]}!{blob[8:]}", "not valid base64")
    inner = b"ssh-ed2551\xff"
    odd = base64.b64encode(len(inner).to_bytes(4, "big") + inner + b"\x00" * 8).decode()
    with pytest.raises(ValueError) as e:
        F.check_public_key(f"ssh-ed25519 {odd}")
    assert str(e.value) == "key data does not hold a ssh-ed25519 key (corrupted or mismatched type)"
    assert F.check_zone("EXAMPLE.BOX") == "example.box"
    assert F.check_hostname_target("LB.BOX.") == "lb.box"
    assert F.check_url("http://LB.Example.org/V1") == "http://LB.Example.org/V1"


@pytest.mark.parametrize(("fn", "value", "message"), [
    ("check_zone", "a b", "a zone name must not contain whitespace or control characters (found ' ')"),
    ("check_zone", "a..b", "invalid zone name 'a..b' (a DNS name such as example.org)"),
    ("check_record_name", "a b", "a record name must not contain whitespace or control characters "
     "(found ' ')"),
    ("check_record_name", "a..b", "invalid record name 'a..b' (a name relative to the zone, e.g. "
     "'api' or 'a.b', '*.x', or '@' for the apex)"),
    ("check_hostname_target", "a b", "a CNAME target must not contain whitespace or control "
     "characters (found ' ')"),
])
def test_dns_field_refusals_in_words(fn: str, value: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        getattr(F, fn)(value)
    assert str(e.value) == message
