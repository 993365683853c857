# F:path (file + temp files beside it)  D:dir (directory + temp files in it)  L:dir/prefix
fact_files() {
  for a in "$@"; do
    v=${a#??}
    case $a in
      F:*|D:*) fact_at "$a" ;;
      L:*) for f in "$v"*; do if [ -e "$f" ]; then file_fact "$f"; fi; done ;;
    esac
  done
}
