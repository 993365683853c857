"""What a converge does to a host, as plain data (pure): each action describes itself and
renders its own shell fragment (`provision.steps.action`). The diff functions produce
these; `provision.steps.script` puts the fragments into one shell script."""

from __future__ import annotations

import base64
import posixpath
from shlex import quote

from provision.facts.users import CREATED_BY, SERVICE_COMMENT
from provision.frozen import frozen
from provision.secretdata.vault import Sealed
from provision.secrets.delivery import SALT

from . import apt_script
from .action import Action, FileChange, PlanOp, b64

__all__ = ["Action"]

EOF_MARK = "PROVISION_CONTENT_EOF"
NOLOGIN = "/usr/sbin/nologin"
HOME_MODE = 0o700  # a new member's home: nobody else on the host reads their notebooks


@frozen
class WriteFile(Action):
    """Write `content` atomically (temp file in the same directory, then rename)."""

    path: str
    content: str
    mode: int = 0o644
    owner: str = "root"
    group: str = "root"
    validate: str | None = None  # "visudo": `visudo -cf` the temp file before the rename
    old: str | None = None  # current content, for the plan's diff (None: absent)

    def describe(self) -> str:
        verb = "create" if self.old is None else "update"
        return f"{verb} {self.path} ({self.mode:04o} {self.owner}:{self.group})"

    def plan_op(self) -> PlanOp:
        return "+" if self.old is None else "~"

    def plan_files(self) -> tuple[FileChange, ...]:
        return (FileChange(self.path, self.old, self.content),)

    def script(self) -> str:
        args = [self.path, self.owner, self.group, f"{self.mode:04o}",
                *([self.validate] if self.validate else [])]
        return (f"provision_write {' '.join(quote(x) for x in args)} <<'{EOF_MARK}'\n"
                f"{b64(self.content)}{EOF_MARK}")


@frozen
class WriteSecret(Action):
    """Write a secret's file (root, 0400): sent inside the batch over the SSH channel,
    never on a command line; described by name only. Makes the host's fingerprint salt
    first when there is none."""

    path: str
    secret: str
    service: str
    content: Sealed
    new: bool = False

    def describe(self) -> str:
        return f"secret {self.secret} of {self.service} {'set' if self.new else 'changed'} ({self.path})"

    def script(self) -> str:
        """The host's salt made if missing (umask 077, in the 0700 root directory), then
        the value from the batch's own text (a here-document: dash passes it through a
        pipe, no temporary file) written 0400 root like any file."""
        value = base64.encodebytes(self.content.reveal()).decode()
        return (f"[ -s {quote(SALT)} ] || ( umask 077; head -c 32 /dev/urandom | od -An -tx1 | "
                f"tr -d ' \\n' > {quote(SALT)} )\n"
                f"provision_write {quote(self.path)} root root 0400 <<'{EOF_MARK}'\n{value}{EOF_MARK}")


@frozen
class SetAttrs(Action):
    path: str
    mode: int
    owner: str
    group: str

    def describe(self) -> str:
        return f"set {self.path} to {self.mode:04o} {self.owner}:{self.group}"

    def script(self) -> str:
        return "provision_attrs " + " ".join(quote(x) for x in
                                             (self.path, self.owner, self.group, f"{self.mode:04o}"))


@frozen
class RemoveFile(Action):
    path: str
    old: str | None = None

    def describe(self) -> str:
        return f"remove {self.path}"

    def plan_op(self) -> PlanOp:
        return "-"

    def plan_files(self) -> tuple[FileChange, ...]:
        return () if self.old is None else (FileChange(self.path, self.old, None),)

    def script(self) -> str:
        return f"provision_remove {quote(self.path)}"


@frozen
class RemoveTemps(Action):
    """Leftover `.provision-tmp.*` files of an interrupted run."""

    paths: tuple[str, ...]

    def describe(self) -> str:
        return f"clean {len(self.paths)} leftover temp file(s): {', '.join(self.paths)}"

    def plan_op(self) -> PlanOp:
        return "-"

    def script(self) -> str:
        return "provision_remove " + " ".join(quote(p) for p in self.paths)


@frozen
class Mkdir(Action):
    path: str
    mode: int = 0o755
    owner: str = "root"
    group: str = "root"

    def describe(self) -> str:
        return f"directory {self.path} ({self.mode:04o} {self.owner}:{self.group})"

    def plan_op(self) -> PlanOp:
        return "+"

    def script(self) -> str:
        return "provision_mkdir " + " ".join(quote(x) for x in
                                             (self.path, self.owner, self.group, f"{self.mode:04o}"))


