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
}
