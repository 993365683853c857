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
