"""The one error base class: every error a user should see carries its exit status.

Pure, no I/O. Commands raise; `provision.cli.main` prints the message (control characters
escaped) and exits with `exit_code`. Nothing else in the package calls `sys.exit`.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CHANGES = 0, 1, 2, 3


class ProvisionError(Exception):
    """Base of every error that ends a command with a message instead of a traceback."""

    exit_code = EXIT_FAILED
    prefix = "error: "

    def __init__(self, message: str = "", *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)


class UsageError(ProvisionError):
    """Bad input or usage: an invalid inventory, playbook, flag or argument (exit 2)."""

    exit_code = EXIT_USAGE


class OperationError(ProvisionError):
    """A host, step or API call failed (exit 1)."""

    exit_code = EXIT_FAILED


class Exit(ProvisionError):
    """End the command with `exit_code` after output was already printed (no message)."""

    prefix = ""

    def __init__(self, exit_code: int):
        super().__init__("", exit_code=exit_code)


class RenderError(UsageError):
    """The inventory is valid but rendering it would produce something unsafe or impossible."""
