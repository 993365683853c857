"""When a failed SSH connection is worth trying again, and how long to wait (pure).

A host that answers the banner but drops us before authentication is usually still
booting (pam_nologin: "System is booting up") or shedding load (sshd `MaxStartups`);
so is one whose banner does not come in time. Those are retried with backoff for a bounded
time. A refused key, a refused host key, a refused or unroutable connection are not: a
retry would only delay the same answer.
"""

from __future__ import annotations

from provision.frozen import frozen

RETRY_WINDOW = 45.0  # seconds a host may spend booting before we call it unreachable
_TRANSIENT = (
    "transport shut down or saw eof",  # paramiko: EOF during auth (pam_nologin, MaxStartups)
    "error reading ssh protocol banner",  # banner timeout: sshd overloaded or starting
    "connection reset by peer",
    "no existing session",
    "eof during negotiation",
    "system is booting up",
    "connection closed by remote host",
)


def transient(message: str) -> bool:
    """Is this connection failure one a retry may fix?"""
    text = message.lower()
    return any(t in text for t in _TRANSIENT)


def backoff(attempt: int, base: float = 0.5, cap: float = 8.0) -> float:
    """Seconds to wait before retry number `attempt` (0-based): 0.5, 1, 2, 4, 8, 8 ..."""
    return min(cap, base * 2.0 ** attempt)


@frozen
class Retried:
    """What the recap says about a connection that needed retries."""

    attempts: int  # retries made (0: connected at once)
    last_error: str = ""
    server_message: str = ""  # what sshd sent before dropping us (nologin text), if anything

    def note(self) -> str:
        if not self.attempts:
            return ""
        why = "booting" if "boot" in (self.server_message + self.last_error).lower() else "transient"
        said = f": {self.server_message.strip()}" if self.server_message.strip() else (
            f" ({self.last_error})" if self.last_error else "")
        return f"{why}, retried {self.attempts}×{said}"
