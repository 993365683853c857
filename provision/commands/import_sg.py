"""`provision import sg`: the account's security groups as inventory YAML.

Reads AWS (describe calls only) through `provision.cloud.aws`, turns the groups into
inventory YAML with the pure `provision.cloud.adopt`, and writes it to stdout or a file.
Warnings (rules the inventory cannot express) go to stderr.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import yaml

from provision.cloud import aws as shell
from provision.cloud.adopt import adopt
from provision.errors import UsageError
from provision.inventory.model import Aws

from .common import echo, load


@click.command("sg")
@click.option("-i", "--inventory", "inventory_path", type=click.Path(dir_okay=True), default=None,
              metavar="PATH", help="read aws.region and aws.endpoint_url from this inventory")
@click.option("--region", default=None, help="AWS region (default: the inventory's aws.region)")
@click.option("--vpc", "vpcs", multiple=True, metavar="VPC_ID", help="every group in this VPC (repeatable)")
@click.option("--group", "groups", multiple=True, metavar="NAME|ID", help="this group (repeatable)")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write the YAML here (default: stdout)")
@click.option("--profile", default=None, metavar="NAME", help="AWS profile (default: the standard boto3 chain)")
def import_sg_cmd(inventory_path: str | None, region: str | None, vpcs: tuple[str, ...],
                  groups: tuple[str, ...], output: str | None, profile: str | None) -> None:
    """Write security groups (those of --vpc, those named by --group, else all in the region,
    plus every group they reference) as inventory YAML."""
    endpoint = None
    if inventory_path is not None or region is None:
        inv = load(inventory_path)
        if inv.aws is None and region is None:
            raise UsageError(f"{inv.source}: no aws.region in the inventory; pass --region")
        if inv.aws is not None:
            region, endpoint = region or inv.aws.region, inv.aws.endpoint_url
    assert region is not None
    if not re.match(r"^[a-z]{2}(-[a-z]+)+-\d$", region):  # the inventory's aws.region
        raise UsageError(f"--region {region!r} is not an AWS region name (e.g. us-east-1)")
    ec2 = shell.client(Aws(region, endpoint, ()), profile)
    adopted = adopt(shell.fetch_for_import(ec2, vpcs, groups), region)
    for w in adopted.warnings:
        echo(f"warning: {w}", err=True)
    text = yaml.safe_dump(adopted.doc, sort_keys=False, allow_unicode=False)
    if output:
        Path(output).write_text(text)
        echo(f"wrote {len(adopted.doc['aws']['security_groups'])} group(s) to {output}", err=True)
    else:
        click.echo(text, nl=False)
