"""users step: facts in, actions out."""

from __future__ import annotations

from converge_cases import facts, inventory
from probe_records import answer, file_rec, user_rec

from provision.facts import parse
from provision.tasks.actions import EnsureUser, Mkdir, RemoveFile, RetireUser, WriteFile
from provision.tasks.users import UsersStep, authorized_keys


def step() -> UsersStep:
    inv, host = inventory()
    return UsersStep(inv, host)


def test_request_asks_for_team_and_sudoers() -> None:
    args = step().request().args()
    assert "U:alice" in args and "U:bob" in args and "L:/etc/sudoers.d/provision-" in args


def test_fresh_host_creates_everyone() -> None:
    acts = step().diff(facts("fresh.txt"))
    assert acts[0] == EnsureUser("alice", "/home/alice", "/bin/bash", create=True)
    assert acts[1] == Mkdir("/home/alice/.ssh", 0o700, "alice", "alice")
    ak = acts[2]
    assert isinstance(ak, WriteFile) and ak.path == "/home/alice/.ssh/authorized_keys"
    assert (ak.mode, ak.owner, ak.group, ak.old) == (0o600, "alice", "alice", None)
    assert ak.content.startswith("# Managed by provision\n") and "alice@laptop" in ak.content
    sudo = acts[3]
    assert isinstance(sudo, WriteFile) and sudo.path == "/etc/sudoers.d/provision-alice"
    assert sudo.validate == "visudo" and sudo.mode == 0o440
    assert "alice ALL=(ALL:ALL) NOPASSWD: ALL" in sudo.content
    # bob: no sudo, two keys
    assert [type(a).__name__ for a in acts[4:]] == ["EnsureUser", "Mkdir", "WriteFile"]
    assert acts[6].content.count("ssh-ed25519") == 2  # type: ignore[union-attr]


def test_drift_is_corrected_and_removed_member_retired() -> None:
    acts = step().diff(facts("drifted.txt"))
    described = [a.describe() for a in acts]
    # alice: only the .ssh mode drifted
    assert Mkdir("/home/alice/.ssh", 0o700, "alice", "alice") in acts
    assert not any(isinstance(a, WriteFile) and a.path.startswith("/home/alice") for a in acts)
    # bob: shell fixed, the stray key removed (exact authorized_keys), his second key added
    assert EnsureUser("bob", "/home/bob", "/bin/bash", create=False) in acts
    bob = next(a for a in acts if isinstance(a, WriteFile) and a.path == "/home/bob/.ssh/authorized_keys")
    assert "stolen@evil" not in bob.content and "bob@laptop" in bob.content
    assert bob.old is not None and "stolen@evil" in bob.old
    # carol (not in the team any more): keys emptied, account retired, sudo removed
    carol = next(a for a in acts if isinstance(a, WriteFile) and a.path == "/home/carol/.ssh/authorized_keys")
    assert carol.content == authorized_keys("carol", ()) and "ssh-" not in carol.content
    assert RetireUser("carol") in acts
    assert any(isinstance(a, RemoveFile) and a.path == "/etc/sudoers.d/provision-carol" for a in acts)
    assert not any(isinstance(a, RemoveFile) and a.path.endswith("alice") for a in acts), described


def converged_answer() -> str:
    inv, _ = inventory()
    recs: list[str] = []
    for p in inv.team:
        recs += [user_rec(p.name, 1001), f"dir\t/home/{p.name}/.ssh\t700\t{p.name}\t{p.name}",
                 file_rec(f"/home/{p.name}/.ssh/authorized_keys", authorized_keys(p.name, p.keys),
                          "600", p.name, p.name), f"managed\t{p.name}"]
    from provision.render.env import render as render_template
    recs.append(file_rec("/etc/sudoers.d/provision-alice",
                         render_template("sudoers.j2", user="alice"), "440"))
    return answer(*recs)


def test_converged_host_is_a_no_op() -> None:
    assert step().diff(parse(converged_answer())) == []


def test_retired_user_stays_retired_without_changes() -> None:
    text = answer(user_rec("carol", 1003, shell="/usr/sbin/nologin", expire="1"), "managed\tcarol",
                  file_rec("/home/carol/.ssh/authorized_keys", authorized_keys("carol", ()),
                           "600", "carol", "carol"))
    assert [a for a in step().diff(parse(text)) if "carol" in a.describe()] == []


def test_returning_member_is_reactivated() -> None:
    text = answer(user_rec("bob", 1002, shell="/usr/sbin/nologin", expire="1"))
    acts = step().diff(parse(text))
    assert EnsureUser("bob", "/home/bob", "/bin/bash", create=False) in acts


def test_wrong_owner_only_fixes_attributes() -> None:
    inv, _ = inventory()
    alice = inv.team[0]
    text = answer(user_rec("alice"), "dir\t/home/alice/.ssh\t700\talice\talice",
                  file_rec("/home/alice/.ssh/authorized_keys", authorized_keys("alice", alice.keys),
                           "644", "root", "root"))
    acts = [a for a in step().diff(parse(text)) if "alice/.ssh/authorized_keys" in a.describe()]
    assert [a.describe() for a in acts] == ["set /home/alice/.ssh/authorized_keys to 0600 alice:alice"]


def test_a_system_account_named_in_the_team_is_refused() -> None:
    """A teammate with write access to the inventory names a person `root`-like: their
    keys would replace the account's. check refuses reserved names; apply refuses any
    existing system account on the host, whatever its name."""
    import pytest

    from provision.tasks.step import Refused

    fx = parse(answer(user_rec("alice", uid=998, comment="")))
    with pytest.raises(Refused, match="system account"):
        step().diff(fx)


def test_an_account_provision_did_not_create_is_refused_until_adopted() -> None:
    import pytest

    from provision.tasks.step import Refused

    foreign = answer(user_rec("alice", comment="Alice Admin"), user_rec("bob"))
    with pytest.raises(Refused, match="not created by provision"):
        step().diff(parse(foreign))
    adopted = parse(answer(user_rec("alice", comment="Alice Admin"), "managed\talice", user_rec("bob")))
    assert step().diff(adopted)  # managed now: the step plans its usual actions
