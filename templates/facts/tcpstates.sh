# TCP sockets counted by state on the host (the answer stays small on a busy server), and
# the CLOSE_WAIT sockets with their process, at most 20000 (as `ss -tanpH state close-wait`
# prints them: no Netid or State column)
fact_tcpstates() {
  ss_load
  printf '%s\n' "$PROBE_SS" | awk -v t="$T" '
    $1 == "tcp" { n[$2]++ }
    $1 == "tcp" && $2 == "CLOSE-WAIT" && cw < 20000 { cw++; sub(/^[^ ]+ +[^ ]+ +/, ""); print "closewait" t $0 }
    END { for (s in n) printf "tcpstate%s%s%s%d\n", t, s, t, n[s] }'
}
