#!/bin/bash
# vm-tests: the scenarios about a running node (k3s, leaked-task, package), guest side. Facts only:
# the host decides PASS/FAIL. Usage: scenario.sh standin|incident
#   standin   the kubelet stand-in's job in these scenarios (kubelet.service's ExecStart=
#             via the generator's drop-in): run the scenario's pod through CRI with
#             testkit/src/bin/cri-workload.rs; its key=value lines go to /run/vm-tests/kubelet.result
#             (package-after, the package scenario's second boot: the same, retried as
#             kubelet would while CRI is not up)
#   incident  (vm-tests-scenario.service, after the stand-in, before the report) reproduce
#             the incident on the running node, then run the guard on it; facts go to
#             /run/vm-tests/scenario.txt, which report.sh copies into the report.
# Every wait is a poll with a deadline; nothing synchronises on a fixed sleep.
set -u
phase=${1:?standin|incident}
scenario=$(cat /run/vm-tests/scenario 2>/dev/null)
# containerd's socket: the default, or the scenario's (k3s: /run/vm-tests/socket, written
# by the generator); ctr reads it from CONTAINERD_ADDRESS
sock=$(cat /run/vm-tests/socket 2>/dev/null || echo /run/containerd/containerd.sock)
export CONTAINERD_ADDRESS=$sock
cri=/usr/lib/vm-tests/cri-workload
locker=localhost:5000/vm-tests/locker:1
pause=localhost:5000/vmware.io/pause:3.4.1
lockdir=/var/lib/vm-tests/lockdir
out=/run/vm-tests/scenario.txt
mkdir -p /run/vm-tests

now() { cut -d' ' -f1 /proc/uptime; }
# block NAME CMD...: the command's output as `NAME| ` lines, then NAME.rc=
block() { local p=$1; shift; timeout 120 "$@" 2>&1 | sed "s/^/$p| /"; echo "$p.rc=${PIPESTATUS[0]}"; }
# blockf NAME FUNCTION...: the same for a shell function (bounded by its own commands)
blockf() { local p=$1; shift; "$@" 2>&1 | sed "s/^/$p| /"; echo "$p.rc=${PIPESTATUS[0]}"; }
# until SECS CMD...: poll CMD every 0.2 s until it succeeds (0) or SECS pass (1)
until_ok() {
  local end; end=$(( $(date +%s) + $1 )); shift
  while ! "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.2
  done
}
kv() { sed -n "s/^$1=//p" /run/vm-tests/kubelet.result 2>/dev/null | head -n1; }
# the stand-in's pod and container, printed for the host; sets the caller's sid and cid
standin_ids() {
  sid=$(kv pod_sandbox_id) cid=$(kv container_id)
  echo "sandbox=$sid"; echo "container=$cid"
}
# the host pids in container ID's cgroup (either cgroup driver)
pids_of() { grep -lE "(/|cri-containerd-)$1(\.scope)?\$" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3 | sort -n | tr '\n' ' ' | sed 's/ $//'; }
alive() { local p a=; for p in "$@"; do [ -d "/proc/$p" ] && a+="$p "; done; echo "${a% }"; }
none_alive() { [ -z "$(alive "$@")" ]; }
answers() { timeout 5 ctr --address "$sock" version; }
task_status() { timeout 10 ctr -n k8s.io tasks ls 2>/dev/null | awk -v id="$1" '$1 == id {print $3}'; }
task_stopped() { [ "$(task_status "$1")" = STOPPED ]; }
uuid() { cat /proc/sys/kernel/random/uuid; }
# load PROPS UNIT...: P[UNIT.PROP]=VALUE for every unit, from one systemctl call (one call
# per property and unit cost a tenth of a second each under TCG); paragraphs by Id
declare -A P=()
load() {
  local props=$1 k v; shift; P=()
  while IFS='=' read -r k v; do P[$k]=$v; done < <(systemctl show -p "Id,$props" "$@" 2>/dev/null |
    awk -v RS= -F '\n' '{ id = ""; for (i = 1; i <= NF; i++) if ($i ~ /^Id=/) id = substr($i, 4)
      for (i = 1; i <= NF; i++) if ($i !~ /^Id=/) print id "." $i }')
}
hygiene_service() { # start the unit the 2-minute timer runs, and what it said
  local t0; t0=$(date +%s)
  systemctl start containerd-guard-hygiene.service; echo "hygiene.rc=$?"
  echo "hygiene.secs=$(( $(date +%s) - t0 ))"
  echo "hygiene.result=$(systemctl show -p Result --value containerd-guard-hygiene.service)"
  block hygiene.journal journalctl -b -o cat --no-pager -u containerd-guard-hygiene.service
}
timer_off() { # the timer may fire (OnBootSec=2min) mid-scenario: the test starts its service
  echo "timer.before=$(systemctl is-enabled containerd-guard-hygiene.timer)/$(systemctl is-active containerd-guard-hygiene.timer)"
  systemctl stop containerd-guard-hygiene.timer
}

