"""Route53 provider (boto3): paged listing, one change batch per apply, the INSYNC waiter.

I/O shell. Changes are DELETE of the exact RRset read plus CREATE of the new one (never
UPSERT), so Route53 itself refuses a batch whose RRsets changed since the read
(InvalidChangeBatch), and applies the batch atomically. Alias records are read with
their target and no TTL (an alias has none of its own); provision never writes a TTL on
an alias. RRsets with a routing policy (SetIdentifier) are not managed and left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from provision.dns.provider import ProviderError, StaleRead
from provision.dns.rrset import Alias, RRset, rrset
from provision.dns.zone_plan import ChangeSet
from provision.dnsdata import endpoint
from provision.dnsdata.names import problem
from provision.dnsdata.provider_settings import Capabilities, Credential, ProviderSettings
from provision.dnsdata.visibility import Found, Wanted, ZoneMismatch, choose
from provision.inventory.fields import Url
from provision.text import printable

if TYPE_CHECKING:
    from provision.inventory.model import Inventory, Zone

MAX_PAGES = 10_000  # 3 million records at 300 a page: more is a server that never stops
MAX_BATCH = 1000  # Route53's limit of changes in one ChangeResourceRecordSets call


class Vpc(BaseModel):
    """A VPC that sees a private hosted zone (Route53 names it by id and region)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: Annotated[StrictStr, Field(pattern=r"^vpc-[0-9a-f]{1,17}$")] = Field(
        description="the VPC's id, e.g. vpc-0abc1234")
    region: Annotated[StrictStr, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")] = Field(
        description="the AWS region the VPC is in, e.g. eu-west-1 (checked at plan time)")

    pattern_words: ClassVar[Mapping[str, str]] = {
        "id": "a VPC id: 'vpc-' and 1 to 17 lowercase hex digits, e.g. vpc-0abc1234",
        "region": "an AWS region name: lowercase words and a number joined by '-', e.g. "
                  "us-east-1 or eu-central-2"}

    @property
    def label(self) -> str:
        return f"{self.id} in {self.region}"


class Settings(ProviderSettings):
    hosted_zone_id: Annotated[StrictStr, Field(pattern=r"^(/hostedzone/)?Z[A-Z0-9]{1,32}$")] | None = Field(
        None, description="the hosted zone's id (default: the one zone of that name and "
                          "visibility; a private one: attached to the vpcs)")
    vpcs: tuple[Vpc, ...] = Field(
        (), description="a private zone (visibility: private): the VPCs that see it, each "
                        "{id, region}; the hosted zone must be associated with every one")
    endpoint: Url | None = Field(
        None, description="API endpoint override (e.g. a local moto server; default: "
                          "aws.endpoint_url, else AWS's own)")

    pattern_words: ClassVar[Mapping[str, str]] = {
        "hosted_zone_id": "a Route53 hosted zone id: 'Z' and 1 to 32 uppercase letters or "
                          "digits (optionally after '/hostedzone/'), e.g. Z0123456789ABC"}

    networks_field: ClassVar[str] = "vpcs"

    @field_validator("endpoint")
    @classmethod
    def _no_clear_credentials(cls, url: str | None) -> str | None:
        return endpoint.checked(url, "the endpoint")

    @field_validator("vpcs", mode="before")
    @classmethod
    def _vpc_list(cls, value: object) -> object:
        # YAML gives a list; a tuple keeps the settings hashable like the zone holding them
        return tuple(value) if isinstance(value, list) else value

    def credentials_url(self, aws_endpoint_url: str | None) -> str | None:
        return self.endpoint or aws_endpoint_url

    def credential(self, zone: str, env: Mapping[str, str],
                   aws_endpoint_url: str | None) -> Credential:
        # SigV4: the secret key never leaves; the access key id and signatures do
        url = self.credentials_url(aws_endpoint_url)
        return Credential("route53", zone, "AWS credentials",
                          "boto3's default chain ($AWS_* variables, ~/.aws)",
                          f"signing the requests sent to {url or 'AWS (route53.amazonaws.com)'}")

    def visible_to(self) -> frozenset[str]:
        return frozenset(v.label for v in self.vpcs)


CAPABILITIES = Capabilities(
    record_types=frozenset({"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA"}), root_ns=False,
    conditional_write=True,     # DELETE of the exact RRset read: InvalidChangeBatch otherwise
    replan_on_stale=False, change_ids=True, authoritative=False, private_zones=True,
    nameservers="the hosted zone's delegation set (names; addresses from dns.resolvers)",
    own_api_hosts=("route53.amazonaws.com", ".amazonaws.com", ".amazonaws.com.cn"))


