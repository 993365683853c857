"""The boto3 shell for security groups: fetch live state, execute a plan. Does network I/O.

Only this module imports boto3/botocore, and only inside functions, so importing it costs
nothing (`provision check` never imports it; `provision sg` imports it lazily).

- Credentials: the standard boto3 chain (environment, shared files, profiles, SSO), with
  `--profile`; region from the inventory.
- Endpoint: `aws.endpoint_url` from the inventory when set; otherwise boto3's own
  `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_EC2` handling applies.
- Throttling and transient errors: botocore's "standard" retry mode, no loop of our own.
- Reads: paginated describes with filters over every value at once (up to 200 per call):
  VPCs; groups by name, by id, and the managed ones in the inventory's VPCs; one
  `describe_security_group_rules` over all their ids; instances by id and by private
  address; and, only when groups are to be deleted, the interfaces and groups that hold
  them. One call per page, never one per group, rule or instance. `is-egress` is filtered
  in Python (moto 5.2 answers HTTP 500 to that filter).
- Writes: create groups tagged `managed-by: provision`, then per group revoke (by rule id)
  before authorize, so a group at its rule limit still converges; descriptions change
  with `modify_security_group_rules`, never revoke plus authorize; an instance's groups
  with one `modify_network_interface_attribute` on its primary interface; deletions last.
- Errors: `OperationError` with one line (credentials, access denied, limits, a missing
  VPC or group, an unreachable endpoint).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from provision.errors import OperationError
from provision.inventory.model import Aws, Host, SecurityGroup

from .attach import AttachPlan, LiveInstance, live_instances
from .prune import LiveInterface, live_interfaces, plan_deletions
from .rules import (
    TAG_KEY,
    TAG_VALUE,
    GroupPlan,
    LiveGroup,
    ip_permission,
    live_groups,
    rule_request,
)

FILTER_VALUES_MAX = 200  # AWS limit on values in one filter


def pages(call: Callable[..., dict[str, Any]], result_key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item of a NextToken-paginated EC2 describe call, one request per page."""
    token: str | None = None
    while True:
        resp = call(**kwargs, **({"NextToken": token} if token else {}))
        yield from resp.get(result_key, [])
        token = resp.get("NextToken")
        if not token:
            return


def client(aws: Aws, profile: str | None = None) -> Any:
    """An EC2 client from the standard credential chain, region from the inventory."""
    import boto3
    import botocore.config
    import botocore.exceptions

    try:
        session = boto3.session.Session(profile_name=profile, region_name=aws.region)
    except botocore.exceptions.ProfileNotFound as e:
        raise OperationError(f"AWS profile not found: {e}") from None
    config = botocore.config.Config(retries={"mode": "standard", "max_attempts": 5},
                                    connect_timeout=10, read_timeout=30)
    kwargs: dict[str, Any] = {"config": config}
    if aws.endpoint_url:
        kwargs["endpoint_url"] = aws.endpoint_url
    return session.client("ec2", **kwargs)


def fetch(ec2: Any, declared: Sequence[SecurityGroup], managed_in: Sequence[str] = ()) -> list[LiveGroup]:
    """Live state of the declared groups (found by id, or by name and VPC), and of every
    group tagged managed-by: provision in the VPCs `managed_in` (candidates for deletion)."""
    with aws_errors():
        raw_groups: list[dict[str, Any]] = []
        names = sorted({g.name for g in declared if g.id is None})
        for chunk in _chunks(names):
            raw_groups += pages(ec2.describe_security_groups, "SecurityGroups",
                                Filters=[{"Name": "group-name", "Values": chunk}])
        wanted = {(g.vpc, g.name) for g in declared if g.id is None}
        wanted_ids = {g.id for g in declared if g.id is not None}
        raw_groups = [g for g in raw_groups
                      if (g.get("VpcId"), g.get("GroupName")) in wanted or g["GroupId"] in wanted_ids]
        seen = {g["GroupId"] for g in raw_groups}
        ids = sorted(wanted_ids - seen)
        for chunk in _chunks(ids):
            raw_groups += pages(ec2.describe_security_groups, "SecurityGroups",
                                Filters=[{"Name": "group-id", "Values": chunk}])
        for chunk in _chunks(sorted(set(managed_in))):
            seen = {g["GroupId"] for g in raw_groups}
            raw_groups += [g for g in pages(ec2.describe_security_groups, "SecurityGroups",
                                            Filters=[{"Name": f"tag:{TAG_KEY}", "Values": [TAG_VALUE]},
                                                     {"Name": "vpc-id", "Values": chunk}])
                           if g["GroupId"] not in seen]
        return _live(raw_groups, _rules(ec2, sorted({g["GroupId"] for g in raw_groups})))