@frozen
class EnsureUser(Action):
    """Create the account, or fix its shell and lift a retirement (account expiry). A
    service's own account (`service`) is a system account that logs in nowhere."""

    name: str
    home: str
    shell: str
    create: bool
    service: str | None = None  # the service whose own account it is

    def describe(self) -> str:
        if self.create and self.service:
            return f"create account {self.name} for service {self.service} (home {self.home})"
        if self.create:
            return f"create user {self.name} (home {self.home}, shell {self.shell})"
        return f"update user {self.name} (shell {self.shell}, account active)"

    def plan_op(self) -> PlanOp:
        return "+" if self.create else "~"

    def script(self) -> str:
        if self.create and self.service:
            return (f"mkdir -p {quote(posixpath.dirname(self.home))}\n"
                    f"useradd -r -m -U -c {quote(SERVICE_COMMENT)} -d {quote(self.home)} "
                    f"-s {NOLOGIN} {quote(self.name)}\n"
                    f"provision_attrs {quote(self.home)} {quote(self.name)} {quote(self.name)} "
                    f"{HOME_MODE:04o}")
        if self.create:
            # a home nobody else can read (useradd follows login.defs: 0755 on Debian)
            return (f"useradd -m -U -c {quote(CREATED_BY)} -d {quote(self.home)} "
                    f"-s {quote(self.shell)} {quote(self.name)}\nprovision_attrs "
                    f"{quote(self.home)} {quote(self.name)} {quote(self.name)} {HOME_MODE:04o}")
        return f"usermod -s {quote(self.shell)} -e '' {quote(self.name)}"


@frozen
class RetireUser(Action):
    """A user removed from the team: account expired and shell set to nologin. The home
    directory is kept (their data), and their authorized_keys is emptied separately."""

    name: str

    def describe(self) -> str:
        return f"retire user {self.name} (expire account, shell /usr/sbin/nologin)"

    def script(self) -> str:
        return f"usermod -e 1 -s {NOLOGIN} {quote(self.name)}"


@frozen
class InstallPackages(Action):
    names: tuple[str, ...]
    lock_timeout: int = 300  # seconds to wait for the dpkg lock (provision.steps.apt_script)

    def describe(self) -> str:
        return f"apt-get install {' '.join(self.names)}"

    libs = (apt_script.APT,)

    def script(self) -> str:
        names = " ".join(quote(n) for n in self.names)
        return f"if ! provision_apt_install {self.lock_timeout} {names}; then exit 1; fi"


@frozen
class AptUpdate(Action):
    """`apt-get update`, waiting for the dpkg lock; `reason` says why the lists are refreshed."""

    reason: str
    lock_timeout: int = 300

    def describe(self) -> str:
        return f"apt-get update ({self.reason})"

    libs = (apt_script.APT,)

    def script(self) -> str:
        return f"if ! provision_apt_update {self.lock_timeout}; then exit 1; fi"


@frozen
class AptKey:
    """A signing key to install: refused on the host unless its one primary key has
    `fingerprint` (checked with gpg before anything is written)."""

    source: str
    path: str
    fingerprint: str


@frozen
class AptSources(Action):
    """Install, replace or remove our apt sources and their keys, then `apt-get update`.
    Keys are checked first; if the update fails (or fails to fetch one of `uris`), every file
    is put back as it was: nothing is half-applied."""

    writes: tuple[WriteFile, ...]
    keys: tuple[AptKey, ...]
    removes: tuple[RemoveFile, ...]
    uris: tuple[str, ...]  # the changed sources' URIs: a failure to fetch one fails the step
    lock_timeout: int = 300

    def describe(self) -> str:
        parts = [w.describe() for w in self.writes] + [r.describe() for r in self.removes]
        return "apt sources: " + "; ".join(parts) + "; apt-get update"

    libs = (apt_script.APT,)

    def plan_files(self) -> tuple[FileChange, ...]:
        return tuple(f for w in self.writes for f in w.plan_files())

    def script(self) -> str:
        return apt_script.sources([(w.path, w.content) for w in self.writes],
                                  [(k.path, k.fingerprint, k.source) for k in self.keys],
                                  [r.path for r in self.removes], self.uris, self.lock_timeout)


