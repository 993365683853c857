"""provision's local state directory, and the one way files are written and locked there.

I/O (local files only). The state directory holds what provision must remember between
runs on this machine (`migrations/`: DNS cutover journals and their locks). Everything in it
drives writes to zones and hosts, so it is private state:

- where: ``$PROVISION_STATE_DIR``, else ``$XDG_STATE_HOME/provision``, else
  ``~/.local/state/provision``;
- made 0700 (each directory provision creates, whatever the umask);
- refused, with a message saying how to fix it, when it (or a directory in it) is not a
  directory, is owned by another user, or is writable by group or others: a teammate who
  can write there could plant a journal that provision would act on;
- files are written as a temp file opened with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a symlink
  or a file planted under the temp name is never followed or reused), written, fsynced,
  renamed over the target, and the directory fsynced; lock files are opened with
  ``O_NOFOLLOW`` and must be regular files of ours.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from provision.errors import UsageError


class StateDirError(UsageError):
    """The state directory is not private (exit 2: the operator fixes it, nothing ran)."""


def root() -> Path:
    """The state directory (not created here)."""
    configured = os.environ.get("PROVISION_STATE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "provision"


def check_private(path: Path, st: os.stat_result) -> None:
    """Refuse `path` (its lstat `st`) unless it is a directory of ours that only we can
    write. Pure apart from reading the effective uid."""
    if stat.S_ISLNK(st.st_mode):
        raise StateDirError(f"state directory {path} is a symlink; point $PROVISION_STATE_DIR "
                            "at the real directory")
    if not stat.S_ISDIR(st.st_mode):
        raise StateDirError(f"state directory {path} is not a directory")
    if st.st_uid != os.geteuid():
        raise StateDirError(f"state directory {path} is owned by uid {st.st_uid}, not by you "
                            f"(uid {os.geteuid()}); provision keeps private state there: use a "
                            "directory of your own ($PROVISION_STATE_DIR)")
    if st.st_mode & 0o022:
        who = {0o022: "group and others", 0o020: "group", 0o002: "others"}[st.st_mode & 0o022]
        raise StateDirError(f"state directory {path} is writable by {who} (mode "
                            f"{stat.S_IMODE(st.st_mode):o}); anyone who can write there can "
                            f"plant files provision acts on: chmod 700 {path}")


def _chain(path: Path) -> list[Path]:
    """`path` and its ancestors up to the state directory itself, outermost first: each
    must be private, or whoever can write the outer one can swap the inner one. A path
    outside the state directory (a test's own) is checked alone."""
    top = root()
    chain = [path]
    p = path
    while p != top and p.parent != p and top in p.parents:
        p = p.parent
        chain.append(p)
    return chain[::-1]


def _lstat(p: Path) -> os.stat_result | None:
    try:
        return os.lstat(p)
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # a file where a directory of the chain should be
        raise StateDirError(f"state directory {p}: {p.parent} is not a directory") from None


def existing(path: Path) -> bool:
    """Whether the private directory `path` exists (it and the state directory above it
    checked as `check_private` says); False when it does not. For readers: nothing is
    created."""
    for p in _chain(path):
        st = _lstat(p)
        if st is None:
            return False
        check_private(p, st)
    return True


def private_dir(path: Path) -> Path:
    """`path` as a private directory: created 0700 (with its missing parents, also 0700)
    when absent, checked when present (and so is the state directory above it, before
    anything is made inside). Returns `path`."""
    for p in _chain(path):
        st = _lstat(p)
        if st is None:
            break
        check_private(p, st)
    missing: list[Path] = []
    p = path
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:  # made meanwhile: checked below like any existing one
            pass
        except NotADirectoryError:
            raise StateDirError(f"state directory {d}: {d.parent} is not a directory") from None
        else:
            os.chmod(d, 0o700)  # mkdir's mode is masked by the umask
    existing(path)
    return path


def atomic_write(path: Path, data: bytes | str, mode: int = 0o600) -> None:
    """Replace `path` with `data`: a fresh temp file next to it (O_EXCL, O_NOFOLLOW, `mode`),
    written and fsynced, renamed over `path`, then the directory fsynced, so a crash leaves
    the old content or the new, never a torn file, and nothing planted is followed."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask masks os.open's mode too
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_lock(path: Path) -> int:
    """A file descriptor of the lock file `path` (created 0600), opened without following a
    symlink; refused unless it is a regular file of ours. The caller flocks and closes it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o600)
    except OSError as e:
        raise StateDirError(f"cannot open the lock file {path}: {e.strerror} (a symlink there "
                            "is refused)") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise StateDirError(f"the lock file {path} is not a regular file of yours; remove it")
    return fd
