#!/bin/bash
# vm-tests guest report: facts only (the host decides PASS/FAIL). One `key=value` per
# line; blocks of text are prefixed `name| `.
stty -F /dev/ttyS1 115200 2>/dev/null || true
out=/run/vm-tests/report.txt
mkdir -p /run/vm-tests
t_report=$(cut -d' ' -f1 /proc/uptime)
scenario=$(cat /run/vm-tests/scenario 2>/dev/null)
# a scenario's own containerd socket (k3s), for ctr
if [ -s /run/vm-tests/socket ]; then CONTAINERD_ADDRESS=$(cat /run/vm-tests/socket); export CONTAINERD_ADDRESS; fi
# Wait for the boot to settle, bounded: a scenario unit of this boot (the running-node
# scenarios, readme-recovery) has ended, and either the boot finished (running/degraded) or
# containerd is held: its pre-start failed twice (once, then once more on its Restart=),
# and where the boot times kubelet's held start, that start has ended.
# A held containerd's start job never ends (each failed pre-start goes to auto-restart),
# so kubelet's and the boot target's jobs wait for it and the boot never finishes.
gen=/run/systemd/generator
containerd_lines() { journalctl -b -o cat _PID=1 UNIT=containerd.service 2>/dev/null; }
prestart_failures() { containerd_lines | grep -c 'Control process exited'; }
scenario_done() {
  [ -e "$gen/multi-user.target.wants/vm-tests-scenario.service" ] || [ -e "$gen/vm-tests-recover.service" ] || return 0
  grep -q '^scenario.done=' /run/vm-tests/scenario.txt 2>/dev/null
}
# a boot that times kubelet's held start (vmtest.kubelettimeout=, `never`): it has ended
held_kubelet_ended() {
  grep -q 'vmtest\.kubelettimeout=' /proc/cmdline || return 0
  journalctl -b -o cat _PID=1 UNIT=kubelet.service 2>/dev/null | grep -q '^Failed to start kubelet\.service'
}
settled() {
  scenario_done || return 1
  case $(systemctl is-system-running 2>/dev/null) in initializing|starting) ;; *) return 0 ;; esac
  [ "$(prestart_failures)" -ge 2 ] && held_kubelet_ended
}
bound=200
scenario_done || bound=800   # the scenario unit's own steps are bounded (TimeoutStartSec)
while ! settled && [ "$(cut -d. -f1 /proc/uptime)" -lt $bound ]; do sleep 0.5; done
t_booted=$(cut -d' ' -f1 /proc/uptime)
# every command bounded: one stuck probe must not cost the whole report; each block's
# seconds are reported too (what the report costs a boot)
block() { local p=$1 t0; shift; t0=$(cut -d' ' -f1 /proc/uptime)
  timeout 20 "$@" 2>&1 | sed "s/^/$p| /"; echo "$p.rc=${PIPESTATUS[0]}"
  echo "$p.secs=$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{printf "%.2f", b-a}')"; }
# systemd-analyze verify starts first, in the background, beside the other probes; its
# block is collected below. healthy's: the guard's units and drop-ins; trixie-cloud-init's:
# with cloud-init's units (24.3 and later: -main, -network), whose ordering against
# containerd's must make no cycle
verify_units=()
case $scenario in
  healthy) verify_units=(containerd.service kubelet.service) ;;
  trixie-cloud-init) verify_units=(containerd.service kubelet.service cloud-init-local.service cloud-init-main.service \
    cloud-init-network.service cloud-config.service cloud-final.service) ;;
