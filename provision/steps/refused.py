"""`Refused`: a step will not touch a host as it is. Its own module so a step raises it
without importing the step registry (`steps/step.py`), which imports every step."""

from __future__ import annotations

from provision.errors import OperationError


class Refused(OperationError):
    """A step will not touch this host as it is (the recap says why); nothing is applied."""
