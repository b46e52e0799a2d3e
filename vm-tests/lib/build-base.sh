#!/bin/bash
# Build a cached guest base: a rootfs tarball (mmdebstrap minbase) of Debian SUITE
# (bookworm, the default: Debian 12; trixie: Debian 13), the kernel as an uncompressed
# ELF (PVH entry, fast direct boot under TCG) and a small generic dracut initrd.
# Output: $1/{rootfs.tar,vmlinux,initrd.img,kver}
#   build-base.sh OUT DEBS [SUITE]
# The caller keys $1 by a hash of this file and the suite; the .deb folder ($2) is shared
# across keys of one suite so rebuilding after an edit needs no network for known packages.
# Both suites come from the same mirror, the host's.
set -euo pipefail
out=$1 debs=$2 suite=${3:-bookworm}
mkdir -p "$out" "$debs"
here=$(cd "$(dirname "$0")" && pwd)

PACKAGES="systemd systemd-sysv udev dbus kmod containerd runc e2fsprogs linux-image-amd64 dracut-core procps"

mirror=$(grep -rhoE 'https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
         | grep -v security | head -n1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}

tmp=$(mktemp -d "$out/.build.XXXX")
trap 'rm -rf "$tmp"' EXIT

# dracut config is written before the kernel is unpacked so that the one
# initrd generated during install is already the small generic one.
# shellcheck disable=SC2016 # the hooks' "$1" is expanded by mmdebstrap's shell, not here
mmdebstrap --variant=minbase --mode=root --format=tar \
  --include="${PACKAGES// /,}" \
  --aptopt='Acquire::Retries "3"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --setup-hook='mkdir -p "$1/var/cache/apt/archives" "$1/etc/dracut.conf.d"' \
  --setup-hook="cp $debs/*.deb \"\$1/var/cache/apt/archives/\" 2>/dev/null || true" \
  --setup-hook="cp $here/../guest/dracut-vmtests.conf \"\$1/etc/dracut.conf.d/10-vmtests.conf\"" \
  --customize-hook="sync-out /var/cache/apt/archives $debs" \
  --customize-hook='chroot "$1" sh -c "ls /boot; kver=\$(ls /lib/modules | head -n1); echo \$kver > /boot/kver; dracut --force --kver \$kver /boot/initrd.img-vmtests \$kver && chmod 0644 /boot/initrd.img-vmtests"' \
  --customize-hook="copy-out /boot $tmp" \
  --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb; echo vmtest > "$1/etc/hostname"; printf "root:vmtest\n" | chroot "$1" chpasswd || true' \
  "$suite" "$tmp/rootfs.tar" "$mirror"

kver=$(cat "$tmp/boot/kver")
# vmlinuz (bzImage) -> vmlinux: find the compressed payload and unpack it.
"$here/extract-vmlinux.sh" "$tmp/boot/vmlinuz-$kver" > "$tmp/vmlinux"
cp "$tmp/boot/initrd.img-vmtests" "$tmp/initrd.img"
echo "$kver" > "$tmp/kver"
mv "$tmp/rootfs.tar" "$tmp/vmlinux" "$tmp/initrd.img" "$tmp/kver" "$out/"
echo "base built: $out ($(du -sh "$out" | cut -f1))"
