"""`provision check` for the SSH files the inventory names on the operator's machine: the
private keys (`identity_file`) and the known_hosts file (issue 39: a misspelt path passed
`check` and failed `plan`).

`named` lists them from the inventory's document (pure: it runs on a document the schema
refused too, so that these problems come in the same run as the others); `problems`
looks at each (I/O: stat and open, never a key's secret part read). What `plan` and
`apply` need is an error (exit 2, at the field's file:line): the operator's key that
cannot be used, a known_hosts file that cannot be read. A file `plan` can do without
is a warning: a known_hosts not there yet (`--accept-new` creates it), a key not there
whose `.pub` is (ssh-agent holds it), a team member's key (only `provision tunnel --user
NAME`, on that member's own machine, uses it).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any, Literal

from provision.frozen import frozen
from provision.inventory.fields import check_known_hosts_path, check_path
from provision.inventory.source import FieldPath, SourceDoc
from provision.localfile import file_kind

from .errors import HostKeyError
from .hostkeys import read_known_hosts

Kind = Literal["identity", "member-identity", "known-hosts"]
# The first bytes of a public key line (ssh-keygen's NAME.pub), given where a private key goes.
_PUBLIC = (b"ssh-", b"ecdsa-sha2-", b"sk-ssh-", b"sk-ecdsa-")


@frozen
class LocalFile:
    field: FieldPath  # where the inventory names it
    path: str         # as written
    kind: Kind


@frozen
class FileProblem:
    field: FieldPath
    message: str
    severity: Literal["error", "warning"]
    fix: str


_ELSEWHERE = " (checking on a machine that runs no plan? `check --no-local-files`)"
_FIX: dict[Kind, str] = {
    "identity": "fix the path, or make the key (ssh-keygen -t ed25519 -f PATH)",
    "member-identity": "fix the path where it is wrong; on another member's machine, nothing",
    "known-hosts": "fix the path; a new file is made by the first plan or apply with --accept-new",
}


def named(doc: SourceDoc) -> list[LocalFile]:
    """Every key and known_hosts file the inventory names, where it names it. A value the
    schema refuses is left to the schema's message."""
    data = doc.data if isinstance(doc.data, dict) else {}
    defaults = _dict(data.get("defaults"))
    out: list[LocalFile] = []
    own_key = True  # every node names its own key: the default is used by none
    for section in ("bastions", "hosts"):
        for name, node in _dict(data.get(section)).items():
            node = _dict(node)
            if "identity_file" in node:
                out += _file((section, name, "identity_file"), node["identity_file"], "identity")
            else:
                own_key = False
    if not own_key:
        out += _file(("defaults", "identity_file"), defaults.get("identity_file"), "identity")
    out += _file(("defaults", "known_hosts"), defaults.get("known_hosts"), "known-hosts")
    for name, person in _dict(data.get("team")).items():
        out += _file(("team", name, "identity_file"), _dict(person).get("identity_file"),
                     "member-identity")
    return out


def _dict(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _file(field: FieldPath, value: Any, kind: Kind) -> list[LocalFile]:
    if not isinstance(value, str):
        return []
    try:
        (check_known_hosts_path if kind == "known-hosts" else check_path)(value)
    except ValueError:
        return []
    return [LocalFile(field, value, kind)]


def problems(files: list[LocalFile]) -> list[FileProblem]:
    """What is wrong with each file on this machine (`~` expanded, a relative path taken
    from the working directory, as the SSH connections take it)."""
    out: list[FileProblem] = []
    for f in files:
        why = (_known_hosts(f.path) if f.kind == "known-hosts" else _identity(f.path, f.kind))
        if why is not None:
            out.append(FileProblem(f.field, *why, _FIX[f.kind]))
    return out


def _identity(path: str, kind: Kind) -> tuple[str, Literal["error", "warning"]] | None:
    full = os.path.expanduser(path)
    member = kind == "member-identity"
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENOENT:
            if member:
                return (f"{path} is not on this machine (only `provision tunnel --user` run on "
                        "that member's own machine uses it)", "warning")
            if os.path.exists(full + ".pub"):
                return (f"{path} is not on this machine, only {path}.pub: plan and apply can log "
                        "in only if ssh-agent holds that key", "warning")
            return (f"{path} does not exist (nor {path}.pub): plan, apply and exec log in with "
                    f"this key{_ELSEWHERE}", "error")
        return (f"cannot read {path}: {e.strerror or e}", "warning" if member else "error")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return (f"{path} is {file_kind(st.st_mode)}, not a private key file",
                    "warning" if member else "error")
        head = os.read(fd, 64).lstrip()
    finally:
        os.close(fd)
    if head.startswith(_PUBLIC):
        return (f"{path} is a public key; identity_file names the private key (the file "
                "without .pub)", "warning" if member else "error")
    return None


def _known_hosts(path: str) -> tuple[str, Literal["error", "warning"]] | None:
    full = os.path.expanduser(path)
    try:
        read_known_hosts(Path(full), every_line=False)  # what plan reads, as plan reads it
    except FileNotFoundError:
        parent = os.path.dirname(full) or "."
        if not os.path.isdir(parent):
            return (f"{path} does not exist, nor its directory: plan cannot read it, and "
                    f"`--accept-new` cannot create it{_ELSEWHERE}", "error")
        return (f"{path} does not exist yet: every host's key is unknown until `--accept-new` "
                "adds it (or the path is misspelt)", "warning")
    except OSError as e:
        return f"cannot read {path}: {e.strerror or e}", "error"
    except HostKeyError as e:  # not a regular file, too large
        return str(e), "error"
    return None
