# listening TCP sockets with their process
fact_sockets() {
  ss -Htlnp 2>/dev/null | while IFS= read -r l; do printf 'listen\t%s\n' "$l"; done
}
