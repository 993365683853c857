"""users step: the cases whose records are built from what the step renders (authorized_keys,
sudoers), so a converged host stays a no-op whatever the templates say. Fixed cases:
tests/steps/users."""

from __future__ import annotations

from provision.facts import parse
from provision.steps.actions import WriteFile
from provision.steps.users import UsersStep, authorized_keys
from tests.support.converge_cases import inventory
from tests.support.probe_records import answer, file_rec, user_rec


def step() -> UsersStep:
    inv, host = inventory()
    return UsersStep(inv, host)


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


def test_wrong_owner_rewrites_the_file_and_a_wrong_mode_only_fixes_attributes() -> None:
    """In alice's directory the write is made as alice, who cannot chown: a file of root's
    there is replaced by one of hers (same content), not chowned by root by name."""
    inv, _ = inventory()
    alice = inv.team[0]
    keys = authorized_keys("alice", alice.keys)
    text = answer(user_rec("alice"), "dir\t/home/alice/.ssh\t700\talice\talice",
                  file_rec("/home/alice/.ssh/authorized_keys", keys, "644", "root", "root"))
    acts = [a for a in step().diff(parse(text)) if "alice/.ssh/authorized_keys" in a.describe()]
    assert [a.describe() for a in acts] == ["update /home/alice/.ssh/authorized_keys (0600 alice:alice)"]
    assert isinstance(acts[0], WriteFile) and acts[0].content == acts[0].old == keys
    text = answer(user_rec("alice"), "dir\t/home/alice/.ssh\t700\talice\talice",
                  file_rec("/home/alice/.ssh/authorized_keys", keys, "644", "alice", "alice"))
    acts = [a for a in step().diff(parse(text)) if "alice/.ssh/authorized_keys" in a.describe()]
    assert [a.describe() for a in acts] == ["set /home/alice/.ssh/authorized_keys to 0600 alice:alice"]


