"""Health checks of the new values before a cutover: `tcp:PORT` and `http(s)://HOST:PORT/PATH`.

`parse` is pure (a spec's text to a `Check`, or ValueError with a clear message); `run`
does the I/O: a TCP connect to each new value, or an HTTP GET sent to each new value
with the URL's host as Host header (and TLS name), expecting 2xx. Run from where the CLI
runs, or (`dial`) from a bastion or host (`health_from`); redirects are not followed (a
3xx is a failure).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit

from provision.frozen import frozen
from provision.inventory.fields import parse_port
from provision.text import printable


@frozen
class Check:
    kind: Literal["tcp", "http", "https"]
    port: int
    host: str = ""        # Host header / TLS name (http)
    path: str = "/"

    def describe(self) -> str:
        if self.kind == "tcp":
            return f"tcp:{self.port}"
        return f"{self.kind}://{self.host}:{self.port}{self.path}"


def parse(spec: str) -> Check:
    s = spec.strip()
    if s.startswith("tcp:"):
        return Check("tcp", parse_port(s[4:], f"--health {printable(spec)}"))
    u = urlsplit(s)
    if u.scheme in ("http", "https") and u.hostname:
        # urlsplit reads other scripts' digits as a port ('８０００' is 8000): ASCII only
        written = u.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
        port = (parse_port(written, f"--health {printable(spec)}") if written
                else 443 if u.scheme == "https" else 80)
        if any(c.isspace() or ord(c) < 32 for c in s):
            raise ValueError(f"--health {spec}: whitespace or control characters")
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        return Check(u.scheme, port, u.hostname, path)  # type: ignore[arg-type]
    raise ValueError(f"--health {spec}: expected tcp:PORT or http://HOST:PORT/PATH")


# (host, port, timeout) -> a connected socket; OSError when it cannot connect
Dial = Callable[[str, int, float], socket.socket]


def _local(host: str, port: int, timeout: float) -> socket.socket:
    return socket.create_connection((host, port), timeout=timeout)


@frozen
class Result:
    check: str
    value: str
    ok: bool
    detail: str


def run(check: Check, value: str, timeout: float = 5.0, dial: Dial = _local,
        where: str = "") -> Result:
    """One check against one new value (an address, or a CNAME target name), connecting
    through `dial` (`where`: from which host, said in the detail)."""
    host = value.rstrip(".")
    try:
        if check.kind == "tcp":
            with dial(host, check.port, timeout):
                pass
            return Result(check.describe(), value, True,
                          f"connected to {host}:{check.port}{where and ' from ' + where}")
        return _http(check, host, timeout, dial, where)
    except OSError as e:
        return Result(check.describe(), value, False,
                      f"{host}:{check.port}: {printable(str(e.strerror or e))}")
    except (http.client.HTTPException, ValueError) as e:
        # what the other end sent that is not HTTP (a status line of its choosing): a failed
        # check in words, its bytes escaped, never a traceback that prints them raw
        return Result(check.describe(), value, False,
                      f"{host}:{check.port}: not an HTTP answer ({type(e).__name__}: "
                      f"{printable(str(e)[:200])})")


def _http(check: Check, host: str, timeout: float, dial: Dial, where: str) -> Result:
    conn: http.client.HTTPConnection
    if check.kind == "https":
        ctx = ssl.create_default_context()

        class To(http.client.HTTPSConnection):
            def connect(self) -> None:  # the address of the new value, the name of the URL
                sock = dial(host, check.port, timeout)
                self.sock = ctx.wrap_socket(sock, server_hostname=check.host)

        conn = To(check.host, check.port, timeout=timeout, context=ctx)
    else:
        class Plain(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = dial(host, check.port, timeout)

        conn = Plain(host, check.port, timeout=timeout)
    try:
        conn.request("GET", check.path, headers={"Host": check.host, "User-Agent": "provision"})
        resp = conn.getresponse()
        resp.read(65536)
    finally:
        conn.close()
    ok = 200 <= resp.status < 300
    return Result(check.describe(), host, ok, f"GET {check.path} via {host}{where and ' from ' + where}: "
                  f"HTTP {resp.status}")
