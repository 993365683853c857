# the live filter table of both families (iptables-save / ip6tables-save), one line each,
# then each tool's exit status (127: not installed)
fact_iptables() {
  for fam in 4 6; do
    if [ "$fam" = 4 ]; then tool=iptables-save; else tool=ip6tables-save; fi
    if command -v "$tool" >/dev/null 2>&1; then
      out=$("$tool" -t filter 2>&1); rc=$?
      printf '%s\n' "$out" | sed "s/^/ipt$fam$T/"
    else
      rc=127
    fi
    printf 'iptrc\t%s\t%s\n' "$fam" "$rc"
  done
}
