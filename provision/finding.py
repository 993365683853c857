"""A finding: one cross-layer problem, as `provision check` and `provision audit` print it.

Its own module so every layer that reports (exposure's declared and live joins, the DNS
migration guards) names it without importing the joins themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from provision.frozen import frozen

Severity = Literal["error", "warning", "info"]
_ORDER = {"error": 0, "warning": 1, "info": 2}


@frozen
class Finding:
    severity: Severity
    code: str
    subject: str  # host or host/service
    message: str
    fix: str
    field: str = ""  # inventory field path, for file:line


def sort_findings(found: Iterable[Finding]) -> tuple[Finding, ...]:
    """Most severe first, then by subject and code (the order every report prints)."""
    return tuple(sorted(found, key=lambda f: (_ORDER[f.severity], f.subject, f.code)))
