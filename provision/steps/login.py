"""What a login gets on the host (pure diff): the session umask of the team's accounts and
login.defs' rules for the accounts useradd makes.

- The umask (`defaults.umask`, 027 by default; lynis AUTH-9328): a pam-auth-update profile
  of ours, `/usr/share/pam-configs/provision-umask`, puts `pam_umask.so umask=0027` in
  Debian's common-session stacks for accounts with uid >= 1000 (the team and the operator's
  login; root and system accounts keep theirs), enabled with `pam-auth-update --package`,
  Debian's own way to change those files. The command's guard is the line itself in
  /etc/pam.d/common-session: read back after it ran, and a plan shows it when someone
  disabled the profile. The explicit `umask=` keeps pam_umask's `usergroups` rule (027 ->
  007 for an account whose group is its own) out of it. Files a member makes are then 0640,
  directories 0750: another member reads none of them. `umask: null` disables and removes
  the profile.
- /etc/login.defs, rewritten key by key (the rest of the file as it was): UMASK (useradd's
  default, and pam_umask's for sessions it is not told otherwise), HOME_MODE 0750 (homes
  useradd makes; the users step makes members' 0700), SHA_CRYPT_MIN/MAX_ROUNDS (chpasswd
  and newusers when ENCRYPT_METHOD is SHA512; passwd through PAM uses yescrypt and is
  unaffected; lynis AUTH-9230), PASS_MIN_DAYS 1 (CIS; inert for provision's accounts,
  which have no password). Password expiry (PASS_MAX_DAYS) is never set: an expired
  password makes sshd demand a new one at a key login, which locks a key-only account out.
- An idle root prompt closes after `defaults.root_shell_timeout` (900 s; lynis SHLL-6220,
  CIS): `/etc/profile.d/provision-tmout.sh` sets a read-only TMOUT for uid 0 only; the
  team's shells (tmux panes left at a prompt overnight) keep theirs.
"""

from __future__ import annotations

import re

from provision.facts import Facts, Request
from provision.facts import guards as G
from provision.facts.spec import FactsError
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory
from provision.render.env import render

from .actions import Action, RemoveFile, WriteFile
from .command import RunCommand, guard_id
from .files import diff_file
from .refused import Refused

LOGIN_DEFS = "/etc/login.defs"
TMOUT_FILE = "/etc/profile.d/provision-tmout.sh"
PROFILE = "/usr/share/pam-configs/provision-umask"
COMMON_SESSION = "/etc/pam.d/common-session"
ROUNDS = "65536"
TOOL = "/usr/sbin/pam-auth-update"


def settings(umask: str | None) -> list[tuple[str, str]]:
    """login.defs keys and values, in the order they are added when missing."""
    return [*([("UMASK", umask)] if umask is not None else []), ("HOME_MODE", "0750"),
            ("SHA_CRYPT_MIN_ROUNDS", ROUNDS), ("SHA_CRYPT_MAX_ROUNDS", ROUNDS),
            ("PASS_MIN_DAYS", "1")]


def rewrite(text: str, wanted: list[tuple[str, str]]) -> str:
    """`text` (a login.defs) with each key's first active line set to its value, any later
    active line of the key dropped (the last would win), and missing keys appended."""
    lines = text.splitlines()
    out: list[str] = []
    done: set[str] = set()
    values = dict(wanted)
    for line in lines:
        m = re.match(r"\s*([A-Z_]+)(\s+)(\S.*)?$", line)
        key = m.group(1) if m else None
        if key in values:
            if key in done:
                continue
            done.add(key)
            if (m and (m.group(3) or "").strip()) != values[key]:
                line = f"{key}{m.group(2) if m else ' '}{values[key]}"
        out.append(line)
    missing = [(k, v) for k, v in wanted if k not in done]
    if missing:
        out += ["", "# Set by provision (provision.steps.login)",
                *(f"{k}\t{v}" for k, v in missing)]
    return "\n".join(out) + "\n"


def active_line(umask: str) -> str:
    """The guard: our pam_umask line in Debian's common-session, as pam-auth-update writes it."""
    return f"grep -Eq '^session[[:space:]]+optional[[:space:]]+pam_umask\\.so umask=0{umask}$' {COMMON_SESSION}"


def profile_gone() -> str:
    """The guard once `umask: null`: pam-auth-update's record of what it wrote into the
    common-session stacks names no profile of ours."""
    return "! grep -qsx 'Module: provision-umask' /var/lib/pam/session"


@frozen
class LoginStep:
    inv: Inventory
    host: Host
    name: str = "login"

    def _guard(self) -> tuple[str, str]:
        umask = self.inv.umask
        return ("u", active_line(umask) if umask is not None else profile_gone())

    def _tmout(self, facts: Facts) -> list[Action]:
        fact = facts.file(TMOUT_FILE)
        seconds = self.inv.root_shell_timeout
        if seconds is None:
            return [RemoveFile(TMOUT_FILE, old=fact.content)] if fact.exists else []
        return diff_file(fact, WriteFile(TMOUT_FILE, render(
            "profile-tmout.sh.j2", host=self.host.name, seconds=seconds)))

    def request(self) -> Request:
        kind, value = self._guard()
        return Request(files=(LOGIN_DEFS, PROFILE, TOOL, TMOUT_FILE),
                       guards=(f"G:{guard_id(kind, '', value)}:{kind}::{value}",))

    def diff(self, facts: Facts) -> list[Action]:
        umask = self.inv.umask
        out: list[Action] = []
        defs = facts.file(LOGIN_DEFS)
        if defs.kind == "file" and defs.content is not None:
            new = rewrite(defs.content, settings(umask))
            if new != defs.content:
                out += diff_file(defs, WriteFile(LOGIN_DEFS, new))
        out += self._tmout(facts)
        kind, value = self._guard()
        answers = facts.get(G.SPEC)
        gid = guard_id(kind, "", value)
        if gid not in answers:
            raise FactsError(f"step {self.name}: the probe did not answer its pam guard")
        pam_ok = answers[gid] == 0
        profile = facts.file(PROFILE)
        if not pam_ok and not facts.file(TOOL).exists:
            raise Refused(f"{TOOL} not found (libpam-runtime, on Debian and Ubuntu): the "
                          "umask of logins cannot be set here; set `defaults.umask: null` "
                          "to leave it as the host has it")
        if umask is None:
            if not pam_ok:
                out.append(RunCommand("pam-auth-update --package --remove provision-umask",
                                      None, None, value, "umask no longer provision's"))
            if profile.exists:
                out.append(RemoveFile(PROFILE, old=profile.content))
            return out
        out += diff_file(profile, WriteFile(PROFILE, render("pam-umask.j2", umask=umask)))
        if not pam_ok or any(isinstance(a, WriteFile) and a.path == PROFILE for a in out):
            why = (f"pam_umask umask=0{umask} not in {COMMON_SESSION}" if not pam_ok
                   else "the profile changed")
            out.append(RunCommand("pam-auth-update --package --enable provision-umask",
                                  None, None, value, why))
        return out
