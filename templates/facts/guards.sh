# G:ID:KIND:USER:VALUE -> `guard ID STATUS` (provision.facts.guards). KIND c: VALUE is a path,
# 0 when it exists. KIND u: VALUE is a command; its exit status. The command's stdin is
# /dev/null (the probe's own script comes in on stdin), its output is discarded (it cannot
# forge records), and it runs as USER (a login shell, like ssh) when given, else as root.
fact_guards() {
  for a in "$@"; do
    case $a in G:*) ;; *) continue ;; esac
    v=${a#G:}; id=${v%%:*}; v=${v#*:}; kind=${v%%:*}; v=${v#*:}; user=${v%%:*}; v=${v#*:}
    case $kind in
      c) if [ -e "$v" ] || [ -L "$v" ]; then r=0; else r=1; fi ;;
      u) if [ -n "$user" ]; then
           timeout 60 runuser -l "$user" -c "$v" </dev/null >/dev/null 2>&1 8>&- 9>&-; r=$?
         else
           timeout 60 sh -c "$v" </dev/null >/dev/null 2>&1 8>&- 9>&-; r=$?
         fi ;;
      *) continue ;;
    esac
    printf 'guard\t%s\t%s\n' "$id" "$r"
  done
}
