# Shared by scripts/test, scripts/demo and scripts/bench-volume. Source it; do not run it.
# shellcheck shell=bash

# Debian 12 packages the tests need: THE list (the demo and bench install subsets of it).
#   containerd runc        - the real runtime the tests start (Debian's 1.6 package)
#   e2fsprogs xfsprogs     - mkfs.ext4 / mkfs.xfs for loop-device volumes
#   btrfs-progs            - mkfs.btrfs for the superblock unit tests
#   fdisk                  - sfdisk for GPT partitions (PARTUUID=/PARTLABEL=)
#   util-linux             - losetup, mount, partx, fallocate
#   docker-registry        - a local registry for the phase-2 image tests
#   protobuf-compiler      - protoc for the phase-2 gRPC code generation
#   time                   - /usr/bin/time for peak RSS in scripts/bench-volume
#   gcc libc6-dev          - a static pause binary for the locally built sandbox image
#   prometheus-node-exporter prometheus - the metrics as Prometheus scrapes them, promtool
#   ShellCheck             - the package `shellcheck`: lints every shell script (scripts/test)
#   rpm rpm2cpio cpio rpmlint - scripts/rpm: rpmbuild, `rpm --root`, unpacking, rpmlint
#   dpkg-dev binutils      - scripts/deb and scripts/rpm: dpkg-shlibdeps, readelf (check-glibc)
# shellcheck disable=SC2034 # used by scripts/test, which sources this file
TEST_PACKAGES=(containerd runc e2fsprogs xfsprogs btrfs-progs fdisk util-linux
    docker-registry protobuf-compiler time gcc libc6-dev shellcheck
    prometheus-node-exporter prometheus strace
    rpm rpm2cpio cpio rpmlint dpkg-dev binutils)

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

require_root() {
    [ "$(id -u)" -eq 0 ] || die "run as root: sudo $0 (tests create loop devices and mounts)"
}

# Installs the packages that are missing; runs `apt-get update` at most once, and not at
# all when everything is already installed (so a second run needs no network).
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get (Debian 12 expected)"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    # Packages are installed, never started: containerd, node_exporter and prometheus
    # would otherwise start their services (init scripts without systemd) and listen on
    # every interface. The tests start their own, on temp paths and 127.0.0.1.
    local policy=/usr/sbin/policy-rc.d ours=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# scripts/lib.sh: no service starts during the test install\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        ours=yes
    fi
    local rc=0
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
    [ -z "$ours" ] || rm -f "$policy"
    [ $rc -eq 0 ] || die "apt-get install ${missing[*]} failed"
}

# Finds cargo: on PATH, else in root's or the sudo user's ~/.cargo (sudo resets PATH).
ensure_cargo() {
    if ! command -v cargo >/dev/null; then
        local h
        for h in "${HOME:-/root}" /root "$(getent passwd "${SUDO_USER:-}" 2>/dev/null | cut -d: -f6)"; do
            if [ -n "$h" ] && [ -x "$h/.cargo/bin/cargo" ]; then
                export PATH="$h/.cargo/bin:$PATH"
                export CARGO_HOME="${CARGO_HOME:-$h/.cargo}"
                [ -d "$h/.rustup" ] && export RUSTUP_HOME="${RUSTUP_HOME:-$h/.rustup}"
                break
            fi
        done
    fi
    command -v cargo >/dev/null ||
        die "no cargo found: install Rust >= 1.88 with rustup (https://rustup.rs); Debian 12's cargo is too old"
}

# rustfmt and clippy must be there; `rustup component add` is tried once if not.
ensure_rust_components() {
    local c
    for c in fmt clippy; do
        cargo "$c" --version >/dev/null 2>&1 && continue
        local comp=$c; [ "$c" = fmt ] && comp=rustfmt
        if command -v rustup >/dev/null && rustup component add "$comp" >/dev/null 2>&1 &&
            cargo "$c" --version >/dev/null 2>&1; then
            continue
        fi
        die "cargo $c is missing and \`rustup component add $comp\` did not work (offline?); install the $comp component"
    done
}

# Everything the tests could leave under DIR: containerd processes started with a config
# there, mounts below it (deepest first), loop devices backed by files there. Only things
# under DIR are touched (never `losetup -D`). Prints what it cleaned; returns 1 if any.
sweep_under() {
    local dir=$1 found=0 pid mp dev
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    for pid in $(pgrep -x containerd 2>/dev/null); do
        if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/"; then
            say "leftover containerd pid $pid: killing"
            kill -TERM "$pid" 2>/dev/null; found=1
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    # mountinfo field 5 is the mount point (octal-escaped; our paths have no spaces).
    while read -r mp; do
        say "leftover mount $mp: unmounting"
        umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
        found=1
    done < <(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    while read -r dev; do
        [ -n "$dev" ] || continue
        say "leftover loop device $dev: detaching"
        losetup -d "$dev" 2>/dev/null || true
        found=1
    done < <(losetup --list --noheadings --output NAME,BACK-FILE 2>/dev/null |
        awk -v d="$dir/" 'index($2, d) == 1 { print $1 }')
    return $found
}
