"""Reading a local file that someone else may have placed: regular files only, a size cap.

I/O (one file). Used for migration journals, TSIG key files and credential files: a FIFO
would hang a plain open, a device would stream forever, a symlink could point anywhere.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words ("a character device", ...)."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"),
                        (stat.S_ISREG, "a regular file")):
        if test(mode):
            return words
    return "not a regular file"


def read_regular(path: Path | str, limit: int, what: str, *, follow: bool = False,
                 real_check: Callable[[str], str | None] | None = None) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; OSError (with a
    message in words) otherwise. `follow`: a symlink to a regular file is read (paths the
    inventory names, e.g. a key file); else a symlink is refused (the state directory).
    `real_check`: why the file opened (its real path, from the descriptor) may not be
    read, or None (EPERM with that reason)."""
    a = "an" if what[:1].lower() in "aeiou" else "a"
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise OSError(errno.ELOOP, f"a symbolic link ({what}s are regular files; "
                          "provision follows no link here)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({file_kind(st.st_mode)}); "
                          f"{a} {what} is a regular file")
        if real_check is not None:
            why = real_check(_real_path(fd, path))
            if why is not None:
                raise OSError(errno.EPERM, why)
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size} bytes, more than the {limit} {a} {what} "
                          "may have")
        chunks = []
        total = 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise OSError(errno.EFBIG, f"more than the {limit} bytes {a} {what} may have")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _real_path(fd: int, path: Path | str) -> str:
    """The real path of the file open on `fd` (Linux's /proc: what was opened, even if a
    link was swapped since), else the path's real path now."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
