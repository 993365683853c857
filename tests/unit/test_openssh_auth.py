"""The OpenSSH tunnel backend names the hop that refused the login and the key it offered,
as the paramiko backend does (issue 39). The stderr below is what OpenSSH 9.2 printed
against sshd 9.2 on loopback, a ProxyJump helper's lines and the main ssh's together."""

from __future__ import annotations

from provision.ssh.login import Hop
from provision.tunnel.openssh_auth import DEFAULT_OFFER, auth_failure

BASTION = Hop("bastion", "10.0.0.1", 22, "admin", "~/.ssh/team")
GPU1 = Hop("gpu1", "10.0.1.21", 2222, "alice", "/keys/alice")
CHAIN = (BASTION, GPU1)

JUMP_REFUSED = ("admin@10.0.0.1: Permission denied (publickey).\n"
                "kex_exchange_identification: Connection closed by remote host\n"
                "Connection closed by UNKNOWN port 65535\n")
TARGET_REFUSED = "alice@10.0.1.21: Permission denied (publickey).\n"


def test_the_bastion_that_refused_is_named_with_its_key() -> None:
    assert auth_failure(JUMP_REFUSED, CHAIN) == (
        "bastion (10.0.0.1:22): authentication failed as admin (tried: ~/.ssh/team)")


def test_the_target_that_refused_is_named_with_its_key() -> None:
    assert auth_failure(TARGET_REFUSED, CHAIN) == (
        "gpu1 (10.0.1.21:2222): authentication failed as alice (tried: /keys/alice)")


def test_a_key_ssh_could_not_use_says_why() -> None:
    missing = ("no such identity: /root/.ssh/team: No such file or directory\n" + JUMP_REFUSED)
    assert auth_failure(missing, CHAIN) == ("bastion (10.0.0.1:22): authentication failed as "
                                            "admin (tried: ~/.ssh/team (no such file or directory))")
    not_accessible = ("Warning: Identity file /keys/alice not accessible: No such file or "
                      "directory.\n" + TARGET_REFUSED)
    assert str(auth_failure(not_accessible, CHAIN)).endswith(
        "(tried: /keys/alice (no such file or directory))")
    loose = ("Permissions 0644 for '/keys/alice' are too open.\n"
             'Load key "/keys/alice": bad permissions\n' + TARGET_REFUSED)
    assert str(auth_failure(loose, CHAIN)).endswith("(tried: /keys/alice (bad permissions))")
    # another hop's key problem is not this hop's
    assert auth_failure('Load key "/keys/alice": bad permissions\n' + JUMP_REFUSED, CHAIN) == (
        "bastion (10.0.0.1:22): authentication failed as admin (tried: ~/.ssh/team)")


def test_no_named_key_says_what_ssh_offers_by_itself() -> None:
    chain = (Hop("bastion", "10.0.0.1", 22, "admin", None), GPU1)
    assert auth_failure(JUMP_REFUSED, chain) == (
        f"bastion (10.0.0.1:22): authentication failed as admin (tried: {DEFAULT_OFFER})")


def test_same_address_two_users_and_unknown_hosts() -> None:
    # two hops on one address (ports differ): the user tells them apart
    chain = (Hop("bastion", "127.0.0.1", 2201, "admin", None),
             Hop("gpu1", "127.0.0.1", 2202, "alice", "/keys/alice"))
    assert auth_failure(TARGET_REFUSED.replace("10.0.1.21", "127.0.0.1"), chain) == (
        "gpu1 (127.0.0.1:2202): authentication failed as alice (tried: /keys/alice)")
    assert auth_failure("bob@192.0.2.9: Permission denied (publickey).\n", CHAIN) == (
        "192.0.2.9: authentication failed as bob")
    assert auth_failure("Connection refused\n", CHAIN) is None
    assert auth_failure("Host key verification failed.\n", CHAIN) is None