# ------------------------------------------------------------------ the stand-in
standin() {
  case $scenario in
    k3s)
      timeout 60 ctr -n k8s.io images import /usr/lib/vm-tests/locker.tar >/run/vm-tests/import.log 2>&1 ||
        { echo "result=fail"; echo "error=ctr images import: $(tr '\n' ' ' </run/vm-tests/import.log)"; return 1; }
      mkdir -p "$lockdir"
      local uid; uid=$(uuid)
      echo "pod_uid=$uid"
      # kubelet's systemd cgroup layout: the pod's slice, by uid with underscores
      "$cri" "$sock" run --name locker --uid "$uid" --image "$locker" \
        --cgroup-parent "kubepods-besteffort-pod${uid//-/_}.slice" --mount "$lockdir:/data" \
        --expect locked --fail-on 'cannot acquire lock' --timeout 90 ;;
    leaked-task|package|ops|readme-recovery)
      local uid; uid=$(uuid)
      echo "pod_uid=$uid"
      "$cri" "$sock" run --name payload --uid "$uid" --image "$pause" \
        --cgroup-parent "/kubepods/besteffort/pod$uid" --timeout 90 ;;
    package-after)
      # the package scenario's second boot, after the package was purged: a node running
      # containerd and a pod without the guard. Nothing gates the stand-in on CRI, so it
      # does what kubelet does while the runtime is not ready: it tries again. containerd
      # tells systemd it is ready before its CRI plugin is (measured: RunPodSandbox 0.5 s
      # after the start failed with "server is not initialized yet"). Bounded: 60 tries a
      # second apart; any other failure ends it at once.
      local try out rc uid
      for try in $(seq 60); do
        uid=$(uuid)
        out=$("$cri" "$sock" run --name payload --uid "$uid" --image "$pause" \
          --cgroup-parent "/kubepods/besteffort/pod$uid" --timeout 90); rc=$?
        if [ $rc = 0 ] || [ "$try" = 60 ] || ! grep -q 'not initialized' <<<"$out"; then
          printf 'pod_uid=%s\n%s\ntries=%s\n' "$uid" "$out" "$try"; return $rc
        fi
        sleep 1
      done ;;
    *) echo "result=fail"; echo "error=no stand-in workload for scenario '$scenario'"; return 1 ;;
  esac
}

# ------------------------------------------------------------------ k3s
# The k3s incident: containerd's unit kills the shims by name before every start; the
# payloads live on, orphaned, holding their locks. The guard must find them (verify),
# show what it would kill (dry run, nothing killed), reap them (the hygiene unit), and a
# new incarnation of the pod must then get the lock.
k3s() {
  local sid cid
  standin_ids
  [ -n "$cid" ] || { echo "error=the stand-in started no container"; return; }
  timer_off
  local pids pida; pids=$(pids_of "$cid")
  read -r -a pida <<<"$pids"
  echo "locker.pids=$pids"
  local first=${pids%% *}
  echo "locker.cgroup=$(sed -n 's/^0:://p' "/proc/$first/cgroup" 2>/dev/null)"
  block ps.before ps -o pid,ppid,comm,args -p "${pids// /,}"
  echo "dropin=$(systemctl show -p DropInPaths --value containerd.service)"
  echo "execstartpre=$(systemctl show -p ExecStartPre --value containerd.service | tr '\n' ' ')"
  # --- the incident
  echo "t.incident=$(now)"
  systemctl stop containerd; echo "stop.rc=$?"
  local shim; shim=$(pgrep -f -- "containerd-shim-runc-v2 .*-id $sid( |\$)" | head -n1)
  echo "shim.pid=$shim"
  echo "shim.cmdline=$(tr '\0' ' ' <"/proc/$shim/cmdline" 2>/dev/null)"
  [ -n "$shim" ] && kill -9 "$shim"
  until_ok 15 none_alive "$shim"; echo "shim.gone=$?"
  # what k3s-killall-style cleanups do: the container's runtime state goes (its rootfs
  # unmounted first), so the restarted containerd has nothing to clean up after the shim
  local b=/run/containerd/io.containerd.runtime.v2.task/k8s.io/$cid
  mountpoint -q "$b/rootfs" && { umount "$b/rootfs" || umount -l "$b/rootfs"; }
  rm -rf "$b"; echo "bundle.removed=$([ -e "$b" ] && echo no || echo yes)"
  systemctl start containerd; echo "start.rc=$?"
  until_ok 60 answers; echo "answers.rc=$?"
  echo "t.restarted=$(now)"
  echo "orphans.alive=$(alive "${pida[@]}")"
  block ps.orphans ps -o pid,ppid,comm,args -p "${pids// /,}"
  block tasks.orphans timeout 10 ctr -n k8s.io tasks ls
  # --- the guard (on k3s's socket: nothing at the default path)
  echo "socket=$sock"
  echo "default_socket=$(stat -c %F /run/containerd/containerd.sock 2>&1)"
  block verify /usr/bin/guard --json verify
  block dryrun /usr/bin/guard --json hygiene --dry-run
  echo "after_dryrun.alive=$(alive "${pida[@]}")"
  # the incident's symptom: a new incarnation cannot take the lock
  local uid2; uid2=$(uuid)
  block blocked "$cri" "$sock" run --name locker-blocked --uid "$uid2" --image "$locker" \
    --cgroup-parent "kubepods-besteffort-pod${uid2//-/_}.slice" --mount "$lockdir:/data" \
    --expect locked --fail-on 'cannot acquire lock' --timeout 60
  hygiene_service
  until_ok 15 none_alive "${pida[@]}"; echo "reaped.rc=$?"
  # where no containerd socket is at the configured path, hygiene says it skipped
  printf '[containerd]\nconfig = "/run/vm-tests/containerd-k3s.toml"\nsocket = "/run/vm-tests/no.sock"\n' \
    > /run/vm-tests/nosocket.toml
  block skipped /usr/bin/guard --config /run/vm-tests/nosocket.toml hygiene
  echo "after_reap.alive=$(alive "${pida[@]}")"
  echo "cgroup_after=$(cd /sys/fs/cgroup 2>/dev/null && find . -name "cri-containerd-$cid.scope" | head -n1)"
  # a new incarnation (new pod) now gets the lock
  local uid3; uid3=$(uuid)
  block relock "$cri" "$sock" run --name locker-new --uid "$uid3" --image "$locker" \
    --cgroup-parent "kubepods-besteffort-pod${uid3//-/_}.slice" --mount "$lockdir:/data" \
    --expect locked --fail-on 'cannot acquire lock' --timeout 60
  block status /usr/bin/guard status
}

