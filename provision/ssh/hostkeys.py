"""The one host-key trust path: converge, confirm, audit, the Fabric API (all through
`provision.ssh.link`) and the paramiko tunnel all judge a server's key here, the way OpenSSH does.

Keys are looked up under the hop's address only, in OpenSSH's spelling (`addr` on port
22, `[addr]:port` elsewhere), never under the inventory's name for it. Unknown keys are
refused unless accept-new (then appended, like `StrictHostKeyChecking=accept-new`); a
changed key, or a key known only under another type, is always refused, and so is a key
the file marks `@revoked` (for any host: stricter than OpenSSH, which honours the line's
host patterns). paramiko skips marker lines, and a line it cannot decode raised out of its
loader; the file is read here, lines that do not parse are skipped as OpenSSH does.

`judge` decides (pure); `KnownHosts` is the shell: it reads and appends the file.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import os
import re
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from provision.inventory.fields import check_address
from provision.text import printable

from .errors import HostKeyError

Verdict = Literal["known", "unknown", "changed", "revoked"]
_append_lock = threading.Lock()
_loaded_lock = threading.Lock()
_loaded: dict[Path, tuple[tuple[int, int, int], tuple[Any, frozenset[bytes]]]] = {}


def key_name(address: str, port: int) -> str:
    """How OpenSSH writes a host in known_hosts."""
    return address if port == 22 else f"[{address}]:{port}"


def fingerprint(key_bytes: bytes) -> str:
    digest = hashlib.sha256(key_bytes).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def judge(known: Mapping[str, bytes], key_type: str, key_bytes: bytes,
          revoked: frozenset[bytes] = frozenset()) -> Verdict:
    """known: key type -> key blob recorded for the host. A key of another type than the
    recorded ones counts as changed: a key swap looks exactly like that. A revoked key is
    revoked whatever else the file says about it."""
    if key_bytes in revoked:
        return "revoked"
    if not known:
        return "unknown"
    return "known" if known.get(key_type) == key_bytes else "changed"


def refusal(verdict: Verdict, label: str, name: str, key_type: str, key_bytes: bytes,
            path: Path, known_types: tuple[str, ...] = (), hint: str = "") -> str:
    """The message for a refused key (verdict unknown, changed or revoked)."""
    fp = f"{key_type} {fingerprint(key_bytes)}"
    if verdict == "revoked":
        return f"{label}: host key for {name} is REVOKED ({fp}): {path} marks it @revoked; refusing"
    if verdict == "unknown":
        return (f"{label}: unknown host key for {name} ({fp}); not in {path}; refusing"
                + (f". {hint}" if hint else ""))
    held = f" ({', '.join(known_types)})" if known_types else ""
    return (f"{label}: host key for {name} CHANGED: the server offered {fp}, but {path} holds "
            f"a different key{held} for it; refusing (remove the old entry with "
            "`ssh-keygen -R` if the change is expected)")


ACCEPT_NEW_HINT = ("Check the fingerprint, then run again with --accept-new to record it "
                   "(like StrictHostKeyChecking=accept-new)")


class KnownHosts:
    """A known_hosts file: lookups for `judge`, and appends for accept-new."""

    def __init__(self, path: Path, accept_new: bool = False, hint: str = ACCEPT_NEW_HINT):
        self.path = path
        self.accept_new = accept_new
        self.hint = hint
        self.keys, self.revoked = _parsed(path)

    def known(self, address: str, port: int) -> dict[str, bytes]:
        try:
            entry = self.keys.lookup(key_name(address, port))
        except (AssertionError, ValueError, binascii.Error):  # paramiko on a bad |1| entry
            raise HostKeyError(f"{self.path} holds a malformed hashed entry (|1|salt|hash with "
                               "a salt that is not 20 bytes); fix or remove it") from None
        return {t: k.asbytes() for t, k in entry.items()} if entry else {}

    def check(self, label: str, address: str, port: int, key: Any) -> None:
        """Accept `key` (a paramiko PKey) for address:port, record it (accept-new), or raise
        HostKeyError."""
        name = key_name(address, port)
        known = self.known(address, port)
        verdict = judge(known, key.get_name(), key.asbytes(), self.revoked)
        if verdict == "known":
            return
        if verdict == "unknown" and self.accept_new:
            self._append(name, key)
            return
        raise HostKeyError(refusal(verdict, label, name, key.get_name(), key.asbytes(),
                                   self.path, tuple(known), "" if self.accept_new else self.hint))

    def _append(self, name: str, key: Any) -> None:
        line = known_hosts_line(name, key.get_name(), key.get_base64())
        with _append_lock:
            append_line(self.path, line)
        self.keys.add(name, key.get_name(), key)


# --- what is appended, and where: pure checks, then the one append -------------------------

# Host patterns as OpenSSH writes them: names, addresses, [addr]:port, wildcards, negation,
# or a hashed |1|salt|hash entry. No quotes, '=' or spaces: nothing an option could hide in.
_HOSTS_FIELD = re.compile(r"^(\|1\|[A-Za-z0-9+/=]+\|[A-Za-z0-9+/=]+|[A-Za-z0-9.:_*?!\[\],-]+)$")
_KEY_TYPE = re.compile(r"^[a-z0-9][a-z0-9@._-]*$")
APPENDED_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                  "ecdsa-sha2-nistp521")
MAX_KNOWN_HOSTS_BYTES = 64 * 1024 * 1024


def _blob_type(b64: str) -> str | None:
    """The key type written inside an OpenSSH key blob, or None when it is not one."""
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    n = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else -1
    if n <= 0 or 4 + n > len(raw):
        return None
    try:
        return raw[4:4 + n].decode("ascii")
    except UnicodeDecodeError:
        return None


def known_hosts_line(name: str, key_type: str, key_b64: str) -> str:
    """The one line accept-new appends: `HOST KEYTYPE BASE64`, HOST the validated address in
    OpenSSH's spelling (`addr` or `[addr]:port`). No marker, no pattern, no comment: a
    hostile address or key can add nothing else to the file. Raises HostKeyError."""
    m = re.fullmatch(r"\[(?P<a>[^\]]+)\]:(?P<p>[0-9]{1,5})|(?P<b>[^\[\]]+)", name)
    address = (m.group("a") or m.group("b")) if m else ""
    try:
        check_address(address)
    except ValueError as e:
        raise HostKeyError(f"refusing to record a host key for {printable(name)!r}: {e}") from None
    if m and m.group("p") and not 1 <= int(m.group("p")) <= 65535:
        raise HostKeyError(f"refusing to record a host key for {printable(name)!r}: bad port")
    if key_type not in APPENDED_TYPES or _blob_type(key_b64) != key_type:
        raise HostKeyError(f"refusing to record a host key for {name}: {printable(key_type)!r} "
                           f"is not a key type provision records ({', '.join(APPENDED_TYPES)}) "
                           "or the key data does not hold one")
    return f"{name} {key_type} {key_b64}\n"


def not_known_hosts(text: str) -> str | None:
    """Why `text` is not the content of a known_hosts file (the first bad line), or None.
    Each line must be blank, a comment, or `[@marker] HOSTS KEYTYPE BASE64 [comment]` with
    the blob's own type matching: authorized_keys lines with options, shell rc files and
    private keys all fail it."""
    for n, line in enumerate(text.split("\n"), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] in ("@cert-authority", "@revoked"):
            fields = fields[1:]
        if (len(fields) < 3 or not _HOSTS_FIELD.match(fields[0]) or not _KEY_TYPE.match(fields[1])
                or _blob_type(fields[2]) != fields[1]):
            return f"line {n} is not a known_hosts entry (HOSTS KEYTYPE BASE64)"
    return None


def read_known_hosts(path: Path, every_line: bool = True) -> str:
    """The text of the known_hosts file at `path`: a regular file (a FIFO or device is
    refused without blocking on it), at most MAX_KNOWN_HOSTS_BYTES, and (`every_line`)
    every line a known_hosts line. Raises HostKeyError naming the file and the line;
    FileNotFoundError when absent. Reading keys passes every_line=False: a line that does
    not parse is skipped, as OpenSSH does (it can only make a host unknown); appending
    still requires every line to be one (`append_line`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HostKeyError(f"{path} is not a regular file; defaults.known_hosts must name "
                               "a known_hosts file")
        data = f.read(MAX_KNOWN_HOSTS_BYTES + 1)
    if len(data) > MAX_KNOWN_HOSTS_BYTES:
        raise HostKeyError(f"{path} is larger than {MAX_KNOWN_HOSTS_BYTES // (1024 * 1024)} MiB; "
                           "not a known_hosts file provision reads")
    text = data.decode("utf-8", errors="replace")
    why = not_known_hosts(text) if every_line else None
    if why is not None:
        raise HostKeyError(f"{path}: {why}; defaults.known_hosts must name a known_hosts file")
    return text


# Files of ~/.ssh with another role than known_hosts (config, rc and environment cannot
# contain 'known_hosts'): whatever their content (an empty authorized_keys parses as
# known_hosts), never appended to; nor a key or a shell file, by their usual names.
_OTHER_ROLES = ("authorized_keys", "authorized_principals", "allowed_signers", "revoked_keys")
_KEY_OR_SHELL = (".pub", ".pem", ".key", ".sh", ".bash", ".zsh", "rc", "_profile", ".profile")


def not_a_known_hosts_name(target: Path) -> str | None:
    """Why the file at `target` (a real path: every symlink resolved) is not one accept-new
    may append to, by its name alone, or None. The second guard, independent of the one at
    load (`provision.inventory.fields.check_known_hosts_path`, on the path as written): a
    name that passes there but resolves, through a symlink, to authorized_keys, an rc file
    or a key is refused here. Pure."""
    base = target.name
    if "known_hosts" not in base:
        return (f"its real path {target} is not named like a known_hosts file (the name "
                "must contain 'known_hosts')")
    lowered = base.lower()
    role = next((r for r in _OTHER_ROLES if r in lowered), None)
    if role is not None:
        return f"its real path {target} is named like an ssh '{role}' file"
    if base.startswith("id_") or lowered.endswith(_KEY_OR_SHELL):
        return f"its real path {target} is named like a key or a shell file"
    return None


def not_ours_to_append(st: os.stat_result, target: Path) -> str | None:
    """Why the open file (its `fstat`) is not a known_hosts file of the operator's to append
    to, or None: another link to the same file (a hard link named fleet_known_hosts to
    ~/.ssh/authorized_keys passes every name check), another user's file, or an executable
    (a script is no known_hosts file). Pure."""
    if st.st_nlink != 1:
        return (f"{target} has {st.st_nlink} hard links: the same file has another name "
                "(which could be authorized_keys or an rc file)")
    if st.st_uid != os.geteuid():
        return f"{target} is owned by uid {st.st_uid}, not by you"
    if st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_ISUID | stat.S_ISGID):
        return f"{target} is executable: a known_hosts file is not a program"
    return None


