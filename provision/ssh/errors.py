"""Why an SSH link failed, for converge, confirm, tunnel and audit alike. Pure data."""

from __future__ import annotations

from provision.errors import OperationError


class ConnectError(OperationError):
    """The link could not be established (network, handshake); may be retried."""


class AuthError(ConnectError):
    """No key was accepted."""


class HostKeyError(ConnectError):
    """A hop's host key is unknown or changed: never retried, never accepted on trust."""
