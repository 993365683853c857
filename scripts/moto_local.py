"""Run a moto server on 127.0.0.1 (a free port) for the offline demo and benches.

Prints its URL on the first line of stdout, then serves until SIGTERM/SIGINT.
Only ever binds the loopback address; nothing here talks to AWS.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    print(f"http://{host}:{port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
