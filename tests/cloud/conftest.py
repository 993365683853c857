"""Fixtures for tests against a local moto server (real HTTP on 127.0.0.1, never AWS).

`moto_url` is one server per session; `aws_env` resets it and sets the environment so
boto3 reaches only that server. Reusable by any AWS-backed test (EC2, Route53).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.moto_server import aws_test_env, moto_server, reset


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    reset(moto_url)
    for key, value in aws_test_env(moto_url).items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    return moto_url


@pytest.fixture
def vpc(aws_env: str) -> str:
    """A fresh VPC in the moto server's us-east-1."""
    import boto3

    return str(boto3.client("ec2", region_name="us-east-1").create_vpc(
        CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"])