esac
if [ ${#verify_units[@]} -gt 0 ]; then
  block verify systemd-analyze verify --man=no /usr/lib/systemd/system/containerd-guard-hygiene.service \
    /usr/lib/systemd/system/containerd-guard-hygiene.timer "${verify_units[@]}" >/run/vm-tests/verify.out 2>&1 &
fi
{
echo "scenario=$scenario"
echo "uptime=$t_booted"
echo "report_started=$t_report"
echo "cmdline=$(cat /proc/cmdline)"
# which guest: the Debian release and the versions the scenarios are about
echo "guest.os=$(. /etc/os-release && echo "$ID $VERSION_ID $VERSION_CODENAME")"
# shellcheck disable=SC2016 # dpkg-query's ${fields}
echo "guest.versions=$(dpkg-query -W -f='${Package}=${Version} ' systemd containerd cloud-init 2>/dev/null | sed 's/ $//')"
# the units' properties in one systemctl call (a call per unit cost a second of every
# boot under TCG): one paragraph per unit, named by its Id. The volume's device unit for
# healthy's critical chain (vm-tests/run cost)
systemctl show containerd.service kubelet.service var-lib-containerd.mount vm-tests-hotplug.service \
    containerd-guard-initrd.service vm-tests-scenario.service containerd-guard-hygiene.service cloud-init.service \
    cloud-init-main.service cloud-init-network.service cloud-final.service /dev/disk/by-label/ctrd-eph \
    -p Id,LoadState,ActiveState,SubState,Result,ExecMainStatus,NRestarts \
    -p InactiveExitTimestampMonotonic,ActiveEnterTimestampMonotonic,ExecMainStartTimestampMonotonic \
    -p ExecMainExitTimestampMonotonic,StatusText,InvocationID,MainPID \
    -p InactiveEnterTimestampMonotonic,TimeoutStartUSec 2>/dev/null >/run/vm-tests/units.txt
awk -v RS= -F '\n' '{ id = ""; for (i = 1; i <= NF; i++) if ($i ~ /^Id=/) id = substr($i, 4)
  for (i = 1; i <= NF; i++) if ($i !~ /^Id=/) print "unit." id "." $i }' /run/vm-tests/units.txt
echo "system.state=$(systemctl is-system-running 2>/dev/null)"
containerd_lines >/run/vm-tests/containerd.lines
echo "containerd.prestart_failures=$(grep -c 'Control process exited' /run/vm-tests/containerd.lines)"
echo "containerd.execstartpre=$(systemctl show -p ExecStartPre --value containerd.service | tr '\n' ' ')"
echo "kubelet.execstartpre=$(systemctl show -p ExecStartPre --value kubelet.service | tr '\n' ' ')"
echo "containerd.starts=$(grep -c '^Started ' /run/vm-tests/containerd.lines)"
echo "volume.ok=$(cat /run/containerd-guard/volume.ok 2>/dev/null)"
echo "boot_id=$(cat /proc/sys/kernel/random/boot_id)"
# shellcheck disable=SC2012 # interface names have no blanks; a plain list is the point
echo "netdevs=$(ls /sys/class/net | tr '\n' ' ' | sed 's/ $//')"
echo "mount=$(findmnt -rno SOURCE,FSTYPE,LABEL /var/lib/containerd 2>/dev/null)"
# what lies on the root filesystem under the mount point
# shellcheck disable=SC2012 # names only, for the evidence line; the host greps them
# (rootfs_checked says whether it could look: a failed bind mount proves nothing)
if mkdir -p /run/vm-tests/rootfs && mount --bind / /run/vm-tests/rootfs 2>/dev/null; then
  echo "rootfs_checked=yes"
  echo "rootfs_under_mount=$(ls -A /run/vm-tests/rootfs/var/lib/containerd 2>/dev/null | tr '\n' ' ')"
  umount /run/vm-tests/rootfs
else
  echo "rootfs_checked=no"
fi
[ -f /run/vm-tests/kubelet.result ] && sed 's/^/standin./' /run/vm-tests/kubelet.result
# the running-node scenarios' facts (scenario.sh incident), prefixed `sc.`
[ -f /run/vm-tests/scenario.txt ] && sed -E 's/^([^|=]*[|=])/sc.\1/' /run/vm-tests/scenario.txt
block guard.status /usr/bin/guard status
block guard.json /usr/bin/guard --json status
# the guard's structured journal entries (GUARD_FINDING=, GUARD_STATUS=, MESSAGE_ID=):
# every entry with a GUARD_FINDING field, by its values (journalctl -F), not a grep of the
# whole journal as JSON
# shellcheck disable=SC2016 # $1.. are sh -c's
block jfind sh -c 'set -- $(journalctl -b -F GUARD_FINDING | sed "s/^/GUARD_FINDING=/"); [ $# = 0 ] || journalctl -b -o json --no-pager "$@"'
# only where it is judged (restore), and only when containerd runs: on a held boot ctr
# waits out its dial (11 s under TCG)
if [ "$scenario" = restore ] && systemctl is-active --quiet containerd.service; then
  block ctr.images ctr --timeout 5s -n k8s.io images ls -q
fi
# only where it is judged (cycle). Not filtered by _PID=1: systemd breaks the cycles of
# the first transaction before journald runs, and journald takes those lines from the
# kernel's log, without _PID
case $scenario in cycle*|trixie-cloud-init)
  block cycle sh -c "journalctl -b -o cat --no-pager | grep -iE 'ordering cycle|to break ordering|Found dependency' || true" ;;
esac
# the guard's own lines in containerd's and kubelet's pre-starts
journalctl --sync 2>/dev/null
for u in containerd.service kubelet.service; do
  block "prestart.$u" journalctl -q -b -o short-monotonic --no-hostname "_SYSTEMD_UNIT=$u" SYSLOG_IDENTIFIER=guard
done
block journal journalctl -b -o short-monotonic --no-hostname -u containerd-guard-initrd.service \
  -u containerd.service -u vm-tests-recover.service \
  -u kubelet.service -u var-lib-containerd.mount -u vm-tests-hotplug.service -u vm-tests-bypass.service \
  -u vm-tests-scenario.service -u containerd-guard-hygiene.service -u vm-tests-kill.service
if [ "$scenario" = healthy ]; then
  # the boot-time cost docs/performance.md quotes. The critical chain is drawn on the host from
  # the units' timestamps above: systemd-analyze critical-chain took 6-12 s of the report
  # under TCG (it asks PID 1 for every unit's timestamps)
  echo "userspace_mono=$(systemctl show -p UserspaceTimestampMonotonic --value)"
  block analyze systemd-analyze
fi
if [ ${#verify_units[@]} -gt 0 ]; then
  wait   # verify, started in the background at the top
  cat /run/vm-tests/verify.out
fi
case $scenario in cloud-init-again)
  # the boot-cost figures: each pre-start command's start and exit (CLOCK_MONOTONIC, us)
  # from systemd's D-Bus API (systemctl show has seconds only), a(sasbttttuii): path,
  # argv, ignore, start realtime, start monotonic, exit realtime, exit monotonic, pid,
  # code, status
  for u in containerd kubelet; do
    echo "bootcost.$u.execstartpre=$(timeout 20 busctl --json=short get-property org.freedesktop.systemd1 \
      "/org/freedesktop/systemd1/unit/${u}_2eservice" org.freedesktop.systemd1.Service ExecStartPre 2>&1 | tr '\n' ' ')"
  done ;;
esac
case $scenario in cloud-init*|trixie-cloud-init)
  echo "containerd.timeout=$(systemctl show -p TimeoutStartUSec --value containerd.service)"
  echo "fstab=$(grep -E '[[:space:]]/var/lib/containerd[[:space:]]' /etc/fstab | tr '\t' ' ')"
  # what `cloud-init status` reads (the command itself, python, took 8 s under TCG)
  echo "cloudinit.result=$(tr -d '\n' </run/cloud-init/result.json 2>&1 | tr -s ' ')"
  block cloudinit sh -c "journalctl -b -o short-monotonic --no-hostname -u cloud-init-local.service -u cloud-init.service -u cloud-init-main.service -u cloud-init-network.service | grep -iE 'vm-tests|disk_setup|fs_setup|mounts|Finished|Started|error|warn' | head -n 30" ;;
esac
case $scenario in dracut*)
  # the initrd's manager: when initrd-fs.target was reached and when the guard's initrd
  # unit started (it is ordered after it)
  block initrd.order sh -c "journalctl -b -o short-monotonic --no-hostname _PID=1 | grep -E 'Reached target initrd-fs\.target|Starting containerd-guard-initrd\.service' || true" ;;