def make(zone: Zone, inv: Inventory) -> Route53Provider:
    s = zone.settings
    assert isinstance(s, Settings)  # the inventory validated the zone with these settings
    aws = inv.aws
    return Route53Provider(zone.name, hosted_zone_id=s.hosted_zone_id,
                           endpoint_url=s.credentials_url(aws.endpoint_url if aws else None),
                           region=aws.region if aws else "us-east-1",
                           want=Wanted(zone.visibility, s.visible_to()),
                           vpcs=tuple((v.id, v.region) for v in s.vpcs))


_ESCAPE = re.compile(r"\\([0-9]{3}|.)", re.S)
_TEXT_TYPES = ("TXT", "CAA")   # their data holds character-strings


def from_route53_text(value: str) -> str:
    """A TXT or CAA value as Route53 returns it (a byte outside printable ASCII as a
    three-digit OCTAL escape) in zone-file form, where the escape is decimal."""
    def dec(m: re.Match[str]) -> str:
        g = m.group(1)
        if len(g) == 3 and set(g) <= set("01234567"):
            return f"\\{int(g, 8):03d}"
        return m.group(0)

    return _ESCAPE.sub(dec, value)


def to_route53_text(value: str) -> str:
    """The inverse of `from_route53_text`: decimal escapes as Route53's octal ones."""
    def octal(m: re.Match[str]) -> str:
        g = m.group(1)
        return f"\\{int(g):03o}" if len(g) == 3 and int(g) <= 255 else m.group(0)

    return _ESCAPE.sub(octal, value)


def _unescape(name: str) -> str:
    """Route53 returns some characters as octal escapes (`\\052` for `*`). A '.' or
    '\\' inside a label stays escaped (zone-file form, which no record name provision
    manages has): decoded, `a\\056b` (one label) would read as the name a.b."""
    def byte(m: re.Match[str]) -> str:
        c = chr(int(m.group(1), 8))
        return "\\" + c if c in ".\\" else c

    return re.sub(r"\\(\d{3})", byte, name).lower()


