"""Leave the process the way `sys.exit` does, minus the interpreter's teardown.

After a command has finished, CPython's shutdown frees every module and object one by one
(pydantic's schemas, Jinja, paramiko, cryptography: ~100,000 objects), which took 0.15 s
after `check` and 0.25 s after `plan` on the lab machine, a fifth of a no-op plan, for a
process about to end. `exit_now` does the parts of the shutdown that have an effect, in
the interpreter's order: join the non-daemon threads (after the hooks that stop
`concurrent.futures` workers), run the `atexit` handlers (which `logging`, `tempfile` and
`weakref.finalize` use), flush stdout and stderr, then `os._exit`. Only the freeing of
memory is skipped; the kernel takes it back at once.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

# CPython's own status when flushing stdout fails at exit (a closed pipe, a full disk)
FLUSH_FAILED = 120


def status_of(code: object) -> int:
    """The exit status `sys.exit(code)` gives: None is 0, an int is itself, anything
    else is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def exit_now(code: object) -> NoReturn:
    """Exit with `code` as `sys.exit` would, skipping only the freeing of objects."""
    shutdown = getattr(threading, "_shutdown", None)
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None:  # another interpreter: the usual way
        raise SystemExit(code)
    status = status_of(code)
    shutdown()
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout and status == 0:
                status = FLUSH_FAILED
    os._exit(status)
