# shellcheck shell=bash
# The rule every maintainer script and scriptlet obeys, shared by scripts/check-deb (the
# .deb's postinst, prerm, postrm) and scripts/check-rpm (the rpm's %post, %preun, %postun,
# which embed those): the only change to a unit's state is the stop of the hygiene timer
# and its service on removal; containerd's and kubelet's units are never named other than
# to ask whether containerd is active (or as the .service.d of the drop-ins). Source it.

# A command that changes a unit's state (start, stop, restart, reload, kill, --now, ...).
SCRIPTLET_UNIT_ACTION='systemctl([^;&|]*[[:space:]])(start|stop|restart|try-restart|reload|reload-or-restart|try-reload-or-restart|isolate|kill|enable --now|mask)([[:space:]]|$)|--now|deb-systemd-invoke|invoke-rc\.d|(^|[[:space:]])service[[:space:]]'
# The one allowed: the stop of the hygiene timer and its service, literally named, with
# deb-systemd-invoke (the .deb) or systemctl (the rpm), its failure ignored.
SCRIPTLET_HYGIENE_STOP='(deb-systemd-invoke|systemctl) stop containerd-guard-hygiene\.timer containerd-guard-hygiene\.service >/dev/null 2>&1 \|\| (true|:)'

# scriptlet_code FILE: the script without comments and the text of echo/printf lines.
scriptlet_code() {
    sed -e 's/^[[:space:]]*#.*//' -e 's/^[[:space:]]*\(echo\|printf\)[[:space:]].*//' "$1"
}

# scriptlet_unit_actions FILE STOP_ALLOWED(0|1): prints (line:text) each command of FILE that
# changes a unit's state, but the hygiene stop when STOP_ALLOWED is 1.
scriptlet_unit_actions() {
    local actions
    actions=$(scriptlet_code "$1" | grep -nE "$SCRIPTLET_UNIT_ACTION" || true)
    if [ "$2" = 1 ]; then
        actions=$(grep -vE "^[0-9]+:[[:space:]]*$SCRIPTLET_HYGIENE_STOP\$" <<<"$actions" || true)
    fi
    [ -z "$actions" ] || printf '%s\n' "$actions"
}

# scriptlet_names_runtime FILE: prints each line of FILE naming containerd's or kubelet's
# unit other than `systemctl is-active -q containerd.service` or a .service.d path.
scriptlet_names_runtime() {
    scriptlet_code "$1" | grep -nE '(containerd|kubelet)\.service' |
        grep -vE 'is-active -q containerd\.service|\.service\.d/' || true
}

# scriptlet_runs_acting_guard FILE: prints each line of FILE running a guard command that
# acts (only `guard verify`, read-only, and `guard config` are allowed).
scriptlet_runs_acting_guard() {
    scriptlet_code "$1" |
        grep -nE 'guard[[:space:]]+([^|;&]*[[:space:]])?(volume|runtime|hygiene|reset)([[:space:]]|$)|--repair' || true
}
