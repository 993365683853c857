"""A Jupyter service's `culling:`: how long an idle kernel lives (issue 38, item 5). Pure.

```yaml
services:
  jupyter:
    culling:
      idle_timeout: 3600   # seconds a kernel may sit idle before it is shut down; 0: never
      interval: 300        # how often the server looks (seconds)
      connected: true      # cull a kernel a browser tab is still connected to
```

Rendered into the service's jupyter_server_config.py as Jupyter Server's own settings
(`MappingKernelManager.cull_idle_timeout`, `cull_interval`, `cull_connected`). On by
default: a kernel holds the GPU memory its framework took (PyTorch's caching allocator
keeps it) until the kernel stops, and a notebook left open over a weekend keeps a GPU from
everybody else. A busy kernel (a cell running) is never culled (`cull_busy` stays off).
Why the defaults are what they are: docs/tunnels.md#idle-kernels.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from provision.frozen import frozen

DAY = 86400


@frozen
class Culling:
    idle_timeout: int  # seconds; 0: kernels are never culled
    interval: int  # seconds between the server's looks
    connected: bool  # cull kernels with a client connected too


# An hour idle: a kernel outlives a meeting or lunch, not an evening. Every 5 minutes
# (Jupyter's own default interval). Connected ones too: a forgotten browser tab (or a
# tunnel left up) keeps its kernel "connected" for ever, and that is the kernel that holds
# a GPU overnight.
DEFAULT = Culling(idle_timeout=3600, interval=300, connected=True)


class CullingDoc(BaseModel):
    """When the server shuts idle kernels down (and frees the GPU memory they hold)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    idle_timeout: Annotated[StrictInt, Field(ge=0, le=30 * DAY)] | None = Field(
        None, description="seconds a kernel may sit idle before the server shuts it down "
                          "(default 3600); 0: never")
    interval: Annotated[StrictInt, Field(ge=1, le=DAY)] | None = Field(
        None, description="seconds between the server's checks for idle kernels (default 300)")
    connected: StrictBool | None = Field(
        None, description="also cull idle kernels a browser tab is connected to (default true: "
                          "a forgotten tab would keep its kernel's GPU memory for ever)")


def resolve(doc: CullingDoc | None) -> Culling:
    """The service's culling: the defaults, with what the inventory sets."""
    if doc is None:
        return DEFAULT
    return Culling(DEFAULT.idle_timeout if doc.idle_timeout is None else doc.idle_timeout,
                   doc.interval or DEFAULT.interval,
                   DEFAULT.connected if doc.connected is None else doc.connected)
