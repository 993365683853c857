"""`provision sg` without AWS: usage errors, the boto3 client's settings, one-line AWS errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from click.testing import CliRunner

from provision.cli import main
from provision.cloud import aws as shell
from provision.errors import OperationError
from provision.inventory.model import Aws

EXAMPLE = Path(__file__).parents[2] / "inventories" / "example.yml"


def test_inventory_without_security_groups_is_usage_error(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("version: 1\nhosts: {gpu1: {address: 10.0.0.1, ssh_from: [10.0.0.0/8]}}\n")
    result = CliRunner().invoke(main, ["sg", "plan", "-i", str(inv)])
    assert result.exit_code == 2
    assert "no aws.security_groups" in result.output


def test_help_lists_plan_and_apply() -> None:
    result = CliRunner().invoke(main, ["sg", "--help"])
    assert result.exit_code == 0
    assert "plan" in result.output and "apply" in result.output


def test_client_uses_standard_retries_region_and_inventory_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    ec2 = shell.client(Aws("eu-west-3", "http://127.0.0.1:9", ()))
    assert ec2.meta.region_name == "eu-west-3"
    assert ec2.meta.endpoint_url == "http://127.0.0.1:9"
    assert ec2.meta.config.retries["mode"] == "standard"


def _client_error(code: str, op: str = "AuthorizeSecurityGroupIngress") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"msg for {code}\nsecond line"}}, op)


@pytest.mark.parametrize(("exc", "text"), [
    (NoCredentialsError(), "no AWS credentials found"),
    (_client_error("UnauthorizedOperation"), "access denied (UnauthorizedOperation): the credentials may not "
                                             "call AuthorizeSecurityGroupIngress"),
    (_client_error("AuthFailure"), "credentials rejected (AuthFailure)"),
    (_client_error("RulesPerSecurityGroupLimitExceeded"), "limit reached (RulesPerSecurityGroupLimitExceeded)"),
    (_client_error("SecurityGroupLimitExceeded", "CreateSecurityGroup"), "limit reached"),
    (_client_error("InvalidVpcID.NotFound", "CreateSecurityGroup"), "the VPC does not exist"),
    (_client_error("RequestLimitExceeded"), "throttled even after retries"),
    (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), "cannot reach the EC2 endpoint"),
])
def test_aws_errors_are_one_line(exc: Exception, text: str) -> None:
    with pytest.raises(OperationError) as info, shell.aws_errors("doing it"):
        raise exc
    message = str(info.value)
    assert message.startswith("AWS: doing it: ")
    assert text in message
    assert "\n" not in message


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), shell.aws_errors():
        raise KeyError("x")


def test_pages_follows_next_token() -> None:
    seen = []

    def call(**kw: str) -> dict[str, object]:
        seen.append(kw.get("NextToken"))
        token = {None: "a", "a": "b", "b": None}[kw.get("NextToken")]
        return {"Items": [kw.get("NextToken")], **({"NextToken": token} if token else {})}

    assert list(shell.pages(call, "Items", Filters=[])) == [None, "a", "b"]
    assert seen == [None, "a", "b"]
