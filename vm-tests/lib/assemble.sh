#!/bin/bash
# Assemble the suite's guest from the cached base: unpack the rootfs, install the guard,
# the shipped systemd units and drop-ins, the dracut module, config, the sandbox image
# archive and the guest side of the tests; build the dracut initrd with the guard module;
# write an ext4 image. Usage: assemble.sh BASE REPO GUARD CRI_PROBE OUT CRI_WORKLOAD
set -euo pipefail
base=$1 repo=$2 guard=$3 probe=$4 out=$5 workload=$6
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
tar -xf "$base/rootfs.tar" -C "$root"
kver=$(cat "$base/kver")

# --- what an image builder installs (see vm-tests/README-section.md) ---
install -m 0755 "$guard" "$root/usr/bin/guard"
install -d "$root/usr/lib/systemd/system/containerd.service.d" \
           "$root/usr/lib/systemd/system/kubelet.service.d" \
           "$root/usr/lib/containerd-guard/config.d" "$root/usr/lib/containerd-guard/images" \
           "$root/usr/share/doc/containerd-guard" "$root/var/lib/containerd"
install -m 0644 "$repo"/systemd/*.service "$repo"/systemd/*.timer "$root/usr/lib/systemd/system/"
install -m 0644 "$repo"/systemd/containerd.service.d/*.conf "$root/usr/lib/systemd/system/containerd.service.d/"
install -m 0644 "$repo"/systemd/kubelet.service.d/*.conf "$root/usr/lib/systemd/system/kubelet.service.d/"
cp -r "$repo/dracut/modules.d/50containerd-guard" "$root/usr/lib/dracut/modules.d/"
install -m 0644 "$repo/dracut/containerd-guard.conf" "$root/etc/dracut.conf.d/50-containerd-guard.conf"
install -m 0644 "$repo/README.md" "$root/usr/share/doc/containerd-guard/README.md"
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
install -m 0755 "$g/report.sh" "$g/scenario.sh" "$root/usr/lib/vm-tests/"
# the k3s scenario's payload: takes a lock in a hostPath mount (imported by scenario.sh)
"$repo/vm-tests/lib/mkimage.sh" "$root/usr/lib/vm-tests/locker.tar" localhost:5000/vm-tests/locker:1 \
  locker "$g/locker.c" > /dev/null
install -m 0755 "$g/vm-tests-generator" "$root/usr/lib/systemd/system-generators/vm-tests-generator"
install -m 0644 "$g/kubelet.service" "$g/vm-tests-report.service" "$g/vm-tests-hotplug.service" \
  "$g/vm-tests-scenario.service" "$root/usr/lib/systemd/system/"
systemctl --root="$root" -q enable containerd-guard-volume.service containerd-guard-runtime.service \
  containerd-guard-hygiene.timer \
  kubelet.service vm-tests-report.service
# quieter, faster boots: no login prompts, no kvm module probing on a qemu64 CPU
systemctl --root="$root" -q mask getty@tty1.service serial-getty@ttyS0.service \
  systemd-update-utmp.service 2>/dev/null || true
printf 'blacklist kvm\nblacklist kvm_amd\nblacklist kvm_intel\nblacklist powernow_k8\n' \
  > "$root/etc/modprobe.d/vm-tests.conf"

# --- the initrd with the containerd-guard dracut module (scenario dracut) ---
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m"; done
chroot "$root" dracut --force --kver "$kver" /boot/initrd-guard.img "$kver" > "$work/dracut.log" 2>&1 ||
  { cat "$work/dracut.log" >&2; echo "assemble: dracut with the containerd-guard module failed" >&2; exit 1; }
# The image build must fail when the module cannot install what it needs: try once
# without the guard binary and once without a unit the initrd unit is ordered against.
mv "$root/usr/bin/guard" "$root/usr/bin/guard.off"
if chroot "$root" dracut --force --kver "$kver" /tmp/neg.img "$kver" >"$work/dracut-neg1.log" 2>&1
then echo "no-guard-binary: dracut succeeded (WRONG)"; else echo "no-guard-binary: dracut failed rc=$? ($(grep -m1 -iE 'fatal|error|fail' "$work/dracut-neg1.log" | cut -c1-120))"; fi >"$work/dracut-negative.txt"
mv "$root/usr/bin/guard.off" "$root/usr/bin/guard"
unit=$root/usr/lib/systemd/system/initrd-switch-root.target
mv "$unit" "$unit.off"
if chroot "$root" dracut --force --kver "$kver" /tmp/neg.img "$kver" >"$work/dracut-neg2.log" 2>&1
then echo "no-initrd-switch-root.target: dracut succeeded (WRONG)"; else echo "no-initrd-switch-root.target: dracut failed rc=$? ($(grep -m1 -iE 'containerd-guard' "$work/dracut-neg2.log" | cut -c1-120))"; fi >>"$work/dracut-negative.txt"
mv "$unit.off" "$unit"; rm -f "$root/tmp/neg.img"
for m in dev/pts dev proc sys; do umount -l "$root/$m"; done
grep -q containerd-guard <(chroot "$root" lsinitrd /boot/initrd-guard.img 2>/dev/null || true) ||
  { echo "assemble: containerd-guard not in the initrd" >&2; cat "$work/dracut.log" >&2; exit 1; }
cp "$root/boot/initrd-guard.img" "$work/initrd-guard.img"; chmod 0644 "$work/initrd-guard.img"

mkfs.ext4 -q -F -L vmroot -d "$root" "$work/root.img" 3G
mv "$work/root.img" "$work/initrd-guard.img" "$work/pause.digest" "$work/dracut.log" "$work/dracut-negative.txt" "$out/"
