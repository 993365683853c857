"""Local ports on the operator's machine (I/O): free ports, answers on a forward."""

from __future__ import annotations

import socket

from provision.inventory.forwards import LOCAL_BIND


def port_is_free(port: int) -> bool:
    """Can we listen on 127.0.0.1:port (as ssh would, with SO_REUSEADDR)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOCAL_BIND, port))
        except OSError:
            return False
    return True


def port_accepts(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((LOCAL_BIND, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_answers(port: int, path: str = "/", timeout: float = 10.0) -> str | None:
    """GET path on the local forward; the status line, or None when nothing answered."""
    try:
        with socket.create_connection((LOCAL_BIND, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(f"GET {path} HTTP/1.0\r\nHost: {LOCAL_BIND}:{port}\r\n\r\n".encode())
            data = b""
            while b"\r\n" not in data and len(data) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.split(b"\r\n", 1)[0].decode(errors="replace")
    return line if line.startswith("HTTP/") else None


