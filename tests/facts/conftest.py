"""tests/facts (fact fixtures): pure tests, guarded (tests/support/purity.py)."""

from tests.support.purity import pytest_runtest_call, pytest_runtest_setup

__all__ = ["pytest_runtest_call", "pytest_runtest_setup"]