def append_line(path: Path, line: str) -> None:
    """Append `line` to the known_hosts file at `path` (a dotfile symlink is followed to its
    target), only when the target is named like a known_hosts file (real path), is a
    regular file of the operator's with one link and no execute bit, and every line of it is
    a known_hosts line (or it does not exist yet: created 0600). Opened without following a
    symlink swapped in meanwhile; written under an exclusive lock, then fsynced. Raises
    HostKeyError."""
    target = Path(os.path.realpath(path))
    why = not_a_known_hosts_name(target)
    if why is not None:
        raise HostKeyError(f"refusing to append a host key to {path}: {why}; "
                           "defaults.known_hosts must name a known_hosts file")
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o600)
    except OSError as e:
        raise HostKeyError(f"cannot record the host key in {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HostKeyError(f"refusing to append to {path}: not a regular file")
        why = not_ours_to_append(st, target)
        if why is not None:
            raise HostKeyError(f"refusing to append a host key to {path}: {why}; "
                               "defaults.known_hosts must name a known_hosts file of yours")
        fcntl.flock(fd, fcntl.LOCK_EX)
        if st.st_size > MAX_KNOWN_HOSTS_BYTES:
            raise HostKeyError(f"refusing to append to {path}: larger than "
                               f"{MAX_KNOWN_HOSTS_BYTES // (1024 * 1024)} MiB")
        with os.fdopen(os.dup(fd), "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        why = not_known_hosts(text)
        if why is not None:
            raise HostKeyError(f"refusing to append a host key to {path}: {why}; "
                               "defaults.known_hosts must name a known_hosts file")
        prefix = "\n" if text and not text.endswith("\n") else ""
        os.write(fd, (prefix + line).encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _parsed(path: Path) -> tuple[Any, frozenset[bytes]]:
    """The file's keys as a paramiko HostKeys (revoked keys left out, so paramiko's own
    check never finds them known) and the revoked key blobs, parsed once per version of
    the file: every host of a run opens its own chain, and parsing the file (a key object
    per line) for each of them cost more CPU than their handshakes. A change to the file
    (ours or anyone's) is a new version."""
    try:
        st = path.stat()
        version = (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        import paramiko

        return paramiko.HostKeys(), frozenset()
    with _loaded_lock:
        cached = _loaded.get(path)
        if cached is not None and cached[0] == version:
            return cached[1]
        # refuses a FIFO, a huge file or one that is not known_hosts
        parsed = _parse(read_known_hosts(path, every_line=False))
        _loaded[path] = (version, parsed)
        return parsed


def _parse(text: str) -> tuple[Any, frozenset[bytes]]:
    import paramiko
    from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

    lines = [(n, ln.strip()) for n, ln in enumerate(text.splitlines(), 1)]
    lines = [(n, ln) for n, ln in lines if ln and not ln.startswith("#")]
    revoked: set[bytes] = set()
    for _, line in lines:
        fields = line.split()
        if fields[0] == "@revoked" and len(fields) >= 4:
            try:  # decoded as leniently as paramiko decodes a plain line's key
                revoked.add(base64.decodebytes(fields[3].encode()))
            except ValueError:
                continue
    keys = paramiko.HostKeys()
    for n, line in lines:
        if line.startswith("@"):
            continue  # @revoked above; @cert-authority: no certificates here, never a key
        try:
            entry = HostKeyEntry.from_line(line, n)
        except (paramiko.SSHException, InvalidHostKey, ValueError):
            continue
        if entry is None or entry.key.asbytes() in revoked:
            continue
        # what HostKeys.load does with an entry: a later line with the same key for a
        # name adds nothing, another key is kept beside the first
        entry.hostnames = [h for h in entry.hostnames if not keys.check(h, entry.key)]
        if entry.hostnames:
            keys._entries.append(entry)  # type: ignore[attr-defined]  # as load() does
    return keys, frozenset(revoked)


def known_hosts_path(configured: str | None) -> Path:
    """The inventory's `defaults.known_hosts`, else ~/.ssh/known_hosts."""
    return Path(os.path.expanduser(configured or "~/.ssh/known_hosts"))
