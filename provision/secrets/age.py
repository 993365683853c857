"""The shell around Debian's `age` binary (1.1): encrypt to recipients, decrypt with an
identity file. Values go through pipes, never argv or a file; recipients (public keys) go
as `-r` arguments.

Why the binary and not pyrage: it is the age the team already has (Debian, Homebrew), it
asks for a passphrase-protected SSH key's passphrase on the terminal (pyrage cannot use
such a key at all), and what it writes any age tool reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from provision.errors import OperationError, UsageError
from provision.text import printable

TIMEOUT = 120  # a passphrase prompt waits for a person


class AgeError(OperationError):
    """age failed (exit 1): the message says why, with age's own words."""


def _binary() -> str:
    found = shutil.which("age")
    if found is None:
        raise UsageError("secrets need the `age` program (Debian/Ubuntu: apt-get install age; "
                         "macOS: brew install age)")
    return found


def _run(args: list[str], data: bytes) -> bytes:
    try:
        # stdin is the data; a passphrase prompt, if any, goes to /dev/tty (age's own)
        done = subprocess.run([_binary(), *args], input=data, capture_output=True,
                              timeout=TIMEOUT, check=False, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise AgeError(f"age did not finish within {TIMEOUT} s") from None
    if done.returncode != 0:
        said = printable(done.stderr.decode("utf-8", "replace").strip().splitlines()[0]
                         if done.stderr.strip() else f"exit status {done.returncode}")
        raise AgeError(said.removeprefix("age: "))
    return done.stdout


def encrypt(value: bytes, recipients: Sequence[str]) -> str:
    """`value` encrypted to every one of `recipients`, ASCII-armored."""
    if not recipients:
        raise UsageError("nobody to encrypt to: the team has no ssh-ed25519 or ssh-rsa key "
                         "and `recipients` is empty")
    args = ["--encrypt", "--armor"]
    for r in recipients:
        args += ["-r", r]
    return _run(args, value).decode("ascii")


def decrypt(armored: str, identities: Sequence[str]) -> bytes:
    """The value of `armored`, with the first of `identities` (private key files) that fits."""
    args = ["--decrypt"]
    for i in identities:
        args += ["-i", i]
    return _run(args, armored.encode("ascii"))
