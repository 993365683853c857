"""bench/certs.sh's stand-in door on gpu1 of lab NAME: HAProxy serving the certificate's
combined file as provision-door.service, with a reload (as tests/lab/test_certs.py)."""

import subprocess
import sys

from provision.lab.shell import container_leader, read_state

state = read_state(sys.argv[1])
assert state is not None, f"no lab {sys.argv[1]}"
leader = container_leader(state["pids"]["gpu1"])
CFG = """defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend door
    bind :443 ssl crt /etc/provision/tls/api.lab.test/haproxy.pem
    http-request return status 200 content-type text/plain string ok
"""
UNIT = """[Service]
Type=notify
ExecStart=/usr/sbin/haproxy -Ws -f /run/stand-in-door.cfg
ExecReload=/bin/kill -USR2 $MAINPID
"""
script = (f"cat > /run/stand-in-door.cfg <<'X'\n{CFG}X\n"
          f"cat > /run/systemd/system/provision-door.service <<'X'\n{UNIT}X\n"
          "systemctl daemon-reload && systemctl restart provision-door.service")
subprocess.run(["nsenter", "-t", str(leader), "-a", "--", "sh", "-c", script], check=True)
