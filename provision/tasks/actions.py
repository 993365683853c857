"""What a converge does to a host, as plain data (pure). The diff functions produce these; the
executor in `provision.tasks.script` turns them into one shell script."""

from __future__ import annotations

from provision.record import record
from provision.secretdata.vault import Sealed

from .apt_config_check import CheckAptConfig
from .apt_pins_actions import AptHolds, InstallPinned
from .door_script import DoorApply
from .python_env_script import BuildPythonEnv
from .shell import RunCommand


@record
class WriteFile:
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


@record
class WriteSecret:
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


@record
class SetAttrs:
    path: str
    mode: int
    owner: str
    group: str

    def describe(self) -> str:
        return f"set {self.path} to {self.mode:04o} {self.owner}:{self.group}"


@record
class RemoveFile:
    path: str
    old: str | None = None

    def describe(self) -> str:
        return f"remove {self.path}"


@record
class RemoveTemps:
    """Leftover `.provision-tmp.*` files of an interrupted run."""

    paths: tuple[str, ...]

    def describe(self) -> str:
        return f"clean {len(self.paths)} leftover temp file(s): {', '.join(self.paths)}"


@record
class Mkdir:
    path: str
    mode: int = 0o755
    owner: str = "root"
    group: str = "root"

    def describe(self) -> str:
        return f"directory {self.path} ({self.mode:04o} {self.owner}:{self.group})"


@record
class EnsureUser:
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


@record
class RetireUser:
    """A user removed from the team: account expired and shell set to nologin. The home
    directory is kept (their data), and their authorized_keys is emptied separately."""

    name: str

    def describe(self) -> str:
        return f"retire user {self.name} (expire account, shell /usr/sbin/nologin)"


@record
class InstallPackages:
    names: tuple[str, ...]
    lock_timeout: int = 300  # seconds to wait for the dpkg lock (provision.tasks.apt_script)

    def describe(self) -> str:
        return f"apt-get install {' '.join(self.names)}"


@record
class AptUpdate:
    """`apt-get update`, waiting for the dpkg lock; `reason` says why the lists are refreshed."""

    reason: str
    lock_timeout: int = 300

    def describe(self) -> str:
        return f"apt-get update ({self.reason})"


@record
class AptKey:
    """A signing key to install: refused on the host unless its one primary key has
    `fingerprint` (checked with gpg before anything is written)."""

    source: str
    path: str
    fingerprint: str


@record
class AptSources:
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


@record
class SetSysctl:
    """Set a kernel setting now (its file in /etc/sysctl.d keeps it across boots) and read
    it back: the batch fails, naming both values, when the kernel keeps another."""

    key: str
    value: str  # as `sysctl -n` prints it, words separated by one space
    why: str = ""
    source: str = ""  # the file that sets it at boot, named when the kernel refuses the value

    def describe(self) -> str:
        return f"sysctl {self.key} = {self.value}" + (f" ({self.why})" if self.why else "")


@record
class DaemonReload:
    def describe(self) -> str:
        return "systemctl daemon-reload"


@record
class LoadNewUnits:
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


@record
class EnableUnit:
    unit: str

    def describe(self) -> str:
        return f"systemctl enable {self.unit}"


@record
class StartUnit:
    """Start a unit; `ports`: the TCP ports its service listens on once up (the batch's
    settle check takes the unit listening on all of them as settled)."""

    unit: str
    ports: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"systemctl start {self.unit}"


@record
class RestartUnit:
    """Restart a unit; `ports` as for StartUnit."""

    unit: str
    reason: str = ""
    ports: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"systemctl restart {self.unit}" + (f" ({self.reason})" if self.reason else "")


@record
class RetireUnit:
    """Stop and disable a unit provision no longer wants (a member's server once they
    leave): its files, and the member's, stay."""

    unit: str
    reason: str = ""

    def describe(self) -> str:
        return f"systemctl disable --now {self.unit}" + (f" ({self.reason})" if self.reason else "")


@record
class EnsureGroup:
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


Action = (WriteFile | WriteSecret | SetAttrs | RemoveFile | RemoveTemps | Mkdir | EnsureUser
          | RetireUser | InstallPackages | AptUpdate | AptSources | SetSysctl | DaemonReload
          | LoadNewUnits | EnableUnit | StartUnit | RestartUnit | RetireUnit | EnsureGroup
          | RunCommand | BuildPythonEnv | DoorApply | InstallPinned | AptHolds
          | CheckAptConfig)
