"""The boto3 calls for the clusters' placement groups (`placement.py` is the pure plan).

One `describe_placement_groups` filtered by name (the call is not paginated; naming the
groups in `GroupNames` would fail on a missing one), made only when a cluster names a
placement group; one `create_placement_group` per group to create, tagged
`managed-by: provision`. Never a call that moves or stops an instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .aws import aws_errors
from .placement import STRATEGY, LivePlacement, PlacementPlan, live_placements
from .rules import TAG_KEY, TAG_VALUE


def fetch(ec2: Any, names: Sequence[str]) -> list[LivePlacement]:
    """The placement groups of these names (none asked: no call)."""
    if not names:
        return []
    with aws_errors("reading placement groups"):
        resp = ec2.describe_placement_groups(Filters=[{"Name": "group-name", "Values": sorted(set(names))}])
    return live_placements(resp.get("PlacementGroups", []))


def create(ec2: Any, plan: PlacementPlan) -> str:
    with aws_errors(f"creating placement group {plan.name}"):
        resp = ec2.create_placement_group(
            GroupName=plan.name, Strategy=STRATEGY,
            TagSpecifications=[{"ResourceType": "placement-group",
                                "Tags": [{"Key": TAG_KEY, "Value": TAG_VALUE}]}])
    made = resp.get("PlacementGroup", {})
    gid = f" ({made['GroupId']})" if made.get("GroupId") else ""
    return f"placement group {plan.name}: created{gid}, strategy {STRATEGY}"
