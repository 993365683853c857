# Does each Jupyter server on this host answer without a token? Asked here, on the host, at
# the address it listens on (loopback for a wildcard): GET /api/status, 200 = no auth asked,
# 403 = it wants a token or password. A Jupyter server = a TCP listener whose process's
# command line names jupyter.
fact_jupyter_auth() {
  ss_load
  printf '%s\n' "$PROBE_SS" | while IFS= read -r l; do
    case $l in "tcp "*LISTEN*pid=*) ;; *) continue ;; esac
    set -f  # no globbing of the peer column (0.0.0.0:*); this loop is a subshell
    # shellcheck disable=SC2086
    set -- $l
    [ "$2" = LISTEN ] || continue
    pid=${l#*pid=}; pid=${pid%%[!0-9]*}
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || continue
    grep -aqs jupyter "/proc/$pid/cmdline" || continue
    local_addr=$5; port=${local_addr##*:}; addr=${local_addr%:*}; addr=${addr%%%*}
    case $addr in 0.0.0.0|'*') addr=127.0.0.1 ;; '[::]') addr='[::1]' ;; esac
    url="http://$addr:$port/api/status"
    if command -v curl >/dev/null 2>&1; then
      code=$(curl -g -s -o /dev/null --max-time 3 -w '%{http_code}' "$url" 2>/dev/null)
    else
      code=$(python3 -c 'import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=3).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")' "$url" 2>/dev/null)
    fi
    # who runs it: a member's own server must run as that member (audit)
    owner=$(stat -c %U "/proc/$pid" 2>/dev/null)
    printf 'jupyter\t%s\t%s\t%s\t%s\n' "$local_addr" "$pid" "${code:-000}" "${owner:-?}"
  done
  # J:MEMBER:PORT: who listens on a member's port (their server, or someone in its place).
  # J:MEMBER:SOCKET: a member's own server on its Unix socket, asked as the member (root
  # never connects by name in a directory of theirs): absent, foreign (not theirs), or the
  # HTTP status of GET /api/status
  for a in "$@"; do
    case $a in J:*) ;; *) continue ;; esac
    v=${a#J:}; m=${v%%:*}; p=${v#*:}
    case $p in
      /*) ;;
      *[!0-9]*|'') continue ;;
      *)  # a port of the shared loopback: every process listening there, and whose it is
        ss_load
        printf '%s\n' "$PROBE_SS" | awk -v port=":$p" '$1 == "tcp" && $2 == "LISTEN" &&
            substr($5, length($5) - length(port) + 1) == port && match($0, /pid=[0-9]+/) {
              print substr($0, RSTART + 4, RLENGTH - 4) }' | sort -u | while read -r pid; do
          printf 'jport\t%s\t%s\t%s\t%s\n' "$m" "$p" "$pid" "$(stat -c %U "/proc/$pid" 2>/dev/null || echo '?')"
        done
        continue ;;
    esac
    if ! uid=$(id -u -- "$m" 2>/dev/null); then printf 'jsock\t%s\tnouser\n' "$m"; continue; fi
    # shellcheck disable=SC2016
    st=$(provision_as -t 8 "$uid" "$(id -g -- "$m")" sh -c '
      [ -S "$1" ] || { echo absent; exit 0; }
      [ -O "$1" ] || { echo foreign; exit 0; }
      if command -v curl >/dev/null 2>&1; then
        curl -s -o /dev/null --max-time 3 -w "%{http_code}" --unix-socket "$1" http://localhost/api/status
      else
        python3 -c "import http.client, socket, sys
class U(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.settimeout(3); self.sock.connect(sys.argv[1])
try:
    c = U(\"localhost\", timeout=3); c.request(\"GET\", \"/api/status\"); print(c.getresponse().status)
except Exception:
    print(\"000\")" "$1"
      fi' sh "$p" </dev/null 2>/dev/null | head -n 1)
    case $st in absent|foreign|[0-9][0-9][0-9]) ;; *) st=000 ;; esac
    printf 'jsock\t%s\t%s\n' "$m" "$st"
  done
}
