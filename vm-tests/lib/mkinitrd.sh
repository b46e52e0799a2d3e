#!/bin/bash
# The initrd every scenario but `dracut` boots: guest/tiny-init.c as /init and the
# modules the root filesystem needs (virtio_blk over virtio_pci, ext4, crc32c), with
# their dependencies, from the guest's own kernel, in load order, uncompressed.
# Usage: mkinitrd.sh ROOT KVER OUT   (ROOT: the guest's unpacked root filesystem)
set -euo pipefail
root=$1 kver=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
mods=$root/usr/lib/modules/$kver
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/dev" "$tmp/root" "$tmp/lib/modules"
gcc -static -Os -s -o "$tmp/init" "$here/../guest/tiny-init.c"

# modules.dep lines: `kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko ...`; each module
# after everything it depends on
declare -A done_
order=()
need() {
  local m=$1 d deps
  [ -z "${done_[$m]:-}" ] || return 0
  done_[$m]=1
  read -r -a deps <<<"$(sed -n "s|^$m: *||p" "$mods/modules.dep")"
  for d in "${deps[@]}"; do need "$d"; done
  order+=("$m")
}
for m in kernel/drivers/virtio/virtio_pci.ko kernel/drivers/block/virtio_blk.ko \
         kernel/crypto/crc32c_generic.ko kernel/fs/ext4/ext4.ko; do
  # built into the kernel (Debian 13's virtio_pci): nothing to load
  grep -qx "$m" "$mods/modules.builtin" 2>/dev/null && continue
  # as modules.dep names it: Debian 13's kernel ships its modules compressed (NAME.ko.xz)
  found=$(grep -oE "^$m(\.xz|\.zst|\.gz)?:" "$mods/modules.dep" | head -n 1) ||
    { echo "mkinitrd: $m not in $mods/modules.dep nor built in" >&2; exit 1; }
  need "${found%:}"
done
# each module uncompressed: tiny-init's finit_module loads a plain .ko
for m in "${order[@]}"; do
  plain=$(basename "${m%.ko*}").ko
  case $m in
    *.xz) xz -dc "$mods/$m" ;;
    *.zst) zstd -qdc "$mods/$m" ;;
    *.gz) gzip -dc "$mods/$m" ;;
    *) cat "$mods/$m" ;;
  esac >"$tmp/lib/modules/$plain"
  echo "/lib/modules/$plain"
done >"$tmp/modules"
( cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 ) >"$out"
echo "mkinitrd: $out ($(du -k "$out" | cut -f1) KiB): $(tr '\n' ' ' <"$tmp/modules")"
