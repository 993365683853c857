# kernel settings the socket report needs: the ephemeral port range
fact_sysctl() {
  for k in net.ipv4.ip_local_port_range; do
    v=$(sysctl -n "$k" 2>/dev/null) && printf 'sysctl\t%s\t%s\n' "$k" "$(printf '%s' "$v" | tr -s ' \t' '  ')"
  done
  return 0
}