def _rules(ec2: Any, group_ids: Sequence[str]) -> list[dict[str, Any]]:
    raw_rules: list[dict[str, Any]] = []
    for chunk in _chunks(group_ids):
        raw_rules += pages(ec2.describe_security_group_rules, "SecurityGroupRules",
                           Filters=[{"Name": "group-id", "Values": chunk}])
    return raw_rules


def fetch_for_import(ec2: Any, vpcs: Sequence[str], groups: Sequence[str]) -> list[LiveGroup]:
    """The groups in `vpcs` and the `groups` named (by name or id; everything in the region
    when both are empty), and every group their rules reference, with their rules."""
    raw: dict[str, dict[str, Any]] = {}

    def read(**kwargs: Any) -> None:
        for g in pages(ec2.describe_security_groups, "SecurityGroups", **kwargs):
            raw[g["GroupId"]] = g

    with aws_errors("reading security groups"):
        ids = [g for g in groups if g.startswith("sg-")]
        names = [g for g in groups if not g.startswith("sg-")]
        for chunk in _chunks(sorted(set(vpcs))):
            read(Filters=[{"Name": "vpc-id", "Values": chunk}])
        for chunk in _chunks(sorted(set(names))):
            read(Filters=[{"Name": "group-name", "Values": chunk}])
        for chunk in _chunks(sorted(set(ids))):
            read(Filters=[{"Name": "group-id", "Values": chunk}])
        if not vpcs and not groups:
            read()
        missing = sorted(set(ids) - set(raw)) + sorted(set(names) - {g.get("GroupName") for g in raw.values()})
        if missing:
            raise OperationError(f"no security group {', '.join(missing)} in this account and region")
        rules = _rules(ec2, sorted(raw))
        while True:  # the referenced groups, level by level (one call per level and page)
            refs = sorted({str(r["ReferencedGroupInfo"]["GroupId"]) for r in rules
                           if r.get("ReferencedGroupInfo", {}).get("GroupId")
                           and r.get("ReferencedGroupInfo", {}).get("UserId") in (None, _owner(raw))} - set(raw))
            if not refs:
                break
            before = set(raw)
            for chunk in _chunks(refs):
                read(Filters=[{"Name": "group-id", "Values": chunk}])
            new = sorted(set(raw) - before)
            if not new:
                break
            rules += _rules(ec2, new)
    return _live(raw.values(), rules)


def _live(groups: Iterable[dict[str, Any]], rules: Iterable[dict[str, Any]]) -> list[LiveGroup]:
    """`live_groups`, refusing (exit 1) an answer it cannot read (a CIDR that is not one)."""
    try:
        return live_groups(groups, rules)
    except ValueError as e:
        raise OperationError(f"AWS answered a security group rule that cannot be read: {e}") from None


def _owner(raw: dict[str, dict[str, Any]]) -> str | None:
    return next((str(g["OwnerId"]) for g in raw.values() if g.get("OwnerId")), None)


def fetch_instances(ec2: Any, nodes: Sequence[Host]) -> list[LiveInstance]:
    """The instances of `nodes`: one paginated call by id, one by private address; each
    instance once (one named by id and found by address too is one instance, not two)."""
    by_id = sorted({n.instance.id for n in nodes if n.instance and n.instance.id})
    by_ip = sorted({n.instance.private_address for n in nodes
                    if n.instance and n.instance.private_address})
    out: dict[str, LiveInstance] = {}
    with aws_errors("reading instances"):
        for name, values in (("instance-id", by_id), ("private-ip-address", by_ip)):
            for chunk in _chunks(values):
                for i in live_instances(pages(ec2.describe_instances, "Reservations",
                                              Filters=[{"Name": name, "Values": chunk}])):
                    out.setdefault(i.id, i)
    return list(out.values())


