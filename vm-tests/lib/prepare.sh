#!/bin/bash
# vm-tests: everything a run needs before its first boot (the host side's Rust, crate
# vm-tests/host, runs this once): the host's tools, the package built twice (scripts/deb),
# the cached Debian 12 guest base (and Debian 13's for the trixie scenarios), the suite's
# images (keyed by their inputs), the images of the scenarios that have their own, the
# accelerator.
#
#   lib/prepare.sh RUNS [SCENARIO...]
#
# Logs go to stderr; the result is printed on stdout, one `key=value` a line: base (the
# kernel and initrd's directory), suite, lintguard (the guard binary `guard lint` runs on
# the host: the package's, or VM_GUARD), cloudimg, varroot, varimg, accel (qemu's
# accelerator arguments, blank-separated).
# Environment: VM_CACHE, VM_ACCEL, VM_GUARD, DEB_CHROOT_TEST (see vm-tests/run).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 RUNS [SCENARIO...]" >&2; exit 2; }
runs=$1; shift
scenarios=" $* "
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/.." && pwd)
lib=$here/lib
log() { printf '%s vm-tests: %s\n' "$(date -u +%T)" "$*" >&2; }
# what the steps print goes where the log goes (stderr); stdout is the result's
exec 3>&1 1>&2

# ---------------------------------------------------------------- host tools
"$lib/host-deps.sh"

cache=${VM_CACHE:-$repo/target/vm-cache}
mkdir -p "$cache/debs"
cache=$(cd "$cache" && pwd)

# ---------------------------------------------------------------- base images (cached)
# Both bases (and their cloud-init variants) are built side by side and beside the
# package builds below: on a cache miss (a new build script, a first run) that is about
# 3 minutes of mmdebstrap and apt that would otherwise come before the first boot.
# shellcheck source=vm-tests/lib/bases.sh
. "$lib/bases.sh"
base_dirs
key=${base##*/base-}
build_bases & bases_pid=$!

# ---------------------------------------------------------------- binaries
log "building the package (scripts/deb, lintian skipped) with the kubelet stand-in's CRI clients, and a newer version of it"
# The guest installs the guard as an image builder does: dpkg -i of the package. A second
# build of the same package with a higher version is the package scenario's upgrade.
t0=$(date +%s)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)
newer_version=$version-1+vmtests1
mkdeb() { # LOG [DEB_VERSION]: the path of the .deb scripts/deb built
  local out
  out=$(DEB_LINTIAN=0 DEB_VERSION=${2:-} DEB_CHROOT_TEST=${DEB_CHROOT_TEST:-0} DEB_TOOLS="run-pod-sandbox cri-workload" \
    "$repo/scripts/deb" 2>&1 | tee "$1" | tail -n 1) ||
    { tail -n 30 "$1" >&2; echo "vm-tests: scripts/deb failed (log: $1)" >&2; exit 1; }
  [ -f "$out" ] || { tail -n 30 "$1" >&2; echo "vm-tests: scripts/deb printed no package (log: $1)" >&2; exit 1; }
  # kept aside: cargo deb removes the package's other versions from its output folder
  mkdir -p "$cache/guard-debs"; cp "$out" "$cache/guard-debs/"
  echo "$cache/guard-debs/$(basename "$out")"
}
# the first build also installs, upgrades, removes and purges the package in a chroot
# (scripts/check-deb-chroot): the maintainer scripts' rules, where no boot is needed
deb=$(DEB_CHROOT_TEST=1 mkdeb "$cache/deb.log")
newer=$(mkdeb "$cache/deb-newer.log" "$newer_version")
dpkg --compare-versions "$(dpkg-deb -f "$newer" Version)" gt "$(dpkg-deb -f "$deb" Version)" ||
  { echo "vm-tests: $newer is not newer than $deb" >&2; exit 1; }
log "packages: $(basename "$deb"), $(basename "$newer") ($(( $(date +%s) - t0 ))s)"
guard=
if [ -n "${VM_GUARD:-}" ]; then
  guard=$(readlink -f "$VM_GUARD"); log "using VM_GUARD=$guard over the package's binary"