esac
case $scenario in dracut-var)
  # /var is a filesystem of its own, mounted by the OS: where the volume ended up, what
  # lies under it on the /var filesystem and on the root filesystem, and when volume.ok
  # was written (seconds of uptime) against the switch-root (the OS manager's start)
  echo "var.mount=$(findmnt -rno SOURCE,FSTYPE,LABEL /var 2>/dev/null)"
  block mounts findmnt -rno ID,PARENT,TARGET,SOURCE,LABEL
  # shellcheck disable=SC2012 # names only, for the evidence line
  if mkdir -p /run/vm-tests/varfs && mount --bind /var /run/vm-tests/varfs 2>/dev/null; then
    echo "varfs_checked=yes"
    echo "varfs_has_dir=$([ -d /run/vm-tests/varfs/lib/containerd ] && echo yes || echo no)"
    echo "varfs_under_mount=$(ls -A /run/vm-tests/varfs/lib/containerd 2>/dev/null | tr '\n' ' ')"
    umount /run/vm-tests/varfs
  else
    echo "varfs_checked=no"
  fi
  # shellcheck disable=SC2012 # names only, for the evidence line
  if mkdir -p /run/vm-tests/rootfs && mount --bind / /run/vm-tests/rootfs 2>/dev/null; then
    echo "rootfs_has_dir=$([ -d /run/vm-tests/rootfs/var/lib/containerd ] && echo yes || echo no)"
    echo "rootfs_var=$(ls -A /run/vm-tests/rootfs/var 2>/dev/null | tr '\n' ' ')"
    umount /run/vm-tests/rootfs
  fi
  echo "userspace_mono=$(systemctl show -p UserspaceTimestampMonotonic --value)"
  echo "initrd_mono=$(systemctl show -p InitRDTimestampMonotonic --value)"
  echo "volume.ok.mtime_uptime=$(awk -v m="$(stat -c %.3Y /run/containerd-guard/volume.ok 2>/dev/null || echo 0)" \
    -v now="$(date +%s.%N)" -v up="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{ if (m == 0) print ""; else printf "%.2f", m - (now - up) }')"
  block initrd journalctl -b -o short-monotonic --no-hostname --no-pager -u containerd-guard-initrd.service ;;
