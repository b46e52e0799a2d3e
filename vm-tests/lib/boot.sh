#!/bin/bash
# vm-tests: one boot under qemu (the host side's Rust, crate vm-tests/host, runs this per
# boot). Its files go to DIR: console.log and ttyS1.log (the serial ports), qemu.log,
# host.txt (the host's record: hotplugged_after_s or hotplug_failed, timeout, wall_s,
# cpu_s) and report.txt (the guest's report, between its markers, without CR).
#
#   lib/boot.sh DIR INITRD DISK APPEND
#     DISK    boot (DIR/eph.img attached), hotplug (attached over QMP when the guest
#             writes VMTEST-HOTPLUG-NOW on ttyS1, HOTPLUG_DELAY s later) or none
#     APPEND  the vmtest.* words of the kernel command line
# Environment: BOOT_KERNEL (the vmlinux), BOOT_ROOTDRIVE (qemu's -drive for the root
# disk), BOOT_SEEDDRIVE and BOOT_VARDRIVE (optional -drive's), BOOT_ACCEL (accelerator
# arguments, blank-separated), VM_TIMEOUT (seconds, default 300), HOTPLUG_DELAY (default
# 5), VM_CONSOLE_ARGS.
set -euo pipefail
[ $# = 4 ] || { echo "usage: $0 DIR INITRD DISK APPEND" >&2; exit 2; }
log() { printf '%s vm-tests: %s\n' "$(date -u +%T)" "$*" >&2; }
read -r -a accel_args <<<"${BOOT_ACCEL:?}"

# shellcheck disable=SC2094 # the loop reads the replies socat writes to out, on purpose
qmp() { # dir out json...: the replies go to out
  local d=$1 out=$2; shift 2
  local want=$(($# + 1)) # qmp_capabilities and each command answer once, on a line each
  { echo '{"execute":"qmp_capabilities"}'; for c in "$@"; do echo "$c"; done
    # keep the connection open until every command is answered (socat writes the
    # replies to out as they come), at most 5 s
    local n
    for _ in $(seq 50); do
      n=$(grep -cE '"(return|error)"' "$out" 2>/dev/null) || true
      [ "${n:-0}" -ge $want ] && break
      sleep 0.1
    done; } | socat -t 3 - "UNIX-CONNECT:$d/qmp.sock" >"$out" 2>&1
}

# the CPU seconds (user + system) of this shell's waited-for children between two
# `times` outputs (the builtin, run in this shell: a subshell's children are its own)
cpu_between() { # FILE0 FILE1
  { sed -n 2p "$1"; sed -n 2p "$2"; } | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] }
    c[NR] = n } END { printf "%.1f", c[2] - c[1] }'
}
# boot DIR INITRD DISK(boot|hotplug|none) APPEND
# printk.devkmsg=on: what systemd logs before journald runs (the cycles it breaks in the
# first transaction) goes through /dev/kmsg, which the kernel otherwise rate-limits, and
# the tiny initrd has no journald to catch it earlier. cryptomgr.notests: the kernel's
# self-tests of its crypto algorithms took 1 s of every boot under TCG (initcall_debug:
# crypto_algapi_init)
boot() {
  local d=$1 initrd=$2 disk=$3 append=$4
  local args=("${accel_args[@]}" -smp 2 -m 1024 -nodefaults -display none -no-reboot
    -kernel "$BOOT_KERNEL" -initrd "$initrd"
    -append "root=LABEL=vmroot rw console=ttyS0 ${VM_CONSOLE_ARGS-loglevel=4 systemd.show_status=auto} fsck.mode=skip panic=-1 printk.devkmsg=on cryptomgr.notests $append"
    -drive "$BOOT_ROOTDRIVE" -device "virtio-blk-pci,drive=root"
    -serial "file:$d/console.log" -serial "file:$d/ttyS1.log"
    -qmp "unix:$d/qmp.sock,server=on,wait=off" -nic none)
  case $disk in
    boot) args+=(-drive "file=$d/eph.img,if=none,id=eph,format=raw" -device "virtio-blk-pci,drive=eph,id=ephdev") ;;
    hotplug) args+=(-drive "file=$d/eph.img,if=none,id=eph,format=raw") ;;
  esac
  # after the ephemeral disk, so that it stays /dev/vdb (the seed's user-data formats it)
  [ -z "${BOOT_SEEDDRIVE:-}" ] || args+=(-drive "$BOOT_SEEDDRIVE" -device "virtio-blk-pci,drive=seed")
  [ -z "${BOOT_VARDRIVE:-}" ] || args+=(-drive "$BOOT_VARDRIVE" -device "virtio-blk-pci,drive=var")
  local t0; t0=$(date +%s.%N); times >"$d/times.0"
  qemu-system-x86_64 "${args[@]}" >"$d/qemu.log" 2>&1 &
  local pid=$! deadline=$(( $(date +%s) + ${VM_TIMEOUT:-300} )) plugged=
  while kill -0 $pid 2>/dev/null; do
    if [ "$disk" = hotplug ] && [ -z "$plugged" ] && grep -aq 'VMTEST-HOTPLUG-NOW' "$d/ttyS1.log" 2>/dev/null; then
      sleep "${HOTPLUG_DELAY:-5}"   # the disk arrives well after the guest asked for it
      qmp "$d" "$d/qmp.out" '{"execute":"device_add","arguments":{"driver":"virtio-blk-pci","drive":"eph","id":"ephdev"}}' || true
      plugged=$(date +%s.%N)
      # hot-plugged only when qemu said so: both commands answered, neither with an error
      if [ "$(grep -c '"return"' "$d/qmp.out")" -ge 2 ] && ! grep -q '"error"' "$d/qmp.out"; then
        echo "hotplugged_after_s=$(awk -v a="$t0" -v b="$plugged" 'BEGIN{printf "%.1f", b-a}')" >"$d/host.txt"
      else
        echo "hotplug_failed=$(tr '\n' ' ' <"$d/qmp.out" | cut -c1-300)" >"$d/host.txt"
      fi
    fi
    if [ "$(date +%s)" -ge $deadline ]; then
      echo "timeout after ${VM_TIMEOUT:-300}s" >>"$d/host.txt"; kill $pid; wait $pid || true; break
    fi
    sleep 0.3
  done
  local rc=0
  wait $pid 2>/dev/null || rc=$?
  # qemu's own TCG assertion (seen once: physmem.c iotlb_to_section, 2 s into a boot)
  # before the guest wrote anything: qemu's fault, not the guest's; booted once more,
  # said in the log. Never for a guest that ran (a report, a hotplug request, 10 s).
  local early; early=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print (b - a < 10) ? 1 : 0}')
  if [ "$rc" = 134 ] && [ "$early" = 1 ] && [ ! -s "$d/ttyS1.log" ] && grep -q 'Assertion' "$d/qemu.log" &&
     [ -z "${qemu_retried:-}" ]; then
    log "qemu aborted $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s into the boot of $d, before the guest wrote a byte ($(head -c 160 "$d/qemu.log" | tr '\n' ' ')): booting it once more"
    rm -f "$d/console.log" "$d/ttyS1.log" "$d/host.txt" "$d/qmp.out"
    qemu_retried=1 boot "$@"
    return
  fi
  echo "wall_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')" >>"$d/host.txt"
  # the host CPU the boot took (qemu's, nearly all of it): under TCG the guest's work,
  # which a loaded host does not inflate as it does the wall time
  times >"$d/times.1"; echo "cpu_s=$(cpu_between "$d/times.0" "$d/times.1")" >>"$d/host.txt"
  # the report, between its markers, without CR
  tr -d '\r' <"$d/ttyS1.log" | sed -n '/^=== VMTEST BEGIN/,/^=== VMTEST END/p' | sed '1d;$d' >"$d/report.txt"
}

boot "$@"
