# provision_run USER CREATES UNLESS COMMAND (provision.steps.command.RunCommand): run COMMAND
# with `sh -c` as root, or as USER through a login shell (like ssh) when USER is not empty.
# Its stdin is /dev/null (the batch comes in on stdin) and fds 3, 8, 9 (the batch's progress
# and the host lock) are closed for it, so it can neither forge progress nor keep the lock;
# its output goes to stderr (the recap shows the last lines). Afterwards its guards must say
# done, or the next plan would run it again: CREATES must exist, UNLESS must exit 0.
provision_run() {
  if [ -n "$1" ]; then
    runuser -l "$1" -c "$4" </dev/null 3>&- 8>&- 9>&-
  else
    sh -c "$4" </dev/null 3>&- 8>&- 9>&-
  fi
  if [ -n "$2" ] && [ ! -e "$2" ] && [ ! -L "$2" ]; then
    echo "the command succeeded but did not create $2 (its creates: guard): the next apply would run it again" >&2
    return 1
  fi
  if [ -n "$3" ]; then
    set +e
    if [ -n "$1" ]; then
      timeout 60 runuser -l "$1" -c "$3" </dev/null >/dev/null 2>&1 3>&- 8>&- 9>&-
    else
      timeout 60 sh -c "$3" </dev/null >/dev/null 2>&1 3>&- 8>&- 9>&-
    fi
    r=$?
    set -e
    if [ "$r" != 0 ]; then
      echo "the command succeeded but its unless: guard still exits $r: the next apply would run it again" >&2
      return 1
    fi
  fi
}
