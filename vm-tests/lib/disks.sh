#!/bin/bash
# vm-tests: a scenario's disks (the host side's Rust, crate vm-tests/host, runs this).
#
#   lib/disks.sh eph FILE LABEL          the ephemeral disk: 256 MiB, ext4 labelled LABEL
#                                        (none: blank)
#   lib/disks.sh seed FILE WAIT TIMEOUT  cloud-init's NoCloud seed (WAIT: its slow first
#                                        boot's seconds; TIMEOUT: containerd's start
#                                        timeout in the guest, for the comment)
#   lib/disks.sh overlay BACKING FILE    a qcow2 overlay of a raw image, which a second
#                                        boot boots again
set -euo pipefail
mkdisk() { # file label (none: a blank disk)
  truncate -s 256M "$1"; [ "$2" = none ] || mkfs.ext4 -q -F -L "$2" "$1"
}
# the cloud-init scenario's NoCloud seed: a small vfat disk labelled cidata, written with
# mtools (no loop mount: the host may have no vfat module)
mkseed() { # file wait timeout
  local CLOUD_WAIT=$2 CLOUD_TIMEOUT=$3
  local m; m=$(mktemp -d)
  truncate -s 8M "$1"; mkfs.vfat -n CIDATA "$1" >/dev/null
  printf 'instance-id: vmtest-cloud-1\nlocal-hostname: vmtest\n' >"$m/meta-data"
  cat >"$m/user-data" <<UD
#cloud-config
# what Cluster API / TKGS nodes do with their ephemeral disk on the first boot: format
# it (the whole disk: disk_setup's partitioning plus fs_setup's partition: auto found no
# partition in this guest) and mount it with the mounts module
fs_setup:
  - label: ctrd-eph
    filesystem: ext4
    device: /dev/vdb
    partition: none
mounts:
  - [ LABEL=ctrd-eph, /var/lib/containerd, ext4, "defaults,nofail", "0", "2" ]
# cloud-init taking its full wait on the first boot (wait-online, a slow datasource),
# scaled down: $CLOUD_WAIT s in cloud-init.service, before its disk_setup and mounts, where
# the guest's containerd start timeout is $CLOUD_TIMEOUT s (vm-tests-generator); once per
# instance
bootcmd:
  - [ cloud-init-per, once, vmtests-slow, sh, -c, "echo vm-tests: cloud-init slow start; sleep $CLOUD_WAIT; echo vm-tests: cloud-init slow done" ]
UD
  mcopy -o -i "$1" "$m/meta-data" "$m/user-data" ::
  rm -rf "$m"
}
case ${1:-} in
  eph) [ $# = 3 ] || { echo "usage: $0 eph FILE LABEL" >&2; exit 2; }; mkdisk "$2" "$3" ;;
  seed) [ $# = 4 ] || { echo "usage: $0 seed FILE WAIT TIMEOUT" >&2; exit 2; }; mkseed "$2" "$3" "$4" ;;
  overlay) [ $# = 3 ] || { echo "usage: $0 overlay BACKING FILE" >&2; exit 2; }
    qemu-img create -q -f qcow2 -b "$2" -F raw "$3" ;;
  *) echo "usage: $0 eph|seed|overlay ..." >&2; exit 2 ;;
esac
