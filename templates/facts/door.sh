# the door (provision.door): each certificate under /etc/provision/tls and what each port
# of the live config really serves (its config digest and certificate), asked on loopback
fact_door() {
  for d in /etc/provision/tls/*/; do
    [ -d "$d" ] || continue
    n=${d%/}; n=${n##*/}
    k=0; [ -f "$d/privkey.pem" ] && k=1
    c=0; [ -f "$d/haproxy.pem" ] && c=1
    s=0; [ -e "$d/self-signed" ] && s=1
    fp=$(openssl x509 -in "$d/fullchain.pem" -noout -fingerprint -sha256 2>/dev/null | sed 's/.*=//; s/://g') || fp=
    end=$(openssl x509 -in "$d/fullchain.pem" -noout -enddate 2>/dev/null | sed 's/^notAfter=//') || end=
    e=$( [ -n "$end" ] && date -d "$end" +%s 2>/dev/null ) || e=
    printf 'door\tcert\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "${fp:--}" "${e:--}" "$s" "$k" "$c"
  done
  [ -f /etc/provision/door/haproxy.cfg ] || return 0
  ports=$(sed -n 's/^# provision-door-ports //p' /etc/provision/door/haproxy.cfg | head -n 1)
  for p in $ports; do
    case $p in *[!0-9]*) continue ;; esac
    dg=$(curl -sk -m 3 -o /dev/null -D - "https://127.0.0.1:$p/" 2>/dev/null \
         | tr -d '\r' | sed -n 's/^[Xx]-[Pp]rovision-[Dd]oor: *//p' | head -n 1)
    fp=$(openssl s_client -connect "127.0.0.1:$p" </dev/null 2>/dev/null \
         | openssl x509 -noout -fingerprint -sha256 2>/dev/null | sed 's/.*=//; s/://g')
    printf 'door\tserved\t%s\t%s\t%s\n' "$p" "${dg:--}" "${fp:--}"
  done
  return 0
}
