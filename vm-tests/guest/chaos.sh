#!/bin/bash
# vm-tests chaos boots, guest side (`vm-tests/run chaos N [SEED]`). Facts only: the host
# judges. Every RunPodSandbox attempt is one line of /run/vm-tests/attempts.log with its
# result, its timestamps (uptime) and containerd's view before and after it, taken
# outside the guard:
#   pid=   containerd's main pid (0: not running)
#   db=    the device (major:minor) of the metadata database containerd holds open, that
#          is the filesystem containerd's root really lives on (a containerd started before
#          the mount keeps the root filesystem's copy open)
#   vol=   the device mounted at /var/lib/containerd now, label= its filesystem label
#   img=   yes|no: containerd lists the sandbox image; ?: containerd did not answer
# Usage:
#   chaos.sh standin once|loop   one life of the kubelet stand-in (kubelet.service)
#                                once: retry until a pod runs, at most 5 attempts
#                                loop: one attempt per life; systemd restarts it
#                                (Restart=always); exit 75 ends the loop after 20 lives
#   chaos.sh kill SECS           SIGKILL containerd's main process at uptime SECS, then
#                                wait (bounded) for systemd to bring it back
#   chaos.sh probe               the report's own last attempt, once the boot settled
set -u
log=/run/vm-tests/attempts.log
sock=/run/containerd/containerd.sock
pause=localhost:5000/vmware.io/pause:3.4.1
mkdir -p /run/vm-tests

now() { cut -d' ' -f1 /proc/uptime; }
up() { cut -d. -f1 /proc/uptime; }   # whole seconds
mainpid() { systemctl show -p MainPID --value containerd.service 2>/dev/null || echo 0; }

# the device of the bolt database containerd PID holds open (empty: none)
db_dev() {
  local fd
  for fd in /proc/"$1"/fd/*; do
    case $(readlink "$fd" 2>/dev/null) in
      */io.containerd.metadata.v1.bolt/meta.db) stat -L -c '%Hd:%Ld' "$fd" 2>/dev/null; return ;;
    esac
  done
}
image_seen() {
  local list
  list=$(timeout 10 ctr --timeout 5s -n k8s.io images ls -q 2>/dev/null) || { echo '?'; return; }
  if grep -qxF "$pause" <<<"$list"; then echo yes; else echo no; fi
}
view() {
  local pid db='' vol label img='?'
  pid=$(mainpid)
  if [ "${pid:-0}" != 0 ]; then db=$(db_dev "$pid"); img=$(image_seen); fi
  read -r vol label < <(findmnt -rn -o MAJ:MIN,LABEL --mountpoint /var/lib/containerd 2>/dev/null | tail -n 1)
  echo "pid=${pid:-0},db=$db,vol=${vol:-},label=${label:-},img=$img"
}

attempt() { # WHO: one RunPodSandbox (then status, then removal), logged
  local t0 before out rc t1 after result err
  t0=$(now); before=$(view)
  out=$(timeout 90 /usr/lib/vm-tests/run-pod-sandbox "$sock" 2>&1); rc=$?
  t1=$(now); after=$(view)
  result=$(sed -n 's/^result=//p' <<<"$out" | tail -n 1)
  err=$(sed -n 's/^error=//p' <<<"$out" | tr '\n' ' ' | cut -c1-200)
  echo "attempt who=$1 t0=$t0 t1=$t1 rc=$rc result=${result:-fail} before=$before after=$after error=$err" >>"$log"
  [ "$result" = ok ]
}

standin() {
  case $1 in
    once)
      local i
      for i in 1 2 3 4 5; do
        attempt "standin-once#$i" && return 0
        [ $i = 5 ] || sleep 3   # kubelet's own retry pace, not a synchronisation
      done
      return 1 ;;
    loop)
      local n; n=$(( $(cat /run/vm-tests/standin.lives 2>/dev/null || echo 0) + 1 ))
      echo $n >/run/vm-tests/standin.lives
      [ $n -le 20 ] || exit 75
      attempt "standin-loop#$n" ;;
    *) echo "usage: chaos.sh standin once|loop" >&2; return 2 ;;
  esac
}

kill_at() { # SECS
  local pid back='' end
  while [ "$(up)" -lt "$1" ]; do sleep 0.2; done   # bounded: SECS is at most 90
  pid=$(mainpid)
  echo "at=$(now)"
  echo "state=$(systemctl is-active containerd.service)"
  echo "pid=$pid"
  [ "${pid:-0}" != 0 ] || { echo "sent=no"; return 0; }
  kill -9 "$pid" && echo "sent=yes"
  # systemd restarts it (Restart=always, RestartSec=5): wait for a new one that answers
  end=$(( $(up) + 40 ))
  while [ "$(up)" -lt $end ]; do
    local p; p=$(mainpid)
    if [ "${p:-0}" != 0 ] && [ "$p" != "$pid" ] && timeout 5 ctr version >/dev/null 2>&1; then back=$(now); break; fi
    sleep 0.5
  done
  echo "back=${back:-no}"
}

case ${1:-} in
  standin) standin "${2:-}" ;;
  kill) kill_at "${2:?SECS}" >/run/vm-tests/kill.txt 2>&1 ;;
  probe) attempt report ;;
  *) echo "usage: chaos.sh standin once|loop | kill SECS | probe" >&2; exit 2 ;;
esac
