# the NVIDIA GPUs (provision.facts.gpus): what nvidia-smi says of each, how it ended, and what
# it cannot say itself: the kernel module's version beside the user-space library's (a
# mismatch after an upgrade), and the GPUs on the PCI bus (one that fell off it). nvidia-smi
# can hang on a broken GPU: bounded by `timeout` (a process stuck in the kernel, state D,
# outlives even its SIGKILL; the probe's own limit then applies).
fact_gpus() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    printf 'gpusmi\tabsent\n'
  else
    # output and errors together, each line as it came: the parser tells rows from messages
    gs_out=$(timeout -k 2 10 nvidia-smi \
      --query-gpu=index,name,uuid,driver_version,memory.total,persistence_mode,ecc.errors.uncorrected.volatile.total,pci.bus_id \
      --format=csv,noheader,nounits </dev/null 2>&1)
    gs_rc=$?
    printf '%s\n' "$gs_out" | while IFS= read -r gs_l; do
      [ -n "$gs_l" ] && printf 'gpuline\t%s\n' "$gs_l"
    done
    printf 'gpusmi\t%s\n' "$gs_rc"
  fi
  # the loaded kernel module: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..."
  if [ -r /proc/driver/nvidia/version ]; then
    while IFS= read -r gs_l; do
      case $gs_l in NVRM\ version:*) printf 'gpukmod\t%s\n' "$gs_l" ;; esac
    done </proc/driver/nvidia/version
  fi
  # the user-space NVML library nvidia-smi loads: libnvidia-ml.so.1 -> libnvidia-ml.so.VERSION
  gs_lib=$(ldconfig -p 2>/dev/null | awk '$1 == "libnvidia-ml.so.1" { print $NF; exit }')
  if [ -n "$gs_lib" ] && gs_real=$(readlink -f "$gs_lib" 2>/dev/null); then
    printf 'gpulib\t%s\n' "${gs_real##*/}"
  fi
  # NVIDIA display and 3D controllers on the bus (class 0x0300/0x0302; not NVSwitches, 0x0680),
  # read with the shell's own `read`: no process per device
  for gs_d in /sys/bus/pci/devices/*; do
    [ -r "$gs_d/vendor" ] || continue
    IFS= read -r gs_v <"$gs_d/vendor" || continue
    [ "$gs_v" = 0x10de ] || continue
    IFS= read -r gs_c <"$gs_d/class" || continue
    case $gs_c in 0x0300*|0x0302*) printf 'gpupci\t%s\n' "${gs_d##*/}" ;; esac
  done
  return 0
}
