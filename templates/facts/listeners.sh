# listening TCP and UDP sockets with their process, one raw ss line each (as `ss -tlnpH` and
# `ss -ulnpH` print them: the Netid column dropped)
fact_listeners() {
  ss_load
  printf '%s\n' "$PROBE_SS" | awk -v t="$T" '
    $1 == "tcp" && $2 == "LISTEN" { sub(/^[^ ]+ +/, ""); print "ltcp" t $0 }
    $1 == "udp" && $2 == "UNCONN" { sub(/^[^ ]+ +/, ""); print "ludp" t $0 }'
}
