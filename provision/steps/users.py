"""Team accounts: user, home, shell, sudo drop-in, exact authorized_keys. Pure diff.

A member's home is made 0700, and a home others may read is closed to them.

Someone removed from the team keeps their account and home (their data), but their
authorized_keys is emptied (our marker stays, so we still recognise it), their sudoers
drop-in is removed, and the account is expired with shell /usr/sbin/nologin.
"""

from __future__ import annotations

from provision.facts import Facts, Request, UserFact
from provision.facts.users import CREATED_BY, MARKER
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory
from provision.render.env import render as render_template

from .actions import (
    NOLOGIN,
    Action,
    EnsureUser,
    Mkdir,
    RemoveFile,
    RetireUser,
    SetAttrs,
    WriteFile,
)
from .files import diff_file
from .refused import Refused

SUDOERS_DIR = "/etc/sudoers.d"
SUDOERS_PREFIX = f"{SUDOERS_DIR}/provision-"


def sudoers_path(user: str) -> str:
    return f"{SUDOERS_PREFIX}{user}"


def authorized_keys(user: str, keys: tuple[str, ...]) -> str:
    return render_template("authorized_keys.j2", user=user, keys=keys)


def _may_manage(u: UserFact, facts: Facts) -> None:
    """Only accounts we created (GECOS) or adopted (our marker in authorized_keys), and never
    a system account: a teammate naming a person `root` or after the login user must not
    get their keys replaced."""
    if u.system:
        raise Refused(f"users: refusing to manage '{u.name}': it is a system account on this "
                      f"host (uid {u.uid}); give the team member another name")
    if u.comment != CREATED_BY and u.name not in facts.managed_users:
        raise Refused(f"users: refusing to manage '{u.name}' (uid {u.uid}): the account exists "
                      "and was not created by provision; to hand it over, put the line "
                      f"'{MARKER}' at the top of ~{u.name}/.ssh/authorized_keys")


@frozen
class UsersStep:
    inv: Inventory
    host: Host
    name: str = "users"

    def request(self) -> Request:
        return Request(users=tuple(p.name for p in self.inv.team), dirs=(SUDOERS_DIR,),
                       prefixes=(SUDOERS_PREFIX,))

    def diff(self, facts: Facts) -> list[Action]:
        actions: list[Action] = []
        team = {p.name: p for p in self.inv.team}
        for p in self.inv.team:
            u = facts.users.get(p.name)
            if u is not None:
                _may_manage(u, facts)
            if u is None:
                home, group = f"/home/{p.name}", p.name
                actions.append(EnsureUser(p.name, home, p.shell, create=True))
            else:
                home, group = u.home, u.group
                if u.shell != p.shell or u.expired:
                    actions.append(EnsureUser(p.name, home, p.shell, create=False))
                h = facts.dir(home)
                if h.kind == "dir" and h.owner == p.name and h.mode & 0o007:
                    # a home every account on the host may read: closed to them (the
                    # group's bits are the member's own choice)
                    actions.append(SetAttrs(home, h.mode & 0o7770, p.name, h.group))
            ssh = f"{home}/.ssh"
            d = facts.dir(ssh)
            if u is None or (d.kind, d.mode, d.owner, d.group) != ("dir", 0o700, p.name, group):
                actions.append(Mkdir(ssh, 0o700, p.name, group))
            want = WriteFile(f"{ssh}/authorized_keys", authorized_keys(p.name, p.keys),
                             0o600, p.name, group)
            actions += diff_file(facts.file(want.path), want)
            if p.sudo:
                sudo = WriteFile(sudoers_path(p.name), render_template("sudoers.j2", user=p.name),
                                 0o440, "root", "root", validate="visudo")
                actions += diff_file(facts.file(sudo.path), sudo)
        for name in facts.managed_users:
            if name in team or name not in facts.users:
                continue
            u = facts.users[name]
            want = WriteFile(f"{u.home}/.ssh/authorized_keys", authorized_keys(name, ()),
                             0o600, name, u.group)
            actions += diff_file(facts.file(want.path), want)
            if not (u.expired and u.shell == NOLOGIN):
                actions.append(RetireUser(name))
        for f in facts.prefixed(SUDOERS_PREFIX):
            user = f.path[len(SUDOERS_PREFIX):]
            if not (user in team and team[user].sudo):
                actions.append(RemoveFile(f.path, old=f.content))
        return actions