fi
# The kubelet stand-in's CRI client is testkit's run-pod-sandbox, so the VM tests, the
# integration tests and the demo all ask containerd the same question. Built by scripts/deb
# with the guard (DEB_TOOLS above: one release build of the crate, for the package's
# target; a second one for the host's took 44 s of CI)
probe=$repo/target/x86_64-unknown-linux-gnu/release/run-pod-sandbox
# the running-node scenarios' workloads (k3s, leaked-task): pods with containers, via CRI
workload=$repo/target/x86_64-unknown-linux-gnu/release/cri-workload
for b in "$probe" "$workload"; do
  [ -x "$b" ] || { echo "vm-tests: scripts/deb built no $b (log: $cache/deb.log)" >&2; exit 1; }
done
wait "$bases_pid" || { echo "vm-tests: building the guest bases failed (the lines above)" >&2; exit 1; }
# old bases and suites go a day after they were last used
find "$cache" -maxdepth 1 \( -name 'base-*' -o -name 'suite-*' \) ! -name "base-$key*" -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
[ -z "$tbase" ] || find "$cache/trixie" -maxdepth 1 -name 'base-*' ! -name "$(basename "$tbase")*" -mmin +1440 -exec rm -rf {} + 2>/dev/null || true

# ---------------------------------------------------------------- suite image (cached by inputs)
# the packages by their contents and control fields (a rebuilt .deb differs in its dates)
debkey() { local d; d=$(mktemp -d); dpkg-deb -x "$1" "$d"; dpkg-deb -e "$1" "$d/DEBIAN";
  ( cd "$d" && find . -type f -print0 | sort -z | xargs -0 sha256sum ); rm -rf "$d"; }
