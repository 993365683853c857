"""The `clusters:` section as pydantic models (what the YAML may say; `clusters.py` resolves
it against hosts and roles)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from .fields import IP, Name, NodeName, Port

# a member: a host name, or `role:NAME` for every host in the role
MemberRef = Annotated[StrictStr, Field(pattern=r"^(role:)?[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]
# one port, or an inclusive range written "LOW-HIGH"
PortRange = Annotated[StrictStr, Field(pattern=r"^[0-9]{1,5}-[0-9]{1,5}$")]
PortOrRange = Port | PortRange
Protocol = Literal["tcp", "udp"]
Ephemeral = Annotated[list[Annotated[StrictInt, Field(ge=1024, le=65535)]],
                      Field(min_length=2, max_length=2)]

DEFAULT_RENDEZVOUS = 29500  # torchrun --master_port's default (static rendezvous)


class ClusterDoc(BaseModel):
    """Hosts that train together: open to each other, and to nobody else."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    hosts: list[MemberRef] = Field(
        min_length=1, description="the members, in rank order (NODE_RANK): host names or "
                                  "role:NAME (every host in the role, in inventory order)")
    ports: list[PortOrRange] | None = Field(
        None, description="what members may reach on each other: ports and ranges "
                          "(\"40000-40999\"); default every port (NCCL and Gloo connect on "
                          "ports the kernel picks)")
    protocols: list[Protocol] = Field(
        default_factory=lambda: list[Protocol](["tcp", "udp"]), min_length=1,
        description="the protocols members admit from each other (default tcp and udp)")
    rendezvous: Port = Field(
        DEFAULT_RENDEZVOUS, description="the rendezvous port on the master (MASTER_PORT; "
                                        "torchrun --master_port, default 29500)")
    master: NodeName | None = Field(
        None, description="the member that hosts the rendezvous (MASTER_ADDR; default the "
                          "first member)")
    family: Literal[4, 6] = Field(
        4, description="the address family jobs use (MASTER_ADDR; members admit each other on "
                       "every address they have in `addresses` either way)")
    addresses: dict[NodeName, Annotated[list[IP], Field(min_length=1)]] = Field(
        default_factory=dict,
        description="a member's addresses on the training network (default its `address`); "
                    "v4 and v6 may both be given")
    ephemeral_ports: Ephemeral | None = Field(
        None, description="[low, high]: net.ipv4.ip_local_port_range on the members, the ports "
                          "NCCL and Gloo bind (they bind port 0); with `ports`, must lie "
                          "inside them")
    efa: StrictBool = Field(
        False, description="AWS EFA: the members' shared security group also needs the "
                           "all-traffic egress rule to itself")
    security_group: Name | None = Field(
        None, description="the aws.security_groups group the members share (every member in "
                          "it): sg plan/apply add its all-traffic rule from itself")
    placement_group: Name | None = Field(
        None, description="an AWS placement group (strategy cluster) `sg apply` creates when "
                          "missing; members not in it are reported, never moved")
