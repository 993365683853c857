"""Journal files: one per open migration under the state directory, written atomically.

I/O (local files only; no network, no provider: `provision check` reads these). A save
writes a temp file in the same directory, fsyncs it, renames it over the journal and
fsyncs the directory, so a crash leaves the old journal or the new one, never a torn
one. A closed migration's journal moves to ``closed/`` (kept for the record).

The directory is ``migrations/`` in the state directory (`provision.state`: where it is,
0700, refused when another user or group/others can write it); temp and lock files are
opened as `provision.state` opens them (O_EXCL, O_NOFOLLOW).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from provision import state
from provision.errors import OperationError, UsageError
from provision.localfile import read_regular

from .journal import Journal, JournalError, file_name, to_json
from .trust import MAX_BYTES, from_json


def state_dir() -> Path:
    return state.root() / "migrations"


class JournalStore:
    def __init__(self, root: Path | None = None):
        self.root = root or state_dir()

    def path(self, name: str) -> Path:
        return self.root / file_name(name)

    def load(self, name: str) -> Journal | None:
        """The journal filed under `name`, or None. Raises UsageError naming the file when
        it cannot be read or is refused (`trust`): a journal that is not about `name`, an
        unreadable file, a FIFO or device, a symlink."""
        p = self.path(name)
        if not state.existing(self.root):  # StateDirError when not private
            return None
        try:
            data = read_limited(p)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise UsageError(f"cannot read the migration journal {p}: "
                             f"{e.strerror or e}; nothing was sent") from None
        try:
            return from_json(data)
        except JournalError as e:
            raise UsageError(f"the migration journal {p} is refused: {e}; nothing was sent "
                             "(the zone's marker still tells the phase: move the file away "
                             "and run status)") from None

    def all(self) -> list[tuple[Path, Journal | None, str]]:
        """Every journal file: (path, journal or None, error). A journal is kept only when
        it is filed under its own name."""
        out: list[tuple[Path, Journal | None, str]] = []
        if not state.existing(self.root):  # StateDirError when not private
            return out
        try:
            files = sorted(self.root.glob("*.json"))
        except OSError:
            return out
        for p in files[:MAX_FILES]:
            try:
                j = from_json(read_limited(p))
                if p.name != file_name(j.name):
                    raise JournalError(f"it is about {j.name}, but it is filed as {p.name}")
                out.append((p, j, ""))
            except (OSError, JournalError) as e:
                out.append((p, None, getattr(e, "strerror", None) or str(e)))
        return out

    def closed(self) -> list[tuple[Path, Journal | None, str]]:
        """Every closed journal (closed/), newest file name last: (path, journal, error)."""
        out: list[tuple[Path, Journal | None, str]] = []
        try:
            files = sorted((self.root / "closed").glob("*.json"))
        except OSError:
            return out
        for p in files:
            try:
                out.append((p, from_json(p.read_text()), ""))
            except (OSError, JournalError) as e:
                out.append((p, None, str(e)))
        return out

    def save(self, j: Journal) -> None:
        state.private_dir(self.root)
        _atomic_write(self.path(j.name), to_json(j))

    def archive(self, j: Journal, outcome: str) -> Path:
        """Close: the journal (with its outcome in the history) moves to closed/."""
        closed = state.private_dir(self.root / "closed")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        dest = closed / f"{file_name(j.name)[:-5]}.{stamp}.json"
        final = j.at(j.phase, time.time(), f"closed: {outcome}")
        _atomic_write(dest, to_json(final))
        with contextlib.suppress(FileNotFoundError):
            self.path(j.name).unlink()
        _fsync_dir(self.root)
        return dest

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """One command per migration at a time on this machine (other machines are kept
        out by the marker: every change's prerequisites are the RRsets read)."""
        state.private_dir(self.root)
        p = self.root / (file_name(name)[:-5] + ".lock")
        fd = state.open_lock(p)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OperationError(f"another provision process is working on the migration "
                                     f"of {name} (lock {p})") from None
            yield
        finally:
            os.close(fd)


    def busy(self, name: str) -> bool:
        """Another process holds the lock of `name` right now (a run in progress)."""
        p = self.root / (file_name(name)[:-5] + ".lock")
        try:
            fd = os.open(p, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


MAX_FILES = 10_000


def read_limited(path: Path, limit: int = MAX_BYTES) -> bytes:
    """A journal's bytes: a regular file (no FIFO, device or symlink), at most `limit`."""
    return read_regular(path, limit, "journal")


def _atomic_write(path: Path, text: str) -> None:
    state.atomic_write(path, text)


def _fsync_dir(d: Path) -> None:
    state.fsync_dir(d)