class Route53Provider:
    kind = "route53"
    capabilities = CAPABILITIES
    direct = None  # Route53's servers are asked by name, port 53

    def __init__(self, zone: str, *, hosted_zone_id: str | None = None,
                 endpoint_url: str | None = None, region: str = "us-east-1",
                 client: Any = None, page_size: int = 300, wait_delay: float = 5.0,
                 want: Wanted | None = None, vpcs: tuple[tuple[str, str], ...] = ()):
        self.zone = zone.rstrip(".").lower() + "."
        self._given_id = hosted_zone_id.rsplit("/", 1)[-1] if hosted_zone_id else None
        # `want` None (a provider made by hand): the given id is trusted unread, as before
        self._zone_id = self._given_id if want is None else None
        self.want = want or Wanted()
        self.vpcs = vpcs   # (id, region) of each declared VPC, checked before the lookup
        self.endpoint_url = endpoint_url
        self.region = region
        self._client = client
        self.page_size = page_size
        self.wait_delay = wait_delay
        self.skipped: list[str] = []   # routing-policy RRsets seen and left alone

    @property
    def client(self) -> Any:
        if self._client is None:
            if self.endpoint_url:
                why = endpoint.problem(self.endpoint_url, "route53: the endpoint")
                if why:  # checked before boto3 can sign a single request for it
                    raise ProviderError(f"{why}; nothing was sent")
            import boto3
            from botocore.exceptions import BotoCoreError

            try:
                self._client = boto3.client("route53", region_name=self.region,
                                            endpoint_url=self.endpoint_url)
            except (BotoCoreError, ValueError) as e:
                raise ProviderError(f"route53: cannot make a client: {printable(str(e))}") from None
        return self._client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            return fn(*args, **kwargs)
        except ProviderError:
            raise
        except NoCredentialsError:
            raise ProviderError("route53: no AWS credentials found (set AWS_PROFILE or "
                                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)") from None
        except ClientError as e:
            err = e.response.get("Error", {})
            code, msg = err.get("Code", "?"), err.get("Message", "")
            if code == "InvalidChangeBatch" and ("not found" in msg or "already exists" in msg
                                                 or "but the values provided do not match" in msg):
                raise StaleRead(f"route53: {self.zone} changed since it was read, nothing was "
                                f"applied ({msg.strip('[]')}); run plan again") from None
            raise ProviderError(f"route53: {what} failed: {printable(str(code))}: "
                                f"{printable(str(msg))}") from None
        except BotoCoreError as e:
            raise ProviderError(f"route53: {what} failed: {printable(str(e))}") from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise ProviderError(f"route53: {what}: a malformed answer ({type(e).__name__}: "
                                f"{printable(str(e)[:200])})") from None

    @property
    def zone_id(self) -> str:
        if self._zone_id is None:
            self._zone_id = self._call("finding the hosted zone", self._find_zone)
        return self._zone_id

    def _find_zone(self) -> str:
        """The hosted zone the inventory means: by id, else the one of this name and
        visibility (private: associated with the declared VPCs, each checked to be in
        its declared region first)."""
        self.client  # noqa: B018  (the endpoint is checked before any request)
        for vpc_id, region in self.vpcs:
            self._check_vpc(vpc_id, region)
        if self._given_id is not None:
            found = [self._describe(self._given_id)]
        else:
            r = self.client.list_hosted_zones_by_name(DNSName=self.zone, MaxItems="100")
            found = [self._summary(z) for z in r.get("HostedZones", [])
                     if _unescape(str(z["Name"])).rstrip(".") + "." == self.zone]
        try:
            return choose(self.zone, self.want, found, by_id=self._given_id is not None)
        except LookupError as e:
            hint = "" if self._given_id else "; set hosted_zone_id in the inventory"
            raise ProviderError(f"route53: {e.args[0]}{hint}") from None

    def _summary(self, z: dict[str, Any]) -> Found:
        zid = printable(str(z["Id"]).rsplit("/", 1)[-1])
        if not z.get("Config", {}).get("PrivateZone"):
            return Found(zid, False)
        if self.want.visibility == "public":  # its VPCs do not matter: it is not the one
            return Found(zid, True)
        return self._describe(zid)

    def _describe(self, zid: str) -> Found:
        r = self.client.get_hosted_zone(Id=zid)
        private = bool(r["HostedZone"].get("Config", {}).get("PrivateZone"))
        vpcs = frozenset(printable(f"{v['VPCId']} in {v['VPCRegion']}") for v in r.get("VPCs", []))
        return Found(printable(zid), private, vpcs)

    def _check_vpc(self, vpc_id: str, region: str) -> None:
        """The VPC exists in the region the inventory names (EC2's DescribeVpcs there)."""
        import boto3
        from botocore.exceptions import ClientError

        ec2 = boto3.client("ec2", region_name=region, endpoint_url=self.endpoint_url)
        try:
            ec2.describe_vpcs(VpcIds=[vpc_id])
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "InvalidVpcID.NotFound":
                raise
            raise ZoneMismatch(f"{self.zone}: VPC {vpc_id} is not in region {region} (the "
                               "inventory's vpcs say so; EC2 there does not know it): correct "
                               "its id or region; nothing was changed") from None

    # --- read -----------------------------------------------------------------------
    def _from_api(self, r: dict[str, Any]) -> RRset:
        name = _unescape(r["Name"])
        if "AliasTarget" in r:
            a = r["AliasTarget"]
            return RRset(name, r["Type"], None, (),
                         Alias(a["DNSName"].lower(), a["HostedZoneId"],
                               bool(a.get("EvaluateTargetHealth", False))))
        values = [x["Value"] for x in r.get("ResourceRecords", [])]
        if r["Type"] in _TEXT_TYPES:
            values = [from_route53_text(v) for v in values]
        return rrset(name, r["Type"], int(r["TTL"]), values)

    def list_rrsets(self) -> list[RRset]:
        """Every RRset, one paged pass (StartRecordName/StartRecordType)."""
        result: list[RRset] = self._call("listing records", self._list)
        return result

    def _list(self) -> list[RRset]:
        out: dict[tuple[str, str], RRset] = {}
        kwargs: dict[str, Any] = {"HostedZoneId": self.zone_id, "MaxItems": str(self.page_size)}
        seen: set[tuple[str, str, str]] = set()
        while True:
            page = self.client.list_resource_record_sets(**kwargs)
            for r in page["ResourceRecordSets"]:
                if "SetIdentifier" in r:
                    self.skipped.append(printable(f"{r['Name']} {r['Type']} ({r['SetIdentifier']})"))
                    continue
                rr = self._from_api(r)
                out[rr.key] = rr
            if not page.get("IsTruncated"):
                break
            start = (str(page["NextRecordName"]), str(page["NextRecordType"]),
                     str(page.get("NextRecordIdentifier", "")))
            if start in seen or len(seen) >= MAX_PAGES:  # a server paging in a circle
                raise ValueError(f"the listing does not end (page {len(seen) + 1} starts "
                                 "where an earlier one did, or too many pages)")
            seen.add(start)
            kwargs["StartRecordName"] = page["NextRecordName"]
            kwargs["StartRecordType"] = page["NextRecordType"]
            if "NextRecordIdentifier" in page:
                kwargs["StartRecordIdentifier"] = page["NextRecordIdentifier"]
            else:
                kwargs.pop("StartRecordIdentifier", None)
        return sorted(out.values())

    def get_rrset(self, name: str, rtype: str) -> RRset | None:
        found: RRset | None = self._call("reading a record", self._get, name, rtype)
        return found

    def _get(self, name: str, rtype: str) -> RRset | None:
        page = self.client.list_resource_record_sets(
            HostedZoneId=self.zone_id, StartRecordName=name, StartRecordType=rtype, MaxItems="1")
        for r in page["ResourceRecordSets"]:
            rr = self._from_api(r)
            if rr.key == (name.lower(), rtype) and "SetIdentifier" not in r:
                return rr
        return None

    # --- write ----------------------------------------------------------------------
    @staticmethod
    def _to_api(rr: RRset) -> dict[str, Any]:
        out: dict[str, Any] = {"Name": rr.name, "Type": rr.type}
        if rr.alias is not None:  # an alias has no TTL of its own: never send one
            out["AliasTarget"] = {"HostedZoneId": rr.alias.hosted_zone_id,
                                  "DNSName": rr.alias.dns_name,
                                  "EvaluateTargetHealth": rr.alias.evaluate_target_health}
        else:
            out["TTL"] = rr.ttl
            values = [to_route53_text(v) if rr.type in _TEXT_TYPES else v for v in rr.values]
            out["ResourceRecords"] = [{"Value": v} for v in values]
        return out

    def change_batch(self, changes: ChangeSet) -> dict[str, Any]:
        items = ([{"Action": "DELETE", "ResourceRecordSet": self._to_api(rr)} for rr in changes.deletions]
                 + [{"Action": "CREATE", "ResourceRecordSet": self._to_api(rr)} for rr in changes.additions])
        return {"Comment": "provision dns apply", "Changes": items}

    def apply(self, changes: ChangeSet) -> str:
        batch = self.change_batch(changes)
        if len(batch["Changes"]) > MAX_BATCH:
            raise ProviderError(f"route53: {len(batch['Changes'])} changes do not fit in one atomic "
                                f"batch (at most {MAX_BATCH}); apply the inventory in smaller steps")
        r = self._call("applying the change batch", self.client.change_resource_record_sets,
                       HostedZoneId=self.zone_id, ChangeBatch=batch)
        return str(r["ChangeInfo"]["Id"])

    def wait(self, changes: ChangeSet, token: str, timeout: float) -> None:
        from botocore.exceptions import WaiterError

        attempts = max(1, int(timeout / self.wait_delay) + 1)

        def wait() -> None:
            waiter = self.client.get_waiter("resource_record_sets_changed")
            try:
                waiter.wait(Id=token, WaiterConfig={"Delay": self.wait_delay,
                                                    "MaxAttempts": attempts})
            except WaiterError as e:
                raise ProviderError(f"route53: change {printable(token)} not INSYNC after "
                                    f"{timeout:g} s ({printable(str(e))})") from None

        self._call("waiting for the change", wait)

    def nameservers(self) -> list[tuple[str, str | None]]:
        def read() -> list[tuple[str, str | None]]:
            r = self.client.get_hosted_zone(Id=self.zone_id)
            names = r.get("DelegationSet", {}).get("NameServers", [])
            out: list[tuple[str, str | None]] = []
            for n in names:
                fq = n.lower().rstrip(".") + "."
                if problem(fq, wildcard=False):
                    raise ValueError(f"nameserver {printable(n[:100])!r} is not a host name")
                out.append((fq, None))
            return out

        result: list[tuple[str, str | None]] = self._call("reading the hosted zone", read)
        return result