# ------------------------------------------------------------------ leaked-task
# A task containerd still holds for a container CRI says exited: RemovePodSandbox fails
# forever. The guard must find it (verify) and the hygiene unit delete exactly it, with no
# containerd restart; then the pod can be removed.
leaked_task() {
  local sid cid
  standin_ids
  [ -n "$cid" ] || { echo "error=the stand-in started no container"; return; }
  timer_off
  echo "containerd.pid.before=$(systemctl show -p MainPID --value containerd.service)"
  block stopc "$cri" "$sock" stop-container "$cid"
  # the leak, exactly as it happens: a task started outside CRI, then killed
  echo "t.incident=$(now)"
  block taskstart timeout 30 ctr -n k8s.io tasks start -d --null-io "$cid"
  block taskkill timeout 30 ctr -n k8s.io tasks kill -s SIGKILL "$cid"
  until_ok 30 task_stopped "$cid"; echo "stopped.rc=$?"
  echo "task.status=$(task_status "$cid")"
  block tasks.leaked timeout 10 ctr -n k8s.io tasks ls
  block remove1 "$cri" "$sock" remove-pod "$sid"
  block verify /usr/bin/guard --json verify
  hygiene_service
  block status /usr/bin/guard status
  echo "task.after=$(task_status "$cid")"
  block tasks.after timeout 10 ctr -n k8s.io tasks ls
  block remove2 "$cri" "$sock" remove-pod "$sid"
  echo "containerd.pid.after=$(systemctl show -p MainPID --value containerd.service)"
  stale_tasks
}

# A stale containerd that still runs a task, after the leak: a new pod sandbox runs, then
# the volume is detached lazily under the running containerd and mounted again (its
# database stays open on the detached mount: stale, as after an HA failover's remount).
# kubelet's restart runs its pre-start, `guard runtime`, which must refuse to restart
# containerd over the task and say so; the README's force path (`guard verify --repair
# --force`) then restarts it exactly once, and kubelet starts again.
stale_tasks() {
  local sb shim cur
  ctrd_starts() { journalctl -b -o cat _PID=1 UNIT=containerd.service | grep -c '^Started '; }
  ctrd_pid() { systemctl show -p MainPID --value containerd.service; }
  shim_alive() { [ -n "$shim" ] && [ -d "/proc/$shim" ] && echo yes || echo no; }
  echo "stale.starts.before=$(ctrd_starts)"
  timeout 120 /usr/lib/vm-tests/run-pod-sandbox "$sock" --keep >/run/vm-tests/stale-pod.txt 2>&1
  echo "stale.pod.rc=$?"
  sed 's/^/stale.pod| /' /run/vm-tests/stale-pod.txt
  sb=$(sed -n 's/^pod_sandbox_id=//p' /run/vm-tests/stale-pod.txt | head -n1)
  echo "stale.sandbox=$sb"
  shim=$(pgrep -f -- "containerd-shim-runc-v2 .*-id $sb( |\$)" | head -n1)
  echo "stale.shim=$shim"
  echo "stale.containerd.before=$(ctrd_pid)"
  mount_gone() { [ "$(systemctl show -p ActiveState --value var-lib-containerd.mount)" != active ]; }
  umount -l /var/lib/containerd; echo "stale.umount.rc=$?"
  # systemd must have seen the mount go, or its start would be a no-op
  until_ok 30 mount_gone; echo "stale.gone.rc=$?"
  systemctl start var-lib-containerd.mount; echo "stale.mount.rc=$?"
  echo "stale.mounted=$(findmnt -rno SOURCE,LABEL /var/lib/containerd)"
  cur=$(now)
  timeout 300 systemctl restart kubelet; echo "stale.kubelet.rc=$?"
  echo "stale.kubelet.result=$(systemctl show -p Result --value kubelet.service)/$(systemctl show -p ActiveState --value kubelet.service)"
  blockf stale.refusal synced guard_lines kubelet.service "$cur"
  echo "stale.containerd.refused=$(ctrd_pid)"
  echo "stale.starts.refused=$(ctrd_starts)"
  echo "stale.shim.alive=$(shim_alive)"
  block stale.force /usr/bin/guard --json verify --repair --force
  echo "stale.containerd.forced=$(ctrd_pid)"
  echo "stale.starts.forced=$(ctrd_starts)"
  echo "stale.shim.forced=$(shim_alive)"
  timeout 300 systemctl restart kubelet; echo "stale.kubelet2.rc=$?"
}

