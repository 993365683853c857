# TCP sockets counted by state on the host (ss -tanH | awk: the answer stays small on a busy
# server), and the CLOSE_WAIT sockets with their process (raw ss lines, at most 20000)
fact_tcpstates() {
  ss -Htan 2>/dev/null | awk -v t="$T" '{ n[$1]++ } END { for (s in n) printf "tcpstate%s%s%s%d\n", t, s, t, n[s] }'
  ss -Htanp state close-wait 2>/dev/null | head -n 20000 | sed "s/^/closewait$T/"
}