def fetch_holders(ec2: Any, group_ids: Sequence[str]) -> tuple[list[LiveInterface], list[LiveGroup]]:
    """What may keep `group_ids` from being deleted: the network interfaces carrying them
    and the groups whose rules reference them (with their rules)."""
    if not group_ids:
        return [], []
    interfaces: list[LiveInterface] = []
    raw: dict[str, dict[str, Any]] = {}
    with aws_errors("reading what uses the groups to delete"):
        for chunk in _chunks(sorted(group_ids)):
            interfaces += live_interfaces(pages(ec2.describe_network_interfaces, "NetworkInterfaces",
                                                Filters=[{"Name": "group-id", "Values": chunk}]))
            for name in ("ip-permission.group-id", "egress.ip-permission.group-id"):
                for g in pages(ec2.describe_security_groups, "SecurityGroups",
                               Filters=[{"Name": name, "Values": chunk}]):
                    raw[g["GroupId"]] = g
        groups = _live(raw.values(), _rules(ec2, sorted(raw)))
    return interfaces, groups


def vpcs_missing(ec2: Any, vpcs: Sequence[str]) -> list[str]:
    """The VPCs of `vpcs` that this account and region do not have."""
    if not vpcs:
        return []
    found: set[str] = set()
    with aws_errors("reading VPCs"):
        for chunk in _chunks(sorted(set(vpcs))):
            found |= {v["VpcId"] for v in pages(ec2.describe_vpcs, "Vpcs",
                                                 Filters=[{"Name": "vpc-id", "Values": chunk}])}
    return sorted(set(vpcs) - found)


def attach(ec2: Any, plan: AttachPlan) -> str:
    """Make the instance's primary interface carry exactly `plan.want` (all ids by now)."""
    assert all(g.startswith("sg-") for g in plan.want), plan.want
    with aws_errors(f"setting the security groups of {plan.machine} ({plan.instance})"):
        ec2.modify_network_interface_attribute(NetworkInterfaceId=plan.eni, Groups=list(plan.want))
    return f"{plan.machine}: {plan.eni} of {plan.instance} now carries {', '.join(plan.want)}"


def delete(ec2: Any, group: LiveGroup) -> str:
    """Delete one group; a DependencyViolation names what still holds it. The group is read
    again first: one untagged or moved since the plan (the SSH confirmation can take a
    while) is not provision's to delete any more, and is left alone."""
    import botocore.exceptions

    with aws_errors(f"reading security group {group.name} before deleting it"):
        again = _live(ec2.describe_security_groups(GroupIds=[group.id])["SecurityGroups"], ())
    if not again or not again[0].managed or again[0].vpc != group.vpc:
        raise OperationError(f"AWS: {group.name} ({group.id}) is no longer tagged "
                             f"{TAG_KEY}: {TAG_VALUE} in {group.vpc} since the plan: not deleted")
    try:
        ec2.delete_security_group(GroupId=group.id)
    except botocore.exceptions.ClientError as e:
        if e.response.get("Error", {}).get("Code") != "DependencyViolation":
            with aws_errors(f"deleting security group {group.name}"):
                raise
        interfaces, referencing = fetch_holders(ec2, [group.id])
        held = plan_deletions([group], interfaces, referencing, (), (), {})[0]
        raise OperationError(f"AWS: {held.error or f'cannot delete {group.name} ({group.id}): in use'}"
                             ) from None
    return f"{group.name}: deleted {group.id}"


def _chunks(values: Sequence[str]) -> Iterator[list[str]]:
    for i in range(0, len(values), FILTER_VALUES_MAX):
        yield list(values[i:i + FILTER_VALUES_MAX])


def create_groups(ec2: Any, plans: Sequence[GroupPlan], created: dict[str, str]) -> None:
    """Create the groups the plan creates, tagged managed-by: provision, recording each in
    `created` (name -> id) as AWS answers, so a failure midway still says which exist."""
    for p in plans:
        if not p.create:
            continue
        with aws_errors(f"creating security group {p.name}"):
            resp = ec2.create_security_group(
                GroupName=p.name, Description=p.description, VpcId=p.vpc,
                TagSpecifications=[{"ResourceType": "security-group",
                                    "Tags": [{"Key": TAG_KEY, "Value": TAG_VALUE},
                                             {"Key": "Name", "Value": p.name}]}])
        created[p.name] = resp["GroupId"]


