# the host's addresses and the interface that holds each (`ip -o addr show`): which
# interface NCCL and Gloo must use to reach a cluster's peers
fact_addresses() {
  ip -o addr show 2>/dev/null | awk -v t="$T" '$3 == "inet" || $3 == "inet6" { sub(/@.*/, "", $2); print "addr" t $2 t $4 }'
  return 0
}
