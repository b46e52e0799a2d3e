#!/bin/bash
# Assemble the suite's guest from the cached base: unpack the rootfs, install the
# containerd-guard package (dpkg -i in a chroot of the image: its maintainer scripts run,
# postinst enables the units), config, the sandbox image archive and the guest side of the
# tests; build the dracut initrd with the guard module (enabled with the package's example
# conf); write an ext4 image.
# Usage: assemble.sh BASE REPO DEB CRI_PROBE OUT CRI_WORKLOAD NEWER_DEB [GUARD]
#   NEWER_DEB  the same package with a higher version, kept in the image for the package
#              scenario (installed over the first one on a running node)
#   GUARD      a prebuilt guard binary installed over the package's (VM_GUARD)
# Environment: ASSEMBLE_ROOTFS, another root filesystem tarball than BASE's rootfs.tar
# (the cloud-init scenario's: cloudify.sh); ASSEMBLE_ROOT_ONLY=1 writes root.img only
# (no initrds: the scenario boots the suite's, same kernel), and with ASSEMBLE_TINY_INITRD=1
# also initrd.img, the tiny initrd of BASE's kernel (the trixie guest)
set -euo pipefail
base=$1 repo=$2 deb=$3 probe=$4 out=$5 workload=$6 newer=$7 guard=${8:-}
g=$repo/vm-tests/guest
mkdir -p "$out"
work=$(mktemp -d "$out/.asm.XXXX")
root=$work/root
cleanup() {
  for m in dev/pts dev proc sys; do mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$root"
tar -xf "${ASSEMBLE_ROOTFS:-$base/rootfs.tar}" -C "$root"
kver=$(cat "$base/kver")

# --- what an image builder installs: the package (docs/image-builder.md) ---
# dpkg -i in a chroot, so the maintainer scripts run as on a node. Only /proc, /sys, /dev
# are bound: the image's /run has no systemd, so postinst's daemon-reload is skipped and
# nothing touches the host's systemd; policy-rc.d denies any start besides.
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
printf '#!/bin/sh\n# vm-tests assemble: no service starts in the image\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
cp "$deb" "$root/tmp/containerd-guard.deb"
# the base image excludes /usr/share/doc from every package (mmdebstrap --dpkgopt): take
# the guard's docs and examples back in, the dracut conf below comes from there
if ! chroot "$root" dpkg --path-include='/usr/share/doc/containerd-guard/*' -i /tmp/containerd-guard.deb \
     >"$work/dpkg-install.log" 2>&1; then
  cat "$work/dpkg-install.log" >&2; echo "assemble: dpkg -i of the package failed" >&2; exit 1
fi
rm -f "$root/tmp/containerd-guard.deb" "$root/usr/sbin/policy-rc.d"
for m in dev/pts dev proc sys; do umount -l "$root/$m"; done
{
  # shellcheck disable=SC2016 # dpkg-query's ${fields}, not the shell's
  echo "package=$(chroot "$root" dpkg-query -W -f='${Package} ${Version} ${Status}' containerd-guard)"
  # the only unit the package enables (containerd's and kubelet's gates are drop-ins)
  u=containerd-guard-hygiene.timer
  echo "enabled.$u=$(systemctl --root="$root" is-enabled "$u" 2>&1 || true)"
} >"$work/deb-install.txt"
if ! grep -q '^package=containerd-guard .* install ok installed$' "$work/deb-install.txt" ||
   grep '^enabled\.' "$work/deb-install.txt" | grep -qv '=enabled$'; then
  cat "$work/dpkg-install.log" "$work/deb-install.txt" >&2
  echo "assemble: the package is not installed, or its postinst did not enable its units" >&2; exit 1
fi
[ -z "$guard" ] || install -m 0755 "$guard" "$root/usr/bin/guard"
# the package scenario installs this one over the first on a running node
install -d "$root/usr/lib/vm-tests"
install -m 0644 "$newer" "$root/usr/lib/vm-tests/containerd-guard-newer.deb"
# the dracut module is installed, not enabled: enable it with the package's example conf
install -m 0644 "$root/usr/share/doc/containerd-guard/examples/containerd-guard.conf" \
  "$root/etc/dracut.conf.d/50-containerd-guard.conf"
install -d "$root/usr/lib/containerd-guard/config.d" "$root/usr/lib/containerd-guard/images" \
  "$root/var/lib/containerd"
install -m 0644 "$g/guard-vm-tests.toml" "$root/usr/lib/containerd-guard/config.d/50-vm-tests.toml"
"$repo/vm-tests/lib/mkpause.sh" "$root/usr/lib/containerd-guard/images/pause.tar" \
  localhost:5000/vmware.io/pause:3.4.1 > "$work/pause.digest"
install -m 0644 "$g/containerd-config.toml" "$root/etc/containerd/config.toml"
# minbase has no netbase: containerd's host-network sandboxes copy these two
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
printf '# vm-tests guest: no network\n' >"$root/etc/resolv.conf"

# --- the test harness in the guest ---
install -d "$root/usr/lib/vm-tests"
install -m 0755 "$probe" "$root/usr/lib/vm-tests/run-pod-sandbox"
install -m 0755 "$workload" "$root/usr/lib/vm-tests/cri-workload"
install -m 0755 "$g/report.sh" "$g/scenario.sh" "$g/chaos.sh" "$root/usr/lib/vm-tests/"
# the readme-recovery scenario runs the README's recovery block, word for word, from this copy
install -m 0644 "$repo/README.md" "$root/usr/lib/vm-tests/README.md"
# the ops scenario's containerd package upgrade: the .deb of the containerd version the
# image has, from the base build's apt cache (BASE's sibling debs/, see vm-tests/run)
# shellcheck disable=SC2016 # dpkg-query's ${fields}
cver=$(chroot "$root" dpkg-query -W -f='${Version}' containerd)
cdeb=$(dirname "$base")/debs/containerd_${cver//:/%3a}_amd64.deb
[ -f "$cdeb" ] || { echo "assemble: no $cdeb (containerd $cver) in the base's apt cache" >&2; exit 1; }
# repacked uncompressed: the same files, control files and maintainer scripts (what the
# step is about: dpkg replaces the binaries and the postinst restarts containerd), but
# no xz to decompress under TCG (17 s of the step's 21 s went in unpacking)
dpkg-deb -R "$cdeb" "$work/cdeb"
dpkg-deb --root-owner-group -Znone --build "$work/cdeb" "$root/usr/lib/vm-tests/$(basename "$cdeb")" >/dev/null
chmod 0644 "$root/usr/lib/vm-tests/$(basename "$cdeb")"
rm -rf "$work/cdeb"
# the k3s scenario's payload: takes a lock in a hostPath mount (imported by scenario.sh)
"$repo/vm-tests/lib/mkimage.sh" "$root/usr/lib/vm-tests/locker.tar" localhost:5000/vm-tests/locker:1 \
  locker "$g/locker.c" > /dev/null
install -m 0755 "$g/vm-tests-generator" "$root/usr/lib/systemd/system-generators/vm-tests-generator"
install -m 0644 "$g/kubelet.service" "$g/vm-tests-report.service" "$g/vm-tests-hotplug.service" \
  "$g/vm-tests-scenario.service" "$root/usr/lib/systemd/system/"
# the guard's units were enabled by the package's postinst (checked above)
systemctl --root="$root" -q enable kubelet.service vm-tests-report.service
# quieter, faster boots: no login prompts, no kvm module probing on a qemu64 CPU
systemctl --root="$root" -q mask getty@tty1.service serial-getty@ttyS0.service \
  systemd-update-utmp.service 2>/dev/null || true
printf 'blacklist kvm\nblacklist kvm_amd\nblacklist kvm_intel\nblacklist powernow_k8\n' \
  > "$root/etc/modprobe.d/vm-tests.conf"

root_only=${ASSEMBLE_ROOT_ONLY:-0}
# a guest on a kernel of its own (the trixie guest's: BASE's kernel is not the suite's):
# its own tiny initrd beside root.img, no dracut initrd (no trixie scenario boots one)
if [ "$root_only" = 1 ] && [ "${ASSEMBLE_TINY_INITRD:-0}" = 1 ]; then
  "$(dirname "$0")/mkinitrd.sh" "$root" "$kver" "$out/initrd.img"
fi
if [ "$root_only" != 1 ]; then
# --- the initrd with the containerd-guard dracut module (scenario dracut) ---
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
chroot "$root" dracut --force --kver "$kver" /boot/initrd-guard.img "$kver" > "$work/dracut.log" 2>&1 ||
  { cat "$work/dracut.log" >&2; echo "assemble: dracut with the containerd-guard module failed" >&2; exit 1; }
# The image build must fail when the module cannot install what it needs: try once
# without the guard binary and once without a unit the initrd unit is ordered against.
mv "$root/usr/bin/guard" "$root/usr/bin/guard.off"
if chroot "$root" dracut --force --kver "$kver" /tmp/neg.img "$kver" >"$work/dracut-neg1.log" 2>&1
then echo "no-guard-binary: dracut succeeded (WRONG)"; else echo "no-guard-binary: dracut failed rc=$? ($(grep -m1 -F "installing '/usr/bin/guard'" "$work/dracut-neg1.log" | cut -c1-120))"; fi >"$work/dracut-negative.txt"
mv "$root/usr/bin/guard.off" "$root/usr/bin/guard"
unit=$root/usr/lib/systemd/system/initrd-switch-root.target
mv "$unit" "$unit.off"
if chroot "$root" dracut --force --kver "$kver" /tmp/neg.img "$kver" >"$work/dracut-neg2.log" 2>&1
then echo "no-initrd-switch-root.target: dracut succeeded (WRONG)"; else echo "no-initrd-switch-root.target: dracut failed rc=$? ($(grep -m1 -F 'is missing from the initrd' "$work/dracut-neg2.log" | cut -c1-120))"; fi >>"$work/dracut-negative.txt"
mv "$unit.off" "$unit"; rm -f "$root/tmp/neg.img"
for m in dev/pts dev proc sys; do umount -l "$root/$m"; done
grep -q containerd-guard <(chroot "$root" lsinitrd /boot/initrd-guard.img 2>/dev/null || true) ||
  { echo "assemble: containerd-guard not in the initrd" >&2; cat "$work/dracut.log" >&2; exit 1; }
cp "$root/boot/initrd-guard.img" "$work/initrd-guard.img"; chmod 0644 "$work/initrd-guard.img"
# --- the initrd of every other scenario: no udev, no systemd, just the root filesystem ---
"$(dirname "$0")/mkinitrd.sh" "$root" "$kver" "$work/initrd.img"
fi

# --- a leaner boot (after the initrds: the dracut initrd is built from the image as is) ---
# Under TCG every unit costs CPU the boot's own work waits for (systemd-analyze blame in
# healthy: 2 s in systemd-random-seed, which waits for the kernel's entropy and holds
# sysinit.target; 1.4 s each for modprobe@drm/dm_mod/loop; 1.8 s logind; 1.1 s
# e2scrub_reap). None of them is what a scenario judges: no logins, no fuse, dm, loop,
# configfs or debugfs, no periodic maintenance (its timers would fire in the middle of a
# scenario), no utmp. The generators for what the guest does not have (GPT auto-mounts,
# hibernation, crypt/integrity/verity devices, SysV scripts, rc.local, offline updates,
# gettys: theirs are masked) go too; fstab's (dracut-var, cloud-init), debug's
# (systemd.mask=) and run's stay.
systemctl --root="$root" -q mask systemd-random-seed.service systemd-logind.service systemd-user-sessions.service \
  systemd-update-utmp-runlevel.service systemd-pstore.service e2scrub_reap.service \
  modprobe@drm.service modprobe@dm_mod.service modprobe@loop.service modprobe@efi_pstore.service \
  modprobe@fuse.service modprobe@configfs.service \
  sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount sys-fs-fuse-connections.mount \
  proc-sys-fs-binfmt_misc.automount \
  e2scrub_all.timer apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer systemd-tmpfiles-clean.timer
install -d "$root/etc/systemd/system-generators"
for gen in systemd-gpt-auto-generator systemd-hibernate-resume-generator systemd-cryptsetup-generator \
           systemd-integritysetup-generator systemd-veritysetup-generator systemd-sysv-generator \
           systemd-rc-local-generator systemd-system-update-generator systemd-getty-generator; do
  ln -sf /dev/null "$root/etc/systemd/system-generators/$gen"
done
# the journal in /run only: no flush to /var/log/journal at boot (0.7 s under TCG), no
# writes to the root disk; each scenario reads its own boot's journal (journalctl -b)
install -d "$root/etc/systemd/journald.conf.d"
printf '# vm-tests: the journal in memory only\n[Journal]\nStorage=volatile\nRuntimeMaxUse=64M\n' \
  >"$root/etc/systemd/journald.conf.d/50-vm-tests.conf"

mkfs.ext4 -q -F -L vmroot -d "$root" "$work/root.img" 3G
if [ "$root_only" = 1 ]; then mv "$work/root.img" "$out/"; exit 0; fi
mv "$work/root.img" "$work/initrd-guard.img" "$work/initrd.img" "$work/pause.digest" "$work/dracut.log" "$work/dracut-negative.txt" \
  "$work/deb-install.txt" "$work/dpkg-install.log" "$out/"
