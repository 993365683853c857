"""The one host-key trust path: converge, confirm, audit (Fabric/paramiko clients) and the
paramiko tunnel all judge a server's key here, the way OpenSSH does.

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
import fcntl
import hashlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

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
        entry = self.keys.lookup(key_name(address, port))
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
        line = f"{name} {key.get_name()} {key.get_base64()}\n"
        with _append_lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                f.write(line)
        self.keys.add(name, key.get_name(), key)


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
        parsed = _parse(path.read_text(encoding="utf-8", errors="replace"))
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