skey=$( { echo "$key"; debkey "$deb"; debkey "$newer"; sha256sum "$probe" "$workload" ${guard:+"$guard"};
          find "$repo/systemd" "$repo/dracut" "$here/guest" "$lib/assemble.sh" "$lib/mkinitrd.sh" "$lib/cloudify.sh" "$lib/varify.sh" "$lib/mkpause.sh" "$lib/mkimage.sh" "$repo/README.md" \
            -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
suite=$cache/suite-$skey
if [ ! -s "$suite/root.img" ]; then
  log "assembling the guest (dpkg -i of the package, dracut initrd)"
  t0=$(date +%s)
  rm -rf "$suite"
  "$lib/assemble.sh" "$base" "$repo" "$deb" "$probe" "$suite" "$workload" "$newer" "$guard"
  log "assembled in $(( $(date +%s) - t0 ))s"
fi
find "$cache" -maxdepth 1 -name 'suite-*' ! -name "suite-$skey" -exec rm -rf {} + 2>/dev/null || true

# the cloud-init scenario's image: the suite's guest assembled the same way from the base
# plus cloud-init (cloudify.sh; that base is cached with the base, keyed by cloudify.sh:
# its apt install took 25-40 s of every run with a new package); the image is cached with
# the suite
cloudimg=$suite/root-cloud.img
if [[ $scenarios == *" cloud-init "* ]] && [ ! -s "$cloudimg" ]; then
  cloudbase=$(cloud_tar "$base")
  log "assembling the cloud-init guest (from the cloud-init base)"
  t0=$(date +%s)
  rm -rf "$suite/cloud"
  ASSEMBLE_ROOTFS=$cloudbase ASSEMBLE_ROOT_ONLY=1 "$lib/assemble.sh" "$base" "$repo" "$deb" "$probe" "$suite/cloud" "$workload" "$newer" "$guard" \
    >"$suite/cloud.log" 2>&1 ||
    { tail -n 30 "$suite/cloud.log" >&2; echo "vm-tests: assembling the cloud-init guest failed" >&2; exit 1; }
  mv "$suite/cloud/root.img" "$cloudimg"; rm -rf "$suite/cloud"
  log "cloud-init guest assembled in $(( $(date +%s) - t0 ))s"
fi

# the trixie scenarios' guest (trixie-healthy, trixie-stale, trixie-cloud-init): one image,
# assembled as the cloud-init guest is, from the trixie base plus cloud-init (cloudify.sh,
# cached with that base), with its own kernel and tiny initrd beside it; cached with the
# suite. healthy and stale boot it with cloud-init=disabled on the kernel command line.
trixie=$suite/trixie
if [ -n "$tbase" ] && { [ ! -s "$trixie/root.img" ] || [ ! -s "$trixie/initrd.img" ]; }; then
  tcloud=$(cloud_tar "$tbase")
  log "assembling the trixie guest (from the trixie cloud-init base)"
  t0=$(date +%s)
  rm -rf "$trixie"
  ASSEMBLE_ROOTFS=$tcloud ASSEMBLE_ROOT_ONLY=1 ASSEMBLE_TINY_INITRD=1 \
    "$lib/assemble.sh" "$tbase" "$repo" "$deb" "$probe" "$trixie" "$workload" "$newer" "$guard" \
    >"$suite/trixie.log" 2>&1 ||
    { tail -n 30 "$suite/trixie.log" >&2; echo "vm-tests: assembling the trixie guest failed" >&2; exit 1; }
  ln -f "$tbase/vmlinux" "$trixie/vmlinux" 2>/dev/null || cp "$tbase/vmlinux" "$trixie/vmlinux"
  log "trixie guest assembled in $(( $(date +%s) - t0 ))s ($(du -sh --apparent-size "$trixie/root.img" | cut -f1) image, $(du -sh "$trixie/root.img" | cut -f1) on disk)"
fi

# the dracut-var scenario's images: the suite's with /var moved to a filesystem of its own
# (labelled vmvar, in fstab, not mounted in the initrd); cached with the suite
varroot=$suite/root-var.img varimg=$suite/var.img
if [[ $scenarios == *" dracut-var "* ]] && { [ ! -s "$varroot" ] || [ ! -s "$varimg" ]; }; then
  log "moving the guest's /var to a filesystem of its own (a copy of the image)"
  t0=$(date +%s)
  "$lib/varify.sh" "$suite/root.img" "$varroot" "$varimg" >"$suite/varify.log" 2>&1 ||
    { tail -n 30 "$suite/varify.log" >&2; echo "vm-tests: building the separate-/var guest failed" >&2; exit 1; }
  log "separate-/var images built in $(( $(date +%s) - t0 ))s"
fi

# `guard lint` runs on the host (the lint stage, and each scenario disk linted before it
# boots): the binary the guest has, the package's (or VM_GUARD's, installed over it)
lintguard=$guard
if [ -z "$lintguard" ]; then
  mkdir -p "$runs/guard-deb"; dpkg-deb -x "$deb" "$runs/guard-deb"; lintguard=$runs/guard-deb/usr/bin/guard
fi

# ---------------------------------------------------------------- qemu
probe_kvm() {
  [ -c /dev/kvm ] || return 1
  local d=$runs/kvm-probe; mkdir -p "$d"
  timeout 25 qemu-system-x86_64 -accel kvm -cpu host -smp 1 -m 512 -nodefaults -display none \
    -kernel "$base/vmlinux" -append "console=ttyS0 panic=-1 rdinit=/bin/true" -initrd "$base/initrd.img" \
    -serial "file:$d/console" -no-reboot >"$d/qemu.log" 2>&1 || true
  grep -aq 'Freeing unused kernel' "$d/console"
}
kvm="-accel kvm -cpu host" tcg="-accel tcg,thread=multi,tb-size=256 -cpu qemu64"
case ${VM_ACCEL:-probe} in
  kvm) accel=$kvm ;;
  tcg) accel=$tcg ;;
  *) if probe_kvm; then accel=$kvm; log "KVM boots a kernel here: using it"
     else accel=$tcg
          log "KVM cannot boot a guest here ($(head -c 120 "$runs/kvm-probe/qemu.log" 2>/dev/null | tr '\n' ' ')): TCG"; fi ;;
esac

printf '%s\n' "base=$base" "suite=$suite" "lintguard=$lintguard" "cloudimg=$cloudimg" \
  "varroot=$varroot" "varimg=$varimg" "trixie=$trixie" "accel=$accel" >&3
