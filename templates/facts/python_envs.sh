# Python environments under /opt/provision/envs (provision.facts.python_envs): the NAME and
# .previous-NAME links with their targets; each directory, whether its interpreter is
# there, and its record (base64, at most 64 KiB); and uv, when it is on PATH.
fact_python_envs() {
  if u=$(command -v uv 2>/dev/null); then printf 'pyenvtool\tuv\t%s\n' "$u"; fi
  r=/opt/provision/envs
  if [ ! -d "$r" ] || [ -L "$r" ]; then return 0; fi
  for e in "$r"/* "$r"/.previous-*; do
    n=${e##*/}
    if [ -L "$e" ]; then
      printf 'pyenvlink\t%s\t%s\n' "$n" "$(readlink -- "$e")"
    elif [ -d "$e" ]; then
      if [ -x "$e/bin/python" ]; then py=yes; else py=no; fi
      f="$e/.provision-env.json"; c=-
      if [ -f "$f" ] && [ ! -L "$f" ] && [ "$(stat -c %s -- "$f")" -le 65536 ]; then
        c=$(base64 -w0 < "$f"); [ -n "$c" ] || c=.
      fi
      printf 'pyenvdir\t%s\t%s\t%s\n' "$n" "$py" "$c"
    fi
  done
  return 0
}