# ------------------------------------------------------------------ package
# The package on a running node. First boot (package): dpkg -i of a newer version, dpkg
# -r, dpkg --purge; none may start, stop or restart containerd or kubelet (the removal
# stops the guard's own hygiene timer and removes what the package generated: the metrics
# textfile, /run/containerd-guard). Second boot (package-after, the same disk): a node
# running containerd and a pod without the guard; the package's first install, with a
# config fragment that names a missing device (warned), again with it fixed (ok), then
# `systemctl restart containerd`: containerd back through its pre-start's quick check, the
# pod's shim and payload still running, kubelet untouched.
textfile=/var/lib/prometheus/node-exporter/containerd-guard.prom
newer_deb=/usr/lib/vm-tests/containerd-guard-newer.deb
pkg_snap() { # PREFIX SANDBOX CONTAINER: who runs, and which invocation of each unit
  local u t=containerd-guard-hygiene.timer
  load MainPID,NRestarts,InvocationID,ActiveState,LoadState containerd.service kubelet.service "$t" containerd-guard-hygiene.service
  for u in containerd.service kubelet.service; do
    echo "$1.unit.$u=${P[$u.MainPID]-}/${P[$u.NRestarts]-}/${P[$u.InvocationID]-}/${P[$u.ActiveState]-}"
  done
  echo "$1.containerd.pid=${P[containerd.service.MainPID]-}"
  echo "$1.shim.pid=$(pgrep -f -- "containerd-shim-runc-v2 .*-id $2( |\$)" | head -n1)"
  echo "$1.pod.pids=$(pids_of "$2")"
  echo "$1.container.pids=$(pids_of "$3")"
  echo "$1.timer=${P[$t.LoadState]-}/${P[$t.ActiveState]-}/$(systemctl is-enabled "$t" 2>/dev/null)"
  echo "$1.hygiene=${P[containerd-guard-hygiene.service.ActiveState]-}"
  echo "$1.textfile=$([ -e "$textfile" ] && echo present || echo absent)"
  echo "$1.statedir=$([ -e /run/containerd-guard ] && echo present || echo absent)"
  echo "$1.dropins=$(systemctl show -p DropInPaths --value containerd.service kubelet.service | tr '\n' ' ')"
  # shellcheck disable=SC2016 # dpkg-query's ${fields}
  echo "$1.package=$(dpkg-query -W -f='${Version} ${Status}' containerd-guard 2>&1)"
}
# dpkg_run NAME ARGS...: dpkg's stdout as the block NAME (the postinst's verdict goes
# there), its stderr as NAME.err, its exit code as NAME.rc
dpkg_run() {
  local n=$1; shift
  timeout 120 dpkg "$@" >"/run/vm-tests/$n.out" 2>"/run/vm-tests/$n.err"
  echo "$n.rc=$?"
  sed "s/^/$n| /" "/run/vm-tests/$n.out"; sed "s/^/$n.err| /" "/run/vm-tests/$n.err"
}
# what is left of the package: its files (dpkg -L, taken while it was installed; not
# directories) and what it generates or registers
leftovers() {
  local f
  while IFS= read -r f; do
    [ -n "$f" ] && [ ! -d "$f" ] && { [ -e "$f" ] || [ -L "$f" ]; } && echo "$f"
  done </run/vm-tests/package.files
  for f in "$textfile" /run/containerd-guard /run/containerd-guard.dpkg-remove /etc/containerd-guard /var/lib/dpkg/info/containerd-guard.*; do
    { [ -e "$f" ] || [ -L "$f" ]; } && echo "$f"
  done
  find /etc/systemd/system /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
    -name '*containerd-guard*' 2>/dev/null
}
package() {
  local sid cid u
  standin_ids
  [ -n "$sid" ] || { echo "error=the stand-in started no pod"; return; }
  pkg_snap before "$sid" "$cid"
  dpkg -L containerd-guard >/run/vm-tests/package.files 2>/dev/null
  echo "package.files=$(wc -l </run/vm-tests/package.files)"
  echo "t.upgrade=$(now)"
  dpkg_run upgrade -i "$newer_deb"
  pkg_snap upgraded "$sid" "$cid"
  for u in containerd-guard-volume.service containerd-guard-runtime.service containerd-guard-hygiene.timer; do
    echo "upgraded.enabled.$u=$(systemctl is-enabled "$u" 2>&1)"
  done
  echo "t.remove=$(now)"
  dpkg_run remove -r containerd-guard
  pkg_snap removed "$sid" "$cid"
  echo "removed.left=$(leftovers | tr '\n' ' ')"
  echo "removed.guard=$(command -v guard || echo none)"
  echo "t.purge=$(now)"
  dpkg_run purge --purge containerd-guard
  pkg_snap purged "$sid" "$cid"
  echo "purged.left=$(leftovers | tr '\n' ' ')"
  # a later start of containerd runs no guard any more
  echo "t.norestart=$(now)"
  systemctl restart containerd.service; echo "norestart.rc=$?"
  until_ok 60 answers; echo "noanswers.rc=$?"
  pkg_snap norestarted "$sid" "$cid"
  block norestart.journal journalctl -b -o short-monotonic --no-hostname --no-pager -u containerd.service
}
package_after() {
  local sid cid frag=/etc/containerd-guard/config.d/90-vm-tests.toml
  standin_ids
  [ -n "$sid" ] || { echo "error=the stand-in started no pod"; return; }
  pkg_snap fresh "$sid" "$cid"
  echo "fresh.links=$(find /etc/systemd/system -name 'containerd-guard*' 2>/dev/null | tr '\n' ' ')"
  block fresh.unitcat systemctl cat containerd.service kubelet.service
  # (a) the first install, with a fragment that names a device the node does not have
  mkdir -p /etc/containerd-guard/config.d
  printf '# vm-tests package-after: the wrong volume\n[volume]\ndevice = "LABEL=vmtest-no-such-disk"\n' >"$frag"
  echo "t.install=$(now)"
  dpkg_run install -i "$newer_deb"
  pkg_snap installed "$sid" "$cid"
  # (b) the fragment fixed, the package installed again
  printf '# vm-tests package-after: the right volume\n[volume]\ndevice = "LABEL=ctrd-eph"\n' >"$frag"
  echo "t.reinstall=$(now)"
  dpkg_run reinstall -i "$newer_deb"
  pkg_snap reinstalled "$sid" "$cid"
  # then what a containerd upgrade or an operator does: restart containerd
  echo "t.restart=$(now)"
  systemctl restart containerd.service; echo "restart.rc=$?"
  until_ok 60 answers; echo "answers.rc=$?"
  echo "t.restarted=$(now)"
  pkg_snap restarted "$sid" "$cid"
  block restarted.journal journalctl -b -o short-monotonic --no-hostname --no-pager -u containerd.service
  block restarted.status timeout 10 "$cri" "$sock" container-status "$cid"
}

