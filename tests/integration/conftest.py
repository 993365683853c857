"""Fixtures several integration modules share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.powerdns_server import Pdns, pdns_server


@pytest.fixture(scope="module")
def pdns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pdns]:
    """A real pdns_server (PowerDNS with its HTTP API, on loopback) for the module."""
    with pdns_server(tmp_path_factory.mktemp("pdns")) as p:
        yield p
