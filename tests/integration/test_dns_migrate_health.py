"""Health checks of a migration against a real server on 127.0.0.1."""

from __future__ import annotations

from provision.dns.migrate import health


def test_health_checks_against_127_0_0_1() -> None:
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.headers["Host"] == "api.example.org" else 404)
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    try:
        assert health.run(health.parse(f"tcp:{port}"), "127.0.0.1").ok
        assert health.run(health.parse(f"http://api.example.org:{port}/healthz"), "127.0.0.1").ok
        assert not health.run(health.parse(f"http://other.example.org:{port}/"), "127.0.0.1").ok
    finally:
        srv.shutdown()
        srv.server_close()
    r = health.run(health.parse(f"tcp:{port}"), "127.0.0.1", timeout=1)
    assert not r.ok and "refused" in r.detail.lower()


class _Transport:
    """A stand-in for the remote host's paramiko Transport: its `direct-tcpip` channel is a
    real TCP connection to 127.0.0.1 (what the remote sshd would make), or the
    ChannelException sshd answers with."""

    def __init__(self, refuse: tuple[int, str] | None = None) -> None:
        self.refuse = refuse
        self.opened: list[tuple[str, tuple[str, int]]] = []

    def open_channel(self, kind: str, dest: tuple[str, int], src: object,
                     timeout: float) -> object:
        import socket

        import paramiko

        self.opened.append((kind, dest))
        if self.refuse:
            raise paramiko.ChannelException(*self.refuse)

        class Chan:
            def __init__(self) -> None:
                self.s = socket.create_connection(dest, timeout)

            def sendall(self, data: bytes) -> None:
                self.s.sendall(data)

            def recv(self, n: int) -> bytes:
                return self.s.recv(n)

            def close(self) -> None:
                self.s.close()

        return Chan()


def test_health_checks_through_a_remote_hosts_channel() -> None:
    """`--health-from`: the tcp and http checks over the channel the remote sshd opens
    (bridged to a local socket pair), the target sent in the channel-open message (no
    command), and sshd's refusal said with the host it came from."""
    import http.server
    import threading
    from functools import partial

    from provision.ssh.dial import dial

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keeps the connection open: the bridge must close it

        def do_GET(self) -> None:
            ok = self.headers["Host"] == "api.example.org" and self.path == "/healthz?x=1"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    t = _Transport()
    through = partial(dial, t, "bastion")
    try:
        r = health.run(health.parse(f"tcp:{port}"), "127.0.0.1", dial=through, where="bastion")
        assert r.ok and r.detail == f"connected to 127.0.0.1:{port} from bastion"
        r = health.run(health.parse(f"http://api.example.org:{port}/healthz?x=1"), "127.0.0.1",
                       dial=through, where="bastion")
        assert r.ok and r.detail == "GET /healthz?x=1 via 127.0.0.1 from bastion: HTTP 200"
        r = health.run(health.parse(f"http://other.example.org:{port}/healthz?x=1"),
                       "127.0.0.1", dial=through, where="bastion")
        assert not r.ok and r.detail.endswith("HTTP 404")
    finally:
        srv.shutdown()
        srv.server_close()
    assert t.opened == [("direct-tcpip", ("127.0.0.1", port))] * 3
    refused = _Transport(refuse=(2, "Connection refused"))
    r = health.run(health.parse("tcp:9"), "10.0.0.7.", dial=partial(dial, refused, "gpu1"),
                   where="gpu1")
    assert not r.ok and r.detail == "10.0.0.7:9: Connection refused (from gpu1)"
    assert refused.opened == [("direct-tcpip", ("10.0.0.7", 9))]  # the CNAME's dot dropped
    prohibited = _Transport(refuse=(1, "open failed"))
    r = health.run(health.parse("tcp:8000"), "10.0.0.7", dial=partial(dial, prohibited, "gpu1"))
    assert not r.ok and "gpu1's sshd does not forward (AllowTcpForwarding no" in r.detail


def test_an_answer_that_is_not_http_fails_the_check_with_its_bytes_escaped() -> None:
    # the other end (the new value's server, or anyone on the path) picks the status line;
    # before, http.client's BadStatusLine escaped as a traceback that printed it raw
    import socket
    import threading

    evil = b"\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J evil\r\n"

    def dial(host: str, port: int, timeout: float) -> socket.socket:
        ours, theirs = socket.socketpair()

        def serve() -> None:
            with theirs:
                theirs.recv(65536)
                theirs.sendall(evil)

        threading.Thread(target=serve, daemon=True).start()
        return ours

    r = health.run(health.parse("http://api.example.org:8000/health"), "192.0.2.7", dial=dial)
    assert not r.ok
    assert "not an HTTP answer" in r.detail
    assert "\x1b" not in r.detail and "\x07" not in r.detail
