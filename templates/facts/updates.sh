# Unattended upgrades (provision.facts.updates): the effective configuration of the keys
# provision sets (`apt-config dump`, every file in apt.conf.d applied in apt's order), the
# files that mention them, the installed GPU packages unattended-upgrades must leave alone
# (the globs of provision.inventory.apt_policy.GPU_PACKAGES), and a pending reboot.
fact_updates() {
  apt-config dump 2>/dev/null | awk -v T="$T" '
    /^(APT::Periodic::(Unattended-Upgrade|Update-Package-Lists)|Unattended-Upgrade::(Automatic-Reboot|Automatic-Reboot-Time|Origins-Pattern::|Allowed-Origins::|Package-Blacklist::)) "/ {
      v = substr($0, length($1) + 2); sub(/^"/, "", v); sub(/";$/, "", v)
      print "uuconf" T $1 T v }'
  for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && grep -q -E 'Unattended-Upgrade|APT::Periodic' -- "$f" 2>/dev/null && printf 'uufile\t%s\n' "$f"
  done
  dpkg-query -W -f='${Package}\t${Status}\n' -- '*nvidia*' 'cuda-*' 'libcuda*' 'libcudnn*' \
    'libnccl*' 'libcublas*' 'libcufft*' 'libcurand*' 'libcusolver*' 'libcusparse*' 'libnpp*' \
    'libnvjpeg*' 'libnvjitlink*' 'libnvcuvid*' 'libnvoptix*' 'datacenter-gpu-manager*' 2>/dev/null |
    awk -F'\t' -v T="$T" '$2 ~ / installed$/ && $2 !~ /^deinstall/ { print "gpupkg" T $1 }'
  if [ -f /var/run/reboot-required ]; then
    printf 'rebootreq\t%s\n' "$(stat -c %Y /var/run/reboot-required)"
    [ -f /var/run/reboot-required.pkgs ] && sort -u /var/run/reboot-required.pkgs | head -n 200 |
      while IFS= read -r p; do printf 'rebootpkg\t%s\n' "$p"; done
  fi
  printf 'uunow\t%s\n' "$(date +%s)"
  return 0
}
