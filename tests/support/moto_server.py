"""A moto server on 127.0.0.1 for tests that talk to AWS APIs over real HTTP.

Generic: any AWS service moto emulates (EC2 for security groups, Route53 for DNS).
`moto_server()` yields the endpoint URL; `reset(url)` clears all state between tests;
`aws_test_env(url)` is the environment that keeps boto3 away from real AWS: dummy keys,
no shared config or profiles, the instance metadata service disabled, and every
service's endpoint pointed at the local server.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse


@contextmanager
def moto_server() -> Iterator[str]:
    """Start ThreadedMotoServer on 127.0.0.1 (a free port); yield its URL; stop it."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def reset(url: str) -> None:
    """Drop every resource the server holds."""
    assert urlparse(url).hostname == "127.0.0.1", url
    req = urllib.request.Request(f"{url}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


def aws_test_env(url: str, region: str = "us-east-1") -> dict[str, str | None]:
    """Environment for boto3 against the local server only (None: unset the variable)."""
    assert urlparse(url).hostname == "127.0.0.1", url
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": None,
        "AWS_SECURITY_TOKEN": None,
        "AWS_PROFILE": None,
        "AWS_DEFAULT_PROFILE": None,
        "AWS_CONFIG_FILE": "/nonexistent/provision-test/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/provision-test/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": None,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": None,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_ENDPOINT_URL": url,
        "AWS_ENDPOINT_URL_EC2": url,
        "AWS_ENDPOINT_URL_ROUTE53": url,
        "AWS_MAX_ATTEMPTS": None,
        "AWS_RETRY_MODE": None,
    }
