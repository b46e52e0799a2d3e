#!/bin/bash
# shellcheck shell=bash
# dracut sources this file and provides $moddir, $initdir, $dracutsysrootdir,
# $systemdsystemunitdir and the inst_* / dfatal functions:
# shellcheck disable=SC2154
# dracut module: containerd-guard in the initrd.
# Verifies the OS's ephemeral containerd volume under /sysroot before switch-root and,
# when configured ([volume] mount = true in /etc/containerd-guard/initrd.toml inside the
# initrd, the default this module installs), mounts it at /sysroot/var/lib/containerd,
# so containerd can never see the bare directory. The guard never formats a disk.
# Installed to /usr/lib/dracut/modules.d/50containerd-guard/.

check() {
    # opt-in only: enable with add_dracutmodules+=" containerd-guard "
    return 255
}

depends() {
    echo systemd udev-rules
}

installkernel() {
    # filesystems the guard may mount (hostonly picks the running ones anyway)
    hostonly='' instmods ext4 xfs
}

install() {
    local u
    inst_multiple /usr/bin/guard sh mkdir cp rm || exit 1

    # The config the initrd adds on top of the OS's own (read below /sysroot): by default
    # only `[volume] mount = true`. An image builder may ship its own file at
    # /etc/containerd-guard/initrd.toml on the build host; that one wins.
    if [[ -f "$dracutsysrootdir/etc/containerd-guard/initrd.toml" ]]; then
        inst_simple "$dracutsysrootdir/etc/containerd-guard/initrd.toml" /etc/containerd-guard/initrd.toml
    else
        inst_simple "$moddir/initrd.toml" /etc/containerd-guard/initrd.toml
    fi || exit 1

    inst_simple "$moddir/containerd-guard-initrd.service" \
        "$systemdsystemunitdir/containerd-guard-initrd.service" || exit 1

    # The build fails if anything the unit is ordered against is missing from the initrd.
    for u in initrd.target initrd-root-fs.target initrd-fs.target initrd-switch-root.target sysroot.mount \
             systemd-udev-trigger.service; do
        if [[ ! -e "$initdir$systemdsystemunitdir/$u" ]] && [[ $u != sysroot.mount ]]; then
            dfatal "containerd-guard: $u is missing from the initrd"
            exit 1
        fi
    done
    # Wanted (not required) by initrd.target: a volume that fails here must not strand the
    # node in the emergency shell; containerd's pre-start runs phase 1 again after
    # switch-root and holds containerd, with the reason in StatusText.
    systemctl -q --root="$initdir" add-wants initrd.target containerd-guard-initrd.service || exit 1
}