# ------------------------------------------------------------------ ops
# The operator actions on a healthy node with a pod, in a row. Each step: a journal
# cursor and a snapshot before, the action, the settle condition of the step (polled,
# bounded), a snapshot after, and the guard's pre-start lines of containerd and kubelet
# since the cursor. A snapshot "c=PID/NRESTARTS/STATE k=PID/NRESTARTS/STATE shim=PID
# shim_alive=yes|no": the host judges "untouched" on it.
show() { systemctl show -p "$2" --value "$1" 2>/dev/null; }
# units' "MainPID/NRestarts/ActiveState", a line each in the order given, from one
# systemctl call (a snapshot took seven of them: about a second a step under TCG)
states() {
  local u; load MainPID,NRestarts,ActiveState "$@"
  for u in "$@"; do echo "${P[$u.MainPID]-}/${P[$u.NRestarts]-}/${P[$u.ActiveState]-}"; done
}
svc() { states "$1"; }
snap() {
  local c k t
  { read -r c; read -r k; read -r t; } < <(states containerd.service kubelet.service containerd-guard-hygiene.timer)
  echo "c=$c k=$k shim=$shim shim_alive=$([ -d "/proc/$shim" ] && echo yes || echo no) timer=${t##*/}"
}
# A step's journal lines are those received at or after its start (uptime): a cursor
# taken with `journalctl -n 0 --show-cursor` lost the pre-start's first line
cursor() { now; }
since() { # T: the short-monotonic lines stamped at T or later
  awk -v t="$1" '{ s = $0; sub(/^\[ */, "", s); sub(/\].*/, "", s); if (s + 0 >= t + 0) print }'
}
# no job left for containerd, kubelet or the guard's units (the boot's targets keep
# theirs: they wait for this scenario's unit)
no_jobs() { ! systemctl list-jobs --no-legend 2>/dev/null | grep -qE 'containerd|kubelet'; }
# the guard's lines in UNIT's pre-start since cursor C (journalctl --sync first: synced)
guard_lines() { journalctl -q -b -o short-monotonic --no-hostname "_SYSTEMD_UNIT=$1" SYSLOG_IDENTIFIER=guard 2>/dev/null | since "$2"; }
synced() { journalctl --sync 2>/dev/null; "$@"; }
# systemd's own lines about UNIT since T
sys_lines() { journalctl --sync 2>/dev/null; journalctl -q -b -o short-monotonic --no-hostname _PID=1 "UNIT=$1" 2>/dev/null | since "$2"; }
quick_check_since() { synced guard_lines containerd.service "$1" | grep -qi 'quick check'; }
runtime_since() { [ -n "$(synced guard_lines kubelet.service "$1")" ]; }
active_new() { # UNIT OLDPID: active with another main pid
  load MainPID,ActiveState "$1"
  [ "${P[$1.ActiveState]-}" = active ] && [ "${P[$1.MainPID]-}" != 0 ] && [ "${P[$1.MainPID]-}" != "$2" ]
}
both_active() { load ActiveState containerd.service kubelet.service; [ "${P[containerd.service.ActiveState]-}/${P[kubelet.service.ActiveState]-}" = active/active ]; }
step_begin() { # NAME: the before half of a step
  local b
  st=$1; cur=$(cursor); t0=$cur
  b=$(snap); echo "ops.$st.before=$b"
  cpid=${b#c=}; cpid=${cpid%%/*}
}
step_end() { # the after half: snapshot and the guard's lines since the step began
  echo "ops.$st.after=$(snap)"
  echo "ops.$st.secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')"
  journalctl --sync 2>/dev/null
  blockf "ops.$st.cprestart" guard_lines containerd.service "$cur"
  blockf "ops.$st.kprestart" guard_lines kubelet.service "$cur"
}
act() { # NAME CMD...: an action that must leave containerd and kubelet untouched
  step_begin "$1"; shift
  "$@" >/dev/null 2>&1; echo "ops.$st.rc=$?"
  until_ok 60 no_jobs; echo "ops.$st.settled=$?"
  step_end
}
ops() {
  local sid cid shim u a st cur t0 cpid deb
  # the stand-in is a daemon (Type=simple): active at once, its pod comes after
  until_ok 240 grep -qx 'result=ok' /run/vm-tests/kubelet.result; echo "pod.rc=$?"
  standin_ids
  [ -n "$sid" ] || { echo "error=the stand-in started no pod"; return; }
  shim=$(pgrep -f -- "containerd-shim-runc-v2 .*-id $sid( |\$)" | head -n1)
  echo "shim=$shim"
  echo "timer.before=$(systemctl is-enabled containerd-guard-hygiene.timer)/$(systemctl is-active containerd-guard-hygiene.timer)"
  # the guard's own units: nothing may reach containerd or kubelet
  for u in containerd-guard-hygiene.timer containerd-guard-hygiene.service; do
    for a in restart stop start mask unmask disable enable; do act "${u##*.}-$a" systemctl "$a" "$u"; done
  done
  echo "timer.after=$(systemctl is-enabled containerd-guard-hygiene.timer)/$(systemctl is-active containerd-guard-hygiene.timer)"
  # masking the running timer fails it (systemd: "Unit to trigger vanished", result
  # 'resources') and unmask/enable do not start it again: a restart of it does
  act timer-restart-again systemctl restart containerd-guard-hygiene.timer
  echo "timer.final=$(systemctl is-enabled containerd-guard-hygiene.timer)/$(systemctl is-active containerd-guard-hygiene.timer)"
  act daemon-reload systemctl daemon-reload

  # restart containerd: a new main process, through the quick check; kubelet untouched
  step_begin restart-containerd
  systemctl restart containerd; echo "ops.$st.rc=$?"
  until_ok 60 quick_check_since "$cur"; echo "ops.$st.quick=$?"
  step_end
  # a crash: back by containerd's own Restart=, through the quick check
  step_begin kill-containerd
  kill -9 "$cpid"; echo "ops.$st.rc=$?"
  until_ok 60 active_new containerd.service "$cpid"; echo "ops.$st.back=$?"
  until_ok 30 quick_check_since "$cur"; echo "ops.$st.quick=$?"
  step_end
  # containerd's own package upgrade (the same version again): its postinst restarts it
  deb=$(find /usr/lib/vm-tests -maxdepth 1 -name 'containerd_*.deb' | head -n 1)
  # shellcheck disable=SC2016 # dpkg-query's ${fields}
  echo "ops.dpkg.installed=$(dpkg-query -W -f='${Version}' containerd)"
  echo "ops.dpkg.deb=$(dpkg-deb -f "$deb" Version 2>&1)"
  step_begin dpkg
  block ops.dpkg.out dpkg -i "$deb"
  until_ok 60 active_new containerd.service "$cpid"; echo "ops.$st.back=$?"
  until_ok 30 quick_check_since "$cur"; echo "ops.$st.quick=$?"
  blockf ops.dpkg.journal sys_lines containerd.service "$cur"
  step_end
  # restart kubelet: guard runtime in its pre-start; containerd untouched
  step_begin restart-kubelet
  systemctl restart kubelet; echo "ops.$st.rc=$?"
  until_ok 60 runtime_since "$cur"; echo "ops.$st.runtime=$?"
  step_end
  # rescue and back: both come back, kubelet through its pre-start. Not blocking on
  # the way back: the boot target's job waits for this very unit
  step_begin isolate
  systemctl isolate rescue.target; echo "ops.$st.rescue.rc=$?"
  # isolate returns once rescue.target is reached; containerd's stop job may still run
  # (seen: deactivating), so the states are read once no job of either is left
  until_ok 60 no_jobs; echo "ops.$st.rescue.settled=$?"
  echo "ops.$st.rescue=$(svc containerd.service) $(svc kubelet.service)"
  systemctl isolate --no-block multi-user.target; echo "ops.$st.rc=$?"
  until_ok 180 both_active; echo "ops.$st.active=$?"
  until_ok 60 runtime_since "$cur"; echo "ops.$st.runtime=$?"
  echo "ops.$st.kubelet.result=$(show kubelet.service Result) $(show kubelet.service ExecMainStartTimestampMonotonic)"
  step_end
  # HA failover under a running containerd: the volume detached (umount -l) while
  # containerd serves the pod from it through its open files. No guard command restarts
  # containerd or writes under the root filesystem's directory; mounted again, `guard
  # verify --repair --force` (the pod still runs on it) restarts it once onto the volume
  # (`guard reset` after: the terminal step counts its own budget)
  step_begin failover_live
  tree() { find /var/lib/containerd -mindepth 1 -printf '%P:%s ' 2>/dev/null; }
  umount -l /var/lib/containerd; echo "ops.$st.umount.rc=$?"
  echo "ops.$st.mounted=$(findmnt -rno SOURCE /var/lib/containerd)"
  echo "ops.$st.rootfs.before=$(tree)"
  block ops.failover_live.verify /usr/bin/guard verify
  block ops.failover_live.repair /usr/bin/guard verify --repair
  block ops.failover_live.force /usr/bin/guard verify --repair --force
  systemctl start containerd-guard-hygiene.service; echo "ops.$st.hygiene.rc=$?"
  echo "ops.$st.held=$(svc containerd.service)"
  echo "ops.$st.rootfs.after=$(tree)"
  systemctl start var-lib-containerd.mount; echo "ops.$st.mount.rc=$?"
  block ops.failover_live.repaired /usr/bin/guard verify --repair --force
  # (its look after the restart may find CRI still initialising: the next verify passes)
  until_ok 60 /usr/bin/guard verify; echo "ops.$st.usable=$?"
  until_ok 60 both_active; echo "ops.$st.active=$?"
  block ops.failover_live.reset /usr/bin/guard reset
  step_end
  # HA failover: the volume goes while containerd is stopped; a start is refused and
  # never runs containerd on the root filesystem; the volume back, containerd comes back
  # by its own Restart=; kubelet never stops
  step_begin failover
  systemctl stop containerd; echo "ops.$st.stop.rc=$?"
  if umount /var/lib/containerd 2>/run/vm-tests/umount.err; then echo "ops.$st.umount=plain"
  else echo "ops.$st.umount=lazy ($(tr '\n' ' ' </run/vm-tests/umount.err))"; umount -l /var/lib/containerd; fi
  echo "ops.$st.mounted=$(findmnt -rno SOURCE /var/lib/containerd)"
  echo "ops.$st.rootfs.before=$(find /var/lib/containerd -mindepth 1 -maxdepth 1 -printf '%f ')"
  echo "ops.$st.mainstart.before=$(show containerd.service ExecMainStartTimestampMonotonic)"
  local fails0 ts; fails0=$(journalctl -b -o cat _PID=1 UNIT=containerd.service | grep -c 'Control process exited')
  ts=$(now)
  systemctl start --no-block containerd; echo "ops.$st.start.rc=$?"
  refused() { [ "$(journalctl -b -o cat _PID=1 UNIT=containerd.service | grep -c 'Control process exited')" -gt "$fails0" ]; }
  until_ok 60 refused; echo "ops.$st.refused.rc=$?"
  echo "ops.$st.refused.secs=$(awk -v a="$ts" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')"
  echo "ops.$st.held=$(svc containerd.service) $(show containerd.service SubState) $(show containerd.service Result)"
  echo "ops.$st.mainstart.held=$(show containerd.service ExecMainStartTimestampMonotonic)"
  echo "ops.$st.procs=$(pgrep -x containerd | tr '\n' ' ')"
  echo "ops.$st.rootfs.after=$(find /var/lib/containerd -mindepth 1 -maxdepth 1 -printf '%f ')"
  echo "ops.$st.status=$(show containerd.service StatusText)"
  block ops.failover.guard.status /usr/bin/guard status
  blockf ops.failover.refusal synced guard_lines containerd.service "$cur"
  local cur2; cur2=$(cursor)
  systemctl start var-lib-containerd.mount; echo "ops.$st.mount.rc=$?"
  until_ok 90 active_new containerd.service 0; echo "ops.$st.back=$?"
  echo "ops.$st.back.how=$(show containerd.service NRestarts) restarts; $(sys_lines containerd.service "$cur2" | grep -m1 -E 'Scheduled restart job|Starting' )"
  echo "ops.$st.mounted.after=$(findmnt -rno SOURCE,LABEL /var/lib/containerd)"
  step_end
  # opt-out: both drop-ins masked, daemon-reload: untouched; a restart of containerd then
  # runs no guard at all; then unmasked again
  act optout-mask sh -c 'mkdir -p /etc/systemd/system/containerd.service.d /etc/systemd/system/kubelet.service.d &&
    ln -s /dev/null /etc/systemd/system/containerd.service.d/10-containerd-guard.conf &&
    ln -s /dev/null /etc/systemd/system/kubelet.service.d/10-containerd-guard.conf && systemctl daemon-reload'
  echo "ops.optout.execstartpre=$(show containerd.service ExecStartPre | tr '\n' ' ')"
  step_begin optout-restart
  systemctl restart containerd; echo "ops.$st.rc=$?"
  until_ok 60 active_new containerd.service "$cpid"; echo "ops.$st.back=$?"
  step_end
  act optout-unmask sh -c 'rm /etc/systemd/system/containerd.service.d/10-containerd-guard.conf /etc/systemd/system/kubelet.service.d/10-containerd-guard.conf && systemctl daemon-reload'
  echo "ops.unmasked.execstartpre=$(show containerd.service ExecStartPre | tr '\n' ' ')"
  echo "ops.end=$(svc containerd.service) $(svc kubelet.service)"
  terminal_step
  block ops.timer.journal journalctl -q -b -o short-monotonic --no-hostname -u containerd-guard-hygiene.timer -u containerd-guard-hygiene.service
}

# The terminal state, ops' last step (the steps above are judged on what they left; this
# one ends with the node usable again). containerd stops answering after every start (a
# runtime drop-in stops it once it is ready; the running one is stopped too) and the
# restart budget is one: kubelet's restart makes its pre-start restart containerd once,
# which does not help, and go terminal (exit 4). kubelet's own Restart= (RestartSec=2)
# runs the pre-start again: each must end at once, touching nothing. Then `guard verify`
# (exit 4), the cause fixed, `guard reset` and `systemctl restart kubelet`. The first
# restart is --no-block: the step waits on systemd's own lines of the pre-starts' exits.
terminal_step() {
  local frag=/run/containerd-guard/config.d/90-vm-tests-terminal.toml
  local hang=/run/systemd/system/containerd.service.d/90-vm-tests-hang.conf t1 t2
  exits4() { [ "$(sys_lines kubelet.service "$cur" | grep -c 'Control process exited, code=exited, status=4/')" -ge "$1" ]; }
  step_begin terminal
  printf '# vm-tests ops: the terminal step\n[remediation]\nrestart_budget = 1\n[containerd]\nwait = "2s"\n' >"$frag"
  mkdir -p "${hang%/*}"
  # shellcheck disable=SC2016 # systemd expands $MAINPID
  printf '[Service]\nExecStartPost=/bin/kill -STOP $MAINPID\n' >"$hang"
  systemctl daemon-reload
  kill -STOP "$cpid"
  systemctl restart --no-block kubelet; echo "ops.$st.rc=$?"
  until_ok 120 exits4 1; echo "ops.$st.spent.rc=$?"
  t1=$(cursor)
  echo "ops.$st.spent=$(snap)"
  blockf ops.terminal.first synced guard_lines kubelet.service "$cur"
  # (while kubelet's Restart= waits to run its pre-start again)
  block ops.terminal.verify /usr/bin/guard verify
  until_ok 60 exits4 3; echo "ops.$st.retried=$?"
  echo "ops.$st.retries=$(snap)"
  systemctl stop kubelet
  blockf ops.terminal.ksys sys_lines kubelet.service "$cur"
  blockf ops.terminal.csys sys_lines containerd.service "$t1"
  blockf ops.terminal.again synced guard_lines kubelet.service "$t1"
  # the cause fixed: the drop-in and the fragment gone, the hung containerd let go on
  rm -f "$hang" "$frag"; systemctl daemon-reload
  kill -CONT "$(show containerd.service MainPID)"
  until_ok 30 answers; echo "ops.$st.answers=$?"
  t2=$(cursor)
  block ops.terminal.reset /usr/bin/guard reset
  timeout 300 systemctl restart kubelet; echo "ops.$st.recover.rc=$?"
  blockf ops.terminal.recover synced guard_lines kubelet.service "$t2"
  step_end
}

# ------------------------------------------------------------------ readme-recovery
# containerd and kubelet held (the volume's mount not started at boot); then the README's
# recovery block, extracted from the README shipped in the image, run line by line.
readme_recovery() {
  local line n=0 t0 u
  failures() { journalctl -b -o cat _PID=1 UNIT=containerd.service | grep -c 'Control process exited'; }
  held() { [ "$(failures)" -ge 1 ]; }
  until_ok 240 held; echo "held.rc=$?"
  echo "held.at=$(now)"
  echo "held.containerd.prestart_failures=$(failures)"
  for u in containerd.service kubelet.service; do
    systemctl show "$u" -p ActiveState,SubState,Result,ExecMainStartTimestampMonotonic,StatusText,NRestarts | sed "s/^/held.unit.$u./"
  done
  echo "held.volume.ok=$(cat /run/containerd-guard/volume.ok 2>/dev/null)"
  block held.guard.status /usr/bin/guard status
  echo "boot_id.before=$(cat /proc/sys/kernel/random/boot_id)"
  # the block after the marker, between its ```sh fence and the closing one
  awk '/^<!-- vm-tests: readme-recovery -->$/ {m=1; next} m && /^```sh$/ {b=1; next} b && /^```$/ {exit} b {print}' \
    /usr/lib/vm-tests/README.md > /run/vm-tests/recover.sh
  block recover.block cat /run/vm-tests/recover.sh
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    n=$((n + 1)); t0=$(now)
    echo "recover.$n.line=$line"
    timeout 300 bash -c "$line" 2>&1 | sed "s/^/recover.$n.out| /"; echo "recover.$n.rc=${PIPESTATUS[0]}"
    echo "recover.$n.secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')"
  done </run/vm-tests/recover.sh
  echo "recover.lines=$n"
  echo "boot_id.after=$(cat /proc/sys/kernel/random/boot_id)"
  # kubelet back with its pod: the stand-in ran it
  kubelet_pod() { [ "$(show kubelet.service ActiveState)" = active ] && grep -qx 'result=ok' /run/vm-tests/kubelet.result; }
  until_ok 180 kubelet_pod; echo "kubelet.pod.rc=$?"
  block recover.verify /usr/bin/guard verify
}

# restore: the boot restored the sandbox image; now it is removed while the node runs (as
# kubelet's image GC or `crictl rmi` removes it) and the hygiene timer, shortened by the
# generator's drop-in, brings it back on its own: nothing here starts the service.
restore() {
  image_there() { timeout 10 ctr -n k8s.io images ls -q 2>/dev/null | grep -qx "$pause"; }
  block restore.rm ctr -n k8s.io images rm "$pause"
  echo "restore.removed_at=$(now)"
  block restore.verify_gone /usr/bin/guard verify
  # back means both: the image is listed and the hygiene run logged its remedy. The
  # import lands before the run writes its findings to the journal, so the image alone
  # can be seen a few hundred ms before the line that says who brought it back.
  restorer() {
    journalctl -b -o cat _SYSTEMD_UNIT=containerd-guard-hygiene.service SYSLOG_IDENTIFIER=containerd-guard \
      GUARD_FINDING=remedy.restore-image 2>/dev/null | tail -n 1
  }
  restored() { image_there && [ -n "$(restorer)" ]; }
  until_ok 150 restored; echo "restore.back.rc=$?"
  echo "restore.back_at=$(now)"
  echo "restore.by_hygiene=$(restorer)"
  block restore.timer systemctl list-timers --all --no-pager containerd-guard-hygiene.timer
  block restore.hygiene journalctl -b -o short-monotonic --no-pager -u containerd-guard-hygiene.service
  block restore.labels ctr -n k8s.io images ls "name==$pause"
  block restore.pod /usr/lib/vm-tests/run-pod-sandbox "$sock"
  block restore.status /usr/bin/guard status
}

case $phase in
  standin)
    standin ;;
  incident)
    {
      echo "scenario.started=$(now)"
      case $scenario in
        k3s) k3s ;;
        leaked-task) leaked_task ;;
        package) package ;;
        package-after) package_after ;;
        ops) ops ;;
        readme-recovery) readme_recovery ;;
        restore) restore ;;
        *) echo "error=no incident for scenario '$scenario'" ;;
      esac
      echo "scenario.done=$(now)"
    } >"$out" 2>&1 ;;
  *) echo "usage: scenario.sh standin|incident" >&2; exit 2 ;;
esac
