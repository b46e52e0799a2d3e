#!/bin/bash
# The cloud-init scenario's base: the guest base's root filesystem plus Debian 12's
# cloud-init (and fdisk, for disk_setup's sfdisk), told to look for a NoCloud seed only
# (the guest has no network). Installed with apt in a chroot of the unpacked base; the
# packages are kept in APT_CACHE for the next build. vm-tests/run caches the result with
# the base (it does not depend on the guard) and assembles the cloud-init guest from it
# as it assembles the suite's guest from the base (assemble.sh, ASSEMBLE_ROOTFS): the
# apt install (25-40 s, python's byte-compilation) is paid once, not on every change.
# Usage: cloudify.sh BASE_ROOTFS_TAR OUT_TAR APT_CACHE
set -euo pipefail
in=$1 out=$2 debs=$3
mkdir -p "$debs/partial"
work=$(mktemp -d "$(dirname "$out")/.cloud.XXXX")
mnt=$work/root
cleanup() {
  for m in var/cache/apt/archives dev/pts dev proc sys; do
    mountpoint -q "$mnt/$m" 2>/dev/null && umount -l "$mnt/$m"
  done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$mnt"
tar -xf "$in" -C "$mnt"
for m in proc sys dev dev/pts; do mount --bind "/$m" "$mnt/$m"; done
mkdir -p "$mnt/var/cache/apt/archives"
mount --bind "$debs" "$mnt/var/cache/apt/archives"
cp "$mnt/etc/resolv.conf" "$work/resolv.conf" 2>/dev/null || : >"$work/resolv.conf"
rm -f "$mnt/etc/resolv.conf"
cp -L /etc/resolv.conf "$mnt/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$mnt/usr/sbin/policy-rc.d"; chmod 0755 "$mnt/usr/sbin/policy-rc.d"
chroot "$mnt" apt-get -o Acquire::Retries=3 update -qq
chroot "$mnt" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y -qq \
  --no-install-recommends cloud-init fdisk
cat >"$mnt/etc/cloud/cloud.cfg.d/99-vm-tests.cfg" <<CFG
# vm-tests: no network; the seed is a NoCloud disk (label cidata)
datasource_list: [ NoCloud, None ]
CFG
rm -f "$mnt/usr/sbin/policy-rc.d"
cp "$work/resolv.conf" "$mnt/etc/resolv.conf"
rm -rf "$mnt/var/lib/apt/lists/"*
chroot "$mnt" dpkg-query -W cloud-init fdisk
umount "$mnt/var/cache/apt/archives"
for m in dev/pts dev proc sys; do umount -l "$mnt/$m"; done
tar -C "$mnt" -cf "$work/rootfs.tar" .
mv "$work/rootfs.tar" "$out"