@frozen
class SetSysctl(Action):
    """Set a kernel setting now (its file in /etc/sysctl.d keeps it across boots) and read
    it back: the batch fails, naming both values, when the kernel keeps another."""

    key: str
    value: str  # as `sysctl -n` prints it, words separated by one space
    why: str = ""
    source: str = ""  # the file that sets it at boot, named when the kernel refuses the value

    def describe(self) -> str:
        return f"sysctl {self.key} = {self.value}" + (f" ({self.why})" if self.why else "")

    def script(self) -> str:
        # the kernel may refuse or round a value: what it runs afterwards is what counts
        k, v = quote(self.key), quote(self.value)
        src = f" (from {self.source})" if self.source else ""
        refused = quote(f"{self.key}: the kernel refuses {self.value}{src}")
        return (f"sysctl -q -w {k}={v} || {{ echo {refused} >&2; exit 1; }}\n"
                f"provision_v=$(sysctl -n {k} | tr -s ' \\t' '  ')\n"
                # the key, value and file may come from the host's own sysctl.d: quoted,
                # never inside double quotes where `$(...)` would run
                f'[ "$provision_v" = {v} ] || {{ echo {quote(f"{self.key}: the kernel runs ")}'
                f'"\'$provision_v\'"{quote(f" after setting {self.value}{src}")} >&2; exit 1; }}')


@frozen
class DaemonReload(Action):
    def describe(self) -> str:
        return "systemctl daemon-reload"

    def script(self) -> str:
        return "systemctl daemon-reload"


@frozen
class LoadNewUnits(Action):
    """Make systemd load unit files it has never loaded, without a daemon-reload: systemd
    (v245 on) loads a unit it does not know from disk when first asked for it, once the
    unit directories changed. Each unit is asked for and must come back `loaded`; if one
    does not (an older systemd, a directory mtime that did not move), the batch does the
    full daemon-reload after all. A reload reruns every generator and rereads every unit
    file (200 ms on a lab host; most of a cold bootstrap's host time)."""

    units: tuple[str, ...]

    def describe(self) -> str:
        many = len(self.units) != 1
        return (f"load new unit{'s' if many else ''} {', '.join(self.units)} (systemctl "
                f"daemon-reload only if systemd does not pick {'them' if many else 'it'} up)")

    def script(self) -> str:
        # `systemctl show` asks the manager for the unit, which loads it from disk
        return (f"for provision_u in {' '.join(quote(u) for u in self.units)}; do\n"
                '  [ "$(systemctl show -p LoadState --value -- "$provision_u" 2>/dev/null)" = loaded ]'
                " || { systemctl daemon-reload; break; }\ndone")


@frozen
class EnableUnit(Action):
    unit: str

    def describe(self) -> str:
        return f"systemctl enable {self.unit}"

    def script(self) -> str:
        return f"systemctl enable -q --no-reload {quote(self.unit)}"


@frozen
class StartUnit(Action):
    """Start a unit; `ports`: the TCP ports its service listens on once up (the batch's
    settle check takes the unit listening on all of them as settled)."""

    unit: str
    ports: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"systemctl start {self.unit}"

    def script(self) -> str:
        return f"provision_unit start {quote(self.unit)}"

    def settles(self) -> tuple[str, tuple[int, ...]]:
        return self.unit, self.ports


@frozen
class RestartUnit(Action):
    """Restart a unit; `ports` as for StartUnit."""

    unit: str
    reason: str = ""
    ports: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"systemctl restart {self.unit}" + (f" ({self.reason})" if self.reason else "")

    def script(self) -> str:
        return f"provision_unit restart {quote(self.unit)}"

    def settles(self) -> tuple[str, tuple[int, ...]]:
        return self.unit, self.ports


@frozen
class RetireUnit(Action):
    """Stop and disable a unit provision no longer wants (a member's server once they
    leave): its files, and the member's, stay."""

    unit: str
    reason: str = ""

    def describe(self) -> str:
        return f"systemctl disable --now {self.unit}" + (f" ({self.reason})" if self.reason else "")

    def script(self) -> str:
        return f"systemctl disable -q --now -- {quote(self.unit)}"


@frozen
class EnsureGroup(Action):
    """The group exists (created when absent), with `add` in it and `remove` out of it."""

    name: str
    create: bool
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()

    def describe(self) -> str:
        changes = [*(["add " + ", ".join(self.add)] if self.add else []),
                   *(["remove " + ", ".join(self.remove)] if self.remove else [])]
        head = f"create group {self.name}" if self.create else f"group {self.name}"
        return "; ".join([head, *changes])

    def script(self) -> str:
        lines = [f"groupadd -f -- {quote(self.name)}"] if self.create else []
        lines += [f"usermod -aG {quote(self.name)} -- {quote(u)}" for u in self.add]
        lines += [f"gpasswd -d {quote(u)} {quote(self.name)} >/dev/null" for u in self.remove]
        return "\n".join(lines) or "true"