esac
case $scenario in package*)
  # what containerd's and the stand-in's units are made of, after the package came and went
  echo "dropins=$(systemctl show -p DropInPaths --value containerd.service kubelet.service | tr '\n' ' ')"
  block unitcat systemctl cat containerd.service kubelet.service
  # shellcheck disable=SC2016 # dpkg-query's ${fields}
  echo "package=$(dpkg-query -W -f='${Version} ${Status}' containerd-guard 2>&1)"
  echo "enabled.links=$(find /etc/systemd/system -name 'containerd-guard*' 2>/dev/null | tr '\n' ' ')" ;;
esac
case $scenario in chaos)
  # the chaos boots: one last RunPodSandbox of our own, every attempt with containerd's
  # view (chaos.sh), the kill, and containerd's starts and stops by systemd
  /usr/lib/vm-tests/chaos.sh probe
  block attempts cat /run/vm-tests/attempts.log
  [ -f /run/vm-tests/kill.txt ] && sed 's/^/kill./' /run/vm-tests/kill.txt
  echo "containerd.stops=$(journalctl -b -o cat _PID=1 UNIT=containerd.service 2>/dev/null | grep -c '^Stopping ')"
  echo "standin.lives=$(cat /run/vm-tests/standin.lives 2>/dev/null || echo 0)" ;;
esac
echo "report_done=$(cut -d' ' -f1 /proc/uptime)"
} > "$out" 2>&1
# the last close of a serial tty waits until its output has drained (closing_wait): the
# host has the whole report before the immediate power-off (vm-tests-report.service)
{ echo "=== VMTEST BEGIN"; cat "$out"; echo "=== VMTEST END"; } > /dev/ttyS1
sync
