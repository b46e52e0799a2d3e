#!/bin/bash
# The dracut-var scenario's guest: the suite's image with /var on a filesystem of its own
# (the STIG/CIS layout) that the initrd does NOT mount: fstab says
# `LABEL=vmvar /var ext4 defaults 0 2`, no x-initrd.mount. The guest's /var moves into a
# second image labelled vmvar (mkfs.ext4 -d); the root filesystem keeps an empty /var with
# an empty /var/lib/containerd under it: the directory an initrd guard that ignored the
# later /var mount would mount the volume on (and var.mount would then hide).
# Usage: varify.sh ROOT_IMG OUT_ROOT_IMG OUT_VAR_IMG
set -euo pipefail
in=$1 out=$2 outvar=$3
work=$(mktemp -d "$(dirname "$out")/.var.XXXX")
mnt=$work/mnt
cleanup() {
  mountpoint -q "$mnt" 2>/dev/null && umount -l "$mnt"
  rm -rf "$work"
}
trap cleanup EXIT
cp --sparse=always "$in" "$work/root.img"
mkdir "$mnt"
mount -o loop "$work/root.img" "$mnt"
grep -qE '^[^#]*[[:space:]]/var[[:space:]]' "$mnt/etc/fstab" 2>/dev/null &&
  { echo "varify: the image's fstab already mounts /var" >&2; exit 1; }
# ownership, modes and xattrs as they are: mkfs.ext4 -d copies the tree as it finds it
mkfs.ext4 -q -F -L vmvar -d "$mnt/var" "$work/var.img" 1G
find "$mnt/var" -mindepth 1 -delete
install -d -m 0711 "$mnt/var/lib/containerd"
printf '# vm-tests dracut-var: /var is a filesystem of its own, mounted by the OS (not in the initrd)\nLABEL=vmvar /var ext4 defaults 0 2\n' \
  >>"$mnt/etc/fstab"
echo "varify: /etc/fstab:"; grep -v '^#' "$mnt/etc/fstab" || true
umount "$mnt"
mv "$work/var.img" "$outvar"
mv "$work/root.img" "$out"
