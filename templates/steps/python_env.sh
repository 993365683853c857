# provision_pyenv_build NAME DIR PYTHON UV REQUIREMENTS_B64 RECORD_B64 [INSTALL ARGS...]
# (provision.steps.python_env_script): create the environment DIR with PYTHON (`-m venv`,
# or `uv venv` when UV is the path of uv), install the requirements into it with its pip (or
# uv), check its interpreter runs, then write its record. DIR is new (content-addressed):
# the environment in use and its services are not touched. On failure DIR is removed, the
# installer's last lines are said on one `@error` line, and it returns 1.
# The installers run without the host's pip/uv configuration or PIP_*/UV_* variables (the
# inventory names every index), with a cache of root's own, and with fds 3, 8 and 9 (the
# batch's progress and the host lock) closed.
provision_pyenv_fail() {
  # $1 name, $2 dir, $3 what failed, $4 log
  why=$(awk 'NF { sub(/^[ \t]+/, ""); gsub(/\t/, " "); l[n++ % 4] = $0 }
    END { s = n > 4 ? n - 4 : 0; for (i = s; i < n; i++) printf "%s%s", (i > s ? " / " : ""), l[i % 4] }' "$4" 2>/dev/null)
  printf '@error\tpython env %s: %s: %s\n' "$1" "$3" "${why:-no output}" >&2
  rm -rf -- "$2"
}
provision_pyenv_clean_env() {
  for v in $(env | awk -F= '/^(PIP|UV)_[A-Za-z0-9_]*=/ { print $1 }'); do unset "$v"; done
  PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
  PIP_ROOT_USER_ACTION=ignore PIP_CACHE_DIR=/var/cache/provision/pip
  UV_NO_CONFIG=1 UV_CACHE_DIR=/var/cache/provision/uv
  # the OS's interpreter only: not one uv installed under root's home (0700: members'
  # servers could not run it), and so never one downloaded from outside the inventory's index
  UV_PYTHON_PREFERENCE=only-system
  export PIP_CONFIG_FILE PIP_DISABLE_PIP_VERSION_CHECK PIP_NO_INPUT PIP_ROOT_USER_ACTION PIP_CACHE_DIR UV_NO_CONFIG UV_CACHE_DIR UV_PYTHON_PREFERENCE
}
provision_pyenv_build() {
  n=$1; d=$2; py=$3; uv=$4; req=$5; rec=$6; shift 6
  log=/var/lib/provision/pyenv-$n.log
  mkdir -p /var/lib/provision /var/cache/provision && chmod 0700 /var/lib/provision /var/cache/provision || return 1
  rm -rf -- "$d"
  if [ -n "$uv" ]; then
    ( provision_pyenv_clean_env; "$uv" venv --quiet --python "$py" "$d" ) </dev/null >"$log" 2>&1 3>&- 8>&- 9>&-
  else
    ( provision_pyenv_clean_env; "$py" -m venv "$d" ) </dev/null >"$log" 2>&1 3>&- 8>&- 9>&-
  fi || { provision_pyenv_fail "$n" "$d" "creating the environment with $py failed" "$log"; return 1; }
  printf '%s' "$req" | base64 -d > "$d/provision-requirements.txt" || { rm -rf -- "$d"; return 1; }
  if [ -n "$uv" ]; then
    ( provision_pyenv_clean_env; "$uv" pip install --python "$d/bin/python" --compile-bytecode "$@" -r "$d/provision-requirements.txt" ) </dev/null >"$log" 2>&1 3>&- 8>&- 9>&-
  else
    ( provision_pyenv_clean_env; "$d/bin/python" -m pip install --no-warn-script-location "$@" -r "$d/provision-requirements.txt" ) </dev/null >"$log" 2>&1 3>&- 8>&- 9>&-
  fi || { provision_pyenv_fail "$n" "$d" "installing $(tr '\n' ' ' < "$d/provision-requirements.txt")failed" "$log"; return 1; }
  "$d/bin/python" -c '' </dev/null >"$log" 2>&1 3>&- 8>&- 9>&- \
    || { provision_pyenv_fail "$n" "$d" "the new environment's python does not run" "$log"; return 1; }
  t=$(mktemp "$d/.provision-tmp.XXXXXXXXXX") || { rm -rf -- "$d"; return 1; }
  printf '%s' "$rec" | base64 -d > "$t" && chmod 0644 "$t" && mv -fT "$t" "$d/.provision-env.json" \
    || { rm -rf -- "$d"; return 1; }
}
# provision_pyenv_link ROOT LINK TARGET: ROOT/LINK -> TARGET, replaced atomically (rename).
provision_pyenv_link() {
  t="$1/.provision-tmp.link-$2"
  ln -sfn -- "$3" "$t" && mv -fT "$t" "$1/$2"
}
