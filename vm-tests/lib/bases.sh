#!/bin/bash
# vm-tests: the cached guest bases, each a tarball, kernel and initrd (build-base.sh) plus
# its cloud-init variant (cloudify.sh): Debian 12's for every scenario, Debian 13's for
# the trixie-* scenarios. They depend on no package, so they can be built at any time.
#
#   lib/bases.sh          build every base the whole suite uses (nothing when cached)
#
# .ci/run starts it beside scripts/test: after a change to a base's inputs (or on a first
# run) that is about 5 minutes of mmdebstrap and apt on 2 cores, which the tests, mostly
# waiting on containerd, leave room for. prepare.sh sources this file (base_dirs,
# build_bases) and builds what its scenarios need beside the package builds.
# Environment: VM_CACHE (see vm-tests/run).

# base_key SUITE: the key of a guest base, a hash of its build script and package list
# (and the suite's name: the bookworm key is the hash of the files alone)
base_key() {
  { cat "$lib/build-base.sh" "$lib/extract-vmlinux.sh" "$here/guest/dracut-vmtests.conf"
    [ "$1" = bookworm ] || echo "$1"; } | sha256sum | cut -c1-16
}
# build_base DIR SUITE WHAT: the base in DIR (its apt cache, debs/, beside it), once
build_base() {
  local dir=$1 suite=$2 what=$3 t0
  if [ ! -s "$dir/rootfs.tar" ]; then
    log "building the $what guest base ($dir); about 2 min, once"
    t0=$(date +%s)
    mkdir -p "$(dirname "$dir")/debs"
    "$lib/build-base.sh" "$dir" "$(dirname "$dir")/debs" "$suite" >"$dir.log" 2>&1 ||
      { tail -n 40 "$dir.log" >&2; echo "vm-tests: $what base image build failed" >&2; exit 1; }
    log "$what base built in $(( $(date +%s) - t0 ))s ($(du -sh "$dir" | cut -f1))"
  else
    log "reusing cached $what base $dir"
  fi
}
# cloud_base BASE DEBS WHAT: BASE plus cloud-init (cloudify.sh), cached beside it and
# keyed by cloudify.sh (its apt install took 25-40 s of every run with a new package)
cloud_tar() { echo "$1/cloud-$(sha256sum "$lib/cloudify.sh" | cut -c1-16).tar"; }
cloud_base() {
  local base=$1 debs=$2 what=$3 tar t0
  tar=$(cloud_tar "$base")
  [ ! -s "$tar" ] || return 0
  log "adding cloud-init to the $what guest base (apt in a chroot, once per base; packages cached in $debs)"
  t0=$(date +%s)
  rm -f "$base"/cloud-*.tar
  "$lib/cloudify.sh" "$base/rootfs.tar" "$tar" "$debs" >"$base/cloudify.log" 2>&1 ||
    { tail -n 30 "$base/cloudify.log" >&2; echo "vm-tests: installing cloud-init in the $what base failed" >&2; exit 1; }
  log "$what cloud-init base built in $(( $(date +%s) - t0 ))s"
}
# base_dirs: sets base (Debian 12's) and tbase (Debian 13's, when $scenarios has a
# trixie-* scenario, else empty), in $cache. The trixie guest: systemd 257, cloud-init 25,
# containerd 1.7, from the same mirror, its base and apt cache in a folder of their own.
base_dirs() {
  base=$cache/base-$(base_key bookworm)
  tbase=
  if [[ $scenarios == *" trixie-"* ]]; then
    tbase=$cache/trixie/base-$(base_key trixie)
  fi
}
# build_bases: both bases (and their cloud-init variants, when a scenario boots them) side
# by side; fails when either fails.
build_bases() {
  { build_base "$base" bookworm "Debian 12"
    if [[ $scenarios == *" cloud-init "* ]]; then cloud_base "$base" "$cache/debs-cloud" "Debian 12"; fi; } &
  local b=$!
  if [ -n "$tbase" ]; then
    { build_base "$tbase" trixie "Debian 13 (trixie)"
      cloud_base "$tbase" "$cache/trixie/debs-cloud" "Debian 13 (trixie)"; } &
    wait $! || exit 1
  fi
  wait $b
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  here=$(cd "$(dirname "$0")/.." && pwd)
  repo=$(cd "$here/.." && pwd)
  lib=$here/lib
  log() { printf '%s vm-tests: %s\n' "$(date -u +%T)" "$*" >&2; }
  cache=${VM_CACHE:-$repo/target/vm-cache}
  mkdir -p "$cache/debs"
  cache=$(cd "$cache" && pwd)
  scenarios=" cloud-init trixie-all "
  base_dirs
  build_bases
fi
