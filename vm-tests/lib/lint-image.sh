#!/bin/bash
# `guard lint` of the vm-tests image as a scenario would boot it, without booting it.
# Usage: lint-image.sh GUARD ROOT_IMG OUTDIR SCENARIO [VMTEST WORDS...]
#   GUARD     the guard binary to run on the host (the package's: vm-tests/run)
#   ROOT_IMG  the guest's root filesystem image (target/vm-cache/suite-*/root.img); only
#             ever read: a read-only loop device, mounted read-only
#   OUTDIR    receives lint.json (guard lint --json), lint.txt (the table, a second run),
#             lint.rc (the --json run's exit code), lint.ms (its wall time), lint.err
#             (both runs' stderr), and user-data when the plant wrote one
#   SCENARIO, WORDS  the kernel command line's vmtest.* words the scenario boots with: the
#             image's own generator (/usr/lib/systemd/system-generators/vm-tests-generator)
#             renders them into a copy of the image, as it would at boot
# Environment:
#   LINT_PLANT  a hazard planted in the copy after the generator ran (plant_NAME below)
#   LINT_ARGS   more arguments for guard lint (--warn-is-error)
# The copy is an overlayfs (lower: the read-only mount; upper and work: a temporary
# directory), thrown away at the end. Exits 0 when the lint ran (its own exit code is in
# lint.rc), non-zero when the copy could not be made or the lint not run. Needs root.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 GUARD ROOT_IMG OUTDIR SCENARIO [VMTEST WORDS...]" >&2; exit 2; }
guard=$(readlink -f "$1") img=$2 out=$3 scenario=$4; shift 4
[ -x "$guard" ] || { echo "lint-image: no guard binary at $guard" >&2; exit 2; }
[ -f "$img" ] || { echo "lint-image: no image at $img" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out/lint.json" "$out/lint.txt" "$out/lint.rc" "$out/lint.ms" "$out/lint.err" "$out/user-data"

tmp=$(mktemp -d /tmp/vm-tests-lint.XXXX)
lower=$tmp/lower copy=$tmp/copy loop=''
cleanup() {
  local m busy=0
  for m in "$copy" "$lower"; do
    mountpoint -q "$m" 2>/dev/null || continue
    umount "$m" 2>/dev/null || umount -l "$m" || busy=1
  done
  [ -z "$loop" ] || losetup -d "$loop" 2>/dev/null || true
  # never remove through a mount that is still there
  if [ $busy = 0 ]; then rm -rf "$tmp"; else echo "lint-image: $tmp left mounted" >&2; fi
}
trap cleanup EXIT
mkdir "$lower" "$tmp/upper" "$tmp/work" "$copy"
loop=$(losetup --read-only --find --show "$img")
# noload: no journal replay (the loop device is read-only besides)
mount -t ext4 -o ro,noload "$loop" "$lower"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$tmp/upper,workdir=$tmp/work" "$copy"

# ---------------------------------------------------------------- the scenario's /run
# what systemd would run at boot, writing into the copy (VMTEST_ROOT) instead of /
gen=$copy/usr/lib/systemd/system-generators/vm-tests-generator
[ -x "$gen" ] || { echo "lint-image: the image has no $gen" >&2; exit 1; }
# an older one would read the host's /proc/cmdline and write into the host's /run
grep -q 'VMTEST_ROOT' "$gen" ||
  { echo "lint-image: the image's generator predates VMTEST_ROOT: rebuild the suite image" >&2; exit 1; }
mkdir -p "$copy/run/systemd/generator"
VMTEST_ROOT=$copy VMTEST_CMDLINE="vmtest.scenario=$scenario${*:+ $*}" "$gen" "$copy/run/systemd/generator"

# ---------------------------------------------------------------- the hazards
# One hazard each, written into the copy ($copy) as an image builder or an operator would
# have left it; the user data a node would get at provision time goes to $out/user-data.
# The lint stage (vm-tests/host/src/checks/lint.rs, PLANTS) names the finding each must raise.
c=$copy
dropin() { # UNIT NAME: a drop-in of UNIT in /etc, its text on stdin
  mkdir -p "$c/etc/systemd/system/$1.d"; cat >"$c/etc/systemd/system/$1.d/$2"
}
fragment() { # NAME: a guard config fragment in /etc, its text on stdin
  mkdir -p "$c/etc/containerd-guard/config.d"; cat >"$c/etc/containerd-guard/config.d/$1"
}
fstab() { echo "$1" >>"$c/etc/fstab"; }
plant_guard-masked() {     # the operator's opt-out: containerd's guard drop-in masked
  mkdir -p "$c/etc/systemd/system/containerd.service.d"
  ln -s /dev/null "$c/etc/systemd/system/containerd.service.d/10-containerd-guard.conf"
}
plant_prestart-reset() {   # a later drop-in resets ExecStartPre=: the guard's goes with it
  printf '[Service]\nExecStartPre=\n' | dropin containerd.service 50-prestart-reset.conf
}
plant_after-reset() {      # a drop-in resets After=: the mount's ordering goes with it
  printf '[Unit]\nAfter=\n' | dropin containerd.service 50-after-reset.conf
}
plant_fstab-after() {      # (with vmtest.mount=no) fstab mounts the volume after containerd
  fstab 'LABEL=ctrd-eph /var/lib/containerd ext4 nofail,x-systemd.after=containerd.service 0 2'
}
plant_no-mount() {         # nothing: the hazard is vmtest.mount=no (no mount unit at all)
  :
}
plant_userdata-nomounts() { # (with vmtest.mount=no) user data that mounts nothing
  printf '#cloud-config\nhostname: vmtest\nruncmd:\n  - [ true ]\n' >"$out/user-data"
}
plant_nofail-masked() {    # (with vmtest.mount=no) fstab's nofail, and the guard masked by
  # an empty file of the same name, earlier on the search path than the package's
  fstab 'LABEL=ctrd-eph /var/lib/containerd ext4 defaults,nofail 0 2'
  : | dropin containerd.service 10-containerd-guard.conf
}
plant_cloud-cfg() {        # the image's cloud-init config mounts the volume, and containerd
  # is no longer ordered after cloud-init (an After= reset keeping the mount's ordering)
  mkdir -p "$c/etc/cloud/cloud.cfg.d"
  cat >"$c/etc/cloud/cloud.cfg.d/90-ephemeral.cfg" <<'CFG'
# the node's ephemeral disk, formatted and mounted by cloud-init
fs_setup:
  - label: ctrd-eph
    filesystem: ext4
    device: /dev/vdb
    partition: none
mounts:
  - [ LABEL=ctrd-eph, /var/lib/containerd, ext4, "defaults,nofail", "0", "2" ]
CFG
  printf '[Unit]\nAfter=\nAfter=var-lib-containerd.mount local-fs.target\n' | dropin containerd.service 50-after-reset.conf
}
plant_cloud-userdata() {   # (with vmtest.mount=no) the same in user data: Cluster API, TKGS
  cat >"$out/user-data" <<'UD'
#cloud-config
disk_setup:
  /dev/vdb:
    table_type: gpt
    layout: true
    overwrite: false
fs_setup:
  - label: ctrd-eph
    filesystem: ext4
    device: /dev/vdb
    partition: auto
mounts:
  - [ LABEL=ctrd-eph, /var/lib/containerd, ext4, "defaults,nofail", "0", "2" ]
UD
  printf '[Unit]\nAfter=\nAfter=var-lib-containerd.mount local-fs.target\n' | dropin containerd.service 50-after-reset.conf
}
plant_cloud-installed() {  # cloud-init in the image (its unit), containerd not after it
  cat >"$c/etc/systemd/system/cloud-init.service" <<'UNIT'
[Unit]
Description=Initial cloud-init job (metadata service crawler)
[Service]
Type=oneshot
ExecStart=/usr/bin/cloud-init init
RemainAfterExit=yes
UNIT
  printf '[Unit]\nAfter=\nAfter=var-lib-containerd.mount local-fs.target\n' | dropin containerd.service 50-after-reset.conf
}
plant_kubelet-masked() {   # kubelet's guard drop-in masked
  mkdir -p "$c/etc/systemd/system/kubelet.service.d"
  ln -s /dev/null "$c/etc/systemd/system/kubelet.service.d/10-containerd-guard.conf"
}
plant_kubeadm-join() {     # a unit running kubeadm join, not ordered after containerd
  cat >"$c/etc/systemd/system/kubeadm-join.service" <<'UNIT'
[Unit]
Description=Join the node to the cluster
After=network-online.target
[Service]
Type=oneshot
ExecStart=/usr/bin/kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef --discovery-token-unsafe-skip-ca-verification
[Install]
WantedBy=multi-user.target
UNIT
  ln -s /etc/systemd/system/kubeadm-join.service "$c/etc/systemd/system/multi-user.target.wants/kubeadm-join.service"
}
plant_kill-mode() {        # containerd's stop kills the whole cgroup, the shims with it
  printf '[Service]\nKillMode=control-group\n' | dropin containerd.service 50-kill-mode.conf
}
plant_pkill-shim() {       # a k3s-style pre-start that kills the shims by name
  printf '[Service]\nExecStartPre=/usr/bin/pkill -9 containerd-shim\n' | dropin containerd.service 50-pkill-shim.conf
}
plant_archive-removed() {  # the baked sandbox archive is gone
  rm "$c/usr/lib/containerd-guard/images/pause.tar"
}
plant_sandbox-other() {    # containerd's sandbox image is one the archive does not hold
  sed -i 's|^\( *sandbox_image = \).*|\1"registry.k8s.io/pause:3.9"|' "$c/etc/containerd/config.toml"
  grep -q 'registry.k8s.io/pause:3.9' "$c/etc/containerd/config.toml"
}
plant_archive-truncated() { # the archive cut to its first half
  local a=$c/usr/lib/containerd-guard/images/pause.tar
  truncate -s "$(( $(stat -c %s "$a") / 2 ))" "$a"
}
plant_fragment-not-toml() { # a guard config fragment that does not parse
  printf '[volume\ndevice = LABEL=ctrd-eph\n' | fragment 90-broken.toml
}
plant_device-nosuch() {    # the configured device names a label nothing in the image makes
  printf '[volume]\ndevice = "LABEL=nosuch"\n' | fragment 90-nosuch.toml
}
plant_fragment-foreign() { # a fragment owned by another user than the image's root
  printf '[hold]\ntimeout = "60s"\n' | fragment 90-foreign.toml
  chown 4242:4242 "$c/etc/containerd-guard/config.d/90-foreign.toml"
}
plant_fragment-group-writable() { # a fragment its group may write
  printf '[hold]\ntimeout = "60s"\n' | fragment 90-writable.toml
  chmod 0664 "$c/etc/containerd-guard/config.d/90-writable.toml"
}
if [ -n "${LINT_PLANT:-}" ]; then
  declare -F "plant_$LINT_PLANT" >/dev/null || { echo "lint-image: no plant '$LINT_PLANT'" >&2; exit 2; }
  "plant_$LINT_PLANT"
fi

# ---------------------------------------------------------------- the lint
args=(lint --root "$copy")
[ ! -s "$out/user-data" ] || args+=(--user-data "$out/user-data")
read -r -a more <<<"${LINT_ARGS:-}"
args+=("${more[@]}")
rc=0 t0=$(date +%s%N)
"$guard" "${args[@]}" --json >"$out/lint.json" 2>"$out/lint.err" || rc=$?
t1=$(date +%s%N)
echo "$rc" >"$out/lint.rc"
echo $(( (t1 - t0) / 1000000 )) >"$out/lint.ms"
"$guard" "${args[@]}" >"$out/lint.txt" 2>>"$out/lint.err" || true