def delete_created(ec2: Any, name: str, group_id: str) -> str:
    """Delete a group this run created moments ago (empty, attached to nothing, referenced
    by nothing of ours yet): the rollback when the apply stops before its rules."""
    with aws_errors(f"deleting security group {name}, created by this apply"):
        ec2.delete_security_group(GroupId=group_id)
    return f"{name}: deleted {group_id} again"


def execute(ec2: Any, plan: GroupPlan) -> list[str]:
    """Apply one group's rule changes: revoke first, then authorize, then descriptions.
    Returns one line per call made, for the report."""
    assert plan.group_id is not None
    done: list[str] = []
    gid = plan.group_id
    for egress in (False, True):
        ids = [r.id for r in plan.revoke if r.key.egress == egress and r.id]
        if ids:
            call = ec2.revoke_security_group_egress if egress else ec2.revoke_security_group_ingress
            with aws_errors(f"revoking rules in {plan.name}"):
                call(GroupId=gid, SecurityGroupRuleIds=ids)
            done.append(f"{plan.name}: revoked {len(ids)} {'egress' if egress else 'ingress'} rule(s)")
    for egress in (False, True):
        perms = [ip_permission(k, d) for k, d in plan.authorize if k.egress == egress]
        if perms:
            call = ec2.authorize_security_group_egress if egress else ec2.authorize_security_group_ingress
            with aws_errors(f"authorizing rules in {plan.name}"):
                call(GroupId=gid, IpPermissions=perms)
            done.append(f"{plan.name}: authorized {len(perms)} {'egress' if egress else 'ingress'} rule(s)")
    if plan.redescribe:
        with aws_errors(f"updating rule descriptions in {plan.name}"):
            ec2.modify_security_group_rules(
                GroupId=gid,
                SecurityGroupRules=[{"SecurityGroupRuleId": r.id, "SecurityGroupRule": rule_request(r.key, d)}
                                    for r, d in plan.redescribe])
        done.append(f"{plan.name}: updated {len(plan.redescribe)} description(s)")
    return done


class aws_errors:
    """Turn botocore exceptions into one-line OperationErrors."""

    def __init__(self, doing: str = ""):
        self.doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None or isinstance(exc, OperationError):
            return
        message = describe_error(exc)
        if message is None:
            return
        prefix = f"{self.doing}: " if self.doing else ""
        raise OperationError(f"AWS: {prefix}{message}") from None


_LIMITS = ("RulesPerSecurityGroupLimitExceeded", "SecurityGroupLimitExceeded", "SecurityGroupsPerInstanceLimitExceeded",
           "ResourceLimitExceeded", "LimitExceeded")


def describe_error(exc: BaseException) -> str | None:
    """One line for a botocore exception, or None when it is not one."""
    import botocore.exceptions as bx

    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return ("no AWS credentials found (set AWS_PROFILE or --profile, run `aws sso login`, "
                "or set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)")
    if isinstance(exc, bx.TokenRetrievalError | bx.SSOError):
        return f"credentials: {exc} (run `aws sso login`)"
    if isinstance(exc, bx.NoRegionError):
        return "no region (set aws.region in the inventory)"
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError):
        return f"cannot reach the EC2 endpoint: {exc}"
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code, msg = str(err.get("Code", "")), str(err.get("Message", "")).replace("\n", " ")
        if code in ("AuthFailure", "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken",
                    "UnrecognizedClientException", "RequestExpired"):
            return f"credentials rejected ({code}): {msg}"
        if code in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException"):
            return f"access denied ({code}): the credentials may not call {exc.operation_name}"
        if code in ("RequestLimitExceeded", "Throttling", "ThrottlingException"):
            return f"throttled even after retries ({code}): {msg}"
        if code in _LIMITS or code.endswith("LimitExceeded"):
            return f"limit reached ({code}): {msg}"
        if code == "InvalidVpcID.NotFound":
            return f"the VPC does not exist ({msg})"
        if code in ("InvalidGroup.NotFound", "InvalidGroupId.NotFound", "InvalidGroupId.Malformed"):
            return f"security group not found ({msg})"
        return f"{code or 'error'}: {msg}"
    if isinstance(exc, bx.BotoCoreError):
        return str(exc)
    return None
