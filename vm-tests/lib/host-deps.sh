#!/bin/bash
# Install what vm-tests needs on a Debian 12 host (idempotent, root).
# qemu-system comes from bookworm-backports, pinned to exactly the qemu-system
# packages: the machine ships qemu-utils 10 from backports, which conflicts
# with bookworm's qemu-system-common 7.2, and a blanket `-t bookworm-backports`
# would also upgrade the host's systemd and e2fsprogs.
set -euo pipefail

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v xz >/dev/null || need+=(xz-utils)
command -v zstd >/dev/null || need+=(zstd)
command -v socat >/dev/null || need+=(socat)
command -v gcc >/dev/null || need+=(gcc)
command -v jq >/dev/null || need+=(jq)
command -v mkfs.vfat >/dev/null || need+=(dosfstools)   # the cloud-init scenario's NoCloud seed
command -v mcopy >/dev/null || need+=(mtools)
command -v cpio >/dev/null || need+=(cpio)            # the scenarios' initrd (mkinitrd.sh)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
[ ${#need[@]} -eq 0 ] && exit 0

. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || { echo "vm-tests: host must be Debian 12 (bookworm)" >&2; exit 1; }

# same mirror as the host's bookworm entry
mirror=$(grep -rhoE 'https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
         | grep -v security | head -n1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat > /etc/apt/sources.list.d/vm-tests-backports.sources <<SRC
Types: deb
URIs: $mirror
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
# backports stay at their default priority (100, never chosen by upgrades);
# only the qemu-system packages are pulled from it.
cat > /etc/apt/preferences.d/vm-tests-qemu <<'PIN'
Package: qemu-system-x86 qemu-system-common qemu-system-data qemu-system-modules-spice qemu-block-extra seabios ipxe-qemu
Pin: release n=bookworm-backports
Pin-Priority: 990
PIN
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" ipxe-qemu seabios
