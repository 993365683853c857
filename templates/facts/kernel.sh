# the kernel baseline's facts: container or not, the running sysctls (`sysctl -a`, without
# the per-interface copies beyond all/default), and every sysctl.d file with its settings
# (`kfile PATH REALPATH`, then `kconf PATH LINE KEY VALUE` per setting; a file linked to
# /dev/null masks a vendor file of that name: `kfile PATH -`)
fact_kernel() {
  kv=$(systemd-detect-virt --container 2>/dev/null) || kv=none
  printf 'kvirt\t%s\n' "${kv:-none}"
  sysctl -a 2>/dev/null | awk '
    { i = index($0, " = "); if (!i) next; k = substr($0, 1, i - 1); v = substr($0, i + 3) }
    k ~ /^net\.ipv[46]\.(conf|neigh)\./ && k !~ /^net\.ipv[46]\.(conf|neigh)\.(all|default)\./ { next }
    { gsub(/[ \t]+/, " ", v); sub(/ $/, "", v); printf "kval\t%s\t%s\n", k, v }'
  for kd in /etc/sysctl.d /run/sysctl.d /usr/local/lib/sysctl.d /usr/lib/sysctl.d /lib/sysctl.d /etc/sysctl.conf; do
    for kf in "$kd"/*.conf; do
      [ "$kd" = /etc/sysctl.conf ] && kf=$kd
      if [ -f "$kf" ] && [ -r "$kf" ]; then
        printf 'kfile\t%s\t%s\n' "$kf" "$(readlink -f "$kf")"
        awk -v F="$kf" '
          { sub(/\r$/, ""); sub(/^[ \t]+/, "") }
          /^[#;]/ || $0 == "" { next }
          { i = index($0, "="); if (!i) next; k = substr($0, 1, i - 1); v = substr($0, i + 1)
            gsub(/[ \t]+$/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", v); gsub(/[ \t]+/, " ", v)
            printf "kconf\t%s\t%d\t%s\t%s\n", F, NR, k, v }' "$kf" 2>/dev/null | head -n 2000
      elif [ -L "$kf" ]; then
        printf 'kfile\t%s\t-\n' "$kf"
      fi
    done
  done
  return 0
}
