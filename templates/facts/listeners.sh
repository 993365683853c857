# listening TCP and UDP sockets with their process (ss -tlnpH, ss -ulnpH), one raw line each
fact_listeners() {
  ss -Htlnp 2>/dev/null | sed "s/^/ltcp$T/"
  ss -Hulnp 2>/dev/null | sed "s/^/ludp$T/"
}
